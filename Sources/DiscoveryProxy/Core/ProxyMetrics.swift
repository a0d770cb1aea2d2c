import EventCounting
import Metrics
import Synchronization

/// The proxy logic's instruments, all declared in this file and incremented where the event
/// happens, once: `ProxyMetrics` for queries and mDNS, `PushMetrics` for DNS Push. The
/// counters are `EventCounter`s, so `ProxyStats` (the status page, `/api`) reads the same
/// counts Prometheus exports (`total(_:)`). Created once per label set and reused (creating a metric goes
/// through the factory's lock), through the factory given (the executable's Prometheus
/// factory by default, `MetricsTestKit`'s `TestMetrics` in tests).
///
/// Label sets are fixed per name (Prometheus rejects a name registered with two label sets),
/// and no label ever carries a query name.
final class ProxyMetrics: Sendable {
    private let factory: any MetricsFactory
    private let counters = Mutex<[Key: EventCounter]>([:])
    private let timers = Mutex<[Key: Timer]>([:])
    private let gauges = Mutex<[Key: Gauge]>([:])
    private let answerCounters = Mutex<[Key: AnswerCounters]>([:])

    /// A metric's name and label values. The label names are fixed per metric name, so they
    /// are not part of the key. No string is built for a lookup, which happens once per
    /// answer: the values are the short literals and labels the callers already hold.
    private struct Key: Hashable {
        let label: String
        let value0: String
        let value1: String
        let value2: String

        init(_ label: String, _ dimensions: [(String, String)]) {
            assert(dimensions.count <= 3, "ProxyMetrics.Key holds three label values")
            self.label = label
            self.value0 = dimensions.count > 0 ? dimensions[0].1 : ""
            self.value1 = dimensions.count > 1 ? dimensions[1].1 : ""
            self.value2 = dimensions.count > 2 ? dimensions[2].1 : ""
        }
    }

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// The counters of answers with these labels, for `answered` and for the replay tickets
    /// of those answers (`DiscoveryProxy.replayed`). Takes the counters' lock inside its own;
    /// nothing takes them the other way round.
    func counters(transport: String, qtype: String, rcode: String) -> AnswerCounters {
        let key = Key("dns_queries_total", [("transport", transport), ("qtype", qtype), ("rcode", rcode)])
        return answerCounters.withLock { cache in
            if let found = cache[key] { return found }
            let made = AnswerCounters(
                queries: EventCounter(
                    label: "dns_queries_total", dimensions: [("transport", transport), ("qtype", qtype), ("rcode", rcode)],
                    factory: factory),
                replayed: Counter(label: "dns_answers_replayed_total", dimensions: [("transport", transport)], factory: factory))
            cache[key] = made
            return made
        }
    }

    /// `dns_queries_total{transport,qtype,rcode}` and `dns_answer_duration_seconds{cache}`.
    func answered(_ counters: AnswerCounters, cache: String, seconds: Duration) {
        counters.queries.increment()
        timer("dns_answer_duration_seconds", [("cache", cache)]).record(duration: seconds)
    }

    /// `mdns_first_result_seconds`: from the start of an mDNS query to its first record.
    func firstResult(after delay: Duration) {
        timer("mdns_first_result_seconds", []).record(duration: delay)
    }

    /// Creates the counters that would otherwise appear only on their first event, so that
    /// dashboards and alerts see them at 0 from the start.
    func prepare(links: [String]) {
        _ = counter("dns_acl_refused_total", [])
        _ = counter("dns_malformed_queries_total", [])
        _ = counter("dns_refused_queries_total", [])
        _ = counter("dns_queries_dropped_total", [])
        for transport in ["udp", "tcp"] {
            _ = Counter(label: "dns_answers_replayed_total", dimensions: [("transport", transport)], factory: factory)
        }
        for link in links {
            _ = counter("dns_link_refused_total", [("link", link)])
            _ = counter("mdns_queries_started_total", [("link", link)])
            _ = counter("mdns_queries_rate_limited_total", [("link", link)])
        }
    }

