import DNSWire
import Logging
import Synchronization
internal import CAvahiClient

/// Records a link's mDNS traffic carried lately, for a new lookup to start from.
public protocol MDNSLinkCache: AnyObject, Sendable {
    /// What the link's responses said for `question` lately, not yet confirmed by the daemon.
    func records(for question: MDNSQuestion) -> [MDNSRecord]
}

/// Listens to the mDNS responses on the gateway's far links (`listen(on:)`) and keeps what
/// they say about instances and hosts (`SnoopCache`): a far device announces its PTR, SRV,
/// TXT and addresses together, and avahi-daemon caches them all, but the gateway learns them
/// through a record browser per name, each a D-Bus call; with a thousand devices announcing
/// at once those calls queue for seconds. The gateway's lookups start from what was heard
/// here instead, and the daemon's cache confirms it (`BrowseTable.subscribe`).
///
/// Its sockets are `MulticastSender`'s (bound to the group beside avahi-daemon's, joined on
/// each far interface only); it sends nothing. One thread (an avahi threaded poll: the
/// sockets' watches and a timer that opens what could not be opened, no D-Bus), started by
/// the first `listen` with an interface; the sockets and watches are guarded by its lock, the
/// cache by a mutex of its own (read from the proxy's threads). The sockets are opened,
/// closed and watched on that thread only (`LinkResponder` says why): `listen` notes the
/// interfaces and wakes it.
public final class LinkSnooper: MDNSLinkCache, @unchecked Sendable {
    private let logger: Logger
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>
    private let sockets = MulticastSender()
    private let cache: Mutex<SnoopCache>
    private let origin = ContinuousClock.now
    private var interfaces: Set<String> = []
    private var watches: [Int32: (watch: OpaquePointer, interface: String)] = [:]
    private var timer: OpaquePointer?  // AvahiTimeout*
    private var started = false
    private var isShutDown = false
    /// Interfaces whose sockets could not be opened, logged once each until they open.
    private var missing: Set<String> = []

    /// How often interfaces that could not be listened on are tried again.
    static let retry: Duration = .seconds(5)

    public init(logger: Logger, limit: Int = 16_384) throws(MDNSError) {
        guard let poll = avahi_threaded_poll_new() else { throw .daemon("cannot create the mDNS listener's poll") }
        self.logger = logger
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.cache = Mutex(SnoopCache(limit: limit))
        self.timer = cavahi_timeout_new(pollAPI, snooperTimerCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        shutdown()
        avahi_threaded_poll_free(poll)
    }

    private var now: Duration { ContinuousClock.now - origin }

    public func records(for question: MDNSQuestion) -> [MDNSRecord] {
        let now = self.now
        return cache.withLock { $0.records(for: question, now: now) }
    }

    /// Listens on `interfaces` from now on (and no longer on others).
    public func listen(on interfaces: Set<String>) {
        locked {
            guard !isShutDown, interfaces != self.interfaces else { return }
            self.interfaces = interfaces
            cache.withLock { $0.keep(only: interfaces) }
            if !interfaces.isEmpty && !started {
                started = avahi_threaded_poll_start(poll) >= 0
                if !started { logger.error("cannot start the mDNS listener's thread; far links are followed through avahi-daemon only") }
            }
            if let timer { cavahi_timeout_arm(pollAPI, timer, 0) }
        }
    }

    public func shutdown() {
        let first = locked { () -> Bool in
            defer { isShutDown = true }
            return !isShutDown
        }
        guard first else { return }
        // Its thread is stopped first: what follows touches the sockets.
        if started { avahi_threaded_poll_stop(poll) }
        for entry in watches.values { cavahi_watch_free(pollAPI, entry.watch) }
        watches = [:]
        for (_, interface) in sockets.descriptors { sockets.close(interface) }
        if let timer { cavahi_timeout_free(pollAPI, timer) }
        timer = nil
    }

    private func locked<R>(_ body: () -> R) -> R {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return body()
    }

    // MARK: The listener's thread (its lock held)

    /// Opens each interface's sockets (again, after the interface came back with a new
    /// index), watches them, and looks again later while one could not be opened.
    private func openAndWatch() {
        for (_, interface) in sockets.descriptors where !interfaces.contains(interface) {
            for (fd, entry) in watches where entry.interface == interface {
                cavahi_watch_free(pollAPI, entry.watch)
                watches[fd] = nil
            }
            sockets.close(interface)
        }
        missing = missing.intersection(interfaces)
        var failed = false
        for interface in interfaces.sorted() {
            if sockets.open(interface) {
                missing.remove(interface)
            } else {
                failed = true
                if missing.insert(interface).inserted {
                    logger.warning(
                        "cannot listen to mDNS on a far link; its far devices are learned through avahi-daemon alone",
                        metadata: ["mdns.interface": "\(interface)"])
                }
            }
        }
        let open = sockets.descriptors
        for (fd, entry) in watches where !open.contains(where: { $0.fd == fd && $0.interface == entry.interface }) {
            cavahi_watch_free(pollAPI, entry.watch)
            watches[fd] = nil
        }
        for (fd, interface) in open where watches[fd] == nil {
            if let watch = cavahi_watch_new(pollAPI, fd, snooperWatchCallback, Unmanaged.passUnretained(self).toOpaque()) {
                watches[fd] = (watch, interface)
            }
        }
        if let timer {
            if failed {
                cavahi_timeout_arm(pollAPI, timer, UInt32(Self.retry / .milliseconds(1)))
            } else {
                cavahi_timeout_disarm(pollAPI, timer)
            }
        }
    }

    fileprivate func timerFired() {
        guard !isShutDown else { return }
        openAndWatch()
    }

    fileprivate func readable(_ fd: Int32) {
        guard !isShutDown, let interface = watches[fd]?.interface else { return }
        var heard: [Message] = []
        for _ in 0..<LinkResponder.readBatch {
            guard let datagram = MulticastSender.receive(fd) else { break }
            // Only responses: a header's QR bit, read before a parse.
            guard datagram.bytes.count > 12, datagram.bytes[2] & 0x80 != 0,
                let message = try? Message(wire: datagram.bytes)
            else { continue }
            heard.append(message)
        }
        guard !heard.isEmpty else { return }
        let now = self.now
        cache.withLock { cache in
            for message in heard { cache.heard(message, on: interface, now: now) }
        }
    }
}

// MARK: - C callbacks (the poll's lock held)

private let snooperTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<LinkSnooper>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}

private let snooperWatchCallback: AvahiWatchCallback = { _, fd, _, userdata in
    guard let userdata else { return }
    Unmanaged<LinkSnooper>.fromOpaque(userdata).takeUnretainedValue().readable(fd)
}
