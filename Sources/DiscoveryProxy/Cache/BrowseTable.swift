import DNSWire
import EventCounting
import MDNS

/// The proxy's cache: every live browse, what released browses last knew, each link's mDNS
/// rate limit (RFC 8766 §9.3), and counters of what happened. A value kept inside the
/// proxy's mutex. Each method is one step in the life of a browse, takes the time and
/// settings it needs, and returns what the proxy must do outside the lock (start or cancel
/// an mDNS query, arm a timer, answer waiters), so every step can be tested without a proxy.
struct BrowseTable: Sendable {
    private(set) var browses: [BrowseKey: Browse] = [:]
    /// What released browses last knew, for optimistic answers (bounded in age and count).
    private(set) var released: [BrowseKey: ReleasedBrowse] = [:]
    /// Each link's mDNS rate limit for clients' queries (`QueryBudget.clients`).
    private var buckets: [String: TokenBucket] = [:]
    /// Each far link's queue of the gateway's lookups (`QueryBudget.gateway`).
    private(set) var pacers: [String: LookupPacer] = [:]
    /// Tells a browse's events from those of an earlier browse of the same question still
    /// in flight; wraps after 2^32 browses, long after any such event has arrived.
    private var nextGeneration: UInt32 = 0
    private var nextWaiterID = 0
    /// After `close`, no browse starts.
    private(set) var isClosed = false
    var counters = BrowseCounters()
    /// The timer of each browse that has waiters (`Wakeup`).
    private(set) var wakeups: [BrowseKey: Wakeup] = [:]
    /// How long each link's devices take to answer, learned from its browses
    /// (`ProxyConfiguration.learnsAnswerTimes`).
    private(set) var answerTimes: [String: AnswerTimes] = [:]
    /// Where the events with a metric of their own are counted (`mdns_queries_rate_limited_total`).
    let metrics: ProxyMetrics

    init(metrics: ProxyMetrics = ProxyMetrics()) {
        self.metrics = metrics
    }

    /// At most this many released browses are remembered for optimistic answers.
    static let maxReleased = 4096

    /// A new mDNS query to start, after `delay` (the link's rate limit), for the browse
    /// created with `generation`. `key` may share name storage with the cache.
    struct Start {
        var key: BrowseKey
        var generation: UInt32
        var delay: Duration
        /// Waits in its link's `LookupPacer` (`releaseLookups`), not `delay`.
        var queued = false
        /// A browse released to make room (`maxBrowses`), whose query is to be cancelled.
        var evicted: (key: BrowseKey, handle: (any MDNSQueryHandle)?)?
    }

    enum Lookup {
        /// Answer from the browse now (`snapshot(for:now:)`).
        case hit
        /// Wait for mDNS until `deadline` at the latest.
        case wait(waiterID: Int, deadline: Duration, start: Start?)
        /// Answered from a recently released browse while a fresh one starts.
        case optimistic(Snapshot, start: Start?)
        /// The link's rate limit would delay the query past the negative timeout.
        case rateLimited
        /// `maxBrowses` reached and no browse may make room (`BrowseLimit`).
        case full
    }

