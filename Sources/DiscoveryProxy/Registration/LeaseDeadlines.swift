import DNSWire
import HeapModule

/// The registration table's lease ends in time order (swift-collections' `Heap`), so that
/// finding the next one and ending what is due costs O(log N) each, not a pass over the
/// table (docs/BENCHMARKS.md, "SRP registrar": renewals at 10,000 hosts).
///
/// A renewal adds a new deadline and leaves the old one in place: `RegistrationTable.expire`
/// checks each one it takes against the entry's current lease and passes over the stale ones.
/// Once stale ones outnumber the live, the table builds the heap again from its entries, so a
/// flood of renewals costs bounded memory.
struct LeaseDeadlines: Sendable {
    enum Entry: UInt8, Sendable {
        case host, service, claim
    }

    struct Deadline: Comparable, Sendable {
        var expiry: Int64
        var entry: Entry
        var name: DNSName

        static func < (a: Deadline, b: Deadline) -> Bool { a.expiry < b.expiry }
    }

    private var heap = Heap<Deadline>()

    mutating func add(_ entry: Entry, _ name: DNSName, at expiry: Int64) {
        heap.insert(Deadline(expiry: expiry, entry: entry, name: name))
    }

    /// The earliest deadline if it is at or before `now`, taken out.
    mutating func popDue(at now: Int64) -> Deadline? {
        guard let first = heap.min, first.expiry <= now else { return nil }
        return heap.removeMin()
    }

    /// The earliest deadline, stale or not.
    var next: Int64? { heap.min?.expiry }

    var count: Int { heap.count }

    /// Whether the stale deadlines are worth dropping: more than the `live` entries' own, plus
    /// some slack so that a small table is not rebuilt at every renewal.
    func isMostlyStale(live: Int) -> Bool { heap.count > 2 * live + 1024 }
}
