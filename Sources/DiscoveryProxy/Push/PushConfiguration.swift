/// DNS Push (RFC 8765) and DSO session (RFC 8490) settings.
public struct PushConfiguration: Sendable, Equatable {
    /// Concurrent DSO sessions; beyond it a new session's first request gets REFUSED with a
    /// Retry Delay (RFC 8490 §7.2) and the connection is closed.
    public var maxSessions = 1000
    /// Subscriptions per session; beyond it SUBSCRIBE gets REFUSED with a Retry Delay.
    public var maxSubscriptionsPerSession = 200
    /// Inactivity timeout sent to clients in the Keepalive TLV (RFC 8490 §6.2: 15 s default).
    /// A session without subscriptions and without traffic is aborted after twice this (at
    /// least 5 s, §6.4.1); a session with subscriptions is never idle.
    public var inactivityTimeout: Duration = .seconds(15)
    /// Keepalive interval sent to clients (§6.5; never below 10 s, §7.1). A session silent in
    /// both directions for twice this is aborted. 60 minutes, as §6.5.2 recommends: little
    /// traffic, and NAT state kept (RFC 5382's 2 h 4 min); the cost is that a client that
    /// vanishes without closing holds its session and subscriptions for up to 2 hours
    /// (bounded by `maxSessions`). docs/ARCHITECTURE.md weighs it.
    public var keepaliveInterval: Duration = .seconds(3600)
    /// Changes arriving within this window go out in one PUSH (RFC 8765 §6.3.1: batch).
    public var batchWindow: Duration = .milliseconds(10)
    /// Retry Delay when the server is busy (session or subscription limit) or shutting down.
    public var busyRetryDelay: Duration = .seconds(60)

    public init() {}

    static let minimumKeepalive: Duration = .seconds(10)
    /// After a Retry Delay the client has this long to close the connection before it is
    /// reset (RFC 8490 §6.6.1: five seconds).
    static let retryDelayGrace: Duration = .seconds(5)
}