    /// A query for `key`'s question: a hit, a joined or new browse, or a refusal. `pinned`:
    /// the browses with subscribers, which the browse limit never releases (borrowed, not
    /// copied: every query comes through here).
    mutating func lookup(
        _ key: BrowseKey, query: Message, plan: MDNSPlan, context: QueryContext, now: Duration,
        configuration: ProxyConfiguration, pinned: borrowing some PinnedBrowses = NoPinnedBrowses()
    ) -> Lookup {
        if var browse = browses[key] {
            browse.lastUsed = now
            // While the collection window of its first records is open, a query waits for its
            // end with the others: a half-filled browse is no answer (Knot Resolver's retry over
            // the proxy's other address, 20 ms after its first query, got 13 of 19 types).
            // (Waiters first: a hit on a settled browse has none, and skips the second lookup.)
            let collecting = !browse.waiters.isEmpty && wakeups[key]?.flushAt != nil
            if !collecting
                && browse.isEstablished(now: now, negativeTimeout: negativeTimeout(on: key.interface, configuration))
            {
                browses[key] = browse
                if context.asker.isClient { counters.cacheHits += 1 }
                return .hit
            }
            if context.asker.isClient { counters.cacheMisses += 1 }
            let deadline = browse.deadline(
                joiningAt: now, negativeTimeout: negativeTimeout(on: key.interface, configuration))
            let id = addWaiter(to: &browse, query: query, plan: plan, context: context, deadline: deadline)
            browses[key] = browse
            return .wait(waiterID: id, deadline: deadline, start: nil)
        }
        guard !isClosed else { return .rateLimited }
        let key = sharingStorage(key)
        // Optimistic answer (like serve-stale): the last results of a browse released
        // not long ago, while a fresh browse starts so that the next answer is current.
        let stale = released[key].flatMap {
            configuration.optimisticAnswers && now - $0.releasedAt <= configuration.optimisticMaxStaleness ? $0 : nil
        }
        var bucket = bucket(key.interface, now: now, configuration: configuration)
        let delay = bucket.reserve(now: now)
        let negativeTimeout = negativeTimeout(on: key.interface, configuration)
        if delay >= negativeTimeout {
            bucket.refund()
            buckets[key.interface] = bucket
            metrics.mdnsRateLimited[key.interface].increment()
            guard let stale else { return .rateLimited }
            if context.asker.isClient { counters.optimisticAnswers += 1 }
            return .optimistic(optimisticSnapshot(stale, key: key, now: now), start: nil)
        }
        var evicted: (key: BrowseKey, handle: (any MDNSQueryHandle)?)?
        if browses.count >= configuration.maxBrowses {
            guard let victim = BrowseLimit.victim(in: browses, now: now, pinned: pinned) else {
                bucket.refund()
                buckets[key.interface] = bucket
                return .full
            }
            evicted = (victim, evict(victim, now: now, configuration: configuration))
        }
        if delay > .zero { metrics.mdnsRateLimited[key.interface].increment() }
        buckets[key.interface] = bucket
        let start = Start(key: key, generation: takeGeneration(), delay: delay, evicted: evicted)
        var browse = Browse(generation: start.generation, startedAt: now + delay, lastUsed: now)
        if let stale {
            released[key] = nil
            browses[key] = browse
            if context.asker.isClient { counters.optimisticAnswers += 1 }
            return .optimistic(optimisticSnapshot(stale, key: key, now: now), start: start)
        }
        if context.asker.isClient { counters.cacheMisses += 1 }
        let deadline = now + negativeTimeout
        let id = addWaiter(to: &browse, query: query, plan: plan, context: context, deadline: deadline)
        browses[key] = browse
        return .wait(waiterID: id, deadline: deadline, start: start)
    }

    /// A DNS Push subscriber joins `key`'s browse: its records if it has results, or a new
    /// browse, paced by the link's rate limit for `budget` like a miss (§9.3) but never
    /// refused for it: a subscriber can wait.
    ///
    /// `seed`: what the link's responses said lately for `key` (`MDNSLinkCache`). A new browse
    /// starts with it, provisionally: the records are held as a RECONFIRM holds them
    /// (`verifying`, no copy counted), so the daemon's "all for now" keeps those it delivers
    /// too and removes the rest.
    mutating func subscribe(
        _ key: BrowseKey, now: Duration, configuration: ProxyConfiguration, budget: QueryBudget = .clients,
        seed: [MDNSRecord] = []
    ) -> (records: [CachedRecord], start: Start?) {
        if var browse = browses[key] {
            browse.lastUsed = now
            browses[key] = browse
            return (browse.hasResults ? browse.orderedRecords : [], nil)
        }
        guard !isClosed else { return ([], nil) }
        let delay: Duration
        var start = Start(key: key, generation: takeGeneration(), delay: .zero)
        switch budget {
        case .clients:
            var bucket = bucket(key.interface, now: now, configuration: configuration)
            delay = bucket.reserve(now: now)
            buckets[key.interface] = bucket
            start.delay = delay
        case .gateway:
            var pacer =
                pacers.removeValue(forKey: key.interface)
                ?? LookupPacer(settings: configuration.gatewayLookups, now: now)
            delay = pacer.estimate(now: now) - now
            pacer.enqueue(start)
            pacers[key.interface] = pacer
            start.queued = true
        }
        released[key] = nil
        var browse = Browse(generation: start.generation, startedAt: now + delay, lastUsed: now)
        for record in seed where browse.records[record] == nil {
            var state = RecordState(record, order: browse.nextOrder, seenAt: now)
            state.copies = 0
            browse.records[record] = state
            browse.nextOrder += 1
        }
        if !browse.records.isEmpty {
            browse.verifying = true
            browse.hasResults = true
        }
        browses[key] = browse
        return (browse.hasResults ? browse.orderedRecords : [], start)
    }

