import DNSWire
import EventCounting
import Logging
import MDNS
import Metrics
import Synchronization

/// One route of the gateway as the admin endpoint shows it.
public struct AnnouncementStatus: Sendable, Codable, Equatable {
    /// The client link's interface.
    public var interface: String
    /// The far link's zone.
    public var from: String
    /// The instances announced, as named on the client link (`My Printer._ipp._tcp`, not escaped).
    public var instances: [String]
    /// Far instances of the allowed types that are not announced, and why (seen for `Gateway.heldAfter`).
    public var heldBack: [HeldBack]

    public struct HeldBack: Sendable, Codable, Equatable {
        /// As named on the far link (`My Printer._ipp._tcp`).
        public var instance: String
        public var reason: String

        public init(instance: String, reason: String) {
            self.instance = instance
            self.reason = reason
        }
    }

    public init(interface: String, from: String, instances: [String], heldBack: [HeldBack] = []) {
        self.interface = interface
        self.from = from
        self.instances = instances
        self.heldBack = heldBack
    }
}

/// The mDNS gateway: announces far links' services on client links over mDNS, for clients
/// that browse `.local` only (`links[].announce`; docs/ARCHITECTURE.md, "Gateway for
/// mDNS-only clients").
///
/// Each route (client link × far link) follows its far link through the proxy's own DNS Push
/// subscriptions, made as a client of the client link: the same shared browses as unicast
/// queries and Push (one avahi browse however many client links), and the same ACL, view,
/// service filter, link-local and private-realm rules. What the routes know becomes
/// `MDNSGroup`s, one per announced instance and one per host, handed to the publisher.
///
/// Pushed changes and collisions arrive on any thread; they are queued and handled together
/// `settle` later on the scheduler, one pass at a time, which also paces announcements.
public final class Gateway: Sendable {
    /// How long changes gather before the next pass (announcement pacing). Short: a far
    /// instance takes about three passes (its type's PTR, then SRV and TXT, then addresses).
    public static let settle: Duration = .milliseconds(5)
    /// How long the client link's own instances of a type are followed before any far instance
    /// of that type is announced there: long enough for avahi's cache and the link's answers,
    /// so that a name in use is seen (and avoided) before the announcement, which then needs
    /// no probe (RFC 6762 §8.1's 750 ms).
    public static let clientSettle: Duration = .seconds(1)
    /// How long a far instance may stay incomplete (no SRV, no routable address) before it is
    /// reported held back: longer than its records take to arrive one after the other.
    public static let heldAfter: Duration = .seconds(3)
    /// How often a pass looks again whether a held instance's lookups ask the link yet.
    static let askingRecheck: Duration = .milliseconds(500)

    private let proxy: DiscoveryProxy
    private let publisher: any MDNSPublisher
    private let scheduler: any ProxyScheduler
    private let logger: Logger
    /// Told the far links' interfaces at each rebuild: what a `LinkSnooper` listens to.
    private let listen: @Sendable (Set<String>) -> Void
    private let inbox = Mutex(Inbox())
    private let model = Mutex(Model())

    private struct Inbox {
        var changes: [(sink: RouteSink, subscription: UInt16, changes: [PushChange])] = []
        var collisions: [MDNSGroup.Key] = []
        var reconfigure = true
        /// When the next pass is scheduled; an earlier need schedules another (a pass waiting
        /// for `clientSettle` must not hold back a change that arrives meanwhile).
        var armedFor: Duration?
        var pacing = PassPacing()
        var shutDown = false
    }

    private struct Model {
        var routes: [RouteState] = []
        var nextSession = 0
        /// Collisions seen per service group (the far instance's identity): its rename level.
        var renames: [MDNSGroup.Key: Int] = [:]
        /// What the publisher was given, by group.
        var published: [MDNSGroup.Key: [MDNSRecord]] = [:]
        var status: [AnnouncementStatus] = []
        var problems: [String] = []
    }

