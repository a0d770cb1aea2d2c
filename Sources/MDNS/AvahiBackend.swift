import DNSWire
import EventCounting
import Logging
import Synchronization
internal import CAvahiClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `MDNSBackend` on top of avahi-daemon, through libavahi-client (D-Bus) and an
/// `AvahiThreadedPoll`.
///
/// Each query is one avahi record browser (`AVAHI_PROTO_UNSPEC`, so mDNS over IPv4 and IPv6,
/// RFC 8766 §8) on the question's interface. A record that arrives over both protocols is
/// delivered once per protocol, and the holder counts the deliveries (`MDNSEvent`): the
/// backend keeps no copy of the records.
///
/// **Pool.** avahi-daemon caps the objects of one client connection (`objects-per-client-max`,
/// 1024 by default). Queries are spread over a pool of client connections, at most
/// `clientObjectLimit` browsers on each; a new connection is opened when all are full, and the
/// pool as a whole refuses queries beyond `totalObjectBudget`. Spare empty connections are
/// closed; one always stays open to track the daemon.
///
/// **Reconnect.** Connections are made with `AVAHI_CLIENT_NO_FAIL`. When avahi-daemon (or the
/// D-Bus daemon) goes away every live query gets `.failed`, the dead connection is freed and
/// a new one is made (retried every second while D-Bus is unreachable). When the daemon is
/// back, each live query's browser is re-created and the query gets `.restarted` before any
/// new `.added`. A query started while the daemon is away waits silently and is created when
/// the daemon appears.
///
/// **Threads and locking.** All avahi objects and the pool are guarded by the threaded poll's
/// lock: avahi runs its callbacks on the poll thread with the lock held, and public methods
/// take it (`withPollLock`). A public method called on the poll thread, that is from inside an
/// event handler, runs directly under the lock the callback already holds instead of locking
/// again (which would deadlock); so `cancel()` may be called from a handler. `shutdown()` may
/// not. The figures read by `state`, `liveQueryCount` and `clientCount` are copied into a
/// `Mutex` so that reading them never waits for the poll lock.
///
/// Keep the backend alive (and call `shutdown()`) from outside its handlers: if the last
/// reference went away inside a handler, the poll thread is told to quit and its memory leaks.
public final class AvahiBackend: MDNSBackend, @unchecked Sendable {
    private let logger: Logger
    private let clientObjectLimit: Int
    private let totalObjectBudget: Int
    private let poll: OpaquePointer  // AvahiThreadedPoll*, freed in deinit
    private let pollAPI: UnsafePointer<AvahiPoll>
    /// `pthread_t` of the poll thread, 0 until its first callback.
    private let pollThread = Atomic<UInt>(0)
    /// Written under the poll lock, read from anywhere.
    private let published = Mutex(Published())

    // MARK: Guarded by the poll lock

    private var slots: [ClientSlot] = []
    private var nextSlotID = 0
    private var nextQueryID: UInt32 = 0
    private var liveQueries = 0
    private var isShutDown = false
    /// True from the first sign of a lost daemon until every connection runs again; warnings
    /// are logged once per outage.
    private var inOutage = false
    /// Outages recovered from (the daemon came back and queries were re-created):
    /// `mdns_backend_reconnects_total`, and `reconnectCount` for the status page.
    private let reconnects = EventCounter(label: "mdns_backend_reconnects_total")
    /// Fires once on the poll thread to learn its identity.
    private var bootstrapTimer: OpaquePointer?

    private struct Published {
        var state: MDNSBackendState = .connecting
        var liveQueries = 0
        var clients = 0
    }

    /// Below avahi-daemon's default `objects-per-client-max` (1024), with room for the
    /// connection's own objects.
    public static let defaultClientObjectLimit = 900
    /// Browsers over all connections by default.
    public static let defaultTotalObjectBudget = 8192

