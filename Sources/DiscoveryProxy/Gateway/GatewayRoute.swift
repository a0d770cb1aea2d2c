import DNSWire
import MDNS

/// One gateway route (a far link announced on a client link) and what a pass makes of it:
/// what it follows, and its far services as groups on the client link, made again only where
/// something changed (docs/ARCHITECTURE.md, "Gateway for mDNS-only clients").
extension Gateway {
    /// One route and what it follows. `sink` tells its pushes from an older route's.
    struct RouteState {
        var route: AnnouncementRoute
        var sink: RouteSink
        var session: Int
        var records = FarRecords()
        var subscriptions: [RecordKey: (id: UInt16, keys: [BrowseKey], since: Duration)] = [:]
        /// When a pass first found each subscription's lookups asking the link (the daemon
        /// delivered its cache or results): a lookup queued in the backend has not had its chance.
        var asking: [RecordKey: Duration] = [:]
        /// The subscriptions not yet found asking (`noteAsking` looks at these only).
        var notAsking: Set<RecordKey> = []
        /// Since when each far instance now held back has been so: a device that leaves says
        /// goodbye to its address before its PTR is gone, and is incomplete for a moment.
        var heldSince: [DNSName: Duration] = [:]
        var keysByID: [UInt16: RecordKey] = [:]
        var nextID: UInt16 = 0
        /// Each announced instance's group as the last pass made it, reused while its far
        /// service and its rename level stay the same (the same array: no comparison of its
        /// records either when the pass looks for what changed).
        var built: [MDNSGroup.Key: Built] = [:]
        var prepared: [DNSName: Prepared] = [:]
        /// What the last pass that computed this route made of it, and when it must be
        /// computed again without any change (a settle or held-back wait ends).
        var output: RouteOutput?
        var recheckAt: Duration?

        /// What a held-back far instance waits for before it is reported: its SRV and its
        /// targets' addresses asking the link.
        func lookups(ofHeld instance: DNSName) -> [RecordKey] {
            [RecordKey(name: instance, type: .srv)]
                + records.targets(of: instance, route).flatMap {
                    [RecordKey(name: $0, type: .a), RecordKey(name: $0, type: .aaaa)]
                }
        }
    }

    /// One route's groups on its client link, its status, the rename level of each instance
    /// announced (which it keeps while the client link's view is rebuilt, a browse started
    /// over, rather than being withdrawn), the instances held back now (reported or not yet),
    /// and when to look again.
    struct RouteOutput {
        var groups: [MDNSGroup.Key: [MDNSRecord]]
        var status: AnnouncementStatus
        var chosen: [MDNSGroup.Key: Int]
        var held: [DNSName]
        var waiting: Duration?
    }

    /// A far service's names on its client link, made when the service changes.
    struct Prepared {
        var service: FarService
        var key: MDNSGroup.Key
        var host: DNSName
        var hostKey: MDNSGroup.Key
        /// `_ipp._tcp.local.`
        var typeName: DNSName
        /// The type in the client link's zone: whose own instances are checked first.
        var localType: DNSName
        var addresses: [MDNSRecord]

        init?(_ service: FarService, _ route: AnnouncementRoute) {
            guard let host = AnnouncementNames.host(service.host, far: route.far),
                let typeName = try? DNSName(labels: service.typeLabels + [Array("local".utf8)]),
                let farType = try? route.far.zone.prepending(service.typeLabels),
                let localType = FarRecords.clientName(of: farType, route)
            else { return nil }
            self.service = service
            self.key = MDNSGroup.Key(
                interface: route.client.interface,
                name: "\(service.type) \(String(decoding: service.instance, as: UTF8.self)) from \(route.far.zone)")
            self.host = host
            self.hostKey = MDNSGroup.Key(interface: route.client.interface, name: "host \(host)")
            self.typeName = typeName
            self.localType = localType
            self.addresses = service.addresses.map {
                MDNSRecord(name: host, type: $0.count == 4 ? .a : .aaaa, rdata: $0)
            }
        }
    }

    struct Built {
        var service: FarService
        var level: Int
        var records: [MDNSRecord]
        /// As the status lists it: `Printer._ipp._tcp`.
        var announced: String
    }

