import DNSWire

// Which zone and which plan for a name, who may learn it, and how names map between a zone and
// .local.

/// What a query needs, decided from the question alone (no state, no I/O).
public enum QueryPlan: Equatable, Sendable {
    /// Outside every zone, or a class we do not serve: REFUSED, no recursion, no multicast.
    case refused
    /// Answered at once from configuration: apex SOA/NS, negatives for metadata names and
    /// delegation types below the apex, domain enumeration (RFC 8766 §6).
    case immediate(zone: DNSName, answers: [ResourceRecord])
    /// Answered from mDNS on one link (RFC 8766 §5.1, §5.4).
    case mdns(MDNSPlan)
}

public struct MDNSPlan: Hashable, Sendable {
    public var link: Link
    /// The zone the query fell in (forward link zone or a reverse zone); negative answers
    /// carry its SOA.
    public var zone: DNSName
    /// The mDNS name asked on the link: the zone suffix replaced by `local.`, or the reverse
    /// name unchanged (§5.4).
    public var localName: DNSName
    public var type: RRType
}

/// Routes questions to zones: each link's forward zone, its host-name zone if it has one,
/// and the reverse zones of its subnets. Like a DNS server's catalog, the longest matching
/// origin wins.
public struct Catalog: Sendable {
    public let configuration: ProxyConfiguration
    private let zones: [(origin: DNSName, link: Link, kind: ZoneKind)]
    /// Some link limits its clients (`Link.clients`): only then do queries pay for the check.
    public let hasLinkViews: Bool
    /// Some link has name servers of its own (`Link.nameServers`).
    public let hasLinkNameServers: Bool

    /// What a zone holds.
    public enum ZoneKind: Sendable {
        /// DNS-SD names (and host names when the link has no host zone).
        case forward
        /// Host names only (`Link.hostZone`): their addresses.
        case hosts
        /// Reverse mapping of the link's subnets (§5.4).
        case reverse
    }

    public static let local = try! DNSName("local.")
    /// `_services._dns-sd._udp`, the service type enumeration name below a domain (RFC 6763 §9).
    static let servicesLabels = [Array("_services".utf8), Array("_dns-sd".utf8), Array("_udp".utf8)]

    public init(configuration: ProxyConfiguration) {
        self.configuration = configuration
        var zones: [(DNSName, Link, ZoneKind)] = []
        for link in configuration.links {
            zones.append((link.zone, link, .forward))
            if let hostZone = link.hostZone { zones.append((hostZone, link, .hosts)) }
            for subnet in link.subnets where !subnet.isLinkLocal {
                let origin = subnet.reverseZone
                if !zones.contains(where: { $0.0 == origin }) { zones.append((origin, link, .reverse)) }
            }
        }
        // Longest origin first, so the most specific zone wins.
        self.zones = zones.sorted { $0.0.labels.count > $1.0.labels.count }
        self.hasLinkViews = configuration.links.contains { $0.clients != nil }
        self.hasLinkNameServers = configuration.links.contains { $0.nameServers != nil }
    }

    /// The browse domains offered by `b`/`lb` domain enumeration in a zone of `link`: every
    /// link zone that all of that zone's proxies serve too. Every proxy that may be asked
    /// (RFC 8766 §6.2) then gives the same list, even when each also serves links of its own
    /// (`Link.nameServers`); without such links, every link zone.
    public func browseDomains(askedIn link: Link) -> [DNSName] {
        guard hasLinkNameServers else { return configuration.links.map(\.zone) }
        let askable = configuration.nameServers(of: link)
        return configuration.links.filter { other in
            let servers = configuration.nameServers(of: other)
            return askable.allSatisfy { servers.contains($0) }
        }.map(\.zone)
    }

    public func zone(containing name: DNSName) -> (origin: DNSName, link: Link, kind: ZoneKind)? {
        zones.first { name.isSubdomain(of: $0.origin) }
    }

