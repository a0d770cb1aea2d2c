import DNSWire
import EventCounting
import Logging
import MDNS
import Metrics
import Synchronization

// What the proxy does with mDNS: starting browses, receiving records (skipping its own), and
// delivering changes to Push subscribers.

/// The mDNS side of the proxy: starting browses' queries, their events, and answering the
/// queries that wait on them (when results arrive, or at the negative timeout).
extension DiscoveryProxy {
    /// Starts a browse's query now, after its rate-limit delay, or when its link's
    /// `LookupPacer` lets it out.
    func begin(_ start: BrowseTable.Start) {
        if start.queued {
            releaseLookups(on: start.key.interface, armOnly: true)
        } else if start.delay == .zero {
            startBrowse(start.key, generation: start.generation)
        } else {
            scheduler.schedule(after: start.delay) { [weak self] in
                self?.startBrowse(start.key, generation: start.generation)
            }
        }
    }

    /// Starts the gateway's lookups on `interface` that its pacer lets out now, and looks
    /// again while some wait: one timer per link. `armOnly`: a lookup was queued; starts
    /// the timer if none runs.
    private func releaseLookups(on interface: String, armOnly: Bool = false) {
        if armOnly {
            guard state.withLock({ $0.lookupReleases.insert(interface).inserted }) else { return }
        }
        let sent = linkCache?.queriesSent(on: interface)
        let now = scheduler.now()
        let (due, next) = state.withLock { state in
            let released = state.table.releaseLookups(on: interface, sent: sent, now: now)
            if released.next == nil { state.lookupReleases.remove(interface) }
            return released
        }
        for start in due { startBrowse(start.key, generation: start.generation) }
        if let next {
            scheduler.schedule(after: next) { [weak self] in self?.releaseLookups(on: interface) }
        }
    }

