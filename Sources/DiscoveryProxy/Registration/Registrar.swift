import DNSWire
import EventCounting
import Logging
import MDNS
import Metrics
import Synchronization

/// The SRP registrar and advertising proxy (RFC 9665; draft-ietf-dnssd-advertising-proxy-06):
/// takes the DNS Updates the listeners receive, keeps what they register (`RegistrationTable`,
/// on disk through `RegistrationPersistence` before any NOERROR), and publishes it over mDNS on
/// the link the update came from (`RegistrationRecords`, with the proxy's own responder), and
/// to the proxy's browses of that link (`LocalRecordsBackend`), where unicast and DNS Push
/// clients find it like any other service there.
///
/// One update, in order:
/// 1. trust: the client ACL, then the link whose subnets hold the source address (a
///    registration lands in that link's zone), then the link's view (`Link.clients`);
/// 2. limits: the update's size, hosts per client address and in all;
/// 3. `SRPUpdate.read` (§3.3: instructions, Update Lease option, SIG(0)), moved into the link's
///    zone; first come, first served against the table (§3.3.3: YXDOMAIN);
/// 4. publication: a host whose records change is published, its new names probed for
///    (RFC 6762 §8.1, `LinkResponder`), and the reply waits for the outcome for at most `outcomeWait` (as Apple's srp-mdns-proxy and
///    OpenThread do): a name another device on the link holds gives YXDOMAIN and changes
///    nothing; past the wait the registration is taken and stays published;
/// 5. the table changes, the store commits, and NOERROR goes out with the granted leases
///    (RFC 9664 §4). A store that cannot write gives SERVFAIL and the table as it was.
///
/// Expiry (§5.1) runs on the proxy's scheduler at the next lease's end; leases are on the wall
/// clock (`clock`), so they keep counting while the daemon is down.
public final class Registrar: Sendable {
    /// The zone Thread and Matter devices register in (RFC 9665 §6.1).
    public static let defaultZone = try! DNSName("default.service.arpa.")

    private let publisher: any MDNSPublisher
    /// Where the proxy's browses see what is registered (nil: the publisher's daemon shows them).
    private let browsable: LocalRecordsBackend?
    private let scheduler: any ProxyScheduler
    /// Where updates are read and their signatures checked (steps 1 to 3), when not on
    /// `scheduler`'s thread: SIG(0) was a third of that thread's time per new host, and it
    /// now runs beside the table, the trials and the store's commits (docs/BENCHMARKS.md,
    /// "SRP registrar: reading beside applying"). A client's updates are always read by the
    /// same reader (by its address), so they are applied in the order they came.
    private let readers: [any ProxyScheduler]
    private let logger: Logger
    private let clock: @Sendable () -> Int64
    private let metrics: RegistrarMetrics
    private let refused: @Sendable (DNSClient, String?) -> Void
    private let state: Mutex<State>
    /// Updates the listeners received, not yet taken by their reader (one inbox per reader).
    private let inboxes: [Inbox<ReceivedUpdate>]
    /// Updates read and checked on the readers' threads, not yet applied on the registrar's.
    private let ready = Inbox<Waiter>()
    /// The publisher's outcomes, not yet taken: settled together, their updates share a
    /// commit (one fsync for the hosts whose probes ended in the same round, not one each).
    private let outcomes = Inbox<Outcome>()

    /// A trial's end: its probe won or lost, or the wait ran out first.
    struct Outcome: Sendable {
        let key: MDNSGroup.Key
        /// The records that won: an outcome for other records (an earlier trial's, settled by
        /// the wait) leaves the trial waiting. Nil: not checked.
        var records: [MDNSRecord]? = nil
        let collided: Bool
        let late: Bool
    }

    struct State: ~Copyable {
        var configuration: RegistrarConfiguration
        /// The links registrations land on and the client ACL, as for queries.
        var proxy: ProxyConfiguration
        var links: [Link] { proxy.links }
        var table: RegistrationTable
        var store: (any RegistrationPersistence)?
        /// Hosts being published for an update that waits for the outcome, by group.
        var trials: [MDNSGroup.Key: Trial] = [:]
        /// Each registered host's group as last built from the table (`publish(hosts:)`).
        var registered: [MDNSGroup.Key: MDNSGroup] = [:]
        /// Hosts and services in `registered`, by interface (the gauges).
        var counts: [String: RegistrarMetrics.LinkCounts] = [:]
        var expiryTimer: (any ProxyTimer)?
        var isClosed = false
        /// The registrar's own service on each link (`_dnssd-srp._tcp`, RFC 9665 §10).
        var advertisement: [MDNSGroup] = []
        /// Updates each client address may still send (`maxUpdateRate`).
        var buckets: [[UInt8]: TokenBucket] = [:]
        /// `publishAll` runs so far (a reload, an advertisement, on another thread): a trial's
        /// group handed before one is no longer what the publisher holds.
        var republished = 0
    }

