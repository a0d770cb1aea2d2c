import DNSServer
import DiscoveryProxy

/// DNS Push (RFC 8765) settings: the `push:` section of the file and the `--push-*`,
/// `--tls-*` and `--state-dir` flags.
public struct PushSettings: Sendable, Equatable {
    /// TLS listeners; empty means no TLS listener and no `_dns-push-tls` advertisement.
    public var listen: [AppConfiguration.ListenAddress] = []
    /// PEM certificate chain and key; without them a self-signed pair is made (and kept) in
    /// `stateDirectory`.
    public var certificateFile: String?
    public var privateKeyFile: String?
    public var stateDirectory = "/var/lib/discovery-proxy"
    /// Accept DSO sessions on the plain TCP listeners too (RFC 8765 wants TLS; handy on
    /// trusted networks and for tests).
    public var onTCP = true
    /// A/AAAA of `server-name` in answers; nil means the TLS listen addresses, or this host's
    /// link addresses when those are wildcards.
    public var addresses: [String]?
    public var maxSessions = 1000
    public var maxSubscriptionsPerSession = 200
    public var inactivityTimeoutSeconds = 15.0
    public var keepaliveIntervalSeconds = 60.0

    public init() {}

    /// The default DNS-over-TLS port (RFC 7858 §3.1).
    public static let defaultPort = 853

    /// `ADDR:PORT` or a bare address (port 853): `0.0.0.0`, `[::]:853`, `2001:db8::1`.
    public static func listenAddress(_ text: String) -> AppConfiguration.ListenAddress? {
        if let address = AppConfiguration.ListenAddress(text) { return address }
        if IPPrefix.parseAddress(text) != nil {
            return AppConfiguration.ListenAddress(host: text, port: defaultPort)
        }
        if text.hasPrefix("["), text.hasSuffix("]") {
            return AppConfiguration.ListenAddress("\(text):\(defaultPort)")
        }
        return nil
    }

    var pushConfiguration: PushConfiguration {
        var configuration = PushConfiguration()
        configuration.maxSessions = maxSessions
        configuration.maxSubscriptionsPerSession = maxSubscriptionsPerSession
        configuration.inactivityTimeout = .milliseconds(Int(inactivityTimeoutSeconds * 1000))
        configuration.keepaliveInterval = .milliseconds(Int(keepaliveIntervalSeconds * 1000))
        return configuration
    }

    /// What `_dns-push-tls._tcp` answers: the first TLS port, and the addresses of the name.
    func advertisement(interfaces: InterfaceTable, links: [String]) -> PushAdvertisement? {
        guard let first = listen.first else { return nil }
        var addresses: [[UInt8]]
        if let configured = self.addresses {
            addresses = configured.compactMap { IPPrefix.parseAddress($0) }
        } else {
            addresses = listen.compactMap { IPPrefix.parseAddress($0.host) }.filter { !$0.allSatisfy { $0 == 0 } }
            if addresses.isEmpty {
                // Wildcard listeners: the addresses this host has on its links.
                addresses = links.flatMap { interfaces.addresses[$0] ?? [] }.filter { !IPPrefix.isLinkLocal($0) }
            }
        }
        return PushAdvertisement(port: UInt16(first.port), addresses: addresses)
    }

    func validate() -> [ConfigError] {
        var errors: [ConfigError] = []
        func check(_ ok: Bool, _ key: String, _ value: some CustomStringConvertible, _ reason: String) {
            if !ok { errors.append(ConfigError(key: key, value: "\(value)", reason: reason)) }
        }
        check(maxSessions >= 1, "push.max-sessions", maxSessions, "must be at least 1")
        check(maxSubscriptionsPerSession >= 1, "push.max-subscriptions-per-session", maxSubscriptionsPerSession,
            "must be at least 1")
        check(inactivityTimeoutSeconds >= 1, "push.inactivity-timeout", inactivityTimeoutSeconds, "must be at least 1 second")
        check(keepaliveIntervalSeconds >= 10, "push.keepalive-interval", keepaliveIntervalSeconds,
            "must be at least 10 seconds (RFC 8490 §7.1)")
        if (certificateFile == nil) != (privateKeyFile == nil) {
            errors.append(ConfigError(key: certificateFile == nil ? "push.tls-cert" : "push.tls-key",
                reason: "give both push.tls-cert and push.tls-key, or neither for a self-signed certificate"))
        }
        for (index, text) in (addresses ?? []).enumerated() where IPPrefix.parseAddress(text) == nil {
            errors.append(ConfigError(key: "push.addresses[\(index)]", value: text, reason: "not an IP address"))
        }
        if listen.first?.port == 0 {
            errors.append(ConfigError(key: "push.listen", value: "\(listen[0])", reason: "port 0 cannot be advertised"))
        }
        return errors
    }

    func render() -> [String] {
        var lines = ["push:"]
        lines.append("  listen: [\(listen.map { "\"\($0)\"" }.joined(separator: ", "))]")
        if let certificateFile { lines.append("  tls-cert: \"\(certificateFile)\"") }
        if let privateKeyFile { lines.append("  tls-key: \"\(privateKeyFile)\"") }
        lines.append("  state-dir: \"\(stateDirectory)\"")
        lines.append("  on-tcp: \(onTCP)")
        if let addresses { lines.append("  addresses: [\(addresses.map { "\"\($0)\"" }.joined(separator: ", "))]") }
        lines.append("  max-sessions: \(maxSessions)")
        lines.append("  max-subscriptions-per-session: \(maxSubscriptionsPerSession)")
        lines.append("  inactivity-timeout: \(inactivityTimeoutSeconds)")
        lines.append("  keepalive-interval: \(keepaliveIntervalSeconds)")
        return lines
    }
}
