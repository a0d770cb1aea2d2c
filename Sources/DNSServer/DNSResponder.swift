import DNSWire
import NIOCore

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

extension DNSClient {
    /// The client behind `address`: 4 address bytes for IPv4 and IPv4-mapped IPv6, 16 for IPv6;
    /// no bytes and port 0 for other or unknown addresses.
    init(_ address: SocketAddress?, transport: DNSTransport) {
        // Raw sockaddr layouts: sockaddr_in has the address at offset 4, sockaddr_in6 at offset 8
        // (after family/len, port and flow info), both in network byte order.
        switch address {
        case .v4(let v4)?:
            let bytes = withUnsafeBytes(of: v4.address) { Array($0[4..<8]) }
            self.init(address: bytes, port: address?.port ?? 0, transport: transport)
        case .v6(let v6)?:
            var bytes = withUnsafeBytes(of: v6.address) { Array($0[8..<24]) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                bytes = Array(bytes[12..<16])
            }
            self.init(address: bytes, port: address?.port ?? 0, transport: transport)
        default:
            self.init(address: [], port: 0, transport: transport)
        }
    }
}
