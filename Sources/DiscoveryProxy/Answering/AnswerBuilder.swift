import DNSWire
import EventCounting
import Logging
import Metrics
import Synchronization

// An answer from a snapshot to bytes: building it, presenting records in the zone, encoding it,
// and sharing or replaying it.

/// Builds reply messages: what the cache knows (a `Snapshot`) presented in the link's zone
/// with its additionals (RFC 6763 §12), ANY (RFC 8482), negatives with the zone's SOA
/// (RFC 2308, never NXDOMAIN: §5.6), and failures. No state: one per configuration.
struct AnswerBuilder: Sendable {
    let configuration: ProxyConfiguration

    /// The answer to an mDNS-planned query from `snapshot`, every TTL `ttl` (default: the cap,
    /// or the provisional TTL while the link's devices may add to it);
    /// `context` says whether the client may see the link's private addresses.
    func answer(
        _ query: Message, plan: MDNSPlan, snapshot: Snapshot, ttl: UInt32? = nil, for context: QueryContext
    ) -> Message {
        var reply = reply(to: query)
        let owner = query.questions[0].name
        let ttl =
            ttl
            ?? (snapshot.isProvisional
                ? min(configuration.ttlCap, DiscoveryProxy.provisionalTTL) : configuration.ttlCap)
        let presentation = ZonePresentation(
            link: plan.link, suppressLinkLocal: configuration.suppressLinkLocal,
            hidesPrivateAddresses: context.hidesPrivateAddresses)
        let usable = UsableTargets(
            snapshot: snapshot, presentation: presentation, enabled: configuration.suppressLinkLocal)
        reply.answers = snapshot.answers.compactMap { record in
            guard usable.shows(record) else { return nil }
            return presentation.rdata(of: record).map {
                ResourceRecord(name: owner, type: record.type, ttl: ttl, rdata: $0)
            }
        }
        if reply.answers.isEmpty {
            // NODATA, never NXDOMAIN: the name may be an empty non-terminal (§5.6).
            let zone = ZoneRecords(origin: plan.zone, link: plan.link, configuration: configuration)
            reply.authority = [snapshot.isSettled ? zone.soa : zone.soa(negativeTTL: DiscoveryProxy.provisionalTTL)]
            return reply
        }
        let answered = Set(reply.answers)
        var additional: [ResourceRecord] = []
        for record in snapshot.additional where usable.shows(record) {
            guard let rdata = presentation.rewritten(record), let name = presentation.owner(of: record) else {
                continue
            }
            let rr = ResourceRecord(name: name, type: record.type, ttl: ttl, rdata: rdata)
            if !answered.contains(rr) && !additional.contains(rr) { additional.append(rr) }
        }
        reply.additional = additional
        return reply
    }

    /// A query of type ANY (RFC 8482 §4.1: a subset of the RRsets is a complete answer):
    /// `records`, every RRset the live browses hold for the name, or with none the
    /// synthesized HINFO of RFC 8482 §4.2.
    func any(_ query: Message, plan: MDNSPlan, records: [CachedRecord], for context: QueryContext) -> Message {
        var reply = answer(query, plan: plan, snapshot: Snapshot(answers: records), for: context)
        if reply.answers.isEmpty {
            reply.authority = []
            reply.answers = [
                ResourceRecord(
                    name: query.questions[0].name, type: .hinfo, ttl: configuration.ttlCap,
                    rdata: .raw([7] + Array("RFC8482".utf8) + [0]))
            ]
        }
        return reply
    }

    /// An answer from configuration (`QueryPlan.immediate`); empty answers carry the SOA.
    func immediate(_ query: Message, zone: DNSName, link: Link?, answers: [ResourceRecord]) -> Message {
        var reply = reply(to: query)
        reply.answers = answers
        if answers.isEmpty {
            reply.authority = [ZoneRecords(origin: zone, link: link, configuration: configuration).soa]
        }
        return reply
    }

