import ArgumentParser
import BuildInfo
import DNSServer
import DNSWire
import Dispatch
import Logging
import Metrics
import Prometheus
import ProxyApp
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The defaults the help text names, read from the types that own them.
private let defaults = AppConfiguration()

struct DiscoveryProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discovery-proxy",
        abstract: "Wide-area Bonjour: answers unicast DNS-SD queries for configured links from mDNS (RFC 8766).",
        discussion: """
            Each --link IFACE=DOMAIN serves the services found by mDNS on interface IFACE as the DNS zone DOMAIN.
            Example: discovery-proxy --link eth1=lab1.example.com. --listen 0.0.0.0:53
            Flags add to (--link) or override (everything else) the YAML file given with --config.
            """,
        version: "discovery-proxy \(BuildInfo.description)")

    @Option(name: .long, help: "YAML configuration file (see config/discovery-proxy.yaml).")
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Serve the link on IFACE as zone DOMAIN (repeatable).", valueName: "IFACE=DOMAIN"))
    var link: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "\(AppConfiguration.flagHelp("listen")) Repeatable. Default: \(defaults.server.listenAddresses.map { "\($0)" }.joined(separator: " and ")).",
            valueName: "ADDR:PORT"))
    var listen: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            AppConfiguration.flagHelp("server-name", showingDefault: false) + " Default: this host's name.",
            valueName: "NAME"))
    var serverName: String?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("hostmaster"), valueName: "NAME"))
    var hostmaster: String?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("log-level"), valueName: "LEVEL"))
    var logLevel: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(AppConfiguration.flagHelp("negative-timeout"), valueName: "SECONDS"))
    var negativeTimeout: Double?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(AppConfiguration.flagHelp("collection-window-ms"), valueName: "MS"))
    var collectionWindowMs: Int?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(AppConfiguration.flagHelp("browse-idle-timeout"), valueName: "SECONDS"))
    var browseIdleTimeout: Double?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("suppress-link-local"), valueName: "BOOL"))
    var suppressLinkLocal: Bool?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("admin"), valueName: "ADDR:PORT"))
    var admin: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            AppConfiguration.flagHelp("push.listen", showingDefault: false) + " Repeatable.",
            valueName: "ADDR[:PORT]"))
    var pushListen: [String] = []

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("push.tls-cert"), valueName: "FILE"))
    var tlsCert: String?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("push.tls-key"), valueName: "FILE"))
    var tlsKey: String?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("push.state-dir"), valueName: "DIR"))
    var stateDir: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(AppConfiguration.flagHelp("push.max-sessions"), valueName: "N"))
    var pushMaxSessions: Int?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(AppConfiguration.flagHelp("inventory-interval"), valueName: "SECONDS"))
    var inventoryInterval: Double?

    @Option(name: .long, help: ArgumentHelp(AppConfiguration.flagHelp("user"), valueName: "NAME"))
    var user: String?

    @Flag(name: .long, help: "Validate the configuration, print the effective configuration and exit.")
    var checkConfig = false

    @Flag(
        name: .long,
        help:
            "Print the records the parent zones need (NS and glue, b/db/lb browse-domain PTRs, reverse delegations) and exit."
    )
    var printParentZone = false

    /// Synchronous on purpose: with an async main, libdispatch parks the main thread as an
    /// exiting thread, which glibc's set*id broadcast skips, so `--user` would leave it (the
    /// process leader that `ps` and kill(2) look at) as root. Here it just waits.
    func run() throws {
        let outcome = Mutex<Result<Void, any Error>>(.success(()))
        let done = DispatchSemaphore(value: 0)
        let command = self
        Task.detached {
            do {
                try await command.serve()
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0 }.get()
    }

    func serve() async throws {
        // Report everything wrong at once: file, flags, then the merged result.
        let (configuration, readErrors) = effectiveConfiguration()
        let interfaces = InterfaceTable.system()
        var errors =
            readErrors
            + AppConfiguration.withoutEchoes(configuration.validate(interfaces: interfaces), of: readErrors)
        var warnings = configuration.warnings(interfaces: interfaces)
        if checkConfig, errors.contains(AppConfiguration.noLinks) {
            // A file with its links still commented out is a good file; it cannot run yet.
            errors.removeAll { $0 == AppConfiguration.noLinks }
            warnings.insert(
                "links: no link configured: the proxy will not start until one is given (--link IFACE=DOMAIN or a links: list)",
                at: 0)
        }
        if !errors.isEmpty {
            for error in errors { printError("discovery-proxy: error: \(error)") }
            throw ExitCode(2)
        }
        if printParentZone {
            print(ParentZone.render(configuration, interfaces: interfaces), terminator: "")
            return
        }
        if checkConfig {
            print(configuration.render(interfaces: interfaces))
            for warning in warnings { print("# warning: \(warning)") }
            print("# configuration OK")
            return
        }
        for warning in warnings { printError("discovery-proxy: warning: \(warning)") }
        // One level for every logger, which a reload changes (`log-level`).
        let level = LogLevelSwitch(Logger.Level(rawValue: configuration.logLevel) ?? .info)
        LoggingSystem.bootstrap { label in
            SwitchedLogHandler(StreamLogHandler.standardError(label: label), level: level)
        }
        do {
            // Metrics go to one Prometheus registry, served by the admin endpoint.
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            let command = self
            try await ProxyApplication(
                configuration: configuration, logger: Logger(label: "discovery-proxy"), registry: registry,
                logLevel: level, reload: { command.effectiveConfiguration() }
            ).run()
        } catch let failure as StartupError {
            printError("discovery-proxy: error: \(failure)")
            throw ExitCode(1)
        }
    }

    /// The flags that set one option each: the option's key (`AppConfiguration.options`, which
    /// parses, checks and prints it), the flag, and its value when given.
    var scalarFlags: [(key: String, flag: String, value: Any?)] {
        [
            ("server-name", "--server-name", serverName), ("hostmaster", "--hostmaster", hostmaster),
            ("log-level", "--log-level", logLevel), ("negative-timeout", "--negative-timeout", negativeTimeout),
            ("collection-window-ms", "--collection-window-ms", collectionWindowMs),
            ("browse-idle-timeout", "--browse-idle-timeout", browseIdleTimeout),
            ("suppress-link-local", "--suppress-link-local", suppressLinkLocal),
            ("push.tls-cert", "--tls-cert", tlsCert), ("push.tls-key", "--tls-key", tlsKey),
            ("push.state-dir", "--state-dir", stateDir), ("push.max-sessions", "--push-max-sessions", pushMaxSessions),
            ("inventory-interval", "--inventory-interval", inventoryInterval),
            ("user", "--user", user), ("admin", "--admin", admin),
        ]
    }

    /// The file (if any) with the flags applied: --link adds (or replaces the same interface),
    /// --listen replaces the file's list, the rest override single values.
    func effectiveConfiguration() -> (AppConfiguration, [ConfigError]) {
        var config = AppConfiguration()
        var errors: [ConfigError] = []
        if let path = self.config {
            (config, errors) = AppConfiguration.load(file: path)
        }
        for (index, text) in link.enumerated() {
            let parts = text.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                errors.append(
                    ConfigError(
                        key: "--link", value: text, reason: "expected IFACE=DOMAIN, e.g. eth1=lab1.example.com."))
                continue
            }
            do {
                let spec = AppConfiguration.LinkSpec(
                    interface: String(parts[0]), domain: try DNSName(String(parts[1])), origin: "--link[\(index)]")
                config.links.removeAll { $0.interface == spec.interface }
                config.links.append(spec)
            } catch {
                errors.append(
                    ConfigError(key: "--link[\(index)]", value: text, reason: "not a valid domain name: \(error)"))
            }
        }
        if !listen.isEmpty {
            config.server.listenAddresses = []
            for text in listen {
                guard let address = AppConfiguration.ListenAddress(text) else {
                    errors.append(
                        ConfigError(
                            key: "--listen", value: text, reason: "expected ADDR:PORT, e.g. 0.0.0.0:53 or [::]:53"))
                    continue
                }
                config.server.listenAddresses.append(address)
            }
        }
        for (key, flag, value) in scalarFlags {
            if let value { errors += config.apply(key, flag: flag, value) }
        }
        if !pushListen.isEmpty {
            config.push.listen = []
            for text in pushListen {
                guard let address = PushSettings.listenAddress(text) else {
                    errors.append(
                        ConfigError(
                            key: "--push-listen", value: text,
                            reason: "expected ADDR or ADDR:PORT, e.g. 0.0.0.0:853 or [::]"))
                    continue
                }
                config.push.listen.append(address)
            }
        }
        return (config, errors)
    }

    private func printError(_ line: String) {
        let text = Array((line + "\n").utf8)
        _ = text.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
