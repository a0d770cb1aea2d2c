import CoreMetrics
import DNSWire
import EventCounting
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

    /// DNS-over-TCP connections.
    public var tcp = TCPConnectionStats()

    public init() {}
}

/// DNS-over-TCP connection counters, as the status page and `/api` show them. `open` is a
/// level; the rest only grow.
public struct TCPConnectionStats: Sendable, Hashable, Codable {
    /// Connections open now (admitted, not yet closed).
    public var open = 0
    /// Every accepted connection, including those closed at once for a limit.
    public var accepted = 0
    /// Closed after `tcpIdleTimeout` without a query in flight.
    public var closedIdle = 0
    /// Closed at once because of `maxTCPConnections`, `maxTCPConnectionsPerClient` or
    /// `maxTCPConnectionsPerSubnet`.
    public var closedLimit = 0
    /// Closed after `tcpMaxConnectionLifetime` (`tcp.max-connection-lifetime`), once its
    /// answers were sent.
    public var closedLifetime = 0
    /// Closed after an I/O or framing error.
    public var closedError = 0
    /// Closed by the client (or after the client's half-close, once its answers were sent).
    public var closedClient = 0
    /// Closed by the server's graceful shutdown.
    public var closedShutdown = 0

    public init(
        open: Int = 0, accepted: Int = 0, closedIdle: Int = 0, closedLimit: Int = 0, closedLifetime: Int = 0,
        closedError: Int = 0, closedClient: Int = 0, closedShutdown: Int = 0
    ) {
        self.open = open
        self.accepted = accepted
        self.closedIdle = closedIdle
        self.closedLimit = closedLimit
        self.closedLifetime = closedLifetime
        self.closedError = closedError
        self.closedClient = closedClient
        self.closedShutdown = closedShutdown
    }
}

/// Why a TCP connection was closed.
enum TCPCloseReason: String, Sendable, CaseIterable {
    case idle
    case limit
    case lifetime
    case error
    case client
    case shutdown
}

/// Thread-safe counters shared by all handlers of one server: one `EventCounter` per event,
/// read by `snapshot()` for the status page and exported, for the DNS service's listener, as
/// `dns_queries_received_total{transport}` and `dns_tcp_connections_total{event}`. The
/// per-query counters are atomics (no lock on the answer path); the rest change rarely and
/// sit behind a mutex.
final class DNSServerCounters: Sendable {
    private let state = Mutex(DNSServerStats())
    private let udpQueriesReceived: EventCounter
    private let tcpQueriesReceived: EventCounter
    let udpAnswersSent = Atomic<Int>(0)
    let tcpAnswersSent = Atomic<Int>(0)
    private let accepted: EventCounter
    private let closed: [TCPCloseReason: EventCounter]

    /// `factory`: where the events are exported (the executable's bootstrapped factory for
    /// the DNS listener, `TestMetrics` in tests); nil counts them for the status page only.
    init(exportingTo factory: (any MetricsFactory)? = nil) {
        func counter(_ label: String, _ dimensions: [(String, String)]) -> EventCounter {
            factory.map { EventCounter(label: label, dimensions: dimensions, factory: $0) } ?? EventCounter()
        }
        udpQueriesReceived = counter("dns_queries_received_total", [("transport", "udp")])
        tcpQueriesReceived = counter("dns_queries_received_total", [("transport", "tcp")])
        accepted = counter("dns_tcp_connections_total", [("event", "accepted")])
        var closed: [TCPCloseReason: EventCounter] = [:]
        for reason in TCPCloseReason.allCases {
            // A shutdown closes every connection at once; it is not a connection event to watch.
            closed[reason] =
                reason == .shutdown
                ? EventCounter() : counter("dns_tcp_connections_total", [("event", "closed_\(reason.rawValue)")])
        }
        self.closed = closed
    }

    func queryReceived(over transport: DNSTransport) {
        (transport == .tcp ? tcpQueriesReceived : udpQueriesReceived).increment()
    }

    /// Every accepted connection, including those closed at once for a limit.
    func connectionAccepted(admitted: Bool) {
        if admitted { state.withLock { $0.tcp.open += 1 } }
        accepted.increment()
    }

    func snapshot() -> DNSServerStats {
        var stats = self.state.withLock { $0 }
        stats.udpQueriesReceived = udpQueriesReceived.value
        stats.tcpQueriesReceived = tcpQueriesReceived.value
        stats.udpAnswersSent = self.udpAnswersSent.load(ordering: .relaxed)
        stats.tcpAnswersSent = self.tcpAnswersSent.load(ordering: .relaxed)
        stats.tcp.accepted = accepted.value
        func closedBy(_ reason: TCPCloseReason) -> Int { closed[reason]?.value ?? 0 }
        stats.tcp.closedIdle = closedBy(.idle)
        stats.tcp.closedLimit = closedBy(.limit)
        stats.tcp.closedLifetime = closedBy(.lifetime)
        stats.tcp.closedError = closedBy(.error)
        stats.tcp.closedClient = closedBy(.client)
        stats.tcp.closedShutdown = closedBy(.shutdown)
        return stats
    }

    func update(_ body: (inout DNSServerStats) -> Void) {
        self.state.withLock { body(&$0) }
    }

    func connectionClosed(_ reason: TCPCloseReason, wasOpen: Bool) {
        closed[reason]?.increment()
        if wasOpen { state.withLock { $0.tcp.open -= 1 } }
    }
}

/// Answers the response rate limit dropped or slipped (`RateLimitedResponder`):
/// `dns_rrl_responses_total{action}`.
final class RateLimitCounts: Sendable {
    let limited = EventCounter(label: "dns_rrl_responses_total", dimensions: [("action", "dropped")])
    let slipped = EventCounter(label: "dns_rrl_responses_total", dimensions: [("action", "slipped")])
}
