import EventCounting
import Metrics
import Synchronization

/// The proxy logic's instruments, each declared once here as a typed handle and incremented
/// where its event happens, once: `ProxyMetrics` for queries, mDNS and the gateway,
/// `PushMetrics` for DNS Push. Counters are `EventCounter`s, so `ProxyStats` (the status page,
/// `/api`) reads the very counts Prometheus exports, through the same handles. All go through
/// the factory given (the executable's Prometheus factory by default, `MetricsTestKit`'s
/// `TestMetrics` in tests).
///
/// Label sets are fixed per name (Prometheus rejects a name registered with two label sets),
/// and no label ever carries a query name.
final class ProxyMetrics: Sendable {
    let factory: any MetricsFactory

    /// `dns_acl_refused_total`: refused by the client ACL (`allow-clients`).
    let aclRefused: EventCounter
    /// `dns_malformed_queries_total`: answered FORMERR (undecodable, or not one question).
    let malformed: EventCounter
    /// `dns_refused_queries_total`: answered REFUSED (outside the zones, the client ACL or a
    /// link view), replayed refusals included.
    let refused: EventCounter
    /// `dns_queries_dropped_total`: not answered at all (a response, or no header).
    let dropped: EventCounter
    /// `dns_link_refused_total{link}`: refused because the client may not see that link.
    let linkRefused: LinkCounters
    /// `mdns_queries_started_total{link}`: mDNS queries started (cache misses, refreshes).
    let mdnsQueriesStarted: LinkCounters
    /// `mdns_queries_rate_limited_total{link}`: delayed or refused by the link's rate limit.
    let mdnsRateLimited: LinkCounters
    /// `mdns_first_result_seconds`: from the start of an mDNS query to its first record.
    let firstResult: Timer
    /// `dns_answer_duration_seconds{cache}`, one per cache outcome.
    private let answerDuration: [String: Timer]
    /// `dns_queries_total{transport,qtype,rcode}` and `dns_answers_replayed_total{transport}`,
    /// made per label set on first use (the qtype and rcode sets are open).
    private let answerCounters = Mutex<[Key: AnswerCounters]>([:])

    /// The gateway's, by client link: `gateway_announced_instances`, `gateway_renames_total`,
    /// `gateway_withdrawn_total`, `gateway_publish_errors_total`.
    let gatewayAnnounced: LinkGauges
    let gatewayRenames: LinkCounters
    let gatewayWithdrawn: LinkCounters
    let gatewayPublishErrors: LinkCounters
    /// By far link: `gateway_lookups_waiting`, `gateway_lookup_pace` (lookups a second, the
    /// far link's `LookupPacer`) and `gateway_query_packets_per_second` (what it measured).
    let gatewayLookupsWaiting: LinkGauges
    let gatewayLookupPace: LinkGauges
    let gatewayQueryPackets: LinkGauges

    /// A label set of `dns_queries_total`.
    private struct Key: Hashable {
        let transport: String
        let qtype: String
        let rcode: String
    }

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        aclRefused = EventCounter(label: "dns_acl_refused_total", factory: factory)
        malformed = EventCounter(label: "dns_malformed_queries_total", factory: factory)
        refused = EventCounter(label: "dns_refused_queries_total", factory: factory)
        dropped = EventCounter(label: "dns_queries_dropped_total", factory: factory)
        linkRefused = LinkCounters("dns_link_refused_total", factory: factory)
        mdnsQueriesStarted = LinkCounters("mdns_queries_started_total", factory: factory)
        mdnsRateLimited = LinkCounters("mdns_queries_rate_limited_total", factory: factory)
        firstResult = Timer(label: "mdns_first_result_seconds", preferredDisplayUnit: .seconds, factory: factory)
        var durations: [String: Timer] = [:]
        for cache in CacheOutcome.allCases {
            durations[cache.rawValue] = Timer(
                label: "dns_answer_duration_seconds", dimensions: [("cache", cache.rawValue)],
                preferredDisplayUnit: .seconds, factory: factory)
        }
        answerDuration = durations
        gatewayAnnounced = LinkGauges("gateway_announced_instances", factory: factory)
        gatewayRenames = LinkCounters("gateway_renames_total", factory: factory)
        gatewayWithdrawn = LinkCounters("gateway_withdrawn_total", factory: factory)
        gatewayPublishErrors = LinkCounters("gateway_publish_errors_total", factory: factory)
        gatewayLookupsWaiting = LinkGauges("gateway_lookups_waiting", factory: factory)
        gatewayLookupPace = LinkGauges("gateway_lookup_pace", factory: factory)
        gatewayQueryPackets = LinkGauges("gateway_query_packets_per_second", factory: factory)
        for transport in ["udp", "tcp"] {
            _ = Counter(label: "dns_answers_replayed_total", dimensions: [("transport", transport)], factory: factory)
        }
    }

    /// The counters of answers with these labels, for `answered` and for the replay tickets
    /// of those answers (`DiscoveryProxy.replayed`). Takes the counters' lock inside its own;
    /// nothing takes them the other way round.
    func counters(transport: String, qtype: String, rcode: String) -> AnswerCounters {
        let key = Key(transport: transport, qtype: qtype, rcode: rcode)
        return answerCounters.withLock { cache in
            if let found = cache[key] { return found }
            let made = AnswerCounters(
                queries: EventCounter(
                    label: "dns_queries_total",
                    dimensions: [("transport", transport), ("qtype", qtype), ("rcode", rcode)],
                    factory: factory),
                replayed: Counter(
                    label: "dns_answers_replayed_total", dimensions: [("transport", transport)], factory: factory))
            cache[key] = made
            return made
        }
    }

    /// `dns_queries_total{transport,qtype,rcode}` and `dns_answer_duration_seconds{cache}`.
    func answered(_ counters: AnswerCounters, cache: String, seconds: Duration) {
        counters.queries.increment()
        answerDuration[cache]?.record(duration: seconds)
    }

    /// `dns_queries_total` over every transport and type, by RCODE (`"SERVFAIL"`). The status
    /// page's answer counts are these, not counts of their own.
    func answeredByRcode() -> [String: Int] {
        answerCounters.withLock { cache in
            cache.reduce(into: [:]) { $0[$1.key.rcode, default: 0] += $1.value.queries.value }
        }
    }

    /// Makes the per-link counters of `links`, so that dashboards and alerts see them at 0
    /// from the start.
    func prepare(links: [String]) {
        for family in [linkRefused, mdnsQueriesStarted, mdnsRateLimited] { family.prepare(links) }
    }

    /// The far instances announced on a client link; the link's other gateway counters are
    /// made with it, so that they are exported at 0 once the gateway announces there.
    func gatewayAnnounced(_ count: Int, on link: String) {
        gatewayAnnounced[link].record(count)
        for family in [gatewayRenames, gatewayWithdrawn, gatewayPublishErrors] { family.prepare([link]) }
    }

    /// The far link's `LookupPacer` as the gauges show it.
    func gatewayLookups(link: String, waiting: Int, pace: Double, packetRate: Double?) {
        gatewayLookupsWaiting[link].record(waiting)
        gatewayLookupPace[link].record(pace)
        if let packetRate { gatewayQueryPackets[link].record(packetRate) }
    }
}

