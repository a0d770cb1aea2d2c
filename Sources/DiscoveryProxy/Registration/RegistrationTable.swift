import DNSWire

/// What an SRP registrar holds (RFC 9665 §3.3.3, §5.1), as a value: which key claims each
/// name, until its KEY-LEASE ends; each host's addresses and each service instance until
/// their LEASEs end. `apply` takes a checked update first come, first served; `expire` ends
/// leases. Both return what changed, for the publisher and the store. Times are seconds on
/// one clock the caller chooses (the store's is the wall clock, so leases keep counting across
/// a restart).
public struct RegistrationTable: Hashable, Sendable {
    /// A name's owner: the key that first registered it (§3.3.3).
    public struct Claim: Hashable, Sendable {
        public var key: SIG0Key
        public var expiry: Int64

        public init(key: SIG0Key, expiry: Int64) {
            self.key = key
            self.expiry = expiry
        }
    }

    public struct Host: Hashable, Sendable {
        public var name: DNSName
        public var key: SIG0Key
        public var addresses: [RData]
        /// At most the lease (§4).
        public var ttl: UInt32
        public var expiry: Int64
        /// The address the last update came from (4 or 16 octets; none if unknown): the status
        /// page's, and the per-client limit's.
        public var source: [UInt8]

        public init(
            name: DNSName, key: SIG0Key, addresses: [RData], ttl: UInt32, expiry: Int64, source: [UInt8] = []
        ) {
            self.name = name
            self.key = key
            self.addresses = addresses
            self.ttl = ttl
            self.expiry = expiry
            self.source = source
        }
    }

    public struct Service: Hashable, Sendable {
        public var instance: DNSName
        public var host: DNSName
        public var srv: SRPUpdate.SRV
        public var txt: [[UInt8]]
        /// The service type and subtypes its PTRs are published under (§3.3.4: replaced as a
        /// set by each update).
        public var serviceNames: [DNSName]
        public var ttl: UInt32
        public var expiry: Int64

        public init(
            instance: DNSName, host: DNSName, srv: SRPUpdate.SRV, txt: [[UInt8]], serviceNames: [DNSName], ttl: UInt32,
            expiry: Int64
        ) {
            self.instance = instance
            self.host = host
            self.srv = srv
            self.txt = txt
            self.serviceNames = serviceNames
            self.ttl = ttl
            self.expiry = expiry
        }
    }

    public private(set) var claims: [DNSName: Claim] = [:]
    public private(set) var hosts: [DNSName: Host] = [:]
    public private(set) var services: [DNSName: Service] = [:]

    public init() {}

    /// A table as a store kept it.
    public init(claims: [DNSName: Claim], hosts: [DNSName: Host], services: [DNSName: Service]) {
        self.claims = claims
        self.hosts = hosts
        self.services = services
    }

    /// What an update or an expiry changed: what to publish (again) and what to withdraw.
    public struct Changes: Hashable, Sendable {
        public var hosts: [Host] = []
        public var services: [Service] = []
        public var removedHosts: [DNSName] = []
        public var removedServices: [DNSName] = []
        public var removedClaims: [DNSName] = []
        /// Names whose claim was made or renewed (a store writes them; nothing is published).
        public var claimed: [DNSName] = []

        public init() {}

        /// `other`'s changes after these (a batch of updates written together: the store writes
        /// each name as the table holds it at the end).
        public mutating func merge(_ other: Changes) {
            hosts += other.hosts
            services += other.services
            removedHosts += other.removedHosts
            removedServices += other.removedServices
            removedClaims += other.removedClaims
            claimed += other.claimed
        }

        public var isEmpty: Bool {
            hosts.isEmpty && services.isEmpty && removedHosts.isEmpty && removedServices.isEmpty
                && removedClaims.isEmpty && claimed.isEmpty
        }
    }

    public enum Outcome: Hashable, Sendable {
        case applied(Changes)
        /// YXDOMAIN (§3.3.3): the name belongs to another key.
        case conflict(DNSName)
    }