    // MARK: Who may learn what (RFC 8766 §9.2)
    // Every way in asks these two: a query (`QueryIntake`) and each DSO message type
    // (`DiscoveryProxy.subscribe`, `reconfirm`, `PushSession`).

    /// Whether `client` passes the client ACL (`allowedClients`).
    public func admits(_ client: DNSClient) -> Bool { configuration.admits(client) }

    /// The link whose zone holds `name` when `client` may not see it (`Link.clients`).
    public func hiddenLink(holding name: DNSName, from client: DNSClient) -> Link? {
        guard hasLinkViews, let link = zone(containing: name)?.link, !link.isVisible(to: client) else { return nil }
        return link
    }

    public func plan(_ question: Question) -> QueryPlan {
        guard question.qclass == .in || question.qclass == .any else { return .refused }
        // A zone of mDNS answers has no contents to transfer: refused in one message, at once,
        // over either transport (RFC 5936 §2.2.1; RFC 1995 for IXFR).
        if question.type == .axfr || question.type == .ixfr { return .refused }
        if let answers = serverAddresses(question) {
            return .immediate(zone: configuration.serverName, answers: answers)
        }
        guard let (origin, link, kind) = zone(containing: question.name) else { return .refused }
        let isReverse = kind == .reverse
        let relative = question.name.labels(before: origin) ?? []
        let records = ZoneRecords(origin: origin, link: link, configuration: configuration)

        // The apex is answered at once (§6.3): SOA, NS, nothing else exists there.
        if relative.isEmpty {
            switch question.type {
            case .soa: return .immediate(zone: origin, answers: [records.soa])
            case .ns: return .immediate(zone: origin, answers: records.ns)
            case .any: return .immediate(zone: origin, answers: [records.soa] + records.ns)
            case .nsec:  // §5.5.3: one NSEC for this name alone
                return .immediate(
                    zone: origin,
                    answers: [
                        NSECSynthesis.record(owner: question.name, types: [.ns, .soa], ttl: configuration.ttlCap)
                    ])
            default: return .immediate(zone: origin, answers: [])
            }
        }
        // Delegation records below the apex get an immediate negative (§6.3); so do DNSSEC
        // types, since these zones are not signed.
        switch question.type {
        case .soa, .ns, .ds, .rrsig, RRType(48), RRType(51):
            return .immediate(zone: origin, answers: [])
        case .nsec, .nsec3:
            // §5.5.3: one NSEC for this name alone, from the types it holds: known here for the
            // names answered from configuration, else asked of mDNS (`NSECSynthesis`).
            if kind != .hosts,
                let types = configuredTypes(
                    question.name, relative: relative, link: link, origin: origin, isReverse: isReverse)
            {
                guard question.type == .nsec else { return .immediate(zone: origin, answers: []) }
                let nsec = NSECSynthesis.record(owner: question.name, types: types, ttl: configuration.ttlCap)
                return .immediate(zone: origin, answers: [nsec])
            }
            let localName = isReverse ? question.name : NameMapping.toLocal(question.name, zone: origin)
            guard let localName else { return .immediate(zone: origin, answers: []) }
            return .mdns(MDNSPlan(link: link, zone: origin, localName: localName, type: question.type))
        default: break
        }
        if kind == .hosts {
            // One label, an mDNS host name (RFC 6762 §3), and only its addresses: anything
            // else is NODATA at once (the probes of QNAME minimisation included).
            let wanted: Set<RRType> = [.a, .aaaa, .any]
            guard wanted.contains(question.type), let localName = NameMapping.toLocal(question.name, zone: origin),
                NameMapping.isHostName(localName)
            else { return .immediate(zone: origin, answers: []) }
            return .mdns(MDNSPlan(link: link, zone: origin, localName: localName, type: question.type))
        }
        if let enumeration = Self.enumerationLabel(relative) {
            return .immediate(
                zone: origin,
                answers: domainEnumeration(
                    enumeration, question: question, link: link,
                    origin: origin, isReverse: isReverse, relative: relative))
        }
        if Self.isPushService(relative) { return .immediate(zone: origin, answers: pushService(question)) }
        if Self.isMetadataName(relative) { return .immediate(zone: origin, answers: []) }
        // A type that cannot exist at this name's place (the A and NS probes of QNAME
        // minimisation, RFC 9156): NODATA at once, never an mDNS query. Below a link zone,
        // DNS-SD's structure decides; in a reverse zone only a whole address holds a PTR.
        if isReverse
            ? (question.type != .ptr && question.type != .any) || !IPPrefix.isReverseAddress(question.name)
            : ServiceNamePosition(forward: relative)?.excludes(question.type) ?? false
        {
            return .immediate(zone: origin, answers: [])
        }
        // A service type this link does not share: empty, and never asked of mDNS.
        if !isReverse, link.services.hides(relative) {
            return .immediate(zone: origin, answers: [])
        }

        let localName: DNSName
        if isReverse {
            localName = question.name  // §5.4: reverse queries go to mDNS unchanged.
        } else {
            guard let mapped = NameMapping.toLocal(question.name, zone: origin) else {
                return .immediate(zone: origin, answers: [])
            }
            localName = mapped
        }
        return .mdns(MDNSPlan(link: link, zone: origin, localName: localName, type: question.type))
    }

