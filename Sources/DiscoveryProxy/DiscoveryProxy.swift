import DNSWire
import Logging
import MDNS
import Synchronization

/// The RFC 8766 Discovery Proxy: answers unicast DNS queries for link zones from mDNS.
///
/// Life of a query: decode → `Catalog.plan` → refused / immediate / mDNS. An mDNS question
/// is served by a shared `Browse`: a hit answers at once from its records; a miss starts the
/// browse (rate-limited per link) or joins it, and is answered when the first results arrive
/// (plus `collectionWindow`) or, with no data, at the negative timeout (§5.6). Browses live
/// on after the last query so repeats are hits, and are released after `browseIdleTimeout`.
///
/// Threading: all state sits behind one mutex. mDNS events arrive on the backend's thread and
/// timers on the scheduler's; the backend is never called with the mutex held (avahi takes
/// its own lock around callbacks, so that would deadlock), and replies are encoded and sent
/// outside the mutex.
public final class DiscoveryProxy: MDNSQueryReceiver {
    let backend: any MDNSBackend
    let scheduler: any ProxyScheduler
    let logger: Logger
    let metrics = ProxyMetrics()
    let state: Mutex<State>
    /// Moves on with every change that can alter an answer; see `ReplayTicket`.
    private let epoch = Atomic<UInt64>(0)
    var currentEpoch: UInt64 { epoch.load(ordering: .acquiring) }
    /// Swapped whole by `reconfigure`; read once per query.
    private let current: Mutex<Catalog>

    public var catalog: Catalog { current.withLock { $0 } }
    var configuration: ProxyConfiguration { catalog.configuration }

    struct State: ~Copyable {
        var browses: [BrowseKey: Browse] = [:]
        /// What released browses last knew, for optimistic answers (bounded in age and count).
        var released: [BrowseKey: ReleasedBrowse] = [:]
        var buckets: [String: TokenBucket] = [:]
        /// Tells a browse's events from those of an earlier browse of the same question still
        /// in flight; wraps after 2^32 browses, long after any such event has arrived.
        var nextGeneration: UInt32 = 0
        var nextWaiterID = 0
        var stats = ProxyStats()
        var sweepTimer: (any ProxyTimer)?
        var shutDown = false
        /// DNS Push subscribers per browse (RFC 8765); a browse with subscribers is kept.
        var subscriptions = SubscriptionTable()
        /// Encoded hit answers shared by all clients, for the current epoch.
        var memo = AnswerMemo()
    }

    public init(
        configuration: ProxyConfiguration, backend: any MDNSBackend, scheduler: any ProxyScheduler,
        logger: Logger
    ) {
        self.current = Mutex(Catalog(configuration: configuration))
        self.backend = backend
        self.scheduler = scheduler
        self.logger = logger
        self.state = Mutex(State())
        metrics.prepare(links: configuration.links.map(\.interface))
        scheduleSweep()
    }

    /// Releases every browse and stops the timers. Pending queries are answered SERVFAIL.
    public func shutdown() {
        let (handles, waiters) = state.withLock { state -> ([any MDNSQueryHandle], [Waiter]) in
            state.shutDown = true
            state.sweepTimer?.cancel()
            state.sweepTimer = nil
            let handles = state.browses.values.compactMap(\.handle)
            let waiters = state.browses.values.flatMap(\.waiters)
            state.browses.removeAll()
            state.released.removeAll()
            state.stats.activeBrowses = 0
            return (handles, waiters)
        }
        invalidateReplays()
        handles.forEach { $0.cancel() }
        for waiter in waiters { finish(failure(waiter.query, .servFail), waiter.context, cache: "error") }
    }

    /// Applies a new configuration without touching the listeners (SIGHUP reload). Browses of
    /// links that went away or changed zone are released (their cached RDATA was translated
    /// into the old zone) and their waiting queries get SERVFAIL; the rest keep their cache.
    /// `refreshing` names links whose interface went down or changed addresses: their
    /// browses are released too, so that new avahi browsers are made for the interface as it is now.
    public func reconfigure(_ configuration: ProxyConfiguration, refreshing: Set<String> = []) {
        let kept = Set(
            configuration.links.filter { new in
                !refreshing.contains(new.interface)
                    && catalog.configuration.links.contains { $0.interface == new.interface && $0.zone == new.zone }
            }.map(\.interface))
        current.withLock { $0 = Catalog(configuration: configuration) }
        metrics.prepare(links: configuration.links.map(\.interface))
        let dropped = state.withLock { state -> [Browse] in
            state.released = state.released.filter { kept.contains($0.key.interface) }
            let gone = state.browses.filter { !kept.contains($0.key.interface) }
            for key in gone.keys { state.browses[key] = nil }
            state.buckets.removeAll()  // rates may have changed
            state.stats.activeBrowses = state.browses.count
            state.stats.browsesReleased += gone.count
            return Array(gone.values)
        }
        invalidateReplays()  // the zones, filters or ACL may have changed
        for browse in dropped {
            browse.handle?.cancel()
            for waiter in browse.waiters { finish(failure(waiter.query, .servFail), waiter.context, cache: "error") }
        }
        logger.info(
            "configuration applied",
            metadata: ["proxy.links": "\(configuration.links.count)", "proxy.browses_released": "\(dropped.count)"])
    }

