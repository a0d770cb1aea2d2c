import DNSWire
import Logging
internal import CAvahiClient

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
/// Announcements: avahi-daemon's own (RFC 6762 §8.3, its first 20–370 ms after the commit:
/// 0–250 ms jitter, then its response scheduler's), or, given `announcing`, the publisher's:
/// records are published with `AVAHI_PUBLISH_NO_ANNOUNCE` (avahi answers queries for them and
/// defends them) and `GroupAnnouncer` announces a group as soon as the daemon has established
/// it, announces changed records, says goodbye to withdrawn ones, paced per interface. The
/// daemon sends no goodbyes for such records when the proxy stops, so `shutdown` sends them;
/// after a crash they expire with their TTL (120 s for SRV and addresses, RFC 6762 §10).
///
/// Every field but the `let`s, and the announcer, is guarded by the poll lock: avahi runs
/// callbacks on the poll thread holding it, and `publish`/`shutdown` take it. Neither may be
/// called from a callback.
public final class AvahiPublisher: MDNSPublisher, @unchecked Sendable {
    private let logger: Logger
    private let retryDelay: Duration
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>

    private var client: OpaquePointer?  // AvahiClient*
    private var clientFailed = false
    private var isRunning = false
    private var isShutDown = false
    private let onCollision: @Sendable (MDNSGroup.Key) -> Void
    private let onError: @Sendable (String) -> Void
    private var wanted: [MDNSGroup.Key: MDNSGroup] = [:]
    private var groups: [MDNSGroup.Key: PublishedGroup] = [:]
    /// The last problem logged per interface, so a retry that fails alike logs at debug.
    private var problems: [String: String] = [:]
    private var timer: OpaquePointer?  // AvahiTimeout*

    /// Announcing itself (`announcing` given), and its timer.
    private let announcer: GroupAnnouncer?
    private var announceTimer: OpaquePointer?  // AvahiTimeout*

