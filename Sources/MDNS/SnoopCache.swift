import DNSWire

/// What a link's mDNS responses said lately about the names the gateway looks up (an
/// instance's SRV and TXT, a host's A and AAAA), by interface, name and type, until each
/// record's TTL runs out or its goodbye (RFC 6762 §10.1) arrives.
///
/// Not a cache anything is answered from as it stands: its records seed a new lookup as
/// provisional, and the daemon's own cache confirms or drops them (`BrowseTable.subscribe`).
/// So it keeps no cache-flush logic (§10.2: the daemon applies it); a replaced address lives
/// here until its TTL, harmlessly. At most `limit` records: past it, expired ones go, then
/// the oldest half. A value with no clock and no sockets (`LinkSnooper` owns one).
struct SnoopCache: Sendable {
    static let types: Set<RRType> = [.srv, .txt, .a, .aaaa]

    private struct Entry: Sendable {
        var rdata: [UInt8]
        var heard: Duration
        var expires: Duration
    }

    private var entries: [MDNSQuestion: [Entry]] = [:]
    private(set) var count = 0
    let limit: Int

    init(limit: Int = 16_384) {
        self.limit = max(limit, 16)
    }

    /// Takes the answers, authority and additional records of a response heard on `interface`.
    mutating func heard(_ message: Message, on interface: String, now: Duration) {
        guard message.isResponse else { return }
        for record in message.answers + message.authority + message.additional
        where record.rrClass == .in && Self.types.contains(record.type) {
            guard let rdata = MDNSRecord(heard: record)?.rdata else { continue }
            let key = MDNSQuestion(interface: interface, name: record.name, type: record.type)
            var list = entries[key] ?? []
            let before = list.count
            list.removeAll { $0.rdata == rdata }
            if record.ttl > 0 {
                list.append(Entry(rdata: rdata, heard: now, expires: now + .seconds(Int64(record.ttl))))
            }
            count += list.count - before
            entries[key] = list.isEmpty ? nil : list
        }
        if count > limit { shed(now: now) }
    }

    /// What was heard for `question` and has not expired.
    func records(for question: MDNSQuestion, now: Duration) -> [MDNSRecord] {
        (entries[question] ?? []).filter { $0.expires > now }.map {
            MDNSRecord(name: question.name, type: question.type, rdata: $0.rdata)
        }
    }

    /// Forgets what was heard on the interfaces not in `kept`.
    mutating func keep(only kept: Set<String>) {
        entries = entries.filter { kept.contains($0.key.interface) }
        count = entries.values.reduce(0) { $0 + $1.count }
    }

    private mutating func shed(now: Duration) {
        entries = entries.compactMapValues { list in
            let live = list.filter { $0.expires > now }
            return live.isEmpty ? nil : live
        }
        count = entries.values.reduce(0) { $0 + $1.count }
        guard count > limit else { return }
        let heard = entries.values.flatMap { $0.map(\.heard) }.sorted()
        let cut = heard[heard.count / 2]
        entries = entries.compactMapValues { list in
            let recent = list.filter { $0.heard > cut }
            return recent.isEmpty ? nil : recent
        }
        count = entries.values.reduce(0) { $0 + $1.count }
    }
}
