import DNSWire
import Synchronization

/// What the proxy's own inventory of one link found: the service types on it (RFC 6763 §9,
/// `_services._dns-sd._udp`) and how many instances each has, whether or not a client asked.
/// Taken every `inventoryInterval` through the browses every query shares (`takeInventory`).
public struct LinkInventory: Sendable, Codable, Equatable {
    public struct ServiceType: Sendable, Codable, Equatable {
        /// `_ipp._tcp`.
        public var type: String
        /// Instances its browse listed (usable ones, as a client is answered); nil when the
        /// browse failed this round.
        public var instances: Int?

        public init(type: String, instances: Int?) {
            self.type = type
            self.instances = instances
        }
    }

    /// Sorted by type.
    public var types: [ServiceType]
    /// Types found but not browsed: beyond `inventoryMaxTypes`, or while the browse table is
    /// half full (clients' browses come first).
    public var omittedTypes: Int
    /// Seconds since this round ended (filled in for the status page).
    public var ageSeconds: Double
    /// Seconds between rounds.
    public var intervalSeconds: Double

    public init(types: [ServiceType], omittedTypes: Int = 0, ageSeconds: Double = 0, intervalSeconds: Double = 60) {
        self.types = types
        self.omittedTypes = omittedTypes
        self.ageSeconds = ageSeconds
        self.intervalSeconds = intervalSeconds
    }
}

/// One round of one link's inventory: the enumeration's types, then a count per type as each
/// browse answers; done when every count is in.
final class InventoryRound: Sendable {
    private struct State {
        var remaining: Int
        var counts: [String: Int?] = [:]
    }

    private let types: [String]
    private let omitted: Int
    private let state: Mutex<State>
    private let done: @Sendable (LinkInventory) -> Void

    init(types: [String], omitted: Int, done: @escaping @Sendable (LinkInventory) -> Void) {
        self.types = types
        self.omitted = omitted
        self.state = Mutex(State(remaining: types.count))
        self.done = done
        if types.isEmpty { done(LinkInventory(types: [], omittedTypes: omitted)) }
    }

    /// Records the answer to one type's browse (a PTR query of `type` in the link's zone).
    func counted(_ type: String, answer: Message) {
        let finished = state.withLock { state -> [String: Int?]? in
            state.counts[type] = answer.rcode == .noError ? answer.answers.filter { $0.type == .ptr }.count : nil
            state.remaining -= 1
            return state.remaining == 0 ? state.counts : nil
        }
        guard let counts = finished else { return }
        done(
            LinkInventory(
                types: types.map { LinkInventory.ServiceType(type: $0, instances: counts[$0] ?? nil) },
                omittedTypes: omitted))
    }
}
