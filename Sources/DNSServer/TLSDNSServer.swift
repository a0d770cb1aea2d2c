import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// DNS over TLS listeners (RFC 7858), for DNS Push sessions (RFC 8765 §5: Push runs on TLS).
/// Each connection gets TLS, then the same length-framed pipeline as plain TCP, so DSO
/// messages reach the responder's sessions. TLS record boundaries do not matter: the frame
/// decoder works on the decrypted byte stream (a length prefix and its message in one record,
/// several messages in one record, or a message split across records).
public final class TLSDNSServer: Service, Sendable {
    public struct Configuration: Sendable, Equatable {
        public var listenAddresses: [DNSServerConfiguration.ListenAddress]
        /// PEM files: the certificate chain (leaf first) and its private key.
        public var certificateFile: String
        public var privateKeyFile: String
        /// Before its first DSO message a connection is an RFC 7766 connection with this idle
        /// timeout and these connection limits; the composition derives them from the DNS
        /// listener's and the Push sessions' settings, so they have no defaults of their own.
        public var idleTimeout: Duration
        public var maxConnections: Int
        public var maxConnectionsPerClient: Int
        /// On graceful shutdown, how long sessions may take to close: each is sent a Retry
        /// Delay and has 5 s to close before it is reset (RFC 8490 §6.6.1), plus a second for
        /// the reset to go out.
        public var shutdownGracePeriod: Duration = .seconds(6)

        public init(
            listenAddresses: [DNSServerConfiguration.ListenAddress], certificateFile: String, privateKeyFile: String,
            idleTimeout: Duration, maxConnections: Int, maxConnectionsPerClient: Int
        ) {
            self.listenAddresses = listenAddresses
            self.idleTimeout = idleTimeout
            self.maxConnections = maxConnections
            self.maxConnectionsPerClient = maxConnectionsPerClient
            self.certificateFile = certificateFile
            self.privateKeyFile = privateKeyFile
        }
    }

    /// The settings at start; `apply` changes the connection settings (`current`).
    public let configuration: Configuration
    private let live: Mutex<(configuration: Configuration, stream: StreamListener?)>
    private let responder: any DNSResponder
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let onBound: (@Sendable ([SocketAddress]) -> Void)?
    private let counters = DNSServerCounters()
    private let lifetime = ListenerLifetime()

    public init(
        configuration: Configuration, responder: any DNSResponder,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "dns.tls"), onBound: (@Sendable ([SocketAddress]) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.live = Mutex((configuration, nil))
        self.responder = responder
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onBound = onBound
    }

    public func stats() -> DNSServerStats { counters.snapshot() }

    /// The settings in force.
    public var current: Configuration { live.withLock { $0.configuration } }

    /// Applies a reload: the idle timeout and connection limits, for the connections opened
    /// from now on. The addresses, certificate and key stay as loaded at start.
    public func apply(_ configuration: Configuration) {
        var kept = configuration
        kept.listenAddresses = self.configuration.listenAddresses
        kept.certificateFile = self.configuration.certificateFile
        kept.privateKeyFile = self.configuration.privateKeyFile
        let stream = live.withLock {
            $0.configuration = kept
            return $0.stream
        }
        stream?.apply(Self.connections(kept))
    }

    /// Before a connection's first DSO message it is an RFC 7766 connection with these limits.
    private static func connections(_ configuration: Configuration) -> DNSServerConfiguration {
        var connections = DNSServerConfiguration(listenAddresses: [])
        connections.tcpIdleTimeout = configuration.idleTimeout
        connections.maxTCPConnections = configuration.maxConnections
        connections.maxTCPConnectionsPerClient = configuration.maxConnectionsPerClient
        return connections
    }

    /// Loads the certificate and key; a one-line error naming the file otherwise.
    public static func makeContext(certificateFile: String, privateKeyFile: String) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
        } catch {
            throw TLSSetupError("cannot read the TLS certificate \(certificateFile): \(error)")
        }
        guard !chain.isEmpty else {
            throw TLSSetupError("no certificate in \(certificateFile)")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKeyFile, format: .pem)
        } catch {
            throw TLSSetupError("cannot read the TLS private key \(privateKeyFile): \(error)")
        }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["dot"]  // RFC 7858 §3.2 ALPN
        // On close, NIOSSL sends close_notify and waits for the client's before closing the
        // socket (5 s by default). DNS messages are length-framed, so nothing depends on it, and
        // an abort (RFC 8490 §5.3, SO_LINGER 0) must reset the connection now, not 5 s later.
        tls.shutdownTimeout = .milliseconds(100)
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw TLSSetupError("TLS certificate \(certificateFile) and key \(privateKeyFile) cannot be used: \(error)")
        }
    }

    /// Starts the same graceful shutdown as ServiceLifecycle's, for use outside a ServiceGroup.
    public func shutdown() {
        lifetime.stop()
    }

    public func run() async throws {
        guard let stopSignal = try lifetime.begin() else { return }
        defer { lifetime.finished() }
        let context = try Self.makeContext(
            certificateFile: configuration.certificateFile, privateKeyFile: configuration.privateKeyFile)
        let stream = live.withLock { live in
            let stream = StreamListener(
                responder: responder, counters: counters, configuration: Self.connections(live.configuration),
                tls: context, group: eventLoopGroup, backlog: 1024, logger: logger)
            live.stream = stream
            return stream
        }
        var channels: [any Channel] = []
        do {
            for listen in configuration.listenAddresses { channels.append(try await bind(listen, on: stream)) }
        } catch {
            for channel in channels { try? await channel.close() }
            throw error
        }
        let addresses = channels.compactMap(\.localAddress)
        for address in addresses { logger.info("DNS Push (TLS) listening", metadata: ["dns.listen": "\(address)"]) }
        onBound?(addresses)

        let cancelled = await lifetime.waitForStop(stopSignal)
        // Sessions send their Retry Delay; their clients close, or are reset after 5 s.
        await stream.drain(grace: cancelled ? .zero : configuration.shutdownGracePeriod)
    }

    private func bind(_ listen: DNSServerConfiguration.ListenAddress, on stream: StreamListener) async throws
        -> any Channel
    {
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: listen.host, port: listen.port)
        } catch {
            throw DNSServerError(code: .invalidListenAddress, address: "\(listen)", reason: "not a numeric IP address")
        }
        do {
            return try await stream.bind(address)
        } catch let error as IOError {
            throw DNSServerError(
                code: .cannotListen, address: "\(listen)/tls", reason: String(cString: strerror(error.errnoCode)))
        }
    }
}

/// The TLS certificate or key cannot be used; one line for the operator.
public struct TLSSetupError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