    /// Starts the poll thread and connects to avahi-daemon in the background. Does not fail when
    /// the daemon (or D-Bus) is not there yet; `state` is `.connecting` (`.failed` without D-Bus)
    /// until it is.
    ///
    /// - Parameters:
    ///   - clientObjectLimit: browsers per client connection; keep below the daemon's
    ///     `objects-per-client-max` (1024 by default).
    ///   - totalObjectBudget: browsers over all connections; beyond it `startQuery` throws
    ///     `.budgetExhausted`.
    public init(
        logger: Logger, clientObjectLimit: Int = defaultClientObjectLimit, totalObjectBudget: Int = defaultTotalObjectBudget
    ) throws(MDNSError) {
        precondition(clientObjectLimit > 0 && totalObjectBudget > 0, "AvahiBackend limits must be positive")
        guard let poll = avahi_threaded_poll_new() else {
            throw .daemon("cannot create the avahi threaded poll")
        }
        self.logger = logger
        self.clientObjectLimit = clientObjectLimit
        self.totalObjectBudget = totalObjectBudget
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)

        // The poll thread is not running yet: no lock needed.
        let timer = cavahi_timeout_new(self.pollAPI, bootstrapCallback, Unmanaged.passUnretained(self).toOpaque())
        self.bootstrapTimer = timer
        if let timer { cavahi_timeout_arm(self.pollAPI, timer, 0) }
        let slot = self.makeSlot()
        self.reconnect(slot)
        self.publish()

