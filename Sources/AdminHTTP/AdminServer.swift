import Hummingbird
public import Logging
import NIOCore
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

struct AdminServer: Service, CustomStringConvertible {
    private final class Listening: Sendable {
        let value = Atomic<Bool>(false)
    }

    let host: String
    let port: Int
    let application: Application<RouterResponder<BasicRequestContext>>
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
        let listening = self.listening
        self.application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                listening.value.store(true, ordering: .releasing)
                let bound = channel.localAddress?.port ?? port
                logger.info(
                    "Admin HTTP server listening",
                    metadata: ["admin.address": "\(host):\(bound)"]
                )
                await onServerRunning(bound)
            },
            logger: logger
        )
    }

    var description: String { "AdminHTTPServer(\(self.host):\(self.port))" }

    func run() async throws {
        do {
            try await self.application.run()
        } catch {
            if !self.listening.value.load(ordering: .acquiring), !(error is CancellationError) {
                throw AdminServerError(host: self.host, port: self.port, underlying: error)
            }
            throw error
        }
    }
}
