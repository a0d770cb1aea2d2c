import DiscoveryProxy

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The host's network interfaces and their prefixes, read with getifaddrs(3).
public struct InterfaceTable: Sendable {
    public var prefixes: [String: [IPPrefix]]
    /// Each interface's own (host) addresses, for advertising this host's name.
    public var addresses: [String: [[UInt8]]]
    /// Interfaces that are administratively up (IFF_UP); filled by `system()`.
    public var up: Set<String>
    /// Interfaces that carry a default route (IPv4 or IPv6): on a router, the uplinks.
    public var uplinks: Set<String>
    /// IPv4 multicast groups one socket may join (net.ipv4.igmp_max_memberships, 20 by
    /// default); nil when unknown. avahi-daemon joins 224.0.0.251 on every interface with one
    /// socket, so this caps the links it can serve over IPv4.
    public var ipv4MulticastGroupLimit: Int?

    public init(
        prefixes: [String: [IPPrefix]], addresses: [String: [[UInt8]]] = [:], up: Set<String>? = nil,
        uplinks: Set<String> = [], ipv4MulticastGroupLimit: Int? = nil
    ) {
        self.prefixes = prefixes
        self.addresses = addresses
        self.up = up ?? Set(prefixes.keys)
        self.uplinks = uplinks
        self.ipv4MulticastGroupLimit = ipv4MulticastGroupLimit
    }

    public func exists(_ name: String) -> Bool { prefixes[name] != nil }

    /// A snapshot of the system's interfaces (including those without addresses).
    public static func system() -> InterfaceTable {
        var table: [String: [IPPrefix]] = [:]
        var hosts: [String: [[UInt8]]] = [:]
        var up = Set<String>()
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0, let first = head else { return InterfaceTable(prefixes: [:]) }
        defer { freeifaddrs(head) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let name = String(cString: entry.pointee.ifa_name)
            if table[name] == nil { table[name] = [] }
            if entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 { up.insert(name) }
            guard let address = entry.pointee.ifa_addr, let mask = entry.pointee.ifa_netmask else { continue }
            guard let bytes = addressBytes(address), let maskBytes = addressBytes(mask) else { continue }
            let length = maskBytes.reduce(0) { $0 + $1.nonzeroBitCount }
            hosts[name, default: []].append(bytes)
            if let prefix = IPPrefix(address: bytes, length: length), !table[name]!.contains(prefix) {
                table[name]!.append(prefix)
            }
        }
        let groupLimit = (try? String(contentsOfFile: "/proc/sys/net/ipv4/igmp_max_memberships", encoding: .utf8))
            .flatMap { Int($0.trimmed()) }
        return InterfaceTable(
            prefixes: table, addresses: hosts, up: up, uplinks: defaultRouteInterfaces(),
            ipv4MulticastGroupLimit: groupLimit)
    }

    /// Interfaces with a default route, from the kernel's routing tables (/proc/net/route:
    /// destination and mask 00000000; /proc/net/ipv6_route: ::/0).
    static func defaultRouteInterfaces(
        ipv4 routes4: String? = try? String(contentsOfFile: "/proc/net/route", encoding: .utf8),
        ipv6 routes6: String? = try? String(contentsOfFile: "/proc/net/ipv6_route", encoding: .utf8)
    ) -> Set<String> {
        var names = Set<String>()
        for line in (routes4 ?? "").split(separator: "\n").dropFirst() {
            let fields = line.split(whereSeparator: \.isWhitespace)
            if fields.count > 7, fields[1] == "00000000", fields[7] == "00000000" { names.insert(String(fields[0])) }
        }
        for line in (routes6 ?? "").split(separator: "\n") {
            let fields = line.split(whereSeparator: \.isWhitespace)
            if fields.count > 9, fields[0].allSatisfy({ $0 == "0" }), fields[1] == "00", fields[9] != "lo" {
                names.insert(String(fields[9]))
            }
        }
        return names
    }

    private static func addressBytes(_ address: UnsafeMutablePointer<sockaddr>) -> [UInt8]? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                withUnsafeBytes(of: sin.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                withUnsafeBytes(of: sin6.pointee.sin6_addr) { Array($0) }
            }
        default:
            return nil
        }
    }
}

/// This host's name, for the default NS/SOA MNAME.
public func systemHostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
