import DNSServer
import DNSWire
import DiscoveryProxy
import Logging
import MDNS

/// The runtime settings of the parts a configuration configures. Most settings are read
/// straight into the parts' own structures (`server`, `proxy`, `pushSessions`, `avahi`,
/// `rateLimit`); what is derived from several keys or from the interfaces is filled in here.
extension AppConfiguration {
    /// The pure proxy's view: `proxy` with the links (subnets detected from the interfaces
    /// where not configured), the server name, the client ACL and the DNS Push advertisement.
    public func proxyConfiguration(interfaces: InterfaceTable) -> ProxyConfiguration {
        var config = proxy
        config.links = self.links.map { spec in
            Link(
                interface: spec.interface, zone: spec.domain,
                subnets: (spec.subnets ?? interfaces.prefixes[spec.interface] ?? []).filter { !$0.isLinkLocal },
                services: spec.services, realm: spec.realm, hostZone: spec.hostZone, clients: spec.clients,
                nameServers: spec.nameServers, announce: spec.announce)
        }
        config.serverName = effectiveServerName
        config.allowedClients = effectiveAllowedClients(interfaces: interfaces)
        config.push = push.advertisement(interfaces: interfaces, links: config.links.map(\.interface))
        return config
    }

    /// The UDP/TCP DNS listeners' settings: `server`, with DSO sessions on the DNS port as
    /// `push.on-tcp` says.
    public var serverConfiguration: DNSServerConfiguration {
        var server = self.server
        server.dsoSessions = push.onTCP
        return server
    }

    /// The DNS Push TLS listener's settings: before its first DSO message a connection is an
    /// RFC 7766 connection with the DNS listener's idle timeout; its connection limits leave
    /// room above `push.max-sessions` for the sessions turned away with a Retry Delay.
    func pushListenerConfiguration(certificateFile: String, privateKeyFile: String) -> TLSDNSServer.Configuration {
        TLSDNSServer.Configuration(
            listenAddresses: push.listen, certificateFile: certificateFile, privateKeyFile: privateKeyFile,
            idleTimeout: server.tcpIdleTimeout, maxConnections: pushSessions.maxSessions + 64,
            maxConnectionsPerClient: pushSessions.maxSessions + 64)
    }

    /// `log-level` (validated against `logLevels`).
    var level: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }
}

extension Duration {
    /// A setting given in seconds (a file or flag value), to the millisecond: 0.57 is 570 ms.
    static func configured(seconds: Double) -> Duration {
        .milliseconds(Int((seconds * 1000).rounded()))
    }
}
