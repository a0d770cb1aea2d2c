public import DNSServer
public import DiscoveryProxy

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Where the admin server gets what it shows: implemented by the application, faked in tests.
///
/// `adminStatus()` is called once per request (and per `/metrics` scrape), so it should be a
/// cheap snapshot. `reload()` re-reads the configuration for `POST /reload`.
public protocol AdminStatusSource: Sendable {
    func adminStatus() -> AdminStatus
    func reload() async -> ReloadResult
}

/// The outcome of `POST /reload`.
public enum ReloadResult: Sendable, Equatable {
    /// The new configuration is in effect, but for the changed keys that take effect on
    /// restart only: one line each (the key, and why).
    case applied(waitingForRestart: [String])
    /// Nothing changed; one line per problem (key, bad value, why).
    case failed([String])
}

/// A snapshot of the running proxy: the data contract behind `/`, `/api/services`, `/healthz`
/// and `/metrics`. Key names are stable; `/api/services` is this struct as JSON.
public struct AdminStatus: Sendable, Codable, Equatable {
    /// The proxy's version string, e.g. `1.2.0`.
    public var version: String
    /// The git revision it was built from (`git describe`), or "unknown".
    public var revision: String
    /// When the process started (ISO 8601 in JSON).
    public var startedAt: Date
    public var uptimeSeconds: Double
    public var health: Health
    /// DNS messages read from the UDP listeners.
    public var udpQueriesReceived: Int
    /// DNS messages read from TCP connections.
    public var tcpQueriesReceived: Int
    public var tcp: TCPConnectionStats
    public var avahi: AvahiStats
    public var proxy: ProxyStats
    public var links: [LinkStatus]
    /// The mDNS gateway's routes (`links[].announce`): what is announced on which link.
    public var announcements: [AnnouncementStatus]
    /// The SRP registrar (`srp.enabled`): whether it is on, and every host registered.
    public var registrar: RegistrarStatus

    public init(
        version: String,
        revision: String = "unknown",
        startedAt: Date,
        uptimeSeconds: Double,
        health: Health = Health(),
        udpQueriesReceived: Int = 0,
        tcpQueriesReceived: Int = 0,
        tcp: TCPConnectionStats = TCPConnectionStats(),
        avahi: AvahiStats = AvahiStats(),
        proxy: ProxyStats = ProxyStats(),
        links: [LinkStatus] = [],
        announcements: [AnnouncementStatus] = [],
        registrar: RegistrarStatus = RegistrarStatus()
    ) {
        self.announcements = announcements
        self.registrar = registrar
        self.version = version
        self.revision = revision
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.health = health
        self.udpQueriesReceived = udpQueriesReceived
        self.tcpQueriesReceived = tcpQueriesReceived
        self.tcp = tcp
        self.avahi = avahi
        self.proxy = proxy
        self.links = links
    }
}

/// The SRP registrar on the status page and in `/api/services`.
public struct RegistrarStatus: Sendable, Codable, Equatable {
    public var enabled: Bool
    /// Updates answered, by RCODE name (`srp_updates_total`).
    public var updates: [String: Int]
    public var hosts: [RegistrationStatus]

    public init(enabled: Bool = false, updates: [String: Int] = [:], hosts: [RegistrationStatus] = []) {
        self.enabled = enabled
        self.updates = updates
        self.hosts = hosts
    }
}

/// Whether the proxy can do its job; `/healthz` answers 200 when `ok`, else 503 with `reasons`.
public struct Health: Sendable, Codable, Equatable {
    public var ok: Bool
    /// Why not ok, one human-readable line each (empty when ok).
    public var reasons: [String]
    /// State of the mDNS backend, e.g. `running`, `connecting`, `failed`.
    public var mdnsState: String
    /// The DNS listeners that are up, e.g. `udp 0.0.0.0:53`, `tcp 0.0.0.0:53`.
    public var listeners: [String]

    public init(ok: Bool = true, reasons: [String] = [], mdnsState: String = "running", listeners: [String] = []) {
        self.ok = ok
        self.reasons = reasons
        self.mdnsState = mdnsState
        self.listeners = listeners
    }
}

/// The avahi-daemon backend.
public struct AvahiStats: Sendable, Codable, Equatable {
    /// Whether avahi-daemon is reachable now (`mdns_backend_connected`).
    public var connected: Bool
    /// avahi client connections (D-Bus) currently open.
    public var clients: Int
    /// avahi record browsers currently live.
    public var liveQueries: Int
    /// Times the backend reconnected after avahi-daemon went away (only grows).
    public var reconnects: Int
    /// Whether avahi-daemon answers: connected, and no call waiting past its deadline
    /// (`mdns_backend_up`).
    public var up: Bool
    /// Since when avahi-daemon has not answered, while it does not.
    public var notAnsweringSince: Date?
    /// Episodes of avahi-daemon not answering within the deadline (only grows).
    public var stalls: Int

    public init(
        connected: Bool = true, clients: Int = 0, liveQueries: Int = 0, reconnects: Int = 0, up: Bool? = nil,
        notAnsweringSince: Date? = nil, stalls: Int = 0
    ) {
        self.connected = connected
        self.clients = clients
        self.liveQueries = liveQueries
        self.reconnects = reconnects
        self.up = up ?? connected
        self.notAnsweringSince = notAnsweringSince
        self.stalls = stalls
    }
}

extension AdminStatus {
    /// The JSON form served at `/api/services`: sorted keys, ISO 8601 dates, pretty-printed.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// Reads what `jsonData()` wrote (`/api/services`).
    public init(jsonData: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        self = try decoder.decode(AdminStatus.self, from: jsonData)
    }
}