    /// `records` without the PTRs that name a zone of a link `client` may not see (domain
    /// enumeration lists only the zones a client may browse; `Link.clients`).
    public func visible(_ records: [ResourceRecord], to client: DNSClient) -> [ResourceRecord] {
        guard hasLinkViews else { return records }
        return records.filter { record in
            guard case .ptr(let target) = record.rdata, let link = zone(containing: target)?.link else { return true }
            return link.isVisible(to: client)
        }
    }

    /// The record types the name of `plan` can hold, each asked of mDNS to synthesize its NSEC
    /// (§5.5.3): the types of its place in DNS-SD's structure (`ServiceNamePosition`), a host
    /// name's addresses, a reverse address's PTR; none for a name that holds nothing.
    public func recordTypes(at plan: MDNSPlan) -> [RRType] {
        guard let kind = zone(containing: plan.zone)?.kind else { return [] }
        let name = plan.localName
        switch kind {
        case .reverse:
            return IPPrefix.isReverseAddress(name) ? [.ptr] : []
        case .hosts:
            return NameMapping.isHostName(name) ? [.a, .aaaa] : []
        case .forward:
            let relative = name.labels(before: Self.local) ?? []
            if let position = ServiceNamePosition(forward: relative) {
                return plan.link.services.hides(relative) ? [] : position.recordTypes
            }
            // A host, or a name under one (macOS publishes `_kerberos.<host>.local` TXT).
            return NameMapping.isHostName(name) ? [.a, .aaaa] : [.a, .aaaa, .txt]
        }
    }

    /// The types at a name answered from configuration (domain enumeration, the Push SRV,
    /// the metadata names of §6.4); nil for a name answered from mDNS.
    private func configuredTypes(
        _ name: DNSName, relative: [[UInt8]], link: Link, origin: DNSName, isReverse: Bool
    ) -> [RRType]? {
        func holds(_ type: RRType, _ answers: [ResourceRecord]) -> [RRType] { answers.isEmpty ? [] : [type] }
        if let label = Self.enumerationLabel(relative) {
            let question = Question(name: name, type: .ptr)
            let targets = domainEnumeration(
                label, question: question, link: link, origin: origin, isReverse: isReverse, relative: relative)
            return holds(.ptr, targets)
        }
        if Self.isPushService(relative) { return holds(.srv, pushService(Question(name: name, type: .srv))) }
        return Self.isMetadataName(relative) ? [] : nil
    }

