// The avahi backend: queries in, records out.

// MARK: - Records

internal import CAvahiClient
import CoreMetrics
import DNSWire
import EventCounting
import Logging
import Synchronization

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
/// **Nothing waits for avahi.** Every libavahi-client call that talks to the daemon is a
/// blocking D-Bus round trip (up to 25 s when avahi-daemon or dbus-daemon is stuck). None of
/// them runs on the caller's thread: `startQuery`, `cancel` and `reconfirm` queue a job for
/// the backend's `AvahiWorker` and return at once; the worker makes the calls, each under a
/// deadline (`requestDeadline`, far below libdbus's 25 s). New queries wait in a bounded
/// queue (`requestQueueLimit`); beyond it `startQuery` throws `.busy`.
///
/// **Stalls.** A call past its deadline marks the backend `.stalled` (logged once per
/// episode, `mdns_backend_stalls_total`), and its connection is torn down (its D-Bus socket
/// shut down) and made again, retried until avahi answers. The connection's queries keep
/// their records meanwhile (a frozen daemon has lost nothing): when their browsers are
/// re-created they get `.verifying`, so what the daemon does not deliver again goes. The
/// stall ends when a call succeeds within its deadline.
///
/// **Pool.** avahi-daemon caps the objects of one client connection (`objects-per-client-max`,
/// 1024 by default). Queries are spread over a pool of client connections, at most
/// `clientObjectLimit` browsers on each; a new connection is opened when all are full, and the
/// pool as a whole refuses queries beyond `totalObjectBudget`. Spare empty connections are
/// closed; one always stays open to track the daemon.
///
/// **Reconnect.** Connections are made by the worker, without `AVAHI_CLIENT_NO_FAIL` (with it,
/// libavahi-client would re-initialise a waiting client on the poll thread, with calls our
/// deadline cannot end). When avahi-daemon (or the D-Bus daemon) goes away the dead connection
/// is freed and a new one is made, retried every second while the daemon is not there. The live queries keep their records meanwhile (the
/// devices are still there; cached answers go on): when the daemon is back, each one's browser
/// is re-created and the query gets `.verifying` before it delivers again. If the daemon is not
/// back within `ConnectionLife.holdRecords` (120 s, RFC 6762 §10's TTL for host records) they
/// get `.failed`, and `.restarted` when it is. A query started while the daemon is away waits
/// silently and is created when the daemon appears.
///
/// **Threads and locking.** All avahi objects and the pool are guarded by the threaded poll's
/// lock: avahi runs its callbacks on the poll thread with the lock held, and the worker takes
/// it around its jobs (`withPollLock`). Only the worker makes calls that wait for the daemon;
/// the poll thread's callbacks hand such work to it. The admission figures (`state`, live
/// queries, clients, the stall) are in a `Mutex` that no avahi call is made under, so the
/// public methods never wait for the poll lock. A query cancelled while one of its events is
/// being delivered may still see that one event; holders tell events apart by their tag.
///
/// Keep the backend alive (and call `shutdown()`) from outside its handlers.
public final class AvahiBackend: MDNSBackend, @unchecked Sendable {
    let logger: Logger
    /// The object limits in force (`apply`): a new connection takes the per-client limit,
    /// every new query is held to the budget.
    public var limits: AvahiObjectLimits { published.withLock { $0.limits } }
    var clientObjectLimit: Int { limits.perClient }
    let poll: OpaquePointer  // AvahiThreadedPoll*, freed in deinit
    let pollAPI: UnsafePointer<AvahiPoll>
    /// The poll that client connections are made with: the threaded poll, noting each
    /// connection's D-Bus socket (for the worker's deadline).
    let recordingPoll: UnsafeMutablePointer<CAvahiRecordingPoll>
    /// `pthread_t` of the poll thread, 0 until its first callback.
    let pollThread = Atomic<UInt>(0)
    /// Admission and the figures read from anywhere; no avahi call is made under it.
    let published: Mutex<Published>
    /// Makes every call that waits for avahi-daemon or D-Bus (`AvahiWorker`).
    private(set) var worker: AvahiWorker!

