import Synchronization
import Testing

@testable import MDNS

#if canImport(Glibc)
import Glibc
#endif

/// The worker that makes avahi's blocking calls (issue 42): bounded requests, order, the
/// deadline that ends a call by shutting its socket down, and stopping.
@Suite("AvahiWorker")
struct AvahiWorkerTests {
    private func worker(
        deadline: Duration = .seconds(5), capacity: Int = 8,
        onStall: @escaping @Sendable (String, Duration, Bool, UInt64) -> Void = { _, _, _, _ in }
    ) -> AvahiWorker {
        AvahiWorker(
            deadline: deadline, capacity: capacity, connection: "test", perform: { jobs in jobs.forEach { $0() } },
            onStall: onStall)
    }

    @Test("requests beyond the queue's capacity are refused, internal jobs never; jobs run in order")
    func boundedQueue() async throws {
        let worker = self.worker(capacity: 2)
        let ran = Mutex<[Int]>([])
        let hold = Mutex(true)
        // The first job (which starts the worker) holds it, so that the others wait in the queue.
        #expect(worker.submit(.internal) { while hold.withLock({ $0 }) { usleep(1_000) } })
        #expect(worker.submit(.request) { ran.withLock { $0.append(1) } })
        #expect(worker.submit(.request) { ran.withLock { $0.append(2) } })
        #expect(!worker.submit(.request) { ran.withLock { $0.append(3) } })
        #expect(worker.submit(.internal) { ran.withLock { $0.append(4) } })
        hold.withLock { $0 = false }
        let deadline = ContinuousClock.now + .seconds(5)
        while ran.withLock({ $0.count }) < 3 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(ran.withLock { $0 } == [1, 2, 4])
        // The queue has room again once the worker took them.
        #expect(worker.submit(.request) {})
        #expect(worker.stop(patience: .seconds(1)) {})
        #expect(!worker.submit(.internal) {})
    }

    @Test("a worker that was never started stops at once and runs its last job")
    func neverStarted() {
        let worker = self.worker()
        let last = Mutex(false)
        #expect(worker.stop(patience: .seconds(1)) { last.withLock { $0 = true } })
        #expect(last.withLock { $0 })
    }

    @Test("a call past its deadline is reported once and ended by shutting its Unix socket down")
    func deadlineEndsCall() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        let stalls = Mutex<[(String, Bool)]>([])
        let worker = self.worker(deadline: .milliseconds(100)) { what, _, aborted, _ in
            stalls.withLock { $0.append((what, aborted)) }
        }
        worker.start()
        defer { _ = worker.stop(patience: .seconds(1)) {} }
        let socket = pair[0]
        let started = ContinuousClock.now
        // What libdbus does while it waits for a reply: read the socket, here for up to 10 s.
        let (read, outcome) = worker.watch("wait for a reply", socket: { socket }) { () -> Int in
            var byte: UInt8 = 0
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 10_000) > 0 else { return -2 }
            return Glibc.read(socket, &byte, 1)
        }
        let waited = ContinuousClock.now - started
        #expect(read == 0, "the shut-down socket reads as closed")
        #expect(outcome.overdue && outcome.aborted)
        #expect(waited < .seconds(2), "ended at the deadline, not at the call's own timeout (\(waited))")
        // The watchdog reports after it has shut the socket down, so the call may return first.
        let reportBy = ContinuousClock.now + .seconds(2)
        while stalls.withLock({ $0.isEmpty }) && ContinuousClock.now < reportBy { usleep(10_000) }
        #expect(stalls.withLock { $0.map(\.0) } == ["wait for a reply"])
        #expect(stalls.withLock { $0.first?.1 } == true)
    }

    @Test("a call within its deadline is not reported; a descriptor that is not a Unix socket is never shut down")
    func quickCallsAndForeignDescriptors() throws {
        let stalls = Mutex(0)
        let worker = self.worker(deadline: .milliseconds(50)) { _, _, _, _ in stalls.withLock { $0 += 1 } }
        worker.start()
        defer { _ = worker.stop(patience: .seconds(1)) {} }
        let (_, quick) = worker.watch("quick", socket: { -1 }) { () }
        #expect(!quick.overdue && !quick.aborted)
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(udp) }
        let (_, slow) = worker.watch("slow", socket: { udp }) { usleep(150_000) }
        #expect(slow.overdue && !slow.aborted, "reported, but an INET socket is left alone")
        #expect(stalls.withLock { $0 } == 1)
        #expect(!AvahiWorker.abort(udp))
    }

    @Test("stop runs the last job on the worker, or gives up after its patience while a call still waits")
    func stopping() throws {
        let worker = self.worker()
        worker.start()
        let last = Mutex(false)
        #expect(worker.stop(patience: .seconds(1)) { last.withLock { $0 = true } })
        #expect(last.withLock { $0 })

        let stuck = self.worker()
        stuck.start()
        let release = Mutex(false)
        stuck.submit(.internal) {
            while !release.withLock({ $0 }) { usleep(1_000) }
        }
        usleep(20_000)
        let lastRan = Mutex(false)
        let started = ContinuousClock.now
        #expect(!stuck.stop(patience: .milliseconds(100)) { lastRan.withLock { $0 = true } })
        #expect(ContinuousClock.now - started < .seconds(1))
        release.withLock { $0 = true }
        usleep(50_000)
        #expect(!lastRan.withLock { $0 }, "abandoned: the last job must not run after stop gave up")
    }
}