    /// A host's group published for updates that wait for its probe.
    struct Trial {
        var group: MDNSGroup
        var waiting: [Waiter]
        var timer: any ProxyTimer
    }

    /// An update that passed every check and waits to be applied.
    struct Waiter: Sendable {
        let update: SRPUpdate
        let granted: UpdateLease
        let query: Message
        let client: DNSClient
        let link: Link
        let received: Int64
        let reply: @Sendable ([UInt8]?) -> Void
    }

    /// `table` as the store kept it (`RegistrationStore.open`); `store` writes every change
    /// (nil: kept in memory only, for tests). `clock`: wall-clock seconds. `readers`: threads
    /// of their own for reading updates (none: `scheduler`'s).
    ///
    /// `refused` is told of each client the ACL (`link` nil) or a link's view turned away, so
    /// that the proxy counts and logs them with its own (`DiscoveryProxy.noteRefused`).
    public init(
        configuration: RegistrarConfiguration, proxy: ProxyConfiguration, table: RegistrationTable,
        store: sending (any RegistrationPersistence)?, publisher: any MDNSPublisher,
        browsable: LocalRecordsBackend? = nil, scheduler: any ProxyScheduler, readers: [any ProxyScheduler] = [],
        logger: Logger,
        clock: @escaping @Sendable () -> Int64, metrics: RegistrarMetrics = RegistrarMetrics(),
        refused: @escaping @Sendable (_ client: DNSClient, _ link: String?) -> Void = { _, _ in }
    ) {
        self.refused = refused
        self.publisher = publisher
        self.browsable = browsable
        self.scheduler = scheduler
        self.readers = readers
        self.inboxes = (0..<max(1, readers.count)).map { _ in Inbox() }
        self.logger = logger
        self.clock = clock
        self.metrics = metrics
        self.state = Mutex(
            State(
                configuration: configuration, proxy: proxy, table: table,
                store: store))
    }

    /// Ends what expired while the daemon was down, publishes the rest and arms the expiry.
    public func start() {
        expire()
        state.withLock { state in
            publisher.pace(state.proxy.mdnsAnnouncePacing)
            publishAll(&state)
        }
    }

    /// A reload: new bounds and limits, new links (registrations of a link no longer served
    /// stay in the table, unpublished, until they expire).
    @_optimize(size)  // cold: a reload (docs/BENCHMARKS.md, "Footprint, step 8")
    public func apply(_ configuration: RegistrarConfiguration, proxy: ProxyConfiguration) {
        state.withLock { state in
            state.configuration = configuration
            state.proxy = proxy
            publisher.pace(proxy.mdnsAnnouncePacing)
            publishAll(&state)
        }
    }

    /// Publishes `groups`, the registrar's own service on the links (RFC 9665 §10), beside
    /// the registrations; a reload or an interface change gives them again.
    public func advertise(_ groups: [MDNSGroup]) {
        state.withLock { state in
            guard state.advertisement != groups else { return }
            state.advertisement = groups
            publishAll(&state)
        }
    }

    @_optimize(size)  // cold
    public func shutdown() {
        let waiting = state.withLock { state -> [Waiter] in
            state.isClosed = true
            state.expiryTimer?.cancel()
            let waiting = state.trials.values.flatMap(\.waiting)
            for trial in state.trials.values { trial.timer.cancel() }
            state.trials = [:]
            return waiting
        }
        // Not applied: a device that gets no answer sends its update again to the next server.
        for waiter in waiting { waiter.reply(nil) }
    }

    /// The settings in force.
    public var configuration: RegistrarConfiguration { state.withLock { $0.configuration } }

    /// What the table holds now, for the status page.
    public var table: RegistrationTable { state.withLock { $0.table } }

    /// Updates answered so far, by RCODE name (`srp_updates_total`).
    public var updatesAnswered: [String: Int] { metrics.answered }

    /// The wall clock, in seconds.
    var currentTime: Int64 { clock() }

