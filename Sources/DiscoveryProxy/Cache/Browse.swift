import DNSWire
import MDNS

// One browse: its key, waiters and records, and the answer times its link has shown.

/// Identifies one shared mDNS query: every unicast query for the same name and type on the
/// same link uses the same browse (and the same avahi object). It is the backend's question
/// itself, so that keys and the questions the backend reports events for need no conversion.
typealias BrowseKey = MDNSQuestion

/// What a browse keeps per record beside the `MDNSRecord` it is keyed by (whose owner name,
/// type and received RDATA it does not repeat): 32 bytes (`BrowseStorageTests` checks), as
/// there is one per record of every browse. Names stay as mDNS gave them (in `.local.`); rewriting into the link zone is done
/// per answer (`ZonePresentation`), as a translated copy would be one more name per
/// PTR and SRV record, and so per known instance.
struct RecordState: Sendable {
    /// The decoded RDATA where it shares the received bytes (a PTR target, TXT, addresses).
    /// Other types (an SRV: its target is a name of its own) are decoded from the received
    /// bytes when read (`CachedRecord`); nil for those, and for undecodable RDATA.
    var rdata: RData?
    private var seenAtNanoseconds: Int64
    /// Arrival order, so answers list instances stably.
    private var orderValue: Int32
    /// How many deliveries of the record mDNS has made and not withdrawn (avahi delivers it
    /// once per IP protocol); it is gone at zero. Zero while a verification is pending.
    var copies: UInt8 = 1
    /// The received RDATA decodes (checked on arrival).
    var decodes: Bool

    init(order: Int, seenAt: Duration, rdata: RData?, decodes: Bool) {
        self.rdata = rdata
        self.decodes = decodes
        self.seenAtNanoseconds = seenAt.nanoseconds
        self.orderValue = Int32(truncatingIfNeeded: order)
    }

    var order: Int { Int(orderValue) }
    /// When it arrived (scheduler time), for the status page's freshness.
    var seenAt: Duration { .nanoseconds(seenAtNanoseconds) }
}

extension RecordState {
    /// Decodes an mDNS record on arrival, and keeps the decoded RDATA where it can share the
    /// received bytes. Its names stay in `.local`: answers rewrite them into the link zone
    /// (`ZonePresentation`).
    init(_ record: MDNSRecord, order: Int, seenAt: Duration) {
        let decoded = try? RData(type: record.type, wire: record.rdata)
        // A PTR's RDATA is its target's wire form; TXT and addresses are copied verbatim.
        var kept: RData? = nil
        switch decoded {
        case .ptr(let target)? where target.wireBytes == record.rdata:
            kept = .ptr(target.sharingStorage(with: record.rdata))
        case .txt(let bytes)? where bytes == record.rdata: kept = .txt(record.rdata)
        case .a(let bytes)? where bytes == record.rdata: kept = .a(record.rdata)
        case .aaaa(let bytes)? where bytes == record.rdata: kept = .aaaa(record.rdata)
        default: break
        }
        self.init(order: order, seenAt: seenAt, rdata: kept, decodes: decoded != nil)
    }
}

/// A cached record as answers, pushes and the status page use it: the mDNS record's owner
/// name and type, its decoded RDATA, and what the browse keeps for it. Built when read, not
/// stored.
struct CachedRecord: Sendable {
    /// The mDNS owner name (in `.local.`), for additional-record owners.
    var localName: DNSName
    var type: RRType
    /// Names in `.local.`; nil when undecodable.
    var rdata: RData?
    var state: RecordState

    init(_ record: MDNSRecord, _ state: RecordState) {
        self.localName = record.name
        self.type = record.type
        self.rdata = state.rdata ?? (state.decodes ? try? RData(type: record.type, wire: record.rdata) : nil)
        self.state = state
    }

    var order: Int { state.order }
    var seenAt: Duration { state.seenAt }

    /// For PTR: the `.local` name it points at (an instance, or a type for `_services`).
    var ptrTarget: DNSName? {
        if case .ptr(let target)? = rdata { return target }
        return nil
    }

