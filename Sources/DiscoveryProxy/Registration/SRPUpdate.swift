import DNSWire

/// A DNS Update that is an SRP update (RFC 9665 §3.3), read into what it registers: one host
/// with its key and addresses, the service instances it describes, and the leases it asks
/// for. `read` checks the instruction structure (§3.3.1), the update's requirements (§3.3.2),
/// RRset TTLs (§4) and the SIG(0) signature by the host's key (§3.3.3); first come, first
/// served, which needs the names already held, is the registrar's.
public struct SRPUpdate: Hashable, Sendable {
    /// The zone of the zone section: `default.service.arpa.` or a link's own.
    public var zone: DNSName
    public var host: Host
    /// Each Service Description Instruction, in the order of the update.
    public var services: [Service]
    /// The Update Lease option as sent (RFC 9664).
    public var lease: UpdateLease
    /// The key tag of the signature, for logs and the status page.
    public var keyTag: UInt16

    /// The Host Description Instruction (§3.3.1.3).
    public struct Host: Hashable, Sendable {
        public var name: DNSName
        public var key: SIG0Key
        /// A and AAAA RDATA; none when the update removes the host (LEASE 0).
        public var addresses: [RData]
        public var ttl: UInt32
    }

    /// A Service Description Instruction (§3.3.1.2) with the Service Discovery Instructions
    /// (§3.3.1.1) that point at it.
    public struct Service: Hashable, Sendable {
        public var instance: DNSName
        /// Its SRV's fields but the target (the host); nil when the update deletes the instance.
        public var srv: SRV?
        /// Each TXT RDATA, byte for byte.
        public var txt: [[UInt8]]
        /// The service type (`_ipp._tcp.<zone>`) and subtypes (`_x._sub._ipp._tcp.<zone>`)
        /// whose PTRs this update adds; the whole set (§3.3.4: subtypes are replaced).
        public var serviceNames: [DNSName]
        public var ttl: UInt32

        public var isDeleted: Bool { srv == nil }
    }

    /// An SRV's priority, weight and port; its target is the update's host (§3.3.1.2).
    public struct SRV: Hashable, Sendable {
        public var priority: UInt16
        public var weight: UInt16
        public var port: UInt16

        public init(priority: UInt16, weight: UInt16, port: UInt16) {
            self.priority = priority
            self.weight = weight
            self.port = port
        }
    }

    /// Why an update is not taken, and the RCODE that says so.
    public struct Rejection: Error, Hashable, Sendable, CustomStringConvertible {
        public var rcode: RCode
        public var reason: String
        public var description: String { "\(rcode): \(reason)" }

        /// Not a DNS Update that RFC 2136 §3 accepts.
        static func formErr(_ reason: String) -> Rejection { Rejection(rcode: .formErr, reason: reason) }
        /// A DNS Update that is not an SRP update (§3.3.2: refused, as we do no other updates),
        /// or one whose signature does not verify (§3.3.3).
        static func refused(_ reason: String) -> Rejection { Rejection(rcode: .refused, reason: reason) }
    }

    /// Reads `message`, decoded from `wire`, as an SRP update for one of `zones`. A removal
    /// (LEASE 0) may leave the host's KEY out ("Removing All Published Services": no adds for
    /// the host name); its signature is then checked with `registeredKey`, the key that holds
    /// the name.
    public static func read(
        _ message: Message, wire: [UInt8], zones: [DNSName], registeredKey: (DNSName) -> SIG0Key? = { _ in nil }
    ) -> Result<SRPUpdate, Rejection> {
        Result { () throws(Rejection) in
            try SRPUpdate(message, wire: wire, zones: zones, registeredKey: registeredKey)
        }
    }

