import DNSWire

/// RFC 6762's responder rules for the records a `LinkResponder` holds on its interfaces: which
/// of them a received query asks for and when the answer goes out (§6), what is left out
/// (known answers, §7.1; answers another host just gave, §7.4; a record multicast less than a
/// second ago, §6), what goes with it (RFC 6763 §12's additional records), and what a received
/// response says about them: a conflict (§9), or a goodbye for a record still held (§10.1).
///
/// A value with no clock and no sockets: the owner passes `now`, reads what it holds through
/// `held`, and sends what `due` returns.
struct QueryAnswerer {
    typealias Outgoing = AnnouncementQueue.Outgoing

    /// What one received packet calls for, besides the answers queued for `due`.
    struct Reaction: Equatable {
        /// Unique names and types another host answers with other data (§9): ours lose them.
        var conflicts: [Conflict] = []
        /// Records we hold that another host said goodbye to: to be announced again (§10.1).
        var goodbyes: [MDNSRecord] = []
        /// A legacy unicast query's answer (§6.7), to go back to its source.
        var legacyReply: [UInt8]?
    }

    struct Conflict: Hashable {
        var name: DNSName
        var type: RRType
    }

    /// §6: a shared answer waits 20–120 ms (other responders may give it), a query with more
    /// known answers to come (TC) 400–500 ms.
    static let sharedDelay: ClosedRange<Int> = 20...120
    static let truncatedDelay: ClosedRange<Int> = 400...500
    /// §6: a record is not multicast again on an interface within a second, a probe's
    /// defence within 250 ms.
    static let repeatInterval: Duration = .seconds(1)
    static let probeRepeatInterval: Duration = .milliseconds(250)
    /// §6.7: a legacy unicast answer's TTL.
    static let legacyTTL: UInt32 = 10

    private struct Pending {
        var due: Duration
        var answers: [Outgoing] = []
        var additional: [Outgoing] = []
        /// Queriers whose query was truncated (TC): their next packets' known answers count
        /// too (§7.2), by source address.
        var truncatedFrom: Set<String> = []
    }

    /// An interface over one IP protocol: a query is answered over the protocol it came by,
    /// as avahi-daemon answers, not twice.
    struct Channel: Hashable, Comparable {
        var interface: String
        var family: MulticastSender.Family

        static func < (a: Channel, b: Channel) -> Bool { (a.interface, a.family) < (b.interface, b.family) }
    }

    private struct Sent: Hashable {
        var channel: Channel
        var record: MDNSRecord
    }

    private var pending: [Channel: Pending] = [:]
    private var lastMulticast: [Sent: Duration] = [:]
    private var random: () -> Int

    /// `random` picks within a delay's range (tests fix it).
    init(random: @escaping () -> Int = { Int.random(in: 0...1000) }) {
        self.random = random
    }

    /// Reads `message`, received on `channel` from `source` (an address, for §7.2) and UDP
    /// port `port`. `held` gives the records held on its interface under a name, of every type.
    mutating func received(
        _ message: Message, from source: String = "", port: UInt16, on channel: Channel, now: Duration,
        held: (DNSName) -> [MDNSRecord]
    ) -> Reaction {
        message.isResponse
            ? response(message, on: channel, held: held)
            : query(message, from: source, port: port, on: channel, now: now, held: held)
    }

    /// The answers due now, per channel, and when the next are.
    mutating func due(now: Duration) -> [(channel: Channel, answers: [Outgoing], additional: [Outgoing])] {
        var out: [(channel: Channel, answers: [Outgoing], additional: [Outgoing])] = []
        for (channel, answer) in pending.sorted(by: { $0.key < $1.key }) where answer.due <= now {
            pending[channel] = nil
            for outgoing in answer.answers + answer.additional {
                lastMulticast[Sent(channel: channel, record: outgoing.record)] = now
            }
            out.append((channel, answer.answers, answer.additional))
        }
        if lastMulticast.count > 4096 { lastMulticast = lastMulticast.filter { now - $0.value < Self.repeatInterval } }
        return out
    }

    var nextDue: Duration? { pending.values.map(\.due).min() }

    // MARK: Queries

