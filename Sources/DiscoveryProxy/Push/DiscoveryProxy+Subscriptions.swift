import DNSWire
import Logging
import MDNS
import Synchronization

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