    /// `b`, `db`, `lb`, `r`, `dr` followed by `_dns-sd._udp` (RFC 6763 §11).
    private static func enumerationLabel(_ relative: [[UInt8]]) -> String? {
        guard relative.count >= 3 else { return nil }
        guard DNSName.labelsEqual(relative[1], Array("_dns-sd".utf8)),
            DNSName.labelsEqual(relative[2], Array("_udp".utf8))
        else { return nil }
        let first = String(decoding: relative[0], as: UTF8.self).lowercased()
        return ["b", "db", "lb", "r", "dr"].contains(first) ? first : nil
    }

    /// `_dns-update*`, `_dns-llq*` SRV names at the apex (§6.4), and `_dns-push-tls` when Push
    /// is off: answered negatively at once (no update, no LLQ).
    private static func isMetadataName(_ relative: [[UInt8]]) -> Bool {
        guard relative.count == 2 else { return false }
        let service = String(decoding: relative[0], as: UTF8.self).lowercased()
        let proto = String(decoding: relative[1], as: UTF8.self).lowercased()
        switch (service, proto) {
        case ("_dns-update", "_udp"), ("_dns-update", "_tcp"), ("_dns-update-tls", "_tcp"),
            ("_dns-push-tls", "_tcp"), ("_dns-llq", "_udp"), ("_dns-llq", "_tcp"), ("_dns-llq-tls", "_tcp"):
            return true
        default:
            return false
        }
    }

    private static func isPushService(_ relative: [[UInt8]]) -> Bool {
        relative.count == 2 && DNSName.labelsEqual(relative[0], Array("_dns-push-tls".utf8))
            && DNSName.labelsEqual(relative[1], Array("_tcp".utf8))
    }

    /// RFC 8766 §6.4 / RFC 8765 §6.1: the SRV names the proxy's own host and the TLS port.
    private func pushService(_ question: Question) -> [ResourceRecord] {
        guard let push = configuration.push, question.type == .srv || question.type == .any else { return [] }
        return [
            ResourceRecord(
                name: question.name, type: .srv, ttl: configuration.ttlCap,
                rdata: .srv(priority: 0, weight: 0, port: push.port, target: configuration.serverName))
        ]
    }

    /// A/AAAA of the proxy's own name while Push is advertised, so the SRV target resolves
    /// here even without a parent zone entry. Nil for every other question.
    private func serverAddresses(_ question: Question) -> [ResourceRecord]? {
        guard let push = configuration.push, question.name == configuration.serverName else { return nil }
        let wanted: [RRType] = question.type == .any ? [.a, .aaaa] : [question.type]
        guard wanted.allSatisfy({ $0 == .a || $0 == .aaaa }) else { return nil }
        return push.addresses.compactMap { address in
            let type: RRType = address.count == 4 ? .a : .aaaa
            guard wanted.contains(type) else { return nil }
            return ResourceRecord(
                name: question.name, type: type, ttl: configuration.ttlCap,
                rdata: address.count == 4 ? .a(address) : .aaaa(address))
        }
    }

    private func domainEnumeration(
        _ label: String, question: Question, link: Link, origin: DNSName, isReverse: Bool, relative: [[UInt8]]
    ) -> [ResourceRecord] {
        guard question.type == .ptr || question.type == .any else { return [] }
        if isReverse {
            // Only `<b|db|lb>._dns-sd._udp.<subnet base reversed>` exists; other names under
            // the reverse zone with these labels are empty, and never asked of mDNS (§6.5).
            let parent = question.name.parent.parent.parent
            guard link.subnets.contains(where: { $0.enumerationDomain == parent }) else { return [] }
        } else if relative.count != 3 {
            return []
        }
        let targets: [DNSName]
        switch label {
        case "b", "lb": targets = browseDomains(askedIn: link)
        case "db": targets = [link.zone]  // must be one of the `b` domains (RFC 8766 §5.2.1)
        default: targets = []  // r/dr: registration is impossible here
        }
        return targets.map {
            ResourceRecord(name: question.name, type: .ptr, ttl: configuration.ttlCap, rdata: .ptr($0))
        }
    }
}