    private func startBrowse(_ key: BrowseKey, generation: UInt32) {
        let handle: any MDNSQueryHandle
        do {
            handle = try backend.startQuery(key, tag: generation, receiver: self)
        } catch {
            logger.warning(
                "cannot start mDNS query", metadata: ["mdns.question": "\(key)", "mdns.error": "\(error)"])
            let waiters = state.withLock { state -> [Waiter] in
                let waiters = state.table.abandon(key, generation: generation)
                rearm(key, in: &state.table, now: scheduler.now())  // drops its timer
                return waiters
            }
            invalidateReplays()
            let answers = AnswerBuilder(configuration: configuration)
            for waiter in waiters {
                output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .miss)
            }
            return
        }
        metrics.mdnsQueriesStarted[key.interface].increment()
        let attached = state.withLock { $0.table.attach(handle, to: key, generation: generation) }
        if !attached { handle.cancel() }
        logger.debug("mDNS query started", metadata: ["mdns.question": "\(key)"])
    }

    /// The backend's events for a browse; `tag` is its generation. Called on the backend's
    /// thread; must not call the backend.
    public func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
        if case .added(let record) = event, isOwn(record, on: question.interface) { return }
        if case .removed(let record) = event, isOwn(record, on: question.interface) { return }
        let key = question
        let generation = tag
        let now = scheduler.now()
        let configuration = self.configuration
        var pending = false
        let (reception, pushes) = state.withLock { state -> (BrowseTable.Reception, [PushDelivery]) in
            let reception = state.table.receive(
                event, for: key, generation: generation, now: now, configuration: configuration)
            if reception.invalidates { invalidateReplays() }
            var pushes: [PushDelivery] = []
            if reception.cleared {
                pushes = state.subscriptions.changes(clearing: key)
                state.subscriptions.forgetWithheld(key)
            }
            if reception.follow == .armWindow { rearm(key, in: &state.table, now: now) }
            guard !reception.changes.isEmpty, state.subscriptions.count > 0 else { return (reception, pushes) }
            pushes += state.subscriptions.changes(
                after: reception.changes, of: key, in: state.table, now: now, enabled: configuration.suppressLinkLocal,
                pending: &pending)
            return (reception, pushes)
        }
        if let after = reception.firstResultAfter { metrics.firstResult.record(duration: after) }
        deliver(pushes)
        if pending { scheduleTargetRecheck(key.interface) }
        if case .failed(let why) = event {
            logger.debug("mDNS query failed", metadata: ["mdns.question": "\(key)", "mdns.error": "\(why)"])
        }
        switch reception.follow {
        case .none, .armWindow: break  // the window is the browse's timer's (`rearm` above)
        case .flushNow: flush(key, generation: generation)
        }
    }

    /// Answers every waiter of a browse from what it has now.
    private func flush(_ key: BrowseKey, generation: UInt32) {
        let now = scheduler.now()
        let (waiters, snapshot) = state.withLock { state in
            let taken = state.table.takeWaiters(of: key, generation: generation, now: now)
            rearm(key, in: &state.table, now: now)
            return taken
        }
        answer(waiters, of: key, from: snapshot, now: now)
    }

    /// Answers waiters the collection window collected, from what their browse has now.
    private func answer(_ waiters: [Waiter], of key: BrowseKey, from snapshot: Snapshot, now: Duration) {
        let answers = AnswerBuilder(configuration: configuration)
        for waiter in waiters {
            // Per-query timing, like a connection establishment report: how long mDNS took
            // to bring the first result for this query, and when the answer went out.
            if let firstResultAt = waiter.firstResultAt {
                logger.debug(
                    "answered from mDNS",
                    metadata: [
                        "mdns.question": "\(key)", "dns.id": "\(waiter.query.id)",
                        "mdns.first_result_ms":
                            "\(max(.zero, firstResultAt - waiter.context.started).wholeMilliseconds)",
                        "dns.answer_ms": "\((now - waiter.context.started).wholeMilliseconds)",
                    ])
            }
            output.finish(
                answers.answer(waiter.query, plan: waiter.plan, snapshot: snapshot, for: waiter.context),
                waiter.context,
                cache: .miss)
        }
    }

    /// A browse's timer: the collection window has ended (every waiter is answered from what
    /// the browse has), or negative deadlines have come (those waiters get whatever is known,
    /// usually nothing). Then the timer is set for what is left.
    ///
    /// `firedAt`: the time it was set for, so that a timer run a moment early (by another
    /// clock's reckoning) still finds its waiters due.
    func wake(_ key: BrowseKey, generation: UInt32, firedAt: Duration) {
        let now = max(scheduler.now(), firedAt)
        let woken = state.withLock { state in
            let woken = state.table.wake(key, generation: generation, now: now)
            rearm(key, in: &state.table, now: now)
            return woken
        }
        answer(woken.flushed, of: key, from: woken.snapshot, now: now)
        expire(woken.expired, of: key, from: woken.snapshot)
    }

    /// The negative timeout of waiters: answer with whatever is known (usually nothing).
    private func expire(_ waiters: [Waiter], of key: BrowseKey, from snapshot: Snapshot) {
        guard !waiters.isEmpty else { return }
        let answers = AnswerBuilder(configuration: configuration)
        for waiter in waiters {
            if snapshot.answers.isEmpty && backend.state != .running {
                // The daemon is away: "nothing found" would be a lie that clients cache. SERVFAIL
                // tells them to try again.
                logger.debug("mDNS backend \(backend.state.rawValue): SERVFAIL", metadata: ["mdns.question": "\(key)"])
                output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .miss)
                continue
            }
            logger.debug("mDNS query timed out", metadata: ["mdns.question": "\(key)"])
            output.finish(
                answers.answer(waiter.query, plan: waiter.plan, snapshot: snapshot, for: waiter.context),
                waiter.context,
                cache: .miss)
        }
    }

    /// Sets `key`'s browse timer to its next due time (`BrowseTable.rearm`); called under the
    /// proxy's lock, which scheduling a timer does not take.
    func rearm(_ key: BrowseKey, in table: inout BrowseTable, now: Duration) {
        let replaced = table.rearm(key) { at, generation in
            scheduler.schedule(after: at - now) { [weak self] in self?.wake(key, generation: generation, firedAt: at) }
        }
        replaced?.cancel()
    }

    /// Cancels the timers of the browses a reload released or a shutdown closed.
    func cancelOrphanedWakeups() {
        for timer in state.withLock({ $0.table.takeOrphanedWakeups() }) { timer.cancel() }
    }
}