    public init(
        proxy: DiscoveryProxy, publisher: any MDNSPublisher, scheduler: any ProxyScheduler, logger: Logger,
        listen: @escaping @Sendable (Set<String>) -> Void = { _ in }
    ) {
        self.proxy = proxy
        self.listen = listen
        self.publisher = publisher
        self.scheduler = scheduler
        self.logger = logger
        proxy.onReconfigure { [weak self] _ in self?.reconfigure() }
    }

    /// Reads the routes from the proxy's configuration (at start and after each reload).
    public func start() { arm { $0.reconfigure = true } }

    func reconfigure() { arm { $0.reconfigure = true } }

    /// The publisher found `key`'s name taken on its link: the far instance is renamed.
    public func collided(_ key: MDNSGroup.Key) { arm { $0.collisions.append(key) } }

    /// The publisher could not publish or announce on `interface` (it retries by itself).
    public func publishFailed(on interface: String) {
        proxy.metrics.gatewayPublishErrors[interface].increment()
    }

    /// Leaves every browse; the publisher's shutdown withdraws the records (goodbyes).
    public func shutdown() {
        inbox.withLock { $0.shutDown = true }
        let routes = model.withLock { model -> [RouteState] in
            defer { model.routes = [] }
            return model.routes
        }
        for route in routes { leave(route) }
    }

    /// What is announced where, for the status page and `/api/services`.
    public var status: [AnnouncementStatus] { model.withLock { $0.status } }

    /// Why configured announcements do not run (for logs and `--check-config`).
    public var problems: [String] { model.withLock { $0.problems } }

    func deliver(_ changes: [PushChange], subscription: UInt16, from sink: RouteSink) {
        arm { $0.changes.append((sink, subscription, changes)) }
    }

    private func arm(after delay: Duration = Gateway.settle, _ update: (inout Inbox) -> Void) {
        let now = scheduler.now()
        let schedule = inbox.withLock { inbox -> Duration? in
            guard !inbox.shutDown else { return nil }
            update(&inbox)
            let deadline = inbox.pacing.earliest(now + delay)
            if let armed = inbox.armedFor, armed <= deadline { return nil }
            inbox.armedFor = deadline
            return deadline - now
        }
        if let schedule { scheduler.schedule(after: schedule) { [weak self] in self?.pass() } }
    }

    // MARK: The pass

