import DNSWire
import NIOCore
import NIOEmbedded
import Testing

@testable import DNSServer

@Suite struct UDPDNSHandlerTests {
    final class Harness {
        let channel = EmbeddedChannel()
        let responder = FakeResponder()
        let counters: DNSServerCounters
        let drain = UDPDrainState()
        let client = try! SocketAddress(ipAddress: "203.0.113.5", port: 5300)

        init(maxDatagramSize: Int = 4096, counters: DNSServerCounters = DNSServerCounters()) throws {
            self.counters = counters
            try self.channel.pipeline.syncOperations.addHandler(
                UDPDNSHandler(
                    responder: self.responder,
                    counters: self.counters,
                    drain: self.drain,
                    maxDatagramSize: maxDatagramSize
                )
            )
            // A bound datagram channel is active; an EmbeddedChannel becomes active on connect.
            try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 53)).wait()
        }

        func send(_ bytes: [UInt8]) throws {
            try self.channel.writeInbound(AddressedEnvelope(remoteAddress: self.client, data: ByteBuffer(bytes: bytes)))
        }

        func replies() throws -> [AddressedEnvelope<ByteBuffer>] {
            var replies: [AddressedEnvelope<ByteBuffer>] = []
            while let reply = try self.channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
                replies.append(reply)
            }
            return replies
        }
    }

    @Test func synchronousAnswerGoesBackToSender() throws {
        let h = try Harness()
        let query: [UInt8] = [FakeResponder.fast, 1, 2, 3]
        try h.send(query)
        let replies = try h.replies()
        #expect(replies.count == 1)
        #expect(replies.first?.remoteAddress == h.client)
        #expect(replies.first.map { Array($0.data.readableBytesView) } == FakeResponder.answer(for: query))
        #expect(h.responder.receivedClients.first?.address == [203, 0, 113, 5])
        #expect(h.responder.receivedClients.first?.transport == .udp)
        #expect(h.drain.queriesInFlight == 0)
        #expect(h.counters.snapshot().udpQueriesReceived == 1)
        #expect(h.counters.snapshot().udpAnswersSent == 1)
    }

    @Test func laterAnswerIsSentWhenReady() throws {
        let h = try Harness()
        try h.send([FakeResponder.slow, 1])
        try h.send([FakeResponder.fast, 2])
        #expect(try h.replies().map { Array($0.data.readableBytesView) } == [[0xAA, FakeResponder.fast, 2]])
        #expect(h.drain.queriesInFlight == 1)
        #expect(h.responder.complete(tag: 1))
        #expect(try h.replies().map { Array($0.data.readableBytesView) } == [[0xAA, FakeResponder.slow, 1]])
        #expect(h.drain.queriesInFlight == 0)
    }

    @Test func oversizedDatagramIsDropped() throws {
        let h = try Harness(maxDatagramSize: 100)
        try h.send([FakeResponder.fast] + [UInt8](repeating: 0, count: 100))
        #expect(h.responder.receivedQueries.isEmpty)
        #expect(try h.replies().isEmpty)
        #expect(h.counters.snapshot().malformedDropped == 1)
        try h.send([FakeResponder.fast] + [UInt8](repeating: 0, count: 99))
        #expect(try h.replies().count == 1)
    }

    @Test func nilAnswerAndDrainingSendNothing() throws {
        let h = try Harness()
        try h.send([FakeResponder.silent, 1])
        #expect(try h.replies().isEmpty)
        #expect(h.counters.snapshot().queriesUnanswered == 1)
        h.drain.startDraining()
        try h.send([FakeResponder.fast, 2])
        #expect(try h.replies().isEmpty)
        #expect(h.counters.snapshot().udpDroppedShuttingDown == 1)
    }

    @Test func answerAfterCloseIsNotWritten() throws {
        let h = try Harness()
        try h.send([FakeResponder.slow, 1])
        try h.channel.close().wait()
        #expect(h.responder.complete(tag: 1))
        #expect(try h.channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) == nil)
    }
}

@Suite struct DNSClientAddressTests {
    @Test func ipv4() throws {
        let client = DNSClient(try SocketAddress(ipAddress: "10.1.2.3", port: 53), transport: .udp)
        #expect(client.address == [10, 1, 2, 3])
        #expect(client.port == 53)
        #expect(client.description == "10.1.2.3:53/udp")
    }

    @Test func ipv6() throws {
        let client = DNSClient(try SocketAddress(ipAddress: "2001:db8::1", port: 5353), transport: .tcp)
        #expect(client.address == [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1])
        #expect(client.port == 5353)
    }

    @Test func ipv4MappedIPv6IsUnmapped() throws {
        let client = DNSClient(try SocketAddress(ipAddress: "::ffff:127.0.0.1", port: 1), transport: .tcp)
        #expect(client.address == [127, 0, 0, 1])
    }

    @Test func unknown() {
        let client = DNSClient(nil, transport: .tcp)
        #expect(client.address.isEmpty)
        #expect(client.port == 0)
    }
}

/// Graceful shutdown waits for the last UDP answer in flight without polling.
@Suite struct UDPDrainStateTests {
    @Test func drainedReturnsWhenTheLastAnswerGoesOut() async {
        let drain = UDPDrainState()
        drain.queryStarted()
        drain.startDraining()
        let waiter = Task { await drain.drained() }
        try? await Task.sleep(for: .milliseconds(50))
        drain.queryFinished()
        await waiter.value
        #expect(drain.queriesInFlight == 0)
    }

    @Test func drainedReturnsAtOnceWhenNothingIsInFlight() async {
        let drain = UDPDrainState()
        drain.startDraining()
        await drain.drained()
    }

    @Test func drainedReturnsWhenCancelled() async {
        let drain = UDPDrainState()
        drain.queryStarted()
        drain.startDraining()
        let waiter = Task { await drain.drained() }
        waiter.cancel()
        await waiter.value
        #expect(drain.queriesInFlight == 1)
    }
}
