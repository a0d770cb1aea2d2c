internal import CAvahiClient
import DNSWire
import Logging
import Synchronization

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
