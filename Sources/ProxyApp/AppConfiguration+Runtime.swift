import DNSServer
import DNSWire
import DiscoveryProxy
import Logging
import MDNS

/// The one place where the file's and the flags' settings become the runtime settings of the
/// parts they configure: the proxy logic, the DNS listeners, the DNS Push listener and
/// sessions. The file's units (seconds as numbers) become `Duration`s here and nowhere else.
extension AppConfiguration {
    /// The pure proxy's view, with subnets detected from the interfaces where not configured.
    public func proxyConfiguration(interfaces: InterfaceTable) -> ProxyConfiguration {
        let links = self.links.map { spec in
            Link(interface: spec.interface, zone: spec.domain,
                subnets: (spec.subnets ?? interfaces.prefixes[spec.interface] ?? []).filter { !$0.isLinkLocal },
                services: spec.services, realm: spec.realm, hostZone: spec.hostZone, clients: spec.clients,
                nameServers: spec.nameServers, announce: spec.announce)
        }
        var config = ProxyConfiguration(links: links, serverName: effectiveServerName, hostmaster: hostmaster)
        config.nameServers = nameServers
        config.negativeTimeout = .configured(seconds: negativeTimeoutSeconds)
        config.collectionWindow = .milliseconds(collectionWindowMilliseconds)
        config.learnsAnswerTimes = learnsAnswerTimes
        config.browseIdleTimeout = .configured(seconds: browseIdleTimeoutSeconds)
        config.suppressLinkLocal = suppressLinkLocal
        config.mdnsQueriesPerSecond = mdnsQueriesPerSecond
        config.mdnsQueryBurst = mdnsQueryBurst
        config.mdnsAnnouncePacing = AnnouncementPacing(packetsPerSecond: mdnsAnnounceRate, burst: mdnsAnnounceBurst)
        config.maxUDPPayload = maxUDPPayload
        config.optimisticAnswers = optimisticAnswers
        config.optimisticMaxStaleness = .configured(seconds: optimisticMaxStalenessSeconds)
        config.inventoryInterval =
            inventoryIntervalSeconds > 0 ? .configured(seconds: inventoryIntervalSeconds) : nil
        config.inventoryMaxTypes = inventoryMaxTypes
        config.allowedClients = effectiveAllowedClients(interfaces: interfaces)
        config.privateRealms = privateRealms
        config.push = push.advertisement(interfaces: interfaces, links: links.map(\.interface))
        config.maxBrowses = maxBrowses
        return config
    }

    /// The UDP/TCP DNS listeners' settings.
    public var serverConfiguration: DNSServerConfiguration {
        var server = DNSServerConfiguration(listenAddresses: listen)
        server.tcpIdleTimeout = .configured(seconds: tcpIdleTimeoutSeconds)
        server.maxTCPConnections = tcpMaxConnections
        server.maxTCPConnectionsPerClient = tcpMaxConnectionsPerClient
        server.maxTCPConnectionsPerSubnet = tcpMaxConnectionsPerSubnet
        if tcpMaxConnectionLifetimeSeconds > 0 {
            server.tcpMaxConnectionLifetime = .configured(seconds: tcpMaxConnectionLifetimeSeconds)
        }
        server.maxInFlightPerConnection = tcpMaxInFlightPerConnection
        server.replayAnswers = replayAnswers
        server.dsoSessions = push.onTCP
        return server
    }

    /// The DNS Push TLS listener's settings: before its first DSO message a connection is an
    /// RFC 7766 connection with the DNS listener's idle timeout; its connection limits leave
    /// room above `push.max-sessions` for the sessions turned away with a Retry Delay.
    func pushListenerConfiguration(certificateFile: String, privateKeyFile: String) -> TLSDNSServer.Configuration {
        TLSDNSServer.Configuration(
            listenAddresses: push.listen, certificateFile: certificateFile, privateKeyFile: privateKeyFile,
            idleTimeout: .configured(seconds: tcpIdleTimeoutSeconds), maxConnections: push.maxSessions + 64,
            maxConnectionsPerClient: push.maxSessions + 64)
    }

    /// The avahi backend's object limits.
    var avahiLimits: AvahiObjectLimits {
        AvahiObjectLimits(perClient: avahiObjectsPerClient, total: avahiObjectBudget)
    }

    /// `log-level` (validated against `logLevels`).
    var level: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }

    /// The DNS Push sessions' settings.
    var pushConfiguration: PushConfiguration {
        var configuration = PushConfiguration()
        configuration.maxSessions = push.maxSessions
        configuration.maxSubscriptionsPerSession = push.maxSubscriptionsPerSession
        configuration.inactivityTimeout = .configured(seconds: push.inactivityTimeoutSeconds)
        configuration.keepaliveInterval = .configured(seconds: push.keepaliveIntervalSeconds)
        return configuration
    }
}

extension Duration {
    /// A setting given in seconds (a file or flag value), to the millisecond: 0.57 is 570 ms.
    static func configured(seconds: Double) -> Duration {
        .milliseconds(Int((seconds * 1000).rounded()))
    }
}
