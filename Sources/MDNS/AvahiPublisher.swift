internal import CAvahiClient
import DNSWire
import Logging
import Synchronization

/// `MDNSPublisher` on avahi-daemon: a client connection of its own, one entry group per
/// `MDNSGroup`, on a threaded poll of its own. Keeping it apart from `AvahiBackend` leaves the
/// browsers' pool and its reconnect logic as they are.
///
/// The connection is made on the first `publish` with something in it. PTRs are shared (no
/// `AVAHI_PUBLISH_UNIQUE`): fellow proxies on the same link publish the same PTRs, and mDNS
/// keeps them side by side (RFC 6762 §10.2). Other records are unique: a group whose name
/// another host owns is reported to `onCollision` and not retried (its owner renames it).
///
/// When avahi-daemon goes away its groups go with it; they are published again when it is
/// back (`AVAHI_CLIENT_NO_FAIL`). A group the daemon refuses (publishing disabled, interface
/// gone) is logged once per reason and retried every `retryDelay`, and on the next `publish`.
///
/// **Nothing waits for avahi.** Creating, filling, committing, resetting and freeing a group are
/// blocking D-Bus calls: an `AvahiWorker` makes them, each under a deadline, and `publish`
/// returns at once (a `publish` while another waits replaces it). A call
/// past its deadline tears the connection down; it is made again a second later, and the
/// groups with it.
///
/// Announcements are avahi-daemon's own (RFC 6762 §8.3, its first 20–370 ms after the commit:
/// 0–250 ms jitter, then its response scheduler's). The browse domains' few PTRs are published
/// here; the gateway's thousands of records and the SRP registrar's are not (`LinkResponder`
/// says why).
///
/// Every field but the `let`s is guarded by the D-Bus poll's lock: avahi runs callbacks on its
/// thread holding it, and the worker takes it.
public final class AvahiPublisher: MDNSPublisher, @unchecked Sendable {
    private let logger: Logger
    private let retryDelay: Duration
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>
    /// The poll the client is made with: notes its D-Bus socket, for the worker's deadline.
    private let recordingPoll: UnsafeMutablePointer<CAvahiRecordingPoll>
    private var worker: AvahiWorker!

    private var client: OpaquePointer?  // AvahiClient*
    /// Its D-Bus socket, -1 while none.
    private var socket: Int32 = -1
    private var clientFailed = false
    /// A call on it passed its deadline: it was torn down, and is made again after `stallRetry`.
    private var tornDown = false
    private var isRunning = false
    private var isShutDown = false
    private let onCollision: @Sendable (MDNSGroup.Key) -> Void
    private let onError: @Sendable (String) -> Void
    private var wanted: [MDNSGroup.Key: MDNSGroup] = [:]
    private var groups: [MDNSGroup.Key: PublishedGroup] = [:]
    private var problems = InterfaceProblems()
    private var timer: OpaquePointer?  // AvahiTimeout*
    /// The latest `publish` not yet applied by the worker, and whether a job will apply it.
    private let pending = Mutex<(groups: [MDNSGroup]?, queued: Bool, everWanted: Bool)>((nil, false, false))

    /// A connection torn down for a stall is made again this much later.
    static let stallRetry: Duration = .seconds(1)

