import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Testing

/// `maxBrowses`: a flood of invented names cannot grow the browse table (and the avahi
/// objects behind it) past the cap; the least recently used idle browse makes room.
@Suite("Browse limit")
struct BrowseLimitTests {
    func flooded(max: Int) -> Harness {
        Harness {
            $0.maxBrowses = max
            $0.mdnsQueryBurst = 1000
            $0.mdnsQueriesPerSecond = 1000
        }
    }

    @Test("at the cap the least recently used idle browse is released for a new one")
    func evictsLeastRecentlyUsed() throws {
        let h = flooded(max: 3)
        for index in 0..<3 { h.ask("n\(index).lab1.example.", .a) }
        h.clock.advance(by: .seconds(7))  // every waiter answered (negative timeout): all idle
        h.ask("n1.lab1.example.", .a)
        h.clock.advance(by: .seconds(1))
        h.ask("n2.lab1.example.", .a)  // n0 is now the least recently used
        h.clock.advance(by: .seconds(29))  // n0 idle 37 s, n1 30 s, n2 29 s
        h.ask("new.lab1.example.", .a)
        #expect(h.proxy.stats.activeBrowses == 3)
        #expect(h.proxy.stats.browsesEvicted == 1)
        #expect(h.backend.live.count == 3, "the evicted browse's avahi object is freed")
        #expect(!h.backend.live.contains { $0.name == (try! DNSName("n0.local.")) })
    }

    @Test("a browse in use (asked within 30 s) is never evicted for a new name")
    func keepsBrowsesInUse() throws {
        let h = flooded(max: 2)
        h.ask("a.lab1.example.", .a)
        h.ask("b.lab1.example.", .a)
        h.clock.advance(by: .seconds(20))
        let reply = h.ask("c.lab1.example.", .a)
        #expect(try #require(reply.message).rcode == .servFail)
        #expect(h.proxy.stats.browsesEvicted == 0)
    }

    @Test("when every browse has waiters a new name gets SERVFAIL at once")
    func allBusyServFail() throws {
        let h = flooded(max: 2)
        h.ask("a.lab1.example.", .a)
        h.ask("b.lab1.example.", .a)
        let reply = h.ask("c.lab1.example.", .a)
        let message = try #require(reply.message)
        #expect(message.rcode == .servFail)
        #expect(h.proxy.stats.activeBrowses == 2)
        #expect(h.backend.started.count == 2)
    }

    @Test("a browse with DNS Push subscribers (or the gateway's) is never evicted, however idle its query")
    func keepsSubscribedBrowses() throws {
        let h = flooded(max: 2)
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let session = service.openSession(client: .test(tcp: true), transport: FakeTransport())
        session.receive(
            DSOMessage(id: 1, tlvs: [PushSubscribe(name: try DNSName("watched.lab1.example."), type: .a).tlv]).encode())
        h.ask("idle.lab1.example.", .a)
        h.clock.advance(by: .seconds(40))  // both browses idle past BrowseLimit.minimumIdle
        h.ask("new1.lab1.example.", .a)  // takes the unsubscribed browse's place
        #expect(h.proxy.stats.browsesEvicted == 1)
        #expect(
            h.backend.live.contains { $0.name == (try! DNSName("watched.local.")) },
            "the subscription is still followed")
        let message = try #require(h.ask("new2.lab1.example.", .a).message)
        #expect(message.rcode == .servFail, "nothing may make room: a retryable SERVFAIL")
        #expect(h.proxy.stats.browsesEvicted == 1)
        withExtendedLifetime(session) {}
    }

    @Test("10 000 unique names stay within the cap")
    func floodStaysBounded() {
        let h = flooded(max: 64)
        for index in 0..<10_000 {
            h.ask("flood\(index).lab1.example.", .a)
            if index % 100 == 99 { h.clock.advance(by: .seconds(31)) }
        }
        #expect(h.proxy.stats.activeBrowses <= 64)
        #expect(h.backend.live.count <= 64)
    }
}
