import MDNS
import Synchronization

/// The records the proxy publishes over mDNS itself (the gateway's announcements): avahi's
/// browsers on that interface see them like any other responder's, and they must neither
/// appear in the link's unicast answers nor be followed as the link's own services. Kept for
/// one publication after they are withdrawn, so that their goodbyes are ignored too.
struct OwnRecords: Sendable {
    /// How many published groups hold each record, per interface.
    private var current: [String: [MDNSRecord: Int]] = [:]
    /// The records the last change withdrew.
    private var previous: [String: Set<MDNSRecord>] = [:]

    /// Records now published by one more group (`added`) and by one fewer (`removed`).
    mutating func change(adding added: [(String, MDNSRecord)], removing removed: [(String, MDNSRecord)]) {
        for (interface, record) in added { current[interface, default: [:]][record, default: 0] += 1 }
        previous = [:]
        for (interface, record) in removed {
            guard let count = current[interface]?[record] else { continue }
            if count > 1 {
                current[interface]?[record] = count - 1
            } else {
                current[interface]?[record] = nil
                previous[interface, default: []].insert(record)
            }
        }
    }

    /// A group whose name another responder owns: its records, the shared PTR among them, are
    /// that responder's too (identical data), and must not be hidden.
    mutating func forget(_ records: [MDNSRecord], on interface: String) {
        for record in records {
            current[interface]?[record] = nil
            previous[interface]?.remove(record)
        }
    }

    func contains(_ record: MDNSRecord, on interface: String) -> Bool {
        current[interface]?[record] != nil || previous[interface]?.contains(record) == true
    }
}

extension DiscoveryProxy {
    /// Records the proxy is about to publish: set before they are handed to the publisher.
    /// Shared PTRs that other responders publish alike (`_services._dns-sd._udp`) are left out:
    /// hiding them would hide a local service type.
    func ownPublications(changed: [MDNSGroup], removed: [MDNSGroup.Key], before: [MDNSGroup.Key: [MDNSRecord]]) {
        var added: [(String, MDNSRecord)] = []
        var gone: [(String, MDNSRecord)] = []
        for group in changed {
            for record in group.records where record.name != Gateway.servicesName {
                added.append((group.key.interface, record))
            }
        }
        for key in changed.map(\.key) + removed {
            for record in before[key] ?? [] where record.name != Gateway.servicesName {
                gone.append((key.interface, record))
            }
        }
        ownRecords.withLock { $0.change(adding: added, removing: gone) }
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
