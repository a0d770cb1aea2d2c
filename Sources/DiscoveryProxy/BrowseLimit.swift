/// The cap on live browses (`ProxyConfiguration.maxBrowses`): memory and avahi objects stay
/// bounded whatever names clients invent. At the cap a new browse takes the place of the
/// least recently used browse that nobody waits on; if every browse has waiters, the new
/// query gets SERVFAIL (a retryable answer, RFC 8766 §5.6 forbids a false negative).
enum BrowseLimit {
    /// The browse to release so that a new one fits, or nil when none may go.
    static func victim(in browses: [BrowseKey: Browse]) -> BrowseKey? {
        var best: (key: BrowseKey, lastUsed: Duration)?
        for (key, browse) in browses where browse.waiters.isEmpty {
            if best == nil || browse.lastUsed < best!.lastUsed { best = (key, browse.lastUsed) }
        }
        return best?.key
    }
}
