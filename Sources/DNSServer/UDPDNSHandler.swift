import DNSWire
import Logging
import NIOCore
import Synchronization

/// State shared between a server's UDP handlers and its shutdown: whether new datagrams are still
/// taken, and how many queries wait for the responder.
final class UDPDrainState: Sendable {
    private let draining = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    /// Who waits for the last answer in flight once draining (`drained()`).
    private let waiters = Mutex<[CheckedContinuation<Void, Never>]>([])

    init() {}

    var isDraining: Bool { self.draining.load(ordering: .relaxed) }
    var queriesInFlight: Int { self.inFlight.load(ordering: .relaxed) }

    func startDraining() { self.draining.store(true, ordering: .sequentiallyConsistent) }
    func queryStarted() { self.inFlight.add(1, ordering: .relaxed) }
    func queryFinished() {
        let left = self.inFlight.subtract(1, ordering: .sequentiallyConsistent).newValue
        if left == 0, self.draining.load(ordering: .sequentiallyConsistent) { self.wakeWaiters() }
    }

    /// Returns once draining has started and no answer is in flight, or when cancelled.
    func drained() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                self.waiters.withLock { $0.append(continuation) }
                // Checked after registering, so that a last answer finishing meanwhile is not missed.
                if (self.isDraining && self.queriesInFlight == 0) || Task.isCancelled { self.wakeWaiters() }
            }
        } onCancel: {
            self.wakeWaiters()
        }
    }

    private func wakeWaiters() {
        let waiting = self.waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return waiters
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// Hands each datagram to the responder and sends the answer back to its sender. Answers given
/// synchronously during `channelRead` are written and flushed in batches of `writeBatch` and
/// at `channelReadComplete`; later ones hop to the event loop and are flushed at once.
final class UDPDNSHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let responder: any DNSResponder
    private let counters: DNSServerCounters
    private let drain: UDPDrainState
    private let maxDatagramSize: Int
    private let writeBatch: Int
    private let replays: ReplayCaches?
    private let logger: Logger
    /// This loop's replay cache, once added to a pipeline.
    private var replayCache: ReplayCache?
    /// Where replayed answers are copied to: twice the answers that can wait unflushed, so a
    /// slot comes round again only after the flush that sent its last reply.
    private var replies: ReplyBufferRing
    private var allocator = ByteBufferAllocator()
    /// The time taken once per read burst for the replay cache's expiry checks: a burst
    /// lasts well under a millisecond, and a clock read per datagram showed in the profile.
    private var burstStart: NIODeadline = .distantPast

    private var loopBound: NIOLoopBound<(UDPDNSHandler, ChannelHandlerContext)>?
    private var inReadBurst = false
    /// Answers written but not yet flushed in this read burst.
    private var unflushed = 0
    private var isActive = true

    init(
        responder: any DNSResponder,
        counters: DNSServerCounters,
        drain: UDPDrainState,
        maxDatagramSize: Int,
        writeBatch: Int = 16,
        replays: ReplayCaches? = nil,
        logger: Logger = Logger(label: "dns.server")
    ) {
        self.responder = responder
        self.counters = counters
        self.drain = drain
        self.maxDatagramSize = maxDatagramSize
        self.writeBatch = max(1, writeBatch)
        self.replies = ReplyBufferRing(slots: 2 * self.writeBatch)
        self.replays = replays
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.replayCache = self.replays?.cache(for: context.eventLoop)
        self.allocator = context.channel.allocator
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
        if !self.inReadBurst {
            self.inReadBurst = true
            self.burstStart = .now()
        }
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
        self.counters.queryReceived(over: .udp)
        let remote = envelope.remoteAddress
        let clientKey = ReplayCache.ClientKey(remote)
        if let cache = self.replayCache,
            let answer = envelope.data.withUnsafeReadableBytes({ query in
                cache.withAnswer(to: query, client: clientKey, transport: .udp, now: self.burstStart) {
                    self.replies.reply(
                        copying: $0, id: query.loadUnaligned(as: UInt16.self).bigEndian, allocator: self.allocator)
                }
            })
        {
            self.write(answer, to: remote, context: context)
            return
        }
        guard let loopBound = self.loopBound else { return }
        self.drain.queryStarted()

        let query = Array(envelope.data.readableBytesView)
        let client = DNSClient(remote, transport: .udp)
        let eventLoop = context.eventLoop
        self.responder.handle(query: query, from: client) { (answer: DNSAnswer) in
            if eventLoop.inEventLoop {
                let (handler, context) = loopBound.value
                handler.send(answer, for: query, client: clientKey, to: remote, context: context)
            } else {
                eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.send(answer, for: query, client: clientKey, to: remote, context: context)
                }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        if self.unflushed > 0 {
            self.unflushed = 0
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP errors (ECONNREFUSED) and failed sends concern one client: keep the socket open.
        self.logger.debug("UDP socket error", metadata: ["error": "\(error)"])
    }

    private func send(
        _ answer: DNSAnswer, for query: [UInt8], client: ReplayCache.ClientKey, to remote: SocketAddress,
        context: ChannelHandlerContext
    ) {
        self.drain.queryFinished()
        guard let bytes = answer.bytes else {
            self.counters.update { $0.queriesUnanswered += 1 }
            return
        }
        let buffer = context.channel.allocator.buffer(bytes: bytes)
        if let replay = answer.replay, let cache = self.replayCache {
            query.withUnsafeBytes {
                cache.remember(buffer, replay: replay, query: $0, client: client, transport: .udp, now: .now())
            }
        }
        self.write(buffer, to: remote, context: context)
    }

    private func write(_ buffer: ByteBuffer, to remote: SocketAddress, context: ChannelHandlerContext) {
        guard self.isActive, context.channel.isActive else { return }
        // NIOAny from the concrete envelope: `Self.wrapOutboundOut` goes through NIO's generic
        // `NIOAny.init`, with dynamic casts, and this runs once per answer.
        context.write(NIOAny(AddressedEnvelope(remoteAddress: remote, data: buffer)), promise: nil)
        self.counters.udpAnswersSent.add(1, ordering: .relaxed)
        if self.inReadBurst {
            self.unflushed += 1
            guard self.unflushed >= self.writeBatch else { return }
            self.unflushed = 0
        }
        context.flush()
    }
}

@available(*, unavailable)
extension UDPDNSHandler: Sendable {}