    // MARK: Guarded by the poll lock

    var slots: [AvahiClientSlot] = []
    var nextSlotID = 0
    var isShutDown = false
    /// From the first sign of a lost daemon until every connection runs again; warnings are
    /// logged once per outage.
    var outage = OutageTracker()
    /// Outages recovered from (the daemon came back and queries were re-created):
    /// `mdns_backend_reconnects_total`, and `reconnectCount` for the status page.
    let reconnects: EventCounter
    /// Episodes of avahi-daemon not answering a call within `requestDeadline`:
    /// `mdns_backend_stalls_total`.
    let stalls: EventCounter
    /// Fires once on the poll thread to learn its identity.
    var bootstrapTimer: OpaquePointer?

    struct Published {
        var limits: AvahiObjectLimits
        var connections: MDNSBackendState = .connecting
        var clients = 0
        var liveQueries = 0
        var nextQueryID: UInt32 = 0
        var isShutDown = false
        /// `shutdown` freed every avahi object (no call was left waiting).
        var cleanlyShutDown = false
        /// Since when a call has waited past its deadline without avahi answering since.
        var stalledSince: ContinuousClock.Instant?

        var state: MDNSBackendState {
            if isShutDown { return .failed }
            return stalledSince == nil ? connections : .stalled
        }
    }

    /// Below avahi-daemon's default `objects-per-client-max` (1024), with room for the
    /// connection's own objects.
    public static let defaultClientObjectLimit = 900
    /// Browsers over all connections by default.
    public static let defaultTotalObjectBudget = 8192
    /// How long one call may wait for avahi-daemon before the backend counts it as stalled
    /// and re-makes the connection. A D-Bus round trip to a healthy daemon takes well under a
    /// millisecond, and tens of them under the heaviest load measured here; but an mDNS storm
    /// of 3,000 responses a second kept avahi-daemon's answers over 2 s in the lab, and a
    /// daemon that is only busy should not have every browser torn down and made again.
    public static let defaultRequestDeadline: Duration = .seconds(5)
    /// New queries waiting for the worker, at most.
    public static let defaultRequestQueueLimit = 4096

    /// A reload's limits. Connections already open keep the per-client limit they were made
    /// with; queries over a lower budget stay until they end.
    public func apply(_ limits: AvahiObjectLimits) {
        precondition(limits.perClient > 0 && limits.total > 0, "AvahiBackend limits must be positive")
        published.withLock { $0.limits = limits }
    }

