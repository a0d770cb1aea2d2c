import DNSWire
import NIOCore
import NIOEmbedded
import Testing

@testable import DNSServer

/// RFC 7828 edns-tcp-keepalive from the front end's side (the idle timeout each query hands
/// the responder to announce), the per-subnet connection limit (RFC 7766 §10) and the optional
/// cap on a connection's lifetime (§6.2.2).
@Suite struct TCPConnectionLimitsTests {
    // MARK: RFC 7828 §3.3.2: the timeout currently associated with the connection

    @Test func eachTCPQueryCarriesTheIdleTimeoutToAnnounce() throws {
        var config = DNSServerConfiguration()
        config.tcpIdleTimeout = .seconds(7)
        let h = try TCPHarness(configuration: config)
        defer { h.finish() }
        try h.sendMessage([FakeResponder.fast, 1])
        #expect(h.responder.receivedClients.first?.tcpIdleTimeout == .seconds(7))
    }

    @Test func shortOfConnectionsAnnouncesZeroAndClosesOnceIdle() throws {
        // 8 allowed, short from 7 open (seven eighths).
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(maxTotal: 8, maxPerClient: 8)
        var others: [TCPHarness] = []
        for i in 0..<6 {
            others.append(
                try TCPHarness(
                    counters: counters, registry: registry,
                    remote: SocketAddress(ipAddress: "198.51.100.\(i + 1)", port: 1)))
        }
        defer { others.forEach { $0.finish() } }
        let h = try TCPHarness(counters: counters, registry: registry)
        defer { h.finish() }
        #expect(registry.isShortOfConnections)
        try h.sendMessage([FakeResponder.slow, 1])
        #expect(h.responder.receivedClients.last?.tcpIdleTimeout == .zero)
        h.advance(seconds: 5)
        #expect(h.isOpen, "a query in flight is answered first")
        #expect(h.responder.complete(tag: 1))
        #expect(try h.answers().count == 1)
        h.advance(seconds: 0)
        #expect(!h.isOpen, "told 0, the connection closes as soon as it is idle")
        #expect(counters.snapshot().tcp.closedIdle == 1)
        #expect(!registry.isShortOfConnections)
        // The others, which sent nothing, keep their normal idle timeout.
        #expect(others.allSatisfy { $0.isOpen })
    }

    @Test func theLifetimeShortensTheAnnouncedTimeout() throws {
        var config = DNSServerConfiguration()
        config.tcpIdleTimeout = .seconds(10)
        config.tcpMaxConnectionLifetime = .seconds(30)
        let h = try TCPHarness(configuration: config)
        defer { h.finish() }
        h.advance(seconds: 8)
        try h.sendMessage([FakeResponder.fast, 1])
        #expect(h.responder.receivedClients.last?.tcpIdleTimeout == .seconds(10))
        h.advance(seconds: 8)
        try h.sendMessage([FakeResponder.fast, 2])
        h.advance(seconds: 8)
        try h.sendMessage([FakeResponder.fast, 3])
        #expect(h.responder.receivedClients.last?.tcpIdleTimeout == .seconds(6))
    }

