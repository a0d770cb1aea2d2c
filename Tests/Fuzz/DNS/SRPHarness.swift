import DNSWire
import DiscoveryProxy

/// (e) SRP updates (RFC 9665): `Message(wire:)`, then `SIG0.find` and `SRPUpdate.read` for the
/// zone `default.service.arpa.`, on arbitrary bytes. The seeds are signed updates (an
/// nsupdate one, and srp_update.py's), so mutations reach the instruction checks and the
/// signature check. Checks: an update that is read holds only names inside its zone, one host
/// whose key signed it, SRV targets that are that host, and a KEY-LEASE no shorter than its
/// LEASE; a rejection carries one of the RCODEs RFC 9665 §3.3.5 and RFC 2136 §3.1.1 allow.
enum SRPHarness {
    static let zone = try! DNSName("default.service.arpa.")

    static func run(_ bytes: [UInt8]) {
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
