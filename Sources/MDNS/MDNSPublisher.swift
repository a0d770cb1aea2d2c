/// The publishing side of mDNS as the proxy uses it: a few records the proxy itself announces
/// on some links (the browse-domain PTRs of RFC 6763 §11). Implementation: `AvahiPublisher`.
public protocol MDNSPublisher: AnyObject, Sendable {
    /// Makes `records` what is published, by interface name: records not given any more are
    /// withdrawn (mDNS goodbyes), new ones announced, an unchanged interface left alone.
    /// Returns at once; the daemon is told in the background, and again after it restarts.
    func publish(_ records: [String: [MDNSRecord]])

    /// Withdraws everything and lets go of the daemon. Idempotent.
    func shutdown()
}
