import NIOCore

/// The life of one DNS-over-TCP connection (RFC 7766) as a value: admission, the queries read
/// and in flight (pipelining, answers in completion order), holding reads at the in-flight cap
/// (back-pressure), draining after a half-close or shutdown, and closing. Each event returns
/// what `TCPDNSHandler` must do; no channel is touched here, so every path is testable alone.
struct TCPConnectionState {
    enum Phase: Equatable {
        /// Not active yet.
        case initial
        /// Reading and answering.
        case open
        /// No more input (client half-close or server shutdown): answer what is left, then close.
        case draining(TCPCloseReason)
        /// Closing was decided; nothing more is written.
        case closing
        case closed
    }

    private(set) var phase = Phase.initial
    /// Why it closes (or closed); nil until decided.
    private(set) var closeReason: TCPCloseReason?
    /// Counted as open by the registry (and so to be released).
    private(set) var admitted = false
    let maxInFlight: Int

    /// Queries read but not yet handed to the responder (only when at the in-flight cap).
    private var waiting = CircularBuffer<[UInt8]>()
    /// IDs of queries handed to the responder and not answered yet.
    private var inFlight = Set<UInt64>()
    private var nextQueryID: UInt64 = 0
    /// A `read()` was held back at the cap, to be issued once below it.
    private var readHeld = false
    /// A DSO session owns the connection's end: no idle timer, lifetime or keepalive option.
    private(set) var hasSession = false
    /// The connection was told an idle timeout of 0 (RFC 7828 §3.3.2): it closes once idle.
    private(set) var closesWhenIdle = false

    init(maxInFlight: Int) {
        self.maxInFlight = max(1, maxInFlight)
    }

    var hasOutstandingQueries: Bool { !inFlight.isEmpty || !waiting.isEmpty }

    /// Answers may still be written.
    var isWritable: Bool {
        switch phase {
        case .open, .draining: return true
        case .initial, .closing, .closed: return false
        }
    }

    var isOpen: Bool { phase == .open }

    // MARK: Events

    /// The channel became active. Admitted: open. Refused: to be closed at once, for `reason`.
    mutating func activate(admission: TCPConnectionRegistry.Admission) -> TCPCloseReason? {
        guard phase == .initial else { return nil }
        phase = .open
        guard admission == .admitted else { return admission == .shuttingDown ? .shutdown : .limit }
        admitted = true
        return nil
    }

    /// A complete message was read; false when the connection takes no more input.
    mutating func queryRead(_ message: [UInt8]) -> Bool {
        guard isWritable else { return false }
        waiting.append(message)
        return true
    }

    /// The next query to hand out while below the cap and still writable.
    mutating func nextQuery() -> [UInt8]? {
        guard isWritable, inFlight.count < maxInFlight else { return nil }
        return waiting.popFirst()
    }

    /// A query handed to the responder; its ID matches the answer to it.
    mutating func queryDispatched() -> UInt64 {
        let id = nextQueryID
        nextQueryID &+= 1
        inFlight.insert(id)
        return id
    }

    /// The answer to query `id` came; false when it is late, a duplicate, or the connection gone.
    mutating func answered(_ id: UInt64) -> Bool {
        inFlight.remove(id) != nil
    }

    /// The pipeline asks for more input: read now, or hold it (at the cap, or no more input wanted).
    mutating func readRequested() -> Bool {
        switch phase {
        case .open where inFlight.count < maxInFlight && waiting.isEmpty, .initial:
            return true
        case .open, .draining, .closing, .closed:
            readHeld = true
            return false
        }
    }

    enum Progress: Equatable {
        case none
        /// Issue the `read()` held back at the cap.
        case resumeReading
        /// A draining connection has answered everything: close it.
        case close(TCPCloseReason)
    }

    /// After queries were dispatched or answered.
    mutating func afterProgress() -> Progress {
        switch phase {
        case .draining(let reason):
            return hasOutstandingQueries ? .none : .close(reason)
        case .open:
            guard readHeld, inFlight.count < maxInFlight, waiting.isEmpty else { return .none }
            readHeld = false
            return .resumeReading
        case .initial, .closing, .closed:
            return .none
        }
    }

    /// No more input (half-close, shutdown); true when it started draining now.
    mutating func startDraining(_ reason: TCPCloseReason) -> Bool {
        switch phase {
        case .open:
            phase = .draining(reason)
            return true
        case .initial:
            closeReason = reason
            return false
        case .draining, .closing, .closed:
            return false
        }
    }

    /// A DSO session takes over the connection's end (it closes it later, for `reason`).
    mutating func noteCloseReason(_ reason: TCPCloseReason) {
        closeReason = reason
    }

    /// Decides to close; false when closing was already decided (or it never opened).
    mutating func close(_ reason: TCPCloseReason) -> Bool {
        guard isWritable else { return false }
        phase = .closing
        closeReason = reason
        waiting.removeAll()
        return true
    }

    /// A DSO session (RFC 8490) took the connection over.
    mutating func sessionOpened() {
        hasSession = true
    }

    /// The idle timeout to tell the client with the answer to the query being dispatched
    /// (RFC 7828 §3.3.2: the one currently associated with the connection): the configured
    /// one, or less when the lifetime runs out sooner; 0 when the server is short of
    /// connections, and from then on the connection closes once idle. Nil inside a session.
    mutating func idleTimeoutToAnnounce(
        configured: Duration, shortOfConnections: Bool, lifetimeLeft: Duration?
    ) -> Duration? {
        guard !hasSession else { return nil }
        if shortOfConnections { closesWhenIdle = true }
        if closesWhenIdle { return .zero }
        return lifetimeLeft.map { max(.zero, min(configured, $0)) } ?? configured
    }

    /// The idle timer fired: close only an open connection with nothing outstanding.
    var mayCloseIdle: Bool { phase == .open && !hasOutstandingQueries }

    /// The channel went inactive or the handler was removed. Nil when already finished or
    /// never active; otherwise why it closed and whether it held a registry slot.
    mutating func finish() -> (reason: TCPCloseReason, wasAdmitted: Bool)? {
        let wasInitial = phase == .initial
        guard phase != .closed else { return nil }
        phase = .closed
        waiting.removeAll()
        inFlight.removeAll()
        guard !wasInitial else { return nil }
        let result = (closeReason ?? .client, admitted)
        admitted = false
        return result
    }
}
