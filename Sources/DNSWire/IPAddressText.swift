#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Addresses as text, the one formatter for them (status page, logs, `dnssd-browse`): libc's
/// `inet_ntop`, whose IPv6 form is RFC 5952's (lower case, longest zero run as `::`). The
/// NIO front ends print addresses through NIO's `SocketAddress`, which calls the same function.
public enum IPAddressText {
    /// 4 bytes as dotted decimal, 16 as IPv6; any other length as dotted bytes.
    public static func format(_ bytes: [UInt8]) -> String {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return bytes.map { String($0) }.joined(separator: ".")
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