    private init(
        _ message: Message, wire: [UInt8], zones: [DNSName], registeredKey: (DNSName) -> SIG0Key?
    ) throws(Rejection) {
        // RFC 2136 §3.1.1: one zone, type SOA.
        guard message.opcode == .update, !message.isResponse else { throw .formErr("not a DNS Update") }
        guard message.questions.count == 1, message.questions[0].type == .soa else {
            throw .formErr("the zone section must hold one SOA question (RFC 2136 §3.1.1)")
        }
        let zone = message.questions[0].name
        guard zones.contains(zone) else { throw .refused("\(zone) is no zone of ours (RFC 2136 §3.1.1: NOTAUTH)") }
        guard message.answers.isEmpty else {
            throw .refused("an update with prerequisites is not an SRP update (§3.3.2)")
        }
        guard let lease = message.edns?.options.lazy.compactMap(UpdateLease.init).first else {
            throw .refused("no Update Lease option: not an SRP update (§3.3.2)")
        }
        if let keyLease = lease.keyLease, keyLease < lease.lease {
            throw .refused("KEY-LEASE \(keyLease) is shorter than LEASE \(lease.lease) (§3.3.2)")
        }
        let instructions = try Instructions(message.authority, zone: zone)
        let (host, services) = try instructions.hostAndServices(
            registeredKey: lease.lease == 0 ? registeredKey : { _ in nil })
        try Self.checkTTLs(message.authority)

        // §3.3.3: the SIG(0), last in the additional section, by the host's key.
        let signature: SIG0?
        do {
            signature = try SIG0.find(in: wire)
        } catch {
            throw .formErr("unreadable SIG(0): \(error)")
        }
        guard let signature else { throw .refused("no SIG(0) signature (§3.2.4)") }
        guard signature.isValid(for: host.key) else {
            throw .refused("the SIG(0) signature does not verify with the host's KEY (tag \(host.key.tag)) (§3.3.3)")
        }
        self.zone = zone
        self.host = host
        self.services = services
        self.lease = lease
        self.keyTag = signature.keyTag
    }

    /// The same update with its names moved from its zone into `zone` (the zone of the link
    /// it came from: a registration in `default.service.arpa.` lands there). REFUSED when a
    /// name grows past 255 octets.
    public func moved(to zone: DNSName) -> Result<SRPUpdate, Rejection> {
        guard zone != self.zone else { return .success(self) }
        let from = self.zone
        func move(_ name: DNSName) throws(Rejection) -> DNSName {
            guard let relative = name.labels(before: from), let moved = try? DNSName(labels: relative + zone.labels)
            else { throw .refused("\(name) does not fit in \(zone)") }
            return moved
        }
        return Result { () throws(Rejection) in
            var update = self
            update.zone = zone
            update.host.name = try move(host.name)
            for index in update.services.indices {
                update.services[index].instance = try move(update.services[index].instance)
                var names: [DNSName] = []
                for name in update.services[index].serviceNames { names.append(try move(name)) }
                update.services[index].serviceNames = names
            }
            return update
        }
    }

    /// §4: every RRset an update adds has one TTL.
    private static func checkTTLs(_ updates: [ResourceRecord]) throws(Rejection) {
        var ttls: [RecordKey: UInt32] = [:]
        for record in updates where record.rrClass == .in {
            let key = RecordKey(name: record.name, type: record.type)
            if let ttl = ttls[key], ttl != record.ttl {
                throw .refused("\(record.name) \(record.type): TTLs \(ttl) and \(record.ttl) in one RRset (§4)")
            }
            ttls[key] = record.ttl
        }
    }
}

/// The update section sorted into RFC 2136 §2.5's four kinds, by owner name.
private struct Instructions {
    /// Names with a "Delete all RRsets from a name" (§2.5.3), in order.
    var deletedNames: [DNSName] = []
    /// "Add to an RRset" (§2.5.1) records, by owner.
    var adds: [DNSName: [ResourceRecord]] = [:]
    /// PTR adds and "Delete an RR from an RRset" (§2.5.4) PTRs: Service Discovery Instructions.
    var discovery: [(service: DNSName, instance: DNSName, isAdd: Bool)] = []

