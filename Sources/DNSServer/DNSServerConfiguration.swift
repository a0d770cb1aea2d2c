/// Where and how the DNS front ends listen. Every listen address gets a UDP socket and a TCP
/// listener on the same port.
public struct DNSServerConfiguration: Sendable, Equatable {
    /// A numeric IP address (no host names) and a port. Port 0 picks a free port, the same one
    /// for UDP and TCP; `DNSServer.boundAddresses` tells which.
    public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String {
            self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
        }
    }

    public var listenAddresses = defaultListenAddresses

    /// The IPv6 and IPv4 wildcards on port 53, in the order they bind (and `--check-config`
    /// prints them). IPv6 sockets are v6-only, so both bind.
    public static let defaultListenAddresses = [
        ListenAddress(host: "::", port: 53), ListenAddress(host: "0.0.0.0", port: 53),
    ]

    /// RFC 7766 §6.2.3: a TCP connection with no query in flight is closed this long after the last
    /// complete message received or answer sent. Partial messages do not reset it.
    public var tcpIdleTimeout: Duration = .seconds(10)
    /// Connections over this limit are accepted and closed at once (RFC 7766 §6.2.2, §10).
    public var maxTCPConnections: Int = 1024
    /// Per client IP address.
    public var maxTCPConnectionsPerClient: Int = 64
    /// Per client subnet, a /24 for IPv4 and a /56 for IPv6 (one site's delegation), so that a
    /// network cannot take every connection by spreading over its addresses (RFC 7766 §10).
    /// nil: four times `maxTCPConnectionsPerClient`.
    public var maxTCPConnectionsPerSubnet: Int?
    /// A connection open this long stops reading, answers what it has and closes (RFC 7766
    /// §6.2.2 lets servers bound a connection's life; a DSO session is exempt, it has its own
    /// timers). nil: no limit.
    public var tcpMaxConnectionLifetime: Duration?
    /// Queries being answered at once on one TCP connection; beyond it the server stops reading
    /// from that connection until some are answered (backpressure, not a close).
    public var maxInFlightPerConnection: Int = 64

    /// Datagrams read per recvmmsg(2) call (Linux); each gets a slot of `maxUDPDatagramSize + 1` bytes.
    public var udpReceiveBufferSlots: Int = 32
    /// Answers written during one read burst are flushed (one sendmmsg(2)) at its end, or as soon
    /// as this many are waiting. A burst reads up to four times `udpReceiveBufferSlots` datagrams,
    /// so without the cap the first answer of a full burst would wait for the other 127 (about
    /// 1 ms): the latency tail under load. Sixteen keeps nearly all of the syscall saving.
    public var udpWriteBatch: Int = 16
    /// Larger datagrams are dropped and counted as malformed. EDNS allows queries up to 4096 bytes.
    public var maxUDPDatagramSize: Int = 4096 + 512
    /// Kernel receive buffer of each UDP socket (SO_RCVBUF), so that a burst of queries waits in
    /// the kernel rather than being dropped while the loop is busy: Linux's default
    /// (`net.core.rmem_default`, ~208 KiB) holds about 900 small datagrams. Set with
    /// SO_RCVBUFFORCE while the process may (as root, before dropping privileges), else
    /// SO_RCVBUF, which the kernel caps at `net.core.rmem_max`. Zero leaves the default.
    public var udpSocketReceiveBuffer: Int = 4 << 20

    /// Replay answers the responder marked replayable (`DNSAnswerReplay`) for byte-identical
    /// queries from the same client, from a per-event-loop cache: the cache-hit fast path.
    public var replayAnswers: Bool = true

    /// A TCP connection's DSO messages go to a session of the responder, when it holds
    /// sessions (`DNSSessionResponder`): DNS Push on the DNS port (`push.on-tcp`). Off, a
    /// DSO message is an ordinary query to the responder.
    public var dsoSessions: Bool = true

    /// On graceful shutdown, how long answers still in flight may take before every socket is closed.
    public var shutdownGracePeriod: Duration = .seconds(2)

    public init() {}

    /// The per-subnet limit in force.
    public var effectiveMaxTCPConnectionsPerSubnet: Int {
        maxTCPConnectionsPerSubnet ?? Self.defaultMaxTCPConnectionsPerSubnet(perClient: maxTCPConnectionsPerClient)
    }

    /// Without a per-subnet limit, a subnet may hold `subnetClients` clients at the per-client limit.
    public static func defaultMaxTCPConnectionsPerSubnet(perClient: Int) -> Int { perClient * subnetClients }

    public static let subnetClients = 4

    public init(listenAddresses: [ListenAddress]) {
        self.listenAddresses = listenAddresses
    }
}
