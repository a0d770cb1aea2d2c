import DNSServer
import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

@testable import ProxyApp

/// Issue 43: a reload applies what it is told. Every key of the option table, changed alone in
/// a reload, either changes what a running part holds, to exactly what the new configuration
/// gives it, or is named as waiting for a restart (and changes nothing live). A new option
/// that is read and then ignored fails `everyOptionTakesEffect`; one without a value below fails
/// `everyOptionHasAChange`.
@Suite("Reload matrix: every option, changed in a reload")
struct ReloadMatrixTests {
    /// A valid value for each key that differs from `base`'s.
    nonisolated(unsafe) static let changes: [String: Any] = [
        "server-name": "proxy2.example.",
        "name-servers": ["proxy.example.", "ns2.example."],
        "hostmaster": "admin.example.",
        "listen": ["127.0.0.1:5301"],
        "links": [
            ["interface": "lab0", "domain": "lab1.example."], ["interface": "lab1", "domain": "lab2.example."],
        ],
        "negative-timeout": 4.0,
        "collection-window-ms": 100,
        "learn-answer-times": false,
        "browse-idle-timeout": 300.0,
        "suppress-link-local": false,
        "mdns-query-rate": 5.0,
        "mdns-query-burst": 7.0,
        "mdns-announce-rate": 30.0,
        "mdns-announce-burst": 50.0,
        "max-udp-payload": 4096,
        "optimistic-answers": false,
        "optimistic-max-staleness": 30.0,
        "replay-answers": false,
        "inventory-interval": 0.0,
        "inventory-max-types": 50,
        "log-level": "debug",
        "admin": "127.0.0.1:8054",
        "allow-clients": ["192.0.2.0/24", "127.0.0.0/8"],
        "advertise-browse-domains": ["lab0"],
        "private-realms": ["campus": ["198.51.100.0/24"]],
        "tcp.idle-timeout": 20.0,
        "tcp.max-connections": 2048,
        "tcp.max-connections-per-client": 8,
        "tcp.max-connections-per-subnet": 16,
        "tcp.max-connection-lifetime": 600.0,
        "tcp.max-in-flight-per-connection": 16,
        "avahi.objects-per-client": 500,
        "avahi.object-budget": 4096,
        "push.listen": ["127.0.0.1:8854"],
        "push.tls-cert": "/etc/discovery-proxy/other.crt",
        "push.tls-key": "/etc/discovery-proxy/other.key",
        "push.state-dir": "/var/lib/discovery-proxy-2",
        "push.on-tcp": true,
        "push.addresses": ["192.0.2.1"],
        "push.max-sessions": 10,
        "push.max-subscriptions-per-session": 20,
        "push.inactivity-timeout": 60.0,
        "push.keepalive-interval": 600.0,
        "max-browses": 100,
        "interface-check-interval": 30.0,
        "rate-limit.responses-per-second": 100,
        "rate-limit.burst": 300,
        "rate-limit.ipv4-prefix-length": 28,
        "rate-limit.ipv6-prefix-length": 64,
        "rate-limit.slip": 3,
        "user": "nobody",
        "srp.enabled": true,
        "srp.store": "/tmp/other-registrations.sqlite",
        "srp.lease-min": 60,
        "srp.lease-max": 3600,
        "srp.key-lease-min": 120,
        "srp.key-lease-max": 86400,
        "srp.max-hosts": 50,
        "srp.max-hosts-per-client": 2,
        "srp.max-update-size": 4096,
        "srp.max-update-rate": 50,
    ]

    static let interfaces = InterfaceTable(
        prefixes: ["lab0": [IPPrefix("192.0.2.1/24")!], "lab1": [IPPrefix("198.51.100.1/24")!]], up: ["lab0", "lab1"])

    /// The running configuration: one link, a Push listener (so that its limits are in play),
    /// rate limiting on (so that each of its keys has an effect on its own).
    static var base: AppConfiguration {
        var config = AppConfiguration()
        config.serverName = try! DNSName("proxy.example.")
        config.links = [.init(interface: "lab0", domain: try! DNSName("lab1.example."))]
        config.server.listenAddresses = [AppConfiguration.ListenAddress(host: "127.0.0.1", port: 5300)]
        config.push.listen = [AppConfiguration.ListenAddress(host: "127.0.0.1", port: 8853)]
        config.push.certificateFile = "/etc/discovery-proxy/push.crt"
        config.push.privateKeyFile = "/etc/discovery-proxy/push.key"
        config.rateLimit.responsesPerSecond = 50
        return config
    }

    /// The running parts, built from `base` as the application builds them.
    struct Daemon {
        let parts: RunningParts
        let reloader: Reloader

