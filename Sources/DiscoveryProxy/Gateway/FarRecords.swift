import DNSWire

/// A name and type: an RRset's identity (for the gateway, one a route follows, in zone form as
/// subscribed; for an SRP update, an RRset whose TTLs must agree).
struct RecordKey: Hashable, Sendable {
    var name: DNSName
    var type: RRType
}

/// A far service as one client link will see it, before naming (`AnnouncementNames`).
struct FarService: Hashable, Sendable {
    /// The instance label as on the far link.
    var instance: [UInt8]
    /// `_ipp`, `_tcp`.
    var typeLabels: [[UInt8]]
    var priority: UInt16
    var weight: UInt16
    var port: UInt16
    /// The SRV target's labels before the far link's zone (or host zone).
    var host: [[UInt8]]
    /// RDATA as mDNS delivered it (RFC 8766 §5.5.1: byte-exact).
    var txt: [UInt8]
    /// The subtype labels it is listed under (`_universal`), of the route's named subtypes.
    var subtypes: [[UInt8]] = []
    /// The target's addresses (4 or 16 octets), IPv4 first, sorted.
    var addresses: [[UInt8]]

    var type: String { typeLabels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".").lowercased() }
}

/// What one route knows of its far link: the RDATA sets its subscriptions were pushed
/// (RFC 8765 §6.3), and what follows from them: which names to follow next (types, then
/// instances, then their hosts) and which services are complete enough to announce.
struct FarRecords: Sendable {
    private(set) var sets: [RecordKey: Set<[UInt8]>] = [:]
    /// PTR and SRV RDATA decoded once, when they arrive: every pass reads them all, and an
    /// ldns decode each time was most of the gateway's CPU under churn (docs/BENCHMARKS.md).
    private var decoded: [Decoded.Key: RData] = [:]
    /// What the route follows, kept up to date by the names that changed (`wantedChanges`).
    private var wants = WantIndex()
    /// Each far instance of a followed type as `survey` last found it, and the instances to
    /// look at again (the same marks as `wants`, taken at another time).
    private var surveyed: [DNSName: Surveyed] = [:]
    private var surveyDirty: Set<DNSName> = []
    private var surveyedTypes: [DNSName]?

    /// One far instance surveyed, with what it sorts by (made once).
    struct Surveyed: Sendable {
        var type: String
        var label: [UInt8]
        var outcome: Outcome

        enum Outcome: Sendable {
            case service(FarService)
            case held(Held)
        }
    }

    enum Decoded {
        struct Key: Hashable, Sendable {
            var type: RRType
            var rdata: [UInt8]
        }
    }

    mutating func apply(_ change: PushChange, to key: RecordKey) {
        if change.isAddition {
            guard change.type == key.type || key.type == .any else { return }
            let stored = RecordKey(name: key.name, type: change.type)
            if change.type == .ptr || change.type == .srv, let value = try? RData(type: change.type, wire: change.rdata)
            {
                decoded[Decoded.Key(type: change.type, rdata: change.rdata)] = value
            }
            if sets[stored, default: []].insert(change.rdata).inserted { touched(stored, rdata: [change.rdata]) }
        } else if change.ttl == PushChange.removeSetTTL {
            if change.type == .any {
                for stored in sets.keys where stored.name == key.name { drop(stored) }
            } else {
                drop(RecordKey(name: key.name, type: change.type))
            }
        } else {
            let stored = RecordKey(name: key.name, type: change.type)
            guard sets[stored]?.remove(change.rdata) != nil else { return }
            if sets[stored]?.isEmpty == true { sets[stored] = nil }
            touched(stored, rdata: [change.rdata])
        }
    }

    mutating func drop(_ key: RecordKey) {
        guard let gone = sets.removeValue(forKey: key) else { return }
        touched(key, rdata: Array(gone))
    }

