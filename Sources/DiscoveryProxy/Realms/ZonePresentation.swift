import DNSWire

/// How one link's cached records are shown to clients (RFC 8766 §5.5): `.local` names
/// rewritten into the link's zone, link-local addresses left out when suppression is on
/// (§5.5.2), private addresses left out for a client of another realm (§5.5.2,
/// `PrivateRealms`), and service types the link does not share left out of
/// `_services._dns-sd._udp`. Unicast answers (`AnswerBuilder`), DNS Push (`Subscriber`) and
/// the status page all show records through it, so a record reads the same everywhere.
struct ZonePresentation: Sendable {
    var zone: DNSName
    /// Where host names go (`Link.hostZone`); nil: `zone`.
    var hostZone: DNSName?
    var services: ServiceFilter
    var suppressLinkLocal: Bool
    var hidesPrivateAddresses: Bool

    init(
        zone: DNSName, hostZone: DNSName? = nil, services: ServiceFilter = ServiceFilter(), suppressLinkLocal: Bool,
        hidesPrivateAddresses: Bool = false
    ) {
        self.zone = zone
        self.hostZone = hostZone
        self.services = services
        self.suppressLinkLocal = suppressLinkLocal
        self.hidesPrivateAddresses = hidesPrivateAddresses
    }

    init(link: Link, suppressLinkLocal: Bool, hidesPrivateAddresses: Bool = false) {
        self.init(
            zone: link.zone, hostZone: link.hostZone, services: link.services, suppressLinkLocal: suppressLinkLocal,
            hidesPrivateAddresses: hidesPrivateAddresses)
    }

    /// The RDATA a client is given for `record`; nil when the record is not shown (a
    /// suppressed address, a filtered service type, undecodable or unmappable RDATA).
    func rdata(of record: CachedRecord) -> RData? {
        if !services.isOpen, record.type == .ptr, let target = record.ptrTarget,
            let type = ServiceFilter.serviceType(of: target.labels.dropLast().map { $0 }), !services.permits(type)
        {
            return nil
        }
        return rewritten(record)
    }

    /// The RDATA in the zone without the service filter: what a RECONFIRM names, and the
    /// status page's view of a record.
    func rewritten(_ record: CachedRecord) -> RData? {
        record.rdata.flatMap {
            NameMapping.toZone(
                $0, zone: zone, hostZone: hostZone, suppressLinkLocal: suppressLinkLocal,
                hidePrivate: hidesPrivateAddresses)
        }
    }

    /// The record's owner name in the zone (for additional records); nil when too long.
    func owner(of record: CachedRecord) -> DNSName? {
        NameMapping.toZone(record.localName, zone: zone, hostZone: hostZone)
    }
}

/// RFC 8766 §5.5.2: "DNS SRV records that reference target host names that have no addresses
/// usable by the requester should be suppressed, and likewise, DNS-SD service browsing PTR
/// records that point to unusable SRV records". The proxy can tell only for a target whose
/// addresses it fully knows (`Snapshot.settledHosts`) and that has at least one, all of them
/// left out for this client (link-local, or private in another realm): a host it knows
/// nothing about, or no address of yet, is shown, so that lost mDNS packets never hide a
/// service. Applies while link-local suppression is on.
struct UsableTargets {
    /// Hosts with known addresses, none of them shown to this client.
    private var unusableHosts: Set<DNSName> = []
    /// Instances all of whose known SRV records point to unusable hosts.
    private var unusableInstances: Set<DNSName> = []

    init(snapshot: Snapshot, presentation: ZonePresentation, enabled: Bool) {
        guard enabled, !snapshot.settledHosts.isEmpty else { return }
        var addresses: [DNSName: (known: Int, usable: Int)] = [:]
        for record in snapshot.additional where record.type == .a || record.type == .aaaa {
            guard snapshot.settledHosts.contains(record.localName) else { continue }
            addresses[record.localName, default: (0, 0)].known += 1
            if presentation.rewritten(record) != nil { addresses[record.localName, default: (0, 0)].usable += 1 }
        }
        unusableHosts = Set(addresses.filter { $0.value.known > 0 && $0.value.usable == 0 }.keys)
        guard !unusableHosts.isEmpty else { return }
        var services: [DNSName: (count: Int, unusable: Int)] = [:]
        for record in snapshot.answers + snapshot.additional where record.type == .srv {
            guard let target = record.localTarget else { continue }
            services[record.localName, default: (0, 0)].count += 1
            if unusableHosts.contains(target) { services[record.localName, default: (0, 0)].unusable += 1 }
        }
        unusableInstances = Set(services.filter { $0.value.unusable == $0.value.count }.keys)
    }

    /// No host is known to be unusable: every record is shown.
    var showsEverything: Bool { unusableHosts.isEmpty }

    /// Whether `record` is shown: not an SRV to an unusable host, nor a PTR to (or the TXT of)
    /// an instance whose every SRV is.
    func shows(_ record: CachedRecord) -> Bool {
        guard !unusableHosts.isEmpty else { return true }
        switch record.type {
        case .srv: return record.localTarget.map { !unusableHosts.contains($0) } ?? true
        case .ptr: return record.localTarget.map { !unusableInstances.contains($0) } ?? true
        case .txt: return !unusableInstances.contains(record.localName)
        default: return true
        }
    }
}
