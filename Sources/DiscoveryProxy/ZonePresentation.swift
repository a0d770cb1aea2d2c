import DNSWire

/// How one link's cached records are shown to clients (RFC 8766 §5.5): `.local` names
/// rewritten into the link's zone, link-local addresses left out when suppression is on
/// (§5.5.2), and service types the link does not share left out of
/// `_services._dns-sd._udp`. Unicast answers (`AnswerBuilder`), DNS Push (`Subscriber`) and
/// the status page all show records through it, so a record reads the same everywhere.
struct ZonePresentation: Sendable {
    var zone: DNSName
    var services: ServiceFilter
    var suppressLinkLocal: Bool

    init(zone: DNSName, services: ServiceFilter = ServiceFilter(), suppressLinkLocal: Bool) {
        self.zone = zone
        self.services = services
        self.suppressLinkLocal = suppressLinkLocal
    }

    init(link: Link, suppressLinkLocal: Bool) {
        self.init(zone: link.zone, services: link.services, suppressLinkLocal: suppressLinkLocal)
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
        record.rdata.flatMap { NameMapping.toZone($0, zone: zone, suppressLinkLocal: suppressLinkLocal) }
    }

    /// The record's owner name in the zone (for additional records); nil when too long.
    func owner(of record: CachedRecord) -> DNSName? {
        NameMapping.toZone(record.localName, zone: zone)
    }
}
