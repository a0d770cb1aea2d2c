// The avahi backend's connections: placing browsers, reconnecting, and what each connection's
// states mean.

internal import CAvahiClient
import DNSWire
import EventCounting
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pool of avahi client connections: placing queries, making and re-making connections,
/// each connection's timer, and what avahi's client states mean (`ConnectionLife` decides;
/// this makes the C calls). Everything here runs with the poll lock held; the calls that wait
/// for the daemon run on the worker only (`call`), the state callbacks on the poll thread.
extension AvahiBackend {
    // MARK: Pool (poll lock held)

    func makeSlot() -> AvahiClientSlot {
        self.nextSlotID += 1
        let slot = AvahiClientSlot(id: self.nextSlotID, backend: self, capacity: self.clientObjectLimit)
        slot.timer = cavahi_timeout_new(self.pollAPI, slotTimerCallback, Unmanaged.passUnretained(slot).toOpaque())
        self.slots.append(slot)
        return slot
    }

    /// Puts `query` on a connection with room, opening one if needed, and creates its browser
    /// when that connection runs.
    func place(_ query: AvahiQuery) throws(MDNSError) {
        var attempts = 0
        while true {
            let slot: AvahiClientSlot
            if let index = ConnectionLife.placement(self.slots.map { ($0.queries.count, $0.capacity, $0.life.status) })
            {
                slot = self.slots[index]
            } else {
                slot = self.makeSlot()
                self.logger.info(
                    "opening another avahi client connection",
                    metadata: ["mdns.client": "\(slot.id)", "mdns.clients": "\(self.slots.count)"]
                )
                self.reconnect(slot)
            }
            slot.queries.insert(query)
            query.slot = slot
            guard slot.life.status == .running, slot.client != nil, !slot.tornDown else {
                return  // created when the connection runs
            }
            let error = self.createBrowser(query, slot: slot)
            if error == Int32(AVAHI_OK) { return }
            if error == Int32(AVAHI_ERR_DISCONNECTED) || error == Int32(AVAHI_ERR_NO_DAEMON) || slot.tornDown {
                // The daemon just went away (or stopped answering, and the connection was torn
                // down) and the news has not been dispatched yet: the query waits; the
                // connection's failure and reconnect bring it up to date.
                return
            }
            if error == Int32(AVAHI_ERR_TOO_MANY_OBJECTS) && attempts < 2 {
                // The daemon's limit is lower than ours: this connection is full.
                slot.queries.remove(query)
                query.slot = nil
                attempts += 1
                slot.capacity = max(1, slot.queries.count)
                self.logger.warning(
                    "avahi-daemon refused more objects on a connection; lower clientObjectLimit",
                    metadata: ["mdns.client": "\(slot.id)", "mdns.objects": "\(slot.capacity)"]
                )
                continue
            }
            if Self.isLasting(error) {
                slot.queries.remove(query)
                query.slot = nil
                self.scheduleGarbageCollection(slot)
            } else {
                // Refused by a daemon that is going or not ready (its name already off the
                // bus, a D-Bus error): the query stays, failed, and `attachPending` tries it
                // again a second later. Dropped, it would never run while its browse is asked.
                query.failedSinceStart = true
                slot.life.retryAttach(now: .now)
                self.reschedule(slot)
            }
            throw .daemon(Self.errorText(error))
        }
    }

    /// An error no retry changes: the request itself is one avahi cannot take.
    static func isLasting(_ error: Int32) -> Bool {
        switch error {
        case Int32(AVAHI_ERR_INVALID_DOMAIN_NAME), Int32(AVAHI_ERR_INVALID_INTERFACE),
            Int32(AVAHI_ERR_INVALID_PROTOCOL),
            Int32(AVAHI_ERR_INVALID_FLAGS), Int32(AVAHI_ERR_INVALID_DNS_CLASS), Int32(AVAHI_ERR_INVALID_DNS_TYPE),
            Int32(AVAHI_ERR_INVALID_ARGUMENT), Int32(AVAHI_ERR_NOT_SUPPORTED):
            true
        default:
            false
        }
    }