    /// The gateway's lookups on `interface` to start now, and when to look again (nil: none
    /// waits). `sent`: the query packets this host was heard sending there so far.
    mutating func releaseLookups(on interface: String, sent: Int?, now: Duration) -> (due: [Start], next: Duration?) {
        guard var pacer = pacers.removeValue(forKey: interface) else { return ([], nil) }
        defer {
            metrics.gatewayLookups(
                link: interface, waiting: pacer.queued, pace: pacer.pace, packetRate: pacer.packetRate)
            pacers[interface] = pacer
        }
        pacer.observe(sent: sent, now: now)
        var (due, next) = pacer.release(now: now)
        // A browse released while its lookup waited asks nothing; one that asks from now on
        // counts its age from now (`AnswerTimes`, `DiscoveryProxy.asksFrom`).
        due.removeAll { browses[$0.key]?.generation != $0.generation }
        for start in due { browses[start.key]?.startedAt = now }
        return (due, next)
    }

    /// Marks a browse used now (a subscriber left it: the idle timeout counts from here).
    mutating func touch(_ key: BrowseKey, now: Duration) {
        browses[key]?.lastUsed = now
    }

    // MARK: The mDNS query's side

    /// The query of browse `generation` is running: keeps its handle. False when that
    /// browse is gone (the handle is an orphan, to be cancelled).
    mutating func attach(_ handle: any MDNSQueryHandle, to key: BrowseKey, generation: UInt32) -> Bool {
        guard browses[key]?.generation == generation else { return false }
        browses[key]!.handle = handle
        return true
    }

    /// The query of browse `generation` could not start: the browse goes, and its waiters
    /// are returned to be answered SERVFAIL.
    mutating func abandon(_ key: BrowseKey, generation: UInt32) -> [Waiter] {
        guard let browse = browses[key], browse.generation == generation else { return [] }
        browses[key] = nil
        return browse.waiters
    }

    /// What the proxy does after an mDNS event: nothing, answer the waiters now, or `rearm` the browse's
    /// timer for the collection window just opened.
    enum Follow { case none, flushNow, armWindow }

    /// How an mDNS event changed a browse.
    struct Reception {
        var follow = Follow.none
        /// Records shown to subscribers as added or removed.
        var changes: [RecordChange] = []
        /// The browse lost every record at once, or started over (the daemon went away or came back).
        var cleared = false
        /// Anything an answer depends on changed: replays must stop (`ReplayTicket`).
        var invalidates = false
        /// Set on the browse's first result: how long mDNS took.
        var firstResultAfter: Duration?
    }

    enum RecordChange {
        case added(CachedRecord)
        case removed(CachedRecord)
    }

