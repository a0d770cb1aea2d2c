import DNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A DNS server: a numeric IPv4 or IPv6 address and a port (no host names: nothing to resolve).
public struct ServerAddress: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable { case v4, v6 }
    public var family: Family
    /// 4 or 16 bytes, network order.
    public var address: [UInt8]
    public var port: UInt16
    /// IPv6 zone index (`fe80::1%eth0`), 0 for none.
    public var scopeID: UInt32
    var zone: String?

    /// Parses `ADDR`, `ADDR:PORT`, `[V6]`, `[V6]:PORT` or a bare `V6` (which takes the default
    /// port), with an optional `%zone` on IPv6.
    public init(parsing text: String, defaultPort: UInt16 = 53) throws(DNSSDError) {
        func fail(_ reason: String) -> DNSSDError { .badServerAddress(text: text, reason: reason) }
        var host = text
        var port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw fail("missing ]") }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw fail("expected :PORT after ]") }
                port = try Self.port(String(rest.dropFirst()), text: text)
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            port = try Self.port(String(text[text.index(after: colon)...]), text: text)
        }
        var zone: String?
        if let percent = host.firstIndex(of: "%") {
            zone = String(host[host.index(after: percent)...])
            host = String(host[..<percent])
        }
        var v4 = in_addr()
        var v6 = in6_addr()
        if zone == nil, inet_pton(AF_INET, host, &v4) == 1 {
            self.family = .v4
            self.address = withUnsafeBytes(of: v4) { Array($0) }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            self.family = .v6
            self.address = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            throw fail("not a numeric IPv4 or IPv6 address")
        }
        self.port = port
        self.zone = zone
        self.scopeID = 0
        if let zone {
            if let numeric = UInt32(zone) {
                self.scopeID = numeric
            } else {
                let index = if_nametoindex(zone)
                guard index != 0 else { throw fail("unknown interface \"\(zone)\"") }
                self.scopeID = index
            }
        }
    }

    private static func port(_ text: String, text whole: String) throws(DNSSDError) -> UInt16 {
        guard let value = UInt16(text), value != 0 else {
            throw .badServerAddress(text: whole, reason: "port \"\(text)\" is not a number in 1...65535")
        }
        return value
    }

    /// The address as text, without the port.
    public var host: String {
        let text = IPAddressText.format(address)
        return zone.map { text + "%" + $0 } ?? text
    }

    /// `192.0.2.1:53` or `[2001:db8::1]:53`.
    public var description: String {
        family == .v4 ? "\(host):\(port)" : "[\(host)]:\(port)"
    }

    /// Calls `body` with a sockaddr for this address.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch family {
        case .v4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: address) }
            return withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scopeID
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address) }
            return withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }
}
