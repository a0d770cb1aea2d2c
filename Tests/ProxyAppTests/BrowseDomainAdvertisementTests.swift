import DNSWire
@_spi(Testing) import DiscoveryProxy
import MDNS
import Testing

@testable import ProxyApp

/// `advertise-browse-domains`: which zones each client-facing interface is told about
/// (RFC 6763 §11 b/lb PTRs), from the client ACL and the links' views.
@Suite("Browse-domain advertisement")
struct BrowseDomainAdvertisementTests {
    let interfaces = InterfaceTable(
        prefixes: [
            "lo": [IPPrefix("127.0.0.0/8")!],
            "staff0": [IPPrefix("192.0.2.0/24")!, IPPrefix("2001:db8:1::/64")!, IPPrefix("fe80::/64")!],
            "guest0": [IPPrefix("198.51.100.0/24")!],
            "print0": [IPPrefix("203.0.113.0/26")!],
            "bare0": [IPPrefix("fe80::/64")!],
            "wan0": [IPPrefix("203.0.113.128/25")!],
        ],
        uplinks: ["wan0"])

    func configuration(_ yaml: String) -> AppConfiguration {
        let (config, errors) = AppConfiguration.parse(
            yaml: """
                server-name: ns.example.
                links:
                  - interface: print0
                    domain: printers.example.
                  - interface: staff0
                    domain: staff.example.
                    clients: ["192.0.2.0/24"]
                  - interface: guest0
                    domain: guest.example.
                    clients: ["198.51.100.0/25"]
                \(yaml)
                """)
        #expect(errors.isEmpty)
        return config
    }

    @Test("each interface names the zones all of its subnets may see, in configuration order")
    func zonesPerInterface() throws {
        let config = configuration("advertise-browse-domains: [staff0, guest0, print0]")
        #expect(config.validate(interfaces: interfaces).isEmpty)
        let plan = BrowseDomainAdvertisement(configuration: config, interfaces: interfaces)
        #expect(plan.zones["staff0"] == [try DNSName("printers.example."), try DNSName("staff.example.")])
        // guest.example.'s view is 198.51.100.0/25: half of guest0's subnet would get REFUSED.
        #expect(plan.zones["guest0"] == [try DNSName("printers.example.")])
        #expect(plan.zones["print0"] == [try DNSName("printers.example.")])
    }

    @Test("the records are b and lb PTRs in .local with the zone's wire form as RDATA")
    func records() throws {
        let config = configuration("advertise-browse-domains: [print0]")
        let groups = BrowseDomainAdvertisement(configuration: config, interfaces: interfaces).groups
        let zone = try DNSName("printers.example.")
        #expect(
            groups == [
                MDNSGroup(
                    key: MDNSGroup.Key(interface: "print0", name: "browse domains"),
                    records: [
                        MDNSRecord(name: try DNSName("b._dns-sd._udp.local."), type: .ptr, rdata: zone.wireBytes),
                        MDNSRecord(name: try DNSName("lb._dns-sd._udp.local."), type: .ptr, rdata: zone.wireBytes),
                    ])
            ])
    }

    @Test("a subnet outside allow-clients is not told of any zone, and the warning says so")
    func outsideTheACL() throws {
        var config = configuration("advertise-browse-domains: [guest0, bare0]")
        config.allowClients = [IPPrefix("192.0.2.0/24")!]
        let plan = BrowseDomainAdvertisement(configuration: config, interfaces: interfaces)
        #expect(plan.zones.isEmpty)
        let warnings = config.warnings(interfaces: interfaces)
        #expect(warnings.contains { $0.hasPrefix("advertise-browse-domains: guest0: no link zone is visible") })
        // Only a link-local address: no client of it could query the proxy.
        #expect(warnings.contains { $0.hasPrefix("advertise-browse-domains: bare0: no link zone is visible") })
    }

    @Test("unknown or repeated interfaces are errors naming the entry; the uplink is a warning")
    func validation() {
        let config = configuration("advertise-browse-domains: [print0, eth9, print0, wan0]")
        let errors = config.validate(interfaces: interfaces).map(\.description)
        #expect(errors.contains { $0.hasPrefix("advertise-browse-domains[1]: \"eth9\": no such network interface") })
        #expect(errors.contains("advertise-browse-domains[2]: \"print0\": listed twice"))
        #expect(
            config.warnings(interfaces: interfaces).contains {
                $0.hasPrefix("advertise-browse-domains: wan0 carries the default route")
            })
    }

    @Test("--check-config shows what each interface announces")
    func rendering() {
        let config = configuration("advertise-browse-domains: [staff0, bare0]")
        let text = config.render(interfaces: interfaces)
        #expect(text.contains("  - staff0  # printers.example., staff.example."))
        #expect(text.contains("  - bare0  # nothing"))
        #expect(configuration("").render(interfaces: interfaces).contains("advertise-browse-domains: []  # none"))
    }
}