    /// The skeleton of a reply: ID, opcode, RD and CD echoed, the question, AA (we are
    /// authoritative for every zone we answer), OPT only when the query had one (RFC 6891 §7),
    /// with the query's DO bit copied (RFC 3225 §3); unknown EDNS flags and options are not.
    func reply(to query: Message) -> Message {
        Message(
            id: query.id, isResponse: true, opcode: query.opcode, authoritative: true,
            recursionDesired: query.recursionDesired, checkingDisabled: query.checkingDisabled,
            questions: query.questions,
            edns: query.edns.map {
                EDNS(udpPayloadSize: UInt16(clamping: configuration.maxUDPPayload), dnssecOK: $0.dnssecOK)
            })
    }

    func failure(_ query: Message, _ rcode: RCode) -> Message {
        var reply = reply(to: query)
        reply.authoritative = false
        reply.rcode = rcode
        if rcode == .formErr && query.questions.count != 1 { reply.questions = [] }
        return reply
    }
}

// MARK: - Output

/// The last step of every query: encodes the reply within the client's size limit (a reply
/// that cannot be encoded becomes SERVFAIL), shares cache-hit answers between clients
/// (`AnswerMemo`), hands the front end a `ReplayTicket` where the answer may be replayed,
/// and records the answer's metrics.
final class AnswerOutput: Sendable {
    let metrics: ProxyMetrics
    private let memo = Mutex(AnswerMemo())
    /// Client queries taken (`began`) and not yet answered (`send`).
    private let unanswered = Atomic<Int>(0)
    private let scheduler: any ProxyScheduler
    private let logger: Logger

    init(scheduler: any ProxyScheduler, logger: Logger, metrics: ProxyMetrics) {
        self.metrics = metrics
        self.scheduler = scheduler
        self.logger = logger
    }

    /// A client query is taken: it is answered through `send` once.
    func began() { unanswered.add(1, ordering: .relaxed) }

    /// Client queries taken and not yet answered: waiting for mDNS, or being answered.
    var inFlight: Int { unanswered.load(ordering: .relaxed) }

    /// A hit another query with the same bytes has already encoded in `epoch`, with `id`.
    func memoized(_ key: AnswerMemo.Key, id: UInt16, epoch: UInt64) -> AnswerMemo.Answer? {
        memo.withLock { $0.answer(to: key, id: id, epoch: epoch) }
    }

    /// Encodes and sends `message`; `replay` says whether (and as what) it may be replayed.
    func finish(_ message: Message, _ context: QueryContext, cache: CacheOutcome, replay: ReplayTicket.Kind? = nil) {
        switch context.asker {
        case .part(let deliver), .proxy(let deliver):
            deliver(message)
            return
        case .client:
            break
        }
        var message = message
        var replay = replay
        if let keepalive = context.tcpKeepalive, message.edns != nil {
            message.edns?.options.append(.tcpKeepalive(timeout: keepalive))
            replay = nil
        }
        var sent = message
        var bytes: [UInt8]?
        do {
            bytes = try message.encode(limit: context.limit)
        } catch {
            logger.error("cannot encode answer", metadata: ["dns.error": "\(error)", "dns.id": "\(message.id)"])
            sent.answers = []
            sent.authority = []
            sent.additional = []
            sent.rcode = .servFail
            bytes = try? sent.encode(limit: context.limit)
        }
        let rcode = "\(sent.rcode)"
        // Only answers as asked are replayed or shared, not a SERVFAIL put in their place.
        let replayable = bytes != nil && sent.rcode == message.rcode ? replay : nil
        if replayable == .hit, let bytes, let key = context.memoKey {
            memo.withLock { $0.store(AnswerMemo.Answer(bytes: bytes, rcode: rcode), for: key, epoch: context.epoch) }
        }
        send(bytes, rcode: rcode, context, cache: cache, replay: replayable)
    }

    /// Sends encoded bytes (nil: nothing) to a client with a replay ticket of kind `replay`,
    /// and records the answer's metrics.
    func send(
        _ bytes: [UInt8]?, rcode: String, _ context: QueryContext, cache: CacheOutcome, replay: ReplayTicket.Kind?
    ) {
        guard case .client(let transport, let respond) = context.asker else { return }
        let counters = metrics.counters(transport: transport.rawValue, qtype: context.qtype, rcode: rcode)
        let ticket = replay.map { kind in
            ReplayTicket(epoch: context.epoch, lifetime: context.replayLifetime, kind: kind, counters: counters)
        }
        // Counted before the front end has it, so that a reader who saw the answer sees it counted.
        metrics.answered(counters, cache: cache.rawValue, seconds: scheduler.now() - context.started)
        unanswered.subtract(1, ordering: .relaxed)
        respond(ProxyReply(bytes: bytes, replay: ticket))
    }
}

