/// Time and timers for the proxy logic, so tests can drive the clock by hand.
public protocol ProxyScheduler: Sendable {
    /// Monotonic time since an arbitrary origin.
    func now() -> Duration
    /// Runs `work` once after `delay` on some thread, never inside this call: callers schedule
    /// while holding locks that `work` takes. The returned timer can be cancelled.
    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ProxyTimer
}

public protocol ProxyTimer: Sendable {
    func cancel()
}

extension Duration {
    /// Whole nanoseconds (toward zero), saturating at ±292 years: the unit timers take, and
    /// the one browses store their times in (8 bytes instead of 16).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (sum, carry) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return carry ? (whole < 0 ? .min : .max) : sum
    }

    /// Whole milliseconds (toward zero), for logs and the millisecond fields of DSO TLVs;
    /// integer arithmetic, so that a configured 15 s is 15000 exactly.
    var wholeMilliseconds: Int64 { nanoseconds / 1_000_000 }
}