    public var stats: ProxyStats { state.withLock { $0.stats } }

    /// The mDNS backend's connection state, for health reporting.
    public var mdnsState: MDNSBackendState { backend.state }

    /// What every link's live browses know right now, for the status page and API.
    public func linkStatus() -> [LinkStatus] {
        let now = scheduler.now()
        let browses = state.withLock { $0.browses }
        let configuration = catalog.configuration
        return LinkStatus.make(
            links: configuration.links, browses: browses, suppressLinkLocal: configuration.suppressLinkLocal, now: now)
    }

    // MARK: Queries

    /// Answers one query message. `respond` is called exactly once: synchronously for
    /// everything but an mDNS miss, which is answered later from another thread. `client` is
    /// the sender's address (4 or 16 bytes) for the client ACL; nil skips the check.
    public func handle(
        query bytes: [UInt8], overTCP: Bool, client: [UInt8]? = nil,
        respond: @escaping @Sendable ([UInt8]?) -> Void
    ) {
        handle(query: bytes, overTCP: overTCP, client: client) { (reply: ProxyReply) in respond(reply.bytes) }
    }

    /// As above, with a `ReplayTicket` on answers the front end may replay to the same client.
    public func handle(
        query bytes: [UInt8], overTCP: Bool, client: [UInt8]? = nil,
        reply respond: @escaping @Sendable (ProxyReply) -> Void
    ) {
        guard let header = MessageHeader(bytes), !header.isResponse else {
            // No header, or a response: drop, never reflect.
            respond(ProxyReply(bytes: nil))
            return
        }
        // Read before anything the answer depends on (see `invalidateReplays`).
        let epoch = currentEpoch
        state.withLock { $0.stats.queries += 1 }
        let catalog = self.catalog
        var context = QueryContext(
            started: scheduler.now(), epoch: epoch,
            replayLifetime: ReplayTicket.lifetime(browseIdleTimeout: catalog.configuration.browseIdleTimeout),
            transport: overTCP ? "tcp" : "udp", qtype: "none", limit: 512, respond: respond)
        let query: Message
        do {
            query = try Message(wire: bytes)
        } catch {
            logger.debug("malformed query", metadata: ["dns.id": "\(header.id)", "dns.error": "\(error)"])
            // A DSO message (TLVs after the header) here came over UDP or a listener without
            // sessions: NOTIMP (RFC 8490 §5.1), not FORMERR.
            let isDSO = header.opcode == .dso
            let reply = Message(
                id: header.id, isResponse: true, opcode: header.opcode,
                recursionDesired: header.recursionDesired, rcode: isDSO ? .notImp : .formErr)
            count(isDSO ? \.notImp : \.formErr)
            finish(reply, context, cache: "error")
            return
        }
        context.limit = answerLimit(for: query, overTCP: overTCP, configuration: catalog.configuration)
        context.qtype = query.questions.first.map { QueryContext.label(for: $0.type) } ?? "none"
        if let client, let allowed = catalog.configuration.allowedClients,
            !allowed.contains(where: { $0.contains(client) })
        {
            // RFC 8766 §9.2 / RFC 7766 §10: only the site's own clients.
            state.withLock {
                $0.stats.refused += 1
                $0.stats.aclRefused += 1
            }
            metrics.aclRefused()
            logger.debug("client not allowed", metadata: ["dns.client": "\(IPPrefix.format(client))"])
            // Not replayable: each refusal is counted and logged as an ACL event.
            finish(failure(query, .refused), context, cache: "immediate")
            return
        }
        if let failure = protocolFailure(query) {
            finish(failure, context, cache: "immediate")
            return
        }
        // The question is planned once; every plan ends in exactly one reply.
        switch catalog.plan(query.questions[0]) {
        case .refused:
            count(\.refused)
            logger.debug("refused", metadata: ["dns.qname": "\(query.questions[0].name)"])
            finish(failure(query, .refused), context, cache: "immediate", replay: .refused)
        case .immediate(let zone, let answers):
            count(\.immediate)
            var reply = reply(to: query)
            reply.answers = answers
            if answers.isEmpty {
                reply.authority = [ZoneRecords(origin: zone, configuration: catalog.configuration).soa]
            }
            finish(reply, context, cache: "immediate", replay: .immediate)
        case .mdns(let plan):
            if plan.type != .any { context.memoKey = AnswerMemo.Key(query: bytes, overTCP: overTCP) }
            lookup(plan, query: query, context: context)
        }
    }

