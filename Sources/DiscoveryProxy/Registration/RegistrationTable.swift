import DNSWire

/// What an SRP registrar holds (RFC 9665 §3.3.3, §5.1), as a value: which key claims each
/// name, until its KEY-LEASE ends; each host's addresses and each service instance until
/// their LEASEs end. `apply` takes a checked update first come, first served; `expire` ends
/// leases. Both return what changed, for the publisher and the store. Times are seconds on
/// one clock the caller chooses (the store's is the wall clock, so leases keep counting across
/// a restart).
public struct RegistrationTable: Equatable, Sendable {
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
    /// Each host's instances: an update, a removal and a group touch one host's services
    /// without a pass over every service.
    private var instancesOfHost: [DNSName: Set<DNSName>] = [:]
    /// Hosts registered from each address (the per-client limit).
    private var hostsFromSource: [[UInt8]: Int] = [:]
    private var deadlines = LeaseDeadlines()

    public init() {}

    /// A table as a store kept it.
    @_optimize(size)  // cold: the store's load, once
    public init(claims: [DNSName: Claim], hosts: [DNSName: Host], services: [DNSName: Service]) {
        for (name, claim) in claims { put(claim, of: name) }
        for host in hosts.values { put(host) }
        for service in services.values { put(service) }
    }

