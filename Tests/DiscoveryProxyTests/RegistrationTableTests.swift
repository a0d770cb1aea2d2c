import DNSWire
import Testing

@testable import DiscoveryProxy

/// The registrar's table (RFC 9665 §3.3.3 first come, first served; §5.1 leases), fed with
/// the signed updates of `SRPUpdateTests` and variations of them.
@Suite struct RegistrationTableTests {
    static let zone = try! DNSName("default.service.arpa.")
    static let host = try! DNSName("printer.default.service.arpa.")
    static let instance = try! DNSName(#"Printer\0321._ipp._tcp.default.service.arpa."#)

    static func update(_ wire: [UInt8]) -> SRPUpdate {
        try! SRPUpdate.read(try! Message(wire: wire), wire: wire, zones: [zone]).get()
    }

    static let first = update(SRPUpdateTests.signed)
    static let other = update(SRPUpdateTests.otherKey)
    static let removal = update(SRPUpdateTests.removal)

    static func changes(_ outcome: RegistrationTable.Outcome) -> RegistrationTable.Changes? {
        if case .applied(let changes) = outcome { return changes }
        return nil
    }

    @Test func aRegistrationHoldsHostServiceAndClaims() throws {
        var table = RegistrationTable()
        let granted = UpdateLease(lease: 7200, keyLease: 604_800)
        let changes = try #require(Self.changes(table.apply(Self.first, granted: granted, at: 1000)))
        #expect(changes.hosts.map(\.name) == [Self.host])
        #expect(changes.services.map(\.instance) == [Self.instance])
        #expect(table.hosts[Self.host]?.expiry == 8200)
        #expect(table.hosts[Self.host]?.ttl == 120)
        #expect(table.services[Self.instance]?.serviceNames.count == 2)
        #expect(table.claims[Self.host]?.expiry == 605_800)
        #expect(table.claims[Self.instance]?.key == Self.first.host.key)
        #expect(table.nextExpiry == 8200)
        // The same update again (a renewal) changes no record, only the leases.
        let again = try #require(Self.changes(table.apply(Self.first, granted: granted, at: 2000)))
        #expect(again.hosts.map(\.name) == [Self.host])  // its expiry moved
        #expect(table.hosts[Self.host]?.expiry == 9200)
    }

    @Test func anotherKeyGetsYXDOMAINUntilTheKeyLeaseEnds() {
        var table = RegistrationTable()
        _ = table.apply(Self.first, granted: UpdateLease(lease: 60, keyLease: 600), at: 0)
        #expect(table.apply(Self.other, granted: UpdateLease(lease: 60, keyLease: 600), at: 10) == .conflict(Self.host))
        // The lease ends at 60: the host goes, the claim stays (§5.1) and still refuses.
        let expired = table.expire(at: 60)
        #expect(expired.removedHosts == [Self.host])
        #expect(expired.removedServices == [Self.instance])
        #expect(expired.removedClaims.isEmpty)
        #expect(
            table.apply(Self.other, granted: UpdateLease(lease: 60, keyLease: 600), at: 100) == .conflict(Self.host))
        // At KEY-LEASE's end the name is free for the other key.
        #expect(table.expire(at: 600).removedClaims.count == 2)
        #expect(Self.changes(table.apply(Self.other, granted: UpdateLease(lease: 60, keyLease: 600), at: 601)) != nil)
        #expect(table.hosts[Self.host]?.key == Self.other.host.key)
    }

