import DNSServer
import DNSWire
import NIOCore
import NIOExtras
import NIOPosix
import Testing

/// Runs a server on 127.0.0.1 port 0 around `body`, then shuts it down.
func withServer(
    configuration: DNSServerConfiguration = DNSServerConfiguration(
        listenAddresses: [.init(host: "127.0.0.1", port: 0)]
    ),
    responder: FakeResponder,
    _ body: (DNSServer, [DNSServerBoundAddress]) async throws -> Void
) async throws {
    let (boundStream, bound) = AsyncStream<[DNSServerBoundAddress]>.makeStream()
    let server = DNSServer(configuration: configuration, responder: responder) { addresses in
        bound.yield(addresses)
        bound.finish()
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { bound.finish() }
            try await server.run()
        }
        var iterator = boundStream.makeAsyncIterator()
        guard let addresses = await iterator.next() else {
            try await group.next()  // run() failed: rethrow its error
            return
        }
        do {
            try await body(server, addresses)
        } catch {
            server.shutdown()
            try? await group.waitForAll()
            throw error
        }
        server.shutdown()
        try await group.waitForAll()
    }
}

@Suite(.timeLimit(.minutes(1))) struct DNSServerSocketTests {
    @Test func udpRoundTrip() async throws {
        let responder = FakeResponder()
        try await withServer(responder: responder) { server, bound in
            let udp = try #require(bound.first { $0.transport == .udp })
            #expect(udp.port != 0)
            #expect(bound.contains(DNSServerBoundAddress(transport: .tcp, address: udp.address)))
            #expect(server.boundAddresses == bound)

            let client = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 8192))
                .bind(host: "127.0.0.1", port: 0) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>(
                            wrappingChannelSynchronously: channel
                        )
                    }
                }
            let query: [UInt8] = [FakeResponder.fast, 42] + [UInt8](repeating: 7, count: 3000)
            let reply = try await client.executeThenClose { inbound, outbound in
                try await outbound.write(AddressedEnvelope(remoteAddress: udp.address, data: ByteBuffer(bytes: query)))
                var iterator = inbound.makeAsyncIterator()
                return try await iterator.next()
            }
            let answer = reply.map { Array($0.data.readableBytesView) } ?? []
            #expect(answer.count == query.count + 1)
            #expect(answer == FakeResponder.answer(for: query), "a 3002-byte query fits one receive slot")
            #expect(responder.receivedClients.first?.address == [127, 0, 0, 1])
            #expect(server.stats().udpQueriesReceived == 1)
            #expect(server.stats().udpAnswersSent == 1)
        }
    }

    @Test func tcpPipelinedQueriesOnOneConnection() async throws {
        let responder = FakeResponder()
        try await withServer(responder: responder) { server, bound in
            let tcp = try #require(bound.first { $0.transport == .tcp })
            let client = try await connectFramedTCPClient(to: tcp.address)
            let queries: [[UInt8]] = [[FakeResponder.slow, 1], [FakeResponder.fast, 2], [FakeResponder.fast, 3]]
            let answers = try await client.executeThenClose { inbound, outbound in
                try await outbound.write(contentsOf: queries.map { ByteBuffer(bytes: $0) })
                var iterator = inbound.makeAsyncIterator()
                var answers: [[UInt8]] = []
                for _ in 0..<2 {
                    if let answer = try await iterator.next() { answers.append(Array(answer.readableBytesView)) }
                }
                // The slow one is answered only now, from another thread.
                #expect(responder.complete(tag: 1))
                if let answer = try await iterator.next() { answers.append(Array(answer.readableBytesView)) }
                return answers
            }
            #expect(answers == [queries[1], queries[2], queries[0]].map(FakeResponder.answer(for:)))
            #expect(server.stats().tcpQueriesReceived == 3)
            #expect(server.stats().tcpAnswersSent == 3)
            #expect(server.stats().tcp.accepted == 1)
        }
    }

    @Test func oversizedDatagramIsDroppedByTheVectorRead() async throws {
        var config = DNSServerConfiguration(listenAddresses: [.init(host: "127.0.0.1", port: 0)])
        config.maxUDPDatagramSize = 1000
        config.udpReceiveBufferSlots = 4
        let responder = FakeResponder()
        try await withServer(configuration: config, responder: responder) { server, bound in
            let udp = try #require(bound.first { $0.transport == .udp })
            let client = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: 0) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>(
                            wrappingChannelSynchronously: channel
                        )
                    }
                }
            let tooLarge: [UInt8] = [FakeResponder.fast, 1] + [UInt8](repeating: 0, count: 999)
            let largest: [UInt8] = [FakeResponder.fast, 2] + [UInt8](repeating: 0, count: 998)
            let reply = try await client.executeThenClose { inbound, outbound in
                try await outbound.write(
                    AddressedEnvelope(remoteAddress: udp.address, data: ByteBuffer(bytes: tooLarge)))
                try await outbound.write(
                    AddressedEnvelope(remoteAddress: udp.address, data: ByteBuffer(bytes: largest)))
                var iterator = inbound.makeAsyncIterator()
                return try await iterator.next()
            }
            #expect(reply.map { Array($0.data.readableBytesView.prefix(3)) } == [0xAA, FakeResponder.fast, 2])
            #expect(responder.receivedQueries.count == 1)
            #expect(server.stats().malformedDropped == 1)
        }
    }

    @Test func gracefulShutdownLetsTCPAnswersInFlightFinish() async throws {
        let responder = FakeResponder()
        var finalStats: DNSServerStats?
        var serverRef: DNSServer?
        try await withServer(responder: responder) { server, bound in
            serverRef = server
            let tcp = try #require(bound.first { $0.transport == .tcp })
            let client = try await connectFramedTCPClient(to: tcp.address)
            let (answers, ended) = try await client.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(bytes: [FakeResponder.slow, 1]))
                while responder.pendingCount == 0 {
                    try await Task.sleep(for: .milliseconds(5))
                }
                server.shutdown()
                #expect(responder.complete(tag: 1))
                var iterator = inbound.makeAsyncIterator()
                var answers: [[UInt8]] = []
                while let answer = try await iterator.next() {
                    answers.append(Array(answer.readableBytesView))
                }
                return (answers, true)
            }
            #expect(answers == [[0xAA, FakeResponder.slow, 1]])
            #expect(ended, "the server closes the connection after answering")
        }
        finalStats = serverRef?.stats()
        #expect(finalStats?.tcp.open == 0)
        #expect(finalStats?.tcpAnswersSent == 1)
    }

    @Test func secondServerOnSamePortFailsWithClearError() async throws {
        try await withServer(responder: FakeResponder()) { _, bound in
            let port = try #require(bound.first?.port)
            let config = DNSServerConfiguration(listenAddresses: [.init(host: "127.0.0.1", port: port)])
            let second = DNSServer(configuration: config, responder: FakeResponder())
            let error = await #expect(throws: DNSServerError.self) { try await second.run() }
            #expect(error?.code == .cannotListen)
            #expect(error?.description == "cannot listen on 127.0.0.1:\(port)/udp: Address already in use")
        }
    }

    @Test func tcpPortTakenFailsWithClearError() async throws {
        let taken = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(taken.localAddress?.port)
        defer { taken.close(promise: nil) }
        let config = DNSServerConfiguration(listenAddresses: [.init(host: "127.0.0.1", port: port)])
        let server = DNSServer(configuration: config, responder: FakeResponder())
        let error = await #expect(throws: DNSServerError.self) { try await server.run() }
        #expect(error?.description == "cannot listen on 127.0.0.1:\(port)/tcp: Address already in use")
    }

    @Test func shutdownBeforeRunMeansNothingRuns() async throws {
        let config = DNSServerConfiguration(listenAddresses: [.init(host: "127.0.0.1", port: 0)])
        let server = DNSServer(configuration: config, responder: FakeResponder())
        server.shutdown()
        try await server.run()
        #expect(server.boundAddresses.isEmpty)
    }

    @Test func invalidListenAddressIsRejected() async throws {
        let config = DNSServerConfiguration(listenAddresses: [.init(host: "localhost", port: 53)])
        let server = DNSServer(configuration: config, responder: FakeResponder())
        let error = await #expect(throws: DNSServerError.self) { try await server.run() }
        #expect(error?.code == .invalidListenAddress)
        #expect(error?.description == "cannot listen on localhost:53: not a numeric IP address")
    }

    @Test func ipv6LoopbackAndIPv4LoopbackTogether() async throws {
        let config = DNSServerConfiguration(listenAddresses: [
            .init(host: "127.0.0.1", port: 0), .init(host: "::1", port: 0),
        ])
        try await withServer(configuration: config, responder: FakeResponder()) { _, bound in
            #expect(bound.count == 4)
            #expect(bound.contains { $0.description.hasPrefix("[::1]:") && $0.transport == .tcp })
        }
    }
}

/// A DNS-over-TCP client channel: 2-byte length framing both ways (RFC 1035 §4.2.2).
func connectFramedTCPClient(to address: SocketAddress) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
    try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(to: address) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes))
                )
                try channel.pipeline.syncOperations.addHandler(LengthFieldPrepender(lengthFieldBitLength: .twoBytes))
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
}