// MARK: - Context

/// What answering a query needs besides the message: who asked and so where the answer
/// goes, how big it may be, how it is tailored to its client (and so whether other clients
/// may share it), and what its metrics are labelled with.
struct QueryContext: Sendable {
    var started: Duration
    /// The proxy's epoch when the query arrived, for its `ReplayTicket`.
    var epoch: UInt64
    /// How long its answer may be replayed before the proxy is asked again.
    var replayLifetime: Duration
    var qtype: String
    var limit: Int
    var asker: Asker
    /// Set for queries whose hit answer may be shared with other clients (`AnswerMemo`): a
    /// client's mDNS query whose answer is not tailored to it (below).
    var memoKey: AnswerMemo.Key? = nil
    /// The connection's idle timeout, announced in the answer's edns-tcp-keepalive (RFC 7828):
    /// set when a TCP query asked. Such an answer is for this connection now, so neither
    /// replayed nor shared.
    var tcpKeepalive: Duration? = nil
    /// The client is in another private address realm than the link (`PrivateRealms`): its
    /// answers leave the link's private addresses out, so they are not shared either.
    var hidesPrivateAddresses = false

    /// A bounded set of metric label values: the common types by name, the rest as "other".
    static func label(for type: RRType) -> String {
        switch type {
        case .a, .aaaa, .ptr, .srv, .txt, .soa, .ns, .any, .cname, .ds, .nsec: return "\(type)"
        default: return "other"
        }
    }
}

/// Who asked a query, and so where its answer goes.
enum Asker: Sendable {
    /// A client, over `transport`: the answer is encoded within the size limit, sent through
    /// `respond`, and counted.
    case client(DNSTransport, respond: @Sendable (ProxyReply) -> Void)
    /// A part of a client's composite query (one type of an NSEC answer, `NSECSynthesis`):
    /// the answer goes to the composite as a message, neither encoded, sent, nor counted as an
    /// answer (the composite's is); its cache hits and misses are the client's.
    case part(@Sendable (Message) -> Void)
    /// The proxy itself (the link inventory): it uses the cache like any query, but its hits
    /// and misses are not clients', and the answer comes back as a message.
    case proxy(@Sendable (Message) -> Void)

    /// Whether its cache hits and misses count in `ProxyStats`.
    var isClient: Bool {
        if case .proxy = self { return false }
        return true
    }
}

/// How the cache served a query (the `cache` label of `dns_answer_duration_seconds`).
enum CacheOutcome: String, Sendable, CaseIterable {
    /// From a live browse, at once.
    case hit
    /// After waiting for mDNS, or refused for the cache's limits (SERVFAIL).
    case miss
    /// From a released browse's last results while a fresh browse starts.
    case optimistic
    /// From configuration, or refused, without the cache.
    case immediate
    /// A failure before or instead of an answer (FORMERR, the browse dropped by a reload).
    case error
}

// MARK: - Replay and the answer memo

/// Replayable answers: the fast path of a cache hit.
///
/// An answer built from data that has not changed since is the same bytes for the same query
/// bytes (apart from the ID): TTLs are the fixed cap (RFC 8766 §5.5.1), owner names are the
/// query's own spelling, and the size limit comes from the query's EDNS OPT. So the front ends
/// may keep the encoded answer and replay it, patched with the new ID, for byte-identical
/// queries from the same client, as long as the ticket is current. Every change that could
/// alter an answer (a record added or removed, a browse released, a reload) moves the proxy's
/// epoch on, which retires every ticket issued before it.
public struct ReplayTicket: Sendable {
    /// The proxy's epoch when the query started; current while it has not moved.
    let epoch: UInt64
    /// How long a front end may replay the answer before asking the proxy again (whether it is
    /// current is the epoch's business, not age's): a quarter of the browse idle timeout, so
    /// that the browses replayed answers come from stay in use, and at most 10 s.
    public let lifetime: Duration
    /// Which counter of `ProxyStats` a replay adds to, as the original answer did.
    let kind: Kind
    /// The metric counters a replay adds to, found when the answer was counted: every loop's
    /// replay cache reports each entry every second, on its event loop, where a metric lookup
    /// (under the metrics lock) per entry would hold up the queries behind it.
    let counters: AnswerCounters

