import HTTPTypes
public import Hummingbird
import NIOCore
public import Prometheus

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The admin routes:
///
/// - `GET /`: HTML status page.
/// - `GET /api/services`: the `AdminStatus` as JSON.
/// - `GET /healthz`: 200 `ok`, or 503 with one reason per line.
/// - `GET /metrics`: Prometheus text format of `registry`, after setting its level gauges from a snapshot.
/// - `POST /reload`: `source.reload()`; 200 `reloaded` (then a line per changed key that waits
///   for a restart), or 400 with one error per line.
///
/// Call once per registry (it creates the snapshot gauges through `ScrapeGauges`).
public func buildAdminRouter(
    source: some AdminStatusSource,
    registry: PrometheusCollectorRegistry
) -> Router<BasicRequestContext> {
    let gauges = ScrapeGauges(registry: registry)
    let router = Router(context: BasicRequestContext.self)

    router.get("/") { _, _ -> Response in
        AdminResponse.text(StatusPage.render(source.adminStatus()), contentType: "text/html; charset=utf-8")
    }

    router.get("/api/services") { _, _ -> Response in
        let data = try source.adminStatus().jsonData()
        return AdminResponse.bytes(data, contentType: "application/json; charset=utf-8")
    }

    router.get("/healthz") { _, _ -> Response in
        let health = source.adminStatus().health
        if health.ok {
            return AdminResponse.text("ok\n")
        }
        let reasons = health.reasons.isEmpty ? ["not ready"] : health.reasons
        return AdminResponse.text(reasons.joined(separator: "\n") + "\n", status: .serviceUnavailable)
    }

    router.get("/metrics") { _, _ -> Response in
        gauges.update(from: source.adminStatus())
        return AdminResponse.bytes(
            MetricHelp.annotate(registry.emitToBuffer()), contentType: "text/plain; version=0.0.4; charset=utf-8")
    }

    router.post("/reload") { request, _ -> Response in
        // A web page elsewhere must not make the operator's browser trigger a reload.
        if let origin = request.headers[.origin], origin != "http://\(request.head.authority ?? "")" {
            return AdminResponse.text("cross-origin request refused\n", status: .forbidden)
        }
        switch await source.reload() {
        case .applied(let waiting):
            return AdminResponse.text((["reloaded"] + waiting).joined(separator: "\n") + "\n")
        case .failed(let errors):
            let lines = errors.isEmpty ? ["reload failed"] : errors
            return AdminResponse.text(lines.joined(separator: "\n") + "\n", status: .badRequest)
        }
    }

    return router
}

enum AdminResponse {
    static func text(
        _ text: String,
        status: HTTPResponse.Status = .ok,
        contentType: String = "text/plain; charset=utf-8"
    ) -> Response {
        Self.buffer(ByteBuffer(string: text), status: status, contentType: contentType)
    }

    static func bytes(_ bytes: some Sequence<UInt8>, contentType: String) -> Response {
        Self.buffer(ByteBuffer(bytes: bytes), status: .ok, contentType: contentType)
    }

    private static func buffer(_ buffer: ByteBuffer, status: HTTPResponse.Status, contentType: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: contentType, .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: buffer)
        )
    }
}
