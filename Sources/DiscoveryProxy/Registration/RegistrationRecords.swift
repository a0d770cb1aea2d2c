import DNSWire
import MDNS

/// What the advertising proxy publishes for the registrations of one link
/// (draft-ietf-dnssd-advertising-proxy-06 §2.1): one `MDNSGroup` per host, holding the host's
/// A/AAAA records and, for each of its service instances, the SRV, the TXT records byte for
/// byte and the PTRs of the service type and its subtypes.
///
/// Names go to `.local` by replacing the registration's zone (§2.1.2, the first of its three
/// ways): the table holds each name in the zone of the link it was registered on
/// (`printer.lab1.example.`), and the link's mDNS sees `printer.local.`. The other two ways keep
/// the zone in the mDNS name, which no `.local` browser on the link would ever find. A
/// device that registered in `default.service.arpa.` thus has the same name over mDNS as it
/// would have had by multicast, and unicast clients find it in the link's zone through the
/// proxy's own browse of the link, like any other service there.
///
/// Link-local addresses are published: this is the link they belong to (the proxy's answers
/// in the link's zone drop them, RFC 8766 §5.5.2).
struct RegistrationRecords {
    static let local = try! DNSName("local.")

    /// `name`, in `zone`, as the same name under `local.`; nil if it is not in `zone`.
    static func local(_ name: DNSName, in zone: DNSName) -> DNSName? {
        guard let relative = name.labels(before: zone) else { return nil }
        return try? DNSName(labels: relative + local.labels)
    }

    /// The group key of a host: one group per host name and interface.
    static func key(host: DNSName, interface: String) -> MDNSGroup.Key {
        MDNSGroup.Key(interface: interface, name: "srp " + host.description)
    }

    /// Every host's group, on the link whose zone holds it (`links`); hosts of a link no longer
    /// served are left out.
    static func groups(of table: RegistrationTable, links: [Link]) -> [MDNSGroup] {
        table.hosts.keys.compactMap { host in
            guard let link = links.first(where: { host.isSubdomain(of: $0.zone) }) else { return nil }
            return group(host: host, link: link, table: table)
        }
    }

    /// The group of `host` on `link`, from `table`; nil when the table no longer holds it.
    static func group(host: DNSName, link: Link, table: RegistrationTable) -> MDNSGroup? {
        guard let entry = table.hosts[host], let hostName = local(host, in: link.zone) else { return nil }
        var records: [MDNSRecord] = []
        for address in entry.addresses {
            switch address {
            case .a(let bytes): records.append(MDNSRecord(name: hostName, type: .a, rdata: bytes))
            case .aaaa(let bytes): records.append(MDNSRecord(name: hostName, type: .aaaa, rdata: bytes))
            default: break
            }
        }
        let target = hostName.wireBytes
        let services = table.services(of: host).sorted {
            $0.instance.wireBytes.lexicographicallyPrecedes($1.instance.wireBytes)
        }
        for service in services {
            guard let instance = local(service.instance, in: link.zone) else { continue }
            let srv = service.srv
            let fields = [srv.priority, srv.weight, srv.port].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
            records.append(MDNSRecord(name: instance, type: .srv, rdata: fields + target))
            for txt in service.txt { records.append(MDNSRecord(name: instance, type: .txt, rdata: txt)) }
            for serviceName in service.serviceNames {
                guard let type = local(serviceName, in: link.zone) else { continue }
                records.append(MDNSRecord(name: type, type: .ptr, rdata: instance.wireBytes))
            }
        }
        // A fixed order, so that a renewal with the same contents is the same group (and is
        // left alone by the publisher).
        records.sort { a, b in
            if a.name != b.name { return a.name.wireBytes.lexicographicallyPrecedes(b.name.wireBytes) }
            if a.type != b.type { return a.type.rawValue < b.type.rawValue }
            return a.rdata.lexicographicallyPrecedes(b.rdata)
        }
        return MDNSGroup(key: key(host: host, interface: link.interface), records: records)
    }
}

/// One registered host as the status page and `/api/services` show it.
public struct RegistrationStatus: Sendable, Codable, Equatable {
    /// As registered, in the link's zone (`printer.lab1.example.`).
    public var host: String
    /// The link's interface; empty when its link is no longer served.
    public var link: String
    /// The address the last update came from.
    public var source: String
    /// Seconds until the lease ends, and the KEY-LEASE (the name's claim).
    public var leaseLeft: Int
    public var keyLeaseLeft: Int
    /// RFC 4034 key tag of the host's KEY.
    public var keyTag: Int
    /// Its service instances, relative to the zone (`Printer 1._ipp._tcp`, not escaped).
    public var instances: [String]

    public init(
        host: String, link: String, source: String, leaseLeft: Int, keyLeaseLeft: Int, keyTag: Int,
        instances: [String]
    ) {
        self.host = host
        self.link = link
        self.source = source
        self.leaseLeft = leaseLeft
        self.keyLeaseLeft = keyLeaseLeft
        self.keyTag = keyTag
        self.instances = instances
    }
}

extension Registrar {
    /// Every registered host, by name, with the time left at `now` (wall-clock seconds).
    @_optimize(size)  // cold: the status page
    public func status() -> [RegistrationStatus] {
        let (table, links) = (self.table, self.links)
        let now = currentTime
        var services: [DNSName: [String]] = [:]
        for service in table.services.values {
            let link = links.first { service.instance.isSubdomain(of: $0.zone) }
            let relative = link.flatMap { service.instance.labels(before: $0.zone) } ?? service.instance.labels
            services[service.host, default: []].append(
                relative.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "."))
        }
        return table.hosts.values.sorted { $0.name.description < $1.name.description }.map { host in
            RegistrationStatus(
                host: host.name.description,
                link: links.first { host.name.isSubdomain(of: $0.zone) }?.interface ?? "",
                source: host.source.isEmpty ? "" : IPPrefix.format(host.source),
                leaseLeft: Int(max(0, host.expiry - now)),
                keyLeaseLeft: Int(max(0, (table.claims[host.name]?.expiry ?? host.expiry) - now)),
                keyTag: Int(host.key.tag), instances: (services[host.name] ?? []).sorted())
        }
    }
}
