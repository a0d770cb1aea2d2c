import DNSWire
import Dispatch
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Synchronization

/// How a DNS Push client checks the server's certificate.
public enum PushTrust: Sendable, Equatable {
    /// The system's trust store, and the certificate must name the SRV target.
    case system
    /// Trust this PEM file (a CA, or the server's own self-signed certificate); name checked.
    case file(String)
    /// No verification at all (tests, labs; anyone on the path can impersonate the server).
    case insecure
}

/// A DNS Push (RFC 8765) subscriber over DSO on TLS: connects, subscribes to each question,
/// and hands every PUSH change to `onChange` until `stop()` or the connection ends.
public final class PushWatch: Sendable {
    private let channel: any Channel
    private let done = DispatchSemaphore(value: 0)

    /// Connects and subscribes; returns once every SUBSCRIBE got NOERROR. Throws a one-line
    /// error (connection, TLS, or the server's RCODE) so the caller can fall back to polling.
    public init(
        host: String, port: Int, serverName: String, trust: PushTrust, questions: [Question], timeout: Double,
        onChange: @escaping @Sendable (PushChange) -> Void
    ) throws(DNSSDError) {
        let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var tls = TLSConfiguration.makeClientConfiguration()
        switch trust {
        case .system: break
        case .file(let path):
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
            } catch {
                throw .system("cannot read the certificate file \(path): \(error)")
            }
        case .insecure:
            tls.certificateVerification = .none
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw .system("TLS: \(error)")
        }
        let responses = PushResponses(expected: questions.count)
        let finished = done
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(timeout * 1000)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                    try sync.addHandler(
                        ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes)))
                    try sync.addHandler(LengthFieldPrepender(lengthFieldBitLength: .twoBytes))
                    try sync.addHandler(
                        PushClientHandler(responses: responses, onChange: onChange, onClose: { finished.signal() }))
                }
            }
        do {
            channel = try bootstrap.connect(host: host, port: port).wait()
        } catch {
            throw .unreachable(server: shown, reason: "\(error)")
        }
        for (index, question) in questions.enumerated() {
            let subscribe = PushSubscribe(name: question.name, type: question.type, rrClass: question.qclass)
            let message = DSOMessage(id: UInt16(index + 1), tlvs: [subscribe.tlv]).encode()
            channel.writeAndFlush(channel.allocator.buffer(bytes: message), promise: nil)
        }
        guard responses.wait(seconds: timeout) else {
            channel.close(promise: nil)
            throw .timeout(server: shown, seconds: timeout, transport: "tls")
        }
        switch responses.failure {
        case nil: break
        case .rcode(let rcode)?:
            channel.close(promise: nil)
            throw .errorRCode(server: shown, qname: "\(questions[0].name)", rcode: rcode)
        case .closed(let why)?:
            channel.close(promise: nil)
            throw .unreachable(server: shown, reason: why)
        }
    }

    /// Blocks until the connection ends or `seconds` pass (nil: forever), sending a Keepalive
    /// request every 30 s (RFC 8490 §6.5: the server ends silent sessions).
    /// Returns false when the server closed the session.
    public func wait(seconds: Double?) -> Bool {
        let start = DispatchTime.now()
        var id: UInt16 = 1000
        while true {
            var slice = 30.0
            if let seconds {
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
                if elapsed >= seconds { return true }
                slice = min(slice, seconds - elapsed)
            }
            if done.wait(timeout: .now() + slice) == .success { return false }
            id = id == UInt16.max ? 1000 : id + 1
            let keepalive = DSOMessage(
                id: id, tlvs: [.keepalive(inactivityMilliseconds: 15000, keepaliveMilliseconds: 60000)])
            channel.writeAndFlush(channel.allocator.buffer(bytes: keepalive.encode()), promise: nil)
        }
    }

    public func stop() {
        channel.close(promise: nil)
    }
}

/// The SUBSCRIBE responses, counted until all have arrived.
private final class PushResponses: Sendable {
    enum Failure: Sendable {
        /// A SUBSCRIBE was answered with this rcode.
        case rcode(String)
        /// The connection ended first, for this reason.
        case closed(String)
    }

    private let state: Mutex<(left: Int, failure: Failure?)>
    private let ready = DispatchSemaphore(value: 0)

    init(expected: Int) { state = Mutex((expected, nil)) }

    func record(_ rcode: RCode) {
        let complete = state.withLock { state -> Bool in
            guard state.left > 0 else { return false }
            state.left -= 1
            if rcode != .noError, state.failure == nil {
                state.failure = .rcode(rcode == .notAuth ? "NOTAUTH" : "\(rcode)")
            }
            return state.left == 0
        }
        if complete { ready.signal() }
    }

    /// The connection ended before every response; `why` says how when an error ended it.
    func closedEarly(_ why: String? = nil) {
        let open = state.withLock { state -> Bool in
            guard state.left > 0 else { return false }
            state.left = 0
            state.failure = .closed(why ?? "the server closed the connection before answering")
            return true
        }
        if open { ready.signal() }
    }

    func wait(seconds: Double) -> Bool { ready.wait(timeout: .now() + seconds) == .success }
    var failure: Failure? { state.withLock { $0.failure } }
}

private final class PushClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let responses: PushResponses
    let onChange: @Sendable (PushChange) -> Void
    let onClose: @Sendable () -> Void

    init(
        responses: PushResponses, onChange: @escaping @Sendable (PushChange) -> Void,
        onClose: @escaping @Sendable () -> Void
    ) {
        self.responses = responses
        self.onChange = onChange
        self.onClose = onClose
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(Self.unwrapInboundIn(data).readableBytesView)
        guard let message = try? DSOMessage(wire: bytes) else { return }
        if message.isResponse {
            if message.id < 1000 { responses.record(message.rcode) }  // Keepalive responses: ignored
            return
        }
        guard message.isUnidirectional, let primary = message.primary, primary.type == DSOTLV.pushType,
            let push = try? PushNotification(tlv: primary)
        else { return }
        push.changes.forEach(onChange)
    }

    func channelInactive(context: ChannelHandlerContext) {
        responses.closedEarly()
        onClose()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        responses.closedEarly(Self.explain(error))
        context.close(promise: nil)
    }

    /// The TLS failures a user can fix, said with the fix.
    static func explain(_ error: any Error) -> String {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "its TLS certificate is not valid for the server's name (the SRV target of _dns-push-tls._tcp)"
        }
        let text = "\(error)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "its TLS certificate is not trusted (self-signed?): trust it with --push-ca FILE, giving the "
                + "proxy's push-tls-cert.pem (in its state directory, /var/lib/discovery-proxy by default) or its CA"
        }
        return "TLS failed: \(text)"
    }
}