        guard avahi_threaded_poll_start(poll) >= 0 else {
            self.freeEverything()
            throw .daemon("cannot start the avahi poll thread")
        }
    }

    deinit {
        if self.isOnPollThread {
            // The last reference went away inside a handler: cannot join our own thread.
            self.logger.warning("AvahiBackend released on its own poll thread; stopping it without cleanup")
            avahi_threaded_poll_quit(self.poll)
            return
        }
        self.shutdown()
        avahi_threaded_poll_free(self.poll)
    }

    // MARK: Public API

    public var state: MDNSBackendState { self.published.withLock { $0.state } }

    /// Queries started and not yet cancelled.
    public var liveQueryCount: Int { self.published.withLock { $0.liveQueries } }

    /// avahi client connections currently open (or opening).
    public var clientCount: Int { self.published.withLock { $0.clients } }

    /// How many times the daemon went away and the backend recovered (for metrics).
    public var reconnectCount: Int { reconnects.value }

    public func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle {
        guard Self.interfaceIndex(question.interface) != nil else {
            throw .unknownInterface(question.interface)
        }
        guard AvahiName.escape(question.name) != nil else {
            throw .daemon("the name \(question.name) cannot be expressed to avahi (NUL byte or invalid UTF-8)")
        }
        let query = try self.withPollLock { () throws(MDNSError) -> Query in
            guard !self.isShutDown else { throw .daemon("the mDNS backend is shut down") }
            guard self.liveQueries < self.totalObjectBudget else {
                throw .budgetExhausted(limit: self.totalObjectBudget)
            }
            self.nextQueryID &+= 1
            let query = Query(
                id: self.nextQueryID,
                backend: self,
                question: question,
                tag: tag,
                receiver: receiver
            )
            try self.place(query)
            self.liveQueries += 1
            self.publish()
            return query
        }
        self.logger.debug(
            "mDNS query started",
            metadata: [
                "mdns.query": "\(query.id)", "mdns.name": "\(question.name)", "mdns.type": "\(question.type)",
                "mdns.interface": "\(question.interface)",
            ]
        )
        return query
    }

    /// Frees every browser and connection; queries get no further events and later
    /// `startQuery` calls throw. Idempotent. Must not be called from an event handler.
    public func shutdown() {
        precondition(!self.isOnPollThread, "AvahiBackend.shutdown() must not be called from an mDNS event handler")
        let wasRunning = self.withPollLock { () -> Bool in
            guard !self.isShutDown else { return false }
            self.isShutDown = true
            self.freeEverything()
            return true
        }
        if wasRunning {
            avahi_threaded_poll_stop(self.poll)
            self.pollThread.store(0, ordering: .releasing)  // its pthread_t may be reused
            self.logger.info("mDNS backend shut down")
        }
    }

    // MARK: Locking

    private var isOnPollThread: Bool {
        let thread = self.pollThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_t(thread), pthread_self()) != 0
    }

    /// Runs `body` holding the poll lock. On the poll thread (inside a callback) the lock is
    /// already held, so `body` runs directly.
    private func withPollLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if self.isOnPollThread { return try body() }
        avahi_threaded_poll_lock(self.poll)
        defer { avahi_threaded_poll_unlock(self.poll) }
        return try body()
    }

    fileprivate func notePollThread() {
        self.pollThread.store(UInt(pthread_self()), ordering: .releasing)
    }

    // MARK: Pool (poll lock held)

    private func makeSlot() -> ClientSlot {
        self.nextSlotID += 1
        let slot = ClientSlot(id: self.nextSlotID, backend: self, capacity: self.clientObjectLimit)
        slot.timer = cavahi_timeout_new(self.pollAPI, slotTimerCallback, Unmanaged.passUnretained(slot).toOpaque())
        self.slots.append(slot)
        return slot
    }

    /// Puts `query` on a connection with room, opening one if needed, and creates its browser
    /// when that connection runs.
    private func place(_ query: Query) throws(MDNSError) {
        var attempts = 0
        while true {
            let candidates = self.slots.filter { $0.queries.count < $0.capacity }
            let slot: ClientSlot
            if let running = candidates.first(where: { $0.status == .running }) ?? candidates.first {
                slot = running
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
            guard slot.status == .running, let client = slot.client else {
                return  // created when the connection runs
            }
            let error = self.createBrowser(query, client: client)
            if error == Int32(AVAHI_OK) { return }
            if error == Int32(AVAHI_ERR_DISCONNECTED) || error == Int32(AVAHI_ERR_NO_DAEMON) {
                // The daemon just went away and the news has not been dispatched yet: the query
                // waits; the failure callback delivers `.failed` and the reconnect `.restarted`.
                return
            }
            slot.queries.remove(query)
            query.slot = nil
            if error == Int32(AVAHI_ERR_TOO_MANY_OBJECTS) && attempts < 2 {
                // The daemon's limit is lower than ours: this connection is full.
                attempts += 1
                slot.capacity = max(1, slot.queries.count)
                self.logger.warning(
                    "avahi-daemon refused more objects on a connection; lower clientObjectLimit",
                    metadata: ["mdns.client": "\(slot.id)", "mdns.objects": "\(slot.capacity)"]
                )
                continue
            }
            self.scheduleGarbageCollection(slot)
            throw .daemon(Self.errorText(error))
        }
    }

    /// The kernel's index of interface `name`, as avahi takes it; nil when there is none.
    static func interfaceIndex(_ name: String) -> Int32? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int32(exactly: index)
    }

    /// Returns `AVAHI_OK` or the avahi error code.
    private func createBrowser(_ query: Query, client: OpaquePointer) -> Int32 {
        // The text is made again for each browser (also after a reconnect) rather than kept
        // with the query: ~90 bytes per live query, and startQuery has checked it can be made.
        guard let avahiName = AvahiName.escape(query.question.name) else { return Int32(AVAHI_ERR_INVALID_DOMAIN_NAME) }
        // Looked up for each browser rather than kept: a query stays within a 112-byte malloc
        // chunk, and an interface re-created since has a new index.
        guard let interfaceIndex = Self.interfaceIndex(query.question.interface) else {
            return Int32(AVAHI_ERR_INVALID_INTERFACE)
        }
        let browser = avahiName.withCString { name in
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
        guard let browser else { return avahi_client_errno(client) }
        query.browser = browser
        return Int32(AVAHI_OK)
    }

    /// Frees the slot's old connection, if any, and opens a new one.
    private func reconnect(_ slot: ClientSlot) {
        if let old = slot.client {
            for query in slot.queries { query.browser = nil }  // avahi_client_free frees them
            slot.client = nil
            avahi_client_free(old)
        }
        slot.status = .connecting
        slot.hasRun = false
        var error: Int32 = 0
        // The state callback may run before this returns (with the lock held by us).
        let client = avahi_client_new(
            self.pollAPI,
            AVAHI_CLIENT_NO_FAIL,
            clientCallback,
            Unmanaged.passUnretained(slot).toOpaque(),
            &error
        )
        if let client {
            slot.client = client
            if slot.status == .connecting {
                self.logger.info("waiting for avahi-daemon", metadata: ["mdns.client": "\(slot.id)"])
            }
        } else {
            slot.status = .down
            slot.reconnectAt = .now + .seconds(1)
            self.noteOutage("cannot connect to D-Bus: \(Self.errorText(error))", slot: slot)
            self.reschedule(slot)
        }
        self.publish()
    }

    /// Frees `slot` if it is empty and not the last one.
    private func collectIfIdle(_ slot: ClientSlot) -> Bool {
        guard slot.queries.isEmpty, self.slots.count > 1 else { return false }
        self.logger.info("closing a spare avahi client connection", metadata: ["mdns.client": "\(slot.id)"])
        self.slots.removeAll { $0 === slot }
        self.free(slot)
        self.publish()
        return true
    }

    private func free(_ slot: ClientSlot) {
        if let timer = slot.timer {
            cavahi_timeout_free(self.pollAPI, timer)
            slot.timer = nil
        }
        for query in slot.queries {
            query.browser = nil
            query.slot = nil
        }
        if let client = slot.client {
            slot.client = nil
            avahi_client_free(client)
        }
        slot.status = .down
    }

    private func freeEverything() {
        for slot in self.slots {
            for query in slot.queries { query.cancelled = true }
            self.free(slot)
            slot.queries = SlotQueries()
        }
        self.slots = []
        self.liveQueries = 0
        if let timer = self.bootstrapTimer {
            cavahi_timeout_free(self.pollAPI, timer)
            self.bootstrapTimer = nil
        }
        self.publish()
    }

    // MARK: Slot timer (poll lock held)

    private func scheduleGarbageCollection(_ slot: ClientSlot) {
        guard slot.queries.isEmpty, self.slots.count > 1 else { return }
        slot.collectWanted = true
        self.reschedule(slot)
    }

    /// Arms the slot's timer for its earliest pending work.
    private func reschedule(_ slot: ClientSlot) {
        guard let timer = slot.timer else { return }
        let now = ContinuousClock.now
        var due: ContinuousClock.Instant? = slot.collectWanted ? now : nil
        for instant in [slot.reconnectAt, slot.attachAt].compactMap({ $0 }) {
            due = min(due ?? instant, instant)
        }
        guard let due else {
            cavahi_timeout_disarm(self.pollAPI, timer)
            return
        }
        let delay = max(.zero, due - now)
        cavahi_timeout_arm(self.pollAPI, timer, UInt32(clamping: Int64(delay / .milliseconds(1))))
    }

    fileprivate func slotTimerFired(_ slot: ClientSlot) {
        guard !self.isShutDown, slot.timer != nil else { return }
        let now = ContinuousClock.now
        if slot.collectWanted {
            slot.collectWanted = false
            if self.collectIfIdle(slot) { return }
        }
        if let at = slot.reconnectAt, at <= now {
            slot.reconnectAt = nil
            self.reconnect(slot)
        }
        if let at = slot.attachAt, at <= now {
            slot.attachAt = nil
            self.attachPending(slot)
        }
        self.reschedule(slot)
    }

    /// Creates the browsers of the slot's queries that have none; `.restarted` first for
    /// queries that failed before.
    private func attachPending(_ slot: ClientSlot) {
        for query in slot.queries.sorted(by: { $0.id < $1.id }) {
            guard slot.status == .running, let client = slot.client else { return }
            guard !query.cancelled, query.slot === slot, query.browser == nil else { continue }
            if query.failedSinceStart {
                query.failedSinceStart = false
                self.emit(.restarted, to: query)
                guard !query.cancelled else { continue }
            }
            let error = self.createBrowser(query, client: client)
            if error != Int32(AVAHI_OK) {
                query.failedSinceStart = true
                self.logger.debug(
                    "cannot re-create mDNS query",
                    metadata: ["mdns.query": "\(query.id)", "mdns.error": "\(Self.errorText(error))"]
                )
                self.emit(.failed(Self.errorText(error)), to: query)
                slot.attachAt = .now + .seconds(1)
            }
        }
    }

    // MARK: Client state (poll lock held)

    fileprivate func clientStateChanged(_ slot: ClientSlot, client: OpaquePointer?, state: AvahiClientState) {
        guard !self.isShutDown else { return }
        // During avahi_client_new the slot does not know its client yet.
        if let known = slot.client, let client, known != client { return }
        switch state {
        case AVAHI_CLIENT_S_RUNNING, AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            guard slot.status != .running else { break }
            slot.status = .running
            slot.hasRun = true
            slot.attachAt = .now
            self.reschedule(slot)
            let version = client.flatMap { avahi_client_get_version_string($0) }.map { String(cString: $0) } ?? "?"
            if self.inOutage && self.slots.allSatisfy({ $0.status == .running || $0 === slot }) {
                self.inOutage = false
                self.reconnects.increment()
                self.logger.info(
                    "avahi-daemon is back; re-creating queries",
                    metadata: ["mdns.client": "\(slot.id)", "mdns.daemon": "\(version)"]
                )
            } else {
                self.logger.info(
                    "connected to avahi-daemon",
                    metadata: ["mdns.client": "\(slot.id)", "mdns.daemon": "\(version)"]
                )
            }
        case AVAHI_CLIENT_CONNECTING:
            if slot.hasRun {
                // Daemon gone but the connection lives on: browsers are gone with the daemon.
                slot.hasRun = false
                self.noteOutage("avahi-daemon went away", slot: slot)
                self.failQueries(of: slot, reason: "avahi-daemon went away")
            }
            slot.status = .connecting
        case AVAHI_CLIENT_FAILURE:
            let error = client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            let reason =
                error == Int32(AVAHI_ERR_DISCONNECTED)
                ? "avahi-daemon disconnected" : "avahi client failed: \(Self.errorText(error))"
            slot.hasRun = false
            slot.status = .down
            self.noteOutage(reason, slot: slot)
            self.failQueries(of: slot, reason: reason)
            // Free and re-create from the timer, never inside the client's own callback.
            slot.reconnectAt = error == Int32(AVAHI_ERR_DISCONNECTED) ? .now : .now + .seconds(1)
            self.reschedule(slot)
        default:
            break
        }
        self.publish()
    }

    private func failQueries(of slot: ClientSlot, reason: String) {
        for query in slot.queries.sorted(by: { $0.id < $1.id }) {
            if let browser = query.browser {
                // Not connected any more: avahi frees it locally without a D-Bus call.
                query.browser = nil
                avahi_record_browser_free(browser)
            }
            guard !query.cancelled, !query.failedSinceStart else { continue }
            query.failedSinceStart = true
            self.emit(.failed(reason), to: query)
        }
    }

    private func noteOutage(_ reason: String, slot: ClientSlot) {
        if self.inOutage {
            self.logger.debug("avahi still unavailable", metadata: ["mdns.client": "\(slot.id)", "mdns.error": "\(reason)"])
        } else {
            self.inOutage = true
            self.logger.warning(
                "lost avahi-daemon; retrying",
                metadata: ["mdns.client": "\(slot.id)", "mdns.error": "\(reason)"]
            )
        }
    }

    // MARK: Records (poll lock held, poll thread)

    fileprivate func recordEvent(
        _ query: Query,
        browser: OpaquePointer?,
        event: AvahiBrowserEvent,
        name: UnsafePointer<CChar>?,
        rrClass: UInt16,
        type: UInt16,
        rdata: UnsafeRawPointer?,
        size: Int
    ) {
        guard !query.cancelled, let browser, query.browser == browser else { return }
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, var recordName = AvahiName.unescape(cString: name) else {
                self.logger.debug("mDNS record with an unreadable name", metadata: ["mdns.query": "\(query.id)"])
                return
            }
            // Nearly always the question's own name: share its storage rather than keep a
            // copy per record (exact bytes, so that the responder's spelling is kept).
            if recordName.wireBytes == query.question.name.wireBytes { recordName = query.question.name }
            let bytes: [UInt8] = if let rdata, size > 0 { Array(UnsafeRawBufferPointer(start: rdata, count: size)) } else { [] }
            let record = MDNSRecord(
                name: recordName,
                type: RRType(rawValue: type),
                rrClass: RRClass(rawValue: rrClass & 0x7FFF),
                rdata: bytes
            )
            // One event per delivery: the holder counts (see `MDNSEvent`).
            self.emit(event == AVAHI_BROWSER_NEW ? .added(record) : .removed(record), to: query)
        case AVAHI_BROWSER_ALL_FOR_NOW:
            self.emit(.allForNow, to: query)
        case AVAHI_BROWSER_FAILURE:
            let error = avahi_client_errno(avahi_record_browser_get_client(browser))
            query.browser = nil
            avahi_record_browser_free(browser)  // safe inside its own callback
            query.failedSinceStart = true
            self.emit(.failed(Self.errorText(error)), to: query)
            if let slot = query.slot, !query.cancelled {
                slot.attachAt = .now + .seconds(1)
                self.reschedule(slot)
            }
        default:
            break  // CACHE_EXHAUSTED
        }
    }

    private func emit(_ event: MDNSEvent, to query: Query) {
        guard !query.cancelled else { return }
        self.logger.debug(
            "mDNS event",
            metadata: [
                "mdns.query": "\(query.id)", "mdns.name": "\(query.question.name)",
                "mdns.interface": "\(query.question.interface)", "mdns.event": "\(event)",
            ]
        )
        query.receiver?.receive(event, for: query.question, tag: query.tag)
    }

    // MARK: Reconfirm

    /// avahi-client has no reconfirm call (avahi-core's cache reconfirmation is not exposed
    /// over D-Bus), so this re-queries instead: the question's record browsers are restarted,
    /// which makes the daemon send a fresh query and deliver its cache again. Each query gets
    /// `.verifying` first; its holder drops the records not delivered again by "all for now".
    /// Records the daemon still caches stay until their mDNS TTL runs out.
    public func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        let restarted = self.withPollLock { () -> Int in
            guard !self.isShutDown else { return 0 }
            var count = 0
            for slot in self.slots {
                guard let client = slot.client else { continue }
                for query in slot.queries where query.question == question && !query.cancelled {
                    guard let browser = query.browser else { continue }
                    query.browser = nil
                    avahi_record_browser_free(browser)
                    self.emit(.verifying, to: query)
                    if self.createBrowser(query, client: client) != AVAHI_OK {
                        // As for a browser failure: report it, and the slot re-attaches it.
                        query.failedSinceStart = true
                        self.emit(.failed("cannot restart the record browser"), to: query)
                        slot.attachAt = .now + .seconds(1)
                        self.reschedule(slot)
                    }
                    count += 1
                }
            }
            return count
        }
        self.logger.debug(
            "mDNS reconfirm: record browsers restarted",
            metadata: ["mdns.question": "\(question)", "mdns.restarted": "\(restarted)"])
    }

    // MARK: Cancel

    fileprivate func cancel(_ query: Query) {
        self.withPollLock {
            guard !query.cancelled else { return }
            query.cancelled = true
            if self.isShutDown { return }
            self.liveQueries -= 1
            if let browser = query.browser {
                query.browser = nil
                avahi_record_browser_free(browser)
            }
            if let slot = query.slot {
                slot.queries.remove(query)
                query.slot = nil
                self.scheduleGarbageCollection(slot)
            }
            self.publish()
        }
        self.logger.debug("mDNS query cancelled", metadata: ["mdns.query": "\(query.id)"])
    }

    // MARK: Helpers

    private func publish() {
        let state: MDNSBackendState
        if self.isShutDown || self.slots.isEmpty || self.slots.contains(where: { $0.status == .down }) {
            state = .failed
        } else if self.slots.allSatisfy({ $0.status == .running }) {
            state = .running
        } else {
            state = .connecting
        }
        let snapshot = Published(
            state: state,
            liveQueries: self.liveQueries,
            clients: self.slots.count(where: { $0.client != nil })
        )
        self.published.withLock { $0 = snapshot }
    }

    fileprivate func bootstrapFired() {
        if let timer = self.bootstrapTimer {
            cavahi_timeout_free(self.pollAPI, timer)
            self.bootstrapTimer = nil
        }
    }

    static func errorText(_ code: Int32) -> String {
        String(cString: avahi_strerror(code))
    }
}

