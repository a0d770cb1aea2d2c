import DNSWire
import EventCounting
import Logging
import MDNS
import Metrics
import Synchronization

// The coordinator's query side, and the intake that decides what a query is.

/// The RFC 8766 Discovery Proxy: answers unicast DNS queries for link zones from mDNS.
///
/// Life of a query: `QueryIntake` (decode, ACL, protocol checks, `Catalog.plan`) → refused,
/// immediate, or mDNS. An mDNS question is served by a shared `Browse` in the `BrowseTable`:
/// a hit answers at once from its records; a miss starts the browse (rate-limited per link)
/// or joins it, and is answered when the first results arrive (plus `collectionWindow`) or,
/// with no data, at the negative timeout (§5.6). Browses live on after the last query so
/// repeats are hits, and are released after `browseIdleTimeout`. `AnswerBuilder` makes the
/// reply and `AnswerOutput` encodes, shares and counts it. This class only coordinates them:
/// the lock, the backend, the timers.
///
/// Threading: all state sits behind one mutex. mDNS events arrive on the backend's thread and
/// timers on the scheduler's; the backend is never called with the mutex held (avahi takes
/// its own lock around callbacks, so that would deadlock), and replies are encoded and sent
/// outside the mutex.
public final class DiscoveryProxy: MDNSQueryReceiver {
    let backend: any MDNSBackend
    /// What far links said lately, for the gateway's lookups to start from (`LinkSnooper`).
    let linkCache: (any MDNSLinkCache)?
    let scheduler: any ProxyScheduler
    let logger: Logger
    let output: AnswerOutput
    var metrics: ProxyMetrics { output.metrics }
    let state: Mutex<State>
    /// Moves on with every change that can alter an answer; see `ReplayTicket`.
    private let epoch = Atomic<UInt64>(0)
    var currentEpoch: UInt64 { epoch.load(ordering: .acquiring) }
    /// Swapped whole by `reconfigure`; read once per query.
    private let current: Mutex<QueryIntake>
    /// Told each new catalog after `reconfigure` (DNS Push sessions review their clients).
    private let reconfigured = Mutex<[@Sendable (Catalog) -> Void]>([])
    /// What the proxy itself publishes over mDNS, by interface (`ownPublications`).
    let ownRecords = Mutex<OwnRecords>(OwnRecords())
    /// Whether the proxy has published anything, so that without a gateway an mDNS event
    /// costs no lock more.
    let publishesRecords = Atomic<Bool>(false)

    public var catalog: Catalog { current.withLock { $0.catalog } }
    public var configuration: ProxyConfiguration { catalog.configuration }

    struct State: ~Copyable {
        var table: BrowseTable
        /// Counters of queries; the table counts what happened to browses.
        var stats = ProxyStats()
        var sweepTimer: (any ProxyTimer)?
        /// DNS Push subscribers per browse (RFC 8765); a browse with subscribers is kept.
        var subscriptions = SubscriptionTable()
        /// The last inventory of each link, and when it was taken (`takeInventory`).
        var inventory: [String: (LinkInventory, at: Duration)] = [:]
        var inventoryTimer: (any ProxyTimer)?
        /// Links whose Push subscriptions wait for address browses to settle (§5.5.2).
        var targetRechecks: Set<String> = []
        /// Links whose gateway lookups wait for their pacer, a timer running (`releaseLookups`).
        var lookupReleases: Set<String> = []
    }

    /// `metricsFactory`: where the proxy's instruments go (`ProxyMetrics`); the executable's
    /// bootstrapped factory by default.
    public init(
        configuration: ProxyConfiguration, backend: any MDNSBackend, scheduler: any ProxyScheduler,
        logger: Logger, metricsFactory: any MetricsFactory = MetricsSystem.factory,
        linkCache: (any MDNSLinkCache)? = nil
    ) {
        self.current = Mutex(QueryIntake(catalog: Catalog(configuration: configuration)))
        self.backend = backend
        self.linkCache = linkCache
        self.scheduler = scheduler
        self.logger = logger
        self.output = AnswerOutput(scheduler: scheduler, logger: logger, metrics: ProxyMetrics(factory: metricsFactory))
        self.state = Mutex(State(table: BrowseTable(metrics: output.metrics)))
        metrics.prepare(links: configuration.links.map(\.interface))
        scheduleSweep()
        scheduleFirstInventory()
    }

