import DNSServer
import DNSWire
import DiscoveryProxy
import MDNS

/// The effective configuration of the daemon: the YAML file with the command-line flags
/// applied on top. Every field has a working default except `links`.
public struct AppConfiguration: Sendable, Equatable {
    public struct LinkSpec: Sendable, Equatable {
        public var interface: String
        public var domain: DNSName
        /// nil: detected from the interface's addresses at start-up.
        public var subnets: [IPPrefix]?
        /// Where it was configured (`links[2]`, `--link[0]`), so errors name the entry the
        /// operator wrote even when an unreadable entry before it was left out.
        public var origin: String?
        /// Service types shared from this link (`services: {allow: [...], deny: [...]}`).
        public var services = ServiceFilter()
        /// The private address realm of its hosts, a name from `private-realms`.
        public var realm: String?
        /// The LDH zone its host names are shown in (`host-zone`); nil: `domain`.
        public var hostZone: DNSName?
        /// The client prefixes that may see it (`clients`); nil: every allowed client.
        public var clients: [IPPrefix]?
        /// The proxies of its zones (`name-servers`); nil: the top-level `name-servers`.
        public var nameServers: [DNSName]?
        /// Far links whose services are announced on this link over mDNS (`announce`).
        public var announce: [Announcement] = []

        public init(
            interface: String, domain: DNSName, subnets: [IPPrefix]? = nil, origin: String? = nil,
            services: ServiceFilter = ServiceFilter(), realm: String? = nil, hostZone: DNSName? = nil,
            clients: [IPPrefix]? = nil, nameServers: [DNSName]? = nil
        ) {
            self.nameServers = nameServers
            self.clients = clients
            self.interface = interface
            self.domain = domain
            self.subnets = subnets
            self.origin = origin
            self.services = services
            self.realm = realm
            self.hostZone = hostZone
        }

        /// Every zone it is served as: `domain`, and `hostZone` when set.
        public var zones: [DNSName] { [domain] + (hostZone.map { [$0] } ?? []) }
    }

    /// A listen address is the front end's own type; parsing its text form lives here.
    public typealias ListenAddress = DNSServerConfiguration.ListenAddress

    // Defaults of settings the proxy logic and the front ends own are theirs, written once
    // there; the file's units (seconds, milliseconds) are derived from them.
    private static let proxy = ProxyConfiguration(links: [], serverName: .root)
    private static let server = DNSServerConfiguration()

    public var links: [LinkSpec] = []
    public var listen = server.listenAddresses
    /// NS target and SOA MNAME; nil means this host's name.
    public var serverName: DNSName?
    /// Every discovery proxy of the link zones, this one included (RFC 8766 §6.2); empty:
    /// this one alone.
    public var nameServers: [DNSName] = []
    public var hostmaster: DNSName?
    public var logLevel = "info"

    public var negativeTimeoutSeconds = proxy.negativeTimeout / .seconds(1)
    public var collectionWindowMilliseconds = Int(proxy.collectionWindow / .milliseconds(1))
    public var learnsAnswerTimes = proxy.learnsAnswerTimes
    public var browseIdleTimeoutSeconds = proxy.browseIdleTimeout / .seconds(1)
    public var suppressLinkLocal = proxy.suppressLinkLocal
    public var mdnsQueriesPerSecond = proxy.mdnsQueriesPerSecond
    public var mdnsQueryBurst = proxy.mdnsQueryBurst
    public var mdnsAnnounceRate = proxy.mdnsAnnouncePacing.packetsPerSecond
    public var mdnsAnnounceBurst = proxy.mdnsAnnouncePacing.burst
    public var maxUDPPayload = proxy.maxUDPPayload
    public var optimisticAnswers = proxy.optimisticAnswers
    public var optimisticMaxStalenessSeconds = proxy.optimisticMaxStaleness / .seconds(1)
    /// 0: no link inventory.
    public var inventoryIntervalSeconds = (proxy.inventoryInterval ?? .zero) / .seconds(1)
    public var inventoryMaxTypes = proxy.inventoryMaxTypes
    /// The front ends' per-client replay of encoded answers (`DNSServerConfiguration.replayAnswers`).
    public var replayAnswers = server.replayAnswers

    public var tcpIdleTimeoutSeconds = server.tcpIdleTimeout / .seconds(1)
    public var tcpMaxConnections = server.maxTCPConnections
    public var tcpMaxConnectionsPerClient = server.maxTCPConnectionsPerClient
    /// nil: `DNSServerConfiguration.subnetClients` times the per-client limit.
    public var tcpMaxConnectionsPerSubnet = server.maxTCPConnectionsPerSubnet
    /// 0: no limit.
    public var tcpMaxConnectionLifetimeSeconds = server.tcpMaxConnectionLifetime.map { $0 / .seconds(1) } ?? 0
    public var tcpMaxInFlightPerConnection = server.maxInFlightPerConnection

    /// Admin HTTP endpoint (metrics, health, status); nil disables it.
    public var admin: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 8053)
    /// Clients allowed to query; nil means loopback plus the subnets of this host's interfaces.
    public var allowClients: [IPPrefix]?
    /// Interfaces on which the link zones are announced as browse domains over mDNS
    /// (`BrowseDomainAdvertisement`); empty: none.
    public var advertiseBrowseDomains: [String] = []
    /// Client prefixes by private address realm (RFC 8766 §5.5.2), sorted by name.
    public var privateRealms = PrivateRealms()

    /// DNS Push over DSO (RFC 8765, RFC 8490).
    public var push = PushSettings()

    public var avahiObjectsPerClient = AvahiBackend.defaultClientObjectLimit
    public var avahiObjectBudget = AvahiBackend.defaultTotalObjectBudget

    /// Live browses at most (each one avahi record browser); see `BrowseLimit`.
    public var maxBrowses = proxy.maxBrowses
    /// UDP response rate limiting per client prefix; off (0/s) by default.
    public var rateLimit = ResponseRateLimit()
    /// How often the links' interfaces are checked for going down/up and address changes.
    public var interfaceCheckSeconds = 5.0
    /// Run as this user once every socket is bound (needs root to start); nil stays as started.
    public var user: String?

    public init() {}
}

/// One problem with the configuration, printed as one line: the key, the value, and why.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var key: String
    public var value: String?
    public var reason: String
    /// The whole file could not be read: nothing else about it is worth reporting.
    public var isWholeFile: Bool

    public init(key: String, value: String? = nil, reason: String, isWholeFile: Bool = false) {
        self.key = key
        self.value = value
        self.reason = reason
        self.isWholeFile = isWholeFile
    }

    public var description: String {
        if let value { return "\(key): \"\(value)\": \(reason)" }
        return "\(key): \(reason)"
    }
}

extension DNSServerConfiguration.ListenAddress {
    /// `ADDR:PORT`, with IPv6 in brackets: `0.0.0.0:53`, `[::1]:5300`. Numeric addresses only.
    public init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
            guard host.contains(":") else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else { return nil }
        }
        guard IPPrefix.parseAddress(String(host)) != nil, let port = Int(portText), (0...65535).contains(port)
        else { return nil }
        self.init(host: String(host), port: port)
    }
}
