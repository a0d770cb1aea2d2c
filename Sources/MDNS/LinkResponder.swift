import DNSWire
import Logging
import Synchronization
internal import CAvahiClient

/// `MDNSPublisher` that is the mDNS responder for its records itself, on each interface it
/// publishes on: it announces them and says goodbye (`GroupAnnouncer`, RFC 6762 §8.3, §10.1),
/// answers queries for them (`QueryAnswerer`, §6), and gives up a name another host answers
/// with other data (§9), reporting it to `onCollision`. The gateway's publisher.
///
/// Why not avahi-daemon's entry groups: each group is a D-Bus call per record, plus one to
/// create and one to commit it, and avahi-daemon spends about a millisecond on each. A
/// thousand far instances on one client link were some 9,000 calls and 11 s of the daemon's
/// CPU, fifty client links would be fifty times that, and the daemon's per-client object limit
/// stops at 4,096 groups. Here publishing costs no call, nothing waits for the daemon, and
/// what is announced stays announced while it restarts. Names are not probed for (§8.1): the
/// gateway checks them against the link's own instances first (`MDNSGroup.probe` is false).
///
/// Its sockets (`MulticastSender`) join the mDNS group on each interface beside avahi-daemon's,
/// with multicast loopback off: the router's own avahi-daemon never hears these records, so
/// the proxy's browses of the client link do not find them as the link's own services, and no
/// packet of ours comes back as another host's.
///
/// One thread (an avahi threaded poll: a timer and the sockets' watches, no D-Bus), started
/// with the first publication; every field is guarded by its lock. Sockets are sent on,
/// opened, closed and watched on that thread only: avahi's poll asserts when a watch appears
/// between its poll(2) and its dispatch, and a socket closed under a live watch could leave
/// the watch reading a descriptor number the process has given to another socket. Callers
/// change what is published and wake it.
public final class LinkResponder: MDNSPublisher, @unchecked Sendable {
    private let logger: Logger
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>
    private let sender = MulticastSender()
    private let announcer: GroupAnnouncer
    private var answerer = QueryAnswerer()
    private var timer: OpaquePointer?  // AvahiTimeout*
    private var watches: [Int32: (watch: OpaquePointer, interface: String)] = [:]
    /// Groups given up to another host's name, with the records they had: published again
    /// only with other records (renamed).
    private var collided: [MDNSGroup.Key: [MDNSRecord]] = [:]
    private var started = false
    private var isShutDown = false
    /// This host's addresses, read when a socket opens: this host's own avahi-daemon asks the
    /// client link too (the gateway follows it), never hears these records (loopback is off),
    /// and would draw the whole of a type's answer at each of its queries.
    private var localAddresses: Set<String> = []
    /// The last problem logged per interface: a repeat is logged at debug.
    private var problems: [String: String] = [:]
    private let onCollision: @Sendable (MDNSGroup.Key) -> Void
    private let onError: @Sendable (String) -> Void

    /// A datagram burst is read this many packets at a time before the answers go out.
    static let readBatch = 64