    @Test func stateAnnouncesNothingInsideASession() {
        var state = TCPConnectionState(maxInFlight: 4)
        _ = state.activate(admission: .admitted)
        #expect(
            state.idleTimeoutToAnnounce(configured: .seconds(10), shortOfConnections: false, lifetimeLeft: nil)
                == .seconds(10))
        state.sessionOpened()
        #expect(
            state.idleTimeoutToAnnounce(configured: .seconds(10), shortOfConnections: true, lifetimeLeft: nil) == nil)
        #expect(!state.closesWhenIdle, "a DSO session's own timers rule (RFC 8490 §7.1.2)")
    }

    @Test func onceToldZeroAlwaysZero() {
        var state = TCPConnectionState(maxInFlight: 4)
        _ = state.activate(admission: .admitted)
        #expect(
            state.idleTimeoutToAnnounce(configured: .seconds(10), shortOfConnections: true, lifetimeLeft: nil) == .zero)
        #expect(
            state.idleTimeoutToAnnounce(configured: .seconds(10), shortOfConnections: false, lifetimeLeft: nil) == .zero
        )
        #expect(state.closesWhenIdle)
    }

    // MARK: RFC 7766 §10: per subnet, beside per address

    @Test func connectionsOverPerSubnetLimitAreClosedAtOnce() throws {
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(maxTotal: 100, maxPerClient: 2, maxPerSubnet: 3)
        func connect(_ address: String) throws -> TCPHarness {
            try TCPHarness(counters: counters, registry: registry, remote: SocketAddress(ipAddress: address, port: 1))
        }
        // Three addresses of 192.0.2.0/24 fill it; a fourth address there is refused.
        let inSubnet = try ["192.0.2.1", "192.0.2.2", "192.0.2.2", "192.0.2.3"].map(connect)
        // Another /24, and IPv6 by /56: 2001:db8:0:1::/64 and 2001:db8:0:2::/64 share one.
        let elsewhere = try ["192.0.3.1", "2001:db8:0:1::1", "2001:db8:0:1::2", "2001:db8:0:2::1", "2001:db8:0:100::1"]
            .map(connect)
        let sameV6Subnet = try connect("2001:db8:0:3::1")
        defer { (inSubnet + elsewhere + [sameV6Subnet]).forEach { $0.finish() } }
        #expect(inSubnet.map { $0.isOpen } == [true, true, true, false])
        #expect(elsewhere.allSatisfy { $0.isOpen }, "2001:db8:0:100::/56 is another subnet")
        #expect(!sameV6Subnet.isOpen, "a fourth address in 2001:db8::/56")
        #expect(counters.snapshot().tcp.closedLimit == 2)
        // A slot freed in the subnet admits the next address there.
        inSubnet[0].finish()
        let next = try connect("192.0.2.200")
        defer { next.finish() }
        #expect(next.isOpen)
    }

    /// A reload's new limits decide the connections admitted from then on; the ones open stay.
    @Test func newLimitsAdmitTheNextConnections() throws {
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(maxTotal: 100, maxPerClient: 3)
        func connect() throws -> TCPHarness {
            try TCPHarness(
                counters: counters, registry: registry, remote: SocketAddress(ipAddress: "192.0.2.1", port: 1))
        }
        let first = try (0..<3).map { _ in try connect() }
        #expect(first.allSatisfy { $0.isOpen })
        registry.apply(.init(total: 100, perClient: 1))
        let refused = try connect()
        #expect(!refused.isOpen, "over the new per-client limit")
        #expect(first.allSatisfy { $0.isOpen }, "open connections are not closed by a lower limit")
        registry.apply(.init(total: 100, perClient: 8))
        let admitted = try connect()
        #expect(admitted.isOpen, "a raised limit admits the next one")
        #expect(registry.limits == .init(total: 100, perClient: 8))
        (first + [refused, admitted]).forEach { $0.finish() }
    }

    @Test func perSubnetLimitDefaultsToFourClients() {
        var config = DNSServerConfiguration()
        config.maxTCPConnectionsPerClient = 10
        #expect(config.effectiveMaxTCPConnectionsPerSubnet == 40)
        config.maxTCPConnectionsPerSubnet = 15
        #expect(config.effectiveMaxTCPConnectionsPerSubnet == 15)
        #expect(TCPConnectionRegistry.subnet(of: [192, 0, 2, 9]) == [192, 0, 2])
        #expect(
            TCPConnectionRegistry.subnet(of: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x01] + [UInt8](repeating: 7, count: 9))
                == [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x01])
    }

    // MARK: RFC 7766 §6.2.2: an optional cap on a connection's life

    @Test func atItsLifetimeAConnectionAnswersWhatItHasThenCloses() throws {
        var config = DNSServerConfiguration()
        config.tcpIdleTimeout = .seconds(10)
        config.tcpMaxConnectionLifetime = .seconds(25)
        let h = try TCPHarness(configuration: config)
        defer { h.finish() }
        for second in 1...3 {
            h.advance(seconds: 8)
            try h.sendMessage([FakeResponder.fast, UInt8(second)])
        }
        try h.sendMessage([FakeResponder.slow, 9])
        h.advance(seconds: 1)  // 25 s
        #expect(h.isOpen, "the query in flight is answered first")
        #expect(h.responder.complete(tag: 9))
        #expect(try h.answers().count == 4)
        #expect(!h.isOpen)
        #expect(h.counters.snapshot().tcp.closedLifetime == 1)
    }

    @Test func withoutALifetimeABusyConnectionStaysOpen() throws {
        let h = try TCPHarness()
        defer { h.finish() }
        for second in 0..<20 {
            h.advance(seconds: 8)
            try h.sendMessage([FakeResponder.fast, UInt8(second)])
        }
        #expect(h.isOpen)
    }
}
