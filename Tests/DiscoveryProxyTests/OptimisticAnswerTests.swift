import DNSWire
@_spi(Testing) import DiscoveryProxy
import MDNS
import ProxyTestSupport
import Testing

@Suite("Optimistic answers from recently released browses")
struct OptimisticAnswerTests {
    let printer = try! DNSName("x._ipp._tcp.local.")

    /// A browse that found `printer`, then went idle and was released.
    func releasedHarness(_ adjust: @escaping (inout ProxyConfiguration) -> Void = { _ in }) -> Harness {
        let h = Harness {
            $0.browseIdleTimeout = .seconds(20)
            adjust(&$0)
        }
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        h.clock.advance(by: .seconds(40))
        #expect(h.backend.live.isEmpty, "released")
        return h
    }

    @Test("answered at once from the last results with a short TTL, while a fresh browse starts")
    func servesStaleAndRefreshes() throws {
        let h = releasedHarness()
        let reply = h.ask("_ipp._tcp.lab1.example.", .ptr)
        let message = try #require(reply.message)
        #expect(message.answers.count == 1)
        #expect(message.answers.allSatisfy { $0.ttl <= 2 })
        #expect(h.backend.started.count == 2, "a fresh browse runs in the background")
        #expect(h.proxy.stats.optimisticAnswers == 1)
        // The fresh browse reports the current state: the next answer is current.
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("y._ipp._tcp.local.")))
        let next = try #require(h.ask("_ipp._tcp.lab1.example.", .ptr).message)
        #expect(next.answers.map(\.rdata) == [.ptr(try DNSName("y._ipp._tcp.lab1.example."))])
        #expect(next.answers.allSatisfy { $0.ttl == 10 })
    }

    @Test("results older than the maximum staleness are not used")
    func tooStale() throws {
        let h = releasedHarness { $0.optimisticMaxStaleness = .seconds(30) }
        h.clock.advance(by: .seconds(60))
        let reply = h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(!reply.isAnswered, "an ordinary miss: waits for mDNS")
        #expect(h.proxy.stats.optimisticAnswers == 0)
    }

    @Test("can be turned off")
    func disabled() throws {
        let h = releasedHarness { $0.optimisticAnswers = false }
        #expect(!h.ask("_ipp._tcp.lab1.example.", .ptr).isAnswered)
    }
}