    func mdnsQueryStarted(link: String) { counter("mdns_queries_started_total", [("link", link)]).increment() }
    func mdnsRateLimited(link: String) { counter("mdns_queries_rate_limited_total", [("link", link)]).increment() }
    /// `gateway_lookups_waiting{link}` and `gateway_lookup_pace{link}` (lookups a second): the
    /// far link's `LookupPacer`, and `gateway_query_packets_per_second{link}`, what it measured.
    func gatewayLookups(link: String, waiting: Int, pace: Double, packetRate: Double?) {
        gauge("gateway_lookups_waiting", [("link", link)]).record(waiting)
        gauge("gateway_lookup_pace", [("link", link)]).record(pace)
        if let packetRate { gauge("gateway_query_packets_per_second", [("link", link)]).record(packetRate) }
    }

    func aclRefused() { counter("dns_acl_refused_total", []).increment() }
    /// `dns_link_refused_total{link}`: refused because the client may not see that link.
    func linkRefused(link: String) { counter("dns_link_refused_total", [("link", link)]).increment() }
    /// `dns_malformed_queries_total`: answered FORMERR (undecodable, or not one question).
    func malformed() { counter("dns_malformed_queries_total", []).increment() }
    /// `dns_refused_queries_total`: answered REFUSED (outside the zones, or the client ACL),
    /// replayed refusals included.
    func refused(_ count: Int = 1) { counter("dns_refused_queries_total", []).increment(by: count) }

    /// `dns_queries_dropped_total`: queries not answered at all (a response, or no header).
    func dropped() { counter("dns_queries_dropped_total", []).increment() }

    /// `dns_queries_total` over every transport and type: with one RCODE (`"SERVFAIL"`), or
    /// all of them (nil). The status page's answer counts are these, not counts of their own.
    func answered(rcode: String? = nil) -> Int {
        answerCounters.withLock { cache in
            cache.reduce(0) { $0 + (rcode == nil || $1.key.value2 == rcode ? $1.value.queries.value : 0) }
        }
    }

    /// The count of `label` over all its label values (every link's, say), for `ProxyStats`.
    func total(_ label: String) -> Int {
        counters.withLock { cache in cache.reduce(0) { $0 + ($1.key.label == label ? $1.value.value : 0) } }
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> EventCounter {
        Self.made(counters, Key(label, dimensions)) { EventCounter(label: label, dimensions: dimensions, factory: factory) }
    }

    private func gauge(_ label: String, _ dimensions: [(String, String)]) -> Gauge {
        Self.made(gauges, Key(label, dimensions)) { Gauge(label: label, dimensions: dimensions, factory: factory) }
    }

    private func timer(_ label: String, _ dimensions: [(String, String)]) -> Timer {
        Self.made(timers, Key(label, dimensions)) {
            Timer(label: label, dimensions: dimensions, preferredDisplayUnit: .seconds, factory: factory)
        }
    }

    /// The instrument made for `key`, made now (once) if none was.
    private static func made<Instrument>(
        _ cache: borrowing Mutex<[Key: Instrument]>, _ key: Key, _ make: () -> Instrument
    ) -> Instrument {
        cache.withLock { cache in
            if let made = cache[key] { return made }
            let made = make()
            cache[key] = made
            return made
        }
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
    private let sessions = Gauge(label: "dns_push_sessions")
    private let subscriptions = Gauge(label: "dns_push_subscriptions")
    private let messagesSent = Counter(label: "dns_push_messages_sent_total")
    private let bytesSent = Counter(label: "dns_push_bytes_sent_total")
    private let ended: [PushSessionEnd: Counter]

    init() {
        var ended: [PushSessionEnd: Counter] = [:]
        for reason in PushSessionEnd.allCases {
            ended[reason] = Counter(label: "dns_push_sessions_ended_total", dimensions: [("reason", reason.rawValue)])
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