// MARK: - Objects behind the C callbacks

/// One avahi client connection of the pool. Every field is guarded by the poll lock.
private final class ClientSlot {
    enum Status { case connecting, running, down }

    let id: Int
    unowned let backend: AvahiBackend
    /// At most this many queries; lowered when the daemon refuses objects.
    var capacity: Int
    var client: OpaquePointer?  // AvahiClient*
    var timer: OpaquePointer?  // AvahiTimeout*
    var status: Status = .connecting
    /// Reached a running state on the current connection.
    var hasRun = false
    var queries = SlotQueries()
    var reconnectAt: ContinuousClock.Instant?
    var attachAt: ContinuousClock.Instant?
    var collectWanted = false

    init(id: Int, backend: AvahiBackend, capacity: Int) {
        self.id = id
        self.backend = backend
        self.capacity = capacity
    }
}

/// A connection's queries: an array in which each query knows its position (a removal moves
/// the last one into the gap), so one pointer per query and O(1) removal; a pool holds two
/// queries per instance the proxy knows.
private struct SlotQueries: Sequence {
    private var items: [Query] = []

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    mutating func insert(_ query: Query) {
        query.position = Int32(items.count)
        items.append(query)
    }

    mutating func remove(_ query: Query) {
        let index = Int(query.position)
        guard items.indices.contains(index), items[index] === query else { return }
        let last = items.removeLast()
        if last !== query {
            items[index] = last
            last.position = Int32(index)
        }
        query.position = -1
    }

