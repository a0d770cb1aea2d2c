@_spi(Testing) import DiscoveryProxy
import Synchronization
import Testing

@testable import ProxyApp

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The production timers keep the contract `ProxyScheduler` states: work runs later, never
/// inside `schedule`, in deadline order, and not at all once cancelled or shut down. The
/// waits are generous: these check order and outcome, never speed.
@Suite("EventLoopScheduler: the daemon's timers")
struct EventLoopSchedulerTests {
    /// Collects what ran, and lets a test wait for a number of entries.
    final class Log: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }

        func wait(for count: Int) async throws {
            for _ in 0..<500 where all.count < count { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    @Test("runs in deadline order, never inside schedule, even at zero delay")
    func order() async throws {
        let scheduler = EventLoopScheduler()
        let log = Log()
        let caller = UInt(bitPattern: Int(pthread_self()))
        scheduler.schedule(after: .milliseconds(60)) { log.add("late") }
        scheduler.schedule(after: .zero) {
            log.add(UInt(bitPattern: Int(pthread_self())) == caller ? "inline" : "now")
        }
        scheduler.schedule(after: .milliseconds(-5)) { log.add("past") }
        scheduler.schedule(after: .milliseconds(20)) { log.add("soon") }
        try await log.wait(for: 4)
        #expect(log.all.count == 4)
        #expect(Set(log.all.prefix(2)) == ["now", "past"], "a delay of zero or less runs first, later")
        #expect(Array(log.all.suffix(2)) == ["soon", "late"])
        await scheduler.shutdown()
    }

    @Test("a cancelled timer does not run; the others do")
    func cancel() async throws {
        let scheduler = EventLoopScheduler()
        let log = Log()
        let cancelled = scheduler.schedule(after: .milliseconds(20)) { log.add("cancelled") }
        scheduler.schedule(after: .milliseconds(40)) { log.add("kept") }
        cancelled.cancel()
        cancelled.cancel()  // twice is harmless
        try await log.wait(for: 1)
        try await Task.sleep(for: .milliseconds(50))
        #expect(log.all == ["kept"])
        await scheduler.shutdown()
    }

    @Test("after shutdown, work waiting and work scheduled later are dropped, without a crash")
    func shutdown() async throws {
        let scheduler = EventLoopScheduler()
        let log = Log()
        scheduler.schedule(after: .seconds(30)) { log.add("waiting") }
        await scheduler.shutdown()
        scheduler.schedule(after: .zero) { log.add("late") }.cancel()
        scheduler.schedule(after: .zero) { log.add("late") }
        try await Task.sleep(for: .milliseconds(50))
        #expect(log.all.isEmpty)
    }

    @Test("now() is monotonic and starts near zero")
    func clock() async {
        let scheduler = EventLoopScheduler()
        let first = scheduler.now()
        let second = scheduler.now()
        #expect(first >= .zero && first < .seconds(1))
        #expect(second >= first)
        await scheduler.shutdown()
    }
}