    /// Notes whose wants or survey a change to `key`'s set (of `rdata`) may change: an
    /// instance's own SRV or TXT, the instances whose SRV targets a host (their survey only),
    /// the instance a PTR names; a PTR may also change the types, the subtypes and the client
    /// link's names.
    private mutating func touched(_ key: RecordKey, rdata: [[UInt8]]) {
        switch key.type {
        case .srv, .txt:
            wants.dirty.insert(key.name)
            surveyDirty.insert(key.name)
        case .a, .aaaa:
            // An address changes what an instance is (survey), not what it follows.
            surveyDirty.formUnion(wants.byTarget[key.name] ?? [])
        case .ptr:
            wants.typesDirty = true
            for bytes in rdata {
                guard case .ptr(let instance)? = value(.ptr, bytes) else { continue }
                wants.dirty.insert(instance)
                surveyDirty.insert(instance)
            }
        default:
            break
        }
    }

    /// Forgets decoded RDATA no set holds any more (after a pass).
    mutating func prune() {
        guard decoded.count > 64, decoded.count > 2 * sets.values.reduce(0, { $0 + $1.count }) else { return }
        var held = Set<Decoded.Key>()
        for (key, set) in sets where key.type == .ptr || key.type == .srv {
            for rdata in set { held.insert(Decoded.Key(type: key.type, rdata: rdata)) }
        }
        decoded = decoded.filter { held.contains($0.key) }
    }

    private func value(_ type: RRType, _ rdata: [UInt8]) -> RData? {
        decoded[Decoded.Key(type: type, rdata: rdata)] ?? (try? RData(type: type, wire: rdata))
    }

    /// What the route's subscriptions must change to follow what its records call for: the
    /// service types (from the allow lists, or from `_services._dns-sd._udp`, RFC 6763 §9),
    /// each type's PTR, each instance's SRV and TXT, each SRV target's A and AAAA. Only the
    /// instances whose records changed since the last call are looked at (the wants of a
    /// thousand far instances, rebuilt whole at every pass of fifty routes, were a fifth of
    /// the proxy's CPU under churn; docs/BENCHMARKS.md). `everything` after `restart()`:
    /// `add` is then the whole set, to be compared with what is subscribed.
    mutating func wantedChanges(_ route: AnnouncementRoute) -> (
        add: Set<RecordKey>, remove: Set<RecordKey>, everything: Bool
    ) {
        let everything = wants.isNew
        let typeNames = self.typeNames(route)
        if wants.typesDirty || everything {
            let typeWants = self.typeWants(route, typeNames: typeNames)
            wants.set(typeWants, for: WantIndex.typesOwner)
            // Instances of a type no longer followed, or followed now: looked at again.
            let types = Set(typeNames)
            if types != wants.types {
                for instance in wants.instances.keys
                where instance != WantIndex.typesOwner && !types.contains(instance.parent) {
                    wants.dirty.insert(instance)
                }
                for type in types.subtracting(wants.types) { wants.dirty.formUnion(instances(of: type)) }
                wants.types = types
            }
            wants.typesDirty = false
        }
        let dirty = wants.dirty
        wants.dirty = []
        for instance in dirty where instance != WantIndex.typesOwner {
            var keys: Set<RecordKey> = []
            var targets: [DNSName] = []
            if isListed(instance, under: wants.types) {
                keys = [RecordKey(name: instance, type: .srv), RecordKey(name: instance, type: .txt)]
                targets = self.targets(of: instance, route)
                for target in targets {
                    keys.insert(RecordKey(name: target, type: .a))
                    keys.insert(RecordKey(name: target, type: .aaaa))
                }
            }
            wants.set(keys, for: instance, targets: targets)
        }
        return wants.take(everything: everything)
    }

    /// Whether `instance` is listed under its type (its type's PTR names it), one of `types`.
    private func isListed(_ instance: DNSName, under types: Set<DNSName>) -> Bool {
        let type = instance.parent
        return types.contains(type) && sets[RecordKey(name: type, type: .ptr)]?.contains(instance.wireBytes) == true
    }