    init(_ updates: [ResourceRecord], zone: DNSName) throws(SRPUpdate.Rejection) {
        for record in updates {
            guard record.name.isSubdomain(of: zone) else {
                throw .refused("\(record.name) is outside the zone \(zone) (§3.3.1)")
            }
            switch (record.rrClass, record.type) {
            case (.any, .any):
                // RFC 2136 §3.4.1.3: TTL 0 and no RDATA.
                guard record.ttl == 0, record.rdata == .raw([]) else {
                    throw .formErr("\(record.name): a delete of all RRsets has TTL 0 and no RDATA")
                }
                guard !deletedNames.contains(record.name) else {
                    throw .refused("\(record.name): two deletes of all RRsets (§3.3.1)")
                }
                deletedNames.append(record.name)
            case (.in, .ptr):
                guard case .ptr(let instance) = record.rdata else { throw .formErr("\(record.name): bad PTR") }
                discovery.append((record.name, instance, true))
            case (.none, .ptr):
                guard record.ttl == 0, case .ptr(let instance) = record.rdata else {
                    throw .formErr("\(record.name): a PTR delete has TTL 0 and a target")
                }
                discovery.append((record.name, instance, false))
            case (.in, _):
                adds[record.name, default: []].append(record)
            case (.any, _), (.none, _):
                throw .refused("\(record.name) \(record.type): deleting one RRset or RR is no SRP instruction (§3.3.2)")
            default:
                throw .formErr("\(record.name): class \(record.rrClass) (RFC 2136 §3.4.1.3)")
            }
        }
    }

    /// The one Host Description and the Service Descriptions (§3.3.1, §3.3.2).
    func hostAndServices(registeredKey: (DNSName) -> SIG0Key?) throws(SRPUpdate.Rejection) -> (
        SRPUpdate.Host, [SRPUpdate.Service]
    ) {
        for name in adds.keys where !deletedNames.contains(name) {
            throw .refused("\(name): records added without a delete of the name first (§3.3.1)")
        }
        // A name that PTRs point at, or that has an SRV or TXT, describes a service; the rest
        // (a KEY and addresses) the host.
        let described = Set(discovery.map(\.instance))
        let isService = { (name: DNSName) in
            described.contains(name) || (adds[name] ?? []).contains { $0.type == .srv || $0.type == .txt }
        }
        let hosts = deletedNames.filter { !isService($0) }
        guard hosts.count == 1, let hostName = hosts.first else {
            throw .refused("\(hosts.count) Host Description Instructions; an SRP update has one (§3.3.2)")
        }
        let hostRecords = adds[hostName] ?? []
        let keys = hostRecords.filter { $0.type == .key }
        let key: SIG0Key
        let keyTTL: UInt32
        if hostRecords.isEmpty, let registered = registeredKey(hostName) {
            (key, keyTTL) = (registered, 0)  // a removal without the KEY: the registered one signs
        } else {
            guard keys.count == 1, case .raw(let keyRDATA) = keys[0].rdata, let sent = SIG0Key(rdata: keyRDATA) else {
                throw .refused("\(hostName): the Host Description adds exactly one KEY (§3.3.1.3)")
            }
            (key, keyTTL) = (sent, keys[0].ttl)
        }
        var addresses: [RData] = []
        for record in hostRecords where record.type != .key {
            guard record.type == .a || record.type == .aaaa else {
                throw .refused("\(hostName) \(record.type): a Host Description adds A, AAAA and KEY only (§3.3.1.3)")
            }
            addresses.append(record.rdata)
        }
        let host = SRPUpdate.Host(name: hostName, key: key, addresses: addresses, ttl: keyTTL)

        var services: [SRPUpdate.Service] = []
        for instance in deletedNames where instance != hostName {
            services.append(try service(instance, host: host))
        }
        for pointer in discovery {
            guard let service = services.first(where: { $0.instance == pointer.instance }) else {
                throw .refused("\(pointer.service) PTR \(pointer.instance): no Service Description for it (§3.3.1.1)")
            }
            guard pointer.isAdd == !service.isDeleted else {
                throw .refused(
                    "\(pointer.service) PTR \(pointer.instance): "
                        + (pointer.isAdd ? "added for a deleted instance" : "deleted for an instance with an SRV")
                        + " (§3.3.1.1)")
            }
        }
        return (host, services)
    }