    enum Kind: Sendable {
        case hit
        case immediate
        case refused
    }

    static func lifetime(browseIdleTimeout: Duration) -> Duration {
        min(.seconds(10), browseIdleTimeout / 4)
    }
}

/// An encoded answer (nil: send nothing) and, when it may be replayed, its ticket.
public struct ProxyReply: Sendable {
    public var bytes: [UInt8]?
    public var replay: ReplayTicket?

    public init(bytes: [UInt8]?, replay: ReplayTicket? = nil) {
        self.bytes = bytes
        self.replay = replay
    }
}

extension DiscoveryProxy {
    /// Whether an answer issued with `ticket` is still what the proxy would answer now. One
    /// atomic load: this runs for every replayed query.
    public func isCurrent(_ ticket: ReplayTicket) -> Bool {
        ticket.epoch == currentEpoch
    }

    /// Counts answers the front ends replayed, in batches, as if the proxy had given them:
    /// queries by transport/qtype/rcode and the hit/immediate/refused counters. Replays are
    /// not timed one by one (that would put a histogram lock back on the fast path); the
    /// benchmark measures them instead.
    public func replayed(_ ticket: ReplayTicket, count: Int) {
        guard count > 0 else { return }
        countReplays(ticket.kind, count)
        ticket.counters.queries.increment(by: count)
        ticket.counters.replayed.increment(by: Int64(count))
    }
}

/// Encoded cache-hit answers by query, shared by every client: a client's first query for a
/// question another client has asked since the last change gets a copy of that answer with
/// its own ID, instead of a snapshot, a `Message` and an ldns encoding (measured in
/// docs/BENCHMARKS.md: the copy is an order of magnitude cheaper).
///
/// The front ends' replay caches do the same per client and per event loop, without the
/// proxy; this is the shared level behind them, so that many clients asking the same few
/// questions (a site's laptops browsing for printers) cost one encoding, not one each.
///
/// Keyed by the query's bytes after the ID (name as spelled, flags, EDNS OPT) and the
/// transport (the size limit). Valid for one epoch only (`DiscoveryProxy.invalidateReplays`):
/// any change that could alter an answer retires every entry, as it retires replay tickets.
/// Bounded in entries and in answer bytes; when full it starts over.
struct AnswerMemo: Sendable {
    struct Key: Hashable, Sendable {
        /// The query without its ID.
        var query: [UInt8]
        var transport: DNSTransport

        init(query message: [UInt8], transport: DNSTransport) {
            self.query = Array(message.dropFirst(2))
            self.transport = transport
        }

        func hash(into hasher: inout Hasher) {
            query.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(transport)
        }
    }

    struct Answer: Sendable {
        /// The encoded answer; its ID is the first query's and is replaced on each use.
        var bytes: [UInt8]
        /// Its rcode as the metrics label it.
        var rcode: String
    }

    private var entries: [Key: Answer] = [:]
    /// The epoch all entries belong to.
    private var epoch: UInt64 = 0
    private var answerBytes = 0
    let maxEntries: Int
    let maxAnswerBytes: Int

    init(maxEntries: Int = 4096, maxAnswerBytes: Int = 1 << 20) {
        self.maxEntries = maxEntries
        self.maxAnswerBytes = maxAnswerBytes
    }

    var count: Int { entries.count }

    /// The answer stored for `key` in `epoch`, with `id` patched in.
    func answer(to key: Key, id: UInt16, epoch: UInt64) -> Answer? {
        guard epoch == self.epoch, var answer = entries[key], answer.bytes.count >= 2 else { return nil }
        answer.bytes[0] = UInt8(id >> 8)
        answer.bytes[1] = UInt8(id & 0xFF)
        return answer
    }

