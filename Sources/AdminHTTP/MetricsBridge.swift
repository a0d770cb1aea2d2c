public import Prometheus
import CoreMetrics
import Metrics
import DiscoveryProxy
import Synchronization

/// Mirrors an `AdminStatus` snapshot into Prometheus metrics before each `/metrics` scrape.
///
/// The metrics are made once, through swift-metrics backed by the given registry (an explicit
/// `PrometheusMetricsFactory(registry:)`, not the global `MetricsSystem`). Levels become gauges;
/// monotonic snapshot values become counters advanced by the change since the previous update.
/// Create one bridge per registry: two bridges on one registry would advance the same counters twice.
public final class MetricsBridge: Sendable {
    private struct State {
        var counters: [String: DeltaCounter] = [:]
        var linkGauges: [String: CoreMetrics.Gauge] = [:]
        var buildInfo: (version: String, gauge: CoreMetrics.Gauge)?
    }

    /// A counter that follows a monotonic value read from a snapshot.
    private struct DeltaCounter {
        let counter: CoreMetrics.Counter
        var last = 0

        mutating func advance(to value: Int) {
            if value > self.last {
                self.counter.increment(by: value - self.last)
            } else if value < self.last {
                // The source restarted from zero: what it counted since then is new.
                self.counter.increment(by: max(0, value))
            }
            self.last = value
        }
    }

    private let factory: PrometheusMetricsFactory
    private let tcpOpen: CoreMetrics.Gauge
    private let cacheEntries: CoreMetrics.Gauge
    private let cacheHitRatio: CoreMetrics.Gauge
    private let backendConnected: CoreMetrics.Gauge
    private let avahiClients: CoreMetrics.Gauge
    private let state: Mutex<State>

    public init(registry: PrometheusCollectorRegistry) {
        let factory = PrometheusMetricsFactory(registry: registry)
        self.factory = factory
        self.tcpOpen = CoreMetrics.Gauge(label: "dns_tcp_connections_open", factory: factory)
        self.cacheEntries = CoreMetrics.Gauge(label: "dns_cache_entries", factory: factory)
        self.cacheHitRatio = CoreMetrics.Gauge(label: "dns_cache_hit_ratio", factory: factory)
        self.backendConnected = CoreMetrics.Gauge(label: "mdns_backend_connected", factory: factory)
        self.avahiClients = CoreMetrics.Gauge(label: "avahi_clients", factory: factory)

        var state = State()
        func counter(_ key: String, _ label: String, _ dimensions: [(String, String)] = []) {
            let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            state.counters[key] = DeltaCounter(counter: counter)
        }
        for event in ["accepted", "closed_idle", "closed_limit", "closed_error", "closed_client"] {
            counter("tcp.\(event)", "dns_tcp_connections_total", [("event", event)])
        }
        counter("received.udp", "dns_queries_received_total", [("transport", "udp")])
        counter("received.tcp", "dns_queries_received_total", [("transport", "tcp")])
        self.state = Mutex(state)
    }

    /// Sets every gauge and advances every counter to match `status`.
    public func update(from status: AdminStatus) {
        self.tcpOpen.record(status.tcp.open)
        self.cacheEntries.record(status.proxy.activeBrowses)
        self.cacheHitRatio.record(Self.hitRatio(status.proxy))
        self.backendConnected.record(status.avahi.connected ? 1 : 0)
        self.avahiClients.record(status.avahi.clients)

        var browsesPerLink: [String: Int] = [:]
        for link in status.links {
            browsesPerLink[link.interface, default: 0] += link.activeBrowses
        }

        self.state.withLock { state in
            let values: [String: Int] = [
                "tcp.accepted": status.tcp.accepted,
                "tcp.closed_idle": status.tcp.closedIdle,
                "tcp.closed_limit": status.tcp.closedLimit,
                "tcp.closed_error": status.tcp.closedError,
                "tcp.closed_client": status.tcp.closedClient,
                "received.udp": status.udpQueriesReceived,
                "received.tcp": status.tcpQueriesReceived,
            ]
            for (key, value) in values {
                state.counters[key]?.advance(to: value)
            }

            // Links that left the configuration (after a reload) stop being reported.
            for (interface, gauge) in state.linkGauges where browsesPerLink[interface] == nil {
                gauge.destroy()
                state.linkGauges[interface] = nil
            }
            for (interface, count) in browsesPerLink {
                let gauge =
                    state.linkGauges[interface]
                    ?? CoreMetrics.Gauge(
                        label: "mdns_browses_active", dimensions: [("link", interface)], factory: self.factory)
                state.linkGauges[interface] = gauge
                gauge.record(count)
            }

            if state.buildInfo?.version != status.version {
                state.buildInfo?.gauge.destroy()
                let gauge = CoreMetrics.Gauge(
                    label: "discovery_proxy_build_info", dimensions: [("version", status.version)],
                    factory: self.factory)
                gauge.record(1)
                state.buildInfo = (status.version, gauge)
            }
        }
    }

    /// Cache hits / (hits + misses), 0 before the first query.
    static func hitRatio(_ stats: ProxyStats) -> Double {
        let lookups = stats.cacheHits + stats.cacheMisses
        return lookups > 0 ? Double(stats.cacheHits) / Double(lookups) : 0
    }
}
