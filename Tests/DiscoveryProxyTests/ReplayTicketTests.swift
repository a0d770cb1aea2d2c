import DNSWire
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The proxy's side of the replay fast path: which answers carry a `ReplayTicket`, and which
/// changes retire them.
@Suite("Replay tickets")
struct ReplayTicketTests {
    let printer = try! DNSName("x._ipp._tcp.local.")

    func ask(_ h: Harness, _ name: String, _ type: RRType, client: [UInt8] = [127, 0, 0, 1]) -> ProxyReplies {
        let replies = ProxyReplies()
        let query = Message(
            id: 7, questions: [Question(name: try! DNSName(name), type: type)], edns: EDNS(udpPayloadSize: 1232))
        h.proxy.handle(query: try! query.encode(), from: .test(client)) { replies.add($0) }
        return replies
    }

    func warmed() -> Harness { Harness.warmed(with: printer) }

    @Test("a cache hit carries a ticket that stays current while nothing changes")
    func hitHasTicket() throws {
        let h = warmed()
        let ticket = try #require(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay)
        #expect(h.proxy.isCurrent(ticket))
        h.ask("_other._tcp.lab1.example.", .ptr)  // a new browse with no records changes no answer
        #expect(h.proxy.isCurrent(ticket))
    }

    @Test("a miss, an optimistic answer or a SERVFAIL carries none")
    func missHasNone() throws {
        let h = Harness()
        let miss = ask(h, "_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        h.clock.advance(by: .seconds(1))
        let reply = try #require(miss.last)
        #expect(reply.bytes != nil)
        #expect(reply.replay == nil)
    }

    @Test("immediate and refused answers carry one")
    func immediateHasTicket() throws {
        let h = Harness()
        #expect(ask(h, "lab1.example.", .soa).last?.replay != nil)
        #expect(ask(h, "www.example.org.", .a).last?.replay != nil)
    }

    @Test("refusals by the client ACL or a link view carry none: each is counted and logged")
    func trustRefusalsHaveNone() throws {
        let h = Harness {
            $0.allowedClients = [IPPrefix("192.0.2.0/24")!]
            $0.links[1].clients = [IPPrefix("192.0.2.0/25")!]
        }
        let outsider = ask(h, "lab1.example.", .soa, client: [198, 51, 100, 1]).last
        #expect(outsider?.bytes != nil && outsider?.replay == nil)
        let hidden = ask(h, "lab2.example.", .soa, client: [192, 0, 2, 200]).last
        #expect(hidden?.bytes != nil && hidden?.replay == nil)
    }

    @Test(
        "records added or removed, a release and a reload retire tickets",
        arguments: ["add", "remove", "release", "reload"])
    func changesRetire(change: String) throws {
        let h = warmed()
        let ticket = try #require(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay)
        switch change {
        case "add": h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("y._ipp._tcp.local.")))
        case "remove": h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(printer))
        case "release": h.clock.advance(by: .seconds(400))
        default: h.proxy.reconfigure(h.proxy.catalog.configuration)
        }
        #expect(!h.proxy.isCurrent(ticket))
        #expect(ask(h, "lab1.example.", .soa).last?.replay.map(h.proxy.isCurrent) == true, "new tickets are current")
    }

    @Test("tickets carry counters found once per label set, not per answer")
    func countersShared() throws {
        let h = warmed()
        let first = try #require(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay)
        let again = try #require(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay)
        let soa = try #require(ask(h, "lab1.example.", .soa).last?.replay)
        #expect(first.counters === again.counters)
        #expect(first.kind == .hit)
        #expect(soa.counters !== first.counters, "another qtype and kind, other counters")
        #expect(soa.kind == .immediate)
    }

    @Test("replays are counted like the answers they repeat")
    func replaysCounted() throws {
        let h = warmed()
        let ticket = try #require(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay)
        let before = h.proxy.stats
        h.proxy.replayed(ticket, count: 5)
        #expect(h.proxy.stats.queries == before.queries + 5)
        #expect(h.proxy.stats.cacheHits == before.cacheHits + 5)
    }
}

@Suite("Type ANY (RFC 8482)")
struct AnyQueryTests {
    @Test("an ANY query gets what live browses hold for the name, without a multicast ANY")
    func fromLiveBrowses() throws {
        let h = Harness()
        let instance = "x._ipp._tcp.lab1.example."
        h.ask(instance, .txt)
        h.backend.add("x._ipp._tcp.local.", .txt, .txt([4] + Array("rp=1".utf8)))
        h.clock.advance(by: .seconds(1))
        let started = h.backend.started.count
        let message = try #require(h.ask(instance, .any).message)
        #expect(message.rcode == .noError)
        #expect(message.answers.map(\.type) == [.txt])
        #expect(h.backend.started.count == started, "no ANY browse")
    }

    @Test("with nothing known, the synthesized HINFO of RFC 8482 §4.2")
    func hinfoWhenUnknown() throws {
        let h = Harness()
        let message = try #require(h.ask("nothing._ipp._tcp.lab1.example.", .any).message)
        #expect(message.rcode == .noError)
        #expect(message.answers.count == 1)
        #expect(message.answers.first?.type == .hinfo)
        #expect(message.answers.first?.ttl == 10)
        #expect(h.backend.started.isEmpty)
    }
}