    private mutating func query(
        _ message: Message, from source: String, port: UInt16, on channel: Channel, now: Duration,
        held: (DNSName) -> [MDNSRecord]
    ) -> Reaction {
        // §7.1: what the querier holds with at least half our TTL left is not sent again.
        let known = Set(message.answers.filter(Self.hasHalfItsTTL).compactMap(MDNSRecord.init(heard:)))
        // §7.2: a truncated query's known answers go on in its sender's next packets (a
        // thousand instances of a type take several): they prune the answer waiting for it.
        if !known.isEmpty, var answer = pending[channel], answer.truncatedFrom.contains(source) {
            answer.answers.removeAll { known.contains($0.record) }
            answer.additional.removeAll { known.contains($0.record) }
            if message.truncated {
                answer.due = max(answer.due, now + .milliseconds(Self.pick(Self.truncatedDelay, random())))
            }
            pending[channel] = answer.answers.isEmpty ? nil : answer
        }
        // §8.2: a probe (its proposed records in the authority section) for a name we hold
        // is answered at once.
        let probe = !message.authority.isEmpty
        // Sets beside the arrays: a type's PTR question has a thousand answers on a large link.
        var answers: [MDNSRecord] = []
        var answered: Set<MDNSRecord> = []
        for question in message.questions where question.qclass == .in || question.qclass == .any {
            for record in held(question.name)
            where (question.type == .any || record.type == question.type) && !known.contains(record)
                && answered.insert(record).inserted
            {
                answers.append(record)
            }
        }
        guard !answers.isEmpty else { return Reaction() }
        let additional = Self.additional(for: answers, answered: answered, held: held).filter { !known.contains($0) }
        // §6.7: a query from a port other than 5353 is a legacy resolver's, answered to it alone.
        if port != 5353 {
            return Reaction(
                legacyReply: MDNSResponseEncoder.legacyReply(to: message, answers: answers, ttl: Self.legacyTTL))
        }
        let interval = probe ? Self.probeRepeatInterval : Self.repeatInterval
        let fresh = answers.filter { record in
            guard let last = lastMulticast[Sent(channel: channel, record: record)] else { return true }
            return now - last >= interval
        }
        guard !fresh.isEmpty else { return Reaction() }
        let delay: Duration
        if message.truncated {
            delay = .milliseconds(Self.pick(Self.truncatedDelay, random()))
        } else if !probe && fresh.contains(where: { !GroupAnnouncer.isUnique($0) }) {
            delay = .milliseconds(Self.pick(Self.sharedDelay, random()))
        } else {
            delay = .zero
        }
        var answer = pending[channel] ?? Pending(due: now + delay)
        answer.due = min(answer.due, now + delay)
        var queued = Set(answer.answers.map(\.record))
        for record in fresh where queued.insert(record).inserted {
            answer.answers.append(GroupAnnouncer.outgoing(record))
        }
        var extra = Set(answer.additional.map(\.record))
        for record in additional where !queued.contains(record) && extra.insert(record).inserted {
            answer.additional.append(GroupAnnouncer.outgoing(record))
        }
        if message.truncated { answer.truncatedFrom.insert(source) }
        pending[channel] = answer
        return Reaction()
    }

    /// RFC 6763 §12: an instance's PTR brings its SRV and TXT, an SRV its target's addresses.
    private static func additional(
        for answers: [MDNSRecord], answered: Set<MDNSRecord>, held: (DNSName) -> [MDNSRecord]
    ) -> [MDNSRecord] {
        var out: [MDNSRecord] = []
        var added: Set<MDNSRecord> = []
        func add(_ records: [MDNSRecord]) {
            for record in records where !answered.contains(record) && added.insert(record).inserted {
                out.append(record)
            }
        }
        func addresses(of srv: MDNSRecord) {
            guard srv.rdata.count > 6, let target = try? DNSName(wire: Array(srv.rdata[6...])) else { return }
            add(held(target).filter { $0.type == .a || $0.type == .aaaa })
        }
        for record in answers {
            switch record.type {
            case .ptr:
                guard let instance = try? DNSName(wire: record.rdata) else { continue }
                let records = held(instance).filter { $0.type == .srv || $0.type == .txt }
                add(records)
                records.filter { $0.type == .srv }.forEach(addresses)
            case .srv:
                addresses(of: record)
            default:
                continue
            }
        }
        return out
    }

    /// §7.1, §7.4: a copy with at least half the TTL we give its type left needs no repeat.
    private static func hasHalfItsTTL(_ record: ResourceRecord) -> Bool {
        record.ttl >= MDNSRecord.defaultTTL(for: record.type) / 2
    }

    private static func pick(_ range: ClosedRange<Int>, _ random: Int) -> Int {
        range.lowerBound + abs(random) % (range.upperBound - range.lowerBound + 1)
    }

    // MARK: Responses

    private mutating func response(_ message: Message, on channel: Channel, held: (DNSName) -> [MDNSRecord]) -> Reaction
    {
        var reaction = Reaction()
        var heard: Set<MDNSRecord> = []
        for record in message.answers + message.additional + message.authority where record.rrClass == .in {
            guard let heardRecord = MDNSRecord(heard: record) else { continue }
            let ours = held(record.name).filter { $0.type == record.type }
            if record.ttl == 0 {
                if ours.contains(heardRecord) { reaction.goodbyes.append(heardRecord) }
                continue
            }
            // §7.4: another responder gave this answer with at least half our TTL.
            if Self.hasHalfItsTTL(record) { heard.insert(heardRecord) }
            // §9: a unique record of ours, another host's data under its name and type.
            if !ours.isEmpty, GroupAnnouncer.isUnique(heardRecord), !ours.contains(heardRecord) {
                let conflict = Conflict(name: record.name, type: record.type)
                if !reaction.conflicts.contains(conflict) { reaction.conflicts.append(conflict) }
            }
        }
        if var answer = pending[channel], !heard.isEmpty {
            answer.answers.removeAll { heard.contains($0.record) }
            answer.additional.removeAll { heard.contains($0.record) }
            pending[channel] = answer.answers.isEmpty ? nil : answer
        }
        return reaction
    }
}