    /// Applies `update`, whose leases are already `granted`, at `now`: refused whole if any of
    /// its names is claimed by another key whose KEY-LEASE has not ended.
    public mutating func apply(
        _ update: SRPUpdate, granted: UpdateLease, at now: Int64, from source: [UInt8] = []
    ) -> Outcome {
        let key = update.host.key
        let names = [update.host.name] + update.services.map(\.instance)
        for name in names {
            if let claim = claims[name], claim.key != key, claim.expiry > now { return .conflict(name) }
        }
        var changes = Changes()
        let keyLease = Int64(granted.keyLease ?? granted.lease)
        for name in names {
            if keyLease == 0 {
                if claims.removeValue(forKey: name) != nil { changes.removedClaims.append(name) }
            } else {
                claims[name] = Claim(key: key, expiry: now + keyLease)
                changes.claimed.append(name)
            }
        }
        guard granted.lease > 0 else {
            // LEASE 0: the host and every service that names it go ("Removing All Published
            // Services"; §5.1: no service outlives its host).
            removeHost(update.host.name, into: &changes)
            for service in update.services { removeService(service.instance, into: &changes) }
            return .applied(changes)
        }
        let expiry = now + Int64(granted.lease)
        let host = Host(
            name: update.host.name, key: key, addresses: update.host.addresses,
            ttl: min(update.host.ttl, granted.lease), expiry: expiry, source: source)
        if hosts[host.name] != host {
            hosts[host.name] = host
            changes.hosts.append(host)
        }
        for service in update.services {
            guard let srv = service.srv else {
                removeService(service.instance, into: &changes)
                continue
            }
            let entry = Service(
                instance: service.instance, host: host.name, srv: srv,
                txt: service.txt, serviceNames: service.serviceNames, ttl: min(service.ttl, granted.lease),
                expiry: expiry)
            if services[entry.instance] != entry {
                services[entry.instance] = entry
                changes.services.append(entry)
            }
        }
        return .applied(changes)
    }

    /// Ends the leases that are over at `now` (§5.1): a host takes its services with it; a
    /// service the host no longer names ends alone; a claim ends with its KEY-LEASE.
    public mutating func expire(at now: Int64) -> Changes {
        var changes = Changes()
        for host in hosts.values where host.expiry <= now {
            removeHost(host.name, into: &changes)
        }
        for service in services.values where service.expiry <= now {
            removeService(service.instance, into: &changes)
        }
        for (name, claim) in claims where claim.expiry <= now && hosts[name] == nil && services[name] == nil {
            claims[name] = nil
            changes.removedClaims.append(name)
        }
        return changes
    }

    /// The key that holds `name` at `now`, for an update that removes a host without sending
    /// its KEY again.
    public func key(of name: DNSName, at now: Int64) -> SIG0Key? {
        claims[name].flatMap { $0.expiry > now ? $0.key : nil }
    }

    /// The part of the table an update of `host` naming `names` can touch: their claims, the
    /// host and every service of the host or among `names`. Applying the update to it gives
    /// the host's entries as applying it to the whole table would, without copying the whole.
    public func slice(host: DNSName, names: [DNSName]) -> RegistrationTable {
        let touched = Set([host] + names)
        var slice = RegistrationTable()
        for name in touched { slice.claims[name] = claims[name] }
        slice.hosts[host] = hosts[host]
        for (instance, service) in services where service.host == host || touched.contains(instance) {
            slice.services[instance] = service
        }
        return slice
    }

    /// When `expire` next has something to do.
    public var nextExpiry: Int64? {
        (hosts.values.map(\.expiry) + services.values.map(\.expiry) + claims.values.map(\.expiry)).min()
    }

    private mutating func removeHost(_ name: DNSName, into changes: inout Changes) {
        if hosts.removeValue(forKey: name) != nil { changes.removedHosts.append(name) }
        for service in services.values where service.host == name {
            removeService(service.instance, into: &changes)
        }
    }

    private mutating func removeService(_ instance: DNSName, into changes: inout Changes) {
        if services.removeValue(forKey: instance) != nil { changes.removedServices.append(instance) }
    }
}
