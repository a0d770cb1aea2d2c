import DNSWire
import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Synchronization

/// (e) SRP updates (RFC 9665): `Message(wire:)`, then `SIG0.find` and `SRPUpdate.read` for the
/// zone `default.service.arpa.`, on arbitrary bytes. The seeds are signed updates (an
/// nsupdate one, and srp_update.py's), so mutations reach the instruction checks and the
/// signature check. Checks: an update that is read holds only names inside its zone, one host
/// whose key signed it, SRV targets that are that host, and a KEY-LEASE no shorter than its
/// LEASE; a rejection carries one of the RCODEs RFC 9665 §3.3.5 and RFC 2136 §3.1.1 allow.
/// Then the whole registrar takes the bytes (a client on its link, an in-memory table, a
/// publisher that reports every group published at once): every answer has the update's ID
/// and one of those RCODEs, and whatever is published is under `local.` on that link.
enum SRPHarness {
    static let zone = try! DNSName("default.service.arpa.")

    /// Takes changes, as the registrar's responder (`LinkResponder`) does in production.
    final class Publisher: MDNSGroupUpdates {
        let published = Mutex<[MDNSGroup.Key: MDNSGroup]>([:])
        func publish(_ groups: [MDNSGroup]) {
            published.withLock { $0 = Dictionary(groups.map { ($0.key, $0) }, uniquingKeysWith: { $1 }) }
        }
        func update(changed: [MDNSGroup], removed: [MDNSGroup.Key]) {
            published.withLock { published in
                for group in changed { published[group.key] = group }
                for key in removed { published[key] = nil }
            }
        }
        func shutdown() {}
        var groups: [MDNSGroup] { published.withLock { Array($0.values) } }
    }

    static let publisher = Publisher()
    static let scheduler = ManualScheduler()
    static let registrar: Registrar = {
        var settings = RegistrarConfiguration()
        settings.isEnabled = true
        settings.maxUpdateRate = 0
        let proxy = ProxyConfiguration(
            links: [Link(interface: "fz0", zone: try! DNSName("lab1.example."), subnets: [IPPrefix("192.0.2.0/24")!])],
            serverName: try! DNSName("proxy.example."))
        return Registrar(
            configuration: settings, proxy: proxy, table: RegistrationTable(), store: nil, publisher: publisher,
            scheduler: scheduler, logger: Logger(label: "fuzz-srp", factory: { _ in SwiftLogNoOpLogHandler() }),
            clock: { 1_000_000 })
    }()
    static let local = try! DNSName("local.")

    static func run(_ bytes: [UInt8]) {
        readAlone(bytes)
        let answer = Mutex<[[UInt8]?]>([])
        registrar.handle(bytes, from: DNSClient(address: [192, 0, 2, 9], port: 5353, transport: .udp)) { reply in
            answer.withLock { $0.append(reply) }
        }
        scheduler.advance(by: .zero)
        // Each group published is reported established, so the answers waiting come out.
        for group in publisher.groups {
            guard group.key.interface == "fz0", group.records.allSatisfy({ $0.name.isSubdomain(of: local) }) else {
                fatalError("published \(group.key) outside local. on its link")
            }
            registrar.published(group.key)
        }
        scheduler.advance(by: .seconds(2))
        let replies = answer.withLock { $0 }
        guard replies.count <= 1 else { fatalError("\(replies.count) answers to one update") }
        guard let reply = replies.first ?? nil, let header = MessageHeader(bytes) else { return }
        guard let response = try? Message(wire: reply), response.id == header.id, response.isResponse else {
            fatalError("an answer that does not decode or has another ID")
        }
        guard [RCode.noError, .servFail, .refused, .yxDomain, .formErr, .notImp].contains(response.rcode) else {
            fatalError("answered \(response.rcode)")
        }
    }

    static func readAlone(_ bytes: [UInt8]) {
        _ = try? SIG0.find(in: bytes)
        guard let message = try? Message(wire: bytes) else { return }
        switch SRPUpdate.read(message, wire: bytes, zones: [zone]) {
        case .failure(let rejection):
            guard [RCode.refused, .formErr].contains(rejection.rcode) else {
                fatalError("rejected with \(rejection.rcode): \(rejection.reason)")
            }
        case .success(let update):
            guard update.host.name.isSubdomain(of: zone), update.keyTag == update.host.key.tag else {
                fatalError("host \(update.host.name) outside the zone, or signed by another key")
            }
            if let keyLease = update.lease.keyLease, keyLease < update.lease.lease {
                fatalError("KEY-LEASE \(keyLease) < LEASE \(update.lease.lease)")
            }
            for service in update.services {
                guard service.instance.isSubdomain(of: zone),
                    service.serviceNames.allSatisfy({ $0.isSubdomain(of: zone) })
                else { fatalError("service \(service.instance) outside the zone") }
                guard service.isDeleted || !service.txt.isEmpty else {
                    fatalError("service \(service.instance): SRV without TXT")
                }
            }
            let granted = LeaseBounds.default.grant(update.lease)
            guard granted.keyLease ?? 0 >= granted.lease else { fatalError("granted KEY-LEASE < LEASE") }
        }
    }
}
