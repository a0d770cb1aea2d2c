import NIOCore

/// The transport a query arrived on; decides the size limit of the answer.
public enum DNSTransport: String, Sendable {
    case udp
    case tcp
}

/// Who sent a query, for ACLs, rate limits and logs.
public struct DNSClient: Sendable, CustomStringConvertible {
    /// Address bytes: 4 for IPv4, 16 for IPv6 (IPv4-mapped IPv6 is unmapped to 4).
    public var address: [UInt8]
    public var port: Int
    public var transport: DNSTransport
    /// The idle timeout the server holds for the TCP connection the query came on, to be told
    /// to a client that asks with edns-tcp-keepalive (RFC 7828 §3.3.2). Zero when the server
    /// wants the connection closed; nil over UDP and inside a DSO session, where the option
    /// must not be sent (RFC 7828 §3.3.1, RFC 8490 §7.1.2).
    public var tcpIdleTimeout: Duration?

    public init(address: [UInt8], port: Int, transport: DNSTransport, tcpIdleTimeout: Duration? = nil) {
        self.address = address
        self.port = port
        self.transport = transport
        self.tcpIdleTimeout = tcpIdleTimeout
    }

    /// `192.0.2.1:53/udp`, `[2001:db8::1]:53/tcp`: the address as NIO (`inet_ntop`) writes it.
    public var description: String {
        let text =
            (try? SocketAddress(packedIPAddress: ByteBuffer(bytes: address), port: port))?.ipAddress
            ?? address.map(String.init).joined(separator: ".")
        return (address.count == 16 ? "[\(text)]" : text) + ":\(port)/\(transport.rawValue)"
    }
}

/// What the network front ends hand queries to. The servers only move bytes: decoding,
/// answering and encoding (within the transport's size limit) are the responder's job.
public protocol DNSResponder: Sendable {
    /// Answers one query message (without the TCP length prefix). `answer` must be called
    /// exactly once, either before `handle` returns (a cache hit) or later from any thread
    /// (an mDNS miss): with the encoded answer, or with nil bytes to send nothing (for example
    /// a query too short to hold a DNS header). The answer may say that the front end can
    /// replay it (see `DNSAnswer.replay`).
    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void)
}

/// A responder's answer: the message bytes (nil: send nothing) and, optionally, permission to
/// replay them.
public struct DNSAnswer: Sendable {
    public var bytes: [UInt8]?
    public var replay: DNSAnswerReplay?

    public init(bytes: [UInt8]?, replay: DNSAnswerReplay? = nil) {
        self.bytes = bytes
        self.replay = replay
    }
}

/// The responder's promise that, while `isCurrent()` holds, the same query bytes (apart from
/// the 2-byte ID) from the same client and transport get the same answer bytes (apart from
/// the ID). The front end then answers such queries itself, without calling the responder,
/// for at most `lifetime` before asking again, and reports how many it answered through
/// `replayed` (batched, at least once per `lifetime`).
public struct DNSAnswerReplay: Sendable {
    public var lifetime: Duration
    public var isCurrent: @Sendable () -> Bool
    public var replayed: @Sendable (_ count: Int) -> Void

    public init(
        lifetime: Duration, isCurrent: @escaping @Sendable () -> Bool,
        replayed: @escaping @Sendable (_ count: Int) -> Void
    ) {
        self.lifetime = lifetime
        self.isCurrent = isCurrent
        self.replayed = replayed
    }
}