    func makeIterator() -> IndexingIterator<[Query]> { items.makeIterator() }
}

/// One query, and its holder's handle: one object per query, as the proxy holds two for every
/// instance it knows. `let`s are immutable; every `var` is guarded by the poll lock.
///
/// It keeps the backend alive (as a handle must), and the backend's pool keeps it until it is
/// cancelled. The 32-bit fields sit together after the 8-byte ones, so that no padding
/// comes between them.
private final class Query: MDNSQueryHandle, @unchecked Sendable {
    let backend: AvahiBackend
    let question: MDNSQuestion
    weak let receiver: (any MDNSQueryReceiver)?
    var browser: OpaquePointer?  // AvahiRecordBrowser*
    var slot: ClientSlot?
    let tag: UInt32
    /// For logs, and the order queries are re-created in (wraps after 2^32 queries).
    let id: UInt32
    /// Where it is in its slot's `SlotQueries`; -1 when in none.
    var position: Int32 = -1
    var cancelled = false
    /// `.failed` was delivered; the next browser starts with `.restarted`.
    var failedSinceStart = false

    init(
        id: UInt32,
        backend: AvahiBackend,
        question: MDNSQuestion,
        tag: UInt32,
        receiver: any MDNSQueryReceiver
    ) {
        self.id = id
        self.backend = backend
        self.question = question
        self.tag = tag
        self.receiver = receiver
    }