/// The administrative records of a zone (RFC 8766 §6.1, §6.2).
public struct ZoneRecords: Sendable {
    public let origin: DNSName
    let configuration: ProxyConfiguration
    /// The link's own name servers, if it has any (`Link.nameServers`).
    private let linkNameServers: [DNSName]?

    /// The records of `origin`, a zone of `link` (nil: none of a link's, such as `serverName`).
    /// Made for every planned query: it keeps references and builds nothing until asked.
    public init(origin: DNSName, link: Link?, configuration: ProxyConfiguration) {
        self.origin = origin
        self.configuration = configuration
        self.linkNameServers = link?.nameServers
    }

    /// Every proxy of the zone, the first one the SOA MNAME.
    var nameServers: [DNSName] { linkNameServers ?? configuration.effectiveNameServers }

    /// MNAME the first name server (RFC 8766 §6.1: this proxy's name, or with fellow proxies
    /// the same for all), SERIAL 0 (M), REFRESH 7200, RETRY 3600, EXPIRE 86400, MINIMUM 10; TTL ≤ 10 so the
    /// negative-caching time is 10 s (RFC 2308 §5).
    public var soa: ResourceRecord { soa(negativeTTL: 10) }

    /// The SOA with a negative-caching time (RFC 2308 §5: the lesser of the SOA's TTL and its
    /// MINIMUM) of at most `ttl`: shorter for a negative answer given before mDNS has had
    /// its full say (`DiscoveryProxy.provisionalTTL`).
    public func soa(negativeTTL ttl: UInt32) -> ResourceRecord {
        let rname = configuration.hostmaster ?? ((try? origin.prepending([Array("hostmaster".utf8)])) ?? origin)
        let limit = min(ttl, configuration.ttlCap)
        let soa = RData.SOA(
            mname: nameServers[0], rname: rname, serial: 0, refresh: 7200, retry: 3600,
            expire: 86400,
            minimum: limit)
        return ResourceRecord(name: origin, type: .soa, ttl: limit, rdata: .soa(soa))
    }

    /// Every proxy of the zone (§6.2).
    public var ns: [ResourceRecord] {
        nameServers.map {
            ResourceRecord(name: origin, type: .ns, ttl: configuration.ttlCap, rdata: .ns($0))
        }
    }
}

// MARK: - Names between a zone and .local

/// `.local` ↔ zone translation of names and RDATA (RFC 8766 §5.1, §5.5): the one place
/// names cross between a link's zone and mDNS.
enum NameMapping {
    /// A name of `zone` as asked on the link (§5.1): the zone suffix replaced by `local.`.
    /// Nil when the name is not in the zone, or too long once rewritten.
    static func toLocal(_ name: DNSName, zone: DNSName) -> DNSName? {
        name.replacingSuffix(zone, with: Catalog.local)
    }

    /// A `.local` name as shown in `zone`, or in `hostZone` when it is a host name (one label
    /// under `.local`, RFC 6762 §3; RFC 8766 §5.3's LDH zone); nil when not in `.local` or
    /// too long for the zone (over 255 octets, RFC 1035 §2.3.4).
    static func toZone(_ name: DNSName, zone: DNSName, hostZone: DNSName? = nil) -> DNSName? {
        name.replacingSuffix(Catalog.local, with: hostZone.flatMap { isHostName(name) ? $0 : nil } ?? zone)
    }

    /// One label under `.local` that is not a DNS-SD structure label (`_tcp`, `_services`).
    static func isHostName(_ name: DNSName) -> Bool {
        guard let relative = name.labels(before: Catalog.local), relative.count == 1 else { return false }
        return relative[0].first != UInt8(ascii: "_")
    }