// MARK: - The proxy's own records

/// The records the proxy publishes over mDNS itself (the gateway's announcements): avahi's
/// browsers on that interface see them like any other responder's, and they must neither
/// appear in the link's unicast answers nor be followed as the link's own services. Kept for
/// one publication after they are withdrawn, so that their goodbyes are ignored too.
struct OwnRecords: Sendable {
    /// How many published groups hold each record, per interface.
    private var current: [String: [MDNSRecord: Int]] = [:]
    /// The records the last change withdrew.
    private var previous: [String: Set<MDNSRecord>] = [:]

    /// Records now published by one more group (`added`) and by one fewer (`removed`).
    mutating func change(adding added: [(String, MDNSRecord)], removing removed: [(String, MDNSRecord)]) {
        for (interface, record) in added { current[interface, default: [:]][record, default: 0] += 1 }
        previous = [:]
        for (interface, record) in removed {
            guard let count = current[interface]?[record] else { continue }
            if count > 1 {
                current[interface]?[record] = count - 1
            } else {
                current[interface]?[record] = nil
                previous[interface, default: []].insert(record)
            }
        }
    }

    /// A group whose name another responder owns: its records, the shared PTR among them, are
    /// that responder's too (identical data), and must not be hidden.
    mutating func forget(_ records: [MDNSRecord], on interface: String) {
        for record in records {
            current[interface]?[record] = nil
            previous[interface]?.remove(record)
        }
    }

    func contains(_ record: MDNSRecord, on interface: String) -> Bool {
        current[interface]?[record] != nil || previous[interface]?.contains(record) == true
    }
}

extension DiscoveryProxy {
    /// Records the proxy is about to publish: set before they are handed to the publisher.
    /// Shared PTRs that other responders publish alike (`_services._dns-sd._udp`) are left out:
    /// hiding them would hide a local service type.
    func ownPublications(changed: [MDNSGroup], removed: [MDNSGroup.Key], before: [MDNSGroup.Key: [MDNSRecord]]) {
        var added: [(String, MDNSRecord)] = []
        var gone: [(String, MDNSRecord)] = []
        for group in changed {
            for record in group.records where record.name != Gateway.servicesName {
                added.append((group.key.interface, record))
            }
        }
        for key in changed.map(\.key) + removed {
            for record in before[key] ?? [] where record.name != Gateway.servicesName {
                gone.append((key.interface, record))
            }
        }
        ownRecords.withLock { $0.change(adding: added, removing: gone) }
        publishesRecords.store(true, ordering: .releasing)
    }

    /// `group` collided (`Gateway.collided`): its records are the other responder's as well.
    func forgetOwnPublication(_ group: MDNSGroup) {
        ownRecords.withLock { $0.forget(group.records, on: group.key.interface) }
    }

    func isOwn(_ record: MDNSRecord, on interface: String) -> Bool {
        guard publishesRecords.load(ordering: .acquiring) else { return false }
        return ownRecords.withLock { $0.contains(record, on: interface) }
    }
}

// MARK: - Push subscriptions

/// DNS Push (RFC 8765) on top of the shared browses: a subscription is one more user of the
/// browse that unicast queries use (same `BrowseKey`, one avahi query per name however many
/// clients), gets the same translated records, and keeps the browse alive until the last
/// subscriber leaves; the idle sweep then releases it after `browseIdleTimeout`.
extension DiscoveryProxy {
    enum SubscribeOutcome: Sendable {
        /// Outside every zone (§6.2: NOTAUTH).
        case notAuthoritative
        /// A class we do not serve.
        case refused
        /// Subscribed; `initial` is what is known now (the first PUSH), `keys` the browses to
        /// leave on UNSUBSCRIBE (none for names answered from configuration, which never change).
        case subscribed(initial: [PushChange], keys: [BrowseKey])
    }

