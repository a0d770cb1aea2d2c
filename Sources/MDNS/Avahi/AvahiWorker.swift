// The thread that makes every blocking avahi call, and the avahi objects it makes.

// MARK: - Avahi objects

internal import CAvahiClient
import CoreMetrics
import DNSWire
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The thread that makes libavahi-client's blocking calls, so that no thread that answers DNS
/// ever waits for avahi-daemon or D-Bus.
///
/// Every object creation, free and commit in libavahi-client is a synchronous D-Bus round trip
/// with libdbus's default timeout of 25 s and no way to shorten or cancel it, made with the
/// threaded poll's lock held. So callers `submit` a job and return; this thread runs the jobs in
/// order, a few at a time, and the owner's `perform` takes the poll lock around them. Requests
/// from outside (`.request`: a new query, a reconfirmation) are bounded by `capacity`; the
/// owner's own follow-ups (`.internal`: cancels, timer work) are bounded by what it holds and
/// always accepted, so that nothing it started is lost.
///
/// **Deadlines.** Each blocking call runs inside `watch`, and a second thread, the watchdog,
/// times it: a call still running after `deadline` is reported (`onStall`, once per call) and
/// its D-Bus connection's socket is shut down (`shutdown(2)`, not closed: libdbus still owns
/// the descriptor), which makes libdbus fail the call at once and the connection report its
/// loss; the owner re-makes it. A call that has no known socket yet (libdbus's own `Hello`
/// inside `avahi_client_new`, to a stuck dbus-daemon) can only be reported, and returns at
/// libdbus's 25 s. The watchdog sleeps while no call runs: an idle proxy gets no wake-ups.
final class AvahiWorker: @unchecked Sendable {
    typealias Job = () -> Void

    enum Admission {
        /// Counted against `capacity`; refused when it is reached.
        case request
        /// Always queued.
        case `internal`
    }

    /// How a watched call went.
    struct Outcome {
        var waited: Duration
        /// It ran past the deadline (reported through `onStall`).
        var overdue: Bool
        /// Its socket was shut down to end it: the connection is lost.
        var aborted: Bool
    }

    let deadline: Duration
    let capacity: Int

    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let jobsReady = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let callStarted = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    // Guarded by `lock`.
    private var jobs: [(job: Job, isRequest: Bool)] = []
    private var queuedRequests = 0
    private var stopping = false
    private var call: Watched?
    private var nextCallID: UInt64 = 0
    /// The watchdog waits for a call to start (and must be woken for one).
    private var watchdogIdle = false
    private var workerThread: pthread_t?
    private var watchdogThread: pthread_t?
    /// `stop`'s last job, and whether it runs or must not (its caller stopped waiting).
    private var last: Job?
    private var runningLast = false
    private var abandoned = false
    private var workerFinished = false

    private struct Watched {
        var id: UInt64
        var what: String
        var socket: @Sendable () -> Int32
        var started: ContinuousClock.Instant
        var overdue = false
        var aborted = false
    }

    /// Runs a batch of jobs; the owner takes the poll lock around them.
    private let perform: ([Job]) -> Void
    /// Told on the watchdog thread, without any lock held, when a call passes its deadline:
    /// what it was, how long it has waited, whether its socket was shut down.
    private let onStall: @Sendable (_ what: String, _ waited: Duration, _ aborted: Bool, _ call: UInt64) -> Void
    private let durations: CoreMetrics.Timer

    /// At most this many jobs run under one hold of the poll lock, so that avahi's callbacks
    /// (the records of running queries) are not held up by a burst of new queries.
    static let batchSize = 32

