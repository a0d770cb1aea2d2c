import CoreMetrics
import DNSWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A socket the server listens on.
public struct DNSServerBoundAddress: Sendable, Hashable, CustomStringConvertible {
    public var transport: DNSTransport
    public var address: SocketAddress

    public init(transport: DNSTransport, address: SocketAddress) {
        self.transport = transport
        self.address = address
    }

    public var port: Int { self.address.port ?? 0 }

    public var description: String {
        let host = self.address.ipAddress ?? "?"
        let hostPort = host.contains(":") ? "[\(host)]:\(self.port)" : "\(host):\(self.port)"
        return "\(hostPort)/\(self.transport.rawValue)"
    }
}

/// The DNS front ends as one service: a UDP socket and a TCP listener on every configured
/// address, answering through a `DNSResponder`.
///
/// `run()` binds (throwing `DNSServerError` naming the address and errno text on failure),
/// reports the bound sockets through `onBound` and `boundAddresses`, serves until graceful
/// shutdown, cancellation or `shutdown()`, then stops accepting, lets answers in flight finish
/// for up to `shutdownGracePeriod` and closes everything.
public final class DNSServer: Service, Sendable {

    /// The settings at start; `apply` changes the connection settings and limits and
    /// `replayAnswers` (`current`), never the sockets.
    public let configuration: DNSServerConfiguration
    private let responder: any DNSResponder
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let onBound: (@Sendable ([DNSServerBoundAddress]) -> Void)?

    /// Exported as metrics too: this is the DNS service's listener (the TLS listener's
    /// connections are DNS Push sessions, counted by the Push metrics).
    private let counters = DNSServerCounters(exportingTo: MetricsSystem.factory)
    private let udpDrain = UDPDrainState()
    /// Answers the responder allowed to be replayed, one cache per event loop, on while
    /// `replayAnswers` is.
    private let replays: ReplayCaches
    private let lifetime = ListenerLifetime()
    private let bound = Mutex<[DNSServerBoundAddress]>([])
    /// The TCP listeners (`StreamListener`); made by `init`, bound by `run()`.
    private let stream: StreamListener

    /// - Parameters:
    ///   - onBound: called once from `run()` when every socket is bound, before serving; with
    ///     port 0 in the configuration this is how the chosen ports are learnt.
    public init(
        configuration: DNSServerConfiguration = DNSServerConfiguration(),
        responder: any DNSResponder,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "dns.server"),
        onBound: (@Sendable ([DNSServerBoundAddress]) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.responder = responder
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onBound = onBound
        let replays = ReplayCaches(group: eventLoopGroup, on: configuration.replayAnswers)
        self.replays = replays
        let loops = Array(eventLoopGroup.makeIterator())
        self.stream = StreamListener(
            responder: responder, counters: self.counters, configuration: configuration,
            group: loops.count >= 2 ? loops[1] : eventLoopGroup, backlog: 256, replays: replays, logger: logger)
    }

    /// The settings in force: those at start with the last `apply`'s connection settings.
    public var current: DNSServerConfiguration {
        var current = self.stream.current
        current.replayAnswers = self.replays.isOn.value
        return current
    }

    /// Applies a reload: TCP connection limits, idle timeout, lifetime and in-flight cap for
    /// the connections opened from now on, and replay on or off at once. The listen addresses
    /// and the UDP socket settings stay as bound.
    public func apply(_ configuration: DNSServerConfiguration) {
        var kept = configuration
        kept.listenAddresses = self.configuration.listenAddresses
        kept.udpReceiveBufferSlots = self.configuration.udpReceiveBufferSlots
        kept.udpWriteBatch = self.configuration.udpWriteBatch
        kept.maxUDPDatagramSize = self.configuration.maxUDPDatagramSize
        kept.udpSocketReceiveBuffer = self.configuration.udpSocketReceiveBuffer
        self.stream.apply(kept)
        self.replays.isOn.set(configuration.replayAnswers)
    }

    /// The sockets bound by `run()`, UDP and TCP for each listen address; empty before.
    public var boundAddresses: [DNSServerBoundAddress] {
        self.bound.withLock { $0 }
    }

