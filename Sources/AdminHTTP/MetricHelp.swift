/// The `# HELP` text of every metric the proxy exports. The modules create their instruments
/// through swift-metrics, which carries no help text, so `/metrics` adds these lines to the
/// Prometheus exposition (`annotate`). docs/METRICS.md is the same list for people.
public enum MetricHelp {
    public static let texts: [String: String] = [
        // Queries and answers (DiscoveryProxy, DNSServer)
        "dns_queries_received_total": "DNS messages read from the listeners, by transport (udp, tcp).",
        "dns_queries_total": "DNS queries answered, by transport, query type and response code.",
        "dns_answer_duration_seconds":
            "Time from query to answer, by cache outcome (hit, miss, optimistic, immediate, error).",
        "dns_answers_replayed_total": "Answers replayed by the front end without asking the proxy core, by transport.",
        "dns_queries_dropped_total": "Queries not answered at all: responses, or messages without a DNS header.",
        "dns_refused_queries_total": "Queries answered REFUSED: outside every zone, or from a client the ACL refuses.",
        "dns_acl_refused_total": "Queries refused by the client ACL (allow-clients).",
        "dns_link_refused_total":
            "Queries refused because the client may not see that link (links[].clients), by link.",
        "dns_malformed_queries_total": "Queries answered FORMERR: undecodable, or not exactly one question.",
        "dns_rrl_responses_total": "UDP responses held back by response rate limiting, by action (dropped, slipped).",
        // TCP (DNSServer, ScrapeGauges)
        "dns_tcp_connections_total":
            "TCP connection events: accepted, and closed by reason (idle, limit, lifetime, error, client).",
        "dns_tcp_connections_open": "TCP and TLS connections open now.",
        // Cache and mDNS (DiscoveryProxy, MDNS, ScrapeGauges)
        "dns_cache_entries": "Records held by the live mDNS browses (the cache).",
        "dns_cache_hit_ratio": "Share of mDNS-answered queries served from the cache since start (0 to 1).",
        "mdns_browses_active": "Live mDNS browses (shared cache entries), by link.",
        "mdns_link_negative_timeout_seconds":
            "How long a query on the link waits for mDNS before answering that nothing is there (learned from the link's answer times; learn-answer-times).",
        "mdns_link_answer_spread_seconds":
            "The usual time between a browse's first and last mDNS answer on the link, added to the collection window (learned).",
        "mdns_queries_started_total": "mDNS queries started on a link (cache misses and refreshes), by link.",
        "mdns_queries_rate_limited_total": "mDNS queries delayed or refused by the per-link rate limit, by link.",
        "mdns_first_result_seconds": "Time from the start of an mDNS query to its first record.",
        "mdns_backend_connected": "1 while the proxy is connected to avahi-daemon, 0 otherwise.",
        "mdns_backend_reconnects_total": "Times the connection to avahi-daemon was lost and made again.",
        "mdns_backend_up":
            "1 while avahi-daemon answers the proxy (connected, no call waiting past its deadline), 0 otherwise.",
        "mdns_backend_stalls_total":
            "Times avahi-daemon or D-Bus did not answer a call within its deadline (the connection is then made again).",
        "mdns_backend_request_duration_seconds":
            "How long each call to avahi-daemon took (D-Bus round trips, made off the answering threads), by connection.",
        "avahi_clients": "avahi-client connections the proxy holds to avahi-daemon.",
        // DNS Push (DiscoveryProxy)
        "dns_push_sessions": "DNS Push (DSO) sessions open now.",
        "dns_push_subscriptions": "DNS Push subscriptions, over all sessions.",
        "dns_push_messages_sent_total": "DNS Push messages sent (PUSH, responses, keepalives).",
        "dns_push_bytes_sent_total": "Bytes of DNS Push messages sent.",
        "dns_push_sessions_ended_total": "DNS Push sessions ended, by reason.",
        // The SRP registrar (DiscoveryProxy)
        "srp_updates_total": "SRP updates (DNS Update) answered, by response code.",
        "srp_registered_hosts": "Hosts registered by SRP now, by link.",
        "srp_registered_services": "Service instances registered by SRP now, by link.",
        "srp_expired_hosts_total": "SRP host registrations ended by their lease.",
        "srp_late_conflicts_total":
            "Registered names another device on the link claimed after they were published (RFC 6762 §9).",
        "srp_limited_total":
            "SRP updates refused by a limit, by the limit's option name (max-hosts, max-update-rate, ...).",
        "srp_store_bytes": "Size of the SRP registration store (SQLite pages in use), in bytes.",
        // The build
        "discovery_proxy_build_info": "Always 1; the version and git revision of the running build as labels.",
    ]

    /// `exposition` with a `# HELP` line before each `# TYPE` line of a metric with help text.
    public static func annotate(_ exposition: [UInt8]) -> [UInt8] {
        let prefix = Array("# TYPE ".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(exposition.count + texts.count * 80)
        var lineStart = 0
        while lineStart < exposition.count {
            let lineEnd = exposition[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? exposition.count
            let line = exposition[lineStart..<lineEnd]
            if line.starts(with: prefix) {
                let rest = line.dropFirst(prefix.count)
                let name = String(decoding: rest.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                if let help = texts[name] { out += Array("# HELP \(name) \(help)\n".utf8) }
            }
            out += line
            if lineEnd < exposition.count { out.append(UInt8(ascii: "\n")) }
            lineStart = lineEnd + 1
        }
        return out
    }
}