    @Test func leaseZeroRemovesTheHostAndEveryServiceNamingIt() throws {
        var table = RegistrationTable()
        _ = table.apply(Self.first, granted: UpdateLease(lease: 7200, keyLease: 604_800), at: 0)
        let changes = try #require(
            Self.changes(table.apply(Self.removal, granted: UpdateLease(lease: 0, keyLease: 0), at: 5)))
        #expect(changes.removedHosts == [Self.host])
        #expect(changes.removedServices == [Self.instance])
        #expect(Set(changes.removedClaims) == [Self.host, Self.instance])
        #expect(table.hosts.isEmpty && table.services.isEmpty && table.claims.isEmpty)
    }

    @Test func leaseZeroKeepingTheKeyHoldsTheName() throws {
        var table = RegistrationTable()
        _ = table.apply(Self.first, granted: UpdateLease(lease: 7200, keyLease: 604_800), at: 0)
        _ = table.apply(Self.removal, granted: UpdateLease(lease: 0, keyLease: 604_800), at: 5)
        #expect(table.hosts.isEmpty && table.services.isEmpty)
        #expect(table.claims[Self.host]?.expiry == 604_805)
        #expect(table.apply(Self.other, granted: UpdateLease(lease: 60, keyLease: 600), at: 10) == .conflict(Self.host))
    }

    @Test func aRemovalWithoutTheKeyIsCheckedWithTheRegisteredOne() throws {
        // "Removing All Published Services": no adds for the host; the registered KEY signs.
        var message = SRPUpdateTests.update(
            SRPUpdateTests.valid.filter { $0.name == SRPUpdateTests.host && $0.type == .any })
        message.edns = EDNS(udpPayloadSize: 1232, options: [UpdateLease(lease: 0, keyLease: 0).option])
        let wire = try message.encode()
        let key = SIG0Key(algorithm: 13, publicKey: Array(repeating: 7, count: 64))
        let withKey = SRPUpdate.read(try Message(wire: wire), wire: wire, zones: [Self.zone]) { _ in key }
        // It has no SIG(0), so it stops at the signature, after the host was found with the key.
        guard case .failure(let rejection) = withKey else {
            Issue.record("read without a signature")
            return
        }
        #expect(rejection.reason.contains("no SIG(0)"))
        let withoutKey = SRPUpdate.read(try Message(wire: wire), wire: wire, zones: [Self.zone])
        guard case .failure(let refused) = withoutKey else {
            Issue.record("read without a key")
            return
        }
        #expect(refused.reason.contains("exactly one KEY"))
    }

    @Test func aServiceTheHostNoLongerNamesEndsWithItsOwnLease() throws {
        // §5.1: per-instance leases. A second instance registered at 0, then an update at 50
        // without it: at 60 it ends alone, the host (renewed) stays.
        var table = RegistrationTable()
        var two = Self.first
        var second = two.services[0]
        second.instance = try DNSName("Printer 2._ipp._tcp.default.service.arpa.")
        two.services.append(second)
        _ = table.apply(two, granted: UpdateLease(lease: 60, keyLease: 600), at: 0)
        #expect(table.services.count == 2)
        _ = table.apply(Self.first, granted: UpdateLease(lease: 60, keyLease: 600), at: 50)
        let expired = table.expire(at: 60)
        #expect(expired.removedServices == [second.instance])
        #expect(expired.removedHosts.isEmpty)
        #expect(table.services.keys.contains(Self.instance))
        #expect(table.nextExpiry == 110)
    }

    @Test func ttlsAreNeverLongerThanTheLease() {
        var table = RegistrationTable()
        _ = table.apply(Self.first, granted: UpdateLease(lease: 30, keyLease: 600), at: 0)
        #expect(table.hosts[Self.host]?.ttl == 30)
        #expect(table.services[Self.instance]?.ttl == 30)
    }
}

/// The table's indexes and deadlines (docs/BENCHMARKS.md, "SRP registrar": no O(N) work per
/// renewal at 10,000 hosts) keep the answers the plain dictionaries gave.
@Suite struct RegistrationTableIndexTests {
    typealias T = RegistrationTableTests

    static func hostUpdate(_ number: Int) throws -> SRPUpdate {
        var update = T.first
        update.host.name = try DNSName("host\(number).default.service.arpa.")
        update.services[0].instance = try DNSName("Printer \(number)._ipp._tcp.default.service.arpa.")
        return update
    }

    @Test func renewalsLeaveStaleDeadlinesThatExpiryPassesOver() throws {
        var table = RegistrationTable()
        let lease = UpdateLease(lease: 60, keyLease: 600)
        for second in stride(from: Int64(0), to: 300, by: 30) {
            _ = table.apply(T.first, granted: lease, at: second)
            // Each renewal's old deadline is only stale: nothing ends.
            #expect(table.expire(at: second + 1).isEmpty)
        }
        #expect(table.hosts[T.host]?.expiry == 330)
        let expired = table.expire(at: 330)
        #expect(expired.removedHosts == [T.host] && expired.removedServices == [T.instance])
        #expect(expired.touchedHosts == [T.host])
        // The claims' stale deadlines (KEY-LEASE from the renewals at 0 … 240) end nothing;
        // the last renewal's, at 270 + 600, ends both.
        var ended: [Int64: Int] = [:]
        while let next = table.nextExpiry {
            let removed = table.expire(at: next).removedClaims.count
            if removed > 0 { ended[next] = removed }
        }
        #expect(ended == [870: 2])
    }

