import DNSWire
import Testing

@testable import DNSServer

/// The run and stop of a listener, shared by the DNS and the DNS Push listeners.
@Suite struct ListenerLifetimeTests {
    @Test("a run ends at stop(); it runs once, and a second run while it runs is an error")
    func stopEndsTheRun() async throws {
        let lifetime = ListenerLifetime()
        let stream = try #require(try lifetime.begin())
        #expect(throws: DNSServerError.self) { try lifetime.begin() }
        lifetime.stop()
        #expect(await lifetime.waitForStop(stream) == false, "stopped, not cancelled")
        lifetime.finished()
        #expect(try lifetime.begin() == nil, "already ran")
    }

    @Test("a stop before the run makes the run return at once")
    func stopBeforeRun() throws {
        let lifetime = ListenerLifetime()
        lifetime.stop()
        #expect(try lifetime.begin() == nil)
    }

    @Test("cancellation ends the run, and says so (no grace for answers in flight)")
    func cancellation() async throws {
        let lifetime = ListenerLifetime()
        let stream = try #require(try lifetime.begin())
        let task = Task { await lifetime.waitForStop(stream) }
        task.cancel()
        #expect(await task.value == true)
    }
}
