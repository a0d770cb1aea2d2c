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