    /// Releases every browse and stops the timers. Pending queries are answered SERVFAIL.
    public func shutdown() {
        let browses = state.withLock { state -> [Browse] in
            state.sweepTimer?.cancel()
            state.sweepTimer = nil
            state.inventoryTimer?.cancel()
            state.inventoryTimer = nil
            return state.table.close()
        }
        cancelOrphanedWakeups()
        invalidateReplays()
        browses.forEach { $0.handle?.cancel() }
        let answers = AnswerBuilder(configuration: configuration)
        for waiter in browses.flatMap(\.waiters) {
            output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .error)
        }
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
        let inventoryWasOff = catalog.configuration.inventoryInterval == nil
        current.withLock { $0 = QueryIntake(catalog: Catalog(configuration: configuration)) }
        metrics.prepare(links: configuration.links.map(\.interface))
        let dropped = state.withLock { state in
            state.inventory =
                configuration.inventoryInterval == nil ? [:] : state.inventory.filter { kept.contains($0.key) }
            return state.table.release(keepingLinks: kept, learns: configuration.learnsAnswerTimes)
        }
        cancelOrphanedWakeups()
        if inventoryWasOff { scheduleFirstInventory() }
        invalidateReplays()  // the zones, filters or ACL may have changed
        let applied = self.catalog
        for observer in reconfigured.withLock({ $0 }) { observer(applied) }
        let answers = AnswerBuilder(configuration: configuration)
        for browse in dropped {
            browse.handle?.cancel()
            for waiter in browse.waiters {
                output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .error)
            }
        }
        logger.info(
            "configuration applied",
            metadata: ["proxy.links": "\(configuration.links.count)", "proxy.browses_released": "\(dropped.count)"])
    }

    /// `observer` is called with the new catalog after every `reconfigure`, outside the lock.
    public func onReconfigure(_ observer: @escaping @Sendable (Catalog) -> Void) {
        reconfigured.withLock { $0.append(observer) }
    }

    public var stats: ProxyStats {
        var stats = state.withLock { state in
            var stats = state.stats
            let counters = state.table.counters
            stats.cacheHits = counters.cacheHits
            stats.cacheMisses = counters.cacheMisses
            stats.optimisticAnswers = counters.optimisticAnswers
            stats.negativeTimeouts = counters.negativeTimeouts
            stats.browsesReleased = counters.browsesReleased
            stats.browsesEvicted = counters.browsesEvicted
            stats.activeBrowses = state.table.browses.count
            return stats
        }
        // Answers by RCODE are `dns_queries_total`'s counts: one store per event.
        let answered = metrics.answeredByRcode()
        stats.answered = answered.values.reduce(0, +)
        stats.servFail = answered["\(RCode.servFail)", default: 0]
        stats.notImp = answered["\(RCode.notImp)", default: 0]
        stats.badVers = answered["\(RCode.badVers)", default: 0]
        stats.dropped = metrics.dropped.value
        stats.inFlight = output.inFlight
        stats.refused = metrics.refused.value
        stats.aclRefused = metrics.aclRefused.value
        stats.formErr = metrics.malformed.value
        stats.rateLimited = metrics.mdnsRateLimited.total
        stats.mdnsQueriesStarted = metrics.mdnsQueriesStarted.total
        return stats
    }

    /// The mDNS backend's connection state, for health reporting.
    public var mdnsState: MDNSBackendState { backend.state }

    /// What every link's live browses know right now, for the status page and API.
    public func linkStatus() -> [LinkStatus] {
        let now = scheduler.now()
        let configuration = catalog.configuration
        let (browses, inventory, times) = state.withLock { state in
            let times = Dictionary(
                uniqueKeysWithValues: configuration.links.map { link in
                    (link.interface, state.table.learnedAnswerTimes(on: link.interface, configuration))
                })
            return (state.table.browses, state.inventory, times)
        }
        return LinkStatus.make(
            links: configuration.links, browses: browses, inventory: inventory, answerTimes: times,
            suppressLinkLocal: configuration.suppressLinkLocal, now: now)
    }

    // MARK: Queries

    /// Answers one query message from `client`, whose front end says who sent it, over which
    /// transport (the answer's size limit) and, over TCP, the connection's idle timeout
    /// (announced to a query that carries edns-tcp-keepalive, RFC 7828 §3.3.2). `respond` is
    /// called exactly once: synchronously for everything but an mDNS miss, which is answered
    /// later from another thread.
    @_spi(Testing) public func handle(
        query bytes: [UInt8], from client: DNSClient, respond: @escaping @Sendable ([UInt8]?) -> Void
    ) {
        handle(query: bytes, from: client) { (reply: ProxyReply) in respond(reply.bytes) }
    }

    /// As above, with a `ReplayTicket` on answers the front end may replay to the same client.
    public func handle(
        query bytes: [UInt8], from client: DNSClient, reply respond: @escaping @Sendable (ProxyReply) -> Void
    ) {
        // Read before anything the answer depends on (see `invalidateReplays`).
        let epoch = currentEpoch
        let intake = current.withLock { $0 }
        let (decision, limits) = intake.decide(bytes, from: client)
        state.withLock { $0.stats.queries += 1 }
        if case .drop = decision {
            metrics.dropped.increment()
            respond(ProxyReply(bytes: nil))
            return
        }
        output.began()
        var context = QueryContext(
            started: scheduler.now(), epoch: epoch,
            replayLifetime: ReplayTicket.lifetime(browseIdleTimeout: intake.catalog.configuration.browseIdleTimeout),
            qtype: limits.qtype, limit: limits.size, asker: .client(client.transport, respond: respond))
        if limits.asksTCPKeepalive { context.tcpKeepalive = client.tcpIdleTimeout }
        switch decision {
        case .drop:
            break
        case .malformed(let reply, let isDSO, let error):
            logger.debug("malformed query", metadata: ["dns.id": "\(reply.id)", "dns.error": "\(error)"])
            if !isDSO { metrics.malformed.increment() }
            output.finish(reply, context, cache: .error)
        case .clientRefused(let reply):
            noteRefused(.client, client: client, asking: "query")
            // Not replayable: each refusal is counted and logged as an ACL event.
            output.finish(reply, context, cache: .immediate)
        case .protocolFailure(let reply, let rcode):
            if rcode == .formErr { metrics.malformed.increment() }
            output.finish(reply, context, cache: .immediate)
        case .refused(let reply):
            metrics.refused.increment()
            logger.debug("refused", metadata: ["dns.qname": "\(reply.questions[0].name)"])
            output.finish(reply, context, cache: .immediate, replay: .refused)
        case .linkRefused(let reply, let link):
            noteRefused(.link(link), client: client, asking: "query")
            // Not replayable either: each is counted per link and logged, like an ACL refusal.
            output.finish(reply, context, cache: .immediate)
        case .immediate(let reply):
            count(\.immediate)
            output.finish(reply, context, cache: .immediate, replay: .immediate)
        case .mdns(let query, let plan):
            context.hidesPrivateAddresses = intake.catalog.configuration.privateRealms.hidesPrivateAddresses(
                of: plan.link, from: client)
            if plan.type == .any {
                answerAny(plan, query: query, context: context, answers: intake.answers)
                return
            }
            if plan.type == .nsec || plan.type == .nsec3 {
                answerNSEC(plan, query: query, context: context, catalog: intake.catalog)
                return
            }
            if context.tcpKeepalive == nil, !context.hidesPrivateAddresses {
                context.memoKey = AnswerMemo.Key(query: bytes, transport: client.transport)
            }
            lookup(plan, query: query, context: context, configuration: intake.catalog.configuration)
        }
    }

    func lookup(_ plan: MDNSPlan, query: Message, context: QueryContext, configuration: ProxyConfiguration) {
        let key = BrowseKey(interface: plan.link.interface, name: plan.localName, type: plan.type)
        let now = scheduler.now()
        enum Step {
            case lookup(BrowseTable.Lookup)
            case hit(Snapshot)
            case memo(AnswerMemo.Answer)
        }
        let step = state.withLock { state -> Step in
            let lookup = state.table.lookup(
                key, query: query, plan: plan, context: context, now: now, configuration: configuration,
                pinned: state.subscriptions)
            if case .wait = lookup { rearm(key, in: &state.table, now: now) }
            guard case .hit = lookup else { return .lookup(lookup) }
            if let memoKey = context.memoKey, let answer = output.memoized(memoKey, id: query.id, epoch: context.epoch)
            {
                return .memo(answer)
            }
            return .hit(state.table.snapshot(for: key, now: now))
        }
        let answers = AnswerBuilder(configuration: configuration)
        switch step {
        case .memo(let answer):
            output.send(answer.bytes, rcode: answer.rcode, context, cache: .hit, replay: .hit)
        case .hit(let snapshot):
            // A provisional negative is neither replayed nor shared: it must not outlive the
            // browse's first 6 s with its 2 s negative TTL.
            output.finish(
                answers.answer(query, plan: plan, snapshot: snapshot, for: context), context, cache: .hit,
                replay: snapshot.isSettled ? .hit : nil)
        case .lookup(.hit):
            break  // taken above
        case .lookup(.full):
            logger.debug("browse limit reached, every browse in use: SERVFAIL", metadata: ["mdns.question": "\(key)"])
            output.finish(answers.failure(query, .servFail), context, cache: .miss)
        case .lookup(.optimistic(let snapshot, let start)):
            if let start { evict(start) }
            logger.debug("optimistic answer; refreshing", metadata: ["mdns.question": "\(key)"])
            output.finish(
                answers.answer(
                    query, plan: plan, snapshot: snapshot, ttl: min(configuration.ttlCap, Self.provisionalTTL),
                    for: context),
                context, cache: .optimistic)
            if let start { begin(start) }
        case .lookup(.rateLimited):
            logger.debug("mDNS rate limit: answering SERVFAIL", metadata: ["mdns.question": "\(key)"])
            output.finish(answers.failure(query, .servFail), context, cache: .miss)
        case .lookup(.wait(_, _, let start)):
            // The browse's timer (`rearm` above) answers this query at its deadline at the latest.
            if let start { evict(start) }
            if let start { begin(start) }
        }
    }

    /// A query of type ANY (RFC 8482 §4.1). avahi cannot run an ANY record browser, and a
    /// multicast ANY per query would be an amplifier, so the answer is every RRset the live
    /// browses already hold for that name (`AnswerBuilder.any`). Not replayed: it sums
    /// several browses.
    private func answerAny(_ plan: MDNSPlan, query: Message, context: QueryContext, answers: AnswerBuilder) {
        let records = state.withLock { state in
            state.table.counters.cacheHits += 1
            return state.table.records(named: plan.localName, on: plan.link.interface)
        }
        output.finish(answers.any(query, plan: plan, records: records, for: context), context, cache: .hit)
    }

    /// An NSEC or NSEC3 query (§5.5.3): each type the name can hold is asked as a part through
    /// `lookup`, sharing the browses (and their cache) with every other query, and
    /// `NSECSynthesis` answers when all parts have. Not replayed: it sums several browses.
    private func answerNSEC(_ plan: MDNSPlan, query: Message, context: QueryContext, catalog: Catalog) {
        let configuration = catalog.configuration
        let types = catalog.recordTypes(at: plan)
        let answers = AnswerBuilder(configuration: configuration)
        let synthesis = NSECSynthesis(
            skeleton: answers.reply(to: query),
            zone: ZoneRecords(origin: plan.zone, link: plan.link, configuration: configuration),
            types: types.count, ttlCap: configuration.ttlCap
        ) { [output] reply, fromCache in
            output.finish(reply, context, cache: fromCache ? .hit : .miss)
        }
        for type in types {
            var part = context
            part.asker = .part(synthesis.part(type))
            part.memoKey = nil
            var partPlan = plan
            partPlan.type = type
            let partQuery = Message(id: query.id, questions: [Question(name: query.questions[0].name, type: type)])
            lookup(partPlan, query: partQuery, context: part, configuration: configuration)
        }
        synthesis.launched()
    }

    /// Cancels the query of a browse released to make room for `start`'s.
    private func evict(_ start: BrowseTable.Start) {
        guard let evicted = start.evicted else { return }
        let now = scheduler.now()
        state.withLock { rearm(evicted.key, in: &$0.table, now: now) }  // drops its timer, if any
        evicted.handle?.cancel()
        logger.debug("mDNS query evicted (browse limit)", metadata: ["mdns.question": "\(evicted.key)"])
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

    /// Why a client was turned away: the client ACL, or a link's view (`Link.clients`).
    enum Refusal {
        case client
        case link(String)
    }

    /// Counts and logs a refusal the same way whichever way the client came in (`asking`: a
    /// query, or the DSO message type), so `dns_acl_refused_total` and
    /// `dns_link_refused_total` cover DNS Push too.
    func noteRefused(_ refusal: Refusal, client: DNSClient, asking: String) {
        metrics.refused.increment()
        var metadata: Logger.Metadata = [
            "dns.request": "\(asking)", "dns.client": "\(IPPrefix.format(client.address))",
        ]
        switch refusal {
        case .client:
            metrics.aclRefused.increment()
            logger.debug("client not allowed", metadata: metadata)
        case .link(let link):
            metrics.linkRefused[link].increment()
            metadata["proxy.link"] = "\(link)"
            logger.debug("client may not see this link", metadata: metadata)
        }
    }

    /// A refusal by the same ACL and link views on another way in (the SRP registrar's
    /// updates): counted and logged as the proxy's own. `link` nil: the client ACL.
    public func noteRefused(client: DNSClient, link: String?, asking: String) {
        noteRefused(link.map { .link($0) } ?? .client, client: client, asking: asking)
    }

    func count(_ counter: WritableKeyPath<ProxyStats, Int>) {
        state.withLock { $0.stats[keyPath: counter] += 1 }
    }

    func countReplays(_ kind: ReplayTicket.Kind, _ n: Int) {
        state.withLock { state in
            state.stats.queries += n
            switch kind {
            case .hit: state.table.counters.cacheHits += n
            case .immediate: state.stats.immediate += n
            case .refused: break
            }
        }
        if kind == .refused { metrics.refused.increment(by: n) }
    }

    /// Retires every replay ticket issued so far. Called after the change it announces, so a
    /// ticket read before the change can never outlive it.
    func invalidateReplays() {
        epoch.add(1, ordering: .releasing)
    }

    // MARK: Release of idle browses

    private func scheduleSweep() {
        let interval = max(.seconds(1), configuration.browseIdleTimeout / 4)
        let timer = scheduler.schedule(after: interval) { [weak self] in
            self?.sweep()
            self?.scheduleSweep()
        }
        hold(timer) { $0.sweepTimer = $1 }
    }

    /// Keeps a timer in the state (`store`), or cancels it if the proxy has shut down.
    func hold(_ timer: any ProxyTimer, as store: (inout State, any ProxyTimer) -> Void) {
        let stop = state.withLock { state -> Bool in
            if state.table.isClosed { return true }
            store(&state, timer)
            return false
        }
        if stop { timer.cancel() }
    }

    /// Releases browses nobody asked about for `browseIdleTimeout` (and nobody waits on).
    func sweep() {
        let now = scheduler.now()
        let configuration = self.configuration
        let released = state.withLock { state in
            state.table.sweep(now: now, configuration: configuration, pinned: state.subscriptions)
        }
        if !released.isEmpty { invalidateReplays() }
        for (key, handle) in released {
            handle?.cancel()
            logger.debug("mDNS query released", metadata: ["mdns.question": "\(key)"])
        }
    }
}

