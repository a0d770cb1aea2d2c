import DNSWire

/// One interface's queue of `AnnouncementQueue`, with an index: a change costs the records it
/// names and a send the records it sends, never the whole queue.
///
/// Why: the gateway announces a thousand far instances on a client link, four records each,
/// and the budget holds most of them back for seconds. A scan of the queue at each change (to
/// cancel what the change replaces), and an encoding of all of it at each token, made fifty
/// client links a core's worth of work for a minute (docs/BENCHMARKS.md, "Fifty client links").
///
/// Two lines, each in the order its entries are due: `fresh` (announcements and goodbyes, due
/// when queued) and `seconds` (second announcements, due a second after the first went out).
/// `due` takes from both by due time, fresh first on a tie, so what the budget held back goes
/// ahead of later rounds. A record has at most one live entry; cancelling one forgets it in
/// `live`, and the entry stays in its line, stale, until the line's front passes it or a
/// compaction drops it.
struct PendingAnnouncements: Sendable {
    struct Entry: Sendable {
        var outgoing: AnnouncementQueue.Outgoing
        var due: Duration
        /// A first announcement: the second is queued when this one is sent.
        var repeats: Bool
        /// Live while `live[outgoing.record]` is this.
        var serial: UInt64
    }

    private struct NameAndType: Hashable {
        var name: DNSName
        var type: RRType
    }

    /// Entries in the order they are due; those before `front` are all stale.
    private struct Line: Sendable {
        var entries: [Entry] = []
        var front = 0

        /// Moves `front` past the stale entries there; drops them once they are many.
        mutating func skipStale(_ live: [MDNSRecord: UInt64]) {
            while front < entries.count && live[entries[front].outgoing.record] != entries[front].serial { front += 1 }
            if front == entries.count {
                self = Line()
            } else if front > 1024 && front * 2 > entries.count {
                entries.removeFirst(front)
                front = 0
            }
        }
    }

    private var fresh = Line()
    private var seconds = Line()
    private var live: [MDNSRecord: UInt64] = [:]
    /// The records with a live announcement (TTL above zero) under each name and type.
    private var announcing: [NameAndType: Set<MDNSRecord>] = [:]
    private var serial: UInt64 = 0

    var isEmpty: Bool { live.isEmpty }

    /// Queues a first announcement (`repeats`) or a goodbye, due at `due`, in place of the
    /// record's live entry.
    mutating func add(_ outgoing: AnnouncementQueue.Outgoing, due: Duration, repeats: Bool) {
        fresh.entries.append(entry(outgoing, due: due, repeats: repeats))
        compactIfStale()
    }

    /// Queues the second announcement of a record just sent, due at `due`.
    mutating func addSecond(_ outgoing: AnnouncementQueue.Outgoing, due: Duration) {
        seconds.entries.append(entry(outgoing, due: due, repeats: false))
        compactIfStale()
    }

    /// Drops the record's live entry, if any.
    mutating func cancel(_ record: MDNSRecord) {
        guard live.removeValue(forKey: record) != nil else { return }
        let key = key(record)
        announcing[key]?.remove(record)
        if announcing[key]?.isEmpty == true { announcing[key] = nil }
    }

    /// The records with a live announcement under `record`'s name and type.
    func announcing(like record: MDNSRecord) -> Set<MDNSRecord> {
        announcing[key(record)] ?? []
    }

    /// Up to `limit` live entries due by `now`, in the order they go out, left queued (the
    /// caller cancels what it sends, or queues its second announcement), and when the first
    /// live entry not among them is due (nil: none is left).
    mutating func due(by now: Duration, limit: Int) -> (entries: [Entry], next: Duration?) {
        fresh.skipStale(live)
        seconds.skipStale(live)
        var ready: [Entry] = []
        var (i, j) = (fresh.front, seconds.front)
        while true {
            while i < fresh.entries.count && !isLive(fresh.entries[i]) { i += 1 }
            while j < seconds.entries.count && !isLive(seconds.entries[j]) { j += 1 }
            let a = i < fresh.entries.count ? fresh.entries[i] : nil
            let b = j < seconds.entries.count ? seconds.entries[j] : nil
            let heads = [a, b].compactMap { $0 }
            guard let next = heads.min(by: { $0.due < $1.due }) else { return (ready, nil) }
            guard next.due <= now && ready.count < limit else { return (ready, next.due) }
            ready.append(next)
            // On a tie `min` keeps the first: fresh.
            if let a, a.serial == next.serial { i += 1 } else { j += 1 }
        }
    }

    private mutating func entry(_ outgoing: AnnouncementQueue.Outgoing, due: Duration, repeats: Bool) -> Entry {
        cancel(outgoing.record)
        serial &+= 1
        live[outgoing.record] = serial
        if outgoing.ttl > 0 { announcing[key(outgoing.record), default: []].insert(outgoing.record) }
        return Entry(outgoing: outgoing, due: due, repeats: repeats, serial: serial)
    }

    private func isLive(_ entry: Entry) -> Bool { live[entry.outgoing.record] == entry.serial }

    private func key(_ record: MDNSRecord) -> NameAndType { NameAndType(name: record.name, type: record.type) }

    /// Drops stale entries once they outnumber the live ones (cancels in the middle of a line).
    private mutating func compactIfStale() {
        let queued = fresh.entries.count - fresh.front + seconds.entries.count - seconds.front
        guard queued > 2 * live.count + 64 else { return }
        fresh = Line(entries: fresh.entries[fresh.front...].filter(isLive))
        seconds = Line(entries: seconds.entries[seconds.front...].filter(isLive))
    }
}