    private func pass() {
        let began = ContinuousClock.now
        defer {
            let cost = ContinuousClock.now - began
            let end = scheduler.now()
            inbox.withLock { $0.pacing.passed(endedAt: end, cost: cost) }
        }
        let batch = inbox.withLock { inbox -> Inbox? in
            guard !inbox.shutDown else { return nil }
            defer {
                inbox.changes = []
                inbox.collisions = []
                inbox.reconfigure = false
                inbox.armedFor = nil
            }
            return inbox
        }
        guard let batch else { return }
        if batch.reconfigure {
            // Outside `model`: the publisher takes its poll lock. A reconfigure also follows a
            // link that went down and came back (the interface watcher): announce again.
            publisher.pace(proxy.configuration.mdnsAnnouncePacing)
            publisher.reannounce()
        }
        let now = scheduler.now()
        let mdnsRunning = proxy.mdnsState == .running
        var recheck: Duration?
        defer { if let recheck { arm(after: recheck) { _ in } } }
        let groups = model.withLock { model -> [MDNSGroup]? in
            // Routes a reload ended: what they announced is withdrawn below (unless a route
            // left has the same group), and their client links count it.
            let ended = batch.reconfigure ? rebuild(&model) : []
            // The routes this pass computes again: those the changes, collisions and clocks
            // touch; the others keep what they made (`RouteState.output`).
            var touched = Set(model.routes.indices.filter { model.routes[$0].output == nil || batch.reconfigure })
            for (sink, subscription, changes) in batch.changes {
                guard let index = model.routes.firstIndex(where: { $0.sink === sink }),
                    let key = model.routes[index].keysByID[subscription]
                else { continue }
                touched.insert(index)
                for change in changes {
                    model.routes[index].records.apply(change, to: key)
                    // The browse started over (the daemon went away or came back): until it has
                    // been followed `clientSettle` again, what it lacks is unknown, not absent.
                    if change.ttl == PushChange.removeSetTTL {
                        model.routes[index].subscriptions[key]?.since = now
                        model.routes[index].asking[key] = nil
                        model.routes[index].notAsking.insert(key)
                    }
                }
            }
            let byInterface = Dictionary(grouping: model.routes.indices) { model.routes[$0].route.client.interface }
            for key in batch.collisions {
                if let records = model.published[key] {
                    proxy.forgetOwnPublication(MDNSGroup(key: key, records: records))
                }
                model.renames[key, default: 0] += 1
                proxy.metrics.gatewayRenames[key.interface].increment()
                logger.info(
                    "mDNS gateway: name taken on the link, renaming the far instance",
                    metadata: [
                        "mdns.interface": "\(key.interface)", "mdns.group": "\(key.name)",
                        "gateway.renames": "\(model.renames[key] ?? 0)",
                    ])
                touched.formUnion(byInterface[key.interface] ?? [])
            }
            if !mdnsRunning {
                // avahi is away, on some connection at least: every view is unknown, not empty,
                // until it has been followed `clientSettle` after the daemon is back.
                for index in model.routes.indices {
                    for key in model.routes[index].subscriptions.keys {
                        model.routes[index].subscriptions[key]?.since = now
                    }
                }
                touched.formUnion(model.routes.indices)
            }
            for index in model.routes.indices where model.routes[index].recheckAt.map({ $0 <= now }) == true {
                touched.insert(index)
            }
            var changedKeys: Set<MDNSGroup.Key> = []
            var interfaces: Set<String> = []
            for state in ended {
                guard let old = state.output else { continue }
                changedKeys.formUnion(old.groups.keys)
                count(
                    state.route.client.interface, from: old.status,
                    to: AnnouncementStatus(
                        interface: old.status.interface, from: old.status.from, instances: []))
                interfaces.insert(state.route.client.interface)
            }
            for index in touched.sorted() {
                follow(&model.routes[index], now: now)
                model.routes[index].records.prune()
                noteAsking(&model.routes[index], now: now)
                let old = model.routes[index].output
                let output = Self.output(&model.routes[index], renames: model.renames, now: now)
                model.routes[index].heldSince = output.held.reduce(into: [:]) { since, instance in
                    since[instance] = model.routes[index].heldSince[instance] ?? now
                }
                model.routes[index].recheckAt = output.waiting.map { now + $0 }
                model.routes[index].output = output
                for (key, records) in output.groups where old?.groups[key] != records { changedKeys.insert(key) }
                for key in old?.groups.keys ?? [:].keys where output.groups[key] == nil { changedKeys.insert(key) }
                report(held: output.status, before: old?.status)
                if old?.status.instances != output.status.instances {
                    count(model.routes[index].route.client.interface, from: old?.status, to: output.status)
                    interfaces.insert(model.routes[index].route.client.interface)
                }
            }
            recheck = model.routes.compactMap(\.recheckAt).min().map { max(.zero, $0 - now) }
            model.status = model.routes.compactMap(\.output?.status)
            for interface in interfaces {
                proxy.metrics.gatewayAnnounced(
                    (byInterface[interface] ?? []).reduce(0) {
                        $0 + (model.routes[$1].output?.status.instances.count ?? 0)
                    },
                    on: interface)
            }
            // What changed: a group whose records are the same array as before costs no
            // comparison of its records (Swift compares the buffers first).
            var changed: [MDNSGroup] = []
            var removed: [MDNSGroup.Key] = []
            var before: [MDNSGroup.Key: [MDNSRecord]] = [:]
            for key in changedKeys {
                let merged = Self.merged(key, model.routes, at: byInterface[key.interface] ?? [])
                guard merged != model.published[key] else { continue }
                before[key] = model.published[key]
                model.published[key] = merged
                if let merged {
                    changed.append(MDNSGroup(key: key, records: merged, probe: false))
                } else {
                    removed.append(key)
                }
            }
            guard !changed.isEmpty || !removed.isEmpty else { return nil }
            proxy.ownPublications(changed: changed, removed: removed, before: before)
            // Under `model`, so that passes hand their changes on in order (the responder's
            // callbacks never take `model`).
            guard let updating = publisher as? any MDNSGroupUpdates else { return Self.sorted(model.published) }
            updating.update(changed: changed, removed: removed)
            return nil
        }
        // A publisher that takes the whole set only.
        guard let groups else { return }
        publisher.publish(groups)
    }

