import DNSWire
import MDNS

/// One link: a network interface facing a remote subnet, served as its own DNS zone
/// (RFC 8766 §5.1: each link has a unique domain; its names are resolved only on that link).
public struct Link: Hashable, Sendable {
    /// Interface name on this host, e.g. `eth1`.
    public var interface: String
    /// The zone that stands for `.local` on this link, e.g. `lab1.example.`.
    public var zone: DNSName
    /// The link's subnets (from the interface's addresses); each gives a reverse zone and
    /// address-based domain enumeration names. Link-local prefixes are ignored.
    public var subnets: [IPPrefix]
    /// Which service types this link shares (browse, resolve and `_services._dns-sd._udp`).
    public var services: ServiceFilter
    /// The private address realm its hosts are in (`PrivateRealms`); nil: none named.
    public var realm: String?
    /// A zone of letter-digit-hyphen names for the link's host names (RFC 8766 §5.3: one
    /// zone for rich-text DNS-SD names, one LDH zone for host names): owners of addresses,
    /// SRV targets and reverse-lookup targets are shown there. nil: in `zone`, like the rest.
    public var hostZone: DNSName?
    /// The client prefixes that may see this link (its zones, its place in domain enumeration,
    /// its Push subscriptions), on top of the proxy's client ACL; nil: every allowed client.
    public var clients: [IPPrefix]?
    /// The proxies of this link's zones when they are not the proxy's own `nameServers` (a
    /// router whose HA partner shares some of its links only); nil: those.
    public var nameServers: [DNSName]?
    /// Far links whose services are announced on this link over mDNS (the gateway).
    public var announce: [Announcement]

    public init(
        interface: String, zone: DNSName, subnets: [IPPrefix] = [], services: ServiceFilter = ServiceFilter(),
        realm: String? = nil, hostZone: DNSName? = nil, clients: [IPPrefix]? = nil, nameServers: [DNSName]? = nil,
        announce: [Announcement] = []
    ) {
        self.announce = announce
        self.nameServers = nameServers
        self.interface = interface
        self.zone = zone
        self.subnets = subnets
        self.services = services
        self.realm = realm
        self.hostZone = hostZone
        self.clients = clients
    }

    /// Whether `client` may see this link.
    public func isVisible(to client: DNSClient) -> Bool {
        guard let clients else { return true }
        return clients.contains { $0.contains(client.address) }
    }

    /// Whether every client in `subnet` may see this link.
    public func isVisible(toEveryClientOf subnet: IPPrefix) -> Bool {
        guard let clients else { return true }
        return clients.contains { $0.contains(subnet) }
    }
}

/// Everything the pure proxy logic needs to know. Defaults follow RFC 8766 and the checklist.
public struct ProxyConfiguration: Sendable, Equatable {
    /// Whether `client` passes the client ACL (`allowedClients`): queries, DSO messages
    /// (through `Catalog.admits`) and SRP updates ask the same.
    public func admits(_ client: DNSClient) -> Bool {
        guard let allowed = allowedClients else { return true }
        return allowed.contains { $0.contains(client.address) }
    }