    /// Starts the poll and worker threads and connects to avahi-daemon in the background. Does
    /// not fail when the daemon (or D-Bus) is not there yet; `state` is `.connecting` (`.failed`
    /// without D-Bus) until it is.
    ///
    /// - Parameters:
    ///   - clientObjectLimit: browsers per client connection; keep below the daemon's
    ///     `objects-per-client-max` (1024 by default).
    ///   - totalObjectBudget: browsers over all connections; beyond it `startQuery` throws
    ///     `.budgetExhausted`.
    ///   - requestDeadline: how long one call may wait for the daemon (see "Stalls").
    ///   - requestQueueLimit: new queries waiting to be made; beyond it `startQuery` throws `.busy`.
    public init(
        logger: Logger, clientObjectLimit: Int = defaultClientObjectLimit,
        totalObjectBudget: Int = defaultTotalObjectBudget,
        requestDeadline: Duration = defaultRequestDeadline, requestQueueLimit: Int = defaultRequestQueueLimit,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) throws(MDNSError) {
        precondition(clientObjectLimit > 0 && totalObjectBudget > 0, "AvahiBackend limits must be positive")
        guard let poll = avahi_threaded_poll_new() else {
            throw .daemon("cannot create the avahi threaded poll")
        }
        self.logger = logger
        self.published = Mutex(
            Published(limits: AvahiObjectLimits(perClient: clientObjectLimit, total: totalObjectBudget)))
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.recordingPoll = .allocate(capacity: 1)
        cavahi_recording_poll_init(self.recordingPoll, self.pollAPI)
        self.reconnects = EventCounter(label: "mdns_backend_reconnects_total", factory: metricsFactory)
        self.stalls = EventCounter(label: "mdns_backend_stalls_total", factory: metricsFactory)
        self.worker = AvahiWorker(
            deadline: requestDeadline, capacity: requestQueueLimit, connection: "queries",
            metricsFactory: metricsFactory,
            perform: { [weak self] jobs in
                guard let self else { return }
                self.withPollLock { jobs.forEach { $0() } }
            },
            onStall: { [weak self] what, waited, aborted, call in
                self?.stalled(what, waited: waited, aborted: aborted, call: call)
            })

        // The poll thread is not running yet: no lock needed.
        let timer = cavahi_timeout_new(self.pollAPI, bootstrapCallback, Unmanaged.passUnretained(self).toOpaque())
        self.bootstrapTimer = timer
        if let timer { cavahi_timeout_arm(self.pollAPI, timer, 0) }
        let slot = self.makeSlot()
        self.publish()

        guard avahi_threaded_poll_start(poll) >= 0 else {
            self.freeEverything()
            throw .daemon("cannot start the avahi poll thread")
        }
        self.worker.start()
        // The first connection is made by the worker too: D-Bus may be stuck at start-up.
        self.worker.submit(.internal) { [weak self, slot] in self?.reconnect(slot) }
    }

    deinit {
        if self.isOnPollThread || self.worker.isCurrent {
            // The last reference went away inside a handler or a job: cannot join our own thread.
            self.logger.warning("AvahiBackend released on its own thread; stopping it without cleanup")
            _ = self.worker.stop(patience: .zero) {}
            avahi_threaded_poll_quit(self.poll)
            return
        }
        self.shutdown()
        if self.published.withLock({ $0.cleanlyShutDown }) {
            avahi_threaded_poll_free(self.poll)
            self.recordingPoll.deallocate()
        }
    }

    // MARK: Public API

    public var state: MDNSBackendState { self.published.withLock { $0.state } }

    /// Queries started and not yet cancelled.
    public var liveQueryCount: Int { self.published.withLock { $0.liveQueries } }

    /// avahi client connections currently open (or opening).
    public var clientCount: Int { self.published.withLock { $0.clients } }

    /// How many times the daemon went away and the backend recovered (for metrics).
    public var reconnectCount: Int { reconnects.value }

    /// Episodes of the daemon not answering within the deadline (for the status page).
    public var stallCount: Int { stalls.value }

    /// How long avahi-daemon has not answered, while it does not.
    public var stalledFor: Duration? {
        self.published.withLock { $0.stalledSince }.map { ContinuousClock.now - $0 }
    }

    /// Queues the query: its browser is made by the worker, never on the caller's thread.
    public func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle {
        guard Self.interfaceIndex(question.interface) != nil else {
            throw .unknownInterface(question.interface)
        }
        guard AvahiName.escape(question.name) != nil else {
            throw .daemon("the name \(question.name) cannot be expressed to avahi (NUL byte or invalid UTF-8)")
        }
        let id = try self.published.withLock { state throws(MDNSError) -> UInt32 in
            guard !state.isShutDown else { throw .daemon("the mDNS backend is shut down") }
            guard state.liveQueries < state.limits.total else {
                throw .budgetExhausted(limit: state.limits.total)
            }
            state.liveQueries += 1
            state.nextQueryID &+= 1
            return state.nextQueryID
        }
        let query = AvahiQuery(id: id, backend: self, question: question, tag: tag, receiver: receiver)
        guard self.worker.submit(.request, { [weak self] in self?.begin(query) }) else {
            self.published.withLock { $0.liveQueries -= 1 }
            throw .busy(queued: self.worker.capacity)
        }
        self.logger.debug(
            "mDNS query queued",
            metadata: [
                "mdns.query": "\(query.id)", "mdns.name": "\(question.name)", "mdns.type": "\(question.type)",
                "mdns.interface": "\(question.interface)",
            ]
        )
        return query
    }

