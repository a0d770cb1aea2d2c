import DNSWire
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import DNSServer

/// A responder holding DSO sessions that records what its session saw, and keeps the
/// connection so a test can write and close through it.
final class FakeSessionResponder: DNSSessionResponder, Sendable {
    final class Session: DNSStreamSession, Sendable {
        let log = Mutex<[String]>([])
        let connection: DNSStreamConnection
        init(connection: DNSStreamConnection) { self.connection = connection }
        func receive(_ message: [UInt8]) { log.withLock { $0.append("dso \(message[1])") } }
        func noteQuery(_ message: [UInt8]) { log.withLock { $0.append("query \(message[1])") } }
        func connectionClosed() { log.withLock { $0.append("closed") } }
        func serverShuttingDown() {
            log.withLock { $0.append("shutdown") }
            connection.send([0, 99] + [UInt8](repeating: 0, count: 10))
            connection.close(abort: false)
        }
    }

    let plain = FakeResponder()
    let sessions = Mutex<[Session]>([])

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        plain.handle(query: query, from: client, answer: answer)
    }

    func openSession(client: DNSClient, connection: DNSStreamConnection) -> any DNSStreamSession {
        let session = Session(connection: connection)
        sessions.withLock { $0.append(session) }
        return session
    }
}

/// RFC 8490: DSO messages go to the connection's session, ordinary queries to the responder;
/// the session's goodbye at shutdown goes out before the connection closes.
@Suite struct DSOSessionHandlerTests {
    /// A DSO message header (OPCODE 6) with `tag` as the second ID byte.
    func dso(_ tag: UInt8) -> [UInt8] { [0, tag, 6 << 3, 0] + [UInt8](repeating: 0, count: 8) }

    @Test func routesDSOToTheSessionAndQueriesToTheResponder() throws {
        let responder = FakeSessionResponder()
        let channel = EmbeddedChannel()
        let counters = DNSServerCounters()
        try DNSServer.addTCPHandlers(
            to: channel.pipeline.syncOperations, responder: responder, counters: counters,
            registry: TCPConnectionRegistry(maxTotal: 10, maxPerClient: 10), configuration: DNSServerConfiguration())
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 40000)).wait()

        let query: [UInt8] = [FakeResponder.fast, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        try channel.writeInbound(ByteBuffer(bytes: framed(query)))
        #expect(responder.sessions.withLock { $0.isEmpty }, "no session before a DSO message")
        try channel.writeInbound(ByteBuffer(bytes: framed(dso(1)) + framed(query) + framed(dso(2))))
        let session = try #require(responder.sessions.withLock { $0.first })
        #expect(session.log.withLock { $0 } == ["dso 1", "query 7", "dso 2"])
        #expect(responder.plain.receivedQueries == [query, query], "DSO never reaches the responder")
        #expect(counters.snapshot().tcpQueriesReceived == 4)

        // Shutdown: the session says goodbye and closes; its message is written first.
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        channel.embeddedEventLoop.run()
        var written: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
        #expect(unframe(written).last?.prefix(2) == [0, 99])
        #expect(!channel.isActive)
        #expect(session.log.withLock { $0 }.suffix(2) == ["shutdown", "closed"])
        #expect(counters.snapshot().tcp.closedShutdown == 1)
        _ = try? channel.finish()
    }
}
