import DNSWire
import NIOCore
import NIOEmbedded
import Testing

@testable import DNSServer

/// Counts `read()` calls that reach the front of the pipeline (the socket).
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    var reads = 0

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }
}

/// The real per-connection pipeline on an EmbeddedChannel, with a fake responder.
final class TCPHarness {
    let channel = EmbeddedChannel()
    let responder = FakeResponder()
    let counters: DNSServerCounters
    let registry: TCPConnectionRegistry
    let readCounter = ReadCounter()
    private var received: [UInt8] = []
    private var consumed = 0

    init(
        configuration: DNSServerConfiguration = DNSServerConfiguration(),
        counters: DNSServerCounters = DNSServerCounters(),
        registry: TCPConnectionRegistry? = nil,
        remote: SocketAddress? = nil
    ) throws {
        self.counters = counters
        self.registry =
            registry
            ?? TCPConnectionRegistry(
                maxTotal: configuration.maxTCPConnections,
                maxPerClient: configuration.maxTCPConnectionsPerClient,
                maxPerSubnet: configuration.effectiveMaxTCPConnectionsPerSubnet
            )
        try self.channel.pipeline.syncOperations.addHandler(self.readCounter)
        try DNSServer.addTCPHandlers(
            to: self.channel.pipeline.syncOperations,
            responder: self.responder,
            counters: self.counters,
            registry: self.registry,
            configuration: configuration
        )
        let remote = try remote ?? SocketAddress(ipAddress: "192.0.2.7", port: 40000)
        try self.channel.connect(to: remote).wait()
    }

    func send(_ bytes: [UInt8]) throws {
        try self.channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    func sendMessage(_ message: [UInt8]) throws {
        try self.send(framed(message))
    }

    /// Answers written since the last call, unframed.
    func answers() throws -> [[UInt8]] {
        while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
            self.received += buffer.readableBytesView
        }
        let messages = unframe(Array(self.received[self.consumed...]))
        self.consumed += messages.reduce(0) { $0 + 2 + $1.count }
        return messages
    }

    var isOpen: Bool { self.channel.isActive }

    func advance(seconds: Int64) {
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(seconds))
    }

    func finish() {
        _ = try? self.channel.finish()
    }
}

@Suite struct TCPDNSHandlerTests {
    @Test func messageDrippedOneByteAtATimeIsAnswered() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        let query: [UInt8] = [FakeResponder.fast, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        let bytes = framed(query)
        for byte in bytes.dropLast() {
            try h.send([byte])
            #expect(h.responder.receivedQueries.isEmpty)
            #expect(try h.answers().isEmpty)
            #expect(h.isOpen)
        }
        try h.send([bytes.last!])
        #expect(h.responder.receivedQueries == [query])
        #expect(try h.answers() == [FakeResponder.answer(for: query)])
        #expect(h.counters.snapshot().tcpQueriesReceived == 1)
        #expect(h.counters.snapshot().tcpAnswersSent == 1)
    }