    /// The counters so far.
    public func stats() -> DNSServerStats {
        self.counters.snapshot()
    }

    /// Starts the same graceful shutdown as ServiceLifecycle's, for use outside a ServiceGroup.
    public func shutdown() {
        lifetime.stop()
    }

    public func run() async throws {
        guard let stopSignal = try lifetime.begin() else { return }  // shut down before it started, or already ran
        let listeners: Listeners
        do {
            listeners = try await self.bindAll()
        } catch {
            lifetime.finished()
            throw error
        }
        let addresses = listeners.bound
        self.bound.withLock { $0 = addresses }
        for address in addresses {
            self.logger.info("DNS server listening", metadata: ["dns.listen": "\(address)"])
        }
        self.onBound?(addresses)

        let cancelled = await lifetime.waitForStop(stopSignal)
        self.logger.debug("DNS server shutting down")
        await self.drainAndClose(listeners, immediately: cancelled)
        lifetime.finished()
        self.logger.debug("DNS server stopped")
    }

    // MARK: binding

    private struct Listeners {
        var udp: [any Channel] = []
        var tcp: [any Channel] = []
        var bound: [DNSServerBoundAddress] = []

        func closeAll() async {
            for channel in self.udp + self.tcp {
                try? await channel.close()
            }
        }
    }

    private func bindAll() async throws -> Listeners {
        var listeners = Listeners()
        do {
            for listen in self.configuration.listenAddresses {
                let (udp, tcp) = try await self.bind(listen)
                listeners.udp.append(udp)
                listeners.tcp.append(tcp)
                for (transport, channel) in [(DNSTransport.udp, udp), (.tcp, tcp)] {
                    if let local = channel.localAddress {
                        listeners.bound.append(DNSServerBoundAddress(transport: transport, address: local))
                    }
                }
            }
        } catch {
            await listeners.closeAll()
            throw error
        }
        return listeners
    }