    /// Stores an answer built from the data of `epoch`. A newer epoch drops every older entry;
    /// an answer from an older epoch than the entries' is already out of date and not kept.
    mutating func store(_ answer: Answer, for key: Key, epoch: UInt64) {
        guard epoch >= self.epoch, answer.bytes.count <= maxAnswerBytes else { return }
        if epoch > self.epoch || entries.count >= maxEntries || answerBytes + answer.bytes.count > maxAnswerBytes {
            entries.removeAll(keepingCapacity: epoch == self.epoch)
            answerBytes = 0
            self.epoch = epoch
        }
        if let old = entries.updateValue(answer, forKey: key) { answerBytes -= old.bytes.count }
        answerBytes += answer.bytes.count
    }
}

// MARK: - Presentation in the zone

/// How one link's cached records are shown to clients (RFC 8766 §5.5): `.local` names
/// rewritten into the link's zone, link-local addresses left out when suppression is on
/// (§5.5.2), private addresses left out for a client of another realm (§5.5.2,
/// `PrivateRealms`), and service types the link does not share left out of
/// `_services._dns-sd._udp`. Unicast answers (`AnswerBuilder`), DNS Push (`Subscriber`) and
/// the status page all show records through it, so a record reads the same everywhere.
struct ZonePresentation: Sendable {
    var zone: DNSName
    /// Where host names go (`Link.hostZone`); nil: `zone`.
    var hostZone: DNSName?
    var services: ServiceFilter
    var suppressLinkLocal: Bool
    var hidesPrivateAddresses: Bool

    init(
        zone: DNSName, hostZone: DNSName? = nil, services: ServiceFilter = ServiceFilter(), suppressLinkLocal: Bool,
        hidesPrivateAddresses: Bool = false
    ) {
        self.zone = zone
        self.hostZone = hostZone
        self.services = services
        self.suppressLinkLocal = suppressLinkLocal
        self.hidesPrivateAddresses = hidesPrivateAddresses
    }

    init(link: Link, suppressLinkLocal: Bool, hidesPrivateAddresses: Bool = false) {
        self.init(
            zone: link.zone, hostZone: link.hostZone, services: link.services, suppressLinkLocal: suppressLinkLocal,
            hidesPrivateAddresses: hidesPrivateAddresses)
    }

    /// The RDATA a client is given for `record`; nil when the record is not shown (a
    /// suppressed address, a filtered service type, undecodable or unmappable RDATA).
    func rdata(of record: CachedRecord) -> RData? {
        if !services.isOpen, record.type == .ptr, let target = record.ptrTarget,
            let type = ServiceFilter.serviceType(of: target.labels.dropLast().map { $0 }), !services.permits(type)
        {
            return nil
        }
        return rewritten(record)
    }

    /// The RDATA in the zone without the service filter: what a RECONFIRM names, and the
    /// status page's view of a record.
    func rewritten(_ record: CachedRecord) -> RData? {
        record.rdata.flatMap {
            NameMapping.toZone(
                $0, zone: zone, hostZone: hostZone, suppressLinkLocal: suppressLinkLocal,
                hidePrivate: hidesPrivateAddresses)
        }
    }

    /// The record's owner name in the zone (for additional records); nil when too long.
    func owner(of record: CachedRecord) -> DNSName? {
        NameMapping.toZone(record.localName, zone: zone, hostZone: hostZone)
    }
}

/// RFC 8766 §5.5.2: "DNS SRV records that reference target host names that have no addresses
/// usable by the requester should be suppressed, and likewise, DNS-SD service browsing PTR
/// records that point to unusable SRV records". The proxy can tell only for a target whose
/// addresses it fully knows (`Snapshot.settledHosts`) and that has at least one, all of them
/// left out for this client (link-local, or private in another realm): a host it knows
/// nothing about, or no address of yet, is shown, so that lost mDNS packets never hide a
/// service. Applies while link-local suppression is on.
struct UsableTargets {
    /// Hosts with known addresses, none of them shown to this client.
    private var unusableHosts: Set<DNSName> = []
    /// Instances all of whose known SRV records point to unusable hosts.
    private var unusableInstances: Set<DNSName> = []