    /// The links registrations are published on, as configured now.
    public var links: [Link] { state.withLock { $0.links } }

    // MARK: - An update

    /// Answers one DNS Update (`bytes`, without a TCP length prefix) from `client`: `reply`
    /// is called once, now or after the publication's outcome, with the answer (nil: none).
    ///
    /// Nothing of it runs on the caller's thread (a DNS event loop): the signature is the
    /// reader's, the table's lock and the store's fsync the registrar's scheduler's, so an
    /// update never holds up the queries behind it.
    public func handle(_ bytes: [UInt8], from client: DNSClient, reply: @escaping @Sendable ([UInt8]?) -> Void) {
        let reader = readers.isEmpty ? 0 : Self.reader(of: client.address, among: readers.count)
        let inbox = inboxes[reader]
        guard inbox.put(ReceivedUpdate(bytes: bytes, client: client, reply: reply)) else { return }
        (readers.isEmpty ? scheduler : readers[reader]).schedule(after: .zero) { [weak self] in self?.drain(inbox) }
    }

    /// The reader of a client's updates: by its address (FNV-1a), the same one each time.
    static func reader(of address: [UInt8], among count: Int) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in address { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(count))
    }

    /// Reads every update that arrived (steps 1 to 3), and hands those that passed to the
    /// registrar's thread a few at a time: 2,500 devices at once read whole before the first
    /// began its probe held every answer back by the time the reading took, and the answers,
    /// then the devices' next updates, came in waves (docs/BENCHMARKS.md, "SRP registrar:
    /// reading beside applying").
    private func drain(_ inbox: Inbox<ReceivedUpdate>) {
        while true {
            let received = inbox.takeAll()
            if received.isEmpty { return }
            var checked: [Waiter] = []
            for update in received {
                guard let waiter = read(update.bytes, from: update.client, reply: update.reply) else { continue }
                checked.append(waiter)
                if checked.count == Self.handOff {
                    hand(checked)
                    checked.removeAll(keepingCapacity: true)
                }
            }
            if !checked.isEmpty { hand(checked) }
        }
    }

    /// Updates read, to be applied on the registrar's thread.
    private func hand(_ checked: [Waiter]) {
        guard !readers.isEmpty else { return apply(checked) }
        if ready.put(contentsOf: checked) { scheduler.schedule(after: .zero) { [weak self] in self?.applyReady() } }
    }

    /// What the readers handed on so far, applied; then another turn, not a loop, so that the
    /// probes' outcomes settle between turns.
    private func applyReady() {
        let taken = ready.takeAll()
        guard !taken.isEmpty else { return }
        apply(taken)
        scheduler.schedule(after: .zero) { [weak self] in self?.applyReady() }
    }

    /// Updates read are handed on this many at a time (some 15 ms of reading).
    static let handOff = 64

    /// Steps 4 and 5 for updates read: those that need no publication share one transaction
    /// (`Inbox`: updates that came while the last commit waited for the disk share the next).
    private func apply(_ checked: [Waiter]) {
        var batch: [Waiter] = []
        for waiter in checked {
            if let now = begin(waiter) { batch.append(now) }
        }
        if !batch.isEmpty { commit(batch) }
    }

    /// One update read and checked: answered (a rejection), or returned to be applied.
    private func read(
        _ bytes: [UInt8], from client: DNSClient, reply: @escaping @Sendable ([UInt8]?) -> Void
    ) -> Waiter? {
        guard let header = MessageHeader(bytes), !header.isResponse else {
            reply(nil)
            return nil
        }
        let query: Message
        do {
            query = try Message(wire: bytes)
        } catch {
            let failure = Message(
                id: header.id, isResponse: true, opcode: header.opcode, rcode: .formErr)
            answer(failure, rcode: .formErr, reason: "undecodable: \(error)", client: client, reply: reply)
            return nil
        }
        let now = clock()
        switch check(query, bytes: bytes, from: client, now: now) {
        case .failure(let rejection):
            answer(query, rejection, client: client, reply: reply)
            return nil
        case .success(let (update, link)):
            let granted = state.withLock { $0.configuration.leases.grant(update.lease) }
            return Waiter(
                update: update, granted: granted, query: query, client: client, link: link, received: now,
                reply: reply)
        }
    }

    /// Steps 1 to 3, but first come, first served: who may register, the update as SRP reads
    /// it, moved into the link's zone.
    private func check(_ query: Message, bytes: [UInt8], from client: DNSClient, now: Int64) -> Result<
        (SRPUpdate, Link), SRPUpdate.Rejection
    > {
        // The settings as they are now; the signature is checked outside the lock. The table
        // is not copied: a reader holding a copy while the registrar's thread changes it would
        // make that change copy the whole table (renewals at 10,000 hosts fell below 2,000/s).
        let (configuration, proxy) = state.withLock { ($0.configuration, $0.proxy) }
        let links = proxy.links
        guard configuration.isEnabled else { return .failure(.init(rcode: .notImp, reason: "the registrar is off")) }
        if !proxy.admits(client) {
            refused(client, nil)
            return .failure(.init(rcode: .refused, reason: "client not allowed (allow-clients)"))
        }
        guard let link = links.first(where: { $0.subnets.contains { $0.contains(client.address) } }) else {
            return .failure(.init(rcode: .refused, reason: "the client is on no served link"))
        }
        guard link.isVisible(to: client) else {
            refused(client, link.interface)
            return .failure(.init(rcode: .refused, reason: "the client may not see link \(link.interface)"))
        }
        guard bytes.count <= configuration.maxUpdateSize else {
            metrics.limited("max-update-size").increment()
            return .failure(
                .init(rcode: .refused, reason: "\(bytes.count) octets, over srp.max-update-size"))
        }
        guard takeToken(for: client.address) else {
            metrics.limited("max-update-rate").increment()
            return .failure(.init(rcode: .refused, reason: "over srp.max-update-rate from this address"))
        }
        let zone = link.zone
        return SRPUpdate.read(
            query, wire: bytes, zones: [Self.defaultZone, zone],
            registeredKey: { name in
                let inLink = query.questions.first.flatMap { zoneAsked in
                    name.labels(before: zoneAsked.name).flatMap { try? DNSName(labels: $0 + zone.labels) }
                }
                return inLink.flatMap { name in state.withLock { $0.table.key(of: name, at: now) } }
            }
        ).flatMap { $0.moved(to: zone) }.map { ($0, link) }
    }

    /// One update's worth of the client address's rate (before its signature costs anything).
    /// Full buckets are forgotten when many addresses have sent, so a flood from fresh
    /// addresses holds at most `bucketLimit` of them.
    private func takeToken(for address: [UInt8]) -> Bool {
        let now = scheduler.now()
        return state.withLock { state in
            let rate = state.configuration.maxUpdateRate
            guard rate > 0 else { return true }
            if state.buckets.count >= Self.bucketLimit {
                state.buckets = state.buckets.filter { _, bucket in
                    var bucket = bucket
                    return bucket.available(now: now) < Int(bucket.burst)
                }
                if state.buckets.count >= Self.bucketLimit { state.buckets.removeAll(keepingCapacity: true) }
            }
            var bucket =
                state.buckets[address] ?? TokenBucket(rate: Double(rate), burst: Double(rate) * 2, now: now)
            guard bucket.available(now: now) >= 1 else {
                state.buckets[address] = bucket
                return false
            }
            _ = bucket.reserve(now: now)
            state.buckets[address] = bucket
            return true
        }
    }

    static let bucketLimit = 4096

    /// Names (a host and its instances) claimed per `maxHosts`, registered or not.
    static let namesPerHost = 8

    /// Step 4: returned, to be applied at once, when nothing is to be published anew; else
    /// published and held until its probe's outcome or `outcomeWait`.
    private func begin(_ waiter: Waiter) -> Waiter? {
        let update = waiter.update
        let key = RegistrationRecords.key(host: update.host.name, interface: waiter.link.interface)
        enum Next {
            case answer(SRPUpdate.Rejection)
            case apply
            case wait
        }
        let next = state.withLock { state -> Next in
            guard !state.isClosed else { return .answer(.init(rcode: .servFail, reason: "shutting down")) }
            if let limit = Self.limit(update, from: waiter.client, state: state, metrics: metrics) {
                return .answer(limit)
            }
            // The host's part of the table alone: a copy of the whole would cost O(N) an update.
            var trial = state.table.slice(host: update.host.name, names: update.services.map(\.instance))
            if case .conflict(let name) = trial.apply(
                update, granted: waiter.granted, at: waiter.received, from: waiter.client.address)
            {
                return .answer(.init(rcode: .yxDomain, reason: "\(name) is registered with another key (§3.3.3)"))
            }
            let wanted = RegistrationRecords.group(host: update.host.name, link: waiter.link, table: trial)
            if var pending = state.trials[key] {
                // The same update again (a retransmission) waits with the first; another one
                // for a host still being published is told to come back.
                guard pending.group == wanted else {
                    return .answer(
                        .init(rcode: .servFail, reason: "an earlier update of this host is still being published"))
                }
                pending.waiting.append(waiter)
                state.trials[key] = pending
                return .wait
            }
            guard let wanted, wanted != state.registered[key], !wanted.records.isEmpty else { return .apply }
            let wait = state.configuration.outcomeWait
            let timer = scheduler.schedule(after: wait) { [weak self] in
                self?.settle([Outcome(key: key, collided: false, late: true)])
            }
            state.trials[key] = Trial(group: wanted, waiting: [waiter], timer: timer)
            sendTrial(&state, wanted)
            return .wait
        }
        switch next {
        case .answer(let rejection):
            answer(waiter.query, rejection, client: waiter.client, reply: waiter.reply)
            return nil
        case .apply: return waiter
        case .wait: return nil
        }
    }

    /// The bounds an update that adds a host must stay within (issue 44: a flood of updates
    /// with fresh keys must not exhaust memory or disk).
    private static func limit(
        _ update: SRPUpdate, from client: DNSClient, state: borrowing State, metrics: RegistrarMetrics
    ) -> SRPUpdate.Rejection? {
        let table = state.table
        guard update.lease.lease > 0, table.hosts[update.host.name] == nil else { return nil }
        let configuration = state.configuration
        // Names stay claimed after their host is removed (until KEY-LEASE ends): bounded too,
        // or registering and removing fresh names would fill memory and disk.
        if table.claims.count >= configuration.maxHosts * Self.namesPerHost {
            metrics.limited("max-hosts").increment()
            return .init(
                rcode: .refused,
                reason: "\(table.claims.count) names claimed (srp.max-hosts × \(Self.namesPerHost))")
        }
        if table.hosts.count + state.trials.count >= configuration.maxHosts {
            metrics.limited("max-hosts").increment()
            return .init(rcode: .refused, reason: "\(configuration.maxHosts) hosts registered (srp.max-hosts)")
        }
        let fromClient = table.hostCount(from: client.address)
        if fromClient >= configuration.maxHostsPerClient {
            metrics.limited("max-hosts-per-client").increment()
            return .init(
                rcode: .refused,
                reason: "\(fromClient) hosts registered from this address (srp.max-hosts-per-client)")
        }
        return nil
    }

    /// The publisher's outcome for a host's group, `records` announced (on the publisher's
    /// thread, or on this registrar's under its lock for a group that needed no probe: handed
    /// to the scheduler either way).
    public func published(_ key: MDNSGroup.Key, records: [MDNSRecord]? = nil) {
        take(Outcome(key: key, records: records, collided: false, late: false))
    }

    /// Another device on the link holds a name of the group (RFC 6762 §8.1, §9).
    public func collided(_ key: MDNSGroup.Key) {
        take(Outcome(key: key, collided: true, late: false))
    }

    private func take(_ outcome: Outcome) {
        guard outcomes.put(outcome) else { return }
        scheduler.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            while case let taken = outcomes.takeAll(), !taken.isEmpty { settle(taken) }
        }
    }

    /// Ends the trials of `outcomes`: the updates of those won (or past the wait) applied in
    /// one commit, those lost answered YXDOMAIN.
    private func settle(_ outcomes: [Outcome]) {
        var applied: [Waiter] = []
        var handed: [MDNSGroup.Key: MDNSGroup] = [:]
        let since = state.withLock { $0.republished }
        for outcome in outcomes {
            let key = outcome.key
            let ended = state.withLock { state -> Trial? in
                guard let trial = state.trials[key] else { return nil }
                // Another trial's outcome (it was settled by the wait, and this one began since).
                if let records = outcome.records, records != trial.group.records { return nil }
                state.trials[key] = nil
                trial.timer.cancel()
                if outcome.collided { send(&state, keys: [key]) }  // back to what is registered
                return trial
            }
            guard let waiting = ended?.waiting else {
                if outcome.collided {
                    metrics.lateConflicts.increment()
                    logger.warning(
                        "a registered name was taken on the link after it was published",
                        metadata: ["mdns.interface": "\(key.interface)", "srp.group": "\(key.name)"])
                }
                continue
            }
            if outcome.collided {
                for waiter in waiting {
                    answer(
                        waiter.query,
                        .init(
                            rcode: .yxDomain,
                            reason: "a device on link \(key.interface) holds the name (RFC 6762 §8.1, §9)"),
                        client: waiter.client, reply: waiter.reply)
                }
                continue
            }
            if outcome.late {
                logger.info(
                    "SRP: the publication was not confirmed in time; registered all the same",
                    metadata: ["mdns.interface": "\(key.interface)", "srp.group": "\(key.name)"])
            }
            applied += waiting
            handed[key] = ended?.group
        }
        if !applied.isEmpty { commit(applied, handed: handed, since: since) }
    }

    /// Step 5: the waiters' updates applied in order, written in one transaction, answered.
    /// A store that cannot write leaves the table as it was and answers them all SERVFAIL.
    /// `handed`: the groups of the trials that ended, which the publisher holds now unless
    /// `publishAll` ran since `since` (then it holds what was registered, and is handed all).
    private func commit(_ waiting: [Waiter], handed: [MDNSGroup.Key: MDNSGroup] = [:], since: Int = 0) {
        let outcomes = state.withLock { state -> [Result<RegistrationTable.Changes, SRPUpdate.Rejection>] in
            let handed = state.republished == since ? handed : [:]
            // What the batch can touch, kept for a store that cannot write: a copy of the whole
            // table would cost O(N) a batch.
            let before = state.table.slice(
                hosts: waiting.map(\.update.host.name), names: waiting.flatMap { $0.update.services.map(\.instance) })
            var all = RegistrationTable.Changes()
            var outcomes: [Result<RegistrationTable.Changes, SRPUpdate.Rejection>] = []
            for waiter in waiting {
                switch state.table.apply(
                    waiter.update, granted: waiter.granted, at: waiter.received, from: waiter.client.address)
                {
                case .conflict(let name):
                    outcomes.append(
                        .failure(.init(rcode: .yxDomain, reason: "\(name) is registered with another key (§3.3.3)")))
                case .applied(let changes):
                    all.merge(changes)
                    outcomes.append(.success(changes))
                }
            }
            do {
                try state.store?.save(all, of: state.table)
            } catch {
                state.table.restore(before)
                // A trial's group goes back to what is registered.
                if !handed.isEmpty { publish(&state, hosts: Set(waiting.map(\.update.host.name)), handed: handed) }
                let failure = SRPUpdate.Rejection(rcode: .servFail, reason: "the registration store: \(error)")
                return outcomes.map { $0.flatMap { _ in .failure(failure) } }
            }
            publish(&state, hosts: Set(waiting.map(\.update.host.name)).union(all.touchedHosts), handed: handed)
            armExpiry(&state)
            noteStoreSize(state)
            return outcomes
        }
        for (waiter, outcome) in zip(waiting, outcomes) {
            switch outcome {
            case .failure(let rejection):
                if rejection.rcode == .servFail { logger.error("SRP update not stored: \(rejection.reason)") }
                answer(waiter.query, rejection, client: waiter.client, reply: waiter.reply)
            case .success(let changes):
                noteRegistered(waiter, changes: changes)
                var lease = waiter.granted
                if waiter.update.lease.keyLease == nil { lease.keyLease = nil }  // answered as asked
                answer(waiter.query, rcode: .noError, lease: lease, client: waiter.client, reply: waiter.reply)
            }
        }
    }

    @_optimize(size)  // cold: logs at info and debug only
    private func noteRegistered(_ waiter: Waiter, changes: RegistrationTable.Changes) {
        // Every line below is info or debug: at 2,000 new hosts a second, building their
        // metadata for a logger at notice was some 3 % of the registrar's thread.
        guard logger.logLevel <= .info else { return }
        let update = waiter.update
        var metadata: Logger.Metadata = [
            "srp.host": "\(update.host.name)", "link.interface": "\(waiter.link.interface)",
            "dns.client": "\(IPPrefix.format(waiter.client.address))", "srp.key_tag": "\(update.keyTag)",
            "srp.lease": "\(waiter.granted.lease)",
            "srp.key_lease": "\(waiter.granted.keyLease ?? waiter.granted.lease)",
        ]
        if waiter.granted.lease == 0 {
            logger.info("SRP registration removed", metadata: metadata)
        } else if changes.hosts.isEmpty && changes.services.isEmpty && changes.removedServices.isEmpty {
            logger.debug("SRP registration renewed", metadata: metadata)
        } else {
            metadata["srp.services"] = "\(update.services.filter { !$0.isDeleted }.map(\.instance.description))"
            logger.info("SRP registration", metadata: metadata)
        }
    }

    // MARK: - Expiry

    /// Ends the leases that are over (§5.1), writes that, withdraws what they published
    /// (goodbyes) and arms the next.
    func expire() {
        state.withLock { expire(&$0) }
    }

    @_optimize(size)  // cold: at a lease's end
    private func expire(_ state: inout State) {
        guard !state.isClosed else { return }
        let now = clock()
        let changes = state.table.expire(at: now)
        if !changes.isEmpty {
            do {
                try state.store?.save(changes, of: state.table)
            } catch {
                // Still ended here (a lease is over whatever the disk says); the store
                // ends it again at the next start.
                logger.error("SRP expiry not stored: \(error)")
            }
            metrics.expiredHosts.increment(by: changes.removedHosts.count)
            for host in changes.removedHosts {
                logger.info("SRP registration expired", metadata: ["srp.host": "\(host)"])
            }
            if changes.removedServices.count > 0 {
                logger.info(
                    "SRP service leases ended",
                    metadata: ["srp.services": "\(changes.removedServices.map(\.description))"])
            }
        }
        publish(&state, hosts: changes.touchedHosts)
        armExpiry(&state)
        if !changes.isEmpty { noteStoreSize(state) }
    }

    /// `srp_store_bytes`, after a commit.
    private func noteStoreSize(_ state: borrowing State) {
        if let size = state.store?.size { metrics.recordStore(size: size) }
    }

    private func armExpiry(_ state: inout State) {
        state.expiryTimer?.cancel()
        state.expiryTimer = nil
        guard let next = state.table.nextExpiry else { return }
        let delay = Duration.seconds(max(0, next - clock())) + .milliseconds(10)
        state.expiryTimer = scheduler.schedule(after: delay) { [weak self] in self?.expire() }
    }

    // MARK: - Publication

    /// Builds every registered host's group again and hands the publisher all of them (a
    /// start, a reload, a new advertisement).
    @_optimize(size)  // cold: a start, a reload
    private func publishAll(_ state: inout State) {
        state.republished += 1
        state.registered = [:]
        state.counts = [:]
        for group in RegistrationRecords.groups(of: state.table, links: state.links) {
            register(&state, group.key, group)
        }
        send(&state, keys: nil)
        noteStoreSize(state)
    }

    /// Rebuilds the groups of `hosts` alone, and hands on those that changed: a renewal, which
    /// changes no record, costs the publisher nothing. `handed`: the groups of trials that
    /// ended, which the publisher holds in place of what is registered; theirs are handed on
    /// unless the publisher already holds them (a won probe's group, the usual case).
    private func publish(
        _ state: inout State, hosts: Set<DNSName>, handed: [MDNSGroup.Key: MDNSGroup] = [:]
    ) {
        var changed: Set<MDNSGroup.Key> = []
        for host in hosts {
            guard let link = state.links.first(where: { host.isSubdomain(of: $0.zone) }) else { continue }
            let key = RegistrationRecords.key(host: host, interface: link.interface)
            let group = RegistrationRecords.group(host: host, link: link, table: state.table)
            if handed[key] != nil || state.registered[key] != group {
                register(&state, key, group)
                changed.insert(key)
            }
        }
        if !changed.isEmpty { send(&state, keys: changed, handed: handed) }
    }

    /// Sets the group registered under `key`, and the counts by link the gauges show.
    private func register(_ state: inout State, _ key: MDNSGroup.Key, _ group: MDNSGroup?) {
        if let old = state.registered[key] { state.counts[key.interface, default: .init()].remove(old) }
        if let group { state.counts[key.interface, default: .init()].add(group) }
        state.registered[key] = group
    }

    /// Hands the publisher the groups of `keys` as they are now, a trial's in place of what is
    /// registered; `nil`: every group, and the registrar's own advertisement. A publisher that
    /// takes changes (`MDNSGroupUpdates`) is given only those, so that adding a host costs
    /// the same at 10,000 hosts as at 10 (docs/BENCHMARKS.md, "SRP registrar").
    private func send(
        _ state: inout State, keys: Set<MDNSGroup.Key>?, handed: [MDNSGroup.Key: MDNSGroup] = [:]
    ) {
        metrics.update(counts: state.counts, links: state.links)
        if let keys {
            // The browses see what is registered; the publisher, a trial in its place.
            var visible: [MDNSGroup] = []
            var gone: [MDNSGroup.Key] = []
            var changed: [MDNSGroup] = []
            var removed: [MDNSGroup.Key] = []
            for key in keys.sorted() {
                let registered = state.registered[key] ?? state.advertisement.first(where: { $0.key == key })
                if let registered { visible.append(registered) } else { gone.append(key) }
                if let group = state.trials[key]?.group ?? registered {
                    if handed[key] != group { changed.append(group) }
                } else {
                    removed.append(key)
                }
            }
            browsable?.update(changed: visible, removed: gone)
            if let updates = publisher as? any MDNSGroupUpdates {
                if !changed.isEmpty || !removed.isEmpty { updates.update(changed: changed, removed: removed) }
                return
            }
        } else {
            browsable?.replaceAll(Array(state.registered.values) + state.advertisement)
        }
        var groups = state.registered
        for (key, trial) in state.trials { groups[key] = trial.group }
        for group in state.advertisement { groups[group.key] = group }
        publisher.publish(groups.values.sorted { $0.key < $1.key })
    }

    /// Hands the publisher a trial's group in place of what is registered: the browses and
    /// the gauges show what is registered, which a trial does not change.
    private func sendTrial(_ state: inout State, _ group: MDNSGroup) {
        guard let updates = publisher as? any MDNSGroupUpdates else { return send(&state, keys: [group.key]) }
        updates.update(changed: [group], removed: [])
    }

    // MARK: - Answers

    private func answer(
        _ query: Message, _ rejection: SRPUpdate.Rejection, client: DNSClient,
        reply: @Sendable ([UInt8]?) -> Void
    ) {
        answer(query, rcode: rejection.rcode, reason: rejection.reason, client: client, reply: reply)
    }

    /// RFC 9665 §3.3.5: NOERROR, SERVFAIL, REFUSED or YXDOMAIN (FORMERR for what is no DNS
    /// Update, NOTIMP while the registrar is off); the zone section echoed, and the granted
    /// leases in an OPT (RFC 9664 §4).
    private func answer(
        _ query: Message, rcode: RCode, reason: String? = nil, lease: UpdateLease? = nil, client: DNSClient,
        reply: @Sendable ([UInt8]?) -> Void
    ) {
        metrics.updates(rcode).increment()
        if let reason, rcode != .noError {
            logger.debug(
                "SRP update not taken",
                metadata: [
                    "dns.client": "\(IPPrefix.format(client.address))", "dns.rcode": "\(rcode)",
                    "srp.reason": "\(reason)",
                ])
        }
        let response = Message(
            id: query.id, isResponse: true, opcode: query.opcode, rcode: rcode,
            questions: query.questions.count == 1 ? query.questions : [],
            edns: query.edns.map { _ in EDNS(options: lease.map { [$0.option] } ?? []) })
        reply(try? response.encode())
    }
}

