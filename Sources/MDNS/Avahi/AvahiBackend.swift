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
    let logger: Logger
    let clientObjectLimit: Int
    let totalObjectBudget: Int
    let poll: OpaquePointer  // AvahiThreadedPoll*, freed in deinit
    let pollAPI: UnsafePointer<AvahiPoll>
    /// `pthread_t` of the poll thread, 0 until its first callback.
    let pollThread = Atomic<UInt>(0)
    /// Written under the poll lock, read from anywhere.
    let published = Mutex(Published())

    // MARK: Guarded by the poll lock

    var slots: [AvahiClientSlot] = []
    var nextSlotID = 0
    var nextQueryID: UInt32 = 0
    var liveQueries = 0
    var isShutDown = false
    /// From the first sign of a lost daemon until every connection runs again; warnings are
    /// logged once per outage.
    var outage = OutageTracker()
    /// Outages recovered from (the daemon came back and queries were re-created):
    /// `mdns_backend_reconnects_total`, and `reconnectCount` for the status page.
    let reconnects = EventCounter(label: "mdns_backend_reconnects_total")
    /// Fires once on the poll thread to learn its identity.
    var bootstrapTimer: OpaquePointer?

    struct Published {
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
        let query = try self.withPollLock { () throws(MDNSError) -> AvahiQuery in
            guard !self.isShutDown else { throw .daemon("the mDNS backend is shut down") }
            guard self.liveQueries < self.totalObjectBudget else {
                throw .budgetExhausted(limit: self.totalObjectBudget)
            }
            self.nextQueryID &+= 1
            let query = AvahiQuery(
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

    // MARK: Cancel

    func cancel(_ query: AvahiQuery) {
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

    func publish() {
        let snapshot = Published(
            state: ConnectionLife.backendState(self.slots.map(\.life.status), isShutDown: self.isShutDown),
            liveQueries: self.liveQueries,
            clients: self.slots.count(where: { $0.client != nil })
        )
        self.published.withLock { $0 = snapshot }
    }

    func bootstrapFired() {
        if let timer = self.bootstrapTimer {
            cavahi_timeout_free(self.pollAPI, timer)
            self.bootstrapTimer = nil
        }
    }

    static func errorText(_ code: Int32) -> String {
        String(cString: avahi_strerror(code))
    }
}