    /// For PTR and SRV: the `.local` name the RDATA points at, to find additional records.
    var localTarget: DNSName? {
        switch rdata {
        case .ptr(let target)?, .srv(_, _, _, let target)?: return target
        default: return nil
        }
    }
}

/// A query waiting for mDNS (a cache miss).
struct Waiter: Sendable {
    var id: Int
    var query: Message
    var plan: MDNSPlan
    var deadline: Duration
    var context: QueryContext
    /// When the browse's first record arrived, for the per-query timing in the debug log.
    var firstResultAt: Duration? = nil
}

/// One live mDNS query and what it has found so far: the cache entry of the proxy. Stored
/// inline in the browse map, one slot per browse, so kept small (72 bytes,
/// `BrowseStorageTests` checks): times as
/// nanoseconds, counters of 32 bits, and flags last.
struct Browse: Sendable {
    var records = MDNSRecordTable<RecordState>()
    var handle: (any MDNSQueryHandle)?
    var waiters: [Waiter] = []
    private var startedAtNanoseconds: Int64
    private var lastUsedNanoseconds: Int64
    /// The tag of its mDNS query (`BrowseTable.nextGeneration`).
    var generation: UInt32
    /// Arrival order of the next record (wraps after 2^31 records in one browse).
    private var nextOrderValue: Int32 = 0
    /// mDNS has delivered results since the query (re)started: from now on the record set is
    /// the truth, even when removals have emptied it.
    var hasResults = false
    /// A RECONFIRM restarted the mDNS query: records not delivered again by its next
    /// "all for now" are gone (`MDNSEvent.verifying`).
    var verifying = false
    /// The daemon has delivered what it had cached ("all for now"): the query is asking the
    /// link, not waiting in the backend's queue. What the gateway's held-back reports wait for.
    var drained = false

    init(generation: UInt32, startedAt: Duration, lastUsed: Duration) {
        self.generation = generation
        self.startedAtNanoseconds = startedAt.nanoseconds
        self.lastUsedNanoseconds = lastUsed.nanoseconds
    }

    /// When the mDNS query began (or will begin, when rate-limited); a browse older than the
    /// negative timeout with no records is a known negative.
    var startedAt: Duration {
        get { .nanoseconds(startedAtNanoseconds) }
        set { startedAtNanoseconds = newValue.nanoseconds }
    }
    var lastUsed: Duration {
        get { .nanoseconds(lastUsedNanoseconds) }
        set { lastUsedNanoseconds = newValue.nanoseconds }
    }
    var nextOrder: Int {
        get { Int(nextOrderValue) }
        set { nextOrderValue = Int32(truncatingIfNeeded: newValue) }
    }

    /// mDNS has had its full say: results came, or the query ran `DiscoveryProxy.mdnsWindow`.
    func isSettled(now: Duration) -> Bool {
        hasResults || now - startedAt >= DiscoveryProxy.mdnsWindow
    }

    /// Whether a query can be answered from this browse now (a cache hit, RFC 8766 §5.6):
    /// it has had results, or has run the full negative timeout without any. The timeout is
    /// the link's learned one (`BrowseTable.negativeTimeout(on:_:)`), looked up only when
    /// there are no results: a hit does not pay for it.
    func isEstablished(now: Duration, negativeTimeout: @autoclosure () -> Duration) -> Bool {
        hasResults || now - startedAt >= negativeTimeout()
    }

    /// When a query joining now gets its answer at the latest: at the end of this browse's
    /// own negative timeout, as every waiter shares what the browse found.
    func deadline(joiningAt now: Duration, negativeTimeout: Duration) -> Duration {
        (startedAt > now ? now : startedAt) + negativeTimeout
    }

    var orderedRecords: [CachedRecord] {
        records.map { CachedRecord($0.record, $0.value) }.sorted { $0.order < $1.order }
    }
}

/// The last results of a released browse, kept for optimistic answers.
struct ReleasedBrowse: Sendable {
    var records: [CachedRecord]
    var releasedAt: Duration
}

