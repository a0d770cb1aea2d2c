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

    // A setting is read straight into the structure that uses it (`AppConfiguration.options`
    // names the field), so its default is that structure's, written once there; the file's
    // units (seconds, milliseconds) are converted by the option's entry.

    public var links: [LinkSpec] = []
    /// The DNS listeners: `listen`, `tcp.*`, `replay-answers`.
    public var server = DNSServerConfiguration()
    /// The proxy logic: `negative-timeout` … `max-browses`, `name-servers`, `hostmaster`,
    /// `private-realms`. Its links, client ACL, server name and DNS Push advertisement are
    /// filled in from the rest and the interfaces (`proxyConfiguration(interfaces:)`).
    public var proxy = ProxyConfiguration(links: [], serverName: .root)
    /// NS target and SOA MNAME; nil means this host's name.
    public var serverName: DNSName?
    public var logLevel = "info"

    /// Admin HTTP endpoint (metrics, health, status); nil disables it.
    public var admin: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 8053)
    /// Clients allowed to query; nil means loopback plus the subnets of this host's interfaces.
    public var allowClients: [IPPrefix]?
    /// Interfaces on which the link zones are announced as browse domains over mDNS
    /// (`BrowseDomainAdvertisement`); empty: none.
    public var advertiseBrowseDomains: [String] = []

    /// DNS Push over DSO (RFC 8765, RFC 8490): its listener and advertisement (`push.*`).
    public var push = PushSettings()
    /// The SRP registrar (`srp:`).
    public var registrar = RegistrarConfiguration()
    /// DNS Push sessions' limits and timeouts (`push.max-sessions` …).
    public var pushSessions = PushConfiguration()

    /// avahi objects per connection and in all (`avahi.*`).
    public var avahi = AvahiObjectLimits(
        perClient: AvahiBackend.defaultClientObjectLimit, total: AvahiBackend.defaultTotalObjectBudget)

    /// UDP response rate limiting per client prefix; off (0/s) by default.
    public var rateLimit = ResponseRateLimit()
    /// How often the links' interfaces are checked for going down/up and address changes.
    public var interfaceCheck: Duration = .seconds(5)
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
