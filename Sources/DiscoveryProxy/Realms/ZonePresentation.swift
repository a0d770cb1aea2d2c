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
