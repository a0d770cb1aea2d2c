import DNSWire
import Logging

/// `MDNSPublisher` that is the mDNS responder for its records itself, on each interface it
/// publishes on: it probes for the new names of groups that ask for it (`GroupProber`, RFC
/// 6762 §8.1), announces them and says goodbye (`GroupAnnouncer`, §8.3, §10.1), answers queries
/// for them (`QueryAnswerer`, §6), and gives up a name another host answers with other data
/// (§9). A group is reported to `onEstablished` once announced, to `onCollision` when another
/// host holds one of its names. The gateway's publisher, and the SRP registrar's.
///
/// Why not avahi-daemon's entry groups: each group is a D-Bus call per record, plus one to
/// create and one to commit it, and avahi-daemon spends about a millisecond on each. A
/// thousand far instances on one client link were some 9,000 calls and 7.5 s of the daemon's
/// CPU, fifty client links would be fifty times that, and the daemon's per-client object limit
/// stops at 4,096 groups. Here publishing costs no call, nothing waits for the daemon, and
/// what is announced stays announced while it restarts. The gateway's names are not probed for:
/// it checks them against the link's own instances first (`MDNSGroup.probe` is false). The
/// registrar's are: a thousand devices registering at once cost avahi-daemon's one thread
/// 5–10 ms a group, and past some 2,500 groups it dropped the connection.
///
/// Its sockets (`MulticastSender`) join the mDNS group on each interface beside avahi-daemon's,
/// with multicast loopback off: the router's own avahi-daemon never hears these records, so
/// the proxy's browses of the client link do not find them as the link's own services, and no
/// packet of ours comes back as another host's.
///
/// One thread (`MulticastLoop`: a timer and the sockets' watches, no D-Bus), started with the
/// first publication; every field is guarded by its lock. Callers change what is published
/// and wake the thread, which sends.
public final class LinkResponder: MDNSGroupUpdates, @unchecked Sendable {
    private let logger: Logger
    private let loop: MulticastLoop
    private let announcer: GroupAnnouncer
    private var prober = GroupProber()
    private var answerer = QueryAnswerer()
    /// Groups given up to another host's name, with the records they had: published again
    /// only with other records (renamed).
    private var collided: [MDNSGroup.Key: [MDNSRecord]] = [:]
    /// This host's addresses, read when a socket opens: this host's own avahi-daemon asks the
    /// client link too (the gateway follows it), never hears these records (loopback is off),
    /// and would draw the whole of a type's answer at each of its queries.
    private var localAddresses: Set<String> = []
    private var problems = InterfaceProblems()
    private let onCollision: @Sendable (MDNSGroup.Key) -> Void
    private let onEstablished: @Sendable (MDNSGroup) -> Void
    private let onError: @Sendable (String) -> Void