    /// What the route follows besides its far instances: the type enumeration, subtypes,
    /// each type's PTR on both links, and the client-link instances whose names a far
    /// instance could take (their SRV tells another router's identical announcement from a
    /// local service).
    private func typeWants(_ route: AnnouncementRoute, typeNames: [DNSName]) -> Set<RecordKey> {
        var wanted: Set<RecordKey> = []
        if Self.allowList(route) == nil, let enumeration = try? route.far.zone.prepending(Catalog.servicesLabels) {
            wanted.insert(RecordKey(name: enumeration, type: .ptr))
        }
        for subtype in subtypeNames(route, types: typeNames) {
            wanted.insert(RecordKey(name: subtype.name, type: .ptr))
        }
        for typeName in typeNames {
            wanted.insert(RecordKey(name: typeName, type: .ptr))
            guard let local = Self.clientName(of: typeName, route) else { continue }
            wanted.insert(RecordKey(name: local, type: .ptr))
            let localInstances = instances(of: local)
            guard !localInstances.isEmpty else { continue }
            let candidates = Set(
                instances(of: typeName).compactMap(\.labels.first).flatMap { label in
                    (0...Self.renameLevelsChecked).map {
                        DNSName.lowercased(label: AnnouncementNames.instance(label, far: route.far, renames: $0))
                    }
                })
            for instance in localInstances {
                guard let label = instance.labels.first, candidates.contains(DNSName.lowercased(label: label)) else {
                    continue
                }
                wanted.insert(RecordKey(name: instance, type: .srv))
            }
        }
        return wanted
    }

    /// Forgets what was followed: the next `wantedChanges` computes everything again (after a
    /// reload, whose views may let a subscription refused before succeed now).
    mutating func restart() {
        wants = WantIndex()
        surveyedTypes = nil
    }

    /// Why a far instance is not announced (yet).
    enum Held: Equatable {
        /// No SRV, or a target without a routable address: link-local only (the proxy's
        /// subscriptions never carry link-local addresses, RFC 8766 §5.5.2), or none yet.
        case unreachable
        /// Addresses, none in the far link's subnets: another router's announcement of a third
        /// link's service (the anti-echo rule), not a device there.
        case notNative
    }

    /// The complete services: an instance with an SRV whose target has at least one address
    /// native to the far link, sorted so that output is deterministic; and the far instances
    /// left out (by their SRV's owner name), and why. Only the instances whose records changed
    /// since the last call are looked at again (`surveyDirty`; everything when the types
    /// followed change), after `wantedChanges` (whose index tells which instances a host's
    /// addresses belong to).
    mutating func survey(_ route: AnnouncementRoute) -> (
        services: [(instance: DNSName, service: FarService)], held: [(instance: DNSName, why: Held)]
    ) {
        let typeNames = self.typeNames(route)
        let subtypeNames = self.subtypeNames(route, types: typeNames)
        if surveyedTypes != typeNames {
            surveyed = [:]
            surveyDirty = []
            for typeName in typeNames {
                for instance in instances(of: typeName) {
                    surveyed[instance] = surveyOne(instance, route, subtypeNames)
                }
            }
            surveyedTypes = typeNames
        } else {
            let types = Set(typeNames)
            for instance in surveyDirty {
                surveyed[instance] = isListed(instance, under: types) ? surveyOne(instance, route, subtypeNames) : nil
            }
            surveyDirty = []
        }
        var services: [(type: String, label: [UInt8], instance: DNSName, service: FarService)] = []
        var held: [(instance: DNSName, why: Held)] = []
        for (instance, entry) in surveyed {
            switch entry.outcome {
            case .service(let service): services.append((entry.type, entry.label, instance, service))
            case .held(let why): held.append((instance, why))
            }
        }
        services.sort { $0.type != $1.type ? $0.type < $1.type : $0.label.lexicographicallyPrecedes($1.label) }
        held.sort { $0.instance.wireBytes.lexicographicallyPrecedes($1.instance.wireBytes) }
        return (services.map { ($0.instance, $0.service) }, held)
    }

