import DNSServer
import DiscoveryProxy
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
import Testing

@testable import AdminHTTP

@Suite struct AdminRouterTests {
    func makeApp(_ source: FakeStatusSource, registry: PrometheusCollectorRegistry = .init())
        -> some ApplicationProtocol
    {
        Application(router: buildAdminRouter(source: source, registry: registry))
    }

    @Test func healthzFollowsTheSource() async throws {
        let source = FakeStatusSource()
        try await self.makeApp(source).test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "ok\n")
                #expect(response.headers[.contentType] == "text/plain; charset=utf-8")
            }
            source.update {
                $0.health.ok = false
                $0.health.reasons = ["avahi-daemon unreachable", "no DNS listener"]
            }
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(String(buffer: response.body) == "avahi-daemon unreachable\nno DNS listener\n")
            }
            source.update { $0.health = Health(ok: true) }
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
            }
        }
    }

    @Test func apiServicesIsTheStatusAsJSON() async throws {
        let source = FakeStatusSource()
        try await self.makeApp(source).test(.router) { client in
            try await client.execute(uri: "/api/services", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                let data = Data(response.body.readableBytesView)
                let decoded = try AdminStatus(jsonData: data)
                #expect(decoded == source.adminStatus())
                // Stable key names that scripts rely on.
                let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                #expect(
                    Set(object.keys) == [
                        "version", "revision", "startedAt", "uptimeSeconds", "health", "udpQueriesReceived",
                        "tcpQueriesReceived", "tcp", "avahi", "proxy", "links", "announcements", "registrar",
                    ])
                #expect(object["startedAt"] as? String == "2025-06-15T15:06:40Z")
                let links = try #require(object["links"] as? [[String: Any]])
                #expect(links.first?["interface"] as? String == "eth1")
                let services = try #require(links.first?["services"] as? [[String: Any]])
                #expect(services[1]["instance"] as? String == AdminStatus.hostileInstance)
            }
        }
    }

    @Test func statusPageIsEscapedHTML() async throws {
        let source = FakeStatusSource()
        try await self.makeApp(source).test(.router) { client in
            try await client.execute(uri: "/", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/html; charset=utf-8")
                let html = String(buffer: response.body)
                #expect(html.hasPrefix("<!DOCTYPE html>"))
                #expect(!html.contains("<script"))
                #expect(
                    html.contains(
                        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Drucker Küche&#39; 🖨"))
                #expect(html.contains("<span class=\"chip\">note=a&lt;b &amp; &quot;c&quot;</span>"))
                #expect(html.contains("<span class=\"chip\">rp=ipp/print</span>"))
                #expect(html.contains("<span class=\"chip\">duplex</span>"))
                #expect(html.contains("12 s ago"))
                #expect(html.contains("1 h ago"))
                #expect(html.contains("lab1.example.com."))
                #expect(html.contains("Healthy"))
                #expect(html.contains("3 h 25 min"))
                #expect(html.contains("80 %"))
                #expect(!html.contains("src="))  // no external assets
            }
            source.update {
                $0.health = Health(ok: false, reasons: ["avahi <down>"], mdnsState: "failed")
                $0.links[0].zone = "<b>evil</b>."
            }
            try await client.execute(uri: "/", method: .get) { response in
                let html = String(buffer: response.body)
                #expect(html.contains("Unhealthy"))
                #expect(html.contains("<li>avahi &lt;down&gt;</li>"))
                #expect(html.contains("&lt;b&gt;evil&lt;/b&gt;."))
                #expect(!html.contains("<b>evil"))
            }
        }
    }

    /// Levels come from the snapshot at each scrape; counters are the modules' own (their
    /// tests: ProxyMetricsTests, DNSServerMetricsTests), served from the same registry.
    @Test func metricsShowTheSnapshotLevels() async throws {
        let source = FakeStatusSource()
        let registry = PrometheusCollectorRegistry()
        // Metrics recorded elsewhere into the same registry show up in the same scrape.
        let elsewhere = PrometheusMetricsFactory(registry: registry)
        Counter(
            label: "dns_queries_total", dimensions: [("transport", "udp"), ("qtype", "PTR"), ("rcode", "NOERROR")],
            factory: elsewhere
        ).increment(by: 4)

        try await self.makeApp(source, registry: registry).test(.router) { client in
            var text = try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
                return String(buffer: response.body)
            }
            #expect(sample(text, "dns_tcp_connections_open") == 2)
            #expect(sample(text, "dns_cache_entries") == 9)
            #expect(sample(text, "dns_cache_hit_ratio") == 0.8)
            #expect(sample(text, #"mdns_browses_active{link="eth1"}"#) == 6)
            #expect(sample(text, #"mdns_browses_active{link="eth2"}"#) == 3)
            #expect(sample(text, #"mdns_link_negative_timeout_seconds{link="eth1"}"#) == 0.8)
            #expect(sample(text, #"mdns_link_answer_spread_seconds{link="eth1"}"#) == 0)
            #expect(sample(text, "mdns_backend_connected") == 1)
            #expect(sample(text, "avahi_clients") == 1)
            #expect(sample(text, #"discovery_proxy_build_info{version="1.2.3",revision="unknown"}"#) == 1)
            #expect(sample(text, #"dns_queries_total{transport="udp",qtype="PTR",rcode="NOERROR"}"#) == 4)
            #expect(
                text.contains(
                    "# HELP dns_queries_total DNS queries answered, by transport, query type and response code.\n# TYPE dns_queries_total counter"
                ))
            let typed = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
            let helped = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }
            #expect(typed.count == helped.count, "a # HELP line before every # TYPE line")
            #expect(text.contains("# TYPE dns_cache_hit_ratio gauge"))
            #expect(!text.contains("Office Printer"))  // never a name as a label
            // No counter is made from the snapshot (that was a second metrics path).
            #expect(sample(text, #"dns_tcp_connections_total{event="accepted"}"#) == nil)

            source.update {
                $0.tcp.open = 0
                $0.avahi.connected = false
                $0.proxy.cacheHits = 1300
                $0.links.removeLast()  // eth2 left the configuration
                $0.links[0].activeBrowses = 2
                $0.links[0].answerTimes = LinkAnswerTimes(negativeTimeoutSeconds: 1.2, spreadSeconds: 0.57, browses: 16)
            }
            text = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            #expect(sample(text, "dns_tcp_connections_open") == 0)
            #expect(sample(text, "mdns_backend_connected") == 0)
            #expect(sample(text, "dns_cache_hit_ratio") == 1300.0 / 1600.0)
            #expect(sample(text, #"mdns_browses_active{link="eth1"}"#) == 2)
            #expect(sample(text, #"mdns_browses_active{link="eth2"}"#) == nil)
            #expect(sample(text, #"mdns_link_negative_timeout_seconds{link="eth1"}"#) == 1.2)
            #expect(sample(text, #"mdns_link_answer_spread_seconds{link="eth1"}"#) == 0.57)
            #expect(sample(text, #"mdns_link_negative_timeout_seconds{link="eth2"}"#) == nil)
            #expect(StatusPage.render(source.adminStatus()).contains("waits 1200 ms for mDNS, collects 570 ms longer"))
        }
    }

    @Test func reloadReportsTheOutcome() async throws {
        let source = FakeStatusSource()
        try await self.makeApp(source).test(.router) { client in
            try await client.execute(uri: "/reload", method: .post) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "reloaded\n")
            }
            source.setReload(
                .failed(["links[0].domain: \"bad..name\": empty label", "listen: port 99999 out of range"]))
            try await client.execute(uri: "/reload", method: .post) { response in
                #expect(response.status == .badRequest)
                #expect(
                    String(buffer: response.body)
                        == "links[0].domain: \"bad..name\": empty label\nlisten: port 99999 out of range\n")
            }
            try await client.execute(uri: "/reload", method: .get) { response in
                #expect(response.status == .notFound || response.status == .methodNotAllowed)
            }
            try await client.execute(uri: "/reload", method: .post, headers: [.origin: "http://evil.example"]) {
                response in
                #expect(response.status == .forbidden)
            }
            #expect(source.reloads == 2)
        }
    }

    @Test func unknownPathIs404() async throws {
        try await self.makeApp(FakeStatusSource()).test(.router) { client in
            try await client.execute(uri: "/nope", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}

@Suite struct AdminServerTests {
    @Test func servesOnLoopbackAndReportsBindFailure() async throws {
        let logger = Logger(label: "admin-test")
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let first = makeAdminServer(
            host: "127.0.0.1", port: 0, source: FakeStatusSource(), registry: PrometheusCollectorRegistry(),
            logger: logger, onServerRunning: { continuation.yield($0) })
        let group = ServiceGroup(services: [first], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            #expect(port > 0)

            // Served without Hummingbird's `Application`: the Date header is still there
            // (RFC 9110 §6.6.1), made for this response.
            let response = try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                try await client.get("/healthz")
            }
            #expect(response.status == .ok)
            let date = try #require(response.headers[.date])
            #expect(date.hasSuffix(" GMT") && date.count == 29, "IMF-fixdate, e.g. Sun, 06 Nov 1994 08:49:37 GMT")

            let second = makeAdminServer(
                host: "127.0.0.1", port: port, source: FakeStatusSource(), registry: PrometheusCollectorRegistry(),
                logger: logger)
            let error = await #expect(throws: AdminServerError.self) { try await second.run() }
            #expect(error?.port == port)
            #expect(error?.description.hasPrefix("admin HTTP server cannot listen on 127.0.0.1:\(port): ") == true)

            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}

@Suite struct HTTPDateTests {
    @Test("IMF-fixdate, RFC 9110 §5.6.7's example and a leap day")
    func formats() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(1_709_164_805) == "Thu, 29 Feb 2024 00:00:05 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }
}

@Suite struct StatusPageTests {
    @Test func escapesEverythingThatMatters() {
        #expect(StatusPage.escape(#"<a href="x">'&'</a>"#) == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
        #expect(StatusPage.escape("Drucker Küche 🖨") == "Drucker Küche 🖨")
        #expect(StatusPage.escape("a\u{0}b\u{1B}c") == "a\u{FFFD}b\u{FFFD}c")
    }

    @Test func rendersEmptyStates() {
        var status = AdminStatus.sample()
        status.links = []
        #expect(StatusPage.render(status).contains("No links configured."))
        status = .sample()
        #expect(StatusPage.render(status).contains("No services cached."))
    }

    /// The inventory links a type to its first row below, only where that row exists.
    @Test func inventoryLinksOnlyToRowsThatExist() {
        let link = LinkStatus(
            interface: "eth1", zone: "lab1.example.", activeBrowses: 2,
            services: [ServiceStatus(type: "_ipp._tcp", instance: "Printer One")],
            inventory: LinkInventory(
                types: [.init(type: "_ipp._tcp", instances: 1), .init(type: "_flap._tcp", instances: 0)]))
        var status = AdminStatus.sample()
        status.links = [link]
        let page = StatusPage.render(status)
        #expect(page.contains("<a href=\"#svc-eth1-_ipp._tcp\">") && page.contains("id=\"svc-eth1-_ipp._tcp\""))
        #expect(!page.contains("#svc-eth1-_flap._tcp") && page.contains("<code>_flap._tcp</code>"))
        #expect(page.contains("On this link") && page.contains("0 instances"))
    }

    /// `ADMIN_PAGE_OUT=/tmp/page.html swift test --filter dumpPage` writes the sample page (for screenshots).
    @Test func dumpPage() throws {
        guard let path = ProcessInfo.processInfo.environment["ADMIN_PAGE_OUT"] else { return }
        var status = AdminStatus.sample()
        if ProcessInfo.processInfo.environment["ADMIN_PAGE_UNHEALTHY"] != nil {
            status.health = Health(
                ok: false, reasons: ["avahi-daemon unreachable (reconnecting)"], mdnsState: "failed",
                listeners: status.health.listeners)
            status.avahi.connected = false
        }
        try StatusPage.render(status).write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// The value of the sample whose name and labels are exactly `series`, or nil.
func sample(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}