    /// Rewrites `.local` names inside RDATA into `zone` (names elsewhere are left alone,
    /// §5.5: "names that do not end in .local are not translated"), turns an empty TXT into
    /// the single zero byte RFC 6763 §6.1 requires, and suppresses link-local addresses, and
    /// private ones for a client of another realm (§5.5.2, `PrivateRealms`), when asked.
    /// Returns nil for a record that must not be shown, including one with a `.local` name
    /// that is too long for the zone (over 255 octets once rewritten, RFC 1035 §2.3.4): left
    /// as it is it would leak `.local` into a unicast answer.
    static func toZone(
        _ rdata: RData, zone: DNSName, hostZone: DNSName? = nil, suppressLinkLocal: Bool, hidePrivate: Bool = false
    ) -> RData? {
        switch rdata {
        case .a(let address), .aaaa(let address):
            if suppressLinkLocal && IPPrefix.isLinkLocal(address) { return nil }
            return hidePrivate && PrivateRealms.isPrivate(address) ? nil : rdata
        case .txt(let bytes):
            return bytes.isEmpty ? .txt([0]) : rdata
        default:
            var unmappable = false
            let mapped = rdata.mapNames { name in
                guard name.isSubdomain(of: Catalog.local) else { return name }
                guard let inZone = toZone(name, zone: zone, hostZone: hostZone) else {
                    unmappable = true
                    return name
                }
                return inZone
            }
            return unmappable ? nil : mapped
        }
    }
}

/// Where a name below a link zone sits in DNS-SD's naming structure (RFC 6763), and so which
/// record types it can hold. Decided from the labels alone, before any mDNS query.
///
/// Resolvers that minimise query names (RFC 9156) walk down to a browse name one label at a
/// time, asking A or NS at `_tcp.<zone>`, `_ipp._tcp.<zone>` and
/// `Printer._ipp._tcp.<zone>`. None of these names can hold an address, so an mDNS query for
/// one would only ever end in the negative timeout. The rule, for a name whose label right
/// below the zone begins with an underscore (DNS-SD structure starts there, as service types
/// sit directly under the domain, RFC 6763 §4.1, §7):
///
/// | labels below the zone | position | types |
/// |---|---|---|
/// | `_tcp`, `_udp` | protocol (§7) | none: an empty non-terminal |
/// | `_dns-sd._udp` | enumeration parent (§9, §11) | none |
/// | `_services._dns-sd._udp` | service type enumeration (§9) | PTR |
/// | `<other>._dns-sd._udp` | not defined (b/db/lb/r/dr are answered before this) | none |
/// | `_service._tcp`, `_service._udp` | service type (§4.1, §7) | PTR |
/// | `_sub._service._proto` | subtype parent (§7.1) | none |
/// | `<subtype>._sub._service._proto` | subtype (§7.1) | PTR |
/// | `<instance>._service._proto` | service instance (§4.1, §6) | SRV, TXT |
/// | anything else | not a DNS-SD name | none |
///
/// "None" means the name exists at most as an empty non-terminal: every question there is
/// NOERROR with no data at once, never NXDOMAIN (RFC 8020), as RFC 8766 §5.6 says of names
/// below a link zone. ANY at a name with types is left to mDNS's cache (`answerAny`).
///
/// A name whose label right below the zone has no underscore is a host or something under one
/// (macOS publishes `_kerberos.<host>.local` TXT), and is not restricted: `init` then returns
/// nil. Reverse zones follow their own rule (`IPPrefix.isReverseAddress`).
enum ServiceNamePosition: Equatable, Sendable {
    case serviceType
    case subtype
    case serviceTypeEnumeration
    case instance
    /// An empty non-terminal of the structure, or a name that DNS-SD never uses.
    case empty

    /// The position of a name from its labels below a forward (link) zone, leftmost first;
    /// nil when DNS-SD structure does not apply (a host name, or below one).
    init?(forward relative: [[UInt8]]) {
        guard let top = relative.last, Self.isUnderscored(top) else { return nil }
        let count = relative.count
        guard Self.isProtocol(top) else {
            self = .empty
            return
        }
        if count == 1 {
            self = .empty  // `_tcp`, `_udp`
            return
        }
        let service = relative[count - 2]
        guard Self.isUnderscored(service) else {
            self = .empty  // `host._tcp`: not a service type
            return
        }
        if Self.is(service, Label.dnsSD) && Self.is(top, Label.udp) {
            self = count == 3 && Self.is(relative[0], Label.services) ? .serviceTypeEnumeration : .empty
            return
        }
        switch count {
        case 2: self = .serviceType
        case 3: self = Self.is(relative[0], Label.sub) ? .empty : .instance
        case 4: self = Self.is(relative[1], Label.sub) ? .subtype : .empty
        default: self = .empty
        }
    }

