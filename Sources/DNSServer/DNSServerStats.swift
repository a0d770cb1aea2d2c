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
    /// Closed at once because of `maxTCPConnections` or `maxTCPConnectionsPerClient`.
    public var tcpClosedLimit = 0
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
    case error
    case client
    case shutdown
}

/// Thread-safe counters shared by all handlers of one server. The four per-query counters are
/// atomics (no lock on the answer path); the rest change rarely and sit behind a mutex.
final class DNSServerCounters: Sendable {
    private let state = Mutex(DNSServerStats())
    let udpQueriesReceived = Atomic<Int>(0)
    let tcpQueriesReceived = Atomic<Int>(0)
    let udpAnswersSent = Atomic<Int>(0)
    let tcpAnswersSent = Atomic<Int>(0)

    init() {}

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
        self.state.withLock { stats in
            if wasOpen { stats.tcpConnectionsOpen -= 1 }
            switch reason {
            case .idle: stats.tcpClosedIdle += 1
            case .limit: stats.tcpClosedLimit += 1
            case .error: stats.tcpClosedError += 1
            case .client: stats.tcpClosedClient += 1
            case .shutdown: stats.tcpClosedShutdown += 1
            }
        }
    }
}
