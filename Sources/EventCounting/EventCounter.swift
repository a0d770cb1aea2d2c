import CoreMetrics
import Synchronization

/// The count of one kind of event, incremented once where the event happens and read by
/// everything that reports it: the status page and `/api` through `value`, Prometheus through
/// the swift-metrics counter it feeds. A swift-metrics counter cannot be read back, and a
/// second counter kept beside each one is a second place to forget.
public final class EventCounter: Sendable {
    private let count = Atomic<Int>(0)
    private let metric: Counter?

    /// Counted and exported as `label{dimensions}` through `factory` (the executable's
    /// bootstrapped factory by default, `TestMetrics` in tests).
    public init(label: String, dimensions: [(String, String)] = [], factory: any MetricsFactory = MetricsSystem.factory)
    {
        metric = Counter(label: label, dimensions: dimensions, factory: factory)
    }

    /// Counted for the status page only: an event with no metric of its own.
    public init() {
        metric = nil
    }

    public func increment(by amount: Int = 1) {
        count.add(amount, ordering: .relaxed)
        metric?.increment(by: amount)
    }

    public var value: Int { count.load(ordering: .relaxed) }
}
