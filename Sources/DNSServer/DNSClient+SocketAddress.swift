import NIOCore

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
