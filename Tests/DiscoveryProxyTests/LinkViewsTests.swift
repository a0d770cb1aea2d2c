import DNSWire
import Logging
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// Per-link client views (`Link.clients`): which client networks may see which links, on top
/// of the client ACL. Refused clients get REFUSED; domain enumeration lists only the zones a
/// client may see; DNS Push subscriptions obey the same views.
@Suite("Per-link client views")
struct LinkViewsTests {
    let staff: [UInt8] = [192, 0, 2, 9]
    let guest: [UInt8] = [203, 0, 113, 9]

    /// lab2.example. (eth2) is for the staff network only.
    func harness() -> Harness {
        Harness { $0.links[1].clients = [IPPrefix("192.0.2.0/24")!] }
    }

    func ask(_ h: Harness, _ name: String, _ type: RRType, from client: [UInt8]) -> Message? {
        let reply = Harness.Reply()
        let query = Message(id: 7, questions: [Question(name: try! DNSName(name), type: type)])
        h.proxy.handle(query: try! query.encode(), from: .test(client)) { reply.set($0) }
        return reply.message
    }

    @Test("a client outside the link's prefixes is refused every name of its zones, and counted")
    func refused() {
        let h = harness()
        #expect(ask(h, "lab2.example.", .soa, from: guest)?.rcode == .refused)
        #expect(ask(h, "_ipp._tcp.lab2.example.", .ptr, from: guest)?.rcode == .refused)
        #expect(ask(h, "8.100.51.198.in-addr.arpa.", .ptr, from: guest)?.rcode == .refused, "its reverse zone too")
        #expect(h.backend.started.isEmpty, "never asked of mDNS")
        #expect(ask(h, "lab2.example.", .soa, from: staff)?.answers.count == 1)
        #expect(ask(h, "lab1.example.", .soa, from: guest)?.answers.count == 1, "other links stay visible")
        #expect(h.proxy.stats.refused == 3)
    }

    @Test("b/lb domain enumeration lists only the zones the client may see")
    func enumeration() throws {
        let h = harness()
        func targets(from client: [UInt8]) -> [String] {
            (ask(h, "b._dns-sd._udp.lab1.example.", .ptr, from: client)?.answers ?? []).compactMap {
                if case .ptr(let target) = $0.rdata { return "\(target)" }
                return nil
            }
        }
        #expect(targets(from: staff) == ["lab1.example.", "lab2.example."])
        #expect(targets(from: guest) == ["lab1.example."])
        let reverse = ask(h, "b._dns-sd._udp.0.2.0.192.in-addr.arpa.", .ptr, from: guest)?.answers ?? []
        #expect(reverse.count == 1)
    }

    @Test("DNS Push: a SUBSCRIBE in a zone the client may not see is REFUSED")
    func push() throws {
        let h = harness()
        let subscribe = PushSubscribe(name: try DNSName("_ipp._tcp.lab2.example."), type: .ptr)
        let sink = NullSink()
        guard case .refused = h.proxy.subscribe(subscribe, session: 1, id: 1, from: .test(guest), sink: sink) else {
            Issue.record("not refused")
            return
        }
        guard case .subscribed = h.proxy.subscribe(subscribe, session: 1, id: 2, from: .test(staff), sink: sink) else {
            Issue.record("not subscribed")
            return
        }
    }

    final class NullSink: PushSink {
        func deliver(_ changes: [PushChange], subscription: UInt16) {}
    }
}
