import ServiceLifecycle
import Synchronization

/// How a listener's `run()` lives and ends, for `DNSServer` and `TLSDNSServer` alike: it runs
/// once, and ends at ServiceLifecycle's graceful shutdown, at task cancellation, or at
/// `stop()` (for use outside a ServiceGroup; a stop before the run makes the run return at
/// once).
final class ListenerLifetime: Sendable {
    private enum State {
        case initial
        case running(stop: AsyncStream<Never>.Continuation)
        case finished
    }

    private let state = Mutex(State.initial)

    /// Begins the run: the stream `waitForStop` waits on, or nil when stopped before it
    /// started or when it already ran. A second concurrent run is an error.
    func begin() throws(DNSServerError) -> AsyncStream<Never>? {
        let (stream, stop) = AsyncStream<Never>.makeStream()
        return try state.withLock { (state) throws(DNSServerError) -> AsyncStream<Never>? in
            switch state {
            case .initial:
                state = .running(stop: stop)
                return stream
            case .running:
                throw DNSServerError(code: .alreadyRunning, address: "run() called twice", reason: "")
            case .finished:
                return nil
            }
        }
    }

    /// Waits for the end of the run. True when it ended by cancellation: nothing waits for
    /// answers in flight then.
    func waitForStop(_ stream: AsyncStream<Never>) async -> Bool {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                for await _ in stream {}
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            self.stop()
        }
        return Task.isCancelled
    }

    /// Ends the run (or the run to come).
    func stop() {
        let stop: AsyncStream<Never>.Continuation? = state.withLock { state in
            switch state {
            case .running(let stop): return stop
            case .initial:
                state = .finished
                return nil
            case .finished: return nil
            }
        }
        stop?.finish()
    }

    /// The run is over (or failed to start).
    func finished() {
        state.withLock { $0 = .finished }
    }
}