    init(
        deadline: Duration, capacity: Int, connection: String,
        metricsFactory: any MetricsFactory = MetricsSystem.factory,
        perform: @escaping ([Job]) -> Void,
        onStall: @escaping @Sendable (_ what: String, _ waited: Duration, _ aborted: Bool, _ call: UInt64) -> Void
    ) {
        precondition(deadline > .zero && capacity > 0, "AvahiWorker limits must be positive")
        self.deadline = deadline
        self.capacity = capacity
        self.perform = perform
        self.onStall = onStall
        self.durations = CoreMetrics.Timer(
            label: "mdns_backend_request_duration_seconds", dimensions: [("connection", connection)],
            preferredDisplayUnit: .seconds, factory: metricsFactory)
        pthread_mutex_init(self.lock, nil)
        // Both are waited on with deadlines on the monotonic clock (`monotonicDeadline`).
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(self.jobsReady, &attributes)
        pthread_cond_init(self.callStarted, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(self.callStarted)
        pthread_cond_destroy(self.jobsReady)
        pthread_mutex_destroy(self.lock)
        self.callStarted.deallocate()
        self.jobsReady.deallocate()
        self.lock.deallocate()
    }

    /// Starts the worker thread now; otherwise it starts with the first job, and the watchdog
    /// with the first call (a publisher with nothing to publish costs no thread).
    func start() {
        self.locked { self.startWorkerLocked() }
    }

    /// With `lock` held. The new thread waits for the lock before it looks at the queue.
    private func startWorkerLocked() {
        guard self.workerThread == nil, !self.stopping else { return }
        self.workerThread = Self.spawn(self) { $0.runJobs() }
    }

    /// Queues `job`; false when it is a request and `capacity` requests wait already, or the
    /// worker has stopped.
    @discardableResult
    func submit(_ admission: Admission, _ job: @escaping Job) -> Bool {
        self.locked {
            guard !self.stopping else { return false }
            if admission == .request {
                guard self.queuedRequests < self.capacity else { return false }
                self.queuedRequests += 1
            }
            self.jobs.append((job, admission == .request))
            self.startWorkerLocked()
            if self.jobs.count == 1 { pthread_cond_signal(self.jobsReady) }
            return true
        }
    }

    /// Whether call `id` (as given to `onStall`) is still waiting: a stall reported after the
    /// call returned is over already.
    func isWaiting(_ id: UInt64) -> Bool {
        self.locked { self.call?.id == id }
    }

    /// Whether this is the worker thread (a job, or something it called).
    var isCurrent: Bool {
        self.locked { self.workerThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs one blocking call under the watchdog. `socket` names the D-Bus connection's socket
    /// to shut down if the call overruns (read when it does: a connection being made learns
    /// its socket during the call); -1 when none is known.
    func watch<R>(_ what: String, socket: @escaping @Sendable () -> Int32, _ body: () -> R) -> (R, Outcome) {
        let started = ContinuousClock.now
        self.locked {
            if self.watchdogThread == nil && !self.workerFinished {
                self.watchdogThread = Self.spawn(self) { $0.runWatchdog() }
            }
            self.nextCallID &+= 1
            self.call = Watched(id: self.nextCallID, what: what, socket: socket, started: started)
            // A watchdog timing an earlier call wakes at that call's deadline and finds this
            // one (whose deadline is later) then: only an idle one needs waking.
            if self.watchdogIdle { pthread_cond_signal(self.callStarted) }
        }
        let result = body()
        let call = self.locked { () -> Watched? in
            defer { self.call = nil }
            return self.call
        }
        let waited = ContinuousClock.now - started
        self.durations.recordNanoseconds(waited.nanoseconds)
        return (result, Outcome(waited: waited, overdue: call?.overdue ?? false, aborted: call?.aborted ?? false))
    }

    /// Stops both threads: queued jobs are dropped, then `last` runs on the worker thread
    /// (without the poll lock) while this waits. Waits up to `patience` for a call in progress
    /// to end; false if it did not: then `last` never runs, and the threads end by themselves
    /// when the call returns. So `last` may refer to its caller without keeping it alive.
    func stop(patience: Duration, last: @escaping Job) -> Bool {
        let (worker, watchdog, isWorker) = self.locked { () -> (pthread_t?, pthread_t?, Bool) in
            let isWorker = self.workerThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            guard !self.stopping else { return (nil, nil, isWorker) }
            self.stopping = true
            self.jobs = []
            self.queuedRequests = 0
            self.last = last
            if isWorker { self.abandoned = true }  // cannot wait for ourselves
            pthread_cond_broadcast(self.jobsReady)
            pthread_cond_broadcast(self.callStarted)
            return (self.workerThread, self.watchdogThread, isWorker)
        }
        guard !isWorker else { return false }
        guard let worker else {
            // Never started (nothing was ever queued): nothing runs that `last` could race.
            if self.locked({ self.workerThread == nil && self.last != nil }) {
                self.locked { self.last = nil }
                last()
                return true
            }
            return false
        }
        // The worker says when it has finished (glibc's pthread_timedjoin_np is not visible
        // to Swift): wait for that, then join.
        let finished = self.locked { () -> Bool in
            let until = Self.monotonicDeadline(after: patience)
            while !self.workerFinished {
                if self.runningLast {
                    pthread_cond_wait(self.jobsReady, self.lock)  // `last` has started: it ends soon
                    continue
                }
                var deadline = until
                if pthread_cond_timedwait(self.jobsReady, self.lock, &deadline) == ETIMEDOUT
                    && !self.workerFinished && !self.runningLast
                {
                    self.abandoned = true
                    return false
                }
            }
            return true
        }
        let joined = finished && pthread_join(worker, nil) == 0
        if !finished { pthread_detach(worker) }
        if let watchdog {
            if joined { pthread_join(watchdog, nil) } else { pthread_detach(watchdog) }
        }
        return joined
    }

    // MARK: Threads

    private func runJobs() {
        defer {
            self.locked {
                self.workerFinished = true
                pthread_cond_broadcast(self.jobsReady)
                pthread_cond_broadcast(self.callStarted)
            }
        }
        while true {
            let (batch, last) = self.locked { () -> ([Job], Job?) in
                while self.jobs.isEmpty && !self.stopping { pthread_cond_wait(self.jobsReady, self.lock) }
                if self.stopping {
                    guard !self.abandoned, let last = self.last else { return ([], nil) }
                    self.runningLast = true
                    self.last = nil
                    return ([], last)
                }
                let count = min(self.jobs.count, Self.batchSize)
                let batch = self.jobs.prefix(count)
                self.jobs.removeFirst(count)
                self.queuedRequests -= batch.count(where: \.isRequest)
                return (batch.map(\.job), nil)
            }
            if let last {
                last()
                return
            }
            if batch.isEmpty { return }  // stopped, and nobody waits for the last job
            self.perform(batch)
        }
    }

    private func runWatchdog() {
        pthread_mutex_lock(self.lock)
        defer { pthread_mutex_unlock(self.lock) }
        // Until the worker has finished, not only until `stop`: a call in progress then is still
        // ended at its deadline, so that `stop` need not wait for libdbus's 25 s.
        while !self.workerFinished {
            guard let call = self.call, !call.overdue else {
                self.watchdogIdle = true
                pthread_cond_wait(self.callStarted, self.lock)
                self.watchdogIdle = false
                continue
            }
            let now = ContinuousClock.now
            let due = call.started + self.deadline
            if now < due {
                var until = Self.monotonicDeadline(after: due - now)
                pthread_cond_timedwait(self.callStarted, self.lock, &until)
                continue
            }
            // Overdue, and still running: the worker clears `call` under this lock only after
            // the call returned, and frees a connection only after that, so the socket is still
            // the connection's while we hold the lock.
            let socket = call.socket()
            let aborted = socket >= 0 && Self.abort(socket)
            self.call?.overdue = true
            self.call?.aborted = aborted
            pthread_mutex_unlock(self.lock)
            self.onStall(call.what, now - call.started, aborted, call.id)
            pthread_mutex_lock(self.lock)
        }
    }

    /// Shuts down a D-Bus connection's socket: libdbus sees the hang-up, fails the call waiting
    /// on it and reports the connection lost. Only a Unix stream socket (what D-Bus uses): a
    /// descriptor that is something else now is left alone.
    static func abort(_ socket: Int32) -> Bool {
        var domain: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0, domain == AF_UNIX else { return false }
        return shutdown(socket, Int32(SHUT_RDWR)) == 0
    }

    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(self.lock)
        defer { pthread_mutex_unlock(self.lock) }
        return body()
    }

    private static func monotonicDeadline(after delay: Duration) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let total = Int64(now.tv_nsec) + delay.nanoseconds
        return timespec(
            tv_sec: now.tv_sec + Int(total / 1_000_000_000), tv_nsec: Int(total % 1_000_000_000))
    }

    private final class ThreadStart {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    private static func spawn(_ worker: AvahiWorker, _ body: @escaping (AvahiWorker) -> Void) -> pthread_t? {
        let start = Unmanaged.passRetained(ThreadStart { body(worker) }).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                guard let argument else { return nil }
                let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
                start.body()
                return nil
            }, start)
        guard result == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(start).release()
            return nil
        }
        return thread
    }
}