    /// `onCollision` runs on the poll thread with its lock held: it must not call `publish`
    /// before returning (hand the rename to another queue). `onError` is told the interface of
    /// every failure to publish there (a metric), on the same thread.
    public init(
        logger: Logger, retryDelay: Duration = .seconds(10),
        requestDeadline: Duration = AvahiBackend.defaultRequestDeadline,
        onCollision: @escaping @Sendable (MDNSGroup.Key) -> Void = { _ in },
        onError: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(MDNSError) {
        guard let poll = avahi_threaded_poll_new() else { throw .daemon("cannot create the avahi threaded poll") }
        self.logger = logger
        self.onCollision = onCollision
        self.onError = onError
        self.retryDelay = retryDelay
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.recordingPoll = .allocate(capacity: 1)
        cavahi_recording_poll_init(self.recordingPoll, self.pollAPI)
        self.timer = cavahi_timeout_new(self.pollAPI, publisherTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        self.worker = AvahiWorker(
            deadline: requestDeadline, capacity: 1, connection: "publisher",
            perform: { [weak self] jobs in
                guard let self else { return }
                self.locked { jobs.forEach { $0() } }
            },
            onStall: { [weak self] what, waited, aborted, _ in
                self?.logger.warning(
                    "avahi-daemon is not answering the publisher; what is announced stays, reconnecting",
                    metadata: [
                        "mdns.call": "\(what)", "mdns.waited_ms": "\(AvahiBackend.milliseconds(waited))",
                        "mdns.connection_reset": "\(aborted)",
                    ])
            })
        guard avahi_threaded_poll_start(poll) >= 0 else {
            if let timer { cavahi_timeout_free(self.pollAPI, timer) }
            avahi_threaded_poll_free(poll)
            throw .daemon("cannot start the avahi poll thread")
        }
        // The worker's thread starts with the first `publish` that has something in it.
    }

    deinit {
        if self.worker.isCurrent {
            // Released inside one of its own jobs: cannot wait for our own thread.
            _ = self.worker.stop(patience: .zero) {}
            avahi_threaded_poll_quit(self.poll)
            return
        }
        if self.shutdownCleanly() {
            avahi_threaded_poll_free(self.poll)
            self.recordingPoll.deallocate()
        }
    }

    public func publish(_ groups: [MDNSGroup]) {
        let submit = self.pending.withLock { pending -> Bool in
            // Nothing to publish, and never was: no thread, no connection.
            guard pending.everWanted || groups.contains(where: { !$0.records.isEmpty }) else { return false }
            pending.everWanted = true
            pending.groups = groups
            defer { pending.queued = true }
            return !pending.queued
        }
        guard submit else { return }  // the job already queued applies these
        self.worker.submit(.internal) { [weak self] in self?.applyPending() }
    }

    private func applyPending() {
        let groups = self.pending.withLock { pending -> [MDNSGroup]? in
            defer {
                pending.groups = nil
                pending.queued = false
            }
            return pending.groups
        }
        guard let groups, !self.isShutDown else { return }
        self.wanted = [:]
        for group in groups where !group.records.isEmpty { self.wanted[group.key] = group }
        if self.client == nil && !self.wanted.isEmpty { self.connect() }
        self.sync()
    }

    public func shutdown() {
        _ = self.shutdownCleanly()
    }

    /// False if a call to the daemon was still waiting: its objects are left (the process is ending).
    private let shutDownCleanly = Mutex<Bool?>(nil)

    private func shutdownCleanly() -> Bool {
        let first = self.shutDownCleanly.withLock { state -> Bool in
            defer { if state == nil { state = false } }
            return state == nil
        }
        guard first else { return self.shutDownCleanly.withLock { $0 ?? false } }
        // Runs while `stop` waits, or never: no reference kept (see `AvahiWorker.stop`).
        let stopped = self.worker.stop(patience: self.worker.deadline) { [unowned(unsafe) self] in
            self.locked { self.closeDown() }
        }
        guard stopped else {
            self.logger.warning("mDNS publisher: a call to avahi-daemon is still waiting; leaving its records")
            return false
        }
        avahi_threaded_poll_stop(self.poll)
        self.shutDownCleanly.withLock { $0 = true }
        return true
    }

    /// Withdraws every group and frees the client (worker's last job, poll lock held).
    private func closeDown() {
        self.isShutDown = true
        let withdrawn = Set(self.groups.keys.map(\.interface)).sorted()
        // Freed with the client, whose bus is closed first: no call waits (the daemon
        // withdraws a departed client's groups, with their goodbyes).
        for group in self.groups.values { group.pointer = nil }
        self.groups = [:]
        if let timer = self.timer { cavahi_timeout_free(self.pollAPI, timer) }
        self.timer = nil
        // Freeing the client frees its groups on the daemon (which sends the goodbyes of
        // the groups it announces itself).
        if let client = self.client { avahi_client_free(client) }
        self.client = nil
        self.socket = -1
        if !withdrawn.isEmpty {
            self.logger.info(
                "mDNS records withdrawn", metadata: ["mdns.interfaces": "\(withdrawn.joined(separator: ","))"])
        }
    }

    private func locked<R>(_ body: () -> R) -> R {
        avahi_threaded_poll_lock(self.poll)
        defer { avahi_threaded_poll_unlock(self.poll) }
        return body()
    }

    /// One call that may wait for the daemon (worker only), under its deadline; a call that
    /// passed it tears the connection down.
    @discardableResult
    private func call<R>(_ what: String, _ body: () -> R) -> R {
        let socket = self.socket
        let (result, outcome) = self.worker.watch(what, socket: { socket }, body)
        if outcome.overdue && !self.tornDown {
            self.tornDown = true
            // Closed by the worker, not left to a failure callback that may never come.
            self.onWorker { $0.tearDown() }
        }
        return result
    }

    /// Frees a connection torn down for a stall (a job); it is made again `stallRetry` later,
    /// and its groups with it.
    private func tearDown() {
        guard self.tornDown, let client = self.client else { return }
        self.isRunning = false
        for group in self.groups.values { group.pointer = nil }  // freed with the client
        self.groups = [:]
        avahi_client_free(client)  // closes the bus first: nothing waits
        self.client = nil
        self.socket = -1
        self.clientFailed = true
        self.logger.debug("avahi publisher connection torn down after a stall; reconnecting")
        self.armTimer(after: Self.stallRetry)
    }

    // MARK: Connection (poll lock held)

    /// Worker only.
    private func connect() {
        var error: Int32 = 0
        self.clientFailed = false
        self.tornDown = false
        let recorder = self.recordingPoll
        cavahi_recording_poll_forget(recorder)
        let address = Int(bitPattern: recorder)
        // The state callback may run inside avahi_client_new; it learns the client from its argument.
        let (client, outcome) = self.worker.watch(
            "connect to avahi-daemon",
            socket: {
                UnsafeMutablePointer<CAvahiRecordingPoll>(bitPattern: address).map(cavahi_recording_poll_socket) ?? -1
            }
        ) {
            avahi_client_new(
                cavahi_recording_poll_api(recorder), AVAHI_CLIENT_NO_FAIL, publisherClientCallback,
                Unmanaged.passUnretained(self).toOpaque(), &error)
        }
        if let client {
            self.client = client
            self.socket = cavahi_recording_poll_socket(recorder)
            if outcome.aborted {
                // Its socket is shut down: closed by the worker, no failure callback may come.
                self.tornDown = true
                self.onWorker { $0.tearDown() }
            }
            // Late but not ended (libdbus's Hello to a stuck bus has no socket to shut down):
            // the connection works; keep it.
        } else {
            self.clientFailed = true
            self.note("", "cannot connect to avahi-daemon: \(AvahiBackend.errorText(error))")
            self.armTimer(after: outcome.overdue ? Self.stallRetry : self.retryDelay)
        }
    }

    fileprivate func clientStateChanged(_ client: OpaquePointer?, _ state: AvahiClientState) {
        guard !self.isShutDown else { return }
        if self.client == nil { self.client = client }
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            self.isRunning = true
            self.onWorker { $0.sync() }
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            // The daemon is (re)registering its host name: groups wait, then are published again.
            self.isRunning = false
            self.onWorker { publisher in
                for group in publisher.groups.values { group.reset() }
            }
        case AVAHI_CLIENT_CONNECTING:
            // The daemon went away: its groups are gone with it; freed here without a D-Bus call.
            self.isRunning = false
            self.dropGroups(connected: false)
        case AVAHI_CLIENT_FAILURE:
            self.isRunning = false
            self.dropGroups(connected: false)
            self.clientFailed = true
            if self.tornDown {
                self.logger.debug("avahi publisher connection torn down after a stall; reconnecting")
                self.armTimer(after: Self.stallRetry)
            } else {
                let error = client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
                self.note("", "lost avahi-daemon: \(AvahiBackend.errorText(error))")
                self.armTimer(after: self.retryDelay)  // the client is freed there, never inside its own callback
            }
        default:
            break
        }
    }

    /// Queues work that calls the daemon (from a callback on the poll thread, or a job).
    private func onWorker(_ body: @escaping (AvahiPublisher) -> Void) {
        self.worker.submit(.internal) { [weak self] in
            guard let self, !self.isShutDown else { return }
            body(self)
        }
    }

    /// `connected`: the daemon still holds the groups, and freeing each is a call (worker only).
    private func dropGroups(connected: Bool = true) {
        for group in self.groups.values { group.free(connected: connected) }
        self.groups = [:]
    }

    // MARK: Groups (poll lock held, worker)

    /// Brings the daemon's groups to `wanted`.
    private func sync() {
        guard self.isRunning, self.client != nil, !self.tornDown else { return }
        for (key, group) in self.groups where self.wanted[key] == nil {
            group.free(connected: true)
            self.groups[key] = nil
            self.logger.debug(
                "mDNS records withdrawn", metadata: ["mdns.interface": "\(key.interface)", "mdns.group": "\(key.name)"])
        }
        var retry = false
        var indexes: [String: Int32?] = [:]
        for (key, wanted) in self.wanted.sorted(by: { $0.key < $1.key }) {
            guard let client = self.client, !self.tornDown else { break }
            let index = indexes[key.interface] ?? AvahiBackend.interfaceIndex(key.interface)
            indexes[key.interface] = index
            if let group = self.groups[key], group.records == wanted.records, group.index == index,
                !group.failed || group.collided
            {
                // As published (or given up to a collision); a re-created interface (new index)
                // is published again.
                continue
            }
            if !self.commit(wanted.records, as: key, probe: wanted.probe, client: client) { retry = true }
        }
        if retry { self.armTimer(after: self.retryDelay) }
    }

    /// Publishes `records` on `interface` in a fresh (or reset) group; false when it must be retried.
    private func commit(_ records: [MDNSRecord], as key: MDNSGroup.Key, probe: Bool, client: OpaquePointer) -> Bool {
        let interface = key.interface
        guard let index = AvahiBackend.interfaceIndex(interface) else {
            self.groups[key]?.free(connected: true)
            self.groups[key] = nil
            self.note(interface, "no such network interface; retrying")
            return false
        }
        let group: PublishedGroup
        if let existing = self.groups[key], !existing.failed, existing.pointer != nil {
            group = existing
            group.reset()
        } else {
            self.groups[key]?.free(connected: true)
            group = PublishedGroup(publisher: self, key: key)
            let pointer = self.call("create an entry group") {
                avahi_entry_group_new(client, publisherGroupCallback, Unmanaged.passUnretained(group).toOpaque())
            }
            guard let pointer else {
                self.note(
                    interface,
                    "cannot create an avahi entry group: \(AvahiBackend.errorText(avahi_client_errno(client)))")
                return false
            }
            group.pointer = pointer
            self.groups[key] = group
        }
        group.index = index
        // avahi-daemon refuses a second unique record of a name and type (AVAHI_ERR_COLLISION,
        // even within one group): an RRset of several records (a host's two AAAA, an
        // instance's two TXT) is published shared, and the host's other records carry the probe.
        var sizes: [RRsetKey: Int] = [:]
        for record in records { sizes[RRsetKey(name: record.name, type: record.type), default: 0] += 1 }
        for record in records {
            guard let name = AvahiName.escape(record.name) else { continue }
            // RFC 6762 §2: PTRs are shared; the rest is probed for and owned (§8.1).
            let unique = AVAHI_PUBLISH_UNIQUE.rawValue | (probe ? 0 : AVAHI_PUBLISH_NO_PROBE.rawValue)
            let isUnique =
                GroupAnnouncer.isUnique(record) && sizes[RRsetKey(name: record.name, type: record.type)] == 1
            let flags = AvahiPublishFlags(isUnique ? unique : 0)
            let error = self.call("add a record to an entry group") {
                name.withCString { text in
                    record.rdata.withUnsafeBytes { rdata in
                        avahi_entry_group_add_record(
                            group.pointer, index, AvahiProtocol(AVAHI_PROTO_UNSPEC), flags, text,
                            record.rrClass.rawValue, record.type.rawValue, MDNSRecord.defaultTTL(for: record.type),
                            rdata.baseAddress, rdata.count)
                    }
                }
            }
            if error == Int32(AVAHI_ERR_COLLISION) {
                // Another group of this daemon (a local service) owns the name: the caller renames.
                return self.collided(group, records: records)
            }
            if error != Int32(AVAHI_OK) {
                group.failed = true
                if !self.tornDown { self.note(interface, Self.explain(error, record: record)) }
                return false
            }
        }
        let error = self.call("commit an entry group") { avahi_entry_group_commit(group.pointer) }
        guard error == Int32(AVAHI_OK) else {
            group.failed = true
            if !self.tornDown { self.note(interface, Self.explain(error, record: nil)) }
            return false
        }
        group.records = records
        return true
    }

    /// Gives the group up until it is asked for with other records (another name).
    private func collided(_ group: PublishedGroup, records: [MDNSRecord]) -> Bool {
        group.reset()
        group.records = records
        group.failed = true
        group.collided = true
        self.logger.info(
            "mDNS name taken on the link",
            metadata: ["mdns.interface": "\(group.key.interface)", "mdns.group": "\(group.key.name)"])
        self.onCollision(group.key)
        return true
    }

    private static func explain(_ error: Int32, record: MDNSRecord?) -> String {
        let what = record.map { "cannot publish \($0.name) \($0.type): " } ?? "cannot publish: "
        if error == Int32(AVAHI_ERR_NOT_PERMITTED) {
            return what + "avahi-daemon does not publish (disable-publishing=yes in avahi-daemon.conf?); set it to no"
        }
        return what + AvahiBackend.errorText(error)
    }

    /// Poll thread.
    fileprivate func groupStateChanged(_ group: PublishedGroup, _ state: AvahiEntryGroupState) {
        guard !self.isShutDown, self.groups[group.key] === group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            self.problems.clear(group.key.interface)
            self.logger.debug(
                "mDNS records published",
                metadata: [
                    "mdns.interface": "\(group.key.interface)", "mdns.group": "\(group.key.name)",
                    "mdns.records": "\(group.records?.count ?? 0)",
                ])
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host answered our probe with other data for a unique record (RFC 6762 §9).
            self.onWorker { publisher in
                guard publisher.groups[group.key] === group else { return }
                _ = publisher.collided(group, records: group.records ?? [])
            }
        case AVAHI_ENTRY_GROUP_FAILURE:
            // A failure is the daemon's (e.g. out of resources).
            let error = self.client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            group.failed = true
            self.note(
                group.key.interface,
                "avahi-daemon dropped the published records: \(AvahiBackend.errorText(error)); retrying")
            self.armTimer(after: self.retryDelay)  // re-created there, not inside the group's own callback
        default:
            break
        }
    }

