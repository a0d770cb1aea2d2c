import DNSWire
import Logging
import NIOCore
import NIOExtras
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One DNS-over-TCP connection (RFC 7766), placed after
/// `ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes))` and
/// `LengthFieldPrepender(lengthFieldBitLength: .twoBytes)`: it reads whole messages and writes
/// whole answers.
///
/// - Every query is handed to the responder as soon as it is read, up to
///   `maxInFlightPerConnection` at once; answers are written in the order they complete.
///   At the cap, queries already read wait here and the handler holds back `read()`.
/// - The idle timer runs only while no query is in flight, from the last complete message or
///   answer; partial messages do not reset it (§6.2.3). A zero-length message is dropped.
/// - After the client's half-close (or a graceful shutdown, or at `tcpMaxConnectionLifetime`)
///   the connection answers what it has and then closes. Nothing is written once the channel is
///   closing or closed (§6.2.4).
/// - Each query tells the responder the idle timeout to announce to a client that asks
///   (RFC 7828, `DNSClient.tcpIdleTimeout`): 0 while the server is short of connections, and
///   such a connection then closes as soon as it is idle.
final class TCPDNSHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = Never
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let responder: any DNSResponder
    private let counters: DNSServerCounters
    private let registry: TCPConnectionRegistry
    private let idleTimeout: Duration
    private let lifetime: Duration?
    private let replays: ReplayCaches?
    private var logger: Logger
    /// This loop's replay cache (shared with the loop's other connections and UDP).
    private var replayCache: ReplayCache?
    private var clientKey = ReplayCache.ClientKey.other

    /// Admission, pipelining, back-pressure, draining and closing (`TCPConnectionState`);
    /// this handler does the I/O they call for.
    private var connection: TCPConnectionState
    private var client = DNSClient(address: [], port: 0, transport: .tcp)
    private var dispatching = false

    private var inReadBurst = false
    private var needsFlush = false
    private var lastWrite: EventLoopFuture<Void>?

    private var idleTimer: Scheduled<Void>?
    private var idleGeneration: UInt64 = 0
    private var lifetimeTimer: Scheduled<Void>?
    private var openedAt = NIODeadline.uptimeNanoseconds(0)

    private var loopBound: NIOLoopBound<(TCPDNSHandler, ChannelHandlerContext)>?

    init(
        responder: any DNSResponder,
        counters: DNSServerCounters,
        registry: TCPConnectionRegistry,
        idleTimeout: Duration,
        lifetime: Duration? = nil,
        maxInFlight: Int,
        replays: ReplayCaches? = nil,
        logger: Logger
    ) {
        self.responder = responder
        self.counters = counters
        self.registry = registry
        self.idleTimeout = idleTimeout
        self.lifetime = lifetime
        self.connection = TCPConnectionState(maxInFlight: maxInFlight)
        self.replays = replays
        self.logger = logger
    }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            self.activate(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.cancelIdleTimer()
        self.cancelLifetimeTimer()
        self.loopBound = nil
        self.finish(context: context)
    }

    func channelActive(context: ChannelHandlerContext) {
        self.activate(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(context: context)
        context.fireChannelInactive()
    }

    private func activate(context: ChannelHandlerContext) {
        guard self.connection.phase == .initial else { return }
        self.client = DNSClient(context.channel.remoteAddress, transport: .tcp)
        self.clientKey = ReplayCache.ClientKey(context.channel.remoteAddress)
        self.replayCache = self.replays?.cache(for: context.eventLoop)
        self.logger[metadataKey: "dns.client"] = "\(self.client)"
        self.loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)

        let admission = self.registry.admit(context.channel, client: self.client.address)
        self.counters.connectionAccepted(admitted: admission == .admitted)
        if let refused = self.connection.activate(admission: admission) {
            self.logger.debug("closing TCP connection over limit", metadata: ["dns.limit": "\(admission)"])
            self.close(context: context, reason: refused)
            return
        }
        self.logger.debug("TCP connection accepted")
        self.armIdleTimer(context: context)
        self.armLifetimeTimer(context: context)
    }

    /// Runs once when the channel goes inactive or the handler is removed.
    private func finish(context: ChannelHandlerContext) {
        guard self.connection.phase != .closed else { return }
        let closed = self.connection.finish()
        self.cancelIdleTimer()
        self.cancelLifetimeTimer()
        guard let (reason, wasAdmitted) = closed else { return }  // never became active
        if wasAdmitted {
            self.registry.release(context.channel, client: self.client.address)
        }
        self.counters.connectionClosed(reason, wasOpen: wasAdmitted)
        self.logger.debug("TCP connection closed", metadata: ["dns.reason": "\(reason.rawValue)"])
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        guard self.connection.isWritable else { return }
        self.inReadBurst = true
        guard frame.readableBytes > 0 else {
            // A zero-length message: drop it, keep the connection. It does not reset the idle timer.
            self.counters.update { $0.malformedDropped += 1 }
            self.logger.debug("dropping zero-length TCP message")
            return
        }
        self.counters.queryReceived(over: .tcp)
        let message = Array(frame.readableBytesView)
        self.cancelIdleTimer()
        _ = self.connection.queryRead(message)
        self.dispatchWaiting(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        self.flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            self.logger.debug("TCP client closed its side")
            self.startDraining(context: context, reason: .client)
        } else if event is ChannelShouldQuiesceEvent {
            self.startDraining(context: context, reason: .shutdown)
        } else if let event = event as? DSOSessionEvent {
            self.sessionEvent(event, context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOExtrasErrors.LeftOverBytesError {
            // The client closed in the middle of a message; the close follows.
            self.logger.debug("TCP client closed mid-message")
            return
        }
        self.logger.debug("TCP connection error", metadata: ["error": "\(error)"])
        self.close(context: context, reason: .error)
    }

    // MARK: outbound

    func read(context: ChannelHandlerContext) {
        // At the in-flight cap, or when no more queries are wanted, the read waits (or never comes).
        if self.connection.readRequested() { context.read() }
    }

    // MARK: queries and answers

    private func dispatchWaiting(context: ChannelHandlerContext) {
        guard !self.dispatching else { return }
        self.dispatching = true
        var replayed = false
        while let query = self.connection.nextQuery() {
            if let cache = self.replayCache,
                let answer = query.withUnsafeBytes({
                    cache.answer(to: $0, client: self.clientKey, transport: .tcp, now: .now())
                })
            {
                self.write(answer, context: context)
                replayed = true
                continue
            }
            let id = self.connection.queryDispatched()
            var client = self.client
            client.tcpIdleTimeout = self.connection.idleTimeoutToAnnounce(
                configured: self.idleTimeout, shortOfConnections: self.registry.isShortOfConnections,
                lifetimeLeft: self.lifetime.map {
                    $0 - .nanoseconds((context.eventLoop.now - self.openedAt).nanoseconds)
                })
            self.responder.handle(
                query: query, from: client, answer: self.makeRespond(id: id, query: query, context: context))
        }
        self.dispatching = false
        if replayed, !self.connection.hasOutstandingQueries, self.connection.isOpen {
            self.armIdleTimer(context: context)
        }
        self.afterProgress(context: context)
    }

    private func makeRespond(
        id: UInt64, query: [UInt8], context: ChannelHandlerContext
    ) -> @Sendable (DNSAnswer) -> Void {
        guard let loopBound = self.loopBound else { return { _ in } }
        let eventLoop = context.eventLoop
        return { answer in
            if eventLoop.inEventLoop {
                let (handler, context) = loopBound.value
                handler.answered(id: id, answer: answer, query: query, context: context)
            } else {
                eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.answered(id: id, answer: answer, query: query, context: context)
                }
            }
        }
    }

    private func answered(id: UInt64, answer: DNSAnswer, query: [UInt8], context: ChannelHandlerContext) {
        guard self.connection.answered(id) else { return }  // late, duplicate, or connection gone
        if let bytes = answer.bytes {
            if bytes.count > Int(UInt16.max) {
                self.counters.update { $0.malformedDropped += 1 }
                self.logger.debug("dropping TCP answer too large to frame", metadata: ["dns.size": "\(bytes.count)"])
            } else {
                let buffer = context.channel.allocator.buffer(bytes: bytes)
                if let replay = answer.replay, let cache = self.replayCache {
                    query.withUnsafeBytes {
                        cache.remember(
                            buffer, replay: replay, query: $0, client: self.clientKey, transport: .tcp, now: .now())
                    }
                }
                self.write(buffer, context: context)
            }
        } else {
            self.counters.update { $0.queriesUnanswered += 1 }
        }
        if !self.connection.hasOutstandingQueries, self.connection.isOpen {
            self.armIdleTimer(context: context)
        }
        self.dispatchWaiting(context: context)
    }

    private func write(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        guard self.connection.isWritable, context.channel.isActive else { return }
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.write(Self.wrapOutboundOut(buffer), promise: promise)
        self.lastWrite = promise.futureResult
        self.needsFlush = true
        // Counted before the flush, so that a client holding the answer finds it counted.
        self.counters.tcpAnswersSent.add(1, ordering: .relaxed)
        if !self.inReadBurst {
            self.flushIfNeeded(context: context)
        }
    }

    /// After queries were dispatched or answered: close a draining connection that is done,
    /// resume reading below the cap.
    private func afterProgress(context: ChannelHandlerContext) {
        switch self.connection.afterProgress() {
        case .none: break
        case .resumeReading: context.read()
        case .close(let reason): self.close(context: context, reason: reason)
        }
    }

    private func startDraining(context: ChannelHandlerContext, reason: TCPCloseReason) {
        if self.connection.startDraining(reason) {
            self.cancelIdleTimer()
            self.afterProgress(context: context)
        }
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
    }

    private func close(context: ChannelHandlerContext, reason: TCPCloseReason) {
        guard self.connection.close(reason) else { return }
        self.cancelIdleTimer()
        self.flushIfNeeded(context: context)
        if let lastWrite = self.lastWrite, let loopBound = self.loopBound {
            // Let the last answers reach the socket before closing it.
            lastWrite.whenComplete { _ in
                loopBound.value.1.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: DSO session

    private func sessionEvent(_ event: DSOSessionEvent, context: ChannelHandlerContext) {
        switch event {
        case .opened:
            self.connection.sessionOpened()
            self.cancelIdleTimer()
            self.cancelLifetimeTimer()
        case .shuttingDown:
            self.connection.noteCloseReason(.shutdown)
        case .close(let abort, let after):
            if abort {
                // Only what is already flushed goes out (the session set SO_LINGER 0).
                self.flushIfNeeded(context: context)
                self.lastWrite = nil
            } else if let after {
                // Close once the session's last message and this handler's last answer are out.
                self.lastWrite =
                    self.lastWrite.map { EventLoopFuture.andAllComplete([$0, after], on: context.eventLoop) }
                    ?? after
            }
            self.close(context: context, reason: abort ? .error : (self.connection.closeReason ?? .client))
        }
    }

    // MARK: idle timer

    private func armIdleTimer(context: ChannelHandlerContext) {
        self.cancelIdleTimer()
        guard !self.connection.hasSession else { return }  // the DSO session's timers rule now
        self.idleGeneration &+= 1
        let generation = self.idleGeneration
        let timeout = self.connection.closesWhenIdle ? .zero : TimeAmount(self.idleTimeout)
        self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.idleTimerFired(generation: generation, context: context)
        }
    }

    private func cancelIdleTimer() {
        self.idleGeneration &+= 1
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    private func idleTimerFired(generation: UInt64, context: ChannelHandlerContext) {
        guard generation == self.idleGeneration, self.connection.mayCloseIdle else { return }
        self.idleTimer = nil
        self.logger.debug("closing idle TCP connection")
        self.close(context: context, reason: .idle)
    }

    // MARK: lifetime

    private func armLifetimeTimer(context: ChannelHandlerContext) {
        guard let lifetime = self.lifetime else { return }
        self.openedAt = context.eventLoop.now
        self.lifetimeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(lifetime)) {
            self.lifetimeTimer = nil
            guard !self.connection.hasSession else { return }
            self.logger.debug("TCP connection reached its lifetime; answering what it has, then closing")
            self.startDraining(context: context, reason: .lifetime)
        }
    }

    private func cancelLifetimeTimer() {
        self.lifetimeTimer?.cancel()
        self.lifetimeTimer = nil
    }
}

@available(*, unavailable)
extension TCPDNSHandler: Sendable {}
