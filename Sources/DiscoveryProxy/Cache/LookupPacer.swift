import MDNS

/// Paces the mDNS gateway's lookups on one far link by the query packets they cost there.
///
/// A lookup's cost is not known when it is made: avahi-daemon asks a new record browser's
/// question at once, then 1, 2, 4 … s later, packs what is due into shared packets (about
/// thirty questions each), and asks nothing while its cache answers. So the gateway's lookups
/// wait in a queue, and are let out at a pace measured against the query packets this host
/// was heard sending on the link (`MDNSLinkCache.queriesSent`) in the last second: over
/// `packetsPerSecond`, the pace drops in proportion; under most of it, with lookups waiting,
/// the pace grows by a quarter a second, up to `most`. Whatever this host sends counts, the
/// clients' queries too: the gateway yields a busy link to them, down to `least` lookups a
/// second, so that it always progresses. Without a count (no listener on the link), the pace
/// is `most`, as a token bucket in lookups (docs/BENCHMARKS.md, "Far-link lookups in packets").
struct LookupPacer: Sendable {
    struct Settings: Sendable, Equatable {
        /// The query packets a second this host may send on the far link while lookups wait.
        var packetsPerSecond: Double
        /// The most lookups let out a second (and how many at once, when the link is quiet).
        var most: Double
        var burst: Double
        /// The fewest lookups a second, however busy the link.
        var least: Double

        /// How many are let out at once at `pace`: `burst` at the most, a second's worth below.
        func burst(at pace: Double) -> Double { pace == most ? burst : max(1, pace) }
    }

    /// How long the packets are counted over before the pace changes.
    static let window: Duration = .seconds(1)
    /// How often waiting lookups are let out.
    static let tick: Duration = .milliseconds(50)

    let settings: Settings
    /// Lookups let out a second now.
    private(set) var pace: Double
    private var bucket: TokenBucket
    /// Waiting starts, oldest first, from `head` on.
    private var waiting: [BrowseTable.Start] = []
    private var head = 0
    /// The count of packets sent when the current window opened; nil before the first count.
    private var windowStart: (at: Duration, sent: Int)?
    /// Query packets a second in the last window closed (for the metrics and the bench).
    private(set) var packetRate: Double?

    /// The pace at first: four lookups per packet allowed, about what avahi packed for a
    /// thousand far devices (docs/BENCHMARKS.md); the packets counted correct it within seconds.
    init(settings: Settings, now: Duration) {
        self.settings = settings
        pace = min(settings.most, max(settings.least, 4 * settings.packetsPerSecond))
        bucket = TokenBucket(rate: pace, burst: settings.burst(at: pace), now: now)
    }

    var queued: Int { waiting.count - head }

    /// When a lookup queued now would be let out, at the current pace.
    func estimate(now: Duration) -> Duration {
        now + .milliseconds(Int(Double(queued) / max(pace, 0.001) * 1000))
    }

    mutating func enqueue(_ start: BrowseTable.Start) { waiting.append(start) }

    /// Notes the packets counted so far (`sent`, nil without a listener) and, once a window
    /// has passed, sets the pace for the next one.
    mutating func observe(sent: Int?, now: Duration) {
        guard let sent else {
            // Nothing to measure with: lookups, not packets (the daemon's packing is unknown).
            if pace != settings.most {
                pace = settings.most
                bucket = TokenBucket(rate: pace, burst: settings.burst, now: now)
            }
            windowStart = nil
            return
        }
        guard let start = windowStart else {
            windowStart = (now, sent)
            return
        }
        let elapsed = (now - start.at) / .seconds(1)
        guard elapsed >= Self.window / .seconds(1) else { return }
        let rate = Double(max(0, sent - start.sent)) / elapsed
        packetRate = rate
        windowStart = (now, sent)
        var next = pace
        if rate > settings.packetsPerSecond {
            next = pace * settings.packetsPerSecond / rate
        } else if queued > 0 && rate < 0.8 * settings.packetsPerSecond {
            next = pace * 1.25
        }
        next = min(settings.most, max(settings.least, next))
        if next != pace {
            pace = next
            bucket.retune(rate: pace, burst: settings.burst(at: pace), now: now)
        }
    }

    /// The lookups to start now, oldest first, and when to look again (nil: none waits).
    mutating func release(now: Duration) -> (due: [BrowseTable.Start], next: Duration?) {
        let count = min(queued, bucket.available(now: now))
        var due: [BrowseTable.Start] = []
        if count > 0 {
            for _ in 0..<count { _ = bucket.reserve(now: now) }
            due = Array(waiting[head..<head + count])
            head += count
        }
        if head == waiting.count {
            waiting = []
            head = 0
        } else if head > 1024 && head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        guard queued > 0 else { return (due, nil) }
        return (due, max(Self.tick, bucket.untilNext(now: now)))
    }
}