    /// `key`'s records over the routes at `indices` (those of its client link): one route's,
    /// or, where two routes of one client link name the same host, all their addresses. Nil
    /// when none has it.
    private static func merged(_ key: MDNSGroup.Key, _ routes: [RouteState], at indices: [Int]) -> [MDNSRecord]? {
        var merged: [MDNSRecord]?
        for index in indices {
            guard let records = routes[index].output?.groups[key] else { continue }
            guard var sum = merged else {
                merged = records
                continue
            }
            for record in records where !sum.contains(record) { sum.append(record) }
            merged = sum
        }
        return merged
    }

    static func sorted(_ groups: [MDNSGroup.Key: [MDNSRecord]]) -> [MDNSGroup] {
        groups.sorted { $0.key < $1.key }.map { MDNSGroup(key: $0.key, records: $0.value, probe: false) }
    }

    /// Takes the routes from the configuration again; returns those that ended.
    private func rebuild(_ model: inout Model) -> [RouteState] {
        let (routes, problems) = AnnouncementRoute.routes(proxy.configuration)
        for problem in problems where !model.problems.contains(problem) {
            logger.warning("mDNS gateway: \(problem)")
        }
        model.problems = problems
        var kept: [RouteState] = []
        var ended: [RouteState] = []
        for var state in model.routes {
            guard routes.contains(state.route) else {
                leave(state)
                ended.append(state)
                continue
            }
            // Followed again from scratch: a subscription refused before may succeed now.
            state.records.restart()
            kept.append(state)
        }
        for route in routes where !kept.contains(where: { $0.route == route }) {
            model.nextSession += 1
            // Negative session numbers: never one of PushService's.
            kept.append(RouteState(route: route, sink: RouteSink(gateway: self), session: -model.nextSession))
            logger.info(
                "mDNS gateway: announcing",
                metadata: [
                    "gateway.client": "\(route.client.interface)", "gateway.from": "\(route.far.zone)",
                    "gateway.types": "\(FarRecords.allowList(route)?.joined(separator: ",") ?? "all shared")",
                ])
        }
        model.routes = kept
        listen(Set(kept.map(\.route.far.interface)))
        let live = Set(kept.map(\.route.client.interface))
        model.renames = model.renames.filter { live.contains($0.key.interface) }
        return ended
    }

    /// Subscribes what the route's records call for and leaves what they no longer do,
    /// until nothing changes (a type brings instances, an instance its host). Only what
    /// changed is looked at (`FarRecords.wantedChanges`).
    private func follow(_ state: inout RouteState, now: Duration) {
        for _ in 0..<4 {
            let changes = state.records.wantedChanges(state.route)
            var gone = changes.remove
            var new = changes.add
            if changes.everything {
                gone = Set(state.subscriptions.keys).subtracting(changes.add)
                new = changes.add.filter { state.subscriptions[$0] == nil }
            }
            guard !gone.isEmpty || !new.isEmpty else { return }
            for key in gone {
                if let subscription = state.subscriptions.removeValue(forKey: key) {
                    state.keysByID[subscription.id] = nil
                    for browse in subscription.keys {
                        proxy.unsubscribe(from: browse, session: state.session, id: subscription.id)
                    }
                }
                state.asking[key] = nil
                state.notAsking.remove(key)
                state.records.drop(key)
            }
            // In a fixed order (IDs are given in it), each name's text made once: made at each
            // comparison it was 40 % of fifty client links' first pass.
            let ordered = new.filter { state.subscriptions[$0] == nil }.map { (text: $0.name.description, key: $0) }
                .sorted { ($0.text, $0.key.type.rawValue) < ($1.text, $1.key.type.rawValue) }.map(\.key)
            for key in ordered {
                repeat { state.nextID &+= 1 } while state.keysByID[state.nextID] != nil || state.nextID == 0
                let id = state.nextID
                let request = PushSubscribe(name: key.name, type: key.type)
                // The gateway applies RFC 8766 §5.5.2's usable-address rule itself (an instance
                // needs a routable address native to the far link) and reports what it holds back.
                // Its lookups have a budget of their own (`QueryBudget.gateway`).
                let outcome = proxy.subscribe(
                    request, session: state.session, id: id, from: state.route.requester, sink: state.sink,
                    appliesUsableRule: false, budget: .gateway)
                guard case .subscribed(let initial, let keys) = outcome else { continue }
                // Followed from when its lookup asks: one waiting for the far link's budget
                // has not had its chance yet (held-back reports, `clientSettle`).
                state.subscriptions[key] = (id, keys, max(now, proxy.asksFrom(keys) ?? now))
                state.keysByID[id] = key
                state.notAsking.insert(key)
                for change in initial { state.records.apply(change, to: key) }
            }
        }
    }