    /// Frees every browser and connection; queries get no further events and later
    /// `startQuery` calls throw. Idempotent. Must not be called from an event handler. Waits
    /// for a call in progress up to `requestDeadline`; false if it had to leave the avahi
    /// objects as they were (the process is ending anyway).
    @discardableResult
    public func shutdown() -> Bool {
        precondition(!self.isOnPollThread, "AvahiBackend.shutdown() must not be called from an mDNS event handler")
        let first = self.published.withLock { state -> Bool in
            defer { state.isShutDown = true }
            return !state.isShutDown
        }
        guard first else { return self.published.withLock { $0.cleanlyShutDown } }
        // Runs while `stop` waits, or never (see `AvahiWorker.stop`): no reference kept.
        let stopped = self.worker.stop(patience: self.worker.deadline) { [unowned(unsafe) self] in
            self.withPollLock {
                self.isShutDown = true
                self.freeEverything()
            }
        }
        guard stopped else {
            self.logger.warning("mDNS backend: a call to avahi-daemon is still waiting; leaving its objects")
            return false
        }
        avahi_threaded_poll_stop(self.poll)
        self.pollThread.store(0, ordering: .releasing)  // its pthread_t may be reused
        self.published.withLock { $0.cleanlyShutDown = true }
        self.logger.info("mDNS backend shut down")
        return true
    }

    // MARK: Locking