extension Duration {
    /// The whole nanoseconds, for C calls and swift-metrics.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The objects behind avahi's C callbacks (each callback's userdata is one of them), and the
// callbacks themselves.

/// One avahi client connection of the pool. Every field is guarded by the poll lock.
final class AvahiClientSlot {
    let id: Int
    unowned let backend: AvahiBackend
    /// At most this many queries; lowered when the daemon refuses objects.
    var capacity: Int
    var client: OpaquePointer?  // AvahiClient*
    var timer: OpaquePointer?  // AvahiTimeout*
    var life = ConnectionLife()
    var queries = SlotQueries()
    /// The connection's D-Bus socket, -1 while none: what the worker shuts down to end a call
    /// past its deadline.
    var socket: Int32 = -1
    /// The worker ended a call on this connection (a stall): its loss is not the daemon's, so
    /// its queries keep their records and are verified once re-created.
    var tornDown = false
    /// Browsers that failed in their own callback, freed by the worker (freeing one is a D-Bus
    /// call); freed with the connection if it goes first.
    var failedBrowsers: [OpaquePointer] = []

    init(id: Int, backend: AvahiBackend, capacity: Int) {
        self.id = id
        self.backend = backend
        self.capacity = capacity
    }
}

/// A connection's queries: an array in which each query knows its position (a removal moves
/// the last one into the gap), so one pointer per query and O(1) removal; a pool holds two
/// queries per instance the proxy knows.
struct SlotQueries: Sequence {
    private var items: [AvahiQuery] = []

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    mutating func insert(_ query: AvahiQuery) {
        query.position = Int32(items.count)
        items.append(query)
    }