    /// Notes which of the lookups of the route's held-back instances ask the link now (one
    /// lock for all not yet seen asking): only a held-back report waits for them, and a
    /// thousand far devices' lookups, waiting for their pace, were otherwise looked at in
    /// every route at every pass.
    private func noteAsking(_ state: inout RouteState, now: Duration) {
        guard !state.notAsking.isEmpty, !state.heldSince.isEmpty else { return }
        var keys: [RecordKey] = []
        for instance in state.heldSince.keys {
            keys += state.lookups(ofHeld: instance).filter { state.notAsking.contains($0) }
        }
        guard !keys.isEmpty else { return }
        for (key, asking) in zip(keys, proxy.areAsking(keys.map { state.subscriptions[$0]?.keys ?? [] })) where asking {
            state.asking[key] = now
            state.notAsking.remove(key)
        }
    }

    private func leave(_ state: RouteState) {
        for subscription in state.subscriptions.values {
            for browse in subscription.keys {
                proxy.unsubscribe(from: browse, session: state.session, id: subscription.id)
            }
        }
    }

    // MARK: Records

    static let servicesName = try! Catalog.local.prepending(Catalog.servicesLabels)

    static let unreachable = "no routable address"

    static func reason(_ why: FarRecords.Held, _ route: AnnouncementRoute) -> String {
        switch why {
        case .unreachable:
            unreachable + " (link-local only, or none): a client on \(route.client.interface) could not reach it"
        case .notNative:
            "its addresses are outside \(route.far.zone)'s subnets: another router's announcement, not a device there"
        }
    }

    /// Logs a route's instances newly held back: a warning when nobody could reach them, as a
    /// type whose devices use link-local addresses only cannot cross a router.
    private func report(held route: AnnouncementStatus, before: AnnouncementStatus?) {
        let old = before?.heldBack ?? []
        for held in route.heldBack where !old.contains(held) {
            let metadata: Logger.Metadata = [
                "gateway.client": "\(route.interface)", "gateway.from": "\(route.from)",
                "gateway.instance": "\(held.instance)", "gateway.reason": "\(held.reason)",
            ]
            if held.reason.hasPrefix(Self.unreachable) {
                logger.warning("mDNS gateway: a far instance is not announced", metadata: metadata)
            } else {
                logger.info("mDNS gateway: a far instance is not announced", metadata: metadata)
            }
        }
    }

    /// `gateway_withdrawn_total{link}`: the instances a route announced before and not now
    /// (gone, renamed, or no longer allowed).
    private func count(_ interface: String, from old: AnnouncementStatus?, to new: AnnouncementStatus) {
        let gone = Set(old?.instances ?? []).subtracting(new.instances).count
        if gone > 0 { proxy.metrics.gatewayWithdrawn[interface].increment(by: gone) }
    }
}

/// A route's Push sink: hands pushes to the gateway's next pass.
final class RouteSink: PushSink {
    weak let gateway: Gateway?
    init(gateway: Gateway) { self.gateway = gateway }
    func deliver(_ changes: [PushChange], subscription: UInt16) {
        gateway?.deliver(changes, subscription: subscription, from: self)
    }
}
