/// The cap on live browses (`ProxyConfiguration.maxBrowses`): memory and avahi objects stay
/// bounded whatever names clients invent. At the cap a new browse takes the place of the
/// least recently used browse that nobody waits on and nobody asked about for `minimumIdle`;
/// if there is none, the new query gets SERVFAIL (retryable; RFC 8766 §5.6 forbids a false
/// negative). Browses in use are never sacrificed to a flood of new names, and neither are
/// browses with subscribers (DNS Push, the gateway): their queries may be idle, but released,
/// their subscribers would hear of no change again.
enum BrowseLimit {
    /// Three TTLs (RFC 8766 §5.5.1: 10 s): a client that re-asks as its answer expires keeps
    /// its browse.
    static let minimumIdle: Duration = .seconds(30)

    /// The browse to release so that a new one fits, or nil when none may go.
    static func victim(
        in browses: [BrowseKey: Browse], now: Duration, pinned: borrowing some PinnedBrowses = NoPinnedBrowses()
    ) -> BrowseKey? {
        var best: (key: BrowseKey, lastUsed: Duration)?
        for (key, browse) in browses where browse.waiters.isEmpty && now - browse.lastUsed >= minimumIdle {
            guard !pinned.isPinned(key) else { continue }
            if best == nil || browse.lastUsed < best!.lastUsed { best = (key, browse.lastUsed) }
        }
        return best?.key
    }
}