    /// The same registrations (the indexes follow from them).
    public static func == (a: RegistrationTable, b: RegistrationTable) -> Bool {
        a.claims == b.claims && a.hosts == b.hosts && a.services == b.services
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
        /// Hosts whose records changed: the groups to build again.
        public var touchedHosts: Set<DNSName> = []

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
            touchedHosts.formUnion(other.touchedHosts)
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
                put(Claim(key: key, expiry: now + keyLease), of: name)
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
            put(host)
            changes.hosts.append(host)
            changes.touchedHosts.insert(host.name)
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
                if let old = services[entry.instance] { changes.touchedHosts.insert(old.host) }
                put(entry)
                changes.services.append(entry)
                changes.touchedHosts.insert(host.name)
            }
        }
        return .applied(changes)
    }

    /// Ends the leases that are over at `now` (§5.1): a host takes its services with it; a
    /// service the host no longer names ends alone; a claim ends with its KEY-LEASE, once no
    /// host or service of its name is left. Costs what ends (and the renewals' stale deadlines
    /// it passes), not the size of the table.
    public mutating func expire(at now: Int64) -> Changes {
        var changes = Changes()
        while let due = deadlines.popDue(at: now) {
            switch due.entry {
            case .host:
                if let host = hosts[due.name], host.expiry <= now { removeHost(due.name, into: &changes) }
            case .service:
                if let service = services[due.name], service.expiry <= now {
                    removeService(due.name, into: &changes)
                }
            case .claim:
                guard let claim = claims[due.name], claim.expiry <= now else { continue }
                if let holder = hosts[due.name]?.expiry ?? services[due.name]?.expiry {
                    addDeadline(.claim, due.name, at: max(holder, now + 1))  // looked at again then
                } else {
                    claims[due.name] = nil
                    changes.removedClaims.append(due.name)
                }
            }
        }
        return changes
    }

    /// The key that holds `name` at `now`, for an update that removes a host without sending
    /// its KEY again.
    public func key(of name: DNSName, at now: Int64) -> SIG0Key? {
        claims[name].flatMap { $0.expiry > now ? $0.key : nil }
    }

    /// The hosts registered from `source`.
    public func hostCount(from source: [UInt8]) -> Int { hostsFromSource[source] ?? 0 }

    /// The services `host` registered.
    public func services(of host: DNSName) -> [Service] {
        (instancesOfHost[host] ?? []).compactMap { services[$0] }
    }

    /// The part of the table updates of `hosts` naming `names` can touch: their claims, the
    /// hosts and every service of the hosts or among `names`. Applying the updates to it gives
    /// the hosts' entries as applying them to the whole table would, without copying the whole.
    public func slice(hosts: [DNSName], names: [DNSName]) -> Slice {
        let hosts = Set(hosts)
        let touched = hosts.union(names)
        var table = RegistrationTable()
        for name in touched { if let claim = claims[name] { table.put(claim, of: name) } }
        for host in hosts {
            if let entry = self.hosts[host] { table.put(entry) }
            for service in services(of: host) { table.put(service) }
        }
        for name in touched { if let service = services[name] { table.put(service) } }
        return Slice(hosts: hosts, names: touched, table: table)
    }

    /// The one-host slice an update of `host` naming `names` can touch.
    public func slice(host: DNSName, names: [DNSName]) -> RegistrationTable {
        slice(hosts: [host], names: names).table
    }

    /// Part of a table, and what it covers: `restore` puts it back.
    public struct Slice: Sendable {
        let hosts: Set<DNSName>
        let names: Set<DNSName>
        public let table: RegistrationTable
    }

    /// Puts back what `slice` held before updates of its hosts and names were applied (a
    /// store that could not write them): every entry it covers is taken out, and its own
    /// entries put in again. The rest of the table is left alone.
    @_optimize(size)  // cold: a store that cannot write
    public mutating func restore(_ slice: Slice) {
        for host in slice.hosts {
            for instance in instancesOfHost[host] ?? [] { _ = dropService(instance) }
            _ = dropHost(host)
        }
        for name in slice.names {
            _ = dropService(name)
            claims[name] = nil
        }
        for (name, claim) in slice.table.claims { put(claim, of: name) }
        for host in slice.table.hosts.values { put(host) }
        for service in slice.table.services.values { put(service) }
    }

    /// When `expire` next has something to do (or may: a renewed lease's old deadline is only
    /// found stale there).
    public var nextExpiry: Int64? { deadlines.next }

    /// Deadlines held, stale ones included (tests: the bound on a renewal flood).
    var deadlineCount: Int { deadlines.count }

    private mutating func removeHost(_ name: DNSName, into changes: inout Changes) {
        if dropHost(name) != nil {
            changes.removedHosts.append(name)
            changes.touchedHosts.insert(name)
        }
        for instance in instancesOfHost[name] ?? [] { removeService(instance, into: &changes) }
    }

    private mutating func removeService(_ instance: DNSName, into changes: inout Changes) {
        if let old = dropService(instance) {
            changes.removedServices.append(instance)
            changes.touchedHosts.insert(old.host)
        }
    }

    // MARK: - The entries and their indexes, changed together

    private mutating func put(_ claim: Claim, of name: DNSName) {
        claims[name] = claim
        addDeadline(.claim, name, at: claim.expiry)
    }

    private mutating func put(_ host: Host) {
        if let old = hosts.updateValue(host, forKey: host.name) { countSource(old.source, by: -1) }
        countSource(host.source, by: 1)
        addDeadline(.host, host.name, at: host.expiry)
    }

    private mutating func dropHost(_ name: DNSName) -> Host? {
        guard let old = hosts.removeValue(forKey: name) else { return nil }
        countSource(old.source, by: -1)
        return old
    }

    private mutating func put(_ service: Service) {
        if let old = services.updateValue(service, forKey: service.instance), old.host != service.host {
            unindex(old)
        }
        instancesOfHost[service.host, default: []].insert(service.instance)
        addDeadline(.service, service.instance, at: service.expiry)
    }

    /// Adds a deadline; past a renewal flood's worth of stale ones, builds them again from the
    /// entries (amortised O(log N) an entry).
    private mutating func addDeadline(_ entry: LeaseDeadlines.Entry, _ name: DNSName, at expiry: Int64) {
        deadlines.add(entry, name, at: expiry)
        guard deadlines.isMostlyStale(live: claims.count + hosts.count + services.count) else { return }
        var fresh = LeaseDeadlines()
        for (name, claim) in claims { fresh.add(.claim, name, at: claim.expiry) }
        for host in hosts.values { fresh.add(.host, host.name, at: host.expiry) }
        for service in services.values { fresh.add(.service, service.instance, at: service.expiry) }
        deadlines = fresh
    }

    private mutating func dropService(_ instance: DNSName) -> Service? {
        guard let old = services.removeValue(forKey: instance) else { return nil }
        unindex(old)
        return old
    }

    private mutating func unindex(_ service: Service) {
        instancesOfHost[service.host]?.remove(service.instance)
        if instancesOfHost[service.host]?.isEmpty == true { instancesOfHost[service.host] = nil }
    }

    private mutating func countSource(_ source: [UInt8], by delta: Int) {
        let count = (hostsFromSource[source] ?? 0) + delta
        hostsFromSource[source] = count > 0 ? count : nil
    }
}
