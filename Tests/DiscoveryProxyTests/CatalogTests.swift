import DNSWire
@_spi(Testing) import DiscoveryProxy
import Testing

@Suite("Catalog: routing questions to zones (RFC 8766 §5, §6)")
struct CatalogTests {
    let catalog = Catalog(configuration: Harness().proxy.catalog.configuration)

    func plan(_ name: String, _ type: RRType, _ qclass: RRClass = .in) -> QueryPlan {
        catalog.plan(Question(name: try! DNSName(name), type: type, qclass: qclass))
    }

    @Test("a browse maps the zone suffix to .local on that link only (§5.1)")
    func browseMapping() throws {
        guard case .mdns(let plan) = self.plan("_ipp._tcp.lab1.example.", .ptr) else {
            Issue.record("expected an mDNS plan")
            return
        }
        #expect(plan.link.interface == "eth1")
        #expect(plan.localName == (try DNSName("_ipp._tcp.local.")))
        guard case .mdns(let other) = self.plan("_IPP._tcp.LAB2.example.", .ptr) else {
            Issue.record("expected an mDNS plan")
            return
        }
        #expect(other.link.interface == "eth2")
    }

    @Test("an instance label holding a dot stays one label (RFC 6763 §4.3)")
    func dottedInstance() throws {
        let name = try DNSName(
            labels: [Array("Dot.ted Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8)]
                + (try DNSName("lab1.example.")).labels)
        guard case .mdns(let plan) = catalog.plan(Question(name: name, type: .srv)) else {
            Issue.record("expected an mDNS plan")
            return
        }
        #expect(plan.localName.labels.count == 4)
        #expect(plan.localName.labels[0] == Array("Dot.ted Printer".utf8))
    }

    @Test("names outside every zone are refused, as are other classes")
    func refused() {
        #expect(plan("www.example.org.", .a) == .refused)
        #expect(plan("example.", .soa) == .refused)
        #expect(plan("_ipp._tcp.lab1.example.", .ptr, RRClass(3)) == .refused)
        #expect(plan("local.", .soa) == .refused)
    }

    @Test("the apex answers SOA and NS at once (§6.1–6.3)")
    func apex() throws {
        guard case .immediate(_, let soa) = plan("lab1.example.", .soa), case .soa(let values) = soa.first?.rdata else {
            Issue.record("expected an immediate SOA")
            return
        }
        #expect(values.serial == 0)
        #expect([values.refresh, values.retry, values.expire, values.minimum] == [7200, 3600, 86400, 10])
        #expect(values.mname == (try DNSName("ns.example.")))
        #expect(soa[0].ttl <= 10)
        guard case .immediate(_, let ns) = plan("lab1.example.", .ns) else {
            Issue.record("expected an immediate NS")
            return
        }
        #expect(ns.map(\.rdata) == [.ns(try DNSName("ns.example."))])
        #expect(plan("lab1.example.", .a) == .immediate(zone: try DNSName("lab1.example."), answers: []))
    }

    @Test("SOA, NS, DS below the apex and metadata SRV names are immediate negatives (§6.3, §6.4)")
    func immediateNegatives() throws {
        let zone = try DNSName("lab1.example.")
        for (name, type) in [
            ("sub.lab1.example.", RRType.ns), ("_ipp._tcp.lab1.example.", .soa), ("x.lab1.example.", .ds),
            ("_dns-update._udp.lab1.example.", .srv), ("_dns-update._tcp.lab1.example.", .srv),
            ("_dns-update-tls._tcp.lab1.example.", .srv), ("_dns-push-tls._tcp.lab1.example.", .srv),
            ("_dns-llq._udp.lab1.example.", .srv), ("_dns-llq._tcp.lab1.example.", .srv),
            ("_dns-llq-tls._tcp.lab1.example.", .srv), ("r._dns-sd._udp.lab1.example.", .ptr),
        ] {
            #expect(plan(name, type) == .immediate(zone: zone, answers: []), "\(name) \(type)")
        }
    }

    @Test("b/lb list every link zone, db this zone (RFC 6763 §11, RFC 8766 §5.2.1)")
    func domainEnumeration() throws {
        guard case .immediate(_, let b) = plan("b._dns-sd._udp.lab1.example.", .ptr) else {
            Issue.record("expected an immediate answer")
            return
        }
        #expect(b.map(\.rdata) == [.ptr(try DNSName("lab1.example.")), .ptr(try DNSName("lab2.example."))])
        guard case .immediate(_, let db) = plan("db._dns-sd._udp.lab2.example.", .ptr) else {
            Issue.record("expected an immediate answer")
            return
        }
        #expect(db.map(\.rdata) == [.ptr(try DNSName("lab2.example."))])
    }

    @Test("address-based enumeration under a link's reverse zone is answered at once (§6.5)")
    func reverseEnumeration() throws {
        guard case .immediate(let zone, let b) = plan("b._dns-sd._udp.0.2.0.192.in-addr.arpa.", .ptr) else {
            Issue.record("expected an immediate answer")
            return
        }
        #expect(zone == (try DNSName("2.0.192.in-addr.arpa.")))
        #expect(b.count == 2)
        let v6 = "lb._dns-sd._udp." + String(repeating: "0.", count: 16) + "0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
        guard case .immediate(_, let lb) = plan(v6, .ptr) else {
            Issue.record("expected an immediate answer for \(v6)")
            return
        }
        #expect(lb.count == 2)
        // Other enumeration-looking names in the reverse zone: empty, never mDNS.
        #expect(plan("b._dns-sd._udp.5.2.0.192.in-addr.arpa.", .ptr) == .immediate(zone: zone, answers: []))
    }

    @Test("reverse queries go to mDNS unchanged (§5.4)")
    func reverseQuery() throws {
        guard case .mdns(let plan) = self.plan("10.2.0.192.in-addr.arpa.", .ptr) else {
            Issue.record("expected an mDNS plan")
            return
        }
        #expect(plan.localName == (try DNSName("10.2.0.192.in-addr.arpa.")))
        #expect(plan.link.interface == "eth1")
    }

    @Test("prefix helpers")
    func prefixes() throws {
        let v4 = try #require(IPPrefix("192.0.2.77/24"))
        #expect(v4.description == "192.0.2.0/24")
        #expect(v4.reverseZone == (try DNSName("2.0.192.in-addr.arpa.")))
        #expect(v4.enumerationDomain == (try DNSName("0.2.0.192.in-addr.arpa.")))
        #expect(IPPrefix.isLinkLocal([169, 254, 1, 2]))
        #expect(!IPPrefix.isLinkLocal([192, 0, 2, 1]))
        #expect(IPPrefix.isLinkLocal(IPPrefix.parseAddress("fe80::1")!))
        #expect(IPPrefix.format(IPPrefix.parseAddress("2001:db8::1")!) == "2001:db8::1")
        #expect(IPPrefix("2001:db8:1::/64")!.reverseZone.labels.count == 18)
        #expect(IPPrefix("nonsense") == nil)
        #expect(IPPrefix("192.0.2.0/33") == nil)
    }
}
