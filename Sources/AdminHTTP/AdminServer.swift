import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import NIOPosix
public import Prometheus
public import ServiceLifecycle
import Synchronization

/// The admin server could not start listening (address in use, no permission, bad address).
public struct AdminServerError: Error, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// What the socket layer said, e.g. `bind(descriptor:ptr:bytes:): Address already in use (errno: 98)`.
    public var underlying: any Error

    public var description: String {
        "admin HTTP server cannot listen on \(self.host):\(self.port): \(self.underlying)"
    }
}

/// Creates the admin HTTP server (`buildAdminRouter`) on `host:port`, normally `127.0.0.1:8053`.
/// Add it to the application's `ServiceGroup`; it stops on graceful shutdown.
///
/// - `onServerRunning` receives the bound port once the server listens (useful with port 0).
/// - If the socket cannot be bound, `run()` throws `AdminServerError`.
public func makeAdminServer(
    host: String,
    port: Int,
    source: some AdminStatusSource,
    registry: PrometheusCollectorRegistry,
    logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some Service {
    AdminServer(
        host: host,
        port: port,
        router: buildAdminRouter(source: source, registry: registry),
        logger: logger,
        onServerRunning: onServerRunning
    )
}

/// Hummingbird's HTTP/1 server around the admin router, without `Application`: its
/// `run()` adds a service that re-formats the `Date` header every second, a task waking on
/// Swift concurrency's thread pool for the daemon's whole life (docs/RELIABILITY.md, "A pool
/// with nothing to do"). The header is made per response instead.
struct AdminServer: Service, CustomStringConvertible {
    private final class Listening: Sendable {
        let value = Atomic<Bool>(false)
    }

    let host: String
    let port: Int
    private let responder: RouterResponder<BasicRequestContext>
    private let logger: Logger
    private let onServerRunning: @Sendable (Int) async -> Void
    private let listening = Listening()

    init(
        host: String,
        port: Int,
        router: Router<BasicRequestContext>,
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void
    ) {
        self.host = host
        self.port = port
        self.responder = router.buildResponder()
        self.logger = logger
        self.onServerRunning = onServerRunning
    }

    var description: String { "AdminHTTPServer(\(self.host):\(self.port))" }

    func run() async throws {
        do {
            try await makeServer().run()
        } catch {
            if !self.listening.value.load(ordering: .acquiring), !(error is CancellationError) {
                throw AdminServerError(host: self.host, port: self.port, underlying: error)
            }
            throw error
        }
    }

    private func makeServer() throws -> any Service {
        let (responder, logger, listening) = (self.responder, self.logger, self.listening)
        let (host, port, onServerRunning) = (self.host, self.port, self.onServerRunning)
        return try HTTPServerBuilder.http1().buildServer(
            configuration: ServerConfiguration(address: .hostname(host, port: port)),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: logger
        ) { request, writer, channel in
            let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch {
                logger.debug("admin HTTP request failed", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError)
            }
            response.headers[.date] = HTTPDate.now()  // RFC 9110 §6.6.1
            try await writer.write(response: response.head, body: response.body)
        } onServerRunning: { channel in
            listening.value.store(true, ordering: .releasing)
            let bound = channel.localAddress?.port ?? port
            logger.info("Admin HTTP server listening", metadata: ["admin.address": "\(host):\(bound)"])
            await onServerRunning(bound)
        }
    }
}
