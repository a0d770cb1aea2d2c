import DNSWire
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
        /// The rename level of each service group announced now: it keeps that name while the
        /// client link's view is rebuilt (a browse started over), rather than being withdrawn.
        var levels: [MDNSGroup.Key: Int] = [:]
        var published: [MDNSGroup] = []
        var status: [AnnouncementStatus] = []
        var problems: [String] = []
    }

    /// Per client link, made once (creating a metric goes through the factory's lock). A lock
    /// of its own: the publisher reports errors holding its poll lock, which a pass may wait
    /// for while it holds `model`.
    private let instruments = Mutex<[String: Instruments]>([:])

    private func instruments(for link: String) -> Instruments {
        instruments.withLock { made in
            if let existing = made[link] { return existing }
            let new = Instruments(link: link)
            made[link] = new
            return new
        }
    }

    /// `gateway_announced_instances`, `gateway_renames_total`, `gateway_withdrawn_total`,
    /// `gateway_publish_errors_total` of one client link.
    private struct Instruments {
        let announced: Gauge
        let renames: Counter
        let withdrawn: Counter
        let publishErrors: Counter

        init(link: String) {
            announced = Gauge(label: "gateway_announced_instances", dimensions: [("link", link)])
            renames = Counter(label: "gateway_renames_total", dimensions: [("link", link)])
            withdrawn = Counter(label: "gateway_withdrawn_total", dimensions: [("link", link)])
            publishErrors = Counter(label: "gateway_publish_errors_total", dimensions: [("link", link)])
        }
    }

    /// One route and what it follows. `sink` tells its pushes from an older route's.
    private struct RouteState {
        var route: AnnouncementRoute
        var sink: RouteSink
        var session: Int
        var records = FarRecords()
        var subscriptions: [RecordKey: (id: UInt16, keys: [BrowseKey], since: Duration)] = [:]
        /// When a pass first found each subscription's lookups asking the link (the daemon
        /// delivered its cache or results): a lookup queued in the backend has not had its chance.
        var asking: [RecordKey: Duration] = [:]
        /// Since when each far instance now held back has been so: a device that leaves says
        /// goodbye to its address before its PTR is gone, and is incomplete for a moment.
        var heldSince: [DNSName: Duration] = [:]
        var keysByID: [UInt16: RecordKey] = [:]
        var nextID: UInt16 = 0
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
        instruments(for: interface).publishErrors.increment()
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

    fileprivate func deliver(_ changes: [PushChange], subscription: UInt16, from sink: RouteSink) {
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
            if batch.reconfigure { rebuild(&model) }
            for (sink, subscription, changes) in batch.changes {
                guard let index = model.routes.firstIndex(where: { $0.sink === sink }),
                    let key = model.routes[index].keysByID[subscription]
                else { continue }
                for change in changes {
                    model.routes[index].records.apply(change, to: key)
                    // The browse started over (the daemon went away or came back): until it has
                    // been followed `clientSettle` again, what it lacks is unknown, not absent.
                    if change.ttl == PushChange.removeSetTTL {
                        model.routes[index].subscriptions[key]?.since = now
                        model.routes[index].asking[key] = nil
                    }
                }
            }
            for key in batch.collisions {
                if let collided = model.published.first(where: { $0.key == key }) { proxy.forgetOwnPublication(collided) }
                model.renames[key, default: 0] += 1
                instruments(for: key.interface).renames.increment()
                logger.info("mDNS gateway: name taken on the link, renaming the far instance", metadata: [
                    "mdns.interface": "\(key.interface)", "mdns.group": "\(key.name)",
                    "gateway.renames": "\(model.renames[key] ?? 0)",
                ])
            }
            if !mdnsRunning {
                // avahi is away, on some connection at least: every view is unknown, not empty,
                // until it has been followed `clientSettle` after the daemon is back.
                for index in model.routes.indices {
                    for key in model.routes[index].subscriptions.keys { model.routes[index].subscriptions[key]?.since = now }
                }
            }
            for index in model.routes.indices {
                follow(&model.routes[index], now: now)
                model.routes[index].records.prune()
                noteAsking(&model.routes[index], now: now)
            }
            let (groups, status, waiting, levels, held) = Self.groups(
                model.routes, renames: model.renames, onAir: model.levels, now: now)
            model.levels = levels
            for index in model.routes.indices {
                model.routes[index].heldSince = held[index].reduce(into: [:]) { since, instance in
                    since[instance] = model.routes[index].heldSince[instance] ?? now
                }
            }
            recheck = waiting
            report(held: status, before: model.status)
            guard groups != model.published else {
                model.status = status
                return nil
            }
            count(from: model.status, to: status)
            model.published = groups
            model.status = status
            return groups
        }
        guard let groups else { return }
        proxy.ownPublications(groups)
        publisher.publish(groups)
    }

    private func rebuild(_ model: inout Model) {
        let (routes, problems) = AnnouncementRoute.routes(proxy.configuration)
        for problem in problems where !model.problems.contains(problem) {
            logger.warning("mDNS gateway: \(problem)")
        }
        model.problems = problems
        var kept: [RouteState] = []
        for state in model.routes {
            if routes.contains(state.route) { kept.append(state) } else { leave(state) }
        }
        for route in routes where !kept.contains(where: { $0.route == route }) {
            model.nextSession += 1
            // Negative session numbers: never one of PushService's.
            kept.append(RouteState(route: route, sink: RouteSink(gateway: self), session: -model.nextSession))
            logger.info("mDNS gateway: announcing", metadata: [
                "gateway.client": "\(route.client.interface)", "gateway.from": "\(route.far.zone)",
                "gateway.types": "\(FarRecords.allowList(route)?.joined(separator: ",") ?? "all shared")",
            ])
        }
        model.routes = kept
        listen(Set(kept.map(\.route.far.interface)))
        let live = Set(kept.map(\.route.client.interface))
        model.renames = model.renames.filter { live.contains($0.key.interface) }
    }

    /// Subscribes what the route's records call for and leaves what they no longer do,
    /// until nothing changes (a type brings instances, an instance its host).
    private func follow(_ state: inout RouteState, now: Duration) {
        for _ in 0..<4 {
            let wanted = state.records.wanted(state.route)
            let current = Set(state.subscriptions.keys)
            guard wanted != current else { return }
            // Another round only if the records changed (a dropped name, or what a new
            // subscription brought): a browse made now has nothing yet, and `wanted` reads the
            // route's records whole.
            let gone = current.subtracting(wanted)
            var changed = !gone.isEmpty
            for key in gone {
                if let subscription = state.subscriptions.removeValue(forKey: key) {
                    state.keysByID[subscription.id] = nil
                    for browse in subscription.keys { proxy.unsubscribe(from: browse, session: state.session, id: subscription.id) }
                }
                state.asking[key] = nil
                state.records.drop(key)
            }
            // In a fixed order (IDs are given in it), each name's text made once: made at each
            // comparison it was 40 % of fifty client links' first pass.
            let new = wanted.subtracting(current).map { (text: $0.name.description, key: $0) }
                .sorted { ($0.text, $0.key.type.rawValue) < ($1.text, $1.key.type.rawValue) }.map(\.key)
            for key in new {
                repeat { state.nextID &+= 1 } while state.keysByID[state.nextID] != nil || state.nextID == 0
                let id = state.nextID
                let request = PushSubscribe(name: key.name, type: key.type)
                // The gateway applies RFC 8766 §5.5.2's usable-address rule itself (an instance
                // needs a routable address native to the far link) and reports what it holds back.
                // Its lookups have a budget of their own (`QueryBudget.gateway`).
                let outcome = proxy.subscribe(
                    request, session: state.session, id: id, client: state.route.clientAddress, sink: state.sink,
                    appliesUsableRule: false, budget: .gateway)
                guard case .subscribed(let initial, let keys) = outcome else { continue }
                // Followed from when its lookup asks: one waiting for the far link's budget
                // has not had its chance yet (held-back reports, `clientSettle`).
                state.subscriptions[key] = (id, keys, max(now, proxy.asksFrom(keys) ?? now))
                state.keysByID[id] = key
                for change in initial { state.records.apply(change, to: key) }
                changed = changed || !initial.isEmpty
            }
            if !changed { return }
        }
    }

    /// Notes which of the route's subscriptions ask the link now (one lock for all not yet
    /// seen asking).
    private func noteAsking(_ state: inout RouteState, now: Duration) {
        // Every subscription asks already (`asking` holds only subscribed keys): the usual
        // case once a route has settled, and a filter of its thousands at every pass otherwise.
        guard state.asking.count < state.subscriptions.count else { return }
        let waiting = state.subscriptions.filter { state.asking[$0.key] == nil }
        guard !waiting.isEmpty else { return }
        let keys = Array(waiting.keys)
        for (key, asking) in zip(keys, proxy.areAsking(keys.map { waiting[$0]?.keys ?? [] })) where asking {
            state.asking[key] = now
        }
    }

    private func leave(_ state: RouteState) {
        for subscription in state.subscriptions.values {
            for browse in subscription.keys { proxy.unsubscribe(from: browse, session: state.session, id: subscription.id) }
        }
    }

    // MARK: Records

    static let servicesName = try! Catalog.local.prepending(Catalog.servicesLabels)

    /// What every route's complete services become on their client links: one group per
    /// instance (PTR, type enumeration PTR, SRV, TXT) and one per host (A, AAAA). An instance
    /// whose type the client link has not been followed for `clientSettle` waits, unless it
    /// is announced already (`onAir`: it keeps its name meanwhile); the third value is when
    /// to look again, the fourth the level of each instance announced, the fifth each route's
    /// instances held back now (reported or not yet).
    private static func groups(
        _ routes: [RouteState], renames: [MDNSGroup.Key: Int], onAir: [MDNSGroup.Key: Int], now: Duration
    ) -> ([MDNSGroup], [AnnouncementStatus], Duration?, [MDNSGroup.Key: Int], [[DNSName]]) {
        var groups: [MDNSGroup.Key: [MDNSRecord]] = [:]
        var chosen: [MDNSGroup.Key: Int] = [:]
        var status: [AnnouncementStatus] = []
        var waiting: Duration?
        var heldNow: [[DNSName]] = []
        for state in routes {
            let route = state.route
            var announced: [String] = []
            let (services, held) = state.records.survey(route)
            heldNow.append(held.map(\.instance))
            var heldBack: [AnnouncementStatus.HeldBack] = []
            for (instance, why) in held {
                // Reported once it has been held back, and its SRV and its targets' addresses
                // have asked the link, for `heldAfter`: records arrive one by one, lookups wait
                // for their budget and then in the backend's queue (issue 45: a thousand far
                // devices' lookups), and a device that leaves loses its address first.
                let lookups = [RecordKey(name: instance, type: .srv)] + state.records.targets(of: instance, route).flatMap {
                    [RecordKey(name: $0, type: .a), RecordKey(name: $0, type: .aaaa)]
                }
                let asking = lookups.map { state.asking[$0] }
                guard !asking.contains(nil) else {
                    waiting = min(waiting ?? .seconds(3600), askingRecheck)
                    continue
                }
                let since = asking.compactMap { $0 }.reduce(state.heldSince[instance] ?? now, max)
                guard now - since >= heldAfter else {
                    waiting = min(waiting ?? .seconds(3600), heldAfter - (now - since))
                    continue
                }
                let labels = instance.labels(before: route.far.zone) ?? []
                let name = labels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
                heldBack.append(.init(instance: name, reason: Self.reason(why, route)))
            }
            defer {
                status.append(AnnouncementStatus(
                    interface: route.client.interface, from: "\(route.far.zone)", instances: announced, heldBack: heldBack))
            }
            for service in services {
                guard let host = AnnouncementNames.host(service.host, far: route.far),
                    let typeName = try? DNSName(labels: service.typeLabels + [Array("local".utf8)])
                else { continue }
                let key = MDNSGroup.Key(
                    interface: route.client.interface,
                    name: "\(service.type) \(String(decoding: service.instance, as: UTF8.self)) from \(route.far.zone)")
                // The client link's own instances of the type must have been followed a while.
                guard let farType = try? route.far.zone.prepending(service.typeLabels),
                    let local = FarRecords.clientName(of: farType, route),
                    let since = state.subscriptions[RecordKey(name: local, type: .ptr)]?.since
                else { continue }
                let level: Int
                if now - since < clientSettle {
                    waiting = min(waiting ?? .seconds(3600), clientSettle - (now - since))
                    guard let announced = onAir[key] else { continue }
                    level = max(announced, renames[key] ?? 0)
                } else {
                    guard let free = renameLevel(of: service, host: host, in: state, from: renames[key] ?? 0, now: now, waiting: &waiting)
                    else { continue }
                    level = free
                }
                let label = AnnouncementNames.instance(service.instance, far: route.far, renames: level)
                guard let instance = try? typeName.prepending([label]),
                    let srv = try? RData.srv(priority: service.priority, weight: service.weight, port: service.port, target: host).wireBytes()
                else { continue }
                announced.append(String(decoding: label, as: UTF8.self) + "." + service.type)
                chosen[key] = level
                groups[key] = [
                    MDNSRecord(name: typeName, type: .ptr, rdata: instance.wireBytes),
                    MDNSRecord(name: servicesName, type: .ptr, rdata: typeName.wireBytes),
                    MDNSRecord(name: instance, type: .srv, rdata: srv),
                    MDNSRecord(name: instance, type: .txt, rdata: service.txt),
                ] + service.subtypes.compactMap { subtype in
                    // RFC 6763 §7.1: `_universal._sub._ipp._tcp.local.` PTR the instance.
                    (try? typeName.prepending([subtype, Array("_sub".utf8)])).map {
                        MDNSRecord(name: $0, type: .ptr, rdata: instance.wireBytes)
                    }
                }
                let hostKey = MDNSGroup.Key(interface: route.client.interface, name: "host \(host)")
                var addresses = groups[hostKey] ?? []
                for address in service.addresses {
                    let record = MDNSRecord(name: host, type: address.count == 4 ? .a : .aaaa, rdata: address)
                    if !addresses.contains(record) { addresses.append(record) }
                }
                groups[hostKey] = addresses
            }
        }
        // Names were checked against the link's own instances: announced without probing.
        let published = groups.sorted { $0.key < $1.key }.map { MDNSGroup(key: $0.key, records: $0.value, probe: false) }
        return (published, status, waiting, chosen, heldNow)
    }

    /// The first rename level, from `level` on, whose name the client link does not use: a
    /// name in use there is never taken, the far instance is renamed (RFC 6762 §9); another
    /// router's identical announcement is no conflict (§8.2). Nil while a client-link instance
    /// of a candidate name has no SRV yet and may still get one (`waiting` says when to look
    /// again); after `clientSettle` without one, the name counts as taken.
    private static func renameLevel(
        of service: FarService, host: DNSName, in state: RouteState, from first: Int, now: Duration, waiting: inout Duration?
    ) -> Int? {
        let route = state.route
        for level in first..<50 {
            let candidate = AnnouncementNames.instance(service.instance, far: route.far, renames: level)
            switch state.records.owner(of: candidate, service, host: host, route) {
            case .none, .partner:
                return level
            case .other:
                continue
            case .unknown(let instance):
                let since = state.subscriptions[RecordKey(name: instance, type: .srv)]?.since ?? now
                if now - since >= clientSettle { continue }
                waiting = min(waiting ?? .seconds(3600), clientSettle - (now - since))
                return nil
            }
        }
        return 50
    }

    static let unreachable = "no routable address"

    static func reason(_ why: FarRecords.Held, _ route: AnnouncementRoute) -> String {
        switch why {
        case .unreachable:
            unreachable + " (link-local only, or none): a client on \(route.client.interface) could not reach it"
        case .notNative:
            "its addresses are outside \(route.far.zone)'s subnets: another router's announcement, not a device there"
        }
    }

    /// Logs instances newly held back: a warning when nobody could reach them, as a type whose
    /// devices use link-local addresses only cannot cross a router.
    private func report(held status: [AnnouncementStatus], before: [AnnouncementStatus]) {
        for route in status {
            let old = before.first { $0.interface == route.interface && $0.from == route.from }?.heldBack ?? []
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
    }

    /// `gateway_announced_instances{link}` and `gateway_withdrawn_total{link}`.
    private func count(from old: [AnnouncementStatus], to new: [AnnouncementStatus]) {
        var before: [String: Set<String>] = [:]
        var after: [String: Set<String>] = [:]
        for route in old { before[route.interface, default: []].formUnion(route.instances.map { route.from + " " + $0 }) }
        for route in new { after[route.interface, default: []].formUnion(route.instances.map { route.from + " " + $0 }) }
        for interface in Set(before.keys).union(after.keys) {
            let now = after[interface] ?? []
            let instruments = instruments(for: interface)
            instruments.announced.record(now.count)
            let gone = (before[interface] ?? []).subtracting(now).count
            if gone > 0 { instruments.withdrawn.increment(by: gone) }
        }
    }
}

/// A route's Push sink: hands pushes to the gateway's next pass.
private final class RouteSink: PushSink {
    weak let gateway: Gateway?
    init(gateway: Gateway) { self.gateway = gateway }
    func deliver(_ changes: [PushChange], subscription: UInt16) {
        gateway?.deliver(changes, subscription: subscription, from: self)
    }
}
