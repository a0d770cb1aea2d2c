import Logging
import NIOCore
import Synchronization

/// State shared between a server's UDP handlers and its shutdown: whether new datagrams are still
/// taken, and how many queries wait for the responder.
final class UDPDrainState: Sendable {
    private let draining = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)

    init() {}

    var isDraining: Bool { self.draining.load(ordering: .relaxed) }
    var queriesInFlight: Int { self.inFlight.load(ordering: .relaxed) }

    func startDraining() { self.draining.store(true, ordering: .relaxed) }
    func queryStarted() { self.inFlight.add(1, ordering: .relaxed) }
    func queryFinished() { self.inFlight.subtract(1, ordering: .relaxed) }
}

/// Hands each datagram to the responder and sends the answer back to its sender. Answers given
/// synchronously during `channelRead` are written and flushed once in `channelReadComplete`;
/// later ones hop to the event loop and are flushed at once.
final class UDPDNSHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let responder: any DNSResponder
    private let counters: DNSServerCounters
    private let drain: UDPDrainState
    private let maxDatagramSize: Int
    private let logger: Logger

    private var loopBound: NIOLoopBound<(UDPDNSHandler, ChannelHandlerContext)>?
    private var inReadBurst = false
    private var needsFlush = false
    private var isActive = true

    init(
        responder: any DNSResponder,
        counters: DNSServerCounters,
        drain: UDPDrainState,
        maxDatagramSize: Int,
        logger: Logger = Logger(label: "dns.server")
    ) {
        self.responder = responder
        self.counters = counters
        self.drain = drain
        self.maxDatagramSize = maxDatagramSize
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.isActive = false
        self.loopBound = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isActive = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        self.inReadBurst = true
        guard envelope.data.readableBytes <= self.maxDatagramSize else {
            // The receive slot is one byte larger than the limit, so a full slot was cut short.
            self.counters.update { $0.malformedDropped += 1 }
            self.logger.debug(
                "dropping oversized UDP datagram",
                metadata: ["dns.client": "\(envelope.remoteAddress)", "dns.size": "\(envelope.data.readableBytes)"]
            )
            return
        }
        guard !self.drain.isDraining else {
            self.counters.update { $0.udpDroppedShuttingDown += 1 }
            return
        }
        guard let loopBound = self.loopBound else { return }
        self.counters.update { $0.udpQueriesReceived += 1 }
        self.drain.queryStarted()

        let query = Array(envelope.data.readableBytesView)
        let remote = envelope.remoteAddress
        let client = DNSClient(remote, transport: .udp)
        let eventLoop = context.eventLoop
        self.responder.handle(query: query, from: client) { answer in
            if eventLoop.inEventLoop {
                let (handler, context) = loopBound.value
                handler.send(answer, to: remote, context: context)
            } else {
                eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.send(answer, to: remote, context: context)
                }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP errors (ECONNREFUSED) and failed sends concern one client: keep the socket open.
        self.logger.debug("UDP socket error", metadata: ["error": "\(error)"])
    }

    private func send(_ answer: [UInt8]?, to remote: SocketAddress, context: ChannelHandlerContext) {
        self.drain.queryFinished()
        guard let answer else {
            self.counters.update { $0.queriesUnanswered += 1 }
            return
        }
        guard self.isActive, context.channel.isActive else { return }
        let buffer = context.channel.allocator.buffer(bytes: answer)
        context.write(Self.wrapOutboundOut(AddressedEnvelope(remoteAddress: remote, data: buffer)), promise: nil)
        self.counters.update { $0.udpAnswersSent += 1 }
        if self.inReadBurst {
            self.needsFlush = true
        } else {
            context.flush()
        }
    }
}

@available(*, unavailable)
extension UDPDNSHandler: Sendable {}