/// One instrument family with one label (a link, an RCODE, a limit): each value's instrument
/// made once, on first use (or by `prepare`), through the factory given.
final class PerLabel<Instrument: Sendable>: Sendable {
    private let make: @Sendable (String) -> Instrument
    private let made = Mutex<[String: Instrument]>([:])

    init(_ make: @escaping @Sendable (_ value: String) -> Instrument) {
        self.make = make
    }

    subscript(value: String) -> Instrument {
        made.withLock { made in
            if let instrument = made[value] { return instrument }
            let instrument = make(value)
            made[value] = instrument
            return instrument
        }
    }

    func prepare(_ values: [String]) { for value in values { _ = self[value] } }

    fileprivate var all: [String: Instrument] { made.withLock { $0 } }
}

typealias LinkCounters = PerLabel<EventCounter>
typealias LinkGauges = PerLabel<Gauge>

extension PerLabel where Instrument == EventCounter {
    /// `label{dimension="…"}`, by link unless told otherwise.
    convenience init(_ label: String, dimension: String = "link", factory: any MetricsFactory) {
        self.init { EventCounter(label: label, dimensions: [(dimension, $0)], factory: factory) }
    }

    /// Over every value.
    var total: Int { all.values.reduce(0) { $0 + $1.value } }

    /// Each value's count (the status page's).
    var counts: [String: Int] { all.mapValues(\.value) }
}

extension PerLabel where Instrument == Gauge {
    convenience init(_ label: String, dimension: String = "link", factory: any MetricsFactory) {
        self.init { Gauge(label: label, dimensions: [(dimension, $0)], factory: factory) }
    }
}

/// The counters of one label set of answers. Answers the front ends replayed (see
/// `ReplayTicket`) count in `dns_queries_total` like any other, and in
/// `dns_answers_replayed_total{transport}`; they are not timed one by one.
final class AnswerCounters: Sendable {
    /// `dns_queries_total{transport,qtype,rcode}`
    let queries: EventCounter
    /// `dns_answers_replayed_total{transport}`
    let replayed: Counter

    init(queries: EventCounter, replayed: Counter) {
        self.queries = queries
        self.replayed = replayed
    }
}

/// DNS Push instruments: `dns_push_sessions` and `dns_push_subscriptions` (gauges),
/// `dns_push_messages_sent_total` and `dns_push_bytes_sent_total` (PUSH messages), and
/// `dns_push_sessions_ended_total{reason}`.
final class PushMetrics: Sendable {
    private let sessions: Gauge
    private let subscriptions: Gauge
    private let messagesSent: Counter
    private let bytesSent: Counter
    private let ended: [PushSessionEnd: Counter]

    init(factory: any MetricsFactory) {
        sessions = Gauge(label: "dns_push_sessions", factory: factory)
        subscriptions = Gauge(label: "dns_push_subscriptions", factory: factory)
        messagesSent = Counter(label: "dns_push_messages_sent_total", factory: factory)
        bytesSent = Counter(label: "dns_push_bytes_sent_total", factory: factory)
        var ended: [PushSessionEnd: Counter] = [:]
        for reason in PushSessionEnd.allCases {
            ended[reason] = Counter(
                label: "dns_push_sessions_ended_total", dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        self.ended = ended
        sessions.record(0)
        subscriptions.record(0)
    }

    func sessionEnded(_ reason: PushSessionEnd) { ended[reason]?.increment() }
    func sessions(_ count: Int) { sessions.record(count) }
    func subscriptions(_ count: Int) { subscriptions.record(count) }
    func pushSent(bytes: Int) {
        messagesSent.increment()
        bytesSent.increment(by: bytes)
    }
}
