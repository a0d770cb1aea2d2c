/// How long one link's devices take to answer a browse, learned from its recent browses
/// (docs/ARCHITECTURE.md, "Slow links"). The configured `negativeTimeout` and
/// `collectionWindow` suit a prompt link; on busy Wi-Fi, or with devices that wake up to
/// answer, mDNS answers come hundreds of milliseconds late and at different times. What the
/// link has shown it needs, it gets, never less than configured and never past `ceiling`:
///
/// - a negative timeout that covers its usual first answer (`usualFirst` + `margin`);
/// - a collection window that covers its usual spread between a browse's first and last
///   answer (`usualSpread` + `lateness`, when longer than the configured window);
/// - an answer given before that spread has passed is provisional (`expectsMore`): a short
///   TTL, so a resolver asks again once the late devices are in. Until a link has taught two
///   browses, any answer in the first `ceiling` of a browse that crossed it is;
/// - so is any such answer in the first `ceiling` whatever the link has learned (`isYoung`):
///   a new type's devices may answer later than any the link has shown (a spread of zero
///   learned from single-device browses said nothing about them).
///
/// A browse teaches only with records that crossed the link (its first record came later than
/// `fromCache`) and only with its first round (`horizon`). "Usual" is the second-longest of
/// the last `capacity` browses: past what most browses need, without the one outlier.
struct AnswerTimes: Sendable {
    /// One browse: from its query's start to its first record, and to its last record so far.
    struct Sample: Sendable, Equatable {
        var generation: UInt32
        var first: Duration
        var last: Duration
    }

    /// The link's last browses that taught something, oldest first.
    private(set) var samples: [Sample] = []
    /// Recomputed when a sample changes, as they are read by every miss.
    private(set) var usualFirst: Duration?
    private(set) var usualSpread: Duration?

    static let capacity = 16
    /// avahi re-sends a query after about 1 s and 3 s (RFC 6762 §5.2): a record later than
    /// this comes from a device that just appeared, not from one answering slowly.
    static let horizon: Duration = .seconds(3)
    /// A first record sooner than this came from avahi-daemon's cache: nothing crossed the
    /// link, as avahi sends its first query 20-120 ms after the browse starts (RFC 6762 §5.2).
    /// (Cached records took up to 16 ms to arrive in the lab, through D-Bus, under load.)
    static let fromCache: Duration = .milliseconds(20)
    /// The longest any query waits: every resolver tried still gave its client the proxy's
    /// answer after 1.2 s, and PowerDNS Recursor gives up at 1.5 s ("Negative answers").
    static let ceiling: Duration = .milliseconds(1200)
    /// Past the usual first answer before "nothing there".
    static let margin: Duration = .milliseconds(100)
    /// Past the usual spread before answering: the last device's jitter.
    static let lateness: Duration = .milliseconds(25)

    /// A record arrived `age` after the query of browse `generation` started; `isFirst`: the
    /// browse had none before.
    mutating func observe(generation: UInt32, age: Duration, isFirst: Bool) {
        guard age <= Self.horizon else { return }
        if isFirst {
            guard age >= Self.fromCache else { return }
            if samples.count == Self.capacity { samples.removeFirst() }
            samples.append(Sample(generation: generation, first: age, last: age))
        } else {
            guard let index = samples.lastIndex(where: { $0.generation == generation }), age > samples[index].last
            else { return }
            samples[index].last = age
        }
        usualFirst = Self.secondLongest(samples.lazy.map(\.first))
        // The browse still collecting counts as a spread of zero so far: the spread needs two
        // finished browses beside it.
        usualSpread = samples.count > 2 ? Self.secondLongest(samples.lazy.map { $0.last - $0.first }) : nil
    }

    /// The second-longest of `values`; nil with fewer than two.
    static func secondLongest(_ values: some Sequence<Duration>) -> Duration? {
        var longest: Duration?
        var second: Duration?
        for value in values {
            if longest.map({ value > $0 }) ?? true {
                second = longest
                longest = value
            } else if second.map({ value > $0 }) ?? true {
                second = value
            }
        }
        return second
    }

    /// The longest wait: `ceiling`, or the configured negative timeout if longer (an operator
    /// who set that has resolvers that wait).
    static func ceiling(configured negativeTimeout: Duration) -> Duration {
        max(ceiling, negativeTimeout)
    }

    /// How long a query waits for mDNS before "nothing there".
    func negativeTimeout(configured: Duration) -> Duration {
        guard let usualFirst else { return configured }
        return max(configured, min(usualFirst + Self.margin, Self.ceiling(configured: configured)))
    }

    /// When the waiters of a browse whose query started at `startedAt` and whose first record
    /// came at `firstAt` are answered: after `window`, or after the link's usual spread and
    /// `lateness` if that is longer, but by the ceiling after the start (and never sooner
    /// than `window`). The configured window already covers a spread shorter than itself.
    func answerAt(startedAt: Duration, firstAt: Duration, window: Duration, negativeTimeout: Duration) -> Duration {
        let usual = firstAt + max(window, (usualSpread ?? .zero) + Self.lateness)
        return max(firstAt + window, min(usual, startedAt + Self.ceiling(configured: negativeTimeout)))
    }

    /// More records may still come for browse `generation` (started at `startedAt`), whose
    /// first record crossed the link: it is within the link's usual spread after that record,
    /// or, while the link has taught too little to know its spread, within `ceiling`.
    /// Browse `generation`'s first record crossed the link and `ceiling` has not passed since
    /// it started: an answer now may lack devices slower than the link's usual ones.
    func isYoung(generation: UInt32, startedAt: Duration, now: Duration) -> Bool {
        now < startedAt + Self.ceiling && samples.contains { $0.generation == generation }
    }

    func expectsMore(generation: UInt32, startedAt: Duration, now: Duration) -> Bool {
        guard let sample = samples.last(where: { $0.generation == generation }) else { return false }
        guard let usualSpread else { return now < startedAt + Self.ceiling }
        return now < startedAt + sample.first + usualSpread
    }
}