    init(snapshot: Snapshot, presentation: ZonePresentation, enabled: Bool) {
        guard enabled, !snapshot.settledHosts.isEmpty else { return }
        var addresses: [DNSName: (known: Int, usable: Int)] = [:]
        for record in snapshot.additional where record.type == .a || record.type == .aaaa {
            guard snapshot.settledHosts.contains(record.localName) else { continue }
            addresses[record.localName, default: (0, 0)].known += 1
            if presentation.rewritten(record) != nil { addresses[record.localName, default: (0, 0)].usable += 1 }
        }
        unusableHosts = Set(addresses.filter { $0.value.known > 0 && $0.value.usable == 0 }.keys)
        guard !unusableHosts.isEmpty else { return }
        var services: [DNSName: (count: Int, unusable: Int)] = [:]
        for record in snapshot.answers + snapshot.additional where record.type == .srv {
            guard let target = record.localTarget else { continue }
            services[record.localName, default: (0, 0)].count += 1
            if unusableHosts.contains(target) { services[record.localName, default: (0, 0)].unusable += 1 }
        }
        unusableInstances = Set(services.filter { $0.value.unusable == $0.value.count }.keys)
    }

    /// No host is known to be unusable: every record is shown.
    var showsEverything: Bool { unusableHosts.isEmpty }

    /// Whether `record` is shown: not an SRV to an unusable host, nor a PTR to (or the TXT of)
    /// an instance whose every SRV is.
    func shows(_ record: CachedRecord) -> Bool {
        guard !unusableHosts.isEmpty else { return true }
        switch record.type {
        case .srv: return record.localTarget.map { !unusableHosts.contains($0) } ?? true
        case .ptr: return record.localTarget.map { !unusableInstances.contains($0) } ?? true
        case .txt: return !unusableInstances.contains(record.localName)
        default: return true
        }
    }
}

// MARK: - Private realms

/// Private address realms (RFC 8766 §5.5.2): an RFC 1918 or Unique Local (RFC 4193) address
/// reaches its host only from inside the network that routes it. A site with several such
/// networks names them here: a link is in a realm (`Link.realm`), and clients are placed in
/// realms by their address prefixes. A private address of a link's host is then not given to
/// a client known to be in another realm; a client in no realm, or a link in none, sees every
/// address, since the proxy cannot tell (§5.5.2: "in cases where the Discovery Proxy can
/// determine that the querying client is in a different address realm").
public struct PrivateRealms: Hashable, Sendable {
    public struct Realm: Hashable, Sendable {
        public var name: String
        public var clients: [IPPrefix]

        public init(name: String, clients: [IPPrefix]) {
            self.name = name
            self.clients = clients
        }
    }

    public var realms: [Realm]

    public init(_ realms: [Realm] = []) {
        self.realms = realms
    }

    public var isEmpty: Bool { realms.isEmpty }

    /// The realm of the most specific prefix that holds `client`; nil when none does.
    public func realm(of client: [UInt8]) -> String? {
        var best: (name: String, length: Int)?
        for realm in realms {
            for prefix in realm.clients where prefix.contains(client) && prefix.length > (best?.length ?? -1) {
                best = (realm.name, prefix.length)
            }
        }
        return best?.name
    }

    /// Whether the private addresses of `link`'s hosts are withheld from `client`: both are
    /// in a realm, and not the same one.
    public func hidesPrivateAddresses(of link: Link, from client: DNSClient) -> Bool {
        guard let linkRealm = link.realm, let clientRealm = realm(of: client.address) else { return false }
        return clientRealm != linkRealm
    }

    /// 10/8, 172.16/12, 192.168/16 (RFC 1918) and fc00::/7 (RFC 4193).
    public static func isPrivate(_ address: [UInt8]) -> Bool {
        switch address.count {
        case 4:
            return address[0] == 10 || (address[0] == 172 && address[1] & 0xF0 == 16)
                || (address[0] == 192 && address[1] == 168)
        case 16:
            return address[0] & 0xFE == 0xFC
        default:
            return false
        }
    }
}
