import DiscoveryProxy
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Re-reads the configuration on SIGHUP (and on the admin endpoint's POST /reload) and
/// applies it to the running proxy without touching the DNS listeners. An invalid new
/// configuration is rejected with its reasons logged, and the old one stays in force.
final class Reloader: Sendable {
    typealias Load = @Sendable () -> (AppConfiguration, [ConfigError])

    private let load: Load
    private let proxy: DiscoveryProxy
    private let running: AppConfiguration
    /// The configuration in force: `running`, or the last one a reload applied.
    private let applied: Mutex<AppConfiguration>
    private let logger: Logger
    /// Told each configuration put in force, with the interfaces it was applied to (the
    /// browse-domain advertisement follows it).
    private let onApply: @Sendable (AppConfiguration, InterfaceTable) -> Void

    init(
        load: @escaping Load, proxy: DiscoveryProxy, running: AppConfiguration, logger: Logger,
        onApply: @escaping @Sendable (AppConfiguration, InterfaceTable) -> Void = { _, _ in }
    ) {
        self.load = load
        self.proxy = proxy
        self.running = running
        self.applied = Mutex(running)
        self.logger = logger
        self.onApply = onApply
    }

    /// Applies the configuration in force again to the interfaces as they are now (subnets,
    /// reverse zones, default client ACL), re-creating the browses of the `changed` links.
    func refresh(interfaces: InterfaceTable, changed: Set<String>) {
        let configuration = applied.withLock { $0 }
        proxy.reconfigure(configuration.proxyConfiguration(interfaces: interfaces), refreshing: changed)
        onApply(configuration, interfaces)
    }

    var links: [AppConfiguration.LinkSpec] { applied.withLock { $0.links } }

    /// The interfaces of `advertise-browse-domains` in force.
    var advertised: [String] { applied.withLock { $0.advertiseBrowseDomains } }

    /// Nil on success, else the problems (one line each).
    func reload() -> [String]? {
        let interfaces = InterfaceTable.system()
        let (candidate, readErrors) = load()
        let errors =
            readErrors + AppConfiguration.withoutEchoes(candidate.validate(interfaces: interfaces), of: readErrors)
        guard errors.isEmpty else {
            for error in errors { logger.error("reload rejected, keeping the running configuration: \(error)") }
            return errors.map(\.description)
        }
        if candidate.listen != running.listen || candidate.admin != running.admin {
            logger.warning("listen and admin addresses change only on restart; other changes applied")
        }
        if candidate.user != running.user {
            logger.warning("user changes only on restart (privileges were dropped at start); other changes applied")
        }
        applied.withLock { $0 = candidate }
        proxy.reconfigure(candidate.proxyConfiguration(interfaces: interfaces))
        onApply(candidate, interfaces)
        logger.info("configuration reloaded", metadata: ["proxy.links": "\(candidate.links.map(\.description))"])
        return nil
    }
}

/// Turns SIGHUP into `Reloader.reload()` for as long as the service group runs.
struct ReloadOnHangup: Service {
    let reloader: Reloader

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            _ = reloader.reload()
        }
    }
}

extension AppConfiguration.LinkSpec: CustomStringConvertible {
    public var description: String { "\(interface)=\(domain)" }
}
