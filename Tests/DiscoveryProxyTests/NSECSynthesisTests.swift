import DNSWire
import Logging
import MDNS
import ProxyTestSupport
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// RFC 8766 §5.5.3: an NSEC query gets one synthesized NSEC for the queried name alone, with
/// a type bitmap of what exists there and the NSEC bit set; avahi cannot browse ANY, so the
/// types the name can hold are each asked through the shared browses.
@Suite("NSEC synthesis (RFC 8766 §5.5.3, §7)")
struct NSECSynthesisTests {
    func nsec(_ reply: Harness.Reply) throws -> (owner: DNSName, next: DNSName, types: [RRType], ttl: UInt32) {
        let message = try #require(reply.message)
        #expect(message.rcode == .noError && message.authoritative)
        let record = try #require(message.answers.first)
        #expect(message.answers.count == 1, "one NSEC, for that single name")
        guard case .nsec(let next, let types) = record.rdata else {
            Issue.record("not an NSEC: \(record.text)")
            throw CancellationError()
        }
        return (record.name, next, types, record.ttl)
    }

    @Test("an instance: SRV and TXT are asked (never ANY, never NSEC); the bitmap has what exists, plus NSEC")
    func instance() throws {
        let h = Harness()
        let reply = h.ask("x._ipp._tcp.lab1.example.", .nsec)
        #expect(!reply.isAnswered, "waits for mDNS")
        #expect(Set(h.backend.started.map(\.type)) == [.srv, .txt])
        #expect(h.backend.started.allSatisfy { $0.name == (try! DNSName("x._ipp._tcp.local.")) } == true)
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.clock.advance(by: .milliseconds(100))
        #expect(!reply.isAnswered, "the TXT part is still waiting")
        h.clock.advance(by: .seconds(1))
        let answer = try nsec(reply)
        #expect(answer.owner == (try DNSName("x._ipp._tcp.lab1.example.")))
        #expect(answer.next == (try DNSName(#"\000.x._ipp._tcp.lab1.example."#)), "covers only the owner (RFC 4470)")
        #expect(answer.types == [.srv, .nsec], "SRV found, TXT not; the NSEC bit set (unlike mDNS's)")
        #expect(answer.ttl == DiscoveryProxy.provisionalTTL, "a negative part before mDNS's 6 s is provisional")

        // Asked again: every part is a cache hit, answered at once with no new mDNS query.
        h.backend.add("x._ipp._tcp.local.", .txt, .txt([3, 0x61, 0x3D, 0x62]))
        h.clock.advance(by: .seconds(6))
        let started = h.backend.started.count
        let again = h.ask("x._ipp._tcp.lab1.example.", .nsec)
        #expect(again.isAnswered)
        let types = try nsec(again).types
        #expect(types == [.txt, .srv, .nsec], "in type order")
        #expect(try nsec(again).ttl == 10)
        #expect(h.backend.started.count == started)
    }

    @Test("a host: A and AAAA; an IPv4-only host's NSEC denies AAAA")
    func host() throws {
        let h = Harness()
        let reply = h.ask("prnt.lab1.example.", .nsec)
        #expect(Set(h.backend.started.map(\.type)) == [.a, .aaaa])
        h.backend.add("prnt.local.", .a, .a([192, 0, 2, 8]))
        h.clock.advance(by: .seconds(1))
        #expect(try nsec(reply).types == [.a, .nsec])
    }

    @Test("NSEC3: NODATA with the SOA and the same NSEC in the authority section")
    func nsec3() throws {
        let h = Harness()
        let reply = h.ask("prnt.lab1.example.", .nsec3)
        h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("2001:db8:1::8")!))
        h.clock.advance(by: .seconds(1))
        let message = try #require(reply.message)
        #expect(message.rcode == .noError && message.answers.isEmpty)
        #expect(message.authority.map(\.type) == [.soa, .nsec])
        guard case .nsec(_, let types) = message.authority.last?.rdata else {
            Issue.record("no NSEC")
            return
        }
        #expect(types == [.aaaa, .nsec])
    }

    @Test("names answered from configuration, and empty names, are answered at once with no mDNS query")
    func immediate() throws {
        let h = Harness()
        let apex = h.ask("lab1.example.", .nsec)
        #expect(try nsec(apex).types == [.ns, .soa, .nsec])
        let browse = h.ask("b._dns-sd._udp.lab1.example.", .nsec)
        #expect(try nsec(browse).types == [.ptr, .nsec])
        let update = h.ask("_dns-update._udp.lab1.example.", .nsec)
        #expect(try nsec(update).types == [.nsec])
        let proto = h.ask("_tcp.lab1.example.", .nsec)
        #expect(try nsec(proto).types == [.nsec], "an empty non-terminal holds nothing")
        let reverseApex = h.ask("2.0.192.in-addr.arpa.", .nsec)
        #expect(try nsec(reverseApex).types == [.ns, .soa, .nsec])
        let notAnAddress = h.ask("x.2.0.192.in-addr.arpa.", .nsec)
        #expect(try nsec(notAnAddress).types == [.nsec])
        #expect(h.backend.started.isEmpty)
    }

    @Test("a reverse address asks PTR, unchanged (§5.4); a service type asks PTR")
    func reverseAndServiceType() throws {
        let h = Harness()
        _ = h.ask("8.2.0.192.in-addr.arpa.", .nsec)
        _ = h.ask("_ipp._tcp.lab1.example.", .nsec)
        #expect(
            h.backend.started.map { "\($0.name) \($0.type)" } == [
                "8.2.0.192.in-addr.arpa. PTR", "_ipp._tcp.local. PTR",
            ])
    }

    @Test("a part that fails fails the whole answer: SERVFAIL, not a false denial")
    func failure() throws {
        let h = Harness()
        let reply = h.ask("prnt.lab1.example.", .nsec)
        h.backend.state = .failed
        h.clock.advance(by: .seconds(7))
        #expect(reply.message?.rcode == .servFail)
        #expect(reply.calls == 1, "answered once")
    }

    @Test("a Push SUBSCRIBE for NSEC follows nothing: Push has no negatives, and mDNS NSECs are not passed on")
    func pushSubscribe() throws {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let transport = FakeTransport()
        let session = service.openSession(client: .test(tcp: true), transport: transport)
        let subscribe = PushSubscribe(name: try DNSName("prnt.lab1.example."), type: .nsec)
        session.receive(DSOMessage(id: 4, tlvs: [subscribe.tlv]).encode())
        #expect(transport.messages.first?.rcode == .noError)
        #expect(h.backend.started.isEmpty, "no mDNS question, of type NSEC or any other")
    }
}
