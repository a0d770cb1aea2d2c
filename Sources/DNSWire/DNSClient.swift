/// The transport a query arrived on; decides the size limit of the answer.
public enum DNSTransport: String, Sendable, Hashable {
    case udp
    case tcp
}

/// Who sent a query, and how: built once by the front end that read it, and read by
/// everything after it (the rate limiter, the client ACL, the link views, the private realms,
/// the answer's size limit and edns-tcp-keepalive, DNS Push, the logs).
public struct DNSClient: Sendable, Hashable, CustomStringConvertible {
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

    /// `192.0.2.1:53/udp`, `[2001:db8::1]:53/tcp`.
    public var description: String {
        let text = IPAddressText.format(address)
        return (address.count == 16 ? "[\(text)]" : text) + ":\(port)/\(transport.rawValue)"
    }
}
