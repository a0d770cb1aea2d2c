import DNSWire
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// A gateway route's wants, kept up to date by the names that changed (issue 45:
/// "incremental passes"), always equal what a computation from scratch gives.
@Suite("Far records")
struct FarRecordsTests {
    let far = Link(interface: "eth1", zone: try! DNSName("lab1.example."))
    let client = Link(interface: "eth2", zone: try! DNSName("lab2.example."))

    func route(allow: [String]?) -> AnnouncementRoute {
        AnnouncementRoute(
            client: client, far: far, services: ServiceFilter(allow: allow), subtypes: ["_universal._sub._ipp._tcp"],
            requester: .test([198, 51, 100, 1]))
    }

    /// A small deterministic generator (xorshift), so that a failure can be replayed.
    struct Steps {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
    }

    func change(_ steps: inout Steps) throws -> (PushChange, RecordKey) {
        let ipp = try DNSName("_ipp._tcp.lab1.example.")
        let services = try DNSName("_services._dns-sd._udp.lab1.example.")
        let instance = try DNSName("Dev \(steps.next(12))._ipp._tcp.lab1.example.")
        let host = try DNSName("h\(steps.next(4)).lab1.example.")
        let adding = steps.next(3) > 0
        func ptr(_ owner: DNSName, _ target: DNSName) -> (PushChange, RecordKey) {
            let key = RecordKey(name: owner, type: .ptr)
            return (
                adding
                    ? .add(owner, .ptr, ttl: 120, rdata: target.wireBytes)
                    : .remove(owner, .ptr, rdata: target.wireBytes), key
            )
        }
        switch steps.next(8) {
        case 0, 1:
            return ptr(ipp, instance)
        case 2:
            return ptr(try DNSName("_universal._sub._ipp._tcp.lab1.example."), instance)
        case 3:
            return ptr(services, steps.next(2) == 0 ? ipp : try DNSName("_http._tcp.lab1.example."))
        case 4:
            // The client link's own instance of a name a far instance could take.
            let local = try DNSName("_ipp._tcp.lab2.example.")
            let label = steps.next(2) == 0 ? "Dev \(steps.next(12))" : "Dev \(steps.next(12)) (lab1)"
            return ptr(local, try local.prepending([Array(label.utf8)]))
        case 5:
            let srv = try RData.srv(priority: 0, weight: 0, port: 631, target: host).wireBytes()
            let key = RecordKey(name: instance, type: .srv)
            return (adding ? .add(instance, .srv, ttl: 120, rdata: srv) : .removeSet(instance, .srv), key)
        case 6:
            let key = RecordKey(name: host, type: .a)
            let address: [UInt8] = [192, 0, 2, UInt8(steps.next(3))]
            return (adding ? .add(host, .a, ttl: 120, rdata: address) : .remove(host, .a, rdata: address), key)
        default:
            let key = RecordKey(name: instance, type: .txt)
            return (adding ? .add(instance, .txt, ttl: 120, rdata: [0]) : .removeSet(instance, .txt), key)
        }
    }

    @Test("wants changed by the names that changed equal wants computed from scratch", arguments: [["_ipp._tcp"], nil])
    func incrementalEqualsFull(allow: [String]?) throws {
        let route = route(allow: allow)
        var records = FarRecords()
        var followed: Set<RecordKey> = []
        var steps = Steps(state: 0x9E37_79B9_7F4A_7C15)
        var most = 0
        for step in 0..<600 {
            let (change, key) = try change(&steps)
            records.apply(change, to: key)
            if step % 3 == 0, steps.next(4) == 0 { records.drop(key) }
            let changes = records.wantedChanges(route)
            if changes.everything {
                followed = changes.add
            } else {
                #expect(changes.add.isDisjoint(with: followed), "step \(step): added twice")
                #expect(changes.remove.isSubset(of: followed), "step \(step): removed what was not followed")
                followed = followed.union(changes.add).subtracting(changes.remove)
            }
            var fresh = records
            fresh.restart()
            let full = fresh.wantedChanges(route)
            #expect(full.everything)
            try #require(followed == full.add, "step \(step): \(followed.symmetricDifference(full.add))")
            most = max(most, followed.count)
        }
        #expect(most > 20, "the steps reach instances, hosts and the client link's names")
    }

    @Test("a host two instances share is followed until neither names it")
    func sharedHost() throws {
        let route = route(allow: ["_ipp._tcp"])
        var records = FarRecords()
        let type = try DNSName("_ipp._tcp.lab1.example.")
        let host = try DNSName("shared.lab1.example.")
        let srv = try RData.srv(priority: 0, weight: 0, port: 631, target: host).wireBytes()
        let a = try DNSName("A._ipp._tcp.lab1.example.")
        let b = try DNSName("B._ipp._tcp.lab1.example.")
        for instance in [a, b] {
            records.apply(.add(type, .ptr, ttl: 120, rdata: instance.wireBytes), to: RecordKey(name: type, type: .ptr))
            records.apply(.add(instance, .srv, ttl: 120, rdata: srv), to: RecordKey(name: instance, type: .srv))
        }
        #expect(records.wantedChanges(route).add.contains(RecordKey(name: host, type: .a)))
        records.apply(.remove(type, .ptr, rdata: a.wireBytes), to: RecordKey(name: type, type: .ptr))
        let one = records.wantedChanges(route)
        #expect(one.remove == [RecordKey(name: a, type: .srv), RecordKey(name: a, type: .txt)] && one.add.isEmpty)
        records.apply(.remove(type, .ptr, rdata: b.wireBytes), to: RecordKey(name: type, type: .ptr))
        #expect(records.wantedChanges(route).remove.contains(RecordKey(name: host, type: .aaaa)))
    }
}