// MARK: - Intake

/// The first step of every query, before any cache state: decode, the client ACL, protocol
/// checks (opcode, question count, EDNS version and size), and `Catalog.plan`. Pure: the
/// proxy counts, logs and sends what it decides.
struct QueryIntake: Sendable {
    let catalog: Catalog
    let answers: AnswerBuilder

    init(catalog: Catalog) {
        self.catalog = catalog
        self.answers = AnswerBuilder(configuration: catalog.configuration)
    }

    enum Decision {
        /// No header, or a response: drop, never reflect.
        case drop
        /// Undecodable: FORMERR, or NOTIMP for a DSO message (`isDSO`).
        case malformed(Message, isDSO: Bool, error: any Error)
        /// The client is outside the allowed prefixes (RFC 8766 §9.2, RFC 7766 §10): REFUSED.
        case clientRefused(Message)
        /// Wrong opcode, question count or EDNS version; `rcode` says which.
        case protocolFailure(Message, RCode)
        /// Outside every zone, or a class we do not serve.
        case refused(Message)
        /// A zone of a link this client may not see (`Link.clients`): REFUSED, counted per link.
        case linkRefused(Message, link: String)
        /// Answered from configuration.
        case immediate(Message)
        /// To be answered from mDNS.
        case mdns(Message, MDNSPlan)
    }

