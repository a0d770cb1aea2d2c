import DNSWire
import MetricsTestKit
import NIOCore
import Testing

@testable import DNSServer

/// The front ends count each event once where it happens (`DNSServerCounters`); the metric,
/// read here with `TestMetrics`, and the status page's `DNSServerStats` show the same count.
@Suite struct DNSServerMetricsTests {
    func value(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)]) throws -> Int64 {
        try metrics.expectCounter(label, dimensions).totalValue
    }

    @Test func everyCounterExistsAtZero() throws {
        let metrics = TestMetrics()
        _ = DNSServerCounters(exportingTo: metrics)
        for transport in ["udp", "tcp"] {
            #expect(try value(metrics, "dns_queries_received_total", [("transport", transport)]) == 0)
        }
        for event in ["accepted", "closed_idle", "closed_limit", "closed_error", "closed_client"] {
            #expect(try value(metrics, "dns_tcp_connections_total", [("event", event)]) == 0)
        }
    }

    @Test func udpQueriesAreCounted() throws {
        let metrics = TestMetrics()
        let h = try UDPDNSHandlerTests.Harness(counters: DNSServerCounters(exportingTo: metrics))
        try h.send([FakeResponder.fast, 1, 2, 3])
        try h.send([FakeResponder.fast, 4, 5, 6])
        #expect(try value(metrics, "dns_queries_received_total", [("transport", "udp")]) == 2)
        #expect(h.counters.snapshot().udpQueriesReceived == 2)
    }

    @Test func tcpConnectionsAndQueriesAreCounted() throws {
        let metrics = TestMetrics()
        let counters = DNSServerCounters(exportingTo: metrics)
        let registry = TCPConnectionRegistry(maxTotal: 1, maxPerClient: 10)
        let open = try TCPHarness(counters: counters, registry: registry)
        let refused = try TCPHarness(counters: counters, registry: registry)  // over the limit
        try open.sendMessage([FakeResponder.fast, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        #expect(try value(metrics, "dns_queries_received_total", [("transport", "tcp")]) == 1)
        #expect(try value(metrics, "dns_tcp_connections_total", [("event", "accepted")]) == 2)
        #expect(try value(metrics, "dns_tcp_connections_total", [("event", "closed_limit")]) == 1)
        open.advance(seconds: 10)  // the idle timeout
        #expect(try value(metrics, "dns_tcp_connections_total", [("event", "closed_idle")]) == 1)
        #expect(counters.snapshot().tcp.closedIdle == 1 && counters.snapshot().tcp.closedLimit == 1)
        for harness in [open, refused] { harness.finish() }
    }
}
