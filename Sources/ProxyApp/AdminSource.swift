import AdminHTTP
import BuildInfo
import DNSServer
import DiscoveryProxy
import MDNS

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The running daemon as the admin endpoint sees it: one snapshot per request, read from the
/// proxy, the DNS listeners and the avahi backend (each behind its own lock; no D-Bus call).
struct AdminSource: AdminStatusSource {
    let proxy: DiscoveryProxy
    let server: DNSServer
    let backend: AvahiBackend
    let reloader: Reloader
    let gateway: Gateway
    let registrar: Registrar
    let startedAt: Date
    let started = ContinuousClock.now

    func adminStatus() -> AdminStatus {
        let dns = server.stats()
        let listeners = server.boundAddresses.map(\.description)
        let mdns = backend.state
        // When it stopped answering, as a date for the page (the backend keeps a monotonic instant).
        let notAnsweringSince = backend.stalledFor.map { Date() - Double($0.components.seconds) }
        var reasons: [String] = []
        if listeners.isEmpty { reasons.append("DNS listeners are not up") }
        if let notAnsweringSince {
            reasons.append(
                "avahi-daemon not answering since \(notAnsweringSince.ISO8601Format()) (cached answers go on; new browses get SERVFAIL)"
            )
        } else if mdns != .running {
            reasons.append("avahi-daemon is not connected (mDNS backend \(mdns.rawValue))")
        }
        let uptime = ContinuousClock.now - started
        return AdminStatus(
            version: BuildInfo.version, revision: BuildInfo.revision, startedAt: startedAt,
            uptimeSeconds: Double(uptime.components.seconds),
            health: Health(ok: reasons.isEmpty, reasons: reasons, mdnsState: mdns.rawValue, listeners: listeners),
            udpQueriesReceived: dns.udpQueriesReceived, tcpQueriesReceived: dns.tcpQueriesReceived,
            tcp: dns.tcp,
            avahi: AvahiStats(
                connected: mdns == .running || mdns == .stalled, clients: backend.clientCount,
                liveQueries: backend.liveQueryCount, reconnects: backend.reconnectCount, up: mdns == .running,
                notAnsweringSince: notAnsweringSince, stalls: backend.stallCount),
            proxy: proxy.stats, links: proxy.linkStatus(), announcements: gateway.status,
            registrar: RegistrarStatus(
                enabled: registrar.configuration.isEnabled, updates: registrar.updatesAnswered,
                hosts: registrar.status()))
    }

    func reload() async -> ReloadResult {
        switch reloader.reload() {
        case .applied(_, let restart): return .applied(waitingForRestart: restart.map(\.description))
        case .rejected(let errors): return .failed(errors)
        }
    }
}