    /// RFC 6891 §6.2.5: a payload below 512 counts as 512; never above our own maximum.
    /// Without OPT, 512 (RFC 1035 §4.2.1). TCP: 65535.
    private func answerLimit(for query: Message, overTCP: Bool, configuration: ProxyConfiguration) -> Int {
        if overTCP { return 65535 }
        guard let edns = query.edns else { return 512 }
        return min(max(512, Int(edns.udpPayloadSize)), max(512, configuration.maxUDPPayload))
    }

    /// Queries the proxy cannot plan: wrong opcode, question count or EDNS version.
    private func protocolFailure(_ query: Message) -> Message? {
        guard query.opcode == .query else {
            count(\.notImp)
            return failure(query, .notImp)  // includes DSO (RFC 8490 §5.1) until Push exists
        }
        guard query.questions.count == 1 else {
            count(\.formErr)
            return failure(query, .formErr)
        }
        if let edns = query.edns, edns.version != 0 {
            count(\.badVers)
            return failure(query, .badVers)  // RFC 6891 §6.1.3, with our OPT at version 0
        }
        return nil
    }

    private func lookup(_ plan: MDNSPlan, query: Message, context: QueryContext) {
        if plan.type == .any {
            answerAny(plan, query: query, context: context)
            return
        }
        var key = BrowseKey(interface: plan.link.interface, name: plan.localName, type: plan.type)
        let now = scheduler.now()
        enum Action {
            case hit(Snapshot)
            /// A hit another query with the same bytes has already encoded (`AnswerMemo`).
            case memo(AnswerMemo.Answer)
            case wait(waiterID: Int, deadline: Duration, start: (generation: UInt32, delay: Duration)?)
            /// Answered from a recently released browse while a fresh one starts.
            case optimistic(Snapshot, start: (generation: UInt32, delay: Duration)?)
            case rateLimited
            /// `maxBrowses` reached and no browse may make room (`BrowseLimit`).
            case full
        }
        var evicted: (any MDNSQueryHandle)?
        let action: Action = state.withLock { state in
            if var browse = state.browses[key] {
                browse.lastUsed = now
                if browse.isEstablished(now: now, negativeTimeout: configuration.negativeTimeout) {
                    state.browses[key] = browse
                    state.stats.cacheHits += 1
                    if let memoKey = context.memoKey,
                        let answer = state.memo.answer(to: memoKey, id: query.id, epoch: context.epoch)
                    {
                        return .memo(answer)
                    }
                    return .hit(makeSnapshot(for: key, in: state.browses, now: now))
                }
                state.stats.cacheMisses += 1
                let id = state.nextWaiterID
                state.nextWaiterID += 1
                let deadline = browse.deadline(joiningAt: now, negativeTimeout: configuration.negativeTimeout)
                browse.waiters.append(Waiter(id: id, query: query, plan: plan, deadline: deadline, context: context))
                state.browses[key] = browse
                return .wait(waiterID: id, deadline: deadline, start: nil)
            }
            guard !state.shutDown else { return .rateLimited }
            key = state.sharingStorage(key)
            // Optimistic answer (like serve-stale): the last results of a browse released
            // not long ago, while a fresh browse starts so that the next answer is current.
            let stale = state.released[key].flatMap {
                configuration.optimisticAnswers && now - $0.releasedAt <= configuration.optimisticMaxStaleness ? $0 : nil
            }
            var bucket =
                state.buckets[key.interface]
                ?? TokenBucket(rate: configuration.mdnsQueriesPerSecond, burst: configuration.mdnsQueryBurst, now: now)
            let delay = bucket.reserve(now: now)
            if delay >= configuration.negativeTimeout {
                bucket.refund()
                state.buckets[key.interface] = bucket
                state.stats.rateLimited += 1
                if let stale {
                    state.stats.optimisticAnswers += 1
                    return .optimistic(optimisticSnapshot(stale, key: key, in: state.browses), start: nil)
                }
                return .rateLimited
            }
            if state.browses.count >= configuration.maxBrowses {
                guard let victim = BrowseLimit.victim(in: state.browses, now: now) else {
                    bucket.refund()
                    state.buckets[key.interface] = bucket
                    return .full
                }
                evicted = evict(victim, in: &state, now: now)
            }
            if delay > .zero { state.stats.rateLimited += 1 }
            state.buckets[key.interface] = bucket
            let generation = state.nextGeneration
            state.nextGeneration &+= 1
            if let stale {
                state.released[key] = nil
                state.browses[key] = Browse(generation: generation, startedAt: now + delay, lastUsed: now)
                state.stats.activeBrowses = state.browses.count
                state.stats.optimisticAnswers += 1
                return .optimistic(
                    optimisticSnapshot(stale, key: key, in: state.browses), start: (generation, delay))
            }
            state.stats.cacheMisses += 1
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            let deadline = now + configuration.negativeTimeout
            var browse = Browse(generation: generation, startedAt: now + delay, lastUsed: now)
            browse.waiters.append(Waiter(id: id, query: query, plan: plan, deadline: deadline, context: context))
            state.browses[key] = browse
            state.stats.activeBrowses = state.browses.count
            return .wait(waiterID: id, deadline: deadline, start: (generation, delay))
        }

        evicted?.cancel()
        switch action {
        case .hit(let snapshot):
            // A provisional negative is neither replayed nor shared: it must not outlive the
            // browse's first 6 s with its 2 s negative TTL.
            finish(
                answer(query, plan: plan, snapshot: snapshot), context, cache: "hit",
                replay: snapshot.isSettled ? .hit : nil)
        case .memo(let answer):
            send(answer.bytes, rcode: answer.rcode, context, cache: "hit", replay: .hit)
        case .full:
            logger.debug("browse limit reached, every browse in use: SERVFAIL", metadata: ["mdns.question": "\(key)"])
            count(\.servFail)
            finish(failure(query, .servFail), context, cache: "miss")
        case .optimistic(let snapshot, let start):
            logger.debug("optimistic answer; refreshing", metadata: ["mdns.question": "\(key)"])
            finish(
                answer(query, plan: plan, snapshot: snapshot, ttl: min(configuration.ttlCap, Self.provisionalTTL)),
                context, cache: "optimistic")
            if let start { begin(key, start) }
        case .rateLimited:
            logger.debug("mDNS rate limit: answering SERVFAIL", metadata: ["mdns.question": "\(key)"])
            count(\.servFail)
            metrics.mdnsRateLimited(link: key.interface)
            finish(failure(query, .servFail), context, cache: "miss")
        case .wait(let waiterID, let deadline, let start):
            if let start, start.delay > .zero { metrics.mdnsRateLimited(link: key.interface) }
            scheduler.schedule(after: deadline - now) { [weak self, key] in self?.expire(key, waiterID: waiterID) }
            if let start { begin(key, start) }
        }
    }

