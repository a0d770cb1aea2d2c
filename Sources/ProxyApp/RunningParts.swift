import DNSServer
import DiscoveryProxy
import Logging
import MDNS
import Synchronization

/// The parts of the running daemon a configuration is put into: each is built from it at
/// start and given every reload's (`apply`), and `settings` reads back what each holds, so a
/// test can see that no option is read and then dropped (`ReloadMatrixTests`).
struct RunningParts: Sendable {
    let proxy: DiscoveryProxy
    let server: DNSServer
    /// The DNS Push TLS listener, when `push.listen` is set.
    let pushListener: TLSDNSServer?
    let push: PushService
    let rateLimiter: ResponseRateLimiter
    let avahi: any AvahiLimited
    let logLevel: LogLevelSwitch
    /// `interface-check-interval`, read by `InterfaceWatcher` each time it re-arms.
    let interfaceCheck: IntervalSetting
    /// The browse-domain advertisement (mDNS), re-planned for each configuration.
    let browseDomains: BrowseDomainAnnouncer
    /// The SRP registrar: its bounds and limits, and the links it publishes on.
    let registrar: Registrar

    /// Puts `configuration` in force; `refreshing` names links whose browses are re-created
    /// (their interface changed).
    func apply(_ configuration: AppConfiguration, interfaces: InterfaceTable, refreshing: Set<String> = []) {
        let expected = Settings.given(configuration, interfaces: interfaces, pushListener: pushListener?.current)
        logLevel.set(expected.logLevel)
        server.apply(expected.server)
        if let listener = expected.pushListener { pushListener?.apply(listener) }
        push.apply(expected.push)
        rateLimiter.apply(expected.rateLimit)
        avahi.apply(expected.avahi)
        interfaceCheck.set(expected.interfaceCheck)
        // After the limiter: the proxy's reconfigure makes every stored replay stale, so no
        // answer stored before a new rate limit is replayed past it.
        proxy.reconfigure(expected.proxy, refreshing: refreshing)
        if let advertisement = expected.browseDomains { browseDomains.publish(advertisement) }
        registrar.apply(expected.registrar, proxy: expected.proxy)
        registrar.advertise(RegistrarAdvertisement.groups(configuration: configuration, interfaces: interfaces))
    }

    /// What the parts hold now.
    var settings: Settings {
        Settings(
            proxy: proxy.configuration, server: server.current, pushListener: pushListener?.current,
            push: push.configuration, rateLimit: rateLimiter.limit, avahi: avahi.limits, logLevel: logLevel.level,
            interfaceCheck: interfaceCheck.value, browseDomains: browseDomains.published,
            registrar: registrar.configuration)
    }

    /// Every part's settings, as held or as a configuration gives them.
    struct Settings: Equatable {
        var proxy: ProxyConfiguration
        var server: DNSServerConfiguration
        var pushListener: TLSDNSServer.Configuration?
        var push: PushConfiguration
        var rateLimit: ResponseRateLimit
        var avahi: AvahiObjectLimits
        var logLevel: Logger.Level
        var interfaceCheck: Duration
        /// The advertisement last published; nil before the first.
        var browseDomains: BrowseDomainAdvertisement?
        var registrar: RegistrarConfiguration

        /// What `configuration` gives each part; the TLS listener keeps the files of `pushListener`.
        static func given(
            _ configuration: AppConfiguration, interfaces: InterfaceTable, pushListener: TLSDNSServer.Configuration?
        ) -> Settings {
            Settings(
                proxy: configuration.proxyConfiguration(interfaces: interfaces),
                server: configuration.serverConfiguration,
                pushListener: pushListener.map {
                    configuration.pushListenerConfiguration(
                        certificateFile: $0.certificateFile, privateKeyFile: $0.privateKeyFile)
                },
                push: configuration.pushSessions, rateLimit: configuration.rateLimit,
                avahi: configuration.avahi, logLevel: configuration.level,
                interfaceCheck: configuration.interfaceCheck,
                browseDomains: BrowseDomainAdvertisement(configuration: configuration, interfaces: interfaces),
                registrar: configuration.registrar)
        }
    }
}

/// The avahi backend's object limits, as a reload sees them (faked in tests).
protocol AvahiLimited: Sendable {
    var limits: AvahiObjectLimits { get }
    func apply(_ limits: AvahiObjectLimits)
}

extension AvahiBackend: AvahiLimited {}

/// A duration a reload may change.
final class IntervalSetting: Sendable {
    private let interval: Mutex<Duration>
    init(_ interval: Duration) { self.interval = Mutex(interval) }
    var value: Duration { interval.withLock { $0 } }
    func set(_ value: Duration) { interval.withLock { $0 = value } }
}