/// Group commit for the registrar (docs/BENCHMARKS.md, "SRP registrar"): the listeners put
/// updates here from their threads (and the publisher its outcomes), and one drain on the
/// registrar's thread takes all that wait, so that the updates read while a commit waited for
/// the disk are written together in the next transaction instead of one fsync each.
final class Inbox<Item: Sendable>: Sendable {
    private let state = Mutex<(updates: [Item], draining: Bool)>(([], false))

    /// Adds `update`; true when no drain is running or scheduled, and the caller schedules one.
    func put(_ update: Item) -> Bool {
        put(contentsOf: CollectionOfOne(update))
    }

    /// Adds `items`, as `put(_:)`.
    func put(contentsOf items: some Sequence<Item>) -> Bool {
        state.withLock { state in
            state.updates.append(contentsOf: items)
            defer { state.draining = true }
            return !state.draining
        }
    }

    /// Everything waiting. Empty when nothing is, and then the drain is over: the next `put`
    /// schedules another.
    func takeAll() -> [Item] {
        state.withLock { state in
            defer { state.updates.removeAll(keepingCapacity: true) }
            if state.updates.isEmpty { state.draining = false }
            return state.updates
        }
    }
}

/// An update as a listener read it.
struct ReceivedUpdate: Sendable {
    let bytes: [UInt8]
    let client: DNSClient
    let reply: @Sendable ([UInt8]?) -> Void
}
