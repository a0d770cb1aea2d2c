import DNSServer
import DNSWire
import DiscoveryProxy
import NIOCore
import NIOPosix
import Synchronization

// The glue between the front ends and the proxy: its responders, and its clock on an event loop.

/// Adapts the front ends' byte-level contract to the proxy logic.
struct ProxyResponder: DNSResponder {
    let proxy: DiscoveryProxy

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        let proxy = self.proxy
        proxy.handle(query: query, from: client) { reply in
            answer(DNSAnswer(bytes: reply.bytes, replay: reply.replay.map { Self.replay($0, of: proxy) }))
        }
    }

    private static func replay(_ ticket: ReplayTicket, of proxy: DiscoveryProxy) -> DNSAnswerReplay {
        DNSAnswerReplay(
            lifetime: ticket.lifetime, isCurrent: { proxy.isCurrent(ticket) },
            replayed: { proxy.replayed(ticket, count: $0) })
    }
}

/// The proxy's responder with DSO sessions: ordinary queries go to the proxy, DSO messages to
/// a DNS Push session per connection.
struct SessionResponder: DNSSessionResponder {
    let queries: any DNSResponder
    let push: PushService

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        queries.handle(query: query, from: client, answer: answer)  // keeps replay permission
    }

    func openSession(client: DNSClient, connection: DNSStreamConnection) -> any DNSStreamSession {
        StreamSession(
            session: push.openSession(client: client, transport: StreamTransport(connection: connection)))
    }
}

/// The front end's connection as the session's transport.
private struct StreamTransport: PushTransport {
    let connection: DNSStreamConnection
    func send(_ message: [UInt8]) { connection.send(message) }
    func close(abort: Bool) { connection.close(abort: abort) }
    func awaitClose(within grace: Duration) { connection.awaitClose(within: grace) }
}

/// The Push session as the front end's stream session.
private struct StreamSession: DNSStreamSession {
    let session: PushSession
    func receive(_ message: [UInt8]) { session.receive(message) }
    func noteQuery(_ message: [UInt8]) { session.noteQuery(message) }
    func connectionClosed() { session.connectionClosed() }
    func serverShuttingDown() { session.shutdown() }
}

// MARK: - The clock

/// The daemon's timers (the proxy logic's, or the gateway's), on one NIO event loop thread
/// of their own.
///
/// Not on libdispatch: its manager thread hands every timer that fires to a worker thread
/// in a heap-allocated continuation, and each worker keeps up to 1024 freed ones in a cache
/// of its own, a heap that fills for hours under steady traffic (docs/RELIABILITY.md,
/// "Where the heap creep comes from"). Not on the DNS loops either: a timer's work
/// (answering the queries a browse kept waiting, starting a rate-limited mDNS query, a
/// gateway pass) can wait on avahi's D-Bus replies, and would hold up the datagrams queued
/// behind it.
///
/// One thread runs the work in deadline order, one item at a time, as the serial queue did.
public final class EventLoopScheduler: ProxyScheduler {
    private let group: MultiThreadedEventLoopGroup
    private let loop: any EventLoop
    private let origin = ContinuousClock.now
    /// Set by `shutdown()`: NIO reports work scheduled on a loop that has shut down as an
    /// error (a crash in later versions), so late timers are dropped here instead.
    private let closed = Mutex(false)

    public init() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        loop = group.next()
    }

    public func now() -> Duration { ContinuousClock.now - origin }

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ProxyTimer {
        let timer = Timer()
        closed.withLock { closed in
            guard !closed else { return }
            // Never inline, even at zero delay: callers schedule while holding locks `work` takes.
            _ = loop.scheduleTask(in: TimeAmount(max(.zero, delay))) {
                if !timer.isCancelled { work() }
            }
        }
        return timer
    }

    /// Stops the thread; work still waiting is dropped, and so is work scheduled later.
    public func shutdown() async {
        closed.withLock { $0 = true }
        try? await group.shutdownGracefully()
    }

    /// Cancelling only marks the timer: NIO's own cancel searches its whole queue of
    /// scheduled tasks, and browses rearm theirs on every mDNS event. The entry fires as a
    /// no-op at its deadline, as a cancelled DispatchWorkItem did.
    private final class Timer: ProxyTimer {
        private let cancelled = Atomic(false)
        var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
        func cancel() { cancelled.store(true, ordering: .releasing) }
    }
}
