import DNSWire
@_spi(Testing) import DiscoveryProxy
import Testing

/// The names QNAME-minimising resolvers (RFC 9156) probe on the way to a browse, and what a
/// name's place in DNS-SD's structure lets it hold (RFC 6763 §4.1, §7, §7.1, §9).
@Suite("DNS-SD structure: types a name cannot hold are answered at once (RFC 6763 §4, §7; RFC 8020)")
struct ServiceNamePositionTests {
    let catalog = Catalog(configuration: Harness().proxy.catalog.configuration)
    let zone = try! DNSName("lab1.example.")

    func plan(_ name: String, _ type: RRType) -> QueryPlan {
        catalog.plan(Question(name: try! DNSName(name), type: type))
    }

    func isMDNS(_ name: String, _ type: RRType) -> Bool {
        if case .mdns = plan(name, type) { return true }
        return false
    }

    @Test("the A, AAAA, CNAME and TXT probes of QNAME minimisation get NODATA at once, never mDNS")
    func minimisationProbes() {
        for name in [
            "_tcp.lab1.example.", "_udp.lab1.example.", "_dns-sd._udp.lab1.example.", "_ipp._tcp.lab1.example.",
            "Lab Printer One._ipp._tcp.lab1.example.", "_sub._ipp._tcp.lab1.example.",
            "_universal._sub._ipp._tcp.lab1.example.", "_services._dns-sd._udp.lab1.example.",
        ] {
            for type in [RRType.a, .aaaa, .cname, RRType(65)] {
                #expect(plan(name, type) == .immediate(zone: zone, answers: []), "\(name) \(type)")
            }
        }
        // NS below the apex was already immediate (RFC 8766 §6.3); the 0x20 mixed case of
        // resolvers changes nothing.
        #expect(plan("_TCP.Lab1.Example.", .ns) == .immediate(zone: zone, answers: []))
        #expect(plan("_IPP._Tcp.LAB1.example.", .a) == .immediate(zone: zone, answers: []))
    }

    @Test("each position keeps the types it holds: PTR for types and subtypes, SRV and TXT for instances")
    func positionsKeepTheirTypes() {
        #expect(isMDNS("_ipp._tcp.lab1.example.", .ptr))
        #expect(isMDNS("_IPP._TCP.lab1.example.", .ptr))
        #expect(isMDNS("_universal._sub._ipp._tcp.lab1.example.", .ptr))
        #expect(isMDNS("_services._dns-sd._udp.lab1.example.", .ptr))
        #expect(isMDNS("Lab Printer One._ipp._tcp.lab1.example.", .srv))
        #expect(isMDNS("Lab Printer One._ipp._tcp.lab1.example.", .txt))
        #expect(isMDNS("Lab Printer One._ipp._tcp.lab1.example.", .any))
        // An instance label may itself begin with an underscore.
        #expect(isMDNS("_odd name._ipp._tcp.lab1.example.", .srv))
        #expect(!isMDNS("_ipp._tcp.lab1.example.", .srv))
        #expect(!isMDNS("_ipp._tcp.lab1.example.", .txt))
        #expect(!isMDNS("Lab Printer One._ipp._tcp.lab1.example.", .ptr))
    }

    @Test("empty non-terminals and names DNS-SD never uses hold nothing, ANY included")
    func emptyNames() {
        for name in [
            "_tcp.lab1.example.", "_dns-sd._udp.lab1.example.", "_sub._ipp._tcp.lab1.example.",
            "x._dns-sd._udp.lab1.example.", "deep.Printer._ipp._tcp.lab1.example.",
            "five.x._sub._ipp._tcp.lab1.example.",
            "host._tcp.lab1.example.", "_acme-challenge.lab1.example.", "a._ipp._sctp.lab1.example.",
        ] {
            for type in [RRType.ptr, .srv, .txt, .a, .any] {
                #expect(plan(name, type) == .immediate(zone: zone, answers: []), "\(name) \(type)")
            }
        }
    }

    @Test("host names, and names under a host, are not restricted (macOS's _kerberos.<host> TXT)")
    func hostsUnrestricted() {
        #expect(isMDNS("farhost1.lab1.example.", .a))
        #expect(isMDNS("farhost1.lab1.example.", .aaaa))
        #expect(isMDNS("_kerberos.farhost1.lab1.example.", .txt))
    }

    @Test("in a reverse zone only a whole address holds a PTR; the rest is NODATA at once (RFC 1035 §3.5)")
    func reverseZone() throws {
        let reverse = try DNSName("2.0.192.in-addr.arpa.")
        // Unbound's probes on the way to b._dns-sd._udp.0.2.0.192.in-addr.arpa. (RFC 6763 §11).
        for name in ["0.2.0.192.in-addr.arpa.", "_udp.0.2.0.192.in-addr.arpa.", "_dns-sd._udp.0.2.0.192.in-addr.arpa."]
        {
            #expect(plan(name, .a) == .immediate(zone: reverse, answers: []), "\(name)")
            #expect(plan(name, .ns) == .immediate(zone: reverse, answers: []), "\(name)")
        }
        for name in ["_dns-sd._udp.0.2.0.192.in-addr.arpa.", "x.10.2.0.192.in-addr.arpa.", "300.2.0.192.in-addr.arpa."]
        {
            #expect(plan(name, .ptr) == .immediate(zone: reverse, answers: []), "\(name)")
        }
        #expect(isMDNS("10.2.0.192.in-addr.arpa.", .ptr))
        #expect(!isMDNS("10.2.0.192.in-addr.arpa.", .a))
        let v6 = String(repeating: "a.", count: 16) + "0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
        #expect(isMDNS(v6, .ptr))
        #expect(!isMDNS("1.2.3.4.0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", .ptr), "an empty non-terminal")
        guard case .immediate(_, let b) = plan("b._dns-sd._udp.0.2.0.192.in-addr.arpa.", .ptr) else {
            Issue.record("expected an immediate answer")
            return
        }
        #expect(b.count == 2)
    }
}