    /// Applies one mDNS event to browse `generation` (events of an older browse of the same
    /// question are dropped).
    mutating func receive(
        _ event: MDNSEvent, for key: BrowseKey, generation: UInt32, now: Duration, configuration: ProxyConfiguration
    ) -> Reception {
        // Taken out and put back, so that its record table is not shared (copied) while changed.
        guard browses[key]?.generation == generation, var browse = browses.removeValue(forKey: key) else {
            return Reception()
        }
        defer { browses[key] = browse }
        var reception = Reception()
        switch event {
        case .added(let record):
            if var held = browse.records[record] {
                // Seen on one more IP protocol, or again while verifying.
                held.copies = held.copies == .max ? .max : held.copies + 1
                browse.records[record] = held
                return reception
            }
            let state = RecordState(record, order: browse.nextOrder, seenAt: now)
            browse.records[record] = state
            browse.nextOrder += 1
            reception.invalidates = true
            reception.changes = [.added(CachedRecord(record, state))]
            if !browse.hasResults {
                reception.firstResultAfter = now - browse.startedAt
                for index in browse.waiters.indices { browse.waiters[index].firstResultAt = now }
            }
            // A browse, in DNS-SD's sense, is where several devices answer one question.
            if configuration.learnsAnswerTimes && key.type == .ptr {
                answerTimes[key.interface, default: AnswerTimes()].observe(
                    generation: generation, age: now - browse.startedAt, isFirst: !browse.hasResults)
            }
            browse.hasResults = true
            guard !browse.waiters.isEmpty, wakeups[key]?.flushAt == nil else { return reception }
            if configuration.collectionWindow == .zero {
                reception.follow = .flushNow
            } else {
                wakeups[key, default: Wakeup(generation: generation)].flushAt = answerAt(
                    key, startedAt: browse.startedAt, firstAt: now, configuration)
                reception.follow = .armWindow
            }
        case .removed(let record):
            guard var held = browse.records[record] else { return reception }
            if held.copies > 1 {
                held.copies -= 1
                browse.records[record] = held
            } else if let gone = browse.records.removeValue(forKey: record) {
                reception.changes = [.removed(CachedRecord(record, gone))]
                reception.invalidates = true
            }
        case .verifying:
            // Count again from zero; what is not delivered again by "all for now" is gone.
            browse.verifying = true
            browse.records.updateValues { $0.copies = 0 }
        case .allForNow:
            browse.drained = true
            if browse.verifying {
                browse.verifying = false
                let gone = browse.records.removeAll { $0.copies == 0 }
                reception.changes = gone.map { .removed(CachedRecord($0.0, $0.1)) }
                reception.invalidates = !gone.isEmpty
            }
            // The daemon's cache is drained; if it had answers, nothing is gained by waiting,
            // unless the link's devices usually answer later than that.
            if !browse.records.isEmpty && !browse.waiters.isEmpty && !expectsMore(key, browse, now: now) {
                reception.follow = .flushNow
            }
        case .failed, .restarted:
            // The daemon went away or came back: what we had may be stale. Start over, as
            // a new query would (waiters keep their own deadlines). A restart is shown to
            // subscribers as a clearing even when nothing was left: what they hold is rebuilt
            // from here, and until the daemon has been asked again an absence means nothing
            // (the gateway must not take a client link's name for free, `Gateway.clientSettle`).
            reception.cleared = !browse.records.isEmpty || event == .restarted
            browse.records.removeAll()
            browse.hasResults = false
            browse.verifying = false
            browse.drained = false
            browse.startedAt = now
            reception.invalidates = true
        }
        return reception
    }

    /// Takes every waiter of browse `generation`, to be answered from what it has now.
    mutating func takeWaiters(of key: BrowseKey, generation: UInt32, now: Duration) -> ([Waiter], Snapshot) {
        guard var browse = browses[key], browse.generation == generation else { return ([], Snapshot()) }
        wakeups[key]?.flushAt = nil
        let waiters = browse.waiters
        browse.waiters = []
        browses[key] = browse
        return (waiters, snapshot(for: key, now: now))
    }

    // MARK: The browse's timer

    /// What a browse's timer found due: every waiter when the collection window has ended
    /// (`flushed`), else those whose negative deadline has come (`expired`), with what the
    /// browse knows now.
    struct Woken {
        var flushed: [Waiter] = []
        var expired: [Waiter] = []
        var snapshot = Snapshot()
    }

    /// Sets `key`'s timer to when its browse must next wake (the earliest of the window's
    /// end and the waiters' deadlines): `schedule(at, generation)` makes a timer when that
    /// time changed. Returns the timer it replaces or drops (nobody waits, or the browse is
    /// gone), for the caller to cancel.
    mutating func rearm(
        _ key: BrowseKey, schedule: (_ at: Duration, _ generation: UInt32) -> any ProxyTimer
    ) -> (any ProxyTimer)? {
        guard let browse = browses[key], let deadline = browse.waiters.lazy.map(\.deadline).min() else {
            return wakeups.removeValue(forKey: key)?.armed?.timer
        }
        let old = wakeups[key]
        var wakeup =
            old.flatMap { $0.generation == browse.generation ? $0 : nil } ?? Wakeup(generation: browse.generation)
        let due = wakeup.flushAt.map { min($0, deadline) } ?? deadline
        if let armed = wakeup.armed, armed.at == due { return nil }
        wakeup.armed = (due, schedule(due, browse.generation))
        wakeups[key] = wakeup
        return old?.armed?.timer
    }