    /// `onCollision` and `onError` run on the responder's thread holding its lock: they must
    /// not call back into it before returning.
    public init(
        logger: Logger, pacing: AnnouncementPacing = AnnouncementPacing(),
        onCollision: @escaping @Sendable (MDNSGroup.Key) -> Void = { _ in },
        onError: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(MDNSError) {
        guard let poll = avahi_threaded_poll_new() else { throw .daemon("cannot create the mDNS responder's poll") }
        self.logger = logger
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.announcer = GroupAnnouncer(pacing: pacing, sender: sender)
        self.onCollision = onCollision
        self.onError = onError
        self.timer = cavahi_timeout_new(pollAPI, responderTimerCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        shutdown()
        avahi_threaded_poll_free(poll)
    }

    public func publish(_ groups: [MDNSGroup]) {
        locked {
            guard !isShutDown else { return }
            var wanted: [MDNSGroup.Key: [MDNSRecord]] = [:]
            for group in groups where !group.records.isEmpty { wanted[group.key] = group.records }
            for key in announcer.keys where wanted[key] == nil { announcer.withdrawn(key) }
            collided = collided.filter { wanted[$0.key] == $0.value }
            for (key, records) in wanted.sorted(by: { $0.key < $1.key })
            where collided[key] == nil && announcer.records(of: key) != records {
                announcer.established(key, records: records)
            }
            if !wanted.isEmpty && !started {
                // Its thread waits for the lock we hold before it looks at the timer.
                started = avahi_threaded_poll_start(poll) >= 0
                if !started { problem("", "cannot start the mDNS responder's thread") }
            }
            wake()
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
        if let timer { cavahi_timeout_free(pollAPI, timer) }
        timer = nil
        // Goodbyes for everything, at once (RFC 6762 §10.1).
        for (interface, error) in announcer.shutdown() {
            logger.error("cannot send mDNS goodbyes: \(error)", metadata: ["mdns.interface": "\(interface)"])
        }
    }

    public func pace(_ pacing: AnnouncementPacing) {
        locked { announcer.pacing = pacing }
    }

    public func reannounce() {
        locked {
            guard !isShutDown else { return }
            announcer.reannounce()
            wake()
        }
    }

    private func locked<R>(_ body: () -> R) -> R {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return body()
    }

    /// Has the responder's thread send what is due now (its lock held).
    private func wake() {
        if let timer { cavahi_timeout_arm(pollAPI, timer, 0) }
    }

    // MARK: The responder's thread (its lock held)

    /// Sends the answers and announcements due, watches every open socket, and sleeps until
    /// the next is due.
    private func flush() {
        let now = announcer.now
        for (channel, answers, additional) in answerer.due(now: now) {
            for packet in MDNSResponseEncoder.packets(answers, additional: additional, limit: AnnouncementQueue.packetSize) {
                if let error = sender.send(packet.bytes, on: channel.interface, over: channel.family) {
                    problem(channel.interface, error)
                }
            }
        }
        let (errors, next) = announcer.send()
        for (interface, error) in errors { problem(interface, error) }
        watchSockets()
        let wake = [next, answerer.nextDue.map { max(.zero, $0 - now) }].compactMap { $0 }.min()
        if let wake, let timer {
            cavahi_timeout_arm(pollAPI, timer, UInt32(clamping: Int64(wake / .milliseconds(1)) + 1))
        }
    }

    private func watchSockets() {
        let open = sender.descriptors
        for (fd, entry) in watches where !open.contains(where: { $0.fd == fd && $0.interface == entry.interface }) {
            cavahi_watch_free(pollAPI, entry.watch)
            watches[fd] = nil
        }
        if open.contains(where: { watches[$0.fd]?.interface != $0.interface }) {
            localAddresses = MulticastSender.localAddresses()
        }
        for (fd, interface) in open where watches[fd] == nil {
            guard let watch = cavahi_watch_new(pollAPI, fd, responderWatchCallback, Unmanaged.passUnretained(self).toOpaque())
            else {
                problem(interface, "cannot watch the mDNS socket for queries")
                continue
            }
            watches[fd] = (watch, interface)
        }
    }

    fileprivate func timerFired() {
        guard !isShutDown else { return }
        flush()
    }

    /// Reads what arrived on `fd`, answers queries, and acts on other hosts' responses.
    fileprivate func readable(_ fd: Int32) {
        guard !isShutDown, let interface = watches[fd]?.interface else { return }
        for _ in 0..<Self.readBatch {
            guard let datagram = MulticastSender.receive(fd) else { break }
            let source = datagram.address
            guard !localAddresses.contains(source), let message = try? Message(wire: datagram.bytes) else { continue }
            let channel = QueryAnswerer.Channel(interface: interface, family: datagram.family)
            let reaction = answerer.received(
                message, from: source, port: datagram.port, on: channel, now: announcer.now
            ) {
                announcer.held($0, on: interface)
            }
            if let reply = reaction.legacyReply, let error = MulticastSender.reply(reply, to: datagram, through: fd) {
                logger.debug("cannot answer a legacy mDNS query: \(error)", metadata: ["mdns.interface": "\(interface)"])
            }
            if !reaction.goodbyes.isEmpty { announcer.announceAgain(reaction.goodbyes, on: interface) }
            for conflict in reaction.conflicts {
                for key in announcer.groups(holding: conflict.name, conflict.type, on: interface) {
                    collided[key] = announcer.records(of: key)
                    announcer.collided(key)
                    logger.info(
                        "mDNS name taken on the link",
                        metadata: ["mdns.interface": "\(interface)", "mdns.group": "\(key.name)", "mdns.name": "\(conflict.name)"])
                    onCollision(key)
                }
            }
        }
        flush()
    }

    private func problem(_ interface: String, _ error: String) {
        if !interface.isEmpty { onError(interface) }
        let problem = "cannot send mDNS announcements or answers: \(error)"
        let metadata: Logger.Metadata = interface.isEmpty ? [:] : ["mdns.interface": "\(interface)"]
        if problems[interface] == problem {
            logger.debug("\(problem)", metadata: metadata)
        } else {
            problems[interface] = problem
            logger.error("\(problem)", metadata: metadata)
        }
    }
}

// MARK: - C callbacks (the poll's lock held)

private let responderTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<LinkResponder>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}

private let responderWatchCallback: AvahiWatchCallback = { _, fd, _, userdata in
    guard let userdata else { return }
    Unmanaged<LinkResponder>.fromOpaque(userdata).takeUnretainedValue().readable(fd)
}