    mutating func remove(_ query: AvahiQuery) {
        let index = Int(query.position)
        guard items.indices.contains(index), items[index] === query else { return }
        let last = items.removeLast()
        if last !== query {
            items[index] = last
            last.position = Int32(index)
        }
        query.position = -1
    }

    func makeIterator() -> IndexingIterator<[AvahiQuery]> { items.makeIterator() }
}

/// One query, and its holder's handle: one object per query, as the proxy holds two for every
/// instance it knows. `let`s are immutable; every `var` is guarded by the poll lock.
///
/// It keeps the backend alive (as a handle must), and the backend's pool keeps it until it is
/// cancelled. The 32-bit fields sit together after the 8-byte ones, so that no padding
/// comes between them.
final class AvahiQuery: MDNSQueryHandle, @unchecked Sendable {
    let backend: AvahiBackend
    let question: MDNSQuestion
    weak let receiver: (any MDNSQueryReceiver)?
    var browser: OpaquePointer?  // AvahiRecordBrowser*
    var slot: AvahiClientSlot?
    let tag: UInt32
    /// For logs, and the order queries are re-created in (wraps after 2^32 queries).
    let id: UInt32
    /// Where it is in its slot's `SlotQueries`; -1 when in none.
    var position: Int32 = -1
    /// Set by `cancel` on any thread, read by every event delivery.
    private let cancelled = Atomic<Bool>(false)
    /// `.failed` was delivered; the next browser starts with `.restarted`.
    var failedSinceStart = false
    /// Its browser went with a connection torn down for a stall: the next one starts with
    /// `.verifying`, and what it does not deliver again is gone.
    var verifyOnAttach = false

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

    var isCancelled: Bool { self.cancelled.load(ordering: .acquiring) }

    /// True the first time.
    func markCancelled() -> Bool {
        !self.cancelled.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Idempotent; callable from any thread, including from inside this backend's handlers;
    /// never waits for avahi.
    func cancel() {
        self.backend.cancel(self)
    }
}

// MARK: - C callbacks (poll lock held)

let bootstrapCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    let backend = Unmanaged<AvahiBackend>.fromOpaque(userdata).takeUnretainedValue()
    backend.notePollThread()
    backend.bootstrapFired()
}

let slotTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    let slot = Unmanaged<AvahiClientSlot>.fromOpaque(userdata).takeUnretainedValue()
    let backend = slot.backend
    backend.notePollThread()
    // Its work (connecting, making browsers, closing) waits for the daemon: the worker's.
    backend.worker.submit(.internal) { [weak backend, slot] in backend?.slotTimerFired(slot) }
}

/// Also called inside `avahi_client_new`, on the thread that called it.
let clientCallback: AvahiClientCallback = { client, state, userdata in
    guard let userdata else { return }
    let slot = Unmanaged<AvahiClientSlot>.fromOpaque(userdata).takeUnretainedValue()
    let backend = slot.backend
    backend.clientStateChanged(slot, client: client, state: state)
}

let recordCallback: AvahiRecordBrowserCallback = {
    browser, _, _, event, name, rrClass, type, rdata, size, _, userdata in
    guard let userdata else { return }
    let query = Unmanaged<AvahiQuery>.fromOpaque(userdata).takeUnretainedValue()
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
