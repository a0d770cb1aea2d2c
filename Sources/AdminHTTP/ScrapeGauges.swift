import CoreMetrics
import DNSServer
import DiscoveryProxy
import Metrics
public import Prometheus
import Synchronization

/// The levels `/metrics` shows, set from an `AdminStatus` snapshot before each scrape: open TCP
/// connections, cache entries and hit ratio, the mDNS backend's connection and clients, live
/// browses per link, and the build. No counters: every counter is incremented by its own
/// module where the event happens (`ProxyMetrics`, `DNSServerCounters`, the avahi backend).
///
/// Made through swift-metrics backed by the given registry (an explicit
/// `PrometheusMetricsFactory(registry:)`, not the global `MetricsSystem`).
public final class ScrapeGauges: Sendable {
    private struct State {
        var linkGauges: [String: CoreMetrics.Gauge] = [:]
        /// Per link: the learned negative timeout and answer spread (`LinkAnswerTimes`).
        var timingGauges: [String: (negativeTimeout: CoreMetrics.Gauge, spread: CoreMetrics.Gauge)] = [:]
        var buildInfo: (version: String, revision: String, gauge: CoreMetrics.Gauge)?
    }

    private let factory: PrometheusMetricsFactory
    private let tcpOpen: CoreMetrics.Gauge
    private let cacheEntries: CoreMetrics.Gauge
    private let cacheHitRatio: CoreMetrics.Gauge
    private let backendConnected: CoreMetrics.Gauge
    private let backendUp: CoreMetrics.Gauge
    private let avahiClients: CoreMetrics.Gauge
    private let state = Mutex(State())

    public init(registry: PrometheusCollectorRegistry) {
        let factory = PrometheusMetricsFactory(registry: registry)
        self.factory = factory
        self.tcpOpen = CoreMetrics.Gauge(label: "dns_tcp_connections_open", factory: factory)
        self.cacheEntries = CoreMetrics.Gauge(label: "dns_cache_entries", factory: factory)
        self.cacheHitRatio = CoreMetrics.Gauge(label: "dns_cache_hit_ratio", factory: factory)
        self.backendConnected = CoreMetrics.Gauge(label: "mdns_backend_connected", factory: factory)
        self.backendUp = CoreMetrics.Gauge(label: "mdns_backend_up", factory: factory)
        self.avahiClients = CoreMetrics.Gauge(label: "avahi_clients", factory: factory)
    }

    /// Sets every gauge to match `status`.
    public func update(from status: AdminStatus) {
        self.tcpOpen.record(status.tcp.open)
        self.cacheEntries.record(status.proxy.activeBrowses)
        self.cacheHitRatio.record(Self.hitRatio(status.proxy))
        self.backendConnected.record(status.avahi.connected ? 1 : 0)
        self.backendUp.record(status.avahi.up ? 1 : 0)
        self.avahiClients.record(status.avahi.clients)

        var browsesPerLink: [String: Int] = [:]
        for link in status.links {
            browsesPerLink[link.interface, default: 0] += link.activeBrowses
        }

        self.state.withLock { state in
            // Links that left the configuration (after a reload) stop being reported.
            for (interface, gauge) in state.linkGauges where browsesPerLink[interface] == nil {
                gauge.destroy()
                state.linkGauges[interface] = nil
            }
            for (interface, gauges) in state.timingGauges where browsesPerLink[interface] == nil {
                gauges.negativeTimeout.destroy()
                gauges.spread.destroy()
                state.timingGauges[interface] = nil
            }
            for link in status.links {
                let gauges =
                    state.timingGauges[link.interface]
                    ?? (
                        CoreMetrics.Gauge(
                            label: "mdns_link_negative_timeout_seconds", dimensions: [("link", link.interface)],
                            factory: self.factory),
                        CoreMetrics.Gauge(
                            label: "mdns_link_answer_spread_seconds", dimensions: [("link", link.interface)],
                            factory: self.factory)
                    )
                state.timingGauges[link.interface] = gauges
                gauges.negativeTimeout.record(link.answerTimes.negativeTimeoutSeconds)
                gauges.spread.record(link.answerTimes.spreadSeconds)
            }
            for (interface, count) in browsesPerLink {
                let gauge =
                    state.linkGauges[interface]
                    ?? CoreMetrics.Gauge(
                        label: "mdns_browses_active", dimensions: [("link", interface)], factory: self.factory)
                state.linkGauges[interface] = gauge
                gauge.record(count)
            }

            if state.buildInfo?.version != status.version || state.buildInfo?.revision != status.revision {
                state.buildInfo?.gauge.destroy()
                let gauge = CoreMetrics.Gauge(
                    label: "discovery_proxy_build_info",
                    dimensions: [("version", status.version), ("revision", status.revision)], factory: self.factory)
                gauge.record(1)
                state.buildInfo = (status.version, status.revision, gauge)
            }
        }
    }

    /// Cache hits / (hits + misses), 0 before the first query.
    static func hitRatio(_ stats: ProxyStats) -> Double {
        let lookups = stats.cacheHits + stats.cacheMisses
        return lookups > 0 ? Double(stats.cacheHits) / Double(lookups) : 0
    }
}
