import DNSWire
import DiscoveryProxy
import MDNS

/// The browse domains announced over mDNS on client-facing interfaces
/// (`advertise-browse-domains`): on each, `b._dns-sd._udp.local.` and
/// `lb._dns-sd._udp.local.` PTRs naming the link zones its clients may browse (RFC 6763 §11),
/// so that a DNS-SD client on that link finds them with no DHCP option or search domain.
///
/// "Its clients" are the interface's own subnets: a zone is named when a subnet of the
/// interface is admitted by `allow-clients` and by the link's `clients` view as a whole, so an
/// advertised zone never answers REFUSED to a client that found it this way.
struct BrowseDomainAdvertisement: Equatable {
    /// Interface → zones to name, in configuration order. Interfaces with none are left out.
    var zones: [String: [DNSName]] = [:]

    init(configuration: AppConfiguration, interfaces: InterfaceTable) {
        let allowed = configuration.effectiveAllowedClients(interfaces: interfaces)
        let links = configuration.proxyConfiguration(interfaces: interfaces).links
        for interface in configuration.advertiseBrowseDomains {
            let subnets = (interfaces.prefixes[interface] ?? []).filter { subnet in
                !subnet.isLinkLocal && allowed.contains { $0.contains(subnet) }
            }
            let visible = links.filter { link in subnets.contains { link.isVisible(toEveryClientOf: $0) } }.map(\.zone)
            if !visible.isEmpty { zones[interface] = visible }
        }
    }

    static let browseNames = [try! DNSName("b._dns-sd._udp.local."), try! DNSName("lb._dns-sd._udp.local.")]

    /// The PTR records to publish, one group per interface.
    var groups: [MDNSGroup] {
        zones.sorted { $0.key < $1.key }.map { interface, zones in
            MDNSGroup(
                key: MDNSGroup.Key(interface: interface, name: "browse domains"),
                records: Self.browseNames.flatMap { name in zones.map { MDNSRecord(name: name, type: .ptr, rdata: $0.wireBytes) } })
        }
    }
}