    /// A query of type ANY (RFC 8482 §4.1: a subset of the RRsets is a complete answer). avahi
    /// cannot run an ANY record browser, and a multicast ANY per query would be an amplifier,
    /// so the answer is every RRset the live browses already hold for that name, or with none
    /// known the synthesized HINFO of RFC 8482 §4.2. Not replayed: it sums several browses.
    private func answerAny(_ plan: MDNSPlan, query: Message, context: QueryContext) {
        let records: [CachedRecord] = state.withLock { state in
            state.stats.cacheHits += 1
            return state.browses
                .filter { $0.key.interface == plan.link.interface && $0.key.name == plan.localName }
                .sorted { $0.key.type.rawValue < $1.key.type.rawValue }
                .flatMap { $0.value.orderedRecords }
        }
        var reply = answer(query, plan: plan, snapshot: Snapshot(answers: records))
        if reply.answers.isEmpty {
            reply.authority = []
            reply.answers = [
                ResourceRecord(
                    name: query.questions[0].name, type: .hinfo, ttl: configuration.ttlCap,
                    rdata: .raw([7] + Array("RFC8482".utf8) + [0]))
            ]
        }
        finish(reply, context, cache: "hit")
    }

    /// TTL of an answer given before mDNS has had its say (an optimistic answer while a fresh
    /// browse starts; the negative-caching time of "nothing yet" within `mdnsWindow`): short,
    /// so the client asks again once the browse has had time to report (RFC 8766 §5.5.1 caps
    /// every TTL at 10 s anyway).
    static let provisionalTTL: UInt32 = 2

    /// How long an mDNS query runs before "nothing found" is final: RFC 8766 §5.6's 6 s, by
    /// which a query has been sent three times (RFC 6762 §5.2). A negative answer before
    /// then (`negativeTimeout` is shorter by default) is cached for `provisionalTTL` only.
    static let mdnsWindow: Duration = .seconds(6)