    func subscribe(
        _ request: PushSubscribe, session: Int, id: UInt16, from client: DNSClient, sink: any PushSink,
        appliesUsableRule: Bool = true, budget: QueryBudget = .clients
    ) -> SubscribeOutcome {
        let catalog = self.catalog
        // The client ACL first: a refused client does not even learn which zones exist.
        guard catalog.admits(client) else {
            noteRefused(.client, client: client, asking: "SUBSCRIBE")
            return .refused
        }
        guard catalog.zone(containing: request.name) != nil else { return .notAuthoritative }
        if let hidden = catalog.hiddenLink(holding: request.name, from: client) {
            noteRefused(.link(hidden.interface), client: client, asking: "SUBSCRIBE")
            return .refused
        }
        let question = Question(name: request.name, type: request.type, qclass: request.rrClass)
        switch catalog.plan(question) {
        case .refused:
            return .refused
        case .immediate(_, let answers):
            let initial = catalog.visible(answers, to: client).compactMap { record -> PushChange? in
                guard let wire = try? record.rdata.wireBytes() else { return nil }
                return .add(request.name, record.type, ttl: record.ttl, rdata: wire)
            }
            return .subscribed(initial: initial, keys: [])
        case .mdns(let plan) where plan.type == .nsec || plan.type == .nsec3:
            // Push has no negative answers (RFC 8766 §7), and mDNS NSECs are never passed on
            // (§5.5.3): nothing to follow.
            return .subscribed(initial: [], keys: [])
        case .mdns(let plan):
            // avahi refuses ANY as a record browser type ("key is pattern"), so TYPE ANY
            // (RFC 8765 §6.2) rides on the browses of the DNS-SD types at that name.
            let types = plan.type == .any ? Self.anyTypes : [plan.type]
            let subscriber = Subscriber(
                session: session, id: id, owner: request.name, type: request.type,
                presentation: ZonePresentation(
                    link: plan.link, suppressLinkLocal: configuration.suppressLinkLocal,
                    hidesPrivateAddresses: configuration.privateRealms.hidesPrivateAddresses(
                        of: plan.link, from: client)),
                sink: sink, appliesUsableRule: appliesUsableRule)
            var initial: [PushChange] = []
            var keys: [BrowseKey] = []
            for type in types {
                let key = BrowseKey(interface: plan.link.interface, name: plan.localName, type: type)
                initial += join(key, subscriber, budget: budget)
                keys.append(key)
            }
            return .subscribed(initial: initial, keys: keys)
        }
    }

    /// The record types a TYPE ANY subscription follows.
    static let anyTypes: [RRType] = [.ptr, .srv, .txt, .a, .aaaa]

    /// Adds a subscriber to a browse (starting it if needed); returns what it knows now and
    /// may use (§5.5.2, `SubscriptionTable+UsableTargets`).
    private func join(_ key: BrowseKey, _ subscriber: Subscriber, budget: QueryBudget) -> [PushChange] {
        let now = scheduler.now()
        let configuration = self.configuration
        var pending = false
        // The gateway's lookups start from what the far link said lately (`LinkSnooper`).
        let seed = budget == .gateway ? linkCache?.records(for: key) ?? [] : []
        let (initial, start) = state.withLock { state in
            let (records, start) = state.table.subscribe(
                key, now: now, configuration: configuration, budget: budget, seed: seed)
            var subscriber = subscriber
            let initial = SubscriptionTable.initial(
                for: &subscriber, records: records, key: key, in: state.table, now: now,
                enabled: configuration.suppressLinkLocal, pending: &pending)
            state.subscriptions.add(subscriber, to: key)
            return (initial, start)
        }
        if let start { begin(start) }
        if pending { scheduleTargetRecheck(key.interface) }
        return initial
    }

    /// Re-evaluates the link's subscriptions once the pending address browses have had their
    /// full mDNS window (§5.5.2: a target is unusable only once its addresses are all known).
    func scheduleTargetRecheck(_ interface: String) {
        guard state.withLock({ $0.targetRechecks.insert(interface).inserted }) else { return }
        scheduler.schedule(after: Self.mdnsWindow) { [weak self] in self?.recheckTargets(interface) }
    }