    /// What one route's complete services become on its client link: one group per instance
    /// (PTR, type enumeration PTR, SRV, TXT) and one per host (A, AAAA). An instance whose
    /// type the client link has not been followed for `clientSettle` waits, unless it is
    /// announced already (it keeps its name meanwhile). Only the instances whose records
    /// changed are surveyed again, and a group is made again only when its service or its
    /// rename level changed (`Prepared`, `Built`).
    static func output(_ state: inout RouteState, renames: [MDNSGroup.Key: Int], now: Duration) -> RouteOutput {
        let route = state.route
        let (services, held) = state.records.survey(route)
        let onAir = state.output?.chosen ?? [:]
        var groups: [MDNSGroup.Key: [MDNSRecord]] = [:]
        var chosen: [MDNSGroup.Key: Int] = [:]
        var waiting: Duration?
        var announced: [String] = []
        var heldBack: [AnnouncementStatus.HeldBack] = []
        var built: [MDNSGroup.Key: Built] = [:]
        var prepared: [DNSName: Prepared] = [:]
        for (instance, why) in held {
            // Reported once it has been held back, and its SRV and its targets' addresses have
            // asked the link, for `heldAfter`: records arrive one by one, lookups wait for their
            // pace and then in the backend's queue (issue 45: a thousand far devices' lookups),
            // and a device that leaves loses its address first.
            let asking = state.lookups(ofHeld: instance).map { state.asking[$0] }
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
        for (farInstance, service) in services {
            let names: Prepared
            if let made = state.prepared[farInstance], made.service == service {
                names = made
            } else {
                guard let made = Prepared(service, route) else { continue }
                names = made
            }
            prepared[farInstance] = names
            let (key, host, typeName) = (names.key, names.host, names.typeName)
            // The client link's own instances of the type must have been followed a while.
            guard let since = state.subscriptions[RecordKey(name: names.localType, type: .ptr)]?.since else { continue }
            let level: Int
            if now - since < clientSettle {
                waiting = min(waiting ?? .seconds(3600), clientSettle - (now - since))
                guard let announced = onAir[key] else { continue }
                level = max(announced, renames[key] ?? 0)
            } else {
                guard
                    let free = renameLevel(
                        of: service, host: host, in: state, from: renames[key] ?? 0, now: now, waiting: &waiting)
                else { continue }
                level = free
            }
            let made: Built
            if let old = state.built[key], old.level == level, old.service == service {
                made = old
            } else {
                guard let new = Self.build(service, typeName: typeName, host: host, level: level, far: route.far) else {
                    continue
                }
                made = new
            }
            built[key] = made
            chosen[key] = level
            announced.append(made.announced)
            groups[key] = made.records
            // A host's addresses: the same array pass after pass while one instance names it
            // (the usual case), merged when several do.
            if var addresses = groups[names.hostKey] {
                for record in names.addresses where !addresses.contains(record) { addresses.append(record) }
                groups[names.hostKey] = addresses
            } else {
                groups[names.hostKey] = names.addresses
            }
        }
        state.built = built
        state.prepared = prepared
        // Names were checked against the link's own instances: announced without probing.
        return RouteOutput(
            groups: groups,
            status: AnnouncementStatus(
                interface: route.client.interface, from: "\(route.far.zone)", instances: announced, heldBack: heldBack),
            chosen: chosen, held: held.map(\.instance), waiting: waiting)
    }

    /// One far service's group on a client link, named at rename `level`.
    private static func build(_ service: FarService, typeName: DNSName, host: DNSName, level: Int, far: Link) -> Built?
    {
        let label = AnnouncementNames.instance(service.instance, far: far, renames: level)
        guard let instance = try? typeName.prepending([label]),
            let srv = try? RData.srv(
                priority: service.priority, weight: service.weight, port: service.port, target: host
            ).wireBytes()
        else { return nil }
        let records =
            [
                MDNSRecord(name: typeName, type: .ptr, rdata: instance.wireBytes),
                MDNSRecord(name: servicesName, type: .ptr, rdata: typeName.wireBytes),
                MDNSRecord(name: instance, type: .srv, rdata: srv),
                MDNSRecord(name: instance, type: .txt, rdata: service.txt),
            ]
            + service.subtypes.compactMap { subtype in
                // RFC 6763 §7.1: `_universal._sub._ipp._tcp.local.` PTR the instance.
                (try? typeName.prepending([subtype, Array("_sub".utf8)])).map {
                    MDNSRecord(name: $0, type: .ptr, rdata: instance.wireBytes)
                }
            }
        return Built(
            service: service, level: level, records: records,
            announced: String(decoding: label, as: UTF8.self) + "." + service.type)
    }

    /// The first rename level, from `level` on, whose name the client link does not use: a
    /// name in use there is never taken, the far instance is renamed (RFC 6762 §9); another
    /// router's identical announcement is no conflict (§8.2). Nil while a client-link instance
    /// of a candidate name has no SRV yet and may still get one (`waiting` says when to look
    /// again); after `clientSettle` without one, the name counts as taken.
    private static func renameLevel(
        of service: FarService, host: DNSName, in state: RouteState, from first: Int, now: Duration,
        waiting: inout Duration?
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
}
