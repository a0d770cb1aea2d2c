import DNSServer
import DNSWire
@_spi(Testing) import DiscoveryProxy
import Testing

@testable import ProxyApp

/// `--print-parent-zone`: what the parent zones need for this configuration (RFC 8766 §6.2,
/// RFC 6763 §11, §6.5 reverse delegations), and `name-servers` for several proxies.
@Suite("Parent-zone records and fellow proxies (RFC 8766 §6.2)")
struct ParentZoneTests {
    let interfaces = InterfaceTable(
        prefixes: [
            "eth1": [IPPrefix("192.0.2.1/24")!, IPPrefix("fe80::1/64")!], "eth2": [IPPrefix("198.51.100.1/24")!],
        ], addresses: ["eth1": [[192, 0, 2, 1]], "eth2": [[198, 51, 100, 1]]])

    func config() throws -> AppConfiguration {
        var config = AppConfiguration()
        var second = AppConfiguration.LinkSpec(interface: "eth2", domain: try DNSName("lab2.example.com."))
        second.hostZone = try DNSName("lab2-hosts.example.com.")
        config.links = [.init(interface: "eth1", domain: try DNSName("lab1.example.com.")), second]
        config.serverName = try DNSName("ns1.example.com.")
        config.proxy.nameServers = [try DNSName("ns1.example.com."), try DNSName("ns2.example.com.")]
        return config
    }

