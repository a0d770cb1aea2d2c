import DNSWire

/// Probing (RFC 6762 §8.1, §8.2) for the groups a `LinkResponder` is about to announce: three
/// probe queries 250 ms apart for the group's new unique names, its proposed records in the
/// authority section; a group no other host answered for by 250 ms after the third is its
/// publisher's (`due` returns it as won). A response from another host holding one of the
/// names with other data loses the group (`heard`); another host probing for the same name at
/// the same time wins or loses by §8.2's comparison, and the loser probes again a second later.
///
/// Probes of many groups share packets: the SRP registrar's devices wait for the outcome, and
/// a thousand of them registering at once make a few dozen packets a round, not three
/// thousand. Probes are not held to the announcement budget for the same reason; each group
/// sends three, once.
///
/// Questions are QM (multicast answers), not QU as §8.1 suggests: the proxy's sockets share
/// port 5353 with this host's avahi-daemon, and a unicast answer would reach only one of them.
///
/// A value with no clock and no sockets: the owner passes `now` and sends what `due` returns.
struct GroupProber {
    /// §8.1: three probes, 250 ms apart; the first after a random delay of up to 250 ms.
    static let interval: Duration = .milliseconds(250)
    static let probes = 3
    static let maximumDelay = 250
    /// §8.2: the loser of a simultaneous probe waits a second before probing again.
    static let deferral: Duration = .seconds(1)
    /// Rounds start on this grid, so that groups starting close together share packets.
    static let grid: Duration = .milliseconds(10)

    struct Probe: Equatable {
        var records: [MDNSRecord]
        /// The unique names probed for: those of `records` the group did not hold already.
        var names: Set<DNSName>
        var sent = 0
        var due: Duration

        /// The records proposed for `name` (the authority section, and §8.2's comparison).
        func proposed(for name: DNSName) -> [MDNSRecord] {
            records.filter { $0.name == name && GroupAnnouncer.isUnique($0) }
        }
    }

    private(set) var probes: [MDNSGroup.Key: Probe] = [:]
    /// The groups probing for each name, per interface: what a received packet is checked against.
    private var byName: [NameOn: Set<MDNSGroup.Key>] = [:]
    /// The groups by when their next probe is due, on `grid`: a round takes the slots due, not
    /// every probe (the responder's thread runs a round at each update, and 2,500 devices
    /// probing at once made each a sort of 2,500 keys). Entries of a cancelled or moved probe
    /// stay until their slot comes, and are passed over then.
    private var slots: [Duration: [MDNSGroup.Key]] = [:]

    private struct NameOn: Hashable {
        var interface: String
        var name: DNSName
    }

    var isEmpty: Bool { probes.isEmpty }

    /// The records being probed for under `key`, if any.
    func records(of key: MDNSGroup.Key) -> [MDNSRecord]? { probes[key]?.records }

    /// Probes for `names` of `records` (replacing a probe of `key` under way), the first after
    /// `delay`.
    mutating func start(
        _ key: MDNSGroup.Key, records: [MDNSRecord], names: Set<DNSName>, now: Duration, delay: Duration
    ) {
        cancel(key)
        let due = Self.onGrid(now + delay)
        probes[key] = Probe(records: records, names: names, due: due)
        slots[due, default: []].append(key)
        for name in names { byName[NameOn(interface: key.interface, name: name), default: []].insert(key) }
    }

    /// Stops probing for `key`; what it was probing for, if it was.
    @discardableResult
    mutating func cancel(_ key: MDNSGroup.Key) -> Probe? {
        guard let probe = probes.removeValue(forKey: key) else { return nil }
        if probes.isEmpty { slots = [:] }  // nothing left to pass over
        for name in probe.names {
            let on = NameOn(interface: key.interface, name: name)
            byName[on]?.remove(key)
            if byName[on]?.isEmpty == true { byName[on] = nil }
        }
        return probe
    }

    /// When the next probe (or outcome) is due (or a slot of probes since cancelled).
    var nextDue: Duration? { probes.isEmpty ? nil : slots.keys.min() }

    /// The probe packets due at `now`, per interface, and the groups whose third probe went
    /// unanswered: theirs now, to be announced (with the records probed for).
    mutating func due(now: Duration, limit: Int = AnnouncementQueue.packetSize) -> (
        packets: [(interface: String, bytes: [UInt8])], won: [(key: MDNSGroup.Key, records: [MDNSRecord])]
    ) {
        var won: [(key: MDNSGroup.Key, records: [MDNSRecord])] = []
        var sending: [String: [Probe]] = [:]
        for slot in slots.keys.filter({ $0 <= now }).sorted() {
            for key in (slots.removeValue(forKey: slot) ?? []).sorted() {
                // Passed over: cancelled, or moved to another slot (§8.2's deferral).
                guard var probe = probes[key], probe.due == slot else { continue }
                if probe.sent == Self.probes {
                    cancel(key)
                    won.append((key, probe.records))
                    continue
                }
                sending[key.interface, default: []].append(probe)
                probe.sent += 1
                probe.due = Self.onGrid(now + Self.interval)
                probes[key] = probe
                slots[probe.due, default: []].append(key)
            }
        }
        var packets: [(interface: String, bytes: [UInt8])] = []
        for interface in sending.keys.sorted() {
            for bytes in Self.packets(sending[interface] ?? [], limit: limit) { packets.append((interface, bytes)) }
        }
        return (packets, won)
    }