extension BrowseTable {
    /// Types whose browses often share a name: an instance's SRV and TXT, a host's A and AAAA.
    private static let siblingTypes: [RRType] = [.srv, .txt, .a, .aaaa]

    /// `key` with its name in storage the proxy already holds, when something holds the very
    /// same bytes: another browse at that name (an instance's SRV for its TXT), or the PTR
    /// record that named the instance (its RDATA is the instance name's wire form). A new
    /// browse otherwise keeps the copy its query brought: one more name per browse, and the
    /// proxy holds two browses per known instance. Called when a browse is created.
    func sharingStorage(_ key: BrowseKey) -> BrowseKey {
        var key = key
        for type in Self.siblingTypes where type != key.type {
            let sibling = BrowseKey(interface: key.interface, name: key.name, type: type)
            guard let index = browses.index(forKey: sibling) else { continue }
            let stored = browses.keys[index].name.wireBytes
            if stored == key.name.wireBytes {
                key.name = key.name.sharingStorage(with: stored)
                return key
            }
        }
        guard key.type == .srv || key.type == .txt, key.name.labelCount > 1 else { return key }
        let parent = key.name.dropping(labels: 1)
        let probe = MDNSRecord(name: parent, type: .ptr, rdata: key.name.wireBytes)
        if let stored = browses[BrowseKey(interface: key.interface, name: parent, type: .ptr)]?
            .records.storedRecord(equalTo: probe)
        {
            key.name = key.name.sharingStorage(with: stored.rdata)
        }
        return key
    }
}

// MARK: - Its records

/// The records of one mDNS query mapped to values, laid out for what a query usually holds:
/// one record (an SRV, a TXT, an address) or a few.
///
/// Up to `indexThreshold` entries it is one small array searched linearly: a fraction of the
/// memory of a `Dictionary`, whose smallest storage has a header, a bitmap and room for
/// several entries. The proxy holds one of these per browse and a browse per SRV, TXT and
/// address name it was asked, so this is much of its memory per known instance. Above the
/// threshold a hash index is kept beside the array, so that a service type with thousands of
/// instances stays O(1) per event.
struct MDNSRecordTable<Value> {
    private var entries: [(record: MDNSRecord, value: Value)] = []
    /// Position of each record in `entries`, only while there are more than `indexThreshold`.
    private var index: [MDNSRecord: Int]?

    /// A service type's PTR browse holds one record per instance; most types on a site have a
    /// few dozen at most. Searching 32 entries (only when mDNS reports a change) costs far
    /// less than an index for every such type would hold: about 80 bytes per instance.
    static var indexThreshold: Int { 32 }

    init() {}

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var records: some Collection<MDNSRecord> { entries.lazy.map(\.record) }
    var values: some Collection<Value> { entries.lazy.map(\.value) }

    subscript(record: MDNSRecord) -> Value? {
        get { position(of: record).map { entries[$0].value } }
        set {
            if let newValue {
                set(newValue, for: record)
            } else {
                removeValue(forKey: record)
            }
        }
    }

    /// The record as stored, equal to `record`: lets a holder share the stored arrays.
    func storedRecord(equalTo record: MDNSRecord) -> MDNSRecord? {
        position(of: record).map { entries[$0].record }
    }

    subscript(record: MDNSRecord, default value: @autoclosure () -> Value) -> Value {
        self[record] ?? value()
    }

    @discardableResult
    mutating func removeValue(forKey record: MDNSRecord) -> Value? {
        guard let position = position(of: record) else { return nil }
        let removed = entries[position].value
        // Swap-remove: order is not kept (holders that need one keep their own).
        let last = entries.count - 1
        if position != last {
            entries[position] = entries[last]
            index?[entries[position].record] = position
        }
        entries.removeLast()
        index?[record] = nil
        if entries.count <= Self.indexThreshold / 2 { index = nil }
        return removed
    }

    mutating func removeAll() {
        entries = []
        index = nil
    }

    /// Changes every value in place.
    mutating func updateValues(_ body: (inout Value) -> Void) {
        for position in entries.indices { body(&entries[position].value) }
    }