    // MARK: Retry (poll lock held)

    private func note(_ interface: String, _ problem: String) {
        if !interface.isEmpty { self.onError(interface) }
        self.problems.log(problem, on: interface, to: self.logger)
    }

    private func armTimer(after delay: Duration) {
        guard let timer = self.timer else { return }
        cavahi_timeout_arm(self.pollAPI, timer, UInt32(clamping: Int64(delay / .milliseconds(1))))
    }

    /// The retry timer (poll thread): its work calls the daemon, so the worker does it.
    fileprivate func timerFired() {
        guard !self.isShutDown else { return }
        self.onWorker { publisher in
            if publisher.clientFailed {
                if let client = publisher.client { avahi_client_free(client) }  // closes the bus first: no call waits
                publisher.client = nil
                publisher.socket = -1
                publisher.groups = [:]  // freed with the client
                if !publisher.wanted.isEmpty { publisher.connect() }
            }
            publisher.sync()
        }
    }

    /// A call on the group's connection (worker only).
    fileprivate func groupCall<R>(_ what: String, _ body: () -> R) -> R { self.call(what, body) }
}

/// A name and type: an RRset of a group.
private struct RRsetKey: Hashable {
    let name: DNSName
    let type: RRType
}

/// One `MDNSGroup`'s entry group. Guarded by the poll lock.
private final class PublishedGroup {
    unowned let publisher: AvahiPublisher
    let key: MDNSGroup.Key
    var pointer: OpaquePointer?  // AvahiEntryGroup*
    /// What the daemon was last given to publish in it.
    var records: [MDNSRecord]?
    /// The interface index the records were published on.
    var index: Int32?
    var failed = false
    /// Its unique records belong to another host; published again only with other records.
    var collided = false

    init(publisher: AvahiPublisher, key: MDNSGroup.Key) {
        self.publisher = publisher
        self.key = key
    }

    /// Worker only: a D-Bus call.
    func reset() {
        if let pointer { _ = publisher.groupCall("reset an entry group") { avahi_entry_group_reset(pointer) } }
        records = nil
        failed = false
        collided = false
    }

    /// Withdraws the records and frees the group (the daemon sends goodbyes for what it announced).
    /// `connected`: a D-Bus call, worker only; else avahi frees it locally.
    func free(connected: Bool) {
        if let pointer {
            if connected {
                _ = publisher.groupCall("free an entry group") { avahi_entry_group_free(pointer) }
            } else {
                avahi_entry_group_free(pointer)
            }
        }
        pointer = nil
        records = nil
    }
}

// MARK: - C callbacks (their poll's lock held)

private let publisherClientCallback: AvahiClientCallback = { client, state, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().clientStateChanged(client, state)
}

private let publisherGroupCallback: AvahiEntryGroupCallback = { _, state, userdata in
    guard let userdata else { return }
    let group = Unmanaged<PublishedGroup>.fromOpaque(userdata).takeUnretainedValue()
    group.publisher.groupStateChanged(group, state)
}

private let publisherTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}
