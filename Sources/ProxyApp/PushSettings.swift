import DNSServer
import DiscoveryProxy

/// DNS Push (RFC 8765) listener settings: the `push:` section of the file but the sessions'
/// limits (`PushConfiguration`), and the `--tls-*` and `--state-dir` flags.
public struct PushSettings: Sendable, Equatable {
    /// TLS listeners; empty means no TLS listener and no `_dns-push-tls` advertisement.
    public var listen: [AppConfiguration.ListenAddress] = []
    /// PEM certificate chain and key; without them a self-signed pair is made (and kept) in
    /// `stateDirectory`.
    public var certificateFile: String?
    public var privateKeyFile: String?
    public var stateDirectory = "/var/lib/discovery-proxy"
    /// Accept DSO sessions on the plain TCP listeners too: a lab and testing setting, off by
    /// default (RFC 8765 §4 runs Push over TLS only). Off, a DSO message there gets NOTIMP
    /// (RFC 8490 §5.1).
    public var onTCP = false
    /// A/AAAA of `server-name` in answers; nil means the TLS listen addresses, or this host's
    /// link addresses when those are wildcards.
    public var addresses: [String]?

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
}
