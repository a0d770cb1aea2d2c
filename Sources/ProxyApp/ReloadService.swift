import DiscoveryProxy
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Re-reads the configuration on SIGHUP (and on the admin endpoint's POST /reload) and puts
/// it in force in the running parts (`RunningParts.apply`) without touching the sockets. An
/// invalid new configuration is rejected with its reasons logged, and the old one stays in
/// force. Which keys changed is found by walking the option table; a changed key that takes
/// effect on restart only (`ConfigOption.Effect`) is named in the log and in the outcome.
final class Reloader: Sendable {
    typealias Load = @Sendable () -> (AppConfiguration, [ConfigError])

    private let load: Load
    private let parts: RunningParts
    /// What the daemon started with: what the restart-only keys still hold.
    private let started: AppConfiguration
    /// The configuration in force: `started`, or the last one a reload applied.
    private let applied: Mutex<AppConfiguration>
    private let logger: Logger
    private let interfaces: @Sendable () -> InterfaceTable

    init(
        load: @escaping Load, parts: RunningParts, started: AppConfiguration, logger: Logger,
        interfaces: @escaping @Sendable () -> InterfaceTable = { InterfaceTable.system() }
    ) {
        self.load = load
        self.parts = parts
        self.started = started
        self.applied = Mutex(started)
        self.logger = logger
        self.interfaces = interfaces
    }

    /// Applies the configuration in force again to the interfaces as they are now (subnets,
    /// reverse zones, default client ACL), re-creating the browses of the `changed` links.
    func refresh(interfaces: InterfaceTable, changed: Set<String>) {
        parts.apply(applied.withLock { $0 }, interfaces: interfaces, refreshing: changed)
    }

    var links: [AppConfiguration.LinkSpec] { applied.withLock { $0.links } }

    /// The interfaces of `advertise-browse-domains` in force.
    var advertised: [String] { applied.withLock { $0.advertiseBrowseDomains } }

    /// A changed key that waits for a restart.
    struct Restart: Equatable, CustomStringConvertible {
        var key: String
        var because: String
        var description: String { "\(key): changed, takes effect on restart only (\(because))" }
    }

    enum Outcome: Equatable {
        /// In force: the keys whose values changed in the running parts, and the changed keys
        /// that wait for a restart.
        case applied(changed: [String], restart: [Restart])
        /// Nothing changed; one line per problem.
        case rejected([String])
    }

    func reload() -> Outcome {
        let interfaces = self.interfaces()
        let (candidate, readErrors) = load()
        let errors =
            readErrors + AppConfiguration.withoutEchoes(candidate.validate(interfaces: interfaces), of: readErrors)
        guard errors.isEmpty else {
            for error in errors { logger.error("reload rejected, keeping the running configuration: \(error)") }
            return .rejected(errors.map(\.description))
        }
        // In force: the candidate with what the restart-only keys hold since the start. Such a
        // key is compared with that: changed and changed back, it needs no restart.
        var inForce = candidate
        var restart: [Restart] = []
        for option in AppConfiguration.options {
            guard case .restart(let because) = option.effect else { continue }
            option.keep(started, &inForce)
            if option.render(candidate, interfaces) != option.render(started, interfaces) {
                restart.append(Restart(key: option.key, because: because))
            }
        }
        let previous = applied.withLock { $0 }
        let changed = AppConfiguration.options.filter {
            $0.render(inForce, interfaces) != $0.render(previous, interfaces)
        }.map(\.key)
        applied.withLock { $0 = inForce }
        parts.apply(inForce, interfaces: interfaces)
        for waiting in restart {
            logger.warning(
                "reload: \(waiting.key) changed; it takes effect on restart only (\(waiting.because)), the rest is applied",
                metadata: ["config.key": "\(waiting.key)"])
        }
        logger.info(
            "configuration reloaded",
            metadata: [
                "config.changed": "\(changed.joined(separator: ","))",
                "proxy.links": "\(candidate.links.map(\.description))",
            ])
        return .applied(changed: changed, restart: restart)
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
