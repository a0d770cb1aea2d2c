import DNSWire
import Logging
internal import CAvahiClient

/// `MDNSPublisher` on avahi-daemon: a client connection of its own, one entry group per
/// interface, on a threaded poll of its own. Publishing is rare and small; keeping it apart
/// from `AvahiBackend` leaves the browsers' pool and its reconnect logic as they are.
///
/// The connection is made on the first `publish` with something in it. Records are shared
/// (no `AVAHI_PUBLISH_UNIQUE`): fellow proxies on the same link publish the same PTRs, and
/// mDNS keeps them side by side (RFC 6762 §10.2).
///
/// When avahi-daemon goes away its groups go with it; they are published again when it is
/// back (`AVAHI_CLIENT_NO_FAIL`). A group the daemon refuses (publishing disabled, interface
/// gone) is logged once per reason and retried every `retryDelay`, and on the next `publish`.
///
/// Every field but the `let`s is guarded by the poll lock: avahi runs callbacks on the poll
/// thread holding it, and `publish`/`shutdown` take it. Neither may be called from a callback.
public final class AvahiPublisher: MDNSPublisher, @unchecked Sendable {
    private let logger: Logger
    /// RFC 6762 §10: 75 minutes for records that are not host names.
    private let ttl: UInt32
    private let retryDelay: Duration
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>

    private var client: OpaquePointer?  // AvahiClient*
    private var clientFailed = false
    private var isRunning = false
    private var isShutDown = false
    private var wanted: [String: [MDNSRecord]] = [:]
    private var groups: [String: PublishedGroup] = [:]
    /// The last problem logged per interface, so a retry that fails alike logs at debug.
    private var problems: [String: String] = [:]
    private var timer: OpaquePointer?  // AvahiTimeout*

    public init(logger: Logger, ttl: UInt32 = 4500, retryDelay: Duration = .seconds(10)) throws(MDNSError) {
        guard let poll = avahi_threaded_poll_new() else { throw .daemon("cannot create the avahi threaded poll") }
        self.logger = logger
        self.ttl = ttl
        self.retryDelay = retryDelay
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.timer = cavahi_timeout_new(self.pollAPI, publisherTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        guard avahi_threaded_poll_start(poll) >= 0 else {
            if let timer { cavahi_timeout_free(self.pollAPI, timer) }
            avahi_threaded_poll_free(poll)
            throw .daemon("cannot start the avahi poll thread")
        }
    }

    deinit {
        self.shutdown()
        avahi_threaded_poll_free(self.poll)
    }

    public func publish(_ records: [String: [MDNSRecord]]) {
        self.locked {
            guard !self.isShutDown else { return }
            self.wanted = records.filter { !$0.value.isEmpty }
            if self.client == nil && !self.wanted.isEmpty { self.connect() }
            self.sync()
        }
    }

    public func shutdown() {
        let wasRunning = self.locked { () -> Bool in
            guard !self.isShutDown else { return false }
            self.isShutDown = true
            let withdrawn = self.groups.keys.sorted()
            self.dropGroups()
            if let timer = self.timer { cavahi_timeout_free(self.pollAPI, timer) }
            self.timer = nil
            // Freeing the client frees its groups on the daemon, which sends the goodbyes.
            if let client = self.client { avahi_client_free(client) }
            self.client = nil
            if !withdrawn.isEmpty {
                self.logger.info("mDNS records withdrawn", metadata: ["mdns.interfaces": "\(withdrawn.joined(separator: ","))"])
            }
            return true
        }
        if wasRunning { avahi_threaded_poll_stop(self.poll) }
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
            self.isRunning = false
            self.dropGroups()
        case AVAHI_CLIENT_FAILURE:
            self.isRunning = false
            self.dropGroups()
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
        for (interface, group) in self.groups where self.wanted[interface] == nil {
            group.free()
            self.groups[interface] = nil
            self.problems[interface] = nil
            self.logger.info("mDNS records withdrawn", metadata: ["mdns.interface": "\(interface)"])
        }
        var retry = false
        for (interface, records) in self.wanted.sorted(by: { $0.key < $1.key }) {
            if let group = self.groups[interface], group.records == records, !group.failed,
                group.index == AvahiBackend.interfaceIndex(interface)
            {
                continue  // as published; a re-created interface (new index) is published again
            }
            if !self.commit(records, on: interface, client: client) { retry = true }
        }
        if retry { self.armTimer() }
    }

    /// Publishes `records` on `interface` in a fresh (or reset) group; false when it must be retried.
    private func commit(_ records: [MDNSRecord], on interface: String, client: OpaquePointer) -> Bool {
        guard let index = AvahiBackend.interfaceIndex(interface) else {
            self.groups[interface]?.free()
            self.groups[interface] = nil
            self.note(interface, "no such network interface; retrying")
            return false
        }
        let group: PublishedGroup
        if let existing = self.groups[interface], !existing.failed, existing.pointer != nil {
            group = existing
            group.reset()
        } else {
            self.groups[interface]?.free()
            group = PublishedGroup(publisher: self, interface: interface)
            guard let pointer = avahi_entry_group_new(client, publisherGroupCallback, Unmanaged.passUnretained(group).toOpaque())
            else {
                self.note(interface, "cannot create an avahi entry group: \(AvahiBackend.errorText(avahi_client_errno(client)))")
                return false
            }
            group.pointer = pointer
            self.groups[interface] = group
        }
        for record in records {
            guard let name = AvahiName.escape(record.name) else { continue }
            let error = name.withCString { text in
                record.rdata.withUnsafeBytes { rdata in
                    avahi_entry_group_add_record(
                        group.pointer, index, AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(0), text,
                        record.rrClass.rawValue, record.type.rawValue, self.ttl, rdata.baseAddress, rdata.count)
                }
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
        group.index = index
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
        guard !self.isShutDown, self.groups[group.interface] === group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            self.problems[group.interface] = nil
            self.logger.info(
                "mDNS records published",
                metadata: [
                    "mdns.interface": "\(group.interface)",
                    "mdns.records": "\(group.records?.count ?? 0)",
                ])
        case AVAHI_ENTRY_GROUP_COLLISION, AVAHI_ENTRY_GROUP_FAILURE:
            // Shared records do not collide; a failure is the daemon's (e.g. out of resources).
            let error = self.client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE)
            group.failed = true
            self.note(group.interface, "avahi-daemon dropped the published records: \(AvahiBackend.errorText(error)); retrying")
            self.armTimer()  // re-created there, not inside the group's own callback
        default:
            break
        }
    }

    // MARK: Retry (poll lock held)

    private func note(_ interface: String, _ problem: String) {
        let metadata: Logger.Metadata = interface.isEmpty ? [:] : ["mdns.interface": "\(interface)"]
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

/// One interface's entry group. Guarded by the poll lock.
private final class PublishedGroup {
    unowned let publisher: AvahiPublisher
    let interface: String
    var pointer: OpaquePointer?  // AvahiEntryGroup*
    /// What the daemon was last given to publish in it.
    var records: [MDNSRecord]?
    /// The interface index the records were published on.
    var index: Int32?
    var failed = false

    init(publisher: AvahiPublisher, interface: String) {
        self.publisher = publisher
        self.interface = interface
    }

    func reset() {
        if let pointer { avahi_entry_group_reset(pointer) }
        records = nil
        failed = false
    }

    /// Withdraws the records (the daemon sends goodbyes) and frees the group.
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

private let publisherTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<AvahiPublisher>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}