    /// Binds UDP, then TCP on the same port (UDP's chosen port when the configured one is 0).
    private func bind(
        _ listen: DNSServerConfiguration.ListenAddress
    ) async throws -> (udp: any Channel, tcp: any Channel) {
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: listen.host, port: listen.port)
        } catch {
            throw DNSServerError(code: .invalidListenAddress, address: "\(listen)", reason: "not a numeric IP address")
        }
        var attempt = 0
        while true {
            attempt += 1
            let udp: any Channel
            do {
                udp = try await self.bindUDP(address)
            } catch {
                throw Self.listenError(error, address: "\(listen)/udp")
            }
            let port = udp.localAddress?.port ?? listen.port
            let tcpAddress = try SocketAddress(ipAddress: listen.host, port: port)
            do {
                let tcp = try await self.stream.bind(tcpAddress)
                return (udp, tcp)
            } catch {
                try? await udp.close()
                if listen.port == 0, attempt < 8, let io = error as? IOError, io.errnoCode == EADDRINUSE {
                    continue  // the port UDP got is taken for TCP: try another one
                }
                let shown = DNSServerConfiguration.ListenAddress(host: listen.host, port: port)
                throw Self.listenError(error, address: "\(shown)/tcp")
            }
        }
    }

    private static func listenError(_ error: any Error, address: String) -> DNSServerError {
        let reason: String
        if let io = error as? IOError {
            reason = String(cString: strerror(io.errnoCode))
        } else {
            reason = "\(error)"
        }
        return DNSServerError(code: .cannotListen, address: address, reason: reason)
    }

    private static func isIPv6(_ address: SocketAddress) -> Bool {
        if case .v6 = address { return true }
        return false
    }

    private func bindUDP(_ address: SocketAddress) async throws -> any Channel {
        let config = self.configuration
        let slots = max(1, config.udpReceiveBufferSlots)
        // One byte more than accepted, so that a datagram filling its slot is known to be too large.
        let slotSize = max(512, config.maxUDPDatagramSize) + 1
        let responder = self.responder
        let counters = self.counters
        let drain = self.udpDrain
        let replays = self.replays
        let logger = self.logger
        // No SO_REUSEADDR for UDP: on Linux it lets a second server bind the same port silently.
        var bootstrap = DatagramBootstrap(group: self.udpEventLoops)
            .channelOption(.datagramVectorReadMessageCount, value: slots)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: slots * slotSize))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        UDPDNSHandler(
                            responder: responder,
                            counters: counters,
                            drain: drain,
                            maxDatagramSize: max(512, config.maxUDPDatagramSize),
                            writeBatch: config.udpWriteBatch,
                            replays: replays,
                            logger: logger
                        )
                    )
                }
            }
        if Self.isIPv6(address) {
            bootstrap = bootstrap.channelOption(Self.ipv6Only, value: 1)
        }
        let channel = try await bootstrap.bind(to: address).get()
        if config.udpSocketReceiveBuffer > 0 {
            await Self.setReceiveBuffer(of: channel, to: config.udpSocketReceiveBuffer, logger: logger)
        }
        return channel
    }

    /// SO_RCVBUFFORCE (needs CAP_NET_ADMIN), else SO_RCVBUF; a failure only costs burst capacity.
    private static func setReceiveBuffer(of channel: any Channel, to bytes: Int, logger: Logger) async {
        let value = SocketOptionValue(clamping: bytes)
        do {
            try await channel.setOption(Self.receiveBufferForce, value: value).get()
        } catch {
            do {
                try await channel.setOption(.socketOption(.so_rcvbuf), value: value).get()
            } catch {
                logger.notice(
                    "cannot enlarge the UDP receive buffer; keeping the system default",
                    metadata: ["dns.bytes": "\(bytes)", "error": "\(error)"])
            }
        }
    }

    private static let receiveBufferForce = ChannelOptions.Types.SocketOption(
        level: .socket, name: NIOBSDSocket.Option(rawValue: SO_RCVBUFFORCE))

    /// With two or more event loops, UDP gets the first and TCP (accepts and connections) the
    /// second, so that a TCP flood (thousands of connections, slow drips, unread answers)
    /// never queues ahead of UDP datagrams on the same loop.
    private var udpEventLoops: any EventLoopGroup {
        let loops = Array(self.eventLoopGroup.makeIterator())
        return loops.count >= 2 ? loops[0] : self.eventLoopGroup
    }

    private static let ipv6Only = ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only)

    /// The per-connection pipeline: 2-byte length framing both ways, DSO routing when the
    /// responder holds sessions, then the DNS handler.
    static func addTCPHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations,
        responder: any DNSResponder,
        counters: DNSServerCounters,
        registry: TCPConnectionRegistry,
        configuration: DNSServerConfiguration,
        replays: ReplayCaches? = nil,
        logger: Logger = Logger(label: "dns.server")
    ) throws {
        try pipeline.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes)))
        try pipeline.addHandler(LengthFieldPrepender(lengthFieldBitLength: .twoBytes))
        if configuration.dsoSessions, let sessions = responder as? any DNSSessionResponder {
            try pipeline.addHandler(DSOSessionHandler(responder: sessions, counters: counters))
        }
        try pipeline.addHandler(
            TCPDNSHandler(
                responder: responder,
                counters: counters,
                registry: registry,
                idleTimeout: configuration.tcpIdleTimeout,
                lifetime: configuration.tcpMaxConnectionLifetime,
                maxInFlight: configuration.maxInFlightPerConnection,
                replays: replays,
                logger: logger
            )
        )
    }

    // MARK: shutdown

    private func drainAndClose(_ listeners: Listeners, immediately: Bool) async {
        // Drop new datagrams; stop accepting and let connections answer what they have
        // (`StreamListener.drain`), and UDP answers in flight go out, within the grace period.
        self.udpDrain.startDraining()
        let udpDrain = self.udpDrain
        await self.stream.drain(grace: immediately ? .zero : self.configuration.shutdownGracePeriod) {
            await udpDrain.drained()
        }
        for channel in listeners.udp {
            try? await channel.close()
        }
        self.replays.stop()
    }
}
