import DNSWire
import ProxyTestSupport
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// RFC 8766 §5.3: a link may have a rich-text zone for DNS-SD names and an LDH zone for host
/// names. Host names (owners of A/AAAA, SRV targets, reverse-lookup targets) are shown in the
/// LDH zone; instance and service names stay in the rich-text zone.
@Suite("Host-name zone (RFC 8766 §5.3)")
struct HostZoneTests {
    static let hostZone = try! DNSName("hosts.lab1.example.")
    let instance = try! DNSName("My Printer._ipp._tcp.local.")

    func harness() -> Harness {
        Harness { config in
            config.links[0].zone = try! DNSName("Building 1.example.")
            config.links[0].hostZone = Self.hostZone
        }
    }

    func plan(_ h: Harness, _ name: String, _ type: RRType) -> QueryPlan {
        h.proxy.catalog.plan(Question(name: try! DNSName(name), type: type))
    }

    @Test("the host zone has its apex, and holds only host names' addresses")
    func catalog() throws {
        let h = harness()
        guard case .immediate(let zone, let soa) = plan(h, "hosts.lab1.example.", .soa) else {
            Issue.record("expected the apex SOA")
            return
        }
        #expect(zone == Self.hostZone && soa.first?.type == .soa)
        guard case .mdns(let a) = plan(h, "prnt.hosts.lab1.example.", .a) else {
            Issue.record("expected an mDNS plan for a host's address")
            return
        }
        #expect(a.localName == (try DNSName("prnt.local.")) && a.zone == Self.hostZone && a.link.interface == "eth1")
        #expect(plan(h, "prnt.hosts.lab1.example.", .srv) == .immediate(zone: Self.hostZone, answers: []))
        #expect(plan(h, "_ipp._tcp.hosts.lab1.example.", .ptr) == .immediate(zone: Self.hostZone, answers: []))
        #expect(plan(h, "a.b.hosts.lab1.example.", .a) == .immediate(zone: Self.hostZone, answers: []))
        // The rich-text zone still answers host names as before.
        guard case .mdns = plan(h, "prnt.Building 1.example.", .a) else {
            Issue.record("the rich-text zone's host names still go to mDNS")
            return
        }
    }

    @Test("SRV targets and address additionals are in the host zone; instances stay rich-text")
    func presentation() throws {
        let h = harness()
        h.ask("_ipp._tcp.Building 1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.ask("My Printer._ipp._tcp.Building 1.example.", .srv)
        h.backend.add(
            "My Printer._ipp._tcp.local.", .srv,
            .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.ask("prnt.hosts.lab1.example.", .a)
        h.backend.add("prnt.local.", .a, .a([192, 0, 2, 20]))
        h.clock.advance(by: .milliseconds(100))

        let ptr = try #require(h.ask("_ipp._tcp.Building 1.example.", .ptr).message)
        #expect(ptr.answers.map(\.rdata) == [.ptr(try DNSName("My Printer._ipp._tcp.Building 1.example."))])
        let srv = try #require(h.ask("My Printer._ipp._tcp.Building 1.example.", .srv).message)
        #expect(
            srv.answers.map(\.rdata) == [
                .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.hosts.lab1.example."))
            ])
        #expect(srv.additional.map(\.name) == [try DNSName("prnt.hosts.lab1.example.")])
        let a = try #require(h.ask("prnt.hosts.lab1.example.", .a).message)
        #expect(a.answers.map(\.rdata) == [.a([192, 0, 2, 20])])
        #expect(a.answers.first?.name == (try DNSName("prnt.hosts.lab1.example.")))
    }

    @Test("a reverse lookup's target is in the host zone (§5.4, §5.5)")
    func reverse() throws {
        let h = harness()
        let reply = h.ask("20.2.0.192.in-addr.arpa.", .ptr)
        h.backend.add("20.2.0.192.in-addr.arpa.", .ptr, .ptr(try DNSName("prnt.local.")))
        h.clock.advance(by: .milliseconds(100))
        #expect(reply.message?.answers.map(\.rdata) == [.ptr(try DNSName("prnt.hosts.lab1.example."))])
    }

    @Test("host names are one label under .local; DNS-SD names are not")
    func hostNames() throws {
        #expect(NameMapping.isHostName(try DNSName("prnt.local.")))
        #expect(!NameMapping.isHostName(try DNSName("x._ipp._tcp.local.")))
        #expect(!NameMapping.isHostName(try DNSName("_services.local.")))
        #expect(
            NameMapping.toZone(try DNSName("_ipp._tcp.local."), zone: try DNSName("z."), hostZone: Self.hostZone)
                == (try DNSName("_ipp._tcp.z.")))
    }
}