    /// `key`'s timer has fired for browse `generation`: takes the waiters that are due.
    mutating func wake(_ key: BrowseKey, generation: UInt32, now: Duration) -> Woken {
        guard var browse = browses[key], browse.generation == generation else { return Woken() }
        if let armed = wakeups[key]?.armed, armed.at <= now { wakeups[key]?.armed = nil }
        if let flushAt = wakeups[key]?.flushAt, flushAt <= now {
            let (waiters, snapshot) = takeWaiters(of: key, generation: generation, now: now)
            return Woken(flushed: waiters, snapshot: snapshot)
        }
        var woken = Woken(expired: browse.waiters.filter { $0.deadline <= now })
        guard !woken.expired.isEmpty else { return woken }
        browse.waiters.removeAll { $0.deadline <= now }
        browses[key] = browse
        woken.snapshot = snapshot(for: key, now: now)
        if woken.snapshot.answers.isEmpty { counters.negativeTimeouts += woken.expired.count }
        return woken
    }

    /// Forgets the timers of browses that are gone (after `release` or `close`; a single
    /// browse's goes with `rearm`) and returns them, for the caller to cancel.
    mutating func takeOrphanedWakeups() -> [any ProxyTimer] {
        let orphans = wakeups.filter { browses[$0.key]?.generation != $0.value.generation }
        guard !orphans.isEmpty else { return [] }
        for key in orphans.keys { wakeups[key] = nil }
        return orphans.values.compactMap { $0.armed?.timer }
    }

    // MARK: Release

    /// Releases browses nobody asked about for `browseIdleTimeout`, nobody waits on and
    /// nobody subscribes to (`pinned`). Returns them, to cancel their queries.
    mutating func sweep(
        now: Duration, configuration: ProxyConfiguration, pinned: borrowing some PinnedBrowses
    ) -> [(BrowseKey, (any MDNSQueryHandle)?)] {
        var idle: [BrowseKey: Browse] = [:]
        for (key, browse) in browses
        where browse.waiters.isEmpty && now - browse.lastUsed >= configuration.browseIdleTimeout {
            guard !pinned.isPinned(key) else { continue }
            idle[key] = browse
        }
        for key in idle.keys { browses[key] = nil }
        counters.browsesReleased += idle.count
        if configuration.optimisticAnswers {
            for (key, browse) in idle where browse.hasResults {
                released[key] = ReleasedBrowse(records: browse.orderedRecords, releasedAt: now)
            }
            released = released.filter { now - $0.value.releasedAt <= configuration.optimisticMaxStaleness }
            if released.count > Self.maxReleased {
                let keep = released.sorted { $0.value.releasedAt > $1.value.releasedAt }.prefix(Self.maxReleased)
                released = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
            }
        } else {
            released.removeAll()
        }
        return idle.map { ($0.key, $0.value.handle) }
    }

    /// Releases a live browse early to make room (`maxBrowses`); its results stay available
    /// for optimistic answers. Returns its query's handle.
    private mutating func evict(_ key: BrowseKey, now: Duration, configuration: ProxyConfiguration) -> (
        any MDNSQueryHandle
    )? {
        guard let browse = browses.removeValue(forKey: key) else { return nil }
        counters.browsesReleased += 1
        counters.browsesEvicted += 1
        if configuration.optimisticAnswers, browse.hasResults, released.count < Self.maxReleased {
            released[key] = ReleasedBrowse(records: browse.orderedRecords, releasedAt: now)
        }
        return browse.handle
    }

    /// A reload: releases the browses of links not in `kept` (their cached RDATA was shown
    /// in the old zone) and forgets the rate limits (rates may have changed), and what the
    /// links learned when `learns` is off or they are not kept (an interface may now face
    /// another link).
    mutating func release(keepingLinks kept: Set<String>, learns: Bool = true) -> [Browse] {
        answerTimes = learns ? answerTimes.filter { kept.contains($0.key) } : [:]
        released = released.filter { kept.contains($0.key.interface) }
        let gone = browses.filter { !kept.contains($0.key.interface) }
        for key in gone.keys { browses[key] = nil }
        buckets.removeAll()
        counters.browsesReleased += gone.count
        return Array(gone.values)
    }

    /// Shutdown: releases everything; no browse starts after this.
    mutating func close() -> [Browse] {
        isClosed = true
        pacers.removeAll()
        let all = Array(browses.values)
        browses.removeAll()
        released.removeAll()
        return all
    }

    // MARK: Helpers

    private mutating func addWaiter(
        to browse: inout Browse, query: Message, plan: MDNSPlan, context: QueryContext, deadline: Duration
    ) -> Int {
        let id = nextWaiterID
        nextWaiterID += 1
        browse.waiters.append(Waiter(id: id, query: query, plan: plan, deadline: deadline, context: context))
        return id
    }

    // MARK: Learned answer times

