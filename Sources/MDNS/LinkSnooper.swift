import DNSWire
import Logging
import Synchronization

/// Records a link's mDNS traffic carried lately, for a new lookup to start from.
public protocol MDNSLinkCache: AnyObject, Sendable {
    /// What the link's responses said for `question` lately, not yet confirmed by the daemon.
    func records(for question: MDNSQuestion) -> [MDNSRecord]
    /// How many mDNS query packets this host has sent on `interface` so far (both IP
    /// protocols), as heard on the link; nil when the link is not listened to.
    func queriesSent(on interface: String) -> Int?
}

/// Listens to the mDNS responses on the gateway's far links (`listen(on:)`) and keeps what
/// they say about instances and hosts (`SnoopCache`): a far device announces its PTR, SRV,
/// TXT and addresses together, and avahi-daemon caches them all, but the gateway learns them
/// through a record browser per name, each a D-Bus call; with a thousand devices announcing
/// at once those calls queue for seconds. The gateway's lookups start from what was heard
/// here instead, and the daemon's cache confirms it (`BrowseTable.subscribe`).
///
/// It also counts the queries this host's avahi-daemon sends there (multicast is looped back
/// to the host's own sockets): the gateway paces its lookups by the packets they cost
/// (`LookupPacer`), which only the wire shows, as avahi packs questions together and asks
/// again on its own schedule.
///
/// Its sockets are `MulticastSender`'s (bound to the group beside avahi-daemon's, joined on
/// each far interface only); it sends nothing. One thread (`MulticastLoop`: the sockets'
/// watches and a timer that opens what could not be opened, no D-Bus), started by the first
/// `listen` with an interface; the sockets are guarded by its lock, the cache by a mutex of
/// its own (read from the proxy's threads). `listen` notes the interfaces and wakes it.
public final class LinkSnooper: MDNSLinkCache, @unchecked Sendable {
    private let logger: Logger
    private let loop: MulticastLoop
    private let cache: Mutex<SnoopCache>
    /// Query packets from this host heard on each interface listened to.
    private let sent = Mutex<[String: Int]>([:])
    /// This host's addresses (`MulticastSender.localAddresses`), read again every
    /// `addressesRead`: a query from one of them is this host's own.
    private var ownAddresses: Set<String> = []
    private var addressesReadAt: Duration?
    private let origin = ContinuousClock.now
    private var interfaces: Set<String> = []
    /// Interfaces whose sockets could not be opened, logged once each until they open.
    private var missing: Set<String> = []

    /// How often interfaces that could not be listened on are tried again.
    static let retry: Duration = .seconds(5)
    /// How often this host's addresses are read again.
    static let addressesRead: Duration = .seconds(10)

    public init(logger: Logger, limit: Int = 16_384) throws(MDNSError) {
        self.logger = logger
        self.loop = try MulticastLoop()
        self.cache = Mutex(SnoopCache(limit: limit))
        loop.handle(timer: { [unowned self] in openAndWatch() }, readable: { [unowned self] in readable($0, on: $1) })
    }

    deinit { shutdown() }

    private var now: Duration { ContinuousClock.now - origin }

    public func records(for question: MDNSQuestion) -> [MDNSRecord] {
        let now = self.now
        return cache.withLock { $0.records(for: question, now: now) }
    }

    public func queriesSent(on interface: String) -> Int? { sent.withLock { $0[interface] } }

    /// Listens on `interfaces` from now on (and no longer on others).
    public func listen(on interfaces: Set<String>) {
        loop.locked {
            guard !loop.isShutDown, interfaces != self.interfaces else { return }
            self.interfaces = interfaces
            cache.withLock { $0.keep(only: interfaces) }
            if !interfaces.isEmpty && !loop.start() {
                logger.error(
                    "cannot start the mDNS listener's thread; far links are followed through avahi-daemon only")
            }
            loop.wake()
        }
    }

    public func shutdown() {
        guard loop.shutDown() else { return }
        for (_, interface) in loop.sockets.descriptors { loop.sockets.close(interface) }
    }

    // MARK: The listener's thread (its lock held)

    /// Opens each interface's sockets (again, after the interface came back with a new
    /// index), closes those of interfaces no longer listened on, watches what is open, and
    /// looks again later while one could not be opened.
    private func openAndWatch() {
        guard !loop.isShutDown else { return }
        for (_, interface) in loop.sockets.descriptors where !interfaces.contains(interface) {
            loop.sockets.close(interface)
        }
        missing = missing.intersection(interfaces)
        var failed = false
        sent.withLock { sent in sent = sent.filter { interfaces.contains($0.key) } }
        for interface in interfaces.sorted() {
            if loop.sockets.open(interface) {
                missing.remove(interface)
                sent.withLock { $0[interface] = $0[interface] ?? 0 }
            } else {
                failed = true
                if missing.insert(interface).inserted {
                    logger.warning(
                        "cannot listen to mDNS on a far link; its far devices are learned through avahi-daemon alone",
                        metadata: ["mdns.interface": "\(interface)"])
                }
            }
        }
        loop.watchSockets()
        if failed { loop.wake(after: Self.retry) } else { loop.disarm() }
    }

    private func readable(_ fd: Int32, on interface: String) {
        guard !loop.isShutDown else { return }
        let now = self.now
        if addressesReadAt.map({ now - $0 >= Self.addressesRead }) ?? true {
            ownAddresses = MulticastSender.localAddresses()
            addressesReadAt = now
        }
        var heard: [Message] = []
        var ownQueries = 0
        for _ in 0..<MulticastLoop.readBatch {
            guard let datagram = MulticastSender.receive(fd) else { break }
            // The header's QR bit, read before a parse: responses are kept, queries counted.
            guard datagram.bytes.count >= 12 else { continue }
            guard datagram.bytes[2] & 0x80 != 0 else {
                if ownAddresses.contains(datagram.address) { ownQueries += 1 }
                continue
            }
            guard let message = try? Message(wire: datagram.bytes) else { continue }
            heard.append(message)
        }
        if ownQueries > 0 { sent.withLock { $0[interface, default: 0] += ownQueries } }
        guard !heard.isEmpty else { return }
        cache.withLock { cache in
            for message in heard { cache.heard(message, on: interface, now: now) }
        }
    }
}