        init(reloadingTo candidate: @escaping @Sendable () -> AppConfiguration) {
            let base = ReloadMatrixTests.base
            let interfaces = ReloadMatrixTests.interfaces
            let logger = Logger(label: "reload-matrix")
            let proxy = DiscoveryProxy(
                configuration: base.proxyConfiguration(interfaces: interfaces), backend: SilentBackend(),
                scheduler: ManualScheduler(), logger: logger)
            let listener = TLSDNSServer(
                configuration: base.pushListenerConfiguration(
                    certificateFile: "/run/cert.pem", privateKeyFile: "/run/key.pem"),
                responder: SilentResponder())
            parts = RunningParts(
                proxy: proxy, server: DNSServer(configuration: base.serverConfiguration, responder: SilentResponder()),
                pushListener: listener,
                push: PushService(proxy: proxy, configuration: base.pushSessions, logger: logger),
                rateLimiter: ResponseRateLimiter(base.rateLimit), avahi: LimitsHolder(base.avahi),
                logLevel: LogLevelSwitch(base.level),
                interfaceCheck: IntervalSetting(base.interfaceCheck),
                browseDomains: BrowseDomainAnnouncer(publisher: NullPublisher(), logger: logger),
                registrar: Registrar(
                    configuration: base.registrar, proxy: base.proxyConfiguration(interfaces: interfaces),
                    table: RegistrationTable(), store: nil, publisher: NullPublisher(), scheduler: ManualScheduler(),
                    logger: logger, clock: { 0 }))
            parts.apply(base, interfaces: interfaces)
            reloader = Reloader(
                load: { (candidate(), []) }, parts: parts, started: base, logger: logger, interfaces: { interfaces })
        }
    }

    static func changed(_ option: ConfigOption) throws -> AppConfiguration {
        var config = base
        var reader = ConfigReader()
        let value = try #require(changes[option.key], "no change for \(option.key) in ReloadMatrixTests.changes")
        option.read(&reader, value, option.key, &config)
        #expect(reader.errors.isEmpty, "\(option.key): \(reader.errors)")
        #expect(
            option.render(config, interfaces) != option.render(base, interfaces),
            "\(option.key): the change is the value it had")
        return config
    }

    @Test("every option has a change that validates")
    func everyOptionHasAChange() throws {
        #expect(Set(Self.changes.keys) == Set(AppConfiguration.options.map(\.key)))
        for option in AppConfiguration.options {
            let config = try Self.changed(option)
            #expect(
                config.validate(interfaces: Self.interfaces).isEmpty,
                "\(option.key): \(config.validate(interfaces: Self.interfaces))")
        }
    }

    @Test("every option, changed in a reload, takes effect or is named as waiting for a restart")
    func everyOptionTakesEffect() throws {
        for option in AppConfiguration.options {
            let candidate = try Self.changed(option)
            let daemon = Daemon(reloadingTo: { candidate })
            let before = daemon.parts.settings
            let expectedBefore = RunningParts.Settings.given(
                Self.base, interfaces: Self.interfaces, pushListener: daemon.parts.pushListener?.current)
            #expect(before == expectedBefore, "the parts hold what the running configuration gives them")
            let outcome = daemon.reloader.reload()
            guard case .applied(let changed, let restart) = outcome else {
                Issue.record("\(option.key): reload rejected: \(outcome)")
                continue
            }
            let after = daemon.parts.settings
            switch option.effect {
            case .reload:
                // A derived default may change with it (tcp.max-connections-per-subnet).
                #expect(changed.first == option.key, "\(option.key): the reload saw \(changed) change")
                #expect(restart.isEmpty, "\(option.key)")
                #expect(after != before, "\(option.key) was accepted and changed nothing in the running parts")
                let expected = RunningParts.Settings.given(
                    candidate, interfaces: Self.interfaces, pushListener: daemon.parts.pushListener?.current)
                #expect(after == expected, "\(option.key): the running parts do not hold what it gives them")
            case .restart(let because):
                #expect(restart == [Reloader.Restart(key: option.key, because: because)], "\(option.key)")
                #expect(changed.isEmpty, "\(option.key) waits for a restart but the reload saw \(changed) change")
                #expect(after == before, "\(option.key) waits for a restart but changed a running part")
            }
        }
    }

    @Test("a restart-only key changed and changed back asks for no restart; an unchanged file changes nothing")
    func changedBack() throws {
        let listen = try #require(AppConfiguration.option("listen"))
        let candidate = Mutex(try Self.changed(listen))
        let daemon = Daemon(reloadingTo: { candidate.withLock { $0 } })
        guard case .applied(_, let first) = daemon.reloader.reload() else { throw Failure() }
        #expect(first.map(\.key) == ["listen"])
        #expect(
            first.first?.description
                == "listen: changed, takes effect on restart only (the DNS sockets are bound at start)")
        candidate.withLock { $0 = Self.base }
        #expect(daemon.reloader.reload() == .applied(changed: [], restart: []))
        #expect(daemon.reloader.reload() == .applied(changed: [], restart: []))
    }

    struct Failure: Error {}
}

/// A backend whose queries never hear anything.
private final class SilentBackend: MDNSBackend {
    final class Handle: MDNSQueryHandle { func cancel() {} }
    func startQuery(_ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver) throws(MDNSError)
        -> any MDNSQueryHandle
    {
        Handle()
    }
    var state: MDNSBackendState { .running }
}

private struct SilentResponder: DNSResponder {
    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {}
}

private final class NullPublisher: MDNSPublisher {
    func publish(_ groups: [MDNSGroup]) {}
    func shutdown() {}
}

private final class LimitsHolder: AvahiLimited {
    private let held: Mutex<AvahiObjectLimits>
    init(_ limits: AvahiObjectLimits) { held = Mutex(limits) }
    var limits: AvahiObjectLimits { held.withLock { $0 } }
    func apply(_ limits: AvahiObjectLimits) { held.withLock { $0 = limits } }
}