    /// Starts a browse now, or after its rate-limit delay.
    func begin(_ key: BrowseKey, _ start: (generation: UInt32, delay: Duration)) {
        if start.delay == .zero {
            startBrowse(key, generation: start.generation)
        } else {
            scheduler.schedule(after: start.delay) { [weak self] in
                self?.startBrowse(key, generation: start.generation)
            }
        }
    }

    // MARK: mDNS side

    private func startBrowse(_ key: BrowseKey, generation: UInt32) {
        let handle: any MDNSQueryHandle
        do {
            handle = try backend.startQuery(key, tag: generation, receiver: self)
        } catch {
            logger.warning(
                "cannot start mDNS query", metadata: ["mdns.question": "\(key)", "mdns.error": "\(error)"])
            let waiters = state.withLock { state -> [Waiter] in
                guard let browse = state.browses[key], browse.generation == generation else { return [] }
                state.browses[key] = nil
                state.stats.activeBrowses = state.browses.count
                state.stats.servFail += browse.waiters.count
                return browse.waiters
            }
            invalidateReplays()
            for waiter in waiters { finish(failure(waiter.query, .servFail), waiter.context, cache: "miss") }
            return
        }
        metrics.mdnsQueryStarted(link: key.interface)
        let orphan = state.withLock { state -> Bool in
            guard state.browses[key]?.generation == generation else { return true }
            state.browses[key]!.handle = handle
            state.stats.mdnsQueriesStarted += 1
            return false
        }
        if orphan { handle.cancel() }
        logger.debug("mDNS query started", metadata: ["mdns.question": "\(key)"])
    }

