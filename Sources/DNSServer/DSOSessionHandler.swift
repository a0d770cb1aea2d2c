import DNSWire
import Logging
import NIOCore
import NIOExtras

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Routes a stream connection's DSO messages (RFC 8490, OPCODE 6) to a session of the
/// responder, and writes the session's messages. It sits between the framing and
/// `TCPDNSHandler`, to which ordinary queries pass on. From the first DSO message the session
/// owns the connection's end: `TCPDNSHandler` stops its RFC 7766 idle timer, shutdown becomes
/// the session's Retry Delay, and the session closes the connection (`DSOSessionEvent`).
final class DSOSessionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let responder: any DNSSessionResponder
    private let counters: DNSServerCounters
    private var session: (any DNSStreamSession)?
    private var loopBound: NIOLoopBound<(DSOSessionHandler, ChannelHandlerContext)>?
    private var inReadBurst = false
    private var needsFlush = false
    private var lastWrite: EventLoopFuture<Void>?
    /// The session asked to close; nothing more is read or written for it.
    private var closing = false

    init(responder: any DNSSessionResponder, counters: DNSServerCounters) {
        self.responder = responder
        self.counters = counters
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.loopBound = nil
        self.sessionEnded()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.sessionEnded()
        context.fireChannelInactive()
    }

    private func sessionEnded() {
        self.session?.connectionClosed()
        self.session = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        // Read in place: every query on the connection passes this check.
        let isDSO =
            frame.readableBytes >= 12
            && (frame.getInteger(at: frame.readerIndex + 2, as: UInt8.self)! >> 3) & 0x0F == 6
        guard isDSO || self.session != nil else {
            context.fireChannelRead(data)
            return
        }
        guard !self.closing else { return }
        let message = Array(frame.readableBytesView)
        guard isDSO else {
            // An ordinary query on a session's connection: answered as usual.
            self.session?.noteQuery(message)
            context.fireChannelRead(data)
            return
        }
        self.inReadBurst = true
        self.counters.queryReceived(over: .tcp)
        self.openSession(context: context).receive(message)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        self.flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, let session = self.session {
            // The session sends its Retry Delay and closes; queued writes stay in order.
            context.fireUserInboundEventTriggered(DSOSessionEvent.shuttingDown)
            session.serverShuttingDown()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func openSession(context: ChannelHandlerContext) -> any DNSStreamSession {
        if let session = self.session { return session }
        context.fireUserInboundEventTriggered(DSOSessionEvent.opened)
        let client = DNSClient(context.channel.remoteAddress, transport: .tcp)
        let session = self.responder.openSession(
            client: client, connection: DNSStreamConnection(eventLoop: context.eventLoop, handler: self.loopBound!))
        self.session = session
        return session
    }

    /// A message from the session (a response or a PUSH).
    func sessionWrite(_ message: [UInt8], context: ChannelHandlerContext) {
        guard !self.closing, context.channel.isActive, message.count <= Int(UInt16.max) else { return }
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.write(Self.wrapOutboundOut(context.channel.allocator.buffer(bytes: message)), promise: promise)
        self.lastWrite = promise.futureResult
        self.needsFlush = true
        if !self.inReadBurst { self.flushIfNeeded(context: context) }
    }

    func sessionClose(abort: Bool, context: ChannelHandlerContext) {
        guard !self.closing else { return }
        self.closing = true
        self.close(abort: abort, context: context)
    }

    /// The client was told to go away (a Retry Delay): it closes the connection itself, or
    /// after `grace` it is reset (RFC 8490 §6.6.1). Its own close ends the channel as usual.
    func sessionAwaitClose(within grace: TimeAmount, context: ChannelHandlerContext) {
        guard !self.closing else { return }
        self.closing = true
        self.flushIfNeeded(context: context)
        context.eventLoop.assumeIsolated().scheduleTask(in: grace) {
            // Still in the pipeline while the channel is active.
            guard context.channel.isActive else { return }
            self.close(abort: true, context: context)
        }
    }

    private func close(abort: Bool, context: ChannelHandlerContext) {
        self.flushIfNeeded(context: context)
        if abort {
            // RST rather than FIN (RFC 8490 §5.3); only what is already flushed goes out.
            _ = (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
        }
        context.fireUserInboundEventTriggered(DSOSessionEvent.close(abort: abort, after: abort ? nil : self.lastWrite))
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
    }
}

@available(*, unavailable)
extension DSOSessionHandler: Sendable {}

/// What `DSOSessionHandler` tells `TCPDNSHandler` about the connection's session.
enum DSOSessionEvent {
    /// A session took the connection: the RFC 7766 idle timer stops for good.
    case opened
    /// Shutdown reached the session, which says goodbye and closes the connection.
    case shuttingDown
    /// The session closes the connection, after `after` (its last write) unless `abort`.
    case close(abort: Bool, after: EventLoopFuture<Void>?)
}
