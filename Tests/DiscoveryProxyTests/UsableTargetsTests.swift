import DNSWire
import ProxyTestSupport
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// RFC 8766 §5.5.2: SRV records whose target has no address usable by the client, and the
/// browse PTR records pointing to them, are left out, where the proxy knows the target's
/// addresses.
@Suite("Unusable SRV targets (RFC 8766 §5.5.2)")
struct UsableTargetsTests {
    let instance = try! DNSName("x._ipp._tcp.local.")

    /// `x._ipp._tcp` on host `prnt` with `v4`/`v6` addresses; the A and AAAA browses of the
    /// host have had results (a client resolved it) unless `settled` is false.
    func harness(v4: [UInt8]?, v6: String?, suppress: Bool = true) throws -> Harness {
        let h = Harness { $0.suppressLinkLocal = suppress }
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.ask("x._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.ask("x._ipp._tcp.lab1.example.", .txt)
        h.backend.add("x._ipp._tcp.local.", .txt, .txt([3, 0x61, 0x3D, 0x62]))
        h.ask("prnt.lab1.example.", .a)
        if let v4 { h.backend.add("prnt.local.", .a, .a(v4)) }
        h.ask("prnt.lab1.example.", .aaaa)
        if let v6 { h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress(v6)!)) }
        h.clock.advance(by: .milliseconds(100))
        return h
    }

    @Test("a host with only link-local addresses: its SRV and the PTR to it are left out")
    func linkLocalOnly() throws {
        let h = try harness(v4: [169, 254, 8, 8], v6: "fe80::88")
        let srv = try #require(h.ask("x._ipp._tcp.lab1.example.", .srv).message)
        #expect(srv.answers.isEmpty && srv.authority.first?.type == .soa, "NODATA")
        let ptr = try #require(h.ask("_ipp._tcp.lab1.example.", .ptr).message)
        #expect(ptr.answers.isEmpty)
        #expect(ptr.additional.isEmpty, "nor its SRV, TXT or addresses as additionals")
        #expect(h.ask("x._ipp._tcp.lab1.example.", .txt).message?.answers.count == 1, "TXT asked by name stays")
    }

    @Test("one usable address keeps it; suppression off keeps it")
    func usable() throws {
        let mixed = try harness(v4: [169, 254, 8, 8], v6: "2001:db8:1::88")
        #expect(mixed.ask("x._ipp._tcp.lab1.example.", .srv).message?.answers.count == 1)
        #expect(mixed.ask("_ipp._tcp.lab1.example.", .ptr).message?.answers.count == 1)
        let off = try harness(v4: [169, 254, 8, 8], v6: "fe80::88", suppress: false)
        #expect(off.ask("x._ipp._tcp.lab1.example.", .srv).message?.answers.count == 1)
        #expect(off.ask("_ipp._tcp.lab1.example.", .ptr).message?.answers.count == 1)
    }

    @Test("what the proxy does not know hides nothing: no address yet, or a family not settled")
    func unknownIsShown() throws {
        // No AAAA browse result yet and the mDNS window not over: IPv6 may still come.
        let h = try harness(v4: [169, 254, 8, 8], v6: nil)
        #expect(h.ask("x._ipp._tcp.lab1.example.", .srv).message?.answers.count == 1)
        // After the window, the host's only known address is link-local: left out.
        h.clock.advance(by: .seconds(7))
        _ = h.ask("prnt.lab1.example.", .a)
        _ = h.ask("prnt.lab1.example.", .aaaa)
        #expect(h.ask("x._ipp._tcp.lab1.example.", .srv).message?.answers.isEmpty == true)
        // Both families settled with no address at all: nothing known is unusable, shown.
        let none = try harness(v4: nil, v6: nil)
        none.clock.advance(by: .seconds(7))
        _ = none.ask("prnt.lab1.example.", .a)
        _ = none.ask("prnt.lab1.example.", .aaaa)
        #expect(none.ask("x._ipp._tcp.lab1.example.", .srv).message?.answers.count == 1)
    }

    @Test("private addresses of another realm count as unusable too")
    func privateRealm() throws {
        let h = Harness { config in
            config.links[0].realm = "lab1"
            config.privateRealms = PrivateRealms([
                .init(name: "lab1", clients: [IPPrefix("192.0.2.0/24")!]),
                .init(name: "lab2", clients: [IPPrefix("198.51.100.0/24")!]),
            ])
        }
        h.ask("x._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.ask("prnt.lab1.example.", .a)
        h.backend.add("prnt.local.", .a, .a([10, 0, 0, 8]))
        h.ask("prnt.lab1.example.", .aaaa)
        h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fd00::8")!))
        h.clock.advance(by: .milliseconds(100))
        func srv(from client: [UInt8]) -> Int? {
            let reply = Harness.Reply()
            let query = Message(
                id: 3, questions: [Question(name: try! DNSName("x._ipp._tcp.lab1.example."), type: .srv)])
            h.proxy.handle(query: try! query.encode(), from: .test(client)) { reply.set($0) }
            return reply.message?.answers.count
        }
        #expect(srv(from: [198, 51, 100, 9]) == 0)
        #expect(srv(from: [192, 0, 2, 9]) == 1)
    }
}