    @Test("every zone delegated to every proxy, this one's glue, b/db/lb, reverse zones")
    func records() throws {
        let text = ParentZone.render(try config(), interfaces: interfaces)
        let lines = Set(text.split(separator: "\n").map { $0.split(separator: "\t").prefix(5).joined(separator: " ") })
        for zone in ["lab1.example.com.", "lab2.example.com.", "lab2-hosts.example.com."] {
            #expect(lines.contains("\(zone) 3600 IN NS ns1.example.com."))
            #expect(lines.contains("\(zone) 3600 IN NS ns2.example.com."))
        }
        #expect(lines.contains("ns1.example.com. 3600 IN A 192.0.2.1"), "glue: this proxy's addresses on the links")
        #expect(lines.contains("ns1.example.com. 3600 IN A 198.51.100.1"))
        #expect(!lines.contains { $0.hasPrefix("ns1.example.com. 3600 IN AAAA fe80") }, "never link-local glue")
        #expect(lines.contains("b._dns-sd._udp.example.com. 3600 IN PTR lab1.example.com."))
        #expect(lines.contains("lb._dns-sd._udp.example.com. 3600 IN PTR lab2.example.com."))
        #expect(lines.contains("db._dns-sd._udp.example.com. 3600 IN PTR lab1.example.com."))
        #expect(
            !lines.contains("b._dns-sd._udp.example.com. 3600 IN PTR lab2-hosts.example.com."), "not a browse domain")
        #expect(lines.contains("2.0.192.in-addr.arpa. 3600 IN NS ns2.example.com."))
        #expect(lines.contains("100.51.198.in-addr.arpa. 3600 IN NS ns1.example.com."))
        #expect(text.contains("; ---- in zone example.com.") && text.contains("; ---- in zone 0.192.in-addr.arpa."))
    }

    @Test("a specific listen address is the glue")
    func listenGlue() throws {
        var config = try config()
        config.server.listenAddresses = [
            AppConfiguration.ListenAddress("203.0.113.5:53")!, AppConfiguration.ListenAddress("127.0.0.1:5300")!,
        ]
        let text = ParentZone.render(config, interfaces: interfaces)
        #expect(text.contains("ns1.example.com.\t3600\tIN\tA\t203.0.113.5\t; glue"))
        #expect(!text.contains("192.0.2.1\t; glue") && !text.contains("127.0.0.1"))
    }

    @Test("name-servers: NS lists every proxy, the first is the SOA MNAME; it must list this one, outside the zones")
    func nameServers() throws {
        let config = try config()
        #expect(config.validate(interfaces: interfaces).isEmpty)
        let proxy = config.proxyConfiguration(interfaces: interfaces)
        let records = ZoneRecords(origin: try DNSName("lab1.example.com."), link: nil, configuration: proxy)
        #expect(
            records.ns.map(\.rdata) == [.ns(try DNSName("ns1.example.com.")), .ns(try DNSName("ns2.example.com."))])
        guard case .soa(let soa) = records.soa.rdata else {
            Issue.record("no SOA")
            return
        }
        #expect(soa.mname == (try DNSName("ns1.example.com.")))
        var wrong = config
        wrong.proxy.nameServers = [try DNSName("ns2.example.com."), try DNSName("ns.lab1.example.com.")]
        let errors = wrong.validate(interfaces: interfaces).map(\.description)
        #expect(errors.contains { $0.contains("must list this proxy's own server-name") })
        #expect(errors.contains { $0.contains("ns.lab1.example.com.") && $0.contains("must not") })
    }

    /// An HA pair shares link 1 only: link 2 is this router's alone, so its zones name this
    /// proxy alone, in the parent zone and in their own SOA and NS (a fellow proxy that does
    /// not serve a zone would be a lame delegation).
    @Test("links[].name-servers: a link of this router alone is delegated to it alone")
    func perLinkNameServers() throws {
        let (config, readErrors) = AppConfiguration.parse(
            yaml: """
                server-name: ns1.example.com.
                name-servers: [ns1.example.com., ns2.example.com.]
                links:
                  - interface: eth1
                    domain: lab1.example.com.
                  - interface: eth2
                    domain: lab2.example.com.
                    name-servers: [ns1.example.com.]
                """)
        #expect(readErrors.isEmpty)
        #expect(config.validate(interfaces: interfaces).isEmpty)
        #expect(config.render(interfaces: interfaces).contains("    name-servers: ['ns1.example.com.']"))
        let lines = Set(
            ParentZone.render(config, interfaces: interfaces).split(separator: "\n").map {
                $0.split(separator: "\t").prefix(5).joined(separator: " ")
            })
        #expect(lines.contains("lab1.example.com. 3600 IN NS ns2.example.com."))
        #expect(lines.contains("lab2.example.com. 3600 IN NS ns1.example.com."))
        #expect(!lines.contains("lab2.example.com. 3600 IN NS ns2.example.com."))
        #expect(!lines.contains("100.51.198.in-addr.arpa. 3600 IN NS ns2.example.com."))
        #expect(lines.contains("2.0.192.in-addr.arpa. 3600 IN NS ns2.example.com."))

        let catalog = Catalog(configuration: config.proxyConfiguration(interfaces: interfaces))
        #expect(catalog.hasLinkNameServers)
        let ns = { (zone: String) throws -> QueryPlan in catalog.plan(Question(name: try DNSName(zone), type: .ns)) }
        #expect(
            try ns("lab2.example.com.")
                == .immediate(
                    zone: try DNSName("lab2.example.com."),
                    answers: [
                        ResourceRecord(
                            name: try DNSName("lab2.example.com."), type: .ns, ttl: 10,
                            rdata: .ns(try DNSName("ns1.example.com.")))
                    ]))
        guard case .immediate(_, let shared) = try ns("100.51.198.in-addr.arpa."),
            case .immediate(_, let both) = try ns("lab1.example.com.")
        else {
            Issue.record("apex NS not immediate")
            return
        }
        #expect(shared.count == 1)
        #expect(both.count == 2)

        // Domain enumeration in a zone both proxies serve lists only zones both serve, so the
        // partner (which serves its own links, not lab2) gives the same answer (§6.2); in
        // lab2's own zones this proxy alone answers and lists both.
        let enumeration = { (name: String) throws -> [RData] in
            guard case .immediate(_, let records) = catalog.plan(Question(name: try DNSName(name), type: .ptr)) else {
                return []
            }
            return records.map(\.rdata)
        }
        let lab1 = RData.ptr(try DNSName("lab1.example.com."))
        let lab2 = RData.ptr(try DNSName("lab2.example.com."))
        #expect(try enumeration("b._dns-sd._udp.0.2.0.192.in-addr.arpa.") == [lab1])
        #expect(try enumeration("lb._dns-sd._udp.lab1.example.com.") == [lab1])
        #expect(try enumeration("b._dns-sd._udp.0.100.51.198.in-addr.arpa.") == [lab1, lab2])

        var wrong = config
        wrong.links[1].nameServers = [try DNSName("ns2.example.com.")]
        #expect(
            wrong.validate(interfaces: interfaces).map(\.description).contains {
                $0.hasPrefix("links[1].name-servers: \"ns1.example.com.\": must list this proxy's own server-name")
            })
    }
}