    @Test func aFloodOfRenewalsKeepsTheDeadlinesBounded() throws {
        var table = RegistrationTable()
        let lease = UpdateLease(lease: 7200, keyLease: 604_800)
        var most = 0
        for second in 0..<5000 {
            _ = table.apply(T.first, granted: lease, at: Int64(second))
            most = max(most, table.deadlineCount)
        }
        // 3 entries (host, service, claims of 2 names: 4), each renewed 5,000 times: built
        // again whenever the stale ones pass 2 × 4 + 1024.
        #expect(most <= 2 * 4 + 1024 + 1)
        let expiry: Int64 = 4999 + 7200
        #expect(table.hosts[T.host]?.expiry == expiry)
        #expect(table.expire(at: expiry - 1).isEmpty)
        #expect(table.expire(at: expiry).removedHosts == [T.host])
    }

    @Test func aClaimOutlastedByItsHostEndsAfterTheHost() throws {
        // A store may hold a claim ending before its host (bounds changed by an operator): the
        // claim ends once the host has gone, not before.
        let host = RegistrationTable.Host(
            name: T.host, key: T.first.host.key, addresses: [], ttl: 60, expiry: 100)
        var table = RegistrationTable(
            claims: [T.host: .init(key: T.first.host.key, expiry: 50)], hosts: [T.host: host], services: [:])
        #expect(table.expire(at: 50).isEmpty)
        #expect(table.nextExpiry == 100)
        let expired = table.expire(at: 100)
        #expect(expired.removedHosts == [T.host])
        #expect(table.expire(at: 100).removedClaims == [T.host] || table.claims.isEmpty)
        #expect(table.claims.isEmpty)
    }

    @Test func aRestoredSliceUndoesABatchAndLeavesTheRestAlone() throws {
        var table = RegistrationTable()
        let lease = UpdateLease(lease: 60, keyLease: 600)
        for number in 0..<20 {
            _ = table.apply(try Self.hostUpdate(number), granted: lease, at: 0, from: [192, 0, 2, UInt8(number % 3)])
        }
        let before = table
        let batch = [try Self.hostUpdate(3), T.first, try Self.hostUpdate(7)]
        let slice = table.slice(hosts: batch.map(\.host.name), names: batch.flatMap { $0.services.map(\.instance) })
        _ = table.apply(batch[0], granted: UpdateLease(lease: 0, keyLease: 0), at: 10)
        _ = table.apply(batch[1], granted: lease, at: 10, from: [192, 0, 2, 9])
        _ = table.apply(batch[2], granted: UpdateLease(lease: 120, keyLease: 600), at: 10)
        #expect(table != before)
        table.restore(slice)
        #expect(table == before)
        #expect(table.hostCount(from: [192, 0, 2, 0]) == 7 && table.hostCount(from: [192, 0, 2, 9]) == 0)
        #expect(table.services(of: try DNSName("host3.default.service.arpa.")).count == 1)
    }

    @Test func theIndexesFollowTheEntries() throws {
        var table = RegistrationTable()
        let lease = UpdateLease(lease: 60, keyLease: 600)
        _ = table.apply(T.first, granted: lease, at: 0, from: [192, 0, 2, 1])
        #expect(table.hostCount(from: [192, 0, 2, 1]) == 1)
        #expect(table.services(of: T.host).map(\.instance) == [T.instance])
        // The same host from another address moves its count.
        _ = table.apply(T.first, granted: lease, at: 5, from: [192, 0, 2, 2])
        #expect(table.hostCount(from: [192, 0, 2, 1]) == 0 && table.hostCount(from: [192, 0, 2, 2]) == 1)
        _ = table.apply(T.removal, granted: UpdateLease(lease: 0, keyLease: 0), at: 6)
        #expect(table.hostCount(from: [192, 0, 2, 2]) == 0)
        #expect(table.services(of: T.host).isEmpty)
    }
}