    /// Removes the entries whose value matches; returns them.
    mutating func removeAll(where shouldRemove: (Value) -> Bool) -> [(record: MDNSRecord, value: Value)] {
        let removed = entries.filter { shouldRemove($0.value) }
        guard !removed.isEmpty else { return [] }
        entries.removeAll { shouldRemove($0.value) }
        reindex()
        return removed
    }

    private mutating func set(_ value: Value, for record: MDNSRecord) {
        if let position = position(of: record) {
            entries[position].value = value
            return
        }
        entries.append((record, value))
        if index != nil {
            index![record] = entries.count - 1
        } else if entries.count > Self.indexThreshold {
            reindex()
        }
    }

    /// Builds the hash index when above the threshold, drops it below.
    private mutating func reindex() {
        guard entries.count > Self.indexThreshold else {
            index = nil
            return
        }
        var built: [MDNSRecord: Int] = [:]
        built.reserveCapacity(entries.count * 2)
        for (position, entry) in entries.enumerated() { built[entry.record] = position }
        index = built
    }

    private func position(of record: MDNSRecord) -> Int? {
        if let index { return index[record] }
        return entries.firstIndex { $0.record == record }
    }
}

extension MDNSRecordTable: Sequence {
    func makeIterator() -> IndexingIterator<[(record: MDNSRecord, value: Value)]> {
        entries.makeIterator()
    }
}

extension MDNSRecordTable: Sendable where Value: Sendable {}

/// What a browse and its related browses hold, copied out of the lock to build an answer.
struct Snapshot: Sendable {
    var answers: [CachedRecord] = []
    /// SRV/TXT of PTR targets, then addresses of SRV targets (RFC 6763 §12).
    var additional: [CachedRecord] = []
    /// mDNS has had its full say (`DiscoveryProxy.mdnsWindow`), so an empty answer is final;
    /// otherwise a negative is cached briefly (`DiscoveryProxy.provisionalTTL`). Also false
    /// while an SRV target whose known addresses may all be unusable is not settled: the
    /// answer may lose that SRV once it is (`UsableTargets`), so it is not replayed.
    var isSettled = true
    /// SRV targets whose A and AAAA browses have both had their say (results, or the full
    /// mDNS window): their addresses in `additional` are all there are (`UsableTargets`).
    var settledHosts: Set<DNSName> = []
    /// Some SRV target's known addresses may all be unusable, but its address browses have
    /// not settled yet: whether it is usable is still to be decided.
    var hasPendingTargets = false
    /// The link's devices may still add to the answers: the browse is within its link's usual
    /// spread of answer times, or young (`AnswerTimes`). Its TTL is
    /// `DiscoveryProxy.provisionalTTL`, and it is not settled (not replayed).
    var isProvisional = false
}

extension BrowseTable {
    /// What `key`'s browse holds now, with additionals.
    func snapshot(for key: BrowseKey, now: Duration) -> Snapshot {
        guard let browse = browses[key] else { return Snapshot() }
        var snapshot = snapshot(answers: browse.orderedRecords, interface: key.interface, now: now)
        snapshot.isSettled = snapshot.isSettled && browse.isSettled(now: now)
        if browse.hasResults && mayBeIncomplete(key, browse, now: now) {
            snapshot.isProvisional = true
            snapshot.isSettled = false
        }
        return snapshot
    }

    /// A released browse's last results, with what live browses know about them.
    func optimisticSnapshot(_ stale: ReleasedBrowse, key: BrowseKey, now: Duration) -> Snapshot {
        snapshot(answers: stale.records, interface: key.interface, now: now)
    }

    /// Every record the live browses of `interface` hold for `name`, by type (an ANY query).
    func records(named name: DNSName, on interface: String) -> [CachedRecord] {
        browses
            .filter { $0.key.interface == interface && $0.key.name == name }
            .sorted { $0.key.type.rawValue < $1.key.type.rawValue }
            .flatMap { $0.value.orderedRecords }
    }

