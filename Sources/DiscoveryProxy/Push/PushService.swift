import DNSWire
import Logging
import Synchronization

/// DNS Push for the whole server: creates a `PushSession` per stream connection that speaks
/// DSO, enforces the session limit, keeps the metrics, and ends every session at shutdown.
public final class PushService: Sendable {
    let proxy: DiscoveryProxy
    /// The settings in force; a reload changes them (`apply`). Sessions read them as they go:
    /// the session limit and subscriptions per session hold for what comes next (sessions and
    /// subscriptions already open stay), timeouts from the next message or keepalive on.
    public var configuration: PushConfiguration { live.withLock { $0 } }
    private let live: Mutex<PushConfiguration>
    /// Through the proxy's metrics factory, as every instrument of the proxy logic.
    let metrics: PushMetrics
    private let logger: Logger
    private let sessions = Mutex<(next: Int, live: [Int: PushSession], shutDown: Bool)>((0, [:], false))
    private let subscriptions = Atomic<Int>(0)

    var scheduler: any ProxyScheduler { proxy.scheduler }

    /// §6.4.1: a session with nothing subscribed is aborted after twice the inactivity
    /// timeout, at least 5 s.
    var idleLimit: Duration { max(.seconds(5), configuration.inactivityTimeout * 2) }
    /// §6.5: twice the keepalive interval without any traffic.
    var keepaliveLimit: Duration { max(configuration.keepaliveInterval, PushConfiguration.minimumKeepalive) * 2 }

    public init(proxy: DiscoveryProxy, configuration: PushConfiguration = PushConfiguration(), logger: Logger) {
        self.proxy = proxy
        self.live = Mutex(configuration)
        self.metrics = PushMetrics(factory: proxy.metrics.factory)
        self.logger = logger
        proxy.onReconfigure { [weak self] catalog in self?.review(catalog) }
    }

    /// A reload's session settings.
    public func apply(_ configuration: PushConfiguration) {
        live.withLock { $0 = configuration }
    }

    /// A reload: every session checks its client and subscriptions against the new catalog.
    private func review(_ catalog: Catalog) {
        for session in sessions.withLock({ Array($0.live.values) }) { session.review(catalog) }
    }

    /// A new session for a connection whose first DSO message just arrived. Over the limit
    /// (or after shutdown) the session exists only to refuse its first request. `client` is
    /// the connection's, as its front end built it: the ACL, views and realms ask it.
    public func openSession(client: DNSClient, transport: any PushTransport) -> PushSession {
        var logger = self.logger
        logger[metadataKey: "dns.client"] = "\(client)"
        let (id, admitted) = sessions.withLock { sessions -> (Int, Bool) in
            sessions.next += 1
            return (sessions.next, !sessions.shutDown && sessions.live.count < configuration.maxSessions)
        }
        let session = PushSession(
            id: id, service: self, transport: transport, admitted: admitted, client: client, logger: logger)
        if admitted {
            let count = sessions.withLock { sessions -> Int in
                sessions.live[id] = session
                return sessions.live.count
            }
            metrics.sessions(count)
            logger.debug("DSO session opened", metadata: ["dso.session": "\(id)"])
        } else {
            logger.info("DSO session refused: session limit", metadata: ["dso.limit": "\(configuration.maxSessions)"])
        }
        return session
    }

    @_spi(Testing) public var sessionCount: Int { sessions.withLock { $0.live.count } }
    public var subscriptionCount: Int { subscriptions.load(ordering: .relaxed) }

    /// Sends every established session a Retry Delay and closes it (RFC 8490 §7.2).
    public func shutdown() {
        let live = sessions.withLock { sessions -> [PushSession] in
            sessions.shutDown = true
            return Array(sessions.live.values)
        }
        for session in live { session.shutdown() }
    }

    func subscriptionsChanged(by delta: Int) {
        guard delta != 0 else { return }
        let total = subscriptions.add(delta, ordering: .relaxed).newValue
        metrics.subscriptions(total)
    }

    func sessionEnded(_ session: PushSession, reason: PushSessionEnd) {
        let (wasLive, count) = sessions.withLock { sessions -> (Bool, Int) in
            let wasLive = sessions.live.removeValue(forKey: session.id) != nil
            return (wasLive, sessions.live.count)
        }
        metrics.sessions(count)
        metrics.sessionEnded(reason)
        if wasLive {
            logger.debug(
                "DSO session ended", metadata: ["dso.session": "\(session.id)", "dso.reason": "\(reason.rawValue)"])
        }
    }
}

/// Why a DSO session ended (a metric label; bounded).
public enum PushSessionEnd: String, Sendable, CaseIterable {
    /// The client closed the connection.
    case client
    /// No subscription and no traffic for the inactivity limit (RFC 8490 §6.4.1).
    case inactivity
    /// No traffic at all for twice the keepalive interval (§6.5).
    case keepalive
    /// A fatal protocol error (§5.3: duplicate SUBSCRIBE, unknown response ID, ...).
    case protocolError = "protocol_error"
    /// Refused at the session limit, with a Retry Delay.
    case limit
    /// The client ACL refused the client, or a reload hid one of its subscriptions (a view),
    /// with a Retry Delay.
    case refused
    /// Server shutdown (Retry Delay sent first).
    case shutdown
}
