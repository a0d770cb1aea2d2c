/// One avahi client connection of the backend's pool, as decisions: what each state avahi
/// reports and each tick of the connection's timer mean for it and its queries. A value, so
/// every transition is unit-tested without a daemon (`ConnectionLifeTests`); `AvahiBackend`
/// keeps one per connection and makes the C calls its answers ask for.
struct ConnectionLife: Equatable {
    enum Status: Equatable { case connecting, running, down }

    private(set) var status = Status.connecting
    /// Reached a running state on the current connection: a later CONNECTING means the daemon
    /// went away while the D-Bus connection lived on.
    private(set) var hasRun = false
    /// When to free and re-create the connection.
    private(set) var reconnectAt: ContinuousClock.Instant?
    /// When to create the browsers of its queries that have none.
    private(set) var attachAt: ContinuousClock.Instant?
    /// Close it if it is empty and not the last connection.
    private(set) var collectWanted = false
    /// The daemon went away and its queries kept their records: when they are given up
    /// (`.failed`) if it has not come back by then.
    private(set) var holdUntil: ContinuousClock.Instant?

    /// A connection retries a second after a failure; one the daemon closed, at once.
    static let retryDelay: Duration = .seconds(1)
    /// How long the queries of a daemon that went away keep their records: RFC 6762 §10's TTL
    /// for records naming a host or address. A restarting daemon is back in a second or two.
    static let holdRecords: Duration = .seconds(120)

    /// The client states avahi reports, as far as they matter here.
    enum ClientState: Equatable {
        /// RUNNING, REGISTERING or COLLISION: the daemon serves the connection.
        case running
        case connecting
        case failed(disconnected: Bool)
    }

    /// What a client state means for the connection's queries.
    enum Change: Equatable {
        case none
        /// It runs now: its queries' browsers are created at once (`attachAt`).
        case cameUp
        /// The daemon went away, the connection lives on: its browsers are gone, its queries
        /// failed.
        case lostDaemon
        /// The connection failed: its queries failed, and it is re-created at `reconnectAt`.
        case failed
    }

    mutating func client(_ state: ClientState, now: ContinuousClock.Instant) -> Change {
        switch state {
        case .running:
            guard status != .running else { return .none }
            status = .running
            hasRun = true
            attachAt = now
            holdUntil = nil
            return .cameUp
        case .connecting:
            status = .connecting
            guard hasRun else { return .none }
            hasRun = false
            return .lostDaemon
        case .failed(let disconnected):
            hasRun = false
            status = .down
            reconnectAt = disconnected ? now : now + Self.retryDelay
            return .failed
        }
    }

    /// A new connection is being made (the old one, if any, freed).
    mutating func connecting() {
        status = .connecting
        hasRun = false
    }

    /// No connection could be made (no D-Bus): try again later.
    mutating func cannotConnect(now: ContinuousClock.Instant) {
        status = .down
        reconnectAt = now + Self.retryDelay
    }

    /// A browser failed or could not be made: its query is tried again later.
    mutating func retryAttach(now: ContinuousClock.Instant) {
        attachAt = now + Self.retryDelay
    }

    /// The daemon went away; its queries keep their records until `holdRecords` from now,
    /// unless it comes back first (a later loss does not extend the first one's hold).
    mutating func hold(now: ContinuousClock.Instant) {
        if holdUntil == nil { holdUntil = now + Self.holdRecords }
    }

    /// Its last query went: close it at the next tick (if it is not the last connection).
    mutating func wantCollect() {
        collectWanted = true
    }

    /// Freed: nothing runs on it any more.
    mutating func closed() {
        status = .down
    }

    /// When its timer must fire next; nil: disarmed.
    func due(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        if collectWanted { return now }
        return [reconnectAt, attachAt, holdUntil].compactMap { $0 }.min()
    }

    /// What a tick of its timer finds due, cleared from the connection.
    struct Due: Equatable {
        var collect = false
        var reconnect = false
        var attach = false
        /// The hold ran out: the queries give up their records.
        var release = false
    }

    mutating func tick(now: ContinuousClock.Instant) -> Due {
        var due = Due()
        if collectWanted {
            collectWanted = false
            due.collect = true
        }
        if let at = reconnectAt, at <= now {
            reconnectAt = nil
            due.reconnect = true
        }
        if let at = attachAt, at <= now {
            attachAt = nil
            due.attach = true
        }
        if let at = holdUntil, at <= now {
            holdUntil = nil
            due.release = true
        }
        return due
    }

    /// The backend's state from its connections' (`MDNSBackend.state`).
    static func backendState(_ statuses: [Status], isShutDown: Bool) -> MDNSBackendState {
        if isShutDown || statuses.isEmpty || statuses.contains(.down) { return .failed }
        return statuses.allSatisfy { $0 == .running } ? .running : .connecting
    }

    /// Which connection a new query goes on, given each one's (queries, capacity, status): the
    /// first running one with room, else the first with room; nil: open another.
    static func placement(_ connections: [(queries: Int, capacity: Int, status: Status)]) -> Int? {
        let withRoom = connections.indices.filter { connections[$0].queries < connections[$0].capacity }
        return withRoom.first { connections[$0].status == .running } ?? withRoom.first
    }
}

/// Whether avahi-daemon is lost, over all connections: one warning per outage, and one
/// "back" (counted as a reconnect) when every connection runs again.
struct OutageTracker: Equatable {
    private(set) var inOutage = false

    /// A connection lost the daemon. True the first time in an outage (say it loudly).
    mutating func lost() -> Bool {
        defer { inOutage = true }
        return !inOutage
    }

    /// A connection came up. True when that ends an outage: every other connection runs.
    mutating func cameUp(othersRunning: Bool) -> Bool {
        guard inOutage, othersRunning else { return false }
        inOutage = false
        return true
    }
}