    /// The kernel's index of interface `name`, as avahi takes it; nil when there is none.
    static func interfaceIndex(_ name: String) -> Int32? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int32(exactly: index)
    }

    /// Returns `AVAHI_OK` or the avahi error code. Worker only: a D-Bus round trip.
    func createBrowser(_ query: AvahiQuery, slot: AvahiClientSlot) -> Int32 {
        guard let client = slot.client else { return Int32(AVAHI_ERR_DISCONNECTED) }
        // The text is made again for each browser (also after a reconnect) rather than kept
        // with the query: ~90 bytes per live query, and startQuery has checked it can be made.
        guard let avahiName = AvahiName.escape(query.question.name) else { return Int32(AVAHI_ERR_INVALID_DOMAIN_NAME) }
        // Looked up for each browser rather than kept: a query stays within a 112-byte malloc
        // chunk, and an interface re-created since has a new index.
        guard let interfaceIndex = Self.interfaceIndex(query.question.interface) else {
            return Int32(AVAHI_ERR_INVALID_INTERFACE)
        }
        let browser = avahiName.withCString { name in
            self.call("create a record browser", on: slot) {
                avahi_record_browser_new(
                    client,
                    interfaceIndex,
                    AvahiProtocol(AVAHI_PROTO_UNSPEC),
                    name,
                    RRClass.in.rawValue,
                    query.question.type.rawValue,
                    // Always multicast: without the flag avahi may ask wide-area unicast DNS for
                    // names outside .local (reverse names, RFC 8766 §5.4), or loop back to us.
                    AVAHI_LOOKUP_USE_MULTICAST,
                    recordCallback,
                    Unmanaged.passUnretained(query).toOpaque()
                )
            }
        }
        guard let browser else { return avahi_client_errno(client) }
        query.browser = browser
        if !slot.tornDown { self.answered() }  // made in time: the daemon answers
        return Int32(AVAHI_OK)
    }

    /// Frees the slot's old connection, if any, and opens a new one. Worker only.
    func reconnect(_ slot: AvahiClientSlot) {
        guard !self.isShutDown, self.slots.contains(where: { $0 === slot }) else { return }
        self.closeConnection(of: slot)
        slot.life.connecting()
        slot.tornDown = false
        var error: Int32 = 0
        // The socket is learnt during the call (the poll notes libdbus's watch), so that the
        // deadline can end a connection whose daemon does not answer its first calls.
        let recorder = self.recordingPoll
        cavahi_recording_poll_forget(recorder)
        let socketAddress = Int(bitPattern: recorder)
        // The state callback may run before this returns (with the lock held by us).
        let (client, outcome) = self.worker.watch(
            "connect to avahi-daemon",
            socket: {
                UnsafeMutablePointer<CAvahiRecordingPoll>(bitPattern: socketAddress).map(cavahi_recording_poll_socket)
                    ?? -1
            }
        ) {
            avahi_client_new(
                cavahi_recording_poll_api(recorder),
                // Not AVAHI_CLIENT_NO_FAIL: a client that waits for the daemon is initialised by
                // libavahi-client on the poll thread when the daemon appears (two D-Bus calls
                // without our deadline). Without it, a client whose daemon goes fails, and the
                // worker makes a new one every second until the daemon is there.
                AvahiClientFlags(0),
                clientCallback,
                Unmanaged.passUnretained(slot).toOpaque(),
                &error
            )
        }
        if outcome.aborted, let client {
            // Made, but the daemon did not answer in time: its socket is shut down already, and
            // the worker closes it (no failure callback may come for it).
            slot.client = client
            slot.tornDown = true
            self.worker.submit(.internal) { [weak self, slot] in self?.tearDown(slot) }
        } else if let client {
            slot.client = client
            slot.socket = cavahi_recording_poll_socket(recorder)
            if slot.life.status == .connecting {
                self.logger.info("waiting for avahi-daemon", metadata: ["mdns.client": "\(slot.id)"])
            }
        } else {
            slot.life.cannotConnect(now: .now)
            self.noteOutage("cannot connect to avahi-daemon: \(Self.errorText(error))", slot: slot)
            self.reschedule(slot)
        }
        self.publish()
    }

    /// Frees `slot` if it is empty and not the last one.
    func collectIfIdle(_ slot: AvahiClientSlot) -> Bool {
        guard slot.queries.isEmpty, self.slots.count > 1 else { return false }
        self.logger.info("closing a spare avahi client connection", metadata: ["mdns.client": "\(slot.id)"])
        self.slots.removeAll { $0 === slot }
        self.free(slot)
        self.publish()
        return true
    }

    func free(_ slot: AvahiClientSlot) {
        if let timer = slot.timer {
            cavahi_timeout_free(self.pollAPI, timer)
            slot.timer = nil
        }
        for query in slot.queries { query.slot = nil }
        self.closeConnection(of: slot)
        slot.life.closed()
    }

    /// Frees the slot's client connection and with it its browsers. Makes no call that waits:
    /// avahi closes the D-Bus connection before freeing its objects.
    func closeConnection(of slot: AvahiClientSlot) {
        for query in slot.queries { query.browser = nil }
        slot.failedBrowsers = []
        slot.socket = -1
        if let client = slot.client {
            slot.client = nil
            avahi_client_free(client)
        }
    }

    func freeEverything() {
        for slot in self.slots {
            for query in slot.queries { _ = query.markCancelled() }
            self.free(slot)
            slot.queries = SlotQueries()
        }
        self.slots = []
        self.published.withLock { $0.liveQueries = 0 }
        if let timer = self.bootstrapTimer {
            cavahi_timeout_free(self.pollAPI, timer)
            self.bootstrapTimer = nil
        }
        self.publish()
    }

    // MARK: Slot timer (poll lock held)

    func scheduleGarbageCollection(_ slot: AvahiClientSlot) {
        guard slot.queries.isEmpty, self.slots.count > 1 else { return }
        slot.life.wantCollect()
        self.reschedule(slot)
    }

    /// Arms the slot's timer for its earliest pending work.
    func reschedule(_ slot: AvahiClientSlot) {
        guard let timer = slot.timer else { return }
        let now = ContinuousClock.now
        guard let due = slot.life.due(now: now) else {
            cavahi_timeout_disarm(self.pollAPI, timer)
            return
        }
        let delay = max(.zero, due - now)
        cavahi_timeout_arm(self.pollAPI, timer, UInt32(clamping: Int64(delay / .milliseconds(1))))
    }

    func slotTimerFired(_ slot: AvahiClientSlot) {
        guard !self.isShutDown, slot.timer != nil else { return }
        let due = slot.life.tick(now: .now)
        if due.collect, self.collectIfIdle(slot) { return }
        if due.release { self.releaseHeld(slot) }
        if due.reconnect { self.reconnect(slot) }
        if due.attach { self.attachPending(slot) }
        self.reschedule(slot)
    }

    /// Creates the browsers of the slot's queries that have none: `.verifying` first for those
    /// whose connection went, `.restarted` once made for those that had failed. A refusal
    /// is tried again a second later (`ConnectionLife.retryAttach`).
    func attachPending(_ slot: AvahiClientSlot) {
        for query in slot.queries.sorted(by: { $0.id < $1.id }) {
            guard slot.life.status == .running, slot.client != nil, !slot.tornDown else { return }
            guard !query.isCancelled, query.slot === slot, query.browser == nil else { continue }
            let wasFailed = query.failedSinceStart
            if !wasFailed && query.verifyOnAttach {
                query.verifyOnAttach = false
                self.emit(.verifying, to: query)
                guard !query.isCancelled else { continue }
            }
            let error = self.createBrowser(query, slot: slot)
            if error == Int32(AVAHI_OK) && wasFailed {
                // Told once, when it runs again: its events come after this (they need the
                // poll lock, held here), and a query refused again and again is not
                // restarted and failed each second.
                query.failedSinceStart = false
                query.verifyOnAttach = false
                self.emit(.restarted, to: query)
            }
            if slot.tornDown { return }  // it stalled: the next connection re-creates the rest
            if error == Int32(AVAHI_OK) { continue }
            self.logger.debug(
                "cannot re-create mDNS query",
                metadata: ["mdns.query": "\(query.id)", "mdns.error": "\(Self.errorText(error))"]
            )
            if !wasFailed {
                query.failedSinceStart = true
                self.emit(.failed(Self.errorText(error)), to: query)
            }
            if !Self.isLasting(error) { slot.life.retryAttach(now: .now) }
        }
    }

    // MARK: Client state (poll lock held)

    func clientStateChanged(_ slot: AvahiClientSlot, client: OpaquePointer?, state: AvahiClientState) {
        guard !self.isShutDown else { return }
        // During avahi_client_new the slot does not know its client yet.
        if let known = slot.client, let client, known != client { return }
        var failure = ""
        let reported: ConnectionLife.ClientState
        switch state {
        case AVAHI_CLIENT_S_RUNNING, AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            reported = .running
        case AVAHI_CLIENT_CONNECTING:
            reported = .connecting
        case AVAHI_CLIENT_FAILURE:
            let error = client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            let disconnected = error == Int32(AVAHI_ERR_DISCONNECTED)
            failure = disconnected ? "avahi-daemon disconnected" : "avahi client failed: \(Self.errorText(error))"
            reported = .failed(disconnected: disconnected)
        default:
            self.publish()
            return
        }
        switch slot.life.client(reported, now: .now) {
        case .none:
            break
        case .cameUp:
            self.answered()
            self.reschedule(slot)
            // (Not the daemon's version: avahi_client_get_version_string is a D-Bus round trip,
            // and this runs on the poll thread, where nothing may wait for the daemon.)
            let metadata: Logger.Metadata = ["mdns.client": "\(slot.id)"]
            if self.outage.cameUp(othersRunning: self.slots.allSatisfy { $0.life.status == .running }) {
                self.reconnects.increment()
                self.logger.info("avahi-daemon is back; re-creating queries", metadata: metadata)
            } else {
                self.logger.info("connected to avahi-daemon", metadata: metadata)
            }
        case .lostDaemon:
            self.noteOutage("avahi-daemon went away", slot: slot)
            self.holdQueries(of: slot, now: .now)
        case .failed:
            self.noteOutage(failure, slot: slot)
            self.holdQueries(of: slot, now: .now)
            // Freed and re-created from the timer, never inside the client's own callback.
            self.reschedule(slot)
        }
        self.publish()
    }

    /// The daemon went away: its browsers are gone, but the devices are not. The queries keep
    /// their records (cached answers go on) and are verified when the daemon is back, or get
    /// `.failed` if it is not back within `ConnectionLife.holdRecords`.
    func holdQueries(of slot: AvahiClientSlot, now: ContinuousClock.Instant) {
        self.keepRecords(of: slot)
        for query in slot.queries {
            guard let browser = query.browser else { continue }
            // Not connected any more: avahi frees it locally without a D-Bus call.
            query.browser = nil
            avahi_record_browser_free(browser)
        }
        slot.life.hold(now: now)
        self.reschedule(slot)
    }

    /// The slot's browsers are going with its connection, not the devices they saw: each query
    /// that had one keeps its records and is verified when its browser is made again.
    func keepRecords(of slot: AvahiClientSlot) {
        for query in slot.queries where query.browser != nil && !query.failedSinceStart { query.verifyOnAttach = true }
    }

    /// The hold ran out with the daemon still away: the queries give up their records.
    func releaseHeld(_ slot: AvahiClientSlot) {
        guard slot.life.status != .running else { return }
        let reason = "avahi-daemon has been away for \(ConnectionLife.holdRecords)"
        self.logger.warning("avahi-daemon still away; cached records dropped", metadata: ["mdns.client": "\(slot.id)"])
        for query in slot.queries.sorted(by: { $0.id < $1.id }) where query.verifyOnAttach && !query.isCancelled {
            query.verifyOnAttach = false
            query.failedSinceStart = true
            self.emit(.failed(reason), to: query)
        }
    }

    func noteOutage(_ reason: String, slot: AvahiClientSlot) {
        let stalled = self.published.withLock { $0.stalledSince != nil }
        if !self.outage.lost() || stalled {  // a stall was logged once already
            self.logger.debug(
                "avahi still unavailable", metadata: ["mdns.client": "\(slot.id)", "mdns.error": "\(reason)"])
        } else {
            self.logger.warning(
                "lost avahi-daemon; retrying",
                metadata: ["mdns.client": "\(slot.id)", "mdns.error": "\(reason)"]
            )
        }
    }
}

// MARK: - A connection's life

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