    /// One Service Description Instruction (§3.3.1.2) and the PTRs that name it (§3.3.1.1).
    private func service(_ instance: DNSName, host: SRPUpdate.Host) throws(SRPUpdate.Rejection) -> SRPUpdate.Service {
        let records = adds[instance] ?? []
        var srv: SRPUpdate.SRV?
        var txt: [[UInt8]] = []
        var ttl = host.ttl
        for record in records {
            switch record.rdata {
            case .srv(let priority, let weight, let port, let target) where record.type == .srv:
                guard srv == nil else { throw .refused("\(instance): two SRVs (§3.3.1.2)") }
                guard target == host.name else {
                    throw .refused("\(instance): SRV target \(target) is not the host \(host.name) (§3.3.1.2)")
                }
                srv = SRPUpdate.SRV(priority: priority, weight: weight, port: port)
                ttl = record.ttl
            case .txt(let bytes) where record.type == .txt:
                txt.append(bytes)
            case .raw(let bytes) where record.type == .key:
                guard SIG0Key(rdata: bytes) == host.key else {
                    throw .refused("\(instance): its KEY is not the host's (§3.3.1.2)")
                }
            default:
                throw .refused(
                    "\(instance) \(record.type): a Service Description adds SRV, TXT and KEY only (§3.3.1.2)")
            }
        }
        if srv == nil, !txt.isEmpty { throw .refused("\(instance): TXT without an SRV (§3.3.1.2)") }
        if srv != nil, txt.isEmpty { throw .refused("\(instance): an SRV needs a TXT (§3.3.1.2)") }
        // Each PTR's owner is the instance's service type or one of its subtypes (RFC 6763 §7.1).
        let serviceType = instance.parent
        var serviceNames: [DNSName] = []
        for pointer in discovery where pointer.instance == instance {
            let isType = pointer.service == serviceType
            let isSubtype =
                pointer.service.labelCount == serviceType.labelCount + 2
                && pointer.service.dropping(labels: 2) == serviceType
                && pointer.service.labels.dropFirst().first.map { DNSName.labelsEqual($0, Array("_sub".utf8)) } == true
            guard isType || isSubtype else {
                throw .refused("\(pointer.service) PTR \(instance): not the instance's service type or a subtype of it")
            }
            if pointer.isAdd, !serviceNames.contains(pointer.service) { serviceNames.append(pointer.service) }
        }
        return SRPUpdate.Service(instance: instance, srv: srv, txt: txt, serviceNames: serviceNames, ttl: ttl)
    }
}

/// The leases a registrar grants (RFC 9665 §5.1, RFC 9664 §4): those asked for, within the
/// operator's bounds. The defaults are Apple's srp-mdns-proxy's: LEASE 30 s to 27 h, KEY-LEASE
/// 30 s to 7 days.
public struct LeaseBounds: Hashable, Sendable {
    /// Shortest and longest LEASE and KEY-LEASE granted, in seconds (bounds kept apart, so that
    /// a configuration can name each; `--check-config` says when a minimum passes its maximum).
    public var leaseMin: UInt32
    public var leaseMax: UInt32
    public var keyLeaseMin: UInt32
    public var keyLeaseMax: UInt32

    public static let `default` = LeaseBounds(lease: 30...97_200, keyLease: 30...604_800)

    public init(lease: ClosedRange<UInt32>, keyLease: ClosedRange<UInt32>) {
        self.leaseMin = lease.lowerBound
        self.leaseMax = lease.upperBound
        self.keyLeaseMin = keyLease.lowerBound
        self.keyLeaseMax = keyLease.upperBound
    }

    /// LEASE 0 removes the registration and stays 0 (so does a KEY-LEASE of 0, which gives up
    /// the name); a 4-octet option's KEY-LEASE is 7 × LEASE, as srp-mdns-proxy grants; KEY-LEASE
    /// is never shorter than LEASE (§3.3.2).
    public func grant(_ asked: UpdateLease) -> UpdateLease {
        let lease = asked.lease == 0 ? 0 : min(max(asked.lease, leaseMin), leaseMax)
        let askedKey = asked.keyLease ?? (asked.lease > UInt32.max / 7 ? .max : asked.lease * 7)
        let keyLease = askedKey == 0 ? 0 : max(min(max(askedKey, keyLeaseMin), keyLeaseMax), lease)
        return UpdateLease(lease: lease, keyLease: keyLease)
    }
}
