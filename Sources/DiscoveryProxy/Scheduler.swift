import Dispatch
import Synchronization

/// Time and timers for the proxy logic, so tests can drive the clock by hand.
public protocol ProxyScheduler: Sendable {
    /// Monotonic time since an arbitrary origin.
    func now() -> Duration
    /// Runs `work` once after `delay` on some thread. The returned timer can be cancelled.
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

/// Production scheduler on a private serial Dispatch queue.
public final class DispatchScheduler: ProxyScheduler {
    private let queue = DispatchQueue(label: "discovery-proxy.timers")
    private let origin = ContinuousClock.now

    public init() {}

    public func now() -> Duration { ContinuousClock.now - origin }

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ProxyTimer {
        let item = DispatchWorkItem(block: work)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(max(0, delay.nanoseconds))), execute: item)
        return Timer(item: item)
    }

    private struct Timer: ProxyTimer, @unchecked Sendable {
        // DispatchWorkItem is thread-safe but not annotated Sendable.
        let item: DispatchWorkItem
        func cancel() { item.cancel() }
    }
}

/// A scheduler whose clock only moves when told; for tests.
public final class ManualScheduler: ProxyScheduler {
    private struct Entry {
        var id: Int
        var deadline: Duration
        var work: @Sendable () -> Void
    }
    private struct State {
        var now: Duration = .zero
        var nextID = 0
        var entries: [Entry] = []
    }
    private let state = Mutex(State())

    public init() {}

    public func now() -> Duration { state.withLock { $0.now } }

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ProxyTimer {
        let id = state.withLock { state in
            state.nextID += 1
            state.entries.append(Entry(id: state.nextID, deadline: state.now + delay, work: work))
            return state.nextID
        }
        return Timer(scheduler: self, id: id)
    }

    /// Moves the clock forward, running due timers in deadline order (each outside the lock).
    public func advance(by delta: Duration) {
        let target = state.withLock { $0.now + delta }
        while true {
            let due: Entry? = state.withLock { state in
                guard let index = state.entries.indices.filter({ state.entries[$0].deadline <= target })
                    .min(by: { state.entries[$0].deadline < state.entries[$1].deadline })
                else { return nil }
                let entry = state.entries.remove(at: index)
                state.now = max(state.now, entry.deadline)
                return entry
            }
            guard let due else { break }
            due.work()
        }
        state.withLock { $0.now = target }
    }

    public var pendingTimers: Int { state.withLock { $0.entries.count } }

    private struct Timer: ProxyTimer {
        let scheduler: ManualScheduler
        let id: Int
        func cancel() { scheduler.state.withLock { $0.entries.removeAll { $0.id == id } } }
    }
}
