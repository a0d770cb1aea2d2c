import CoreMetrics
import Synchronization

/// A snapshot of the front ends' counters (`DNSServer.stats()`).
public struct DNSServerStats: Sendable, Hashable {
    /// Queries handed to the responder.
    public var udpQueriesReceived = 0
    public var tcpQueriesReceived = 0
    /// Answers written.
    public var udpAnswersSent = 0
    public var tcpAnswersSent = 0
    /// Queries the responder answered with nil (nothing sent).
    public var queriesUnanswered = 0
    /// Oversized UDP datagrams, zero-length TCP messages, answers too large to frame.
    public var malformedDropped = 0
    /// UDP datagrams dropped because the server was shutting down.
    public var udpDroppedShuttingDown = 0

    /// Connections open now (admitted, not yet closed).
    public var tcpConnectionsOpen = 0
    /// Every accepted connection, including those closed at once for a limit.
    public var tcpConnectionsAccepted = 0
    /// Closed after `tcpIdleTimeout` without a query in flight.
    public var tcpClosedIdle = 0
    /// Closed at once because of `maxTCPConnections`, `maxTCPConnectionsPerClient` or
    /// `maxTCPConnectionsPerSubnet`.
    public var tcpClosedLimit = 0
    /// Closed after `tcpMaxConnectionLifetime`, once its answers were sent.
    public var tcpClosedLifetime = 0
    /// Closed after an I/O or framing error.
    public var tcpClosedError = 0
    /// Closed by the client (or after the client's half-close, once its answers were sent).
    public var tcpClosedClient = 0
    /// Closed by the server's graceful shutdown.
    public var tcpClosedShutdown = 0

    public init() {}
}

/// Why a TCP connection was closed.
enum TCPCloseReason: String, Sendable {
    case idle
    case limit
    case lifetime
    case error
    case client
    case shutdown
}

/// The front ends' instruments, all of them declared in this file and incremented where the
/// event happens: `dns_queries_received_total{transport}`, `dns_tcp_connections_total{event}`
/// (`DNSServerCounters`) and `dns_rrl_responses_total{action}` (`RateLimitCounts`). The
/// status page reads `DNSServerStats` snapshots of the same events; nothing is mirrored.
final class DNSServerMetrics: Sendable {
    let receivedUDP: Counter
    let receivedTCP: Counter
    let accepted: Counter
    private let closed: [TCPCloseReason: Counter]

    /// `factory`: the executable's bootstrapped factory by default, `TestMetrics` in tests.
    init(factory: any MetricsFactory = MetricsSystem.factory) {
        receivedUDP = Counter(label: "dns_queries_received_total", dimensions: [("transport", "udp")], factory: factory)
        receivedTCP = Counter(label: "dns_queries_received_total", dimensions: [("transport", "tcp")], factory: factory)
        accepted = Counter(label: "dns_tcp_connections_total", dimensions: [("event", "accepted")], factory: factory)
        var closed: [TCPCloseReason: Counter] = [:]
        // A shutdown closes every connection at once; it is not a connection event to watch.
        for reason in [TCPCloseReason.idle, .limit, .lifetime, .error, .client] {
            closed[reason] = Counter(
                label: "dns_tcp_connections_total", dimensions: [("event", "closed_\(reason.rawValue)")], factory: factory)
        }
        self.closed = closed
    }

    func connectionClosed(_ reason: TCPCloseReason) { closed[reason]?.increment() }
}

/// Thread-safe counters shared by all handlers of one server, with the metrics they feed
/// (none for a listener whose events are not exported). The four per-query counters are
/// atomics (no lock on the answer path); the rest change rarely and sit behind a mutex.
final class DNSServerCounters: Sendable {
    private let state = Mutex(DNSServerStats())
    private let udpQueriesReceived = Atomic<Int>(0)
    private let tcpQueriesReceived = Atomic<Int>(0)
    let udpAnswersSent = Atomic<Int>(0)
    let tcpAnswersSent = Atomic<Int>(0)
    private let metrics: DNSServerMetrics?

    init(metrics: DNSServerMetrics? = nil) {
        self.metrics = metrics
    }

    func queryReceived(overTCP: Bool) {
        if overTCP {
            tcpQueriesReceived.add(1, ordering: .relaxed)
            metrics?.receivedTCP.increment()
        } else {
            udpQueriesReceived.add(1, ordering: .relaxed)
            metrics?.receivedUDP.increment()
        }
    }

    /// Every accepted connection, including those closed at once for a limit.
    func connectionAccepted(admitted: Bool) {
        state.withLock { stats in
            stats.tcpConnectionsAccepted += 1
            if admitted { stats.tcpConnectionsOpen += 1 }
        }
        metrics?.accepted.increment()
    }

    func snapshot() -> DNSServerStats {
        var stats = self.state.withLock { $0 }
        stats.udpQueriesReceived = self.udpQueriesReceived.load(ordering: .relaxed)
        stats.tcpQueriesReceived = self.tcpQueriesReceived.load(ordering: .relaxed)
        stats.udpAnswersSent = self.udpAnswersSent.load(ordering: .relaxed)
        stats.tcpAnswersSent = self.tcpAnswersSent.load(ordering: .relaxed)
        return stats
    }

    func update(_ body: (inout DNSServerStats) -> Void) {
        self.state.withLock { body(&$0) }
    }

    func connectionClosed(_ reason: TCPCloseReason, wasOpen: Bool) {
        metrics?.connectionClosed(reason)
        self.state.withLock { stats in
            if wasOpen { stats.tcpConnectionsOpen -= 1 }
            switch reason {
            case .idle: stats.tcpClosedIdle += 1
            case .limit: stats.tcpClosedLimit += 1
            case .lifetime: stats.tcpClosedLifetime += 1
            case .error: stats.tcpClosedError += 1
            case .client: stats.tcpClosedClient += 1
            case .shutdown: stats.tcpClosedShutdown += 1
            }
        }
    }
}

/// Answers the response rate limit dropped or slipped (`RateLimitedResponder`).
final class RateLimitCounts: Sendable {
    let limited = Atomic<Int>(0)
    let slipped = Atomic<Int>(0)
    let limitedMetric = Counter(label: "dns_rrl_responses_total", dimensions: [("action", "dropped")])
    let slippedMetric = Counter(label: "dns_rrl_responses_total", dimensions: [("action", "slipped")])
}
