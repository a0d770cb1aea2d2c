import DNSWire
import DiscoveryProxy
import Logging
import MDNS
import Synchronization

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
                records: Self.browseNames.flatMap { name in
                    zones.map { MDNSRecord(name: name, type: .ptr, rdata: $0.wireBytes) }
                })
        }
    }
}

/// Publishes the advertisement for each configuration put in force (start, reload, interface
/// change), and remembers the last one.
final class BrowseDomainAnnouncer: Sendable {
    private let publisher: any MDNSPublisher
    private let logger: Logger
    private let last = Mutex<BrowseDomainAdvertisement?>(nil)

    init(publisher: any MDNSPublisher, logger: Logger) {
        self.publisher = publisher
        self.logger = logger
    }

    /// The advertisement published last; nil before the first.
    var published: BrowseDomainAdvertisement? { last.withLock { $0 } }

    func apply(_ configuration: AppConfiguration, interfaces: InterfaceTable) {
        publish(BrowseDomainAdvertisement(configuration: configuration, interfaces: interfaces))
    }

    func publish(_ advertisement: BrowseDomainAdvertisement) {
        for (interface, zones) in advertisement.zones.sorted(by: { $0.key < $1.key }) {
            logger.info(
                "advertising browse domains over mDNS",
                metadata: [
                    "mdns.interface": "\(interface)",
                    "link.zones": "\(zones.map(\.description).joined(separator: ","))",
                ])
        }
        last.withLock { $0 = advertisement }
        publisher.publish(advertisement.groups)
    }
}