    /// How long a query on `interface` waits for mDNS before "nothing there".
    func negativeTimeout(on interface: String, _ configuration: ProxyConfiguration) -> Duration {
        guard configuration.learnsAnswerTimes, let times = answerTimes[interface] else {
            return configuration.negativeTimeout
        }
        return times.negativeTimeout(configured: configuration.negativeTimeout)
    }

    /// What `interface` has learned, for the status API and `/metrics`.
    func learnedAnswerTimes(on interface: String, _ configuration: ProxyConfiguration) -> LinkAnswerTimes {
        let times = configuration.learnsAnswerTimes ? answerTimes[interface] : nil
        return LinkAnswerTimes(
            negativeTimeoutSeconds: negativeTimeout(on: interface, configuration) / .seconds(1),
            spreadSeconds: (times?.usualSpread ?? .zero) / .seconds(1), browses: times?.samples.count ?? 0)
    }

    /// When the waiters of `key`'s browse are answered, its first record having come at `firstAt`.
    private func answerAt(
        _ key: BrowseKey, startedAt: Duration, firstAt: Duration, _ configuration: ProxyConfiguration
    ) -> Duration {
        guard configuration.learnsAnswerTimes, let times = answerTimes[key.interface] else {
            return firstAt + configuration.collectionWindow
        }
        return times.answerAt(
            startedAt: startedAt, firstAt: firstAt, window: configuration.collectionWindow,
            negativeTimeout: configuration.negativeTimeout)
    }

    /// `key`'s `browse` may still get records its link's devices usually send later
    /// (`AnswerTimes.expectsMore`); only PTR browses learn, so only they expect.
    func expectsMore(_ key: BrowseKey, _ browse: Browse, now: Duration) -> Bool {
        // Cheap test first: this is asked by every hit.
        guard key.type == .ptr, now - browse.startedAt < AnswerTimes.horizon, let times = answerTimes[key.interface]
        else { return false }
        return times.expectsMore(generation: browse.generation, startedAt: browse.startedAt, now: now)
    }

    /// An answer from `key`'s browse now may be incomplete, whatever the link has learned: it
    /// `expectsMore`, or it is young (`AnswerTimes.isYoung`). Such an answer gets the short TTL.
    func mayBeIncomplete(_ key: BrowseKey, _ browse: Browse, now: Duration) -> Bool {
        guard key.type == .ptr, now - browse.startedAt < AnswerTimes.horizon, let times = answerTimes[key.interface]
        else { return false }
        return times.isYoung(generation: browse.generation, startedAt: browse.startedAt, now: now)
            || times.expectsMore(generation: browse.generation, startedAt: browse.startedAt, now: now)
    }

    private mutating func takeGeneration() -> UInt32 {
        defer { nextGeneration &+= 1 }
        return nextGeneration
    }

    private func bucket(_ interface: String, now: Duration, configuration: ProxyConfiguration) -> TokenBucket {
        buckets[interface]
            ?? TokenBucket(rate: configuration.mdnsQueriesPerSecond, burst: configuration.mdnsQueryBurst, now: now)
    }
}

/// Browses the table must keep while they have users of their own (DNS Push and gateway
/// subscribers): neither the idle sweep nor the browse limit releases them.
protocol PinnedBrowses: ~Copyable {
    func isPinned(_ key: BrowseKey) -> Bool
}

/// No browse is pinned (tests of the table alone).
struct NoPinnedBrowses: PinnedBrowses {
    func isPinned(_ key: BrowseKey) -> Bool { false }
}

/// Whose budget a new browse's mDNS query draws from, on its link.
enum QueryBudget: Sendable, Hashable {
    /// What clients ask, in unicast queries and DNS Push subscriptions: `mdns-query-rate`,
    /// the limit RFC 8766 §9.3 requires, so that clients cannot flood a link with queries.
    case clients
    /// The mDNS gateway following its far links (`Gateway`): the devices' announcements
    /// drive it, not clients, so it neither waits behind clients' queries (a thousand far
    /// devices took minutes at 20 lookups a second) nor uses their budget up. Its lookups
    /// wait in the link's `LookupPacer`, paced by the query packets they cost.
    case gateway
}

/// What happened to browses, for `ProxyStats`.
struct BrowseCounters: Sendable {
    var cacheHits = 0
    var cacheMisses = 0
    var optimisticAnswers = 0
    var negativeTimeouts = 0
    var browsesReleased = 0
    var browsesEvicted = 0
}
