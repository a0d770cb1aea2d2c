/// Spaces the gateway's passes by what they cost. A pass that touches a route with a
/// thousand far instances still looks each up once, so it costs milliseconds (it read them
/// all whole before the passes became incremental), and changes arriving one by one (each
/// instance's SRV, TXT, then addresses) would start one pass each `Gateway.settle`: the
/// proxy spent most of a core on passes that each announced a handful. After a pass that took
/// `cost`, the next starts no sooner than `spacing` times that later, and the changes that
/// arrive meanwhile are taken together: passes use at most 1/(1 + spacing) of a core,
/// and a small gateway, whose passes cost microseconds, keeps its 5 ms settle. The wait is
/// at most `longest`: fifty client links' first pass over a thousand far devices took about
/// two seconds, and eight more of waiting left every far device but the first few
/// unannounced for ten (docs/BENCHMARKS.md, "Fifty client links").
struct PassPacing: Sendable {
    static let spacing = 4
    static let longest: Duration = .seconds(1)
    /// When, on the scheduler's clock, the next pass may start.
    private(set) var notBefore: Duration = .zero

    /// A pass that took `cost` (real time) ended at `now` (the scheduler's time).
    mutating func passed(endedAt now: Duration, cost: Duration) {
        notBefore = now + min(cost * Self.spacing, Self.longest)
    }

    /// When a pass wanted at `wanted` may run.
    func earliest(_ wanted: Duration) -> Duration { max(wanted, notBefore) }
}
