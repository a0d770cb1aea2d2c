import DNSWire
import MetricsTestKit
import Synchronization
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The proxy's instruments are incremented once, where the event happens (`ProxyMetrics`),
/// read here through swift-metrics' `TestMetrics` instead of a Prometheus scrape; the status
/// page's `ProxyStats` reads the same counters, so the two cannot disagree.
@Suite("Proxy metrics")
struct ProxyMetricsTests {
    func value(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
        try metrics.expectCounter(label, dimensions).totalValue
    }

    @Test("created at 0 before any query, so dashboards see them from the start")
    func preparedAtZero() throws {
        let metrics = TestMetrics()
        _ = Harness(metrics: metrics)
        for label in ["dns_malformed_queries_total", "dns_refused_queries_total", "dns_acl_refused_total"] {
            #expect(try value(metrics, label) == 0, "\(label)")
        }
        #expect(try value(metrics, "mdns_queries_started_total", [("link", "eth1")]) == 0)
    }

    @Test("FORMERR answers move dns_malformed_queries_total; a DSO message over UDP (NOTIMP) does not")
    func malformed() throws {
        let metrics = TestMetrics()
        let h = Harness(metrics: metrics)
        _ = h.send([0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xFF])  // QDCOUNT 1, a question cut short
        let two = Message(
            id: 8,
            questions: [
                Question(name: try DNSName("lab1.example."), type: .soa),
                Question(name: try DNSName("lab2.example."), type: .soa),
            ])
        _ = h.send(try two.encode())  // QDCOUNT 2 (RFC 8766 §5.1 wants one)
        _ = h.send([0, 9, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0])  // OPCODE 6 (DSO), no TLVs
        #expect(try value(metrics, "dns_malformed_queries_total") == 2)
        #expect(h.proxy.stats.formErr == 2)
    }

    @Test("REFUSED answers move dns_refused_queries_total: outside the zones, the ACL, and their replays")
    func refused() throws {
        let metrics = TestMetrics()
        let h = Harness(metrics: metrics) { $0.allowedClients = [IPPrefix("192.0.2.0/24")!] }
        let tickets = Mutex<[ReplayTicket]>([])
        let outside = try Message(id: 1, questions: [Question(name: DNSName("www.example.org."), type: .a)]).encode()
        h.proxy.handle(query: outside, from: .test([192, 0, 2, 9])) { (reply: ProxyReply) in
            if let ticket = reply.replay { tickets.withLock { $0.append(ticket) } }
        }
        h.proxy.handle(query: outside, from: .test([198, 51, 100, 7])) { (_: ProxyReply) in }
        #expect(try value(metrics, "dns_refused_queries_total") == 2)
        #expect(try value(metrics, "dns_acl_refused_total") == 1)
        let ticket = try #require(tickets.withLock { $0.first })
        h.proxy.replayed(ticket, count: 3)
        #expect(try value(metrics, "dns_refused_queries_total") == 5)
        #expect(h.proxy.stats.refused == 5 && h.proxy.stats.aclRefused == 1)
    }

    @Test("every answer is counted by transport, qtype and rcode, and timed by cache outcome")
    func answers() throws {
        let metrics = TestMetrics()
        let h = Harness(metrics: metrics)
        h.ask("lab1.example.", .soa)
        h.ask("lab1.example.", .soa, tcp: true)
        #expect(
            try value(metrics, "dns_queries_total", [("transport", "udp"), ("qtype", "SOA"), ("rcode", "NOERROR")]) == 1
        )
        #expect(
            try value(metrics, "dns_queries_total", [("transport", "tcp"), ("qtype", "SOA"), ("rcode", "NOERROR")]) == 1
        )
        #expect(try metrics.expectTimer("dns_answer_duration_seconds", [("cache", "immediate")]).values.count == 2)
    }

    /// Issue 43: SERVFAILs sent for waiting queries on a reload that drops their link and at
    /// shutdown were not counted in the status page's SERVFAILs; now both read
    /// `dns_queries_total`, and every query taken is answered, dropped or in flight.
    @Test("SERVFAILs at reload and shutdown count once; queries in = answers out + dropped + in flight")
    func servFailsAtReloadAndShutdown() throws {
        let metrics = TestMetrics()
        let h = Harness(metrics: metrics)
        let waiting = h.ask("_ipp._tcp.lab2.example.", .ptr)  // a miss: waits for mDNS on eth2
        _ = h.send([0, 9, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0])  // a response: dropped
        var stats = h.proxy.stats
        #expect(!waiting.isAnswered && stats.inFlight == 1 && stats.dropped == 1 && stats.isBalanced, "\(stats)")

        // A reload without lab2: its waiting query gets SERVFAIL.
        var config = h.proxy.configuration
        config.links.removeAll { $0.interface == "eth2" }
        h.proxy.reconfigure(config)
        #expect(waiting.message?.rcode == .servFail)
        let atShutdown = h.ask("_http._tcp.lab1.example.", .ptr)
        h.proxy.shutdown()
        #expect(atShutdown.message?.rcode == .servFail)

        stats = h.proxy.stats
        let exported = metrics.counters.filter {
            $0.label == "dns_queries_total" && $0.dimensions.contains { $0 == ("rcode", "SERVFAIL") }
        }.reduce(0) { $0 + Int($1.totalValue) }
        #expect(stats.servFail == 2 && exported == 2, "\(stats)")
        #expect(stats.isBalanced && stats.inFlight == 0 && stats.queries == 3 && stats.answered == 2, "\(stats)")
    }
}