    /// The answers plus what live browses on the same link know about them (additionals).
    private func snapshot(answers: [CachedRecord], interface: String, now: Duration) -> Snapshot {
        var snapshot = Snapshot(answers: answers)
        func known(_ name: DNSName, _ type: RRType) -> [CachedRecord] {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.orderedRecords ?? []
        }
        func settled(_ name: DNSName, _ type: RRType) -> Bool {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.isSettled(now: now) ?? false
        }
        var hosts: [DNSName] = []
        for record in snapshot.answers {
            guard let target = record.localTarget else { continue }
            if record.type == .ptr {
                let srv = known(target, .srv)
                snapshot.additional += srv + known(target, .txt)
                hosts += srv.compactMap(\.localTarget)
            } else if record.type == .srv {
                hosts.append(target)
            }
        }
        var seen = Set<DNSName>()
        for host in hosts where seen.insert(host).inserted {
            let addresses = known(host, .a) + known(host, .aaaa)
            snapshot.additional += addresses
            if settled(host, .a) && settled(host, .aaaa) {
                snapshot.settledHosts.insert(host)
            } else if !addresses.isEmpty && addresses.allSatisfy(Self.mayBeUnusable) {
                snapshot.isSettled = false
                snapshot.hasPendingTargets = true
            }
        }
        return snapshot
    }

    /// A link-local or private address: unusable for some clients (RFC 8766 §5.5.2).
    private static func mayBeUnusable(_ record: CachedRecord) -> Bool {
        switch record.rdata {
        case .a(let address)?, .aaaa(let address)?:
            return IPPrefix.isLinkLocal(address) || PrivateRealms.isPrivate(address)
        default: return false
        }
    }
}

// MARK: - Answer times

/// How long one link's devices take to answer a browse, learned from its recent browses
/// (docs/ARCHITECTURE.md, "Slow links"). The configured `negativeTimeout` and
/// `collectionWindow` suit a prompt link; on busy Wi-Fi, or with devices that wake up to
/// answer, mDNS answers come hundreds of milliseconds late and at different times. What the
/// link has shown it needs, it gets, never less than configured and never past `ceiling`:
///
/// - a negative timeout that covers its usual first answer (`usualFirst` + `margin`);
/// - a collection window that covers its usual spread between a browse's first and last
///   answer (`usualSpread` + `lateness`, when longer than the configured window);
/// - an answer given before that spread has passed is provisional (`expectsMore`): a short
///   TTL, so a resolver asks again once the late devices are in. Until a link has taught two
///   browses, any answer in the first `ceiling` of a browse that crossed it is;
/// - so is any such answer in the first `ceiling` whatever the link has learned (`isYoung`):
///   a new type's devices may answer later than any the link has shown (a spread of zero
///   learned from single-device browses said nothing about them).
///
/// A browse teaches only with records that crossed the link (its first record came later than
/// `fromCache`) and only with its first round (`horizon`). "Usual" is the second-longest of
/// the last `capacity` browses: past what most browses need, without the one outlier.
struct AnswerTimes: Sendable {
    /// One browse: from its query's start to its first record, and to its last record so far.
    struct Sample: Sendable, Equatable {
        var generation: UInt32
        var first: Duration
        var last: Duration
    }

    /// The link's last browses that taught something, oldest first.
    private(set) var samples: [Sample] = []
    /// Recomputed when a sample changes, as they are read by every miss.
    private(set) var usualFirst: Duration?
    private(set) var usualSpread: Duration?

    static let capacity = 16
    /// avahi re-sends a query after about 1 s and 3 s (RFC 6762 §5.2): a record later than
    /// this comes from a device that just appeared, not from one answering slowly.
    static let horizon: Duration = .seconds(3)
    /// A first record sooner than this came from avahi-daemon's cache: nothing crossed the
    /// link, as avahi sends its first query 20-120 ms after the browse starts (RFC 6762 §5.2).
    /// (Cached records took up to 16 ms to arrive in the lab, through D-Bus, under load.)
    static let fromCache: Duration = .milliseconds(20)
    /// The longest any query waits: every resolver tried still gave its client the proxy's
    /// answer after 1.2 s, and PowerDNS Recursor gives up at 1.5 s ("Negative answers").
    static let ceiling: Duration = .milliseconds(1200)
    /// Past the usual first answer before "nothing there".
    static let margin: Duration = .milliseconds(100)
    /// Past the usual spread before answering: the last device's jitter.
    static let lateness: Duration = .milliseconds(25)

