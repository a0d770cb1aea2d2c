import DNSServer
import DNSWire
import DiscoveryProxy

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The server-rendered status page at `/`: one self-contained HTML document (inline CSS, no
/// scripts, no external assets) that refreshes itself every 10 s.
public enum StatusPage {
    public static func render(_ status: AdminStatus) -> String {
        var html = ""
        html.reserveCapacity(16_384)
        let proxy = status.proxy
        let health = status.health
        let healthText = health.ok ? "Healthy" : "Unhealthy"
        let totalQueries = status.udpQueriesReceived + status.tcpQueriesReceived
        let listeners = health.listeners.isEmpty ? "—" : health.listeners.map(escape).joined(separator: ", ")

        html += """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta http-equiv="refresh" content="10">
            <title>\(escape(healthText)) · Discovery Proxy</title>
            <style>\(css)</style>
            </head>
            <body>
            <header class="top \(health.ok ? "good" : "bad")">
            <div class="title">
            <h1>Discovery Proxy</h1>
            <span class="pill">\(health.ok ? "●" : "▲") \(escape(healthText))</span>
            </div>
            <dl class="facts">
            <div><dt>Uptime</dt><dd>\(escape(formatUptime(status.uptimeSeconds)))</dd></div>
            <div><dt>Version</dt><dd>\(escape(status.version)) (git \(escape(status.revision)))</dd></div>
            <div><dt>mDNS</dt><dd>\(escape(health.mdnsState))</dd></div>
            <div><dt>Listening</dt><dd>\(listeners)</dd></div>
            </dl>

            """
        if !health.ok {
            html += "<ul class=\"reasons\">"
            for reason in health.reasons.isEmpty ? ["not ready"] : health.reasons {
                html += "<li>\(escape(reason))</li>"
            }
            html += "</ul>\n"
        }
        html += "</header>\n<main>\n<section class=\"cards\">\n"

        func card(_ label: String, _ value: String, _ detail: String, warn: Bool = false, bad: Bool = false) {
            html += """
                <div class="card\(bad ? " bad" : warn ? " warn" : "")"><div class="label">\(escape(label))</div>\
                <div class="value">\(escape(value))</div><div class="detail">\(escape(detail))</div></div>

                """
        }
        let lookups = proxy.cacheHits + proxy.cacheMisses
        card(
            "Queries", formatCount(totalQueries),
            "UDP \(formatCount(status.udpQueriesReceived)) · TCP \(formatCount(status.tcpQueriesReceived))")
        card(
            "Cache hit ratio",
            lookups > 0 ? "\(Int((ScrapeGauges.hitRatio(proxy) * 100).rounded())) %" : "—",
            "\(formatCount(proxy.cacheHits)) hits · \(formatCount(proxy.cacheMisses)) misses")
        card(
            "Cache misses", formatCount(proxy.cacheMisses),
            "\(formatCount(proxy.negativeTimeouts)) ended with no data")
        card(
            "Refused", formatCount(proxy.refused),
            "\(formatCount(proxy.aclRefused)) by client ACL · rest outside the zones")
        card(
            "Malformed", formatCount(proxy.formErr),
            "\(formatCount(proxy.notImp)) not implemented · \(formatCount(proxy.badVers)) bad EDNS",
            warn: proxy.formErr > 0)
        card(
            "TCP connections", "\(formatCount(status.tcp.open)) open",
            "\(formatCount(status.tcp.accepted)) accepted · \(formatCount(status.tcp.closedIdle)) idle · "
                + "\(formatCount(status.tcp.closedLimit)) limit · "
                + (status.tcp.closedLifetime > 0 ? "\(formatCount(status.tcp.closedLifetime)) lifetime · " : "")
                + "\(formatCount(status.tcp.closedError)) error")
        card(
            "mDNS browses", "\(formatCount(proxy.activeBrowses)) active",
            "\(formatCount(proxy.mdnsQueriesStarted)) started · \(formatCount(proxy.rateLimited)) rate-limited")
        let avahiState =
            if let since = status.avahi.notAnsweringSince {
                "avahi-daemon not answering since \(formatDate(since))"
            } else {
                status.avahi.connected ? "connected" : "disconnected"
            }
        card(
            "Avahi", avahiState,
            "\(plural(status.avahi.clients, "client")) · \(plural(status.avahi.liveQueries, "query", "queries")) · "
                + plural(status.avahi.reconnects, "reconnect")
                + (status.avahi.stalls > 0 ? " · " + plural(status.avahi.stalls, "stall") : ""),
            bad: !status.avahi.up)
        html += "</section>\n"

        if status.links.isEmpty {
            html += "<section class=\"link\"><p class=\"empty\">No links configured.</p></section>\n"
        }
        for link in status.links {
            let services = link.services.sorted {
                ($0.type.lowercased(), $0.instance.lowercased()) < ($1.type.lowercased(), $1.instance.lowercased())
            }
            html += """
                <section class="link">
                <div class="link-head"><h2>\(escape(link.zone))</h2>\
                <span class="tag">\(escape(link.interface))</span>\
                <span class="muted">\(plural(services.count, "service")) · \
                \(plural(link.activeBrowses, "active browse")) · \
                \(answerTimes(link.answerTimes))</span></div>

                """
            if let inventory = link.inventory { html += inventorySection(inventory, of: link) }
            if services.isEmpty {
                html += "<p class=\"empty\">No services cached. They appear here once a client browses this zone.</p>\n"
            } else {
                html += """
                    <table>
                    <thead><tr><th>Type</th><th>Instance</th><th>Host</th><th class="num">Port</th>\
                    <th>Addresses</th><th>TXT</th><th class="num">Seen</th></tr></thead>
                    <tbody>

                    """
                var anchored = Set<String>()
                for service in services {
                    // The inventory's links land on the first instance of each type.
                    let id =
                        anchored.insert(service.type.lowercased()).inserted
                        ? " id=\"\(anchor(link.interface, service.type))\"" : ""
                    html += "<tr\(id)><td><code>\(escape(service.type))</code></td>"
                    html += "<td class=\"instance\">\(escape(service.instance))</td>"
                    let host = service.host.map { "<code>\(escape($0))</code>" }
                    let addresses = service.addresses.map { "<code>\(escape($0))</code>" }
                    html += "<td>\(host ?? "<span class=\"muted\">not resolved</span>")</td>"
                    html += "<td class=\"num\">\(service.port.map { String($0) } ?? "")</td>"
                    html += "<td>\(addresses.joined(separator: "<br>"))</td>"
                    html += "<td>"
                    if let txt = service.txt {
                        html += txt.map { entry in
                            let text = entry.text.map { "\(entry.key)=\($0)" } ?? entry.key
                            return "<span class=\"chip\">\(escape(text))</span>"
                        }.joined(separator: " ")
                    }
                    html += "</td><td class=\"num muted\">\(escape(formatAge(service.ageSeconds)))</td></tr>\n"
                }
                html += "</tbody>\n</table>\n"
            }
            html += "</section>\n"
        }

        for route in status.announcements {
            html += """
                <section class="link">
                <div class="link-head"><h2>Announced on \(escape(route.interface))</h2>\
                <span class="tag">from \(escape(route.from))</span>\
                <span class="muted">\(plural(route.instances.count, "instance")) over mDNS</span></div>

                """
            if route.instances.isEmpty {
                html += "<p class=\"empty\">Nothing announced yet.</p>\n"
            } else {
                html +=
                    "<p>" + route.instances.map { "<span class=\"chip\">\(escape($0))</span>" }.joined(separator: " ")
                    + "</p>\n"
            }
            for held in route.heldBack {
                html += "<p class=\"muted\">Not announced: \(escape(held.instance)): \(escape(held.reason))</p>\n"
            }
            html += "</section>\n"
        }

        if status.registrar.enabled { html += registrarSection(status.registrar) }

        html += """
            </main>
            <footer>Started \(escape(formatDate(status.startedAt))) · \
            <a href="/api/services">/api/services</a> · <a href="/metrics">/metrics</a> · \
            <a href="/healthz">/healthz</a> · refreshes every 10 s</footer>
            </body>
            </html>

            """
        return html
    }

    /// The SRP registrations (RFC 9665): each host with its link, source, lease left and key tag.
    static func registrarSection(_ registrar: RegistrarStatus) -> String {
        let answered = registrar.updates.sorted { $0.key < $1.key }.map { "\(formatCount($0.value)) \($0.key)" }
        var html = """
            <section class="link">
            <div class="link-head"><h2>Registered (SRP)</h2>\
            <span class="muted">\(plural(registrar.hosts.count, "host")) · updates: \
            \(escape(answered.isEmpty ? "none yet" : answered.joined(separator: " · ")))</span></div>

            """
        if registrar.hosts.isEmpty {
            return html + "<p class=\"empty\">No registrations.</p>\n</section>\n"
        }
        html += "<table>\n<thead><tr><th>Host</th><th>Link</th><th>From</th><th>Services</th>"
        html += "<th class=\"num\">Lease left</th><th class=\"num\">Key lease left</th><th class=\"num\">Key tag</th>"
        html += "</tr></thead>\n<tbody>\n"
        for host in registrar.hosts {
            html += "<tr><td>\(escape(host.host))</td><td>\(escape(host.link))</td><td>\(escape(host.source))</td><td>"
            html += host.instances.map { "<span class=\"chip\">\(escape($0))</span>" }.joined(separator: " ")
            html += "</td><td class=\"num\">\(escape(formatUptime(Double(host.leaseLeft))))</td>"
            html += "<td class=\"num\">\(escape(formatUptime(Double(host.keyLeaseLeft))))</td>"
            html += "<td class=\"num\">\(host.keyTag)</td></tr>\n"
        }
        return html + "</tbody>\n</table>\n</section>\n"
    }

    /// "On this link": the inventory's service types with their instance counts, each type
    /// linking to its instances below, and a line saying where the list comes from.
    static func inventorySection(_ inventory: LinkInventory, of link: LinkStatus) -> String {
        var html = "<div class=\"inventory\"><h3>On this link</h3>\n"
        html += "<p class=\"muted\">The proxy's own inventory: _services._dns-sd._udp and one browse per type, "
        html +=
            "every \(escape(formatUptime(inventory.intervalSeconds))), last \(escape(formatAge(inventory.ageSeconds)))"
        if inventory.omittedTypes > 0 {
            html +=
                "; \(plural(inventory.omittedTypes, "more type")) not browsed (inventory-max-types, or the browse limit)"
        }
        html += ".</p>\n"
        if inventory.types.isEmpty {
            return html + "<p class=\"empty\">No service types found on this link.</p></div>\n"
        }
        html += "<ul class=\"types\">"
        // A link only where the table below has a row to land on (a type whose instances
        // have all gone since the round lists none).
        let listed = Set(link.services.map { $0.type.lowercased() })
        for type in inventory.types {
            let count = type.instances.map { plural($0, "instance") } ?? "not counted"
            let code = "<code>\(escape(type.type))</code>"
            html +=
                listed.contains(type.type.lowercased())
                ? "<li><a href=\"#\(anchor(link.interface, type.type))\">\(code)</a>" : "<li>\(code)"
            html += " <span class=\"count\">\(escape(count))</span></li>"
        }
        return html + "</ul></div>\n"
    }

    /// The id of a link's first row of a service type.
    static func anchor(_ interface: String, _ type: String) -> String {
        escape("svc-\(interface)-\(type.lowercased())")
    }

    /// Escapes text for HTML element content and quoted attribute values.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\u{0}"..."\u{8}", "\u{B}", "\u{C}", "\u{E}"..."\u{1F}", "\u{7F}":
                out += "\u{FFFD}"  // not allowed in HTML
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// What the link learned of its mDNS answer times (docs/ARCHITECTURE.md, "Slow links").
    static func answerTimes(_ times: LinkAnswerTimes) -> String {
        let wait = "waits \(Int((times.negativeTimeoutSeconds * 1000).rounded())) ms for mDNS"
        guard times.spreadSeconds > 0 else { return wait }
        return wait + ", collects \(Int((times.spreadSeconds * 1000).rounded())) ms longer"
    }

    /// `45 s`, `12 min`, `3 h 20 min`, `2 d 4 h`.
    static func formatUptime(_ seconds: Double) -> String {
        let total = max(0, Int(seconds))
        let days = total / 86_400
        let hours = total % 86_400 / 3600
        let minutes = total % 3600 / 60
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        if minutes > 0 { return "\(minutes) min" }
        return "\(total) s"
    }

    /// `12 s ago`, `5 min ago`, `3 h ago`, `2 d ago`.
    static func formatAge(_ seconds: Double) -> String {
        let total = max(0, Int(seconds))
        if total < 60 { return "\(total) s ago" }
        if total < 3600 { return "\(total / 60) min ago" }
        if total < 86_400 { return "\(total / 3600) h ago" }
        return "\(total / 86_400) d ago"
    }

    /// Thousands separated by a thin space: `12 345`.
    static func formatCount(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out += "\u{202F}" }
            out.append(digit)
        }
        return value < 0 ? "-" + out : out
    }

    /// `1 client`, `3 clients`.
    static func plural(_ count: Int, _ singular: String, _ pluralForm: String? = nil) -> String {
        "\(formatCount(count)) \(count == 1 ? singular : pluralForm ?? singular + "s")"
    }

    static func formatDate(_ date: Date) -> String {
        date.ISO8601Format()
    }

    static let css = """
        :root{--fg:#1d2330;--muted:#6b7385;--line:#e3e6ec;--bg:#f5f6f8;--card:#fff;--good:#1f8a4c;--bad:#c62f2f;
            --warn:#b86e00}
        *{box-sizing:border-box}
        body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif;
            color:var(--fg);background:var(--bg)}
        code{font:12.5px/1.4 ui-monospace,"SF Mono","DejaVu Sans Mono",Menlo,Consolas,monospace}
        .top{padding:18px 28px 16px;color:#fff}
        .top.good{background:linear-gradient(90deg,#1b7a43,#23965a)}
        .top.bad{background:linear-gradient(90deg,#a82424,#cf3a3a)}
        .title{display:flex;align-items:center;gap:14px}
        h1{margin:0;font-size:22px;font-weight:650;letter-spacing:.2px}
        .pill{background:rgba(255,255,255,.2);border:1px solid rgba(255,255,255,.45);border-radius:999px;
            padding:2px 12px;font-weight:600;font-size:13px}
        .facts{display:flex;flex-wrap:wrap;gap:6px 28px;margin:10px 0 0}
        .facts div{display:flex;gap:6px}
        .facts dt{opacity:.8}
        .facts dd{margin:0;font-weight:600}
        .reasons{margin:10px 0 0;padding:8px 12px 8px 28px;background:rgba(0,0,0,.18);border-radius:6px}
        main{padding:20px 28px;max-width:1500px}
        .cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:12px;margin-bottom:22px}
        .card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
        .card.warn{border-color:#f0c27a;background:#fffaf0}
        .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.5px}
        .value{font-size:24px;font-weight:650;margin:2px 0;font-variant-numeric:tabular-nums}
        .card.warn .value{color:var(--warn)}
        .card.bad{border-color:#eba3a3;background:#fff5f5}
        .card.bad .value{color:var(--bad)}
        .detail{color:var(--muted);font-size:12.5px}
        .link{background:var(--card);border:1px solid var(--line);border-radius:8px;margin-bottom:18px;overflow:hidden}
        .link-head{display:flex;align-items:baseline;gap:10px;padding:12px 16px;border-bottom:1px solid var(--line)}
        h2{margin:0;font-size:17px;font-weight:650}
        .tag{background:#e8eefc;color:#2a4a9b;border-radius:4px;padding:1px 8px;
            font:600 12px ui-monospace,"DejaVu Sans Mono",monospace}
        .muted{color:var(--muted)}
        .empty{margin:0;padding:14px 16px;color:var(--muted)}
        table{width:100%;border-collapse:collapse}
        th{text-align:left;font-size:12px;font-weight:600;color:var(--muted);text-transform:uppercase;
            letter-spacing:.4px;background:#fafbfc;padding:8px 12px;border-bottom:1px solid var(--line)}
        td{padding:8px 12px;border-bottom:1px solid var(--line);vertical-align:top}
        tbody tr:last-child td{border-bottom:0}
        tbody tr:hover{background:#f9fafb}
        .num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
        .instance{font-weight:600;overflow-wrap:anywhere}
        .chip{display:inline-block;background:#eef0f4;border:1px solid #dde1e8;border-radius:4px;padding:0 6px;
            margin:1px 0;font:12px/1.6 ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
        .inventory{padding:10px 16px;border-bottom:1px solid var(--line);background:#fbfcfe}
        .inventory h3{margin:0 0 2px;font-size:14px;font-weight:650}
        .inventory p{margin:0 0 6px;font-size:12.5px}
        .inventory .empty{padding:0}
        .types{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:6px}
        .types li{border:1px solid var(--line);border-radius:6px;padding:2px 8px;background:var(--card)}
        .types a{color:#2a4a9b;text-decoration:none}
        .types .count{color:var(--muted);font-size:12.5px}
        footer{padding:0 28px 24px;color:var(--muted);font-size:12.5px}
        footer a{color:inherit}
        """
}
