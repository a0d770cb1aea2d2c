import AdminHTTP
import DNSServer
import DNSWire
import DiscoveryProxy
import Logging
import MDNS
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A failure to start: printed as one line, exit status 1 (port in use, no permission,
/// avahi client library failure).
public struct StartupError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The daemon: avahi backend, proxy logic and DNS listeners, run until SIGTERM/SIGINT.
public struct ProxyApplication: Sendable {
    public let configuration: AppConfiguration
    public let logger: Logger
    /// Reads the configuration again (file plus the same flags), for SIGHUP reloads.
    public let reload: @Sendable () -> (AppConfiguration, [ConfigError])
    /// Where the executable's metrics go (it bootstrapped swift-metrics with this registry);
    /// the admin endpoint serves it at /metrics.
    public let registry: PrometheusCollectorRegistry
    /// The level of every logger of the process (the executable bootstrapped logging with
    /// `SwitchedLogHandler`s on it); a reload sets it.
    public let logLevel: LogLevelSwitch

    public init(
        configuration: AppConfiguration, logger: Logger, registry: PrometheusCollectorRegistry,
        logLevel: LogLevelSwitch, reload: @escaping @Sendable () -> (AppConfiguration, [ConfigError])
    ) {
        self.configuration = configuration
        self.logger = logger
        self.registry = registry
        self.logLevel = logLevel
        self.reload = reload
    }

    public func run() async throws {
        // The proxy's timers and the gateway's on a thread each, so that a gateway pass (blocking
        // avahi calls for every announcement it changes) never holds up a collection window.
        let timers = Timers(
            proxy: EventLoopScheduler(), gateway: EventLoopScheduler(),
            registrar: configuration.registrar.isEnabled ? EventLoopScheduler() : nil,
            registrarReaders: configuration.registrar.isEnabled ? [EventLoopScheduler(), EventLoopScheduler()] : [])
        do {
            try await run(timers: timers)
        } catch {
            await timers.shutdown()
            throw error
        }
        await timers.shutdown()
    }

    private struct Timers {
        let proxy: EventLoopScheduler
        let gateway: EventLoopScheduler
        /// The SRP registrar's updates, store writes and expiry, when `srp.enabled`: an fsync
        /// never waits on a DNS event loop or in front of the proxy's timers. Off, the proxy's
        /// thread answers its NOTIMPs.
        let registrar: EventLoopScheduler?
        /// Where the registrar reads updates and checks their SIG(0), beside `registrar`: two,
        /// so that a burst of new devices is read on both cores.
        let registrarReaders: [EventLoopScheduler]

        func shutdown() async {
            await proxy.shutdown()
            await gateway.shutdown()
            // Readers first: what one hands on afterwards still reaches the registrar's thread.
            for reader in registrarReaders { await reader.shutdown() }
            await registrar?.shutdown()
        }
    }

    /// Everything but the timers' threads, which outlive what this sets up and tears down
    /// (the proxy's and the gateway's shutdowns cancel their timers).
    private func run(timers: Timers) async throws {
        let interfaces = InterfaceTable.system()
        let proxyConfiguration = configuration.proxyConfiguration(interfaces: interfaces)
        let backend: AvahiBackend
        do {
            backend = try AvahiBackend(
                logger: logger, clientObjectLimit: configuration.avahi.perClient,
                totalObjectBudget: configuration.avahi.total)
        } catch {
            throw StartupError("cannot start the avahi client: \(error)")
        }
        defer { backend.shutdown() }
        // Listens only on the gateway's far links, once it has routes (`Gateway.start`).
        let snooper: LinkSnooper
        do {
            snooper = try LinkSnooper(logger: logger)
        } catch {
            throw StartupError("cannot start the mDNS listener: \(error)")
        }
        defer { snooper.shutdown() }
        // What devices register is published by the registrar's own responder, which the
        // router's avahi-daemon never hears: the proxy's browses get it from here.
        let browsable =
            configuration.registrar.isEnabled
            ? LocalRecordsBackend(
                wrapping: backend, later: { [timers] work in _ = timers.proxy.schedule(after: .zero, work) })
            : nil
        let proxy = DiscoveryProxy(
            configuration: proxyConfiguration, backend: browsable ?? backend, scheduler: timers.proxy, logger: logger,
            linkCache: snooper)
        defer { proxy.shutdown() }
        for link in proxyConfiguration.links {
            logger.info(
                "serving link",
                metadata: [
                    "link.interface": "\(link.interface)", "link.zone": "\(link.zone)",
                    "link.subnets": "\(link.subnets.map(\.description).joined(separator: ","))",
                ])
        }

        if let advice = configuration.negativeTimeoutAdvice {
            logger.warning("negative-timeout \(configuration.proxy.negativeTimeout / .seconds(1)) s is \(advice)")
        }

        ResourceLimits.raiseOpenFiles(forConnections: configuration.server.maxTCPConnections, logger: logger)
        let serverConfiguration = configuration.serverConfiguration
        // Wrapped even with the limit off, when it passes every answer through: its counters
        // (`dns_rrl_responses_total`, on the dashboard) are then exported at zero.
        let rateLimiter = ResponseRateLimiter(configuration.rateLimit)
        // SRP updates (srp.enabled; NOTIMP otherwise) on the same listeners, UDP, TCP and TLS.
        let registration = try RegistrarService.start(
            configuration: configuration, proxy: proxyConfiguration, interfaces: interfaces, browsable: browsable,
            scheduler: timers.registrar ?? timers.proxy, readers: timers.registrarReaders, logger: logger,
            // dns_acl_refused_total and dns_link_refused_total count updates too.
            refused: { [proxy] in proxy.noteRefused(client: $0, link: $1, asking: "UPDATE") })
        defer { registration.shutdown() }
        let responder: any DNSResponder = RateLimitedResponder(
            UpdateRouting(queries: ProxyResponder(proxy: proxy), registrar: registration.registrar),
            limiter: rateLimiter)
        if configuration.rateLimit.isEnabled {
            logger.info(
                "UDP response rate limit on",
                metadata: [
                    "rrl.per_second": "\(configuration.rateLimit.responsesPerSecond)",
                    "rrl.prefixes":
                        "/\(configuration.rateLimit.ipv4PrefixLength) /\(configuration.rateLimit.ipv6PrefixLength)",
                    "rrl.slip": "\(configuration.rateLimit.slip)",
                ])
        }
        let push = PushService(proxy: proxy, configuration: configuration.pushSessions, logger: logger)
        defer { push.shutdown() }
        let sessions = SessionResponder(queries: responder, push: push)
        // --user: every listener binds as root first, then the process becomes that user.
        let privileges = PrivilegeDrop(
            user: try configuration.user.map(Self.lookup),
            pendingBinds: 1 + (configuration.admin == nil ? 0 : 1) + (configuration.push.listen.isEmpty ? 0 : 1),
            logger: logger)
        // DSO on the DNS port as `push.on-tcp` says (`DNSServerConfiguration.dsoSessions`).
        let server = DNSServer(
            configuration: serverConfiguration, responder: sessions, logger: logger,
            onBound: { _ in privileges.bound() })

        let publisher: AvahiPublisher
        do {
            publisher = try AvahiPublisher(logger: logger)
        } catch {
            throw StartupError("cannot start the avahi client: \(error)")
        }
        defer { publisher.shutdown() }  // withdraws the browse domains (mDNS goodbyes)
        let browseDomains = BrowseDomainAnnouncer(publisher: publisher, logger: logger)
        browseDomains.apply(configuration, interfaces: interfaces)
        let gateway = try makeGateway(proxy: proxy, scheduler: timers.gateway, snooper: snooper)
        defer { gateway.shutdown() }
        let pushListener = try makePushListener(
            responder: sessions, serverName: proxyConfiguration.serverName, onBound: { privileges.bound() })
        let parts = RunningParts(
            proxy: proxy, server: server, pushListener: pushListener, push: push, rateLimiter: rateLimiter,
            avahi: backend, logLevel: logLevel,
            interfaceCheck: IntervalSetting(configuration.interfaceCheck),
            browseDomains: browseDomains, registrar: registration.registrar)
        let reloader = Reloader(load: reload, parts: parts, started: configuration, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: server), .init(service: ReloadOnHangup(reloader: reloader)),
            .init(
                service: InterfaceWatcher(
                    reloader: reloader, interval: parts.interfaceCheck, scheduler: timers.proxy, logger: logger)),
        ]
        if let pushListener { services.append(.init(service: pushListener)) }
        if let admin = configuration.admin {
            let source = AdminSource(
                proxy: proxy, server: server, backend: backend, reloader: reloader, gateway: gateway.gateway,
                registrar: registration.registrar, startedAt: Date())
            let logger = self.logger
            services.append(
                .init(
                    service: makeAdminServer(
                        host: admin.host, port: admin.port, source: source, registry: registry, logger: logger,
                        onServerRunning: { port in
                            logger.info(
                                "admin HTTP listening",
                                metadata: ["admin.server.listenAddresses": "\(admin.host):\(port)"])
                            privileges.bound()
                        })))
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as DNSServerError {
            throw StartupError(error)
        } catch let error as AdminServerError {
            throw StartupError(error)
        } catch {
            // ServiceGroup may wrap a service's error; keep the line short and specific.
            throw StartupError("\(error)")
        }
        logger.info("shut down", metadata: ["proxy.stats": "\(proxy.stats)"])
    }

    /// The mDNS gateway (`links[].announce`), with a responder of its own for what it announces
    /// (`LinkResponder`: no avahi connection; its thread starts once something is announced).
    /// Its shutdown leaves the browses; the responder's withdraws the announcements (goodbyes).
    private func makeGateway(proxy: DiscoveryProxy, scheduler: any ProxyScheduler, snooper: LinkSnooper) throws
        -> GatewayHandle
    {
        let collisions = CollisionForwarder()
        let publisher: LinkResponder
        do {
            // The gateway sets the configured announcement budget at start and on reload.
            publisher = try LinkResponder(
                logger: logger, onCollision: { collisions.forward($0) }, onError: { collisions.failed(on: $0) })
        } catch {
            throw StartupError("cannot start the mDNS responder: \(error)")
        }
        let gateway = Gateway(
            proxy: proxy, publisher: publisher, scheduler: scheduler, logger: logger,
            listen: { snooper.listen(on: $0) })
        collisions.gateway.withLock { $0 = gateway }
        gateway.start()
        return GatewayHandle(gateway: gateway, publisher: publisher)
    }

    /// The TLS listener for DNS Push, when `push.listen` is set; logs the certificate's fingerprint.
    private func makePushListener(
        responder: SessionResponder, serverName: DNSName, onBound: @escaping @Sendable () -> Void
    ) throws -> TLSDNSServer? {
        let settings = configuration.push
        guard !settings.listen.isEmpty else { return nil }
        let identity = try TLSIdentity.load(settings: settings, serverName: serverName)
        logger.info(
            identity.generated ? "DNS Push: self-signed TLS certificate created" : "DNS Push: TLS certificate loaded",
            metadata: ["tls.cert": "\(identity.certificateFile)", "tls.sha256": "\(identity.fingerprint)"])
        do {
            _ = try TLSDNSServer.makeContext(
                certificateFile: identity.certificateFile, privateKeyFile: identity.privateKeyFile)
        } catch {
            throw StartupError("\(error)")
        }
        let tls = configuration.pushListenerConfiguration(
            certificateFile: identity.certificateFile, privateKeyFile: identity.privateKeyFile)
        return TLSDNSServer(configuration: tls, responder: responder, logger: logger, onBound: { _ in onBound() })
    }

    private static func lookup(_ name: String) throws(StartupError) -> UnprivilegedUser {
        guard let user = UnprivilegedUser.lookup(name) else { throw StartupError("user: \"\(name)\": no such user") }
        return user
    }
}

/// The gateway and its publisher, shut down together: the browses are left first, then the
/// announcements withdrawn.
struct GatewayHandle: Sendable {
    let gateway: Gateway
    let publisher: LinkResponder

    func shutdown() {
        gateway.shutdown()
        publisher.shutdown()
    }
}

/// Hands the publisher's collisions (on avahi's poll thread) to the gateway created after it.
private final class CollisionForwarder: Sendable {
    let gateway = Mutex<Gateway?>(nil)
    func forward(_ key: MDNSGroup.Key) { gateway.withLock { $0 }?.collided(key) }
    func failed(on interface: String) { gateway.withLock { $0 }?.publishFailed(on: interface) }
}