    /// The record types a name in this position can hold.
    var recordTypes: [RRType] {
        switch self {
        case .serviceType, .subtype, .serviceTypeEnumeration: [.ptr]
        case .instance: [.srv, .txt]
        case .empty: []
        }
    }

    /// Whether a question of `type` here can be answered only negatively, at once.
    func excludes(_ type: RRType) -> Bool {
        type == .any ? recordTypes.isEmpty : !recordTypes.contains(type)
    }

    private static func isUnderscored(_ label: [UInt8]) -> Bool { label.first == UInt8(ascii: "_") }

    private static func isProtocol(_ label: [UInt8]) -> Bool { self.is(label, Label.tcp) || self.is(label, Label.udp) }

    private static func `is`(_ label: [UInt8], _ known: [UInt8]) -> Bool { DNSName.labelsEqual(label, known) }

    /// The labels the rule names, made once (planning runs for every query not replayed).
    private enum Label {
        static let tcp = Array("_tcp".utf8)
        static let udp = Array("_udp".utf8)
        static let dnsSD = Array("_dns-sd".utf8)
        static let services = Array("_services".utf8)
        static let sub = Array("_sub".utf8)
    }
}

// MARK: - Service filters

/// Allow and deny lists of service types such as `_ipp._tcp` (compared case-insensitively).
/// With an allow list only those types are shared; the deny list removes types in any case.
public struct ServiceFilter: Hashable, Sendable {
    public var allow: Set<String>?
    public var deny: Set<String>

    public init(allow: [String]? = nil, deny: [String] = []) {
        self.allow = allow.map { Set($0.map { $0.lowercased() }) }
        self.deny = Set(deny.map { $0.lowercased() })
    }

    public var isOpen: Bool { allow == nil && deny.isEmpty }

    /// The types every allow list of `filters` names, sorted; nil when none has one.
    public static func allowedByAll(_ filters: [ServiceFilter]) -> [String]? {
        let lists = filters.compactMap(\.allow)
        guard let first = lists.first else { return nil }
        return first.filter { type in lists.allSatisfy { $0.contains(type) } }.sorted()
    }

    public func permits(_ serviceType: String) -> Bool {
        let type = serviceType.lowercased()
        if deny.contains(type) { return false }
        return allow?.contains(type) ?? true
    }

    /// Whether a name, by its labels before the zone, belongs to a service type this filter
    /// does not share (the `_dns-sd._udp` enumeration names are always shared).
    public func hides(_ relative: [[UInt8]]) -> Bool {
        guard !isOpen, let type = Self.serviceType(of: relative), type != "_dns-sd._udp" else { return false }
        return !permits(type)
    }

    /// The service type a name belongs to, from its labels before the zone: the two labels
    /// ending in `_tcp`/`_udp` (`My Printer._ipp._tcp` → `_ipp._tcp`, also for subtypes).
    /// Nil for names that are not under a service type (host names).
    public static func serviceType(of relative: [[UInt8]]) -> String? {
        guard relative.count >= 2 else { return nil }
        for index in stride(from: relative.count - 1, through: 1, by: -1) {
            let proto = String(decoding: relative[index], as: UTF8.self).lowercased()
            guard proto == "_tcp" || proto == "_udp", relative[index - 1].first == UInt8(ascii: "_") else { continue }
            return String(decoding: relative[index - 1], as: UTF8.self).lowercased() + "." + proto
        }
        return nil
    }
}