    /// What another host's `message` on `interface` means for the probes there: the groups
    /// that lost a name (§8.1: a response holding it with other data; §8.2: a simultaneous
    /// probe whose records compare later), which stop probing. A group that wins a
    /// comparison probes on; a tie is the same data (§8.2: no conflict).
    mutating func heard(_ message: Message, on interface: String, now: Duration) -> [MDNSGroup.Key] {
        guard !byName.isEmpty else { return [] }
        var lost: Set<MDNSGroup.Key> = []
        if message.isResponse {
            for record in message.answers + message.additional + message.authority where record.rrClass == .in {
                guard let keys = byName[NameOn(interface: interface, name: record.name)], record.ttl > 0,
                    let heard = MDNSRecord(heard: record), GroupAnnouncer.isUnique(heard)
                else { continue }
                for key in keys where probes[key]?.proposed(for: record.name).contains(heard) == false {
                    lost.insert(key)
                }
            }
        } else if !message.authority.isEmpty {
            for question in message.questions {
                guard let keys = byName[NameOn(interface: interface, name: question.name)] else { continue }
                let theirs = message.authority.filter { $0.name == question.name }.compactMap(MDNSRecord.init(heard:))
                guard !theirs.isEmpty else { continue }
                for key in keys {
                    guard var probe = probes[key] else { continue }
                    switch Self.compare(probe.proposed(for: question.name), theirs) {
                    case .orderedAscending:
                        // §8.2: ours is earlier, theirs wins; probe again after a second.
                        probe.sent = 0
                        probe.due = Self.onGrid(now + Self.deferral)
                        probes[key] = probe
                        slots[probe.due, default: []].append(key)
                    case .orderedSame, .orderedDescending: break
                    }
                }
            }
        }
        for key in lost { cancel(key) }
        return lost.sorted()
    }

    enum Order { case orderedAscending, orderedSame, orderedDescending }

    /// §8.2.1: both sets sorted by class, type and RDATA, compared pair by pair; the set that
    /// runs out first, or whose first different record is earlier, is lexicographically earlier.
    static func compare(_ ours: [MDNSRecord], _ theirs: [MDNSRecord]) -> Order {
        func sorted(_ records: [MDNSRecord]) -> [MDNSRecord] {
            records.sorted { a, b in
                if a.rrClass != b.rrClass { return a.rrClass.rawValue < b.rrClass.rawValue }
                if a.type != b.type { return a.type.rawValue < b.type.rawValue }
                return a.rdata.lexicographicallyPrecedes(b.rdata)
            }
        }
        for (a, b) in zip(sorted(ours), sorted(theirs)) {
            if a.rrClass != b.rrClass {
                return a.rrClass.rawValue < b.rrClass.rawValue ? .orderedAscending : .orderedDescending
            }
            if a.type != b.type { return a.type.rawValue < b.type.rawValue ? .orderedAscending : .orderedDescending }
            if a.rdata != b.rdata {
                return a.rdata.lexicographicallyPrecedes(b.rdata) ? .orderedAscending : .orderedDescending
            }
        }
        if ours.count == theirs.count { return .orderedSame }
        return ours.count < theirs.count ? .orderedAscending : .orderedDescending
    }

    private static func onGrid(_ time: Duration) -> Duration {
        let step = grid.components.attoseconds / 1_000_000_000 + grid.components.seconds * 1_000_000_000
        let nanos = time.components.seconds * 1_000_000_000 + time.components.attoseconds / 1_000_000_000
        return .nanoseconds(((nanos + step - 1) / step) * step)
    }

    /// Probe queries for `probes`, as many to a packet as fit in `limit`: a question (ANY, QM)
    /// per name, then the proposed records in the authority section (§8.1). A group too large
    /// for one packet goes alone, whole.
    static func packets(_ probes: [Probe], limit: Int) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var batch: [Probe] = []
        var size = MDNSResponseEncoder.headerSize
        for probe in probes {
            // Uncompressed: an upper bound of what it adds.
            let cost =
                probe.names.reduce(0) { $0 + $1.wireBytes.count + 4 }
                + probe.names.flatMap { probe.proposed(for: $0) }.reduce(0) {
                    $0 + $1.name.wireBytes.count + 10 + $1.rdata.count
                }
            if !batch.isEmpty && size + cost > limit {
                packets.append(encode(batch))
                batch = []
                size = MDNSResponseEncoder.headerSize
            }
            batch.append(probe)
            size += cost
        }
        if !batch.isEmpty { packets.append(encode(batch)) }
        return packets
    }

    private static func encode(_ probes: [Probe]) -> [UInt8] {
        var names = NameCompressor()
        var body: [UInt8] = []
        var questions = 0
        var proposed: [MDNSRecord] = []
        for probe in probes {
            for name in probe.names.sorted(by: { $0.wireBytes.lexicographicallyPrecedes($1.wireBytes) }) {
                body += names.compress(name.wireBytes, at: MDNSResponseEncoder.headerSize + body.count)
                for value in [RRType.any.rawValue, RRClass.in.rawValue] {
                    body += [UInt8(value >> 8), UInt8(value & 0xff)]
                }
                questions += 1
                proposed += probe.proposed(for: name)
            }
        }
        // §10.2: no cache-flush bit outside responses.
        for record in proposed {
            let outgoing = AnnouncementQueue.Outgoing(
                record: record, unique: false, ttl: MDNSRecord.defaultTTL(for: record.type))
            body += MDNSResponseEncoder.encode(outgoing, at: MDNSResponseEncoder.headerSize + body.count, names: &names)
        }
        let header: [UInt8] = [
            0, 0, 0, 0, UInt8(questions >> 8), UInt8(questions & 0xff), 0, 0,
            UInt8(proposed.count >> 8), UInt8(proposed.count & 0xff), 0, 0,
        ]
        return header + body
    }
}
