import Logging
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The stream listeners of one server: DNS over TCP (RFC 7766), and the same with TLS as a
/// layer at the front of each connection's pipeline (RFC 7858, for DNS Push), the way
/// HummingbirdTLS wraps a server's child channels. Binding, the per-connection pipeline, the
/// connection limits and the shutdown are the same for both.
///
/// Shutdown goes through NIOExtras' `ServerQuiescingHelper` (one per listening socket): it
/// stops accepting, sends each open connection `ChannelShouldQuiesceEvent` (it answers what
/// it has, or a DSO session sends its Retry Delay, then closes), and reports when every
/// connection has closed. Whatever is still open after the grace period is closed.
final class StreamListener: Sendable {
    private let responder: any DNSResponder
    private let counters: DNSServerCounters
    let registry: TCPConnectionRegistry
    /// The connection settings in force (idle timeout, lifetime, in-flight cap, limits); a
    /// connection takes them when it opens, so a reload applies to the connections after it.
    private let configuration: Mutex<DNSServerConfiguration>
    private let tls: NIOSSLContext?
    private let group: any EventLoopGroup
    private let backlog: Int32
    private let replays: ReplayCaches?
    private let logger: Logger
    private let quiescers = Mutex<[ServerQuiescingHelper]>([])

    /// - Parameters:
    ///   - configuration: the connection limits, idle timeout and in-flight cap.
    ///   - tls: with a context, every connection is TLS first.
    init(
        responder: any DNSResponder, counters: DNSServerCounters, configuration: DNSServerConfiguration,
        tls: NIOSSLContext? = nil, group: any EventLoopGroup, backlog: Int32, replays: ReplayCaches? = nil,
        logger: Logger
    ) {
        self.responder = responder
        self.counters = counters
        self.configuration = Mutex(configuration)
        self.tls = tls
        self.group = group
        self.backlog = backlog
        self.replays = replays
        self.logger = logger
        self.registry = TCPConnectionRegistry(
            maxTotal: configuration.maxTCPConnections, maxPerClient: configuration.maxTCPConnectionsPerClient,
            maxPerSubnet: configuration.effectiveMaxTCPConnectionsPerSubnet)
    }

    var current: DNSServerConfiguration { configuration.withLock { $0 } }

    /// New connection settings and limits, for the connections opened from now on.
    func apply(_ configuration: DNSServerConfiguration) {
        self.configuration.withLock { $0 = configuration }
        registry.apply(
            .init(
                total: configuration.maxTCPConnections, perClient: configuration.maxTCPConnectionsPerClient,
                perSubnet: configuration.effectiveMaxTCPConnectionsPerSubnet))
    }

    /// Listens on `address` (IPv6 sockets are IPv6-only, so that an IPv4 listener on the same
    /// port can coexist). Throws NIO's error; callers name the address in theirs.
    func bind(_ address: SocketAddress) async throws -> any Channel {
        let quiescer = ServerQuiescingHelper(group: group)
        let responder = self.responder
        let counters = self.counters
        let registry = self.registry
        let tls = self.tls
        let replays = self.replays
        let logger = self.logger
        var bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiescer.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
                    try DNSServer.addTCPHandlers(
                        to: pipeline, responder: responder, counters: counters, registry: registry,
                        configuration: self.current, replays: replays, logger: logger)
                }
            }
        if case .v6 = address {
            bootstrap = bootstrap.serverChannelOption(
                ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1)
        }
        let channel = try await bootstrap.bind(to: address).get()
        // Only a bound socket is drained: a helper whose socket never bound never reports.
        quiescers.withLock { $0.append(quiescer) }
        return channel
    }

    /// Stops accepting and asks every connection to finish (see the type's comment); returns
    /// once all have closed, or after `grace`, when the rest are closed. `alsoWaitFor` runs
    /// beside the connections' draining (the UDP side's answers in flight) within the same grace.
    func drain(grace: Duration, alsoWaitFor other: (@Sendable () async -> Void)? = nil) async {
        registry.stopAdmitting()
        let quiescers = self.quiescers.withLock { $0 }
        let done = quiescers.map { quiescer in
            let promise = group.next().makePromise(of: Void.self)
            quiescer.initiateShutdown(promise: promise)
            // A listener that never bound has nothing to drain.
            return promise.futureResult.recover { _ in }
        }
        let closed = EventLoopFuture.andAllComplete(done, on: group.next())
        let registry = self.registry
        await withTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                try? await closed.get()
                await other?()
                return true
            }
            tasks.addTask {
                try? await Task.sleep(for: grace)
                return false
            }
            let drained = await tasks.next() ?? false
            if !drained {
                // Past the grace period: close what is left, which also ends the wait above.
                await registry.closeAll()
            }
            tasks.cancelAll()
        }
        await registry.closeAll()
    }
}
