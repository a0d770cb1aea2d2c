import DiscoveryProxy
import Synchronization

/// A scheduler whose clock only moves when told: the unit tests' and the fuzz harnesses'
/// clock. Not part of the product (no executable links this target).
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
                guard
                    let index = state.entries.indices.filter({ state.entries[$0].deadline <= target })
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

    /// Timers not yet run or cancelled (the dso fuzz harness traces it).
    public var pendingTimers: Int { state.withLock { $0.entries.count } }

    private struct Timer: ProxyTimer {
        let scheduler: ManualScheduler
        let id: Int
        func cancel() { scheduler.state.withLock { $0.entries.removeAll { $0.id == id } } }
    }
}