    /// `onCollision` runs on the poll thread with its lock held: it must not call `publish`
    /// before returning (hand the rename to another queue). `onError` is told the interface of
    /// every failure to publish or announce there (a metric), on the same thread.
    public init(
        logger: Logger, retryDelay: Duration = .seconds(10),
        announcing: AnnouncementPacing? = nil,
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
        self.announcer = announcing.map { GroupAnnouncer(pacing: $0) }
        self.timer = cavahi_timeout_new(self.pollAPI, publisherTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        if announcing != nil {
            self.announceTimer = cavahi_timeout_new(
                self.pollAPI, announceTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        }
        guard avahi_threaded_poll_start(poll) >= 0 else {
            if let timer { cavahi_timeout_free(self.pollAPI, timer) }
            if let announceTimer { cavahi_timeout_free(self.pollAPI, announceTimer) }
            avahi_threaded_poll_free(poll)
            throw .daemon("cannot start the avahi poll thread")
        }
    }

    deinit {
        self.shutdown()
        avahi_threaded_poll_free(self.poll)
    }

    public func publish(_ groups: [MDNSGroup]) {
        self.locked {
            guard !self.isShutDown else { return }
            self.wanted = [:]
            for group in groups where !group.records.isEmpty { self.wanted[group.key] = group }
            if self.client == nil && !self.wanted.isEmpty { self.connect() }
            self.sync()
        }
    }

    public func shutdown() {
        let wasRunning = self.locked { () -> Bool in
            guard !self.isShutDown else { return false }
            self.isShutDown = true
            let withdrawn = Set(self.groups.keys.map(\.interface)).sorted()
            self.dropGroups()
            if let timer = self.timer { cavahi_timeout_free(self.pollAPI, timer) }
            self.timer = nil
            // The daemon sends no goodbyes for records it was told not to announce: ours, at once.
            for (interface, error) in self.announcer?.shutdown() ?? [] {
                self.note(interface, "cannot send mDNS goodbyes: \(error)")
            }
            if let announceTimer = self.announceTimer { cavahi_timeout_free(self.pollAPI, announceTimer) }
            self.announceTimer = nil
            // Freeing the client frees its groups on the daemon (which sends the goodbyes of
            // the groups it announces itself).
            if let client = self.client { avahi_client_free(client) }
            self.client = nil
            if !withdrawn.isEmpty {
                self.logger.info("mDNS records withdrawn", metadata: ["mdns.interfaces": "\(withdrawn.joined(separator: ","))"])
            }
            return true
        }
        if wasRunning { avahi_threaded_poll_stop(self.poll) }
    }

    public func pace(_ pacing: AnnouncementPacing) {
        self.locked { self.announcer?.pacing = pacing }
    }

    public func reannounce() {
        self.locked {
            self.announcer?.reannounce()
            self.sendAnnouncements()
        }
    }

    private func locked<R>(_ body: () -> R) -> R {
        avahi_threaded_poll_lock(self.poll)
        defer { avahi_threaded_poll_unlock(self.poll) }
        return body()
    }

    // MARK: Connection (poll lock held)

    private func connect() {
        var error: Int32 = 0
        self.clientFailed = false
        // The state callback may run inside avahi_client_new; it learns the client from its argument.
        let client = avahi_client_new(
            self.pollAPI, AVAHI_CLIENT_NO_FAIL, publisherClientCallback, Unmanaged.passUnretained(self).toOpaque(), &error)
        if let client {
            self.client = client
        } else {
            self.clientFailed = true
            self.note("", "cannot connect to avahi-daemon: \(AvahiBackend.errorText(error))")
            self.armTimer()
        }
    }

    fileprivate func clientStateChanged(_ client: OpaquePointer?, _ state: AvahiClientState) {
        guard !self.isShutDown else { return }
        if self.client == nil { self.client = client }
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            self.isRunning = true
            self.sync()
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            // The daemon is (re)registering its host name: groups wait, then are published again.
            self.isRunning = false
            for group in self.groups.values { group.reset() }
        case AVAHI_CLIENT_CONNECTING:
            // The daemon went away: its groups are gone with it; freed here without a D-Bus call.
            // Announced again in full once it is back.
            self.isRunning = false
            self.dropGroups()
            self.announcer?.daemonLost()
        case AVAHI_CLIENT_FAILURE:
            self.isRunning = false
            self.dropGroups()
            self.announcer?.daemonLost()
            self.clientFailed = true
            self.note("", "lost avahi-daemon: \(AvahiBackend.errorText(client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)))")
            self.armTimer()  // the client is freed there, never inside its own callback
        default:
            break
        }
    }

    private func dropGroups() {
        for group in self.groups.values { group.free() }
        self.groups = [:]
    }

    // MARK: Groups (poll lock held)

    /// Brings the daemon's groups to `wanted`.
    private func sync() {
        guard self.isRunning, let client = self.client else { return }
        self.announcer?.confirm(wanted: Set(self.wanted.keys))
        for (key, group) in self.groups where self.wanted[key] == nil {
            group.free()
            self.groups[key] = nil
            // After the free: a daemon still holding the records would answer the goodbye (refresh).
            self.announcer?.withdrawn(key)
            self.logger.debug("mDNS records withdrawn", metadata: ["mdns.interface": "\(key.interface)", "mdns.group": "\(key.name)"])
        }
        var retry = false
        var indexes: [String: Int32?] = [:]
        for (key, wanted) in self.wanted.sorted(by: { $0.key < $1.key }) {
            let index = indexes[key.interface] ?? AvahiBackend.interfaceIndex(key.interface)
            indexes[key.interface] = index
            if let group = self.groups[key], group.records == wanted.records, group.index == index, !group.failed || group.collided {
                continue  // as published (or given up to a collision); a re-created interface (new index) is published again
            }
            if let group = self.groups[key], group.index != index {
                self.announcer?.forget(key)  // its records went with the old interface
            }
            if !self.commit(wanted.records, as: key, probe: wanted.probe, client: client) { retry = true }
        }
        if retry { self.armTimer() }
        self.sendAnnouncements()
    }

    /// Publishes `records` on `interface` in a fresh (or reset) group; false when it must be retried.
    private func commit(_ records: [MDNSRecord], as key: MDNSGroup.Key, probe: Bool, client: OpaquePointer) -> Bool {
        let interface = key.interface
        guard let index = AvahiBackend.interfaceIndex(interface) else {
            self.groups[key]?.free()
            self.groups[key] = nil
            self.announcer?.forget(key)
            self.note(interface, "no such network interface; retrying")
            return false
        }
        let group: PublishedGroup
        if let existing = self.groups[key], !existing.failed, existing.pointer != nil {
            group = existing
            group.reset()
        } else {
            self.groups[key]?.free()
            group = PublishedGroup(publisher: self, key: key)
            guard let pointer = avahi_entry_group_new(client, publisherGroupCallback, Unmanaged.passUnretained(group).toOpaque())
            else {
                self.note(interface, "cannot create an avahi entry group: \(AvahiBackend.errorText(avahi_client_errno(client)))")
                return false
            }
            group.pointer = pointer
            self.groups[key] = group
        }
        group.index = index
        for record in records {
            guard let name = AvahiName.escape(record.name) else { continue }
            // RFC 6762 §2: PTRs are shared; the rest is probed for and owned (§8.1).
            let unique = AVAHI_PUBLISH_UNIQUE.rawValue | (probe ? 0 : AVAHI_PUBLISH_NO_PROBE.rawValue)
            let announce = self.announcer == nil ? 0 : AVAHI_PUBLISH_NO_ANNOUNCE.rawValue
            let flags = AvahiPublishFlags((GroupAnnouncer.isUnique(record) ? unique : 0) | announce)
            let error = name.withCString { text in
                record.rdata.withUnsafeBytes { rdata in
                    avahi_entry_group_add_record(
                        group.pointer, index, AvahiProtocol(AVAHI_PROTO_UNSPEC), flags, text,
                        record.rrClass.rawValue, record.type.rawValue, MDNSRecord.defaultTTL(for: record.type),
                        rdata.baseAddress, rdata.count)
                }
            }
            if error == Int32(AVAHI_ERR_COLLISION) {
                // Another group of this daemon (a local service) owns the name: the caller renames.
                return self.collided(group, records: records)
            }
            if error != Int32(AVAHI_OK) {
                group.failed = true
                self.note(interface, Self.explain(error, record: record))
                return false
            }
        }
        let error = avahi_entry_group_commit(group.pointer)
        guard error == Int32(AVAHI_OK) else {
            group.failed = true
            self.note(interface, Self.explain(error, record: nil))
            return false
        }
        group.records = records
        return true
    }

    /// Gives the group up until it is asked for with other records (another name).
    private func collided(_ group: PublishedGroup, records: [MDNSRecord]) -> Bool {
        group.reset()
        self.announcer?.collided(group.key)
        self.sendAnnouncements()
        group.records = records
        group.failed = true
        group.collided = true
        self.logger.info("mDNS name taken on the link", metadata: ["mdns.interface": "\(group.key.interface)", "mdns.group": "\(group.key.name)"])
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

    fileprivate func groupStateChanged(_ group: PublishedGroup, _ state: AvahiEntryGroupState) {
        guard !self.isShutDown, self.groups[group.key] === group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            self.problems[group.key.interface] = nil
            if let records = group.records {
                self.announcer?.established(group.key, records: records)
                self.sendAnnouncements()
            }
            self.logger.debug(
                "mDNS records published",
                metadata: [
                    "mdns.interface": "\(group.key.interface)", "mdns.group": "\(group.key.name)",
                    "mdns.records": "\(group.records?.count ?? 0)",
                ])
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host answered our probe with other data for a unique record (RFC 6762 §9).
            let records = group.records ?? []
            _ = self.collided(group, records: records)
        case AVAHI_ENTRY_GROUP_FAILURE:
            // A failure is the daemon's (e.g. out of resources).
            let error = self.client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            group.failed = true
            self.note(group.key.interface, "avahi-daemon dropped the published records: \(AvahiBackend.errorText(error)); retrying")
            self.armTimer()  // re-created there, not inside the group's own callback
        default:
            break
        }
    }

    // MARK: Own announcements (poll lock held)

    /// Sends what is due and sleeps until the next is.
    private func sendAnnouncements() {
        guard let announcer = self.announcer else { return }
        let (errors, next) = announcer.send()
        for (interface, error) in errors { self.note(interface, "cannot send mDNS announcements: \(error)") }
        guard let announceTimer, let next else { return }
        cavahi_timeout_arm(self.pollAPI, announceTimer, UInt32(clamping: Int64(next / .milliseconds(1)) + 1))
    }

    fileprivate func announceTimerFired() {
        guard !self.isShutDown else { return }
        self.sendAnnouncements()
    }

    // MARK: Retry (poll lock held)

    private func note(_ interface: String, _ problem: String) {
        let metadata: Logger.Metadata = interface.isEmpty ? [:] : ["mdns.interface": "\(interface)"]
        if !interface.isEmpty { self.onError(interface) }
        if self.problems[interface] == problem {
            self.logger.debug("\(problem)", metadata: metadata)
        } else {
            self.problems[interface] = problem
            self.logger.error("\(problem)", metadata: metadata)
        }
    }

    private func armTimer() {
        guard let timer = self.timer else { return }
        cavahi_timeout_arm(self.pollAPI, timer, UInt32(clamping: Int64(self.retryDelay / .milliseconds(1))))
    }

    fileprivate func timerFired() {
        guard !self.isShutDown else { return }
        if self.clientFailed {
            if let client = self.client { avahi_client_free(client) }
            self.client = nil
            self.groups = [:]  // freed with the client
            if !self.wanted.isEmpty { self.connect() }
        }
        self.sync()
    }
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

    func reset() {
        if let pointer { avahi_entry_group_reset(pointer) }
        records = nil
        failed = false
        collided = false
    }

    /// Withdraws the records and frees the group (the daemon sends goodbyes for what it announced).
    func free() {
        if let pointer { avahi_entry_group_free(pointer) }
        pointer = nil
        records = nil
    }
}

// MARK: - C callbacks (poll lock held)

private let publisherClientCallback: AvahiClientCallback = { client, state, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().clientStateChanged(client, state)
}

private let publisherGroupCallback: AvahiEntryGroupCallback = { _, state, userdata in
    guard let userdata else { return }
    let group = Unmanaged<PublishedGroup>.fromOpaque(userdata).takeUnretainedValue()
    group.publisher.groupStateChanged(group, state)
}

private let announceTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().announceTimerFired()
}

private let publisherTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}
