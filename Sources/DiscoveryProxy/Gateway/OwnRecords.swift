import MDNS
import Synchronization

/// The records the proxy publishes over mDNS itself (the gateway's announcements): avahi's
/// browsers on that interface see them like any other responder's, and they must neither
/// appear in the link's unicast answers nor be followed as the link's own services. Kept for
/// one publication after they are withdrawn, so that their goodbyes are ignored too.
struct OwnRecords: Sendable {
    private var current: [String: Set<MDNSRecord>] = [:]
    private var previous: [String: Set<MDNSRecord>] = [:]

    mutating func replace(with records: [String: Set<MDNSRecord>]) {
        previous = current
        current = records
    }

    /// A group whose name another responder owns: its records, the shared PTR among them, are
    /// that responder's too (identical data), and must not be hidden.
    mutating func forget(_ records: [MDNSRecord], on interface: String) {
        for record in records {
            current[interface]?.remove(record)
            previous[interface]?.remove(record)
        }
    }

    func contains(_ record: MDNSRecord, on interface: String) -> Bool {
        current[interface]?.contains(record) == true || previous[interface]?.contains(record) == true
    }
}

extension DiscoveryProxy {
    /// Records the proxy is about to publish: set before they are handed to the publisher.
    /// Shared PTRs that other responders publish alike (`_services._dns-sd._udp`) are left out:
    /// hiding them would hide a local service type.
    func ownPublications(_ groups: [MDNSGroup]) {
        var records: [String: Set<MDNSRecord>] = [:]
        for group in groups {
            for record in group.records where record.name != Gateway.servicesName {
                records[group.key.interface, default: []].insert(record)
            }
        }
        ownRecords.withLock { $0.replace(with: records) }
        publishesRecords.store(true, ordering: .releasing)
    }

    /// `group` collided (`Gateway.collided`): its records are the other responder's as well.
    func forgetOwnPublication(_ group: MDNSGroup) {
        ownRecords.withLock { $0.forget(group.records, on: group.key.interface) }
    }

    func isOwn(_ record: MDNSRecord, on interface: String) -> Bool {
        guard publishesRecords.load(ordering: .acquiring) else { return false }
        return ownRecords.withLock { $0.contains(record, on: interface) }
    }
}
