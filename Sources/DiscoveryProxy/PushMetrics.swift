import Metrics

/// DNS Push instruments: `dns_push_sessions` and `dns_push_subscriptions` (gauges),
/// `dns_push_messages_sent_total` and `dns_push_bytes_sent_total` (PUSH messages), and
/// `dns_push_sessions_ended_total{reason}`.
final class PushMetrics: Sendable {
    private let sessions = Gauge(label: "dns_push_sessions")
    private let subscriptions = Gauge(label: "dns_push_subscriptions")
    private let messagesSent = Counter(label: "dns_push_messages_sent_total")
    private let bytesSent = Counter(label: "dns_push_bytes_sent_total")
    private let ended: [PushSessionEnd: Counter]

    init() {
        var ended: [PushSessionEnd: Counter] = [:]
        for reason in PushSessionEnd.allCases {
            ended[reason] = Counter(label: "dns_push_sessions_ended_total", dimensions: [("reason", reason.rawValue)])
        }
        self.ended = ended
        sessions.record(0)
        subscriptions.record(0)
    }

    func sessionEnded(_ reason: PushSessionEnd) { ended[reason]?.increment() }
    func sessions(_ count: Int) { sessions.record(count) }
    func subscriptions(_ count: Int) { subscriptions.record(count) }
    func pushSent(bytes: Int) {
        messagesSent.increment()
        bytesSent.increment(by: bytes)
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
    /// Server shutdown (Retry Delay sent first).
    case shutdown
}
