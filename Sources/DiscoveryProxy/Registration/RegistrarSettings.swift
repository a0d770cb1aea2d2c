import DNSWire
import EventCounting
import MDNS
import Metrics

// What the registrar is given: its settings, its store's contract, its instruments.

/// What keeps the registrations across a restart: `RegistrationStore` (SQLite). `save` returns
/// once the change is on disk.
public protocol RegistrationPersistence {
    func save(_ changes: RegistrationTable.Changes, of table: RegistrationTable) throws
    /// The store's size in octets, for the metrics.
    var size: Int { get }
}

/// The registrar's settings: the `srp:` section of the file.
public struct RegistrarConfiguration: Sendable, Equatable {
    /// Off by default: registering is a way in of its own, opened by the operator.
    public var isEnabled = false
    public var leases = LeaseBounds.default
    /// Where the registrations are kept; nil: `registrations.sqlite` in the state directory.
    public var storePath: String?
    /// Hosts registered at once, in all and per client address.
    public var maxHosts = 1000
    public var maxHostsPerClient = 16
    /// Largest update taken, in octets.
    public var maxUpdateSize = 16384
    /// Updates a second from one client address (twice that at once); 0: no limit.
    public var maxUpdateRate = 10
    /// How long an answer waits for the probe of the names (OpenThread: 1,250 ms).
    public var outcomeWait: Duration = .milliseconds(1300)

    public init() {}
}

/// The registrar's instruments: `srp_updates_total{rcode}`, `srp_registered_hosts{link}` and
/// `srp_registered_services{link}`, `srp_expired_hosts_total`, `srp_late_conflicts_total` and
/// `srp_store_bytes`.
public final class RegistrarMetrics: Sendable {
    private let byRCode: PerLabel<EventCounter>
    private let byLimit: PerLabel<EventCounter>
    let hosts: LinkGauges
    let services: LinkGauges
    let expiredHosts: EventCounter
    let lateConflicts: EventCounter
    let storeBytes: Gauge

    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        byRCode = PerLabel("srp_updates_total", dimension: "rcode", factory: factory)
        byLimit = PerLabel("srp_limited_total", dimension: "limit", factory: factory)
        hosts = LinkGauges("srp_registered_hosts", factory: factory)
        services = LinkGauges("srp_registered_services", factory: factory)
        expiredHosts = EventCounter(label: "srp_expired_hosts_total", factory: factory)
        lateConflicts = EventCounter(label: "srp_late_conflicts_total", factory: factory)
        storeBytes = Gauge(label: "srp_store_bytes", factory: factory)
    }

    /// `srp_updates_total{rcode}`.
    func updates(_ rcode: RCode) -> EventCounter { byRCode["\(rcode)"] }

    /// `srp_limited_total{limit}`: updates refused by a limit (the option's name).
    func limited(_ limit: String) -> EventCounter { byLimit[limit] }

    /// Updates answered, by RCODE name, for the status page.
    public var answered: [String: Int] { byRCode.counts }

    /// Hosts and services published on one link.
    struct LinkCounts: Sendable {
        var hosts = 0
        var services = 0

        mutating func add(_ group: MDNSGroup) {
            hosts += 1
            services += group.records.lazy.filter { $0.type == .srv }.count
        }

        mutating func remove(_ group: MDNSGroup) {
            hosts -= 1
            services -= group.records.lazy.filter { $0.type == .srv }.count
        }
    }

    func update(counts: [String: LinkCounts], links: [Link]) {
        for link in links {
            let count = counts[link.interface] ?? LinkCounts()
            hosts[link.interface].record(count.hosts)
            services[link.interface].record(count.services)
        }
    }

    /// `srp_store_bytes`: read after a commit, not at every change of the groups (two PRAGMAs
    /// each time a trial began made a tenth of a new host's cost).
    func recordStore(size: Int) { storeBytes.record(size) }
}