    /// One far instance (listed under its type) as a service, or why it is held back.
    private func surveyOne(
        _ instance: DNSName, _ route: AnnouncementRoute,
        _ subtypeNames: [(name: DNSName, type: DNSName, label: [UInt8])]
    ) -> Surveyed {
        let typeName = instance.parent
        let typeLabels = typeName.labels(before: route.far.zone) ?? []
        let label = instance.labels.first ?? []
        let type = typeLabels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".").lowercased()
        func held(_ why: Held) -> Surveyed { Surveyed(type: type, label: label, outcome: .held(why)) }
        guard let srv = sets[RecordKey(name: instance, type: .srv)]?.sorted(by: Self.ordered).first,
            case .srv(let priority, let weight, let port, let target)? = value(.srv, srv),
            let host = hostLabels(target, route)
        else { return held(.unreachable) }
        let known = (sets[RecordKey(name: target, type: .a)] ?? []).union(
            sets[RecordKey(name: target, type: .aaaa)] ?? [])
        let addresses = known.filter { Self.isNative($0, to: route.far) }
            .sorted { $0.count != $1.count ? $0.count < $1.count : Self.ordered($0, $1) }  // A before AAAA
        guard !addresses.isEmpty else {
            return held(known.contains { !IPPrefix.isLinkLocal($0) } ? .notNative : .unreachable)
        }
        let txt = sets[RecordKey(name: instance, type: .txt)]?.sorted(by: Self.ordered).first ?? [0]
        let subtypes = subtypeNames.filter { subtype in
            subtype.type == typeName
                && sets[RecordKey(name: subtype.name, type: .ptr)]?.contains(instance.wireBytes) == true
        }.map(\.label)
        return Surveyed(
            type: type, label: label,
            outcome: .service(
                FarService(
                    instance: label, typeLabels: typeLabels, priority: priority, weight: weight, port: port,
                    host: host, txt: txt, subtypes: subtypes, addresses: addresses)))
    }

    /// The anti-echo rule: an address is native to a link when it lies in one of the link's
    /// subnets (any, when none are known). An announcement another router made on this link
    /// carries a third link's addresses, so it is never taken for this link's own service and
    /// announced again (docs/ARCHITECTURE.md, "Gateway for mDNS-only clients"). Link-local
    /// addresses never cross a router (RFC 8766 §5.5.2, RFC 3927 §2.6.2).
    static func isNative(_ address: [UInt8], to link: Link) -> Bool {
        guard address.count == 4 || address.count == 16, !IPPrefix.isLinkLocal(address) else { return false }
        return link.subnets.isEmpty || link.subnets.contains { $0.contains(address) }
    }

    /// Rename levels whose names are checked on the client link before announcing.
    static let renameLevelsChecked = 3

    enum LocalOwner: Equatable {
        /// No client-link responder uses the name.
        case none
        /// Another router announces the same far instance (same host name and port): the
        /// records are identical, no conflict (RFC 6762 §8.2).
        case partner
        /// A local service, or something else: the name is taken.
        case other
        /// The client-link instance of that name, whose SRV is not known yet.
        case unknown(DNSName)
    }

    /// Who uses instance `label` of a type on the client link, judged against the far
    /// service `service` would be announced as (`host`, its port). The proxy's own
    /// publications never show here (`OwnRecords`).
    func owner(of label: [UInt8], _ service: FarService, host: DNSName, _ route: AnnouncementRoute) -> LocalOwner {
        guard let typeName = try? route.client.zone.prepending(service.typeLabels),
            let instance = instances(of: typeName).first(where: {
                $0.labels.first.map { DNSName.labelsEqual($0, label) } == true
            })
        else { return .none }
        guard let srvs = sets[RecordKey(name: instance, type: .srv)], !srvs.isEmpty else { return .unknown(instance) }
        let hostLabel = host.labels.first ?? []
        let identical = srvs.contains { rdata in
            guard case .srv(_, _, let port, let target)? = value(.srv, rdata) else { return false }
            return port == service.port && target.labels.first.map { DNSName.labelsEqual($0, hostLabel) } == true
        }
        return identical ? .partner : .other
    }

    /// A type's name in the client link's zone: `_ipp._tcp.lab2.example.`.
    static func clientName(of typeName: DNSName, _ route: AnnouncementRoute) -> DNSName? {
        typeName.replacingSuffix(route.far.zone, with: route.client.zone)
    }

    // MARK: Names

    /// The allow list in force: the route's and the far link's, intersected; nil when neither has one.
    static func allowList(_ route: AnnouncementRoute) -> [String]? {
        ServiceFilter.allowedByAll([route.services, route.far.services])
    }

    private func typeNames(_ route: AnnouncementRoute) -> [DNSName] {
        let zone = route.far.zone
        let types: [String]
        if let allowed = Self.allowList(route) {
            types = allowed
        } else {
            guard let enumeration = try? zone.prepending(Catalog.servicesLabels) else { return [] }
            types = (sets[RecordKey(name: enumeration, type: .ptr)] ?? []).compactMap { rdata -> String? in
                guard case .ptr(let name)? = value(.ptr, rdata),
                    let relative = name.labels(before: zone), relative.count == 2
                else { return nil }
                return ServiceFilter.serviceType(of: relative)
            }
        }
        return Set(types).filter(route.permits).sorted().compactMap { type in
            try? zone.prepending(type.split(separator: ".").map { Array($0.utf8) })
        }
    }

    /// The route's named subtypes whose type is announced (`types`, from `typeNames`):
    /// `_universal._sub._ipp._tcp.<zone>`.
    private func subtypeNames(_ route: AnnouncementRoute, types: [DNSName]) -> [(
        name: DNSName, type: DNSName, label: [UInt8]
    )] {
        let types = Set(types)
        return route.subtypes.sorted().compactMap { text in
            let labels = text.split(separator: ".").map { Array($0.utf8) }
            guard labels.count == 4, let name = try? route.far.zone.prepending(labels),
                let type = try? route.far.zone.prepending(Array(labels[2...])), types.contains(type)
            else { return nil }
            return (name, type, labels[0])
        }
    }

    private func instances(of typeName: DNSName) -> [DNSName] {
        (sets[RecordKey(name: typeName, type: .ptr)] ?? []).compactMap { rdata -> DNSName? in
            guard case .ptr(let instance)? = value(.ptr, rdata),
                instance.labels(before: typeName)?.count == 1
            else { return nil }
            return instance
        }.sorted { $0.wireBytes.lexicographicallyPrecedes($1.wireBytes) }
    }

    /// The SRV targets of `instance` inside the far link's zones.
    func targets(of instance: DNSName, _ route: AnnouncementRoute) -> [DNSName] {
        (sets[RecordKey(name: instance, type: .srv)] ?? []).compactMap { rdata -> DNSName? in
            guard case .srv(_, _, _, let target)? = value(.srv, rdata),
                hostLabels(target, route) != nil
            else { return nil }
            return target
        }
    }

    /// A target's labels before the far link's host zone or zone; nil outside them.
    private func hostLabels(_ target: DNSName, _ route: AnnouncementRoute) -> [[UInt8]]? {
        for zone in [route.far.hostZone, route.far.zone].compactMap({ $0 }) {
            if let relative = target.labels(before: zone), !relative.isEmpty { return relative }
        }
        return nil
    }

    private static func ordered(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }
}