    /// The backend's events for a browse; `tag` is its generation. Called on the backend's
    /// thread; must not call the backend.
    public func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
        receive(event, for: question, generation: tag)
    }

    private func receive(_ event: MDNSEvent, for key: BrowseKey, generation: UInt32) {
        let now = scheduler.now()
        enum Follow { case none, flushNow, armWindow }
        var firstResultAfter: Duration?
        var pushes: [PushDelivery] = []
        let follow: Follow = state.withLock { state in
            // Taken out and put back, so that its record table is not shared (copied) while changed.
            guard state.browses[key]?.generation == generation, var browse = state.browses.removeValue(forKey: key)
            else { return .none }
            defer { state.browses[key] = browse }
            switch event {
            case .added(let record):
                if var held = browse.records[record] {
                    // Seen on one more IP protocol, or again while verifying.
                    held.copies = held.copies == .max ? .max : held.copies + 1
                    browse.records[record] = held
                    return .none
                }
                browse.records[record] = cache(record, order: browse.nextOrder, now: now)
                invalidateReplays()
                browse.nextOrder += 1
                pushes = state.subscriptions.changes(for: key, adding: CachedRecord(record, browse.records[record]!))
                if !browse.hasResults {
                    firstResultAfter = now - browse.startedAt
                    for index in browse.waiters.indices { browse.waiters[index].firstResultAt = now }
                }
                browse.hasResults = true
                guard !browse.waiters.isEmpty, !browse.flushArmed else { return .none }
                browse.flushArmed = true
                return configuration.collectionWindow == .zero ? .flushNow : .armWindow
            case .removed(let record):
                guard var held = browse.records[record] else { return .none }
                if held.copies > 1 {
                    held.copies -= 1
                    browse.records[record] = held
                } else if let gone = browse.records.removeValue(forKey: record) {
                    pushes = state.subscriptions.changes(for: key, removing: CachedRecord(record, gone))
                    invalidateReplays()
                }
                return .none
            case .verifying:
                // Count again from zero; what is not delivered again by "all for now" is gone.
                browse.verifying = true
                browse.records.updateValues { $0.copies = 0 }
                return .none
            case .allForNow:
                if browse.verifying {
                    browse.verifying = false
                    let gone = browse.records.removeAll { $0.copies == 0 }
                    for (record, held) in gone {
                        pushes += state.subscriptions.changes(for: key, removing: CachedRecord(record, held))
                    }
                    if !gone.isEmpty { invalidateReplays() }
                }
                // The daemon's cache is drained; if it had answers, nothing is gained by waiting.
                return !browse.records.isEmpty && !browse.waiters.isEmpty ? .flushNow : .none
            case .failed, .restarted:
                // The daemon went away or came back: what we had may be stale. Start over, as
                // a new query would (waiters keep their own deadlines).
                if !browse.records.isEmpty { pushes = state.subscriptions.changes(clearing: key) }
                browse.records.removeAll()
                browse.hasResults = false
                browse.verifying = false
                browse.startedAt = now
                invalidateReplays()
                return .none
            }
        }
        if let firstResultAfter { metrics.firstResult(after: firstResultAfter) }
        deliver(pushes)
        if case .failed(let why) = event {
            logger.debug("mDNS query failed", metadata: ["mdns.question": "\(key)", "mdns.error": "\(why)"])
        }
        switch follow {
        case .none: break
        case .flushNow: flush(key, generation: generation)
        case .armWindow:
            scheduler.schedule(after: configuration.collectionWindow) { [weak self] in
                self?.flush(key, generation: generation)
            }
        }
    }

    /// Answers every waiter of a browse from what it has now.
    private func flush(_ key: BrowseKey, generation: UInt32) {
        let now = scheduler.now()
        let (waiters, snapshot) = state.withLock { state -> ([Waiter], Snapshot) in
            guard var browse = state.browses[key], browse.generation == generation else { return ([], Snapshot()) }
            browse.flushArmed = false
            let waiters = browse.waiters
            browse.waiters = []
            state.browses[key] = browse
            return (waiters, makeSnapshot(for: key, in: state.browses, now: now))
        }
        for waiter in waiters {
            // Per-query timing, like a connection establishment report: how long mDNS took
            // to bring the first result for this query, and when the answer went out.
            if let firstResultAt = waiter.firstResultAt {
                logger.debug(
                    "answered from mDNS",
                    metadata: [
                        "mdns.question": "\(key)", "dns.id": "\(waiter.query.id)",
                        "mdns.first_result_ms": "\(Self.milliseconds(max(.zero, firstResultAt - waiter.context.started)))",
                        "dns.answer_ms": "\(Self.milliseconds(now - waiter.context.started))",
                    ])
            }
            finish(answer(waiter.query, plan: waiter.plan, snapshot: snapshot), waiter.context, cache: "miss")
        }
    }

    /// The negative timeout of one waiter: answer with whatever is known (usually nothing).
    private func expire(_ key: BrowseKey, waiterID: Int) {
        let now = scheduler.now()
        let found = state.withLock { state -> (Waiter, Snapshot)? in
            guard var browse = state.browses[key],
                let index = browse.waiters.firstIndex(where: { $0.id == waiterID })
            else { return nil }
            let waiter = browse.waiters.remove(at: index)
            state.browses[key] = browse
            let snapshot = makeSnapshot(for: key, in: state.browses, now: now)
            if snapshot.answers.isEmpty { state.stats.negativeTimeouts += 1 }
            return (waiter, snapshot)
        }
        guard let (waiter, snapshot) = found else { return }
        if snapshot.answers.isEmpty && backend.state != .running {
            // The daemon is away: "nothing found" would be a lie that clients cache. SERVFAIL
            // tells them to try again.
            logger.debug("mDNS backend \(backend.state.rawValue): SERVFAIL", metadata: ["mdns.question": "\(key)"])
            count(\.servFail)
            finish(failure(waiter.query, .servFail), waiter.context, cache: "miss")
            return
        }
        logger.debug("mDNS query timed out", metadata: ["mdns.question": "\(key)"])
        finish(answer(waiter.query, plan: waiter.plan, snapshot: snapshot), waiter.context, cache: "miss")
    }

    /// Decodes an mDNS record on arrival, and keeps the decoded RDATA where it can share the
    /// received bytes. Its names stay in `.local`: answers rewrite them into the link zone
    /// (`CachedRecord.answerRData`).
    func cache(_ record: MDNSRecord, order: Int, now: Duration) -> RecordState {
        let decoded = try? RData(type: record.type, wire: record.rdata)
        // A PTR's RDATA is its target's wire form; TXT and addresses are copied verbatim.
        var kept: RData? = nil
        switch decoded {
        case .ptr(let target)? where target.wireBytes == record.rdata: kept = .ptr(target.sharingStorage(with: record.rdata))
        case .txt(let bytes)? where bytes == record.rdata: kept = .txt(record.rdata)
        case .a(let bytes)? where bytes == record.rdata: kept = .a(record.rdata)
        case .aaaa(let bytes)? where bytes == record.rdata: kept = .aaaa(record.rdata)
        default: break
        }
        return RecordState(order: order, seenAt: now, rdata: kept, decodes: decoded != nil)
    }

    // MARK: Answers

    /// What a browse and its related browses hold, copied out of the lock.
    struct Snapshot: Sendable {
        var answers: [CachedRecord] = []
        /// SRV/TXT of PTR targets, then addresses of SRV targets (RFC 6763 §12).
        var additional: [CachedRecord] = []
        /// mDNS has had its full say (`mdnsWindow`), so an empty answer is final; otherwise a
        /// negative is cached briefly (`provisionalTTL`).
        var isSettled = true
    }

    private func makeSnapshot(for key: BrowseKey, in browses: [BrowseKey: Browse], now: Duration) -> Snapshot {
        guard let browse = browses[key] else { return Snapshot() }
        var snapshot = snapshot(answers: browse.orderedRecords, interface: key.interface, in: browses)
        snapshot.isSettled = browse.hasResults || now - browse.startedAt >= Self.mdnsWindow
        return snapshot
    }

    private func optimisticSnapshot(_ stale: ReleasedBrowse, key: BrowseKey, in browses: [BrowseKey: Browse]) -> Snapshot {
        snapshot(answers: stale.records, interface: key.interface, in: browses)
    }

    /// The answers plus what live browses on the same link know about them (additionals).
    private func snapshot(answers: [CachedRecord], interface: String, in browses: [BrowseKey: Browse]) -> Snapshot {
        var snapshot = Snapshot(answers: answers)
        func known(_ name: DNSName, _ type: RRType) -> [CachedRecord] {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.orderedRecords ?? []
        }
        var hosts: [DNSName] = []
        for record in snapshot.answers {
            guard let target = record.localTarget else { continue }
            if record.type == .ptr {
                let srv = known(target, .srv)
                snapshot.additional += srv + known(target, .txt)
                hosts += srv.compactMap(\.localTarget)
            } else if record.type == .srv {
                hosts.append(target)
            }
        }
        var seen = Set<DNSName>()
        for host in hosts where seen.insert(host).inserted {
            snapshot.additional += known(host, .a) + known(host, .aaaa)
        }
        return snapshot
    }

    private func answer(_ query: Message, plan: MDNSPlan, snapshot: Snapshot, ttl: UInt32? = nil) -> Message {
        var reply = reply(to: query)
        let owner = query.questions[0].name
        let ttl = ttl ?? configuration.ttlCap
        let filter = plan.link.services
        let zone = plan.link.zone
        let suppress = configuration.suppressLinkLocal
        reply.answers = snapshot.answers.compactMap { record in
            // `_services._dns-sd._udp` lists types: drop those the link does not share.
            if !filter.isOpen, record.type == .ptr, let target = record.ptrTarget,
                let type = ServiceFilter.serviceType(of: target.labels.dropLast().map { $0 }), !filter.permits(type)
            {
                return nil
            }
            guard let rdata = record.answerRData(zone: zone, suppressLinkLocal: suppress) else { return nil }
            return ResourceRecord(name: owner, type: record.type, ttl: ttl, rdata: rdata)
        }
        if reply.answers.isEmpty {
            // NODATA, never NXDOMAIN: the name may be an empty non-terminal (§5.6).
            let zone = ZoneRecords(origin: plan.zone, configuration: configuration)
            reply.authority = [snapshot.isSettled ? zone.soa : zone.soa(negativeTTL: Self.provisionalTTL)]
            return reply
        }
        let answered = Set(reply.answers)
        var additional: [ResourceRecord] = []
        for record in snapshot.additional {
            guard let rdata = record.answerRData(zone: zone, suppressLinkLocal: suppress),
                let name = record.localName.replacingSuffix(Catalog.local, with: zone)
            else { continue }
            let rr = ResourceRecord(name: name, type: record.type, ttl: ttl, rdata: rdata)
            if !answered.contains(rr) && !additional.contains(rr) { additional.append(rr) }
        }
        reply.additional = additional
        return reply
    }

    /// The skeleton of a reply: ID, opcode, RD and CD echoed, the question, AA (we are
    /// authoritative for every zone we answer), OPT only when the query had one (RFC 6891 §7).
    private func reply(to query: Message) -> Message {
        Message(
            id: query.id, isResponse: true, opcode: query.opcode, authoritative: true,
            recursionDesired: query.recursionDesired, checkingDisabled: query.checkingDisabled,
            questions: query.questions,
            edns: query.edns.map { _ in EDNS(udpPayloadSize: UInt16(clamping: configuration.maxUDPPayload)) })
    }

    private func failure(_ query: Message, _ rcode: RCode) -> Message {
        var reply = reply(to: query)
        reply.authoritative = false
        reply.rcode = rcode
        if rcode == .formErr && query.questions.count != 1 { reply.questions = [] }
        return reply
    }

    /// Encodes and sends an answer within the query's size limit, and records its metrics.
    private func finish(
        _ message: Message, _ context: QueryContext, cache: String, replay: ReplayTicket.Kind? = nil
    ) {
        var sent = message
        var bytes: [UInt8]?
        do {
            bytes = try message.encode(limit: context.limit)
        } catch {
            logger.error("cannot encode answer", metadata: ["dns.error": "\(error)", "dns.id": "\(message.id)"])
            sent.answers = []
            sent.authority = []
            sent.additional = []
            sent.rcode = .servFail
            bytes = try? sent.encode(limit: context.limit)
        }
        let rcode = "\(sent.rcode)"
        // Only answers as asked are replayed or shared, not a SERVFAIL put in their place.
        let replayable = bytes != nil && sent.rcode == message.rcode ? replay : nil
        if replayable == .hit, let bytes, let key = context.memoKey {
            state.withLock { $0.memo.store(AnswerMemo.Answer(bytes: bytes, rcode: rcode), for: key, epoch: context.epoch) }
        }
        send(bytes, rcode: rcode, context, cache: cache, replay: replayable)
    }

    /// Sends encoded bytes (nil: nothing) with a replay ticket of kind `replay`, and records
    /// the answer's metrics.
    private func send(
        _ bytes: [UInt8]?, rcode: String, _ context: QueryContext, cache: String, replay: ReplayTicket.Kind?
    ) {
        let counters = metrics.counters(transport: context.transport, qtype: context.qtype, rcode: rcode)
        let ticket = replay.map { kind in
            ReplayTicket(epoch: context.epoch, lifetime: context.replayLifetime, kind: kind, counters: counters)
        }
        context.respond(ProxyReply(bytes: bytes, replay: ticket))
        metrics.answered(counters, cache: cache, seconds: scheduler.now() - context.started)
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
    }

    private func count(_ counter: WritableKeyPath<ProxyStats, Int>) {
        state.withLock { $0.stats[keyPath: counter] += 1 }
    }

    func countReplays(_ kind: ReplayTicket.Kind, _ n: Int) {
        state.withLock { state in
            state.stats.queries += n
            switch kind {
            case .hit: state.stats.cacheHits += n
            case .immediate: state.stats.immediate += n
            case .refused: state.stats.refused += n
            }
        }
    }

    /// Retires every replay ticket issued so far. Called after the change it announces, so a
    /// ticket read before the change can never outlive it.
    private func invalidateReplays() {
        epoch.add(1, ordering: .releasing)
    }

    // MARK: Release of idle browses

    private func scheduleSweep() {
        let interval = max(.seconds(1), configuration.browseIdleTimeout / 4)
        let timer = scheduler.schedule(after: interval) { [weak self] in
            self?.sweep()
            self?.scheduleSweep()
        }
        let stop = state.withLock { state -> Bool in
            if state.shutDown { return true }
            state.sweepTimer = timer
            return false
        }
        if stop { timer.cancel() }
    }

    /// Releases a live browse early to make room (`maxBrowses`); its results stay available
    /// for optimistic answers. Returns the avahi handle, to be cancelled outside the lock.
    private func evict(_ key: BrowseKey, in state: inout State, now: Duration) -> (any MDNSQueryHandle)? {
        guard let browse = state.browses.removeValue(forKey: key) else { return nil }
        state.stats.browsesReleased += 1
        state.stats.browsesEvicted += 1
        if configuration.optimisticAnswers, browse.hasResults, state.released.count < Self.maxReleased {
            state.released[key] = ReleasedBrowse(records: browse.orderedRecords, releasedAt: now)
        }
        state.stats.activeBrowses = state.browses.count
        logger.debug("mDNS query evicted (browse limit)", metadata: ["mdns.question": "\(key)"])
        return browse.handle
    }

    /// At most this many released browses are remembered for optimistic answers.
    static let maxReleased = 4096

    /// Releases browses nobody asked about for `browseIdleTimeout` (and nobody waits on).
    func sweep() {
        let now = scheduler.now()
        let released = state.withLock { state -> [(BrowseKey, (any MDNSQueryHandle)?)] in
            let idle = state.browses.filter {
                $0.value.waiters.isEmpty && now - $0.value.lastUsed >= configuration.browseIdleTimeout
                    && !state.subscriptions.isSubscribed($0.key)
            }
            for key in idle.keys { state.browses[key] = nil }
            state.stats.activeBrowses = state.browses.count
            state.stats.browsesReleased += idle.count
            if configuration.optimisticAnswers {
                for (key, browse) in idle where browse.hasResults {
                    state.released[key] = ReleasedBrowse(records: browse.orderedRecords, releasedAt: now)
                }
                state.released = state.released.filter { now - $0.value.releasedAt <= configuration.optimisticMaxStaleness }
                if state.released.count > Self.maxReleased {
                    let keep = state.released.sorted { $0.value.releasedAt > $1.value.releasedAt }.prefix(Self.maxReleased)
                    state.released = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
                }
            } else {
                state.released.removeAll()
            }
            return idle.map { ($0.key, $0.value.handle) }
        }
        if !released.isEmpty { invalidateReplays() }
        for (key, handle) in released {
            handle?.cancel()
            logger.debug("mDNS query released", metadata: ["mdns.question": "\(key)"])
        }
    }
}
