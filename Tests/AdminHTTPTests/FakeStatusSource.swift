import AdminHTTP
import DNSServer
import DNSWire
import DiscoveryProxy
import Foundation
import Synchronization

/// An `AdminStatusSource` whose snapshot and reload outcome the test sets.
final class FakeStatusSource: AdminStatusSource {
    private let state: Mutex<(status: AdminStatus, reload: ReloadResult, reloads: Int)>

    init(_ status: AdminStatus = .sample(), reload: ReloadResult = .applied(waitingForRestart: [])) {
        self.state = Mutex((status, reload, 0))
    }

    func adminStatus() -> AdminStatus { self.state.withLock { $0.status } }

    func reload() async -> ReloadResult {
        self.state.withLock {
            $0.reloads += 1
            return $0.reload
        }
    }

    var reloads: Int { self.state.withLock { $0.reloads } }

    func update(_ change: (inout AdminStatus) -> Void) {
        self.state.withLock { change(&$0.status) }
    }

    func setReload(_ result: ReloadResult) {
        self.state.withLock { $0.reload = result }
    }
}

extension AdminStatus {
    static let hostileInstance = "<script>alert(\"x\")</script> & 'Drucker Küche' 🖨"

    /// Two links, a handful of services, some with hostile or non-ASCII names.
    static func sample() -> AdminStatus {
        var proxy = ProxyStats()
        proxy.queries = 1523
        proxy.cacheHits = 1200
        proxy.cacheMisses = 300
        proxy.negativeTimeouts = 12
        proxy.refused = 7
        proxy.formErr = 2
        proxy.mdnsQueriesStarted = 41
        proxy.rateLimited = 1
        proxy.activeBrowses = 9
        let lab1 = LinkStatus(
            interface: "eth1", zone: "lab1.example.com.", activeBrowses: 6,
            services: [
                ServiceStatus(
                    type: "_ipp._tcp", instance: "Office Printer", host: "prnt.lab1.example.com.", port: 631,
                    addresses: ["192.0.2.10", "2001:db8::10"],
                    txt: [
                        TXTEntry(key: "txtvers", value: "1"), TXTEntry(key: "rp", value: "ipp/print"),
                        TXTEntry(key: "ty", value: "ACME LaserJet 4000"), TXTEntry(key: "Color", value: "T"),
                        TXTEntry(key: "duplex", value: nil),
                    ], ageSeconds: 12),
                ServiceStatus(
                    type: "_ipp._tcp", instance: hostileInstance, host: "kueche.lab1.example.com.", port: 631,
                    addresses: ["192.0.2.11"], txt: [TXTEntry(key: "note", value: "a<b & \"c\"")], ageSeconds: 95),
                ServiceStatus(
                    type: "_airplay._tcp", instance: "Living Room", host: nil, port: nil, addresses: [], txt: nil,
                    ageSeconds: 4000),
                ServiceStatus(
                    type: "_smb._tcp", instance: "Dot.ted NAS", host: "nas.lab1.example.com.", port: 445,
                    addresses: ["192.0.2.20"], txt: [], ageSeconds: 3),
            ])
        let lab2 = LinkStatus(interface: "eth2", zone: "lab2.example.com.", activeBrowses: 3, services: [])
        return AdminStatus(
            version: "1.2.3",
            startedAt: Date(timeIntervalSince1970: 1_750_000_000),
            uptimeSeconds: 3 * 3600 + 25 * 60,
            health: Health(
                ok: true, reasons: [], mdnsState: "running", listeners: ["udp 0.0.0.0:53", "tcp 0.0.0.0:53"]),
            udpQueriesReceived: 1400,
            tcpQueriesReceived: 123,
            tcp: TCPConnectionStats(
                open: 2, accepted: 3, closedIdle: 1, closedLimit: 0, closedError: 0, closedClient: 0),
            avahi: AvahiStats(connected: true, clients: 1, liveQueries: 9, reconnects: 0),
            proxy: proxy,
            links: [lab1, lab2]
        )
    }
}