    /// What the answer may be: its size limit, its qtype label for metrics, and whether it
    /// may carry edns-tcp-keepalive (a TCP query that asked for it, RFC 7828 §3.3.2; over UDP
    /// the option is ignored, §3.3.1).
    struct Limits {
        var size = 512
        var qtype = "none"
        var asksTCPKeepalive = false
    }

    func decide(_ bytes: [UInt8], from client: DNSClient) -> (Decision, Limits) {
        var limits = Limits()
        guard let header = MessageHeader(bytes), !header.isResponse else { return (.drop, limits) }
        let query: Message
        do {
            query = try Message(wire: bytes)
        } catch {
            // A DSO message (TLVs after the header) here came over UDP or a listener without
            // sessions: NOTIMP (RFC 8490 §5.1), not FORMERR.
            let isDSO = header.opcode == .dso
            let reply = Message(
                id: header.id, isResponse: true, opcode: header.opcode,
                recursionDesired: header.recursionDesired, rcode: isDSO ? .notImp : .formErr)
            return (.malformed(reply, isDSO: isDSO, error: error), limits)
        }
        limits.size = Self.answerLimit(for: query, over: client.transport, configuration: catalog.configuration)
        limits.qtype = query.questions.first.map { QueryContext.label(for: $0.type) } ?? "none"
        limits.asksTCPKeepalive = client.transport == .tcp && query.edns?.asksTCPKeepalive == true
        guard catalog.admits(client) else { return (.clientRefused(answers.failure(query, .refused)), limits) }
        if let rcode = Self.protocolFailure(query) {
            return (.protocolFailure(answers.failure(query, rcode), rcode), limits)
        }
        if let link = catalog.hiddenLink(holding: query.questions[0].name, from: client) {
            return (.linkRefused(answers.failure(query, .refused), link: link.interface), limits)
        }
        switch catalog.plan(query.questions[0]) {
        case .refused:
            return (.refused(answers.failure(query, .refused)), limits)
        case .immediate(let zone, let records):
            let shown = catalog.visible(records, to: client)
            // The zone's link matters only for its own name servers (in an empty answer's SOA).
            let link = catalog.hasLinkNameServers && shown.isEmpty ? catalog.zone(containing: zone)?.link : nil
            return (.immediate(answers.immediate(query, zone: zone, link: link, answers: shown)), limits)
        case .mdns(let plan):
            return (.mdns(query, plan), limits)
        }
    }

    /// RFC 6891 §6.2.5: a payload below 512 counts as 512; never above our own maximum.
    /// Without OPT, 512 (RFC 1035 §4.2.1). TCP: 65535.
    static func answerLimit(for query: Message, over transport: DNSTransport, configuration: ProxyConfiguration) -> Int
    {
        if transport == .tcp { return 65535 }
        guard let edns = query.edns else { return 512 }
        return min(max(512, Int(edns.udpPayloadSize)), max(512, configuration.maxUDPPayload))
    }

    /// Queries the proxy cannot plan: wrong opcode (DSO included, RFC 8490 §5.1, where no
    /// session is offered), question count, or EDNS version (RFC 6891 §6.1.3, answered with
    /// our OPT at version 0).
    static func protocolFailure(_ query: Message) -> RCode? {
        guard query.opcode == .query else { return .notImp }
        guard query.questions.count == 1 else { return .formErr }
        if let edns = query.edns, edns.version != 0 { return .badVers }
        return nil
    }
}