    var isOnPollThread: Bool {
        let thread = self.pollThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_t(thread), pthread_self()) != 0
    }

    /// Runs `body` holding the poll lock. On the poll thread (inside a callback) the lock is
    /// already held, so `body` runs directly.
    func withPollLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if self.isOnPollThread { return try body() }
        avahi_threaded_poll_lock(self.poll)
        defer { avahi_threaded_poll_unlock(self.poll) }
        return try body()
    }

    func notePollThread() {
        self.pollThread.store(UInt(pthread_self()), ordering: .releasing)
    }

    // MARK: Start and cancel (worker, poll lock held)

    /// Puts a queued query on a connection and makes its browser (unless it was cancelled
    /// while it waited).
    func begin(_ query: AvahiQuery) {
        guard !query.isCancelled, !self.isShutDown else { return }
        do {
            try self.place(query)
            self.logger.debug("mDNS query started", metadata: ["mdns.query": "\(query.id)"])
        } catch {
            // Refused by the daemon: the holder hears `.failed`. `place` has kept the query for
            // a retry (`.restarted` when it runs), unless avahi can never take it.
            self.logger.debug(
                "cannot start mDNS query", metadata: ["mdns.query": "\(query.id)", "mdns.error": "\(error)"])
            self.emit(.failed(error.description), to: query)
        }
    }

    /// Cancels `query`: no event after this returns but one already being delivered; its
    /// browser is freed by the worker.
    func cancel(_ query: AvahiQuery) {
        guard query.markCancelled() else { return }
        self.published.withLock { $0.liveQueries -= 1 }
        self.worker.submit(.internal) { [weak self] in self?.release(query) }
        self.logger.debug("mDNS query cancelled", metadata: ["mdns.query": "\(query.id)"])
    }

    private func release(_ query: AvahiQuery) {
        guard !self.isShutDown else { return }
        if let browser = query.browser, let slot = query.slot {
            query.browser = nil
            self.call("free a record browser", on: slot) { avahi_record_browser_free(browser) }
        }
        if let slot = query.slot {
            slot.queries.remove(query)
            query.slot = nil
            self.scheduleGarbageCollection(slot)
        }
    }

    // MARK: Deadlines (worker)

    /// Makes one call that may wait for the daemon, on `slot`'s connection, under the worker's
    /// deadline. A call that had to be ended (its socket shut down) marks the connection as
    /// torn down for a stall: its queries keep their records (`AvahiClientSlot.tornDown`).
    @discardableResult
    func call<R>(_ what: String, on slot: AvahiClientSlot, _ body: () -> R) -> R {
        let socket = slot.socket
        let (result, outcome) = self.worker.watch(what, socket: { socket }, body)
        if outcome.overdue && !slot.tornDown {
            slot.tornDown = true
            // Not left to the connection's failure callback, which libdbus may never send for a
            // socket shut down under a call that was waiting: the worker closes it itself.
            self.worker.submit(.internal) { [weak self, slot] in self?.tearDown(slot) }
        }
        return result
    }

    /// Closes a connection torn down for a stall (a job): its queries keep their records and
    /// are verified when their browsers are made again, on a new connection a second later.
    func tearDown(_ slot: AvahiClientSlot) {
        guard slot.tornDown, slot.client != nil, !self.isShutDown, self.slots.contains(where: { $0 === slot }) else {
            return
        }
        self.keepRecords(of: slot)
        self.closeConnection(of: slot)  // closes the bus first: nothing waits
        slot.life.cannotConnect(now: .now)
        slot.life.hold(now: .now)  // as for a daemon that went away: records kept 120 s at most
        self.logger.debug(
            "avahi connection torn down after a stall; reconnecting", metadata: ["mdns.client": "\(slot.id)"])
        self.reschedule(slot)
        self.publish()
    }

    /// A call has waited past its deadline (the watchdog's thread, no lock held).
    private func stalled(_ what: String, waited: Duration, aborted: Bool, call: UInt64) {
        let first = self.published.withLock { state -> Bool in
            // Checked under `published`, which `answered` takes too: a call that returned (and
            // perhaps ended the stall) before this ran is not one.
            guard state.stalledSince == nil, self.worker.isWaiting(call) else { return false }
            state.stalledSince = .now - waited
            return true
        }
        guard first else {
            self.logger.debug("avahi-daemon still not answering", metadata: ["mdns.call": "\(what)"])
            return
        }
        self.stalls.increment()
        self.logger.warning(
            "avahi-daemon is not answering; cached answers go on, new browses wait, reconnecting until it answers",
            metadata: [
                "mdns.call": "\(what)", "mdns.waited_ms": "\(Self.milliseconds(waited))",
                "mdns.connection_reset": "\(aborted)",
            ])
    }

    /// The daemon answered a call within its deadline: a stall, if any, is over.
    func answered() {
        let since = self.published.withLock { state -> ContinuousClock.Instant? in
            defer { state.stalledSince = nil }
            return state.stalledSince
        }
        guard let since else { return }
        self.logger.notice(
            "avahi-daemon answers again",
            metadata: ["mdns.stalled_ms": "\(Self.milliseconds(ContinuousClock.now - since))"])
    }

    // MARK: Helpers

    /// Copies the connections' figures for readers on other threads (poll lock held).
    func publish() {
        let connections = ConnectionLife.backendState(self.slots.map(\.life.status), isShutDown: self.isShutDown)
        let clients = self.slots.count(where: { $0.client != nil })
        self.published.withLock {
            $0.connections = connections
            $0.clients = clients
        }
    }

    func bootstrapFired() {
        if let timer = self.bootstrapTimer {
            cavahi_timeout_free(self.pollAPI, timer)
            self.bootstrapTimer = nil
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 { duration.nanoseconds / 1_000_000 }

    static func errorText(_ code: Int32) -> String {
        String(cString: avahi_strerror(code))
    }
}

/// How many avahi objects (record browsers) the backend holds: per client connection (keep
/// below the daemon's `objects-per-client-max`) and over all of them.
public struct AvahiObjectLimits: Sendable, Equatable {
    public var perClient: Int
    public var total: Int

    public init(perClient: Int, total: Int) {
        self.perClient = perClient
        self.total = total
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A query's records: avahi's browser events translated into `MDNSEvent`s for the query's
/// receiver, and reconfirmation by restarting the question's browsers.
extension AvahiBackend {
    // MARK: Records (poll lock held, poll thread)

    func recordEvent(
        _ query: AvahiQuery,
        browser: OpaquePointer?,
        event: AvahiBrowserEvent,
        name: UnsafePointer<CChar>?,
        rrClass: UInt16,
        type: UInt16,
        rdata: UnsafeRawPointer?,
        size: Int
    ) {
        guard !query.isCancelled, let browser, query.browser == browser else { return }
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, var recordName = AvahiName.unescape(cString: name) else {
                self.logger.debug("mDNS record with an unreadable name", metadata: ["mdns.query": "\(query.id)"])
                return
            }
            // Nearly always the question's own name: share its storage rather than keep a
            // copy per record (exact bytes, so that the responder's spelling is kept).
            if recordName.wireBytes == query.question.name.wireBytes { recordName = query.question.name }
            let bytes: [UInt8] =
                if let rdata, size > 0 { Array(UnsafeRawBufferPointer(start: rdata, count: size)) } else { [] }
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
            query.failedSinceStart = true
            self.emit(.failed(Self.errorText(error)), to: query)
            if let slot = query.slot {
                // Freeing it is a D-Bus call: the worker's, unless the connection goes first.
                slot.failedBrowsers.append(browser)
                self.worker.submit(.internal) { [weak self, slot] in self?.freeFailedBrowser(browser, of: slot) }
                if !query.isCancelled {
                    slot.life.retryAttach(now: .now)
                    self.reschedule(slot)
                }
            } else {
                avahi_record_browser_free(browser)
            }
        default:
            break  // CACHE_EXHAUSTED
        }
    }

    func freeFailedBrowser(_ browser: OpaquePointer, of slot: AvahiClientSlot) {
        guard let index = slot.failedBrowsers.firstIndex(of: browser) else { return }  // freed with its connection
        slot.failedBrowsers.remove(at: index)
        self.call("free a failed record browser", on: slot) { _ = avahi_record_browser_free(browser) }
    }

    func emit(_ event: MDNSEvent, to query: AvahiQuery) {
        guard !query.isCancelled else { return }
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
    /// Queued for the worker like a new query; a reconfirmation that finds the queue full is
    /// dropped (the record goes at its TTL).
    public func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        let queued = self.worker.submit(.request) { [weak self] in self?.restartBrowsers(of: question) }
        if !queued {
            self.logger.debug("mDNS reconfirm dropped: the queue is full", metadata: ["mdns.question": "\(question)"])
        }
    }

    /// A job: the worker holds the poll lock.
    private func restartBrowsers(of question: MDNSQuestion) {
        let restarted = { () -> Int in
            guard !self.isShutDown else { return 0 }
            var count = 0
            for slot in self.slots {
                guard slot.client != nil, !slot.tornDown else { continue }
                for query in slot.queries where query.question == question && !query.isCancelled {
                    guard let browser = query.browser else { continue }
                    query.browser = nil
                    self.call("free a record browser", on: slot) { _ = avahi_record_browser_free(browser) }
                    self.emit(.verifying, to: query)
                    if slot.tornDown {
                        query.verifyOnAttach = false  // told already; re-created with the connection
                        continue
                    }
                    let error = self.createBrowser(query, slot: slot)
                    if slot.tornDown { continue }  // it stalled: made again with the connection
                    if error != AVAHI_OK {
                        // As for a browser failure: report it, and the slot re-attaches it.
                        query.failedSinceStart = true
                        self.emit(.failed("cannot restart the record browser"), to: query)
                        slot.life.retryAttach(now: .now)
                        self.reschedule(slot)
                    }
                    count += 1
                }
            }
            return count
        }()
        self.logger.debug(
            "mDNS reconfirm: record browsers restarted",
            metadata: ["mdns.question": "\(question)", "mdns.restarted": "\(restarted)"])
    }
}