    public var links: [Link]
    /// The proxy's own host name: NS RDATA and SOA MNAME (RFC 8766 §6.1, §6.2). Must not lie
    /// inside any link zone (§6.2).
    public var serverName: DNSName
    /// SOA RNAME, the administrator's mailbox; nil means `hostmaster.<zone>`.
    public var hostmaster: DNSName?
    /// Every discovery proxy serving these zones, this one included (RFC 8766 §6.2: at the
    /// apex each proxy answers NS with its own record and its fellow proxies'). The first is
    /// the SOA MNAME, so that proxies with the same list give the same SOA. Empty: this
    /// proxy alone (`serverName`).
    public var nameServers: [DNSName] = []
    /// `nameServers`, or `serverName` alone.
    public var effectiveNameServers: [DNSName] { nameServers.isEmpty ? [serverName] : nameServers }
    /// The proxies of `link`'s zones: its own list, or `effectiveNameServers`.
    public func nameServers(of link: Link?) -> [DNSName] { link?.nameServers ?? effectiveNameServers }
    /// Answer NODATA after this long when mDNS finds nothing. RFC 8766 §5.6 says 6 s, but
    /// resolvers give up on an authoritative server long before (docs/ARCHITECTURE.md,
    /// "Negative answers"); the mDNS query goes on after the answer either way.
    public var negativeTimeout: Duration = .milliseconds(800)
    /// After the first mDNS result, wait this long for more before answering, so that the
    /// rest of the same mDNS packet (and near-simultaneous responders) make it in.
    public var collectionWindow: Duration = .milliseconds(50)
    /// Learn each link's mDNS answer times from its browses and lengthen, for a slow link,
    /// `negativeTimeout` and `collectionWindow` (up to 1.2 s after the query), with a short TTL
    /// on an answer its late devices may still add to (`AnswerTimes`).
    public var learnsAnswerTimes = true
    /// A browse with no query for this long is released (its avahi object freed).
    public var browseIdleTimeout: Duration = .seconds(120)
    /// TTL of every record in a unicast answer (RFC 8766 §5.5.1: at most 10 s).
    public var ttlCap: UInt32 = 10
    /// Drop 169.254/16 A and fe80::/10 AAAA records (RFC 8766 §5.5.2; on by default).
    public var suppressLinkLocal: Bool = true
    /// Which clients are in which private address realm (RFC 8766 §5.5.2); empty: no
    /// private address is withheld.
    public var privateRealms = PrivateRealms()
    /// Rate limit of mDNS queries the proxy starts, per link (RFC 8766 §9.3).
    public var mdnsQueriesPerSecond: Double = 20
    public var mdnsQueryBurst: Double = 40
    /// The mDNS gateway's own lookups on a far link (the SRV, TXT and addresses of each
    /// instance it announces; `QueryBudget.gateway`) wait in a queue and are let out at a pace
    /// that keeps the query packets this host sends there at `gatewayQueryPacketsPerSecond`
    /// (`LookupPacer`; RFC 8766 §9.3 recommends 20 a second on 802.11 for what clients cause),
    /// between `gatewayLookupsLeast` and `gatewayLookupsPerSecond` lookups a second
    /// (`gatewayLookupBurst` at once). Without a listener on the far link, whose count the pace
    /// needs, they go at the most. The lookups start from what the far link announced
    /// (`LinkSnooper`) and only confirm it: their pace does not hold the first sight back.
    public var gatewayQueryPacketsPerSecond: Double = 20
    public var gatewayLookupsPerSecond: Double = 250
    public var gatewayLookupBurst: Double = 500
    public var gatewayLookupsLeast: Double = 10

    var gatewayLookups: LookupPacer.Settings {
        LookupPacer.Settings(
            packetsPerSecond: gatewayQueryPacketsPerSecond, most: gatewayLookupsPerSecond, burst: gatewayLookupBurst,
            least: gatewayLookupsLeast)
    }
    /// Budget of the mDNS gateway's announcements and goodbyes, per client link (packets).
    public var mdnsAnnouncePacing = AnnouncementPacing()
    /// Largest UDP answer we send, whatever the client advertises (RFC 6891 §6.2.5).
    public var maxUDPPayload: Int = 1232
    /// Answer a query whose browse was released not long ago at once from its last results
    /// (with a 2 s TTL) while a fresh browse starts, instead of waiting for mDNS again.
    public var optimisticAnswers = true
    /// How old those last results may be.
    public var optimisticMaxStaleness: Duration = .seconds(600)
    /// How often each link's inventory is taken (`takeInventory`): its service types and
    /// their instance counts, for the status page. Nil: no inventory.
    public var inventoryInterval: Duration? = .seconds(60)
    /// Service types per link the inventory browses at most.
    public var inventoryMaxTypes = 32
    /// Live browses (avahi record browsers, with their cached records) at most; see
    /// `BrowseLimit`. With the per-link rate limit this bounds memory under a name flood.
    public var maxBrowses: Int = 4096
    /// Clients allowed to query; others get REFUSED (RFC 8766 §9.2, RFC 7766 §10). Nil: all.
    public var allowedClients: [IPPrefix]?
    /// DNS Push is served (RFC 8766 §6.4): `_dns-push-tls._tcp.<zone>` SRV answers name
    /// `serverName` and this port, and `serverName` A/AAAA are these addresses. Nil: no Push.
    public var push: PushAdvertisement?

    public init(links: [Link], serverName: DNSName, hostmaster: DNSName? = nil) {
        self.links = links
        self.serverName = serverName
        self.hostmaster = hostmaster
    }
}

/// Where clients find the DNS Push (TLS) service.
public struct PushAdvertisement: Hashable, Sendable {
    public var port: UInt16
    /// 4- or 16-octet addresses of `serverName`.
    public var addresses: [[UInt8]]

    public init(port: UInt16, addresses: [[UInt8]]) {
        self.port = port
        self.addresses = addresses
    }
}