    @Test func pipelinedQueriesAreAnsweredAsTheyComplete() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        let slow: [UInt8] = [FakeResponder.slow, 1]
        let fast: [UInt8] = [FakeResponder.fast, 2]
        let slow2: [UInt8] = [FakeResponder.slow, 3]
        // All three in one read: all go to the responder at once.
        try h.send(framed(slow) + framed(fast) + framed(slow2))
        #expect(h.responder.receivedQueries == [slow, fast, slow2])
        #expect(try h.answers() == [FakeResponder.answer(for: fast)])
        // The later slow query finishes first.
        #expect(h.responder.complete(tag: 3))
        #expect(try h.answers() == [FakeResponder.answer(for: slow2)])
        #expect(h.responder.complete(tag: 1))
        #expect(try h.answers() == [FakeResponder.answer(for: slow)])
        #expect(h.isOpen)
    }

    @Test func clientAddressIsPassedToResponder() throws {
        let h = try TCPHarness(remote: SocketAddress(ipAddress: "::ffff:198.51.100.9", port: 1234))
        defer { h.finish() }
        try h.sendMessage([FakeResponder.fast, 1])
        #expect(
            h.responder.receivedClients.first?.address == [198, 51, 100, 9]
        )
        #expect(h.responder.receivedClients.first?.port == 1234)
        #expect(h.responder.receivedClients.first?.transport == .tcp)
    }

    @Test func inFlightCapHoldsReadsInsteadOfClosing() throws {
        var config = DNSServerConfiguration()
        config.maxInFlightPerConnection = 2
        let h = try TCPHarness(configuration: config)
        defer { h.finish() }
        let queries: [[UInt8]] = (1...4).map { [FakeResponder.slow, UInt8($0)] }
        try h.send(queries.flatMap(framed))
        // Two handed over, two wait in the handler.
        #expect(h.responder.receivedQueries == Array(queries[0..<2]))

        let readsBefore = h.readCounter.reads
        h.channel.pipeline.read()
        #expect(h.readCounter.reads == readsBefore, "read() must be held at the cap")
        #expect(h.isOpen)

        #expect(h.responder.complete(tag: 1))
        #expect(try h.answers() == [FakeResponder.answer(for: queries[0])])
        #expect(h.responder.receivedQueries == Array(queries[0..<3]))
        #expect(h.readCounter.reads == readsBefore, "still at the cap")

        #expect(h.responder.complete(tag: 2))
        #expect(h.responder.receivedQueries == queries)
        #expect(h.readCounter.reads == readsBefore, "still at the cap")

        #expect(h.responder.complete(tag: 3))
        #expect(h.readCounter.reads == readsBefore + 1, "the held read is released below the cap")
        h.channel.pipeline.read()
        #expect(h.readCounter.reads == readsBefore + 2)
        #expect(h.responder.complete(tag: 4))
        #expect(try h.answers().count == 3)
        #expect(h.isOpen)
    }

    @Test func zeroLengthMessageIsDroppedAndConnectionKept() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.send([0, 0])
        #expect(h.isOpen)
        #expect(h.responder.receivedQueries.isEmpty)
        try h.send([0, 0] + framed([FakeResponder.fast, 9]))
        #expect(try h.answers() == [FakeResponder.answer(for: [FakeResponder.fast, 9])])
        #expect(h.counters.snapshot().malformedDropped == 2)
        #expect(h.isOpen)
    }

    @Test func nilAnswerSendsNothing() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.silent, 1])
        #expect(try h.answers().isEmpty)
        #expect(h.counters.snapshot().queriesUnanswered == 1)
        #expect(h.isOpen)
    }

    @Test func noWriteAfterClose() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.slow, 1])
        try h.channel.close().wait()
        #expect(!h.isOpen)
        #expect(h.responder.complete(tag: 1))
        #expect(try h.channel.readOutbound(as: ByteBuffer.self) == nil)
        let stats = h.counters.snapshot()
        #expect(stats.tcpAnswersSent == 0)
        #expect(stats.tcp.closedClient == 1)
        #expect(stats.tcp.open == 0)
        #expect(h.registry.count == 0)
    }

    @Test func halfCloseAnswersInFlightQueriesThenCloses() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.slow, 1])
        try h.sendMessage([FakeResponder.slow, 2])
        h.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(h.isOpen)
        #expect(h.responder.complete(tag: 2))
        #expect(h.isOpen)
        #expect(h.responder.complete(tag: 1))
        #expect(!h.isOpen)
        #expect(try h.answers() == [[0xAA, FakeResponder.slow, 2], [0xAA, FakeResponder.slow, 1]])
        #expect(h.counters.snapshot().tcp.closedClient == 1)
    }

    @Test func halfCloseWithNothingInFlightClosesAtOnce() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.fast, 1])
        h.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!h.isOpen)
        #expect(try h.answers().count == 1)
    }

    @Test func quiesceEventFinishesAnswersThenCloses() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.slow, 1])
        h.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(h.isOpen)
        #expect(h.responder.complete(tag: 1))
        #expect(!h.isOpen)
        #expect(try h.answers().count == 1)
        #expect(h.counters.snapshot().tcp.closedShutdown == 1)
    }

    @Test func idleConnectionIsClosedAtTimeout() throws {
        let h = try TCPHarness()  // 10 s
        defer { h.finish() }
        h.advance(seconds: 9)
        #expect(h.isOpen)
        h.advance(seconds: 1)
        #expect(!h.isOpen)
        #expect(h.counters.snapshot().tcp.closedIdle == 1)
    }

    @Test func completeMessageRestartsIdleTimer() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        h.advance(seconds: 8)
        try h.sendMessage([FakeResponder.fast, 1])
        h.advance(seconds: 8)
        #expect(h.isOpen)
        h.advance(seconds: 2)
        #expect(!h.isOpen)
    }

    @Test func partialMessagesDoNotRestartIdleTimer() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        let bytes = framed([FakeResponder.fast, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        for byte in bytes.prefix(4) {
            try h.send([byte])
            h.advance(seconds: 2)
        }
        #expect(h.isOpen)
        try h.send([bytes[4]])
        h.advance(seconds: 2)
        #expect(!h.isOpen, "a 1-byte drip is closed at the idle timeout")
        #expect(h.responder.receivedQueries.isEmpty)
        #expect(h.counters.snapshot().tcp.closedIdle == 1)
    }

    @Test func idleTimerWaitsForQueriesInFlight() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        try h.sendMessage([FakeResponder.slow, 1])
        h.advance(seconds: 60)
        #expect(h.isOpen)
        #expect(h.responder.complete(tag: 1))
        #expect(try h.answers().count == 1)
        h.advance(seconds: 9)
        #expect(h.isOpen)
        h.advance(seconds: 1)
        #expect(!h.isOpen)
    }

    @Test func connectionsOverPerClientLimitAreClosedAtOnce() throws {
        var config = DNSServerConfiguration()
        config.maxTCPConnectionsPerClient = 2
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(maxTotal: 10, maxPerClient: 2)
        let a = try TCPHarness(configuration: config, counters: counters, registry: registry)
        let b = try TCPHarness(configuration: config, counters: counters, registry: registry)
        let c = try TCPHarness(configuration: config, counters: counters, registry: registry)
        let other = try TCPHarness(
            configuration: config,
            counters: counters,
            registry: registry,
            remote: SocketAddress(ipAddress: "2001:db8::1", port: 53000)
        )
        #expect(a.isOpen && b.isOpen && other.isOpen)
        #expect(!c.isOpen)
        var stats = counters.snapshot()
        #expect(stats.tcp.accepted == 4)
        #expect(stats.tcp.open == 3)
        #expect(stats.tcp.closedLimit == 1)
        #expect(registry.count == 3)

        a.finish()
        let d = try TCPHarness(configuration: config, counters: counters, registry: registry)
        #expect(d.isOpen)
        stats = counters.snapshot()
        #expect(stats.tcp.open == 3)
        for harness in [b, c, d, other] { harness.finish() }
        #expect(counters.snapshot().tcp.open == 0)
        #expect(registry.count == 0)
    }

    @Test func connectionsOverTotalLimitAreClosedAtOnce() throws {
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(maxTotal: 1, maxPerClient: 10)
        let a = try TCPHarness(counters: counters, registry: registry)
        let b = try TCPHarness(
            counters: counters, registry: registry, remote: SocketAddress(ipAddress: "192.0.2.99", port: 1))
        defer {
            a.finish()
            b.finish()
        }
        #expect(a.isOpen)
        #expect(!b.isOpen)
        #expect(counters.snapshot().tcp.closedLimit == 1)
    }
}