    private func recheckTargets(_ interface: String) {
        let now = scheduler.now()
        var pending = false
        let pushes = state.withLock { state in
            state.targetRechecks.remove(interface)
            return state.subscriptions.recheck(interface, in: state.table, now: now, pending: &pending)
        }
        deliver(pushes)
        if pending { scheduleTargetRecheck(interface) }
    }

    /// When the last of `keys`' browses asks mDNS, or asked it: a browse waiting for its
    /// link's budget asks later than it was made (`BrowseTable.Start.delay`).
    func asksFrom(_ keys: [BrowseKey]) -> Duration? {
        state.withLock { state in keys.compactMap { state.table.browses[$0]?.startedAt }.max() }
    }

    /// For each set of browses, whether all of them ask the link now: their daemon has
    /// delivered its cache or results (a query still queued in the backend has not asked
    /// yet, and seeded records are not the daemon's).
    func areAsking(_ sets: [[BrowseKey]]) -> [Bool] {
        state.withLock { state in
            sets.map { keys in
                keys.allSatisfy { key in
                    state.table.browses[key].map { $0.drained || ($0.hasResults && !$0.verifying) } ?? false
                }
            }
        }
    }

    /// Leaves the browse; once nobody subscribes it is released by the idle sweep.
    func unsubscribe(from key: BrowseKey, session: Int, id: UInt16) {
        let now = scheduler.now()
        state.withLock { state in
            state.subscriptions.remove(session: session, id: id, from: key)
            state.table.touch(key, now: now)
        }
    }

    /// RECONFIRM (§6.5): a record the browse still holds is handed to mDNS to verify (its
    /// removal, if mDNS finds it gone, reaches every subscriber as usual). A record the proxy
    /// does not hold is already gone: every subscriber of that browse gets its removal now.
    /// From a client the ACL refuses, or about a link it may not see, it is ignored (there is
    /// no response to refuse with) and counted as a refusal: no mDNS traffic, no removal.
    func reconfirm(_ request: PushReconfirm, from client: DNSClient) {
        let catalog = self.catalog
        guard catalog.admits(client) else { return noteRefused(.client, client: client, asking: "RECONFIRM") }
        if let hidden = catalog.hiddenLink(holding: request.name, from: client) {
            return noteRefused(.link(hidden.interface), client: client, asking: "RECONFIRM")
        }
        guard
            case .mdns(let plan) = catalog.plan(
                Question(name: request.name, type: request.type, qclass: request.rrClass)),
            let rdata = try? RData(type: request.type, wire: request.rdata)
        else { return }
        let key = BrowseKey(interface: plan.link.interface, name: plan.localName, type: plan.type)
        let now = scheduler.now()
        let configuration = self.configuration
        enum Step {
            case none
            case verify(MDNSRecord)
            case removed([PushDelivery])
        }
        let step = state.withLock { state -> Step in
            guard let browse = state.table.browses[key],
                browse.isEstablished(
                    now: now, negativeTimeout: state.table.negativeTimeout(on: key.interface, configuration))
            else { return .none }
            let presentation = ZonePresentation(link: plan.link, suppressLinkLocal: configuration.suppressLinkLocal)
            if let held = browse.records.first(where: {
                $0.record.type == request.type && presentation.rewritten(CachedRecord($0.record, $0.value)) == rdata
            }) {
                return .verify(held.record)
            }
            return .removed(
                state.subscriptions.subscribers(of: key).map {
                    PushDelivery(
                        sink: $0.sink, subscription: $0.id,
                        changes: [.remove($0.owner, request.type, rdata: request.rdata)])
                })
        }
        switch step {
        case .none: break
        case .verify(let record):
            logger.debug("RECONFIRM: asking mDNS", metadata: ["mdns.question": "\(key)"])
            backend.reconfirm(key, record: record)
        case .removed(let deliveries):
            logger.debug("RECONFIRM: record not held, removal pushed", metadata: ["mdns.question": "\(key)"])
            deliver(deliveries)
        }
    }

    func deliver(_ deliveries: [PushDelivery]) {
        for delivery in deliveries { delivery.sink.deliver(delivery.changes, subscription: delivery.subscription) }
    }

    /// Live subscriptions, over all sessions.
    var subscriptionCount: Int { state.withLock { $0.subscriptions.count } }
}
