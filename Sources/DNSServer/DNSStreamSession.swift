import DNSWire
import NIOCore
import NIOPosix

/// A stateful session on one stream connection (RFC 8490 DSO). The front end knows only
/// that DSO messages (OPCODE 6) go to the session; what they mean is the responder's business.
public protocol DNSStreamSession: Sendable {
    /// A DSO message, in arrival order.
    func receive(_ message: [UInt8])
    /// An ordinary query on the same connection (answered by the responder as usual).
    func noteQuery(_ message: [UInt8])
    /// The connection is gone; called once.
    func connectionClosed()
    /// The server is shutting down: say goodbye (RFC 8490 §7.2 Retry Delay) and close the
    /// connection through `DNSStreamConnection.close`.
    func serverShuttingDown()
}

/// A responder that also holds DSO sessions. Without it, DSO messages go to `handle` like any
/// query (and get NOTIMP there).
public protocol DNSSessionResponder: DNSResponder {
    /// Called for the first DSO message of a connection; that message is then passed to the
    /// session's `receive`. The connection's RFC 7766 idle timer stops: the session's own
    /// timers (RFC 8490 §6) decide when it ends, through `connection.close`.
    func openSession(client: DNSClient, connection: DNSStreamConnection) -> any DNSStreamSession
}

/// The write side of a stream connection, for a session: whole messages (the 2-octet length
/// prefix is added by the pipeline). Calls may come from any thread; they are carried out on
/// the connection's event loop in the order made, never synchronously, so a caller may hold
/// its own lock.
public final class DNSStreamConnection: Sendable {
    private let eventLoop: any EventLoop
    private let handler: NIOLoopBound<(DSOSessionHandler, ChannelHandlerContext)>

    init(eventLoop: any EventLoop, handler: NIOLoopBound<(DSOSessionHandler, ChannelHandlerContext)>) {
        self.eventLoop = eventLoop
        self.handler = handler
    }

    public func send(_ message: [UInt8]) {
        let handler = self.handler
        eventLoop.execute {
            let (dso, context) = handler.value
            dso.sessionWrite(message, context: context)
        }
    }

    /// `abort`: reset the connection (SO_LINGER 0), as RFC 8490 §5.3 asks for fatal errors.
    public func close(abort: Bool) {
        let handler = self.handler
        eventLoop.execute {
            let (dso, context) = handler.value
            dso.sessionClose(abort: abort, context: context)
        }
    }

    /// After a Retry Delay (RFC 8490 §6.6.1): nothing more is read or written; the client has
    /// `grace` to close the connection, after which it is reset.
    public func awaitClose(within grace: Duration) {
        let handler = self.handler
        eventLoop.execute {
            let (dso, context) = handler.value
            dso.sessionAwaitClose(within: TimeAmount(grace), context: context)
        }
    }
}