    /// `onCollision`, `onEstablished` and `onError` run holding the responder's lock (on its
    /// thread, or on a caller's for a group announced at once): they must not call back into
    /// it before returning.
    public init(
        logger: Logger, pacing: AnnouncementPacing = AnnouncementPacing(),
        onCollision: @escaping @Sendable (MDNSGroup.Key) -> Void = { _ in },
        onEstablished: @escaping @Sendable (MDNSGroup) -> Void = { _ in },
        onError: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(MDNSError) {
        self.logger = logger
        self.loop = try MulticastLoop()
        self.announcer = GroupAnnouncer(pacing: pacing, sender: loop.sockets)
        self.onCollision = onCollision
        self.onEstablished = onEstablished
        self.onError = onError
        loop.handle(timer: { [unowned self] in flush() }, readable: { [unowned self] in readable($0, on: $1) })
    }

    deinit { shutdown() }

    public func publish(_ groups: [MDNSGroup]) {
        loop.locked {
            guard !loop.isShutDown else { return }
            var wanted: [MDNSGroup.Key: [MDNSRecord]] = [:]
            for group in groups where !group.records.isEmpty { wanted[group.key] = group.records }
            apply(
                wanted, probing: Set(groups.filter(\.probe).map(\.key)),
                removed: announcer.keys.filter { wanted[$0] == nil } + collided.keys.filter { wanted[$0] == nil }
                    + prober.probes.keys.filter { wanted[$0] == nil })
        }
    }

    public func update(changed: [MDNSGroup], removed: [MDNSGroup.Key]) {
        loop.locked {
            guard !loop.isShutDown else { return }
            var wanted: [MDNSGroup.Key: [MDNSRecord]] = [:]
            var gone = removed
            for group in changed {
                if group.records.isEmpty { gone.append(group.key) } else { wanted[group.key] = group.records }
            }
            apply(wanted, probing: Set(changed.filter(\.probe).map(\.key)), removed: gone)
        }
    }

    /// Withdraws `removed`, and announces each of `wanted` whose records are new, after probing
    /// for its new unique names if it is in `probing`; a group given up to another host's name
    /// stays silent until it comes with other records (renamed).
    private func apply(_ wanted: [MDNSGroup.Key: [MDNSRecord]], probing: Set<MDNSGroup.Key>, removed: [MDNSGroup.Key]) {
        for key in removed {
            prober.cancel(key)
            if announcer.records(of: key) != nil { announcer.withdrawn(key) }
            collided[key] = nil
        }
        for (key, records) in wanted where collided[key].map({ $0 != records }) == true { collided[key] = nil }
        var now: [MDNSGroup.Key: [MDNSRecord]] = [:]
        for key in wanted.keys where collided[key] != nil { prober.cancel(key) }  // silent: given up
        for (key, records) in wanted where collided[key] == nil {
            let held = announcer.records(of: key)
            guard held != records else {
                prober.cancel(key)  // back to what is announced
                continue
            }
            let names = probing.contains(key) ? Self.newNames(records, held: held ?? []) : []
            if names.isEmpty {
                prober.cancel(key)
                now[key] = records
            } else if prober.records(of: key) != records {
                prober.start(
                    key, records: records, names: names, now: announcer.now,
                    delay: .milliseconds(Int.random(in: 0...GroupProber.maximumDelay)))
            }
        }
        establish(now)
        if (!wanted.isEmpty || !prober.isEmpty) && !loop.start() {
            problem("", "cannot start the mDNS responder's thread")
        }
        loop.wake()
    }

    /// The unique names of `records` that `held` (what the group has announced) has not: the
    /// ones to probe for (RFC 6762 §8.1; a new address of a host already announced is not).
    static func newNames(_ records: [MDNSRecord], held: [MDNSRecord]) -> Set<DNSName> {
        let old = Set(held.filter(GroupAnnouncer.isUnique).map(\.name))
        return Set(records.filter { GroupAnnouncer.isUnique($0) && !old.contains($0.name) }.map(\.name))
    }

    /// Announces `groups` (theirs now) and reports each to `onEstablished`.
    private func establish(_ groups: [MDNSGroup.Key: [MDNSRecord]]) {
        for key in Self.announcementOrder(groups) {
            if let records = groups[key] {
                announcer.established(key, records: records)
                onEstablished(MDNSGroup(key: key, records: records))
            }
        }
    }

    /// The order groups are announced in: by key, except that a group of addresses goes right
    /// after the first group whose SRV names its host, so that each instance can be used as
    /// soon as its packet arrives. (By key every host sorts after every instance: a thousand
    /// far devices on fifty client links had none usable until each link's queue was nearly out.)
    static func announcementOrder(_ wanted: [MDNSGroup.Key: [MDNSRecord]]) -> [MDNSGroup.Key] {
        var hosts: [[UInt8]: MDNSGroup.Key] = [:]
        for (key, records) in wanted
        where !records.isEmpty && records.allSatisfy({ $0.type == .a || $0.type == .aaaa }) {
            // Wire bytes compared without case (length octets are below 64: left as they are).
            hosts[DNSName.lowercased(label: records[0].name.wireBytes)] = key
        }
        var order: [MDNSGroup.Key] = []
        var placed: Set<MDNSGroup.Key> = []
        for key in wanted.keys.sorted() where !placed.contains(key) {
            order.append(key)
            placed.insert(key)
            // SRV RDATA: priority, weight, port, then the target, uncompressed (RFC 2782).
            for record in wanted[key] ?? [] where record.type == .srv && record.rdata.count > 6 {
                if let host = hosts[DNSName.lowercased(label: Array(record.rdata[6...]))], placed.insert(host).inserted
                {
                    order.append(host)
                }
            }
        }
        return order
    }

    public func shutdown() {
        // Its thread is stopped first: what follows touches the sockets.
        guard loop.shutDown() else { return }
        // Goodbyes for everything, at once (RFC 6762 §10.1).
        for (interface, error) in announcer.shutdown() {
            logger.error("cannot send mDNS goodbyes: \(error)", metadata: ["mdns.interface": "\(interface)"])
        }
    }

    public func pace(_ pacing: AnnouncementPacing) {
        loop.locked { announcer.pacing = pacing }
    }

    public func reannounce() {
        loop.locked {
            guard !loop.isShutDown else { return }
            announcer.reannounce()
            loop.wake()
        }
    }

    // MARK: The responder's thread (its lock held)

    /// Sends the answers and announcements due, watches every open socket, and sleeps until
    /// the next is due.
    private func flush() {
        guard !loop.isShutDown else { return }
        let now = announcer.now
        for (channel, answers, additional) in answerer.due(now: now) {
            for packet in MDNSResponseEncoder.packets(
                answers, additional: additional, limit: AnnouncementQueue.packetSize)
            {
                if let error = loop.sockets.send(packet.bytes, on: channel.interface, over: channel.family) {
                    problem(channel.interface, error)
                }
            }
        }
        if !prober.isEmpty {
            let (probes, won) = prober.due(now: now)
            for (interface, bytes) in probes {
                if let error = loop.sockets.send(bytes, on: interface) { problem(interface, error) }
            }
            establish(Dictionary(won.map { ($0.key, $0.records) }, uniquingKeysWith: { a, _ in a }))
        }
        let (errors, next) = announcer.send()
        for (interface, error) in errors { problem(interface, error) }
        if loop.watchSockets() { localAddresses = MulticastSender.localAddresses() }
        let probing = prober.nextDue.map { max(.zero, $0 - now) }
        if let wake = [next, answerer.nextDue.map { max(.zero, $0 - now) }, probing].compactMap({ $0 }).min() {
            loop.wake(after: wake)
        }
    }

    /// Reads what arrived on `fd`, answers queries, and acts on other hosts' responses.
    private func readable(_ fd: Int32, on interface: String) {
        guard !loop.isShutDown else { return }
        for _ in 0..<MulticastLoop.readBatch {
            guard let datagram = MulticastSender.receive(fd) else { break }
            let source = datagram.address
            guard !localAddresses.contains(source), let message = try? Message(wire: datagram.bytes) else { continue }
            for key in prober.heard(message, on: interface, now: announcer.now) {
                logger.info(
                    "mDNS name taken on the link while probing",
                    metadata: ["mdns.interface": "\(interface)", "mdns.group": "\(key.name)"])
                onCollision(key)
            }
            let channel = QueryAnswerer.Channel(interface: interface, family: datagram.family)
            let reaction = answerer.received(
                message, from: source, port: datagram.port, on: channel, now: announcer.now
            ) {
                announcer.held($0, on: interface)
            }
            if let reply = reaction.legacyReply, let error = MulticastSender.reply(reply, to: datagram, through: fd) {
                logger.debug(
                    "cannot answer a legacy mDNS query: \(error)", metadata: ["mdns.interface": "\(interface)"])
            }
            if !reaction.goodbyes.isEmpty { announcer.announceAgain(reaction.goodbyes, on: interface) }
            for conflict in reaction.conflicts {
                for key in announcer.groups(holding: conflict.name, conflict.type, on: interface) {
                    prober.cancel(key)  // new names of a group that lost its old ones: not announced
                    collided[key] = announcer.records(of: key)
                    announcer.collided(key)
                    logger.info(
                        "mDNS name taken on the link",
                        metadata: [
                            "mdns.interface": "\(interface)", "mdns.group": "\(key.name)",
                            "mdns.name": "\(conflict.name)",
                        ])
                    onCollision(key)
                }
            }
        }
        flush()
    }

    private func problem(_ interface: String, _ error: String) {
        if !interface.isEmpty { onError(interface) }
        problems.log("cannot send mDNS announcements or answers: \(error)", on: interface, to: logger)
    }
}