    /// Idempotent; callable from any thread, including from inside this backend's handlers.
    func cancel() {
        self.backend.cancel(self)
    }
}

// MARK: - C callbacks (poll lock held)

private let bootstrapCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    let backend = Unmanaged<AvahiBackend>.fromOpaque(userdata).takeUnretainedValue()
    backend.notePollThread()
    backend.bootstrapFired()
}

private let slotTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    let slot = Unmanaged<ClientSlot>.fromOpaque(userdata).takeUnretainedValue()
    let backend = slot.backend
    backend.notePollThread()
    backend.slotTimerFired(slot)
}

/// Also called inside `avahi_client_new`, on the thread that called it.
private let clientCallback: AvahiClientCallback = { client, state, userdata in
    guard let userdata else { return }
    let slot = Unmanaged<ClientSlot>.fromOpaque(userdata).takeUnretainedValue()
    let backend = slot.backend
    backend.clientStateChanged(slot, client: client, state: state)
}

private let recordCallback: AvahiRecordBrowserCallback = {
    browser, _, _, event, name, rrClass, type, rdata, size, _, userdata in
    guard let userdata else { return }
    let query = Unmanaged<Query>.fromOpaque(userdata).takeUnretainedValue()
    let backend = query.backend
    backend.notePollThread()
    backend.recordEvent(
        query,
        browser: browser,
        event: event,
        name: name,
        rrClass: rrClass,
        type: type,
        rdata: rdata,
        size: size
    )
}
