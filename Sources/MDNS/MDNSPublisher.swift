import DNSWire

/// Records the proxy publishes together on one interface and withdraws together: the
/// browse-domain PTRs of RFC 6763 §11, or one far service announced on a client link.
///
/// PTR records are shared (RFC 6762 §2: many responders may answer them). Every other record
/// is unique: the publisher probes for it (§8.1) and reports a collision when another host owns
/// the name with other data; identical data on several hosts is no conflict (§8.2).
public struct MDNSGroup: Hashable, Sendable {
    public struct Key: Hashable, Comparable, Sendable, CustomStringConvertible {
        public var interface: String
        /// Tells the groups of one interface apart, e.g. an instance name.
        public var name: String

        public init(interface: String, name: String) {
            self.interface = interface
            self.name = name
        }

        public static func < (a: Key, b: Key) -> Bool { (a.interface, a.name) < (b.interface, b.name) }
        public var description: String { "\(name) on \(interface)" }
    }

    public var key: Key
    public var records: [MDNSRecord]
    /// Whether the unique records are probed for before they are announced (RFC 6762 §8.1,
    /// about 750 ms). False when the publisher's owner has checked the names itself: they are
    /// announced at once, and a conflict found later is still reported (§9).
    public var probe: Bool

    public init(key: Key, records: [MDNSRecord], probe: Bool = true) {
        self.key = key
        self.records = records
        self.probe = probe
    }
}

/// The publishing side of mDNS as the proxy uses it. Implementations: `AvahiPublisher`
/// (avahi-daemon's entry groups: the browse domains) and `LinkResponder` (its own responder:
/// the gateway's, and the SRP registrar's).
public protocol MDNSPublisher: AnyObject, Sendable {
    /// Makes `groups` what is published: groups not given any more are withdrawn (mDNS
    /// goodbyes), new ones announced, a changed one withdrawn and announced again, an
    /// unchanged one left alone. Returns at once; the daemon is told in the background, and
    /// again after it restarts.
    func publish(_ groups: [MDNSGroup])

    /// Withdraws everything and lets go of the daemon. Idempotent.
    func shutdown()

    /// Sets the budget of a publisher that sends its announcements itself (after a reload).
    func pace(_ pacing: AnnouncementPacing)

    /// Announces everything published again (a link went down and came back, RFC 6762 §8.3).
    func reannounce()
}

/// A publisher that takes what changed: the gateway's, whose fifty client links hold 100,000
/// groups of which a pass changes a few (docs/BENCHMARKS.md, "Incremental passes"), and the
/// registrar's, one host at a time among thousands.
public protocol MDNSGroupUpdates: MDNSPublisher {
    /// Publishes `changed` (each replacing the group of its key, if any) and withdraws
    /// `removed`; every other group stays as it is. Calls must come in the order of the
    /// changes they carry.
    func update(changed: [MDNSGroup], removed: [MDNSGroup.Key])
}

extension MDNSPublisher {
    public func pace(_ pacing: AnnouncementPacing) {}
    public func reannounce() {}
}