    /// A record arrived `age` after the query of browse `generation` started; `isFirst`: the
    /// browse had none before.
    mutating func observe(generation: UInt32, age: Duration, isFirst: Bool) {
        guard age <= Self.horizon else { return }
        if isFirst {
            guard age >= Self.fromCache else { return }
            if samples.count == Self.capacity { samples.removeFirst() }
            samples.append(Sample(generation: generation, first: age, last: age))
        } else {
            guard let index = samples.lastIndex(where: { $0.generation == generation }), age > samples[index].last
            else { return }
            samples[index].last = age
        }
        usualFirst = Self.secondLongest(samples.lazy.map(\.first))
        // The browse still collecting counts as a spread of zero so far: the spread needs two
        // finished browses beside it.
        usualSpread = samples.count > 2 ? Self.secondLongest(samples.lazy.map { $0.last - $0.first }) : nil
    }

    /// The second-longest of `values`; nil with fewer than two.
    static func secondLongest(_ values: some Sequence<Duration>) -> Duration? {
        var longest: Duration?
        var second: Duration?
        for value in values {
            if longest.map({ value > $0 }) ?? true {
                second = longest
                longest = value
            } else if second.map({ value > $0 }) ?? true {
                second = value
            }
        }
        return second
    }

    /// The longest wait: `ceiling`, or the configured negative timeout if longer (an operator
    /// who set that has resolvers that wait).
    static func ceiling(configured negativeTimeout: Duration) -> Duration {
        max(ceiling, negativeTimeout)
    }

    /// How long a query waits for mDNS before "nothing there".
    func negativeTimeout(configured: Duration) -> Duration {
        guard let usualFirst else { return configured }
        return max(configured, min(usualFirst + Self.margin, Self.ceiling(configured: configured)))
    }

    /// When the waiters of a browse whose query started at `startedAt` and whose first record
    /// came at `firstAt` are answered: after `window`, or after the link's usual spread and
    /// `lateness` if that is longer, but by the ceiling after the start (and never sooner
    /// than `window`). The configured window already covers a spread shorter than itself.
    func answerAt(startedAt: Duration, firstAt: Duration, window: Duration, negativeTimeout: Duration) -> Duration {
        let usual = firstAt + max(window, (usualSpread ?? .zero) + Self.lateness)
        return max(firstAt + window, min(usual, startedAt + Self.ceiling(configured: negativeTimeout)))
    }

    /// More records may still come for browse `generation` (started at `startedAt`), whose
    /// first record crossed the link: it is within the link's usual spread after that record,
    /// or, while the link has taught too little to know its spread, within `ceiling`.
    /// Browse `generation`'s first record crossed the link and `ceiling` has not passed since
    /// it started: an answer now may lack devices slower than the link's usual ones.
    func isYoung(generation: UInt32, startedAt: Duration, now: Duration) -> Bool {
        now < startedAt + Self.ceiling && samples.contains { $0.generation == generation }
    }

    func expectsMore(generation: UInt32, startedAt: Duration, now: Duration) -> Bool {
        guard let sample = samples.last(where: { $0.generation == generation }) else { return false }
        guard let usualSpread else { return now < startedAt + Self.ceiling }
        return now < startedAt + sample.first + usualSpread
    }
}

// MARK: - Time in nanoseconds

extension Duration {
    /// Whole nanoseconds (toward zero), saturating at ±292 years: the unit timers take, and
    /// the one browses store their times in (8 bytes instead of 16).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (sum, carry) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return carry ? (whole < 0 ? .min : .max) : sum
    }

    /// Whole milliseconds (toward zero), for logs and the millisecond fields of DSO TLVs;
    /// integer arithmetic, so that a configured 15 s is 15000 exactly.
    var wholeMilliseconds: Int64 { nanoseconds / 1_000_000 }
}
