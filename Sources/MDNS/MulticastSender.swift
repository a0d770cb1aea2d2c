import Glibc

/// Sends mDNS packets to 224.0.0.251 and ff02::fb on an interface, from UDP port 5353 as
/// RFC 6762 §6 requires of responses, beside avahi-daemon's sockets on that port, and
/// receives the group's traffic on that interface (the queries a `LinkResponder` answers).
///
/// Each socket is bound to the multicast group itself (not the wildcard) with SO_REUSEADDR,
/// so the kernel delivers it no unicast datagram for port 5353 (those stay avahi's); it joins
/// the group on its interface alone, and IP_MULTICAST_ALL off keeps other interfaces' group
/// traffic (joined by avahi) off it. TTL (hop limit) 255 (§11). Loopback off: no process on
/// this host hears what it sends (`LinkResponder` says why). Not thread-safe: its owner
/// serialises calls.
final class MulticastSender: AnnouncementTransport {
    private struct Sockets {
        var index: UInt32
        var v4: Int32?
        var v6: Int32?
    }

    private var sockets: [String: Sockets] = [:]

    deinit { for interface in Array(sockets.keys) { close(interface) } }

    enum Family: Hashable, Comparable { case v4, v6 }

    /// Sends `packet` on `interface` over IPv4 and IPv6. Returns why it failed on both, or nil.
    func send(_ packet: [UInt8], on interface: String) -> String? { send(packet, on: interface, over: nil) }

    /// Sends `packet` on `interface` over `family` (nil: both). Returns why it failed (on both), or nil.
    func send(_ packet: [UInt8], on interface: String, over family: Family?) -> String? {
        guard open(interface), let entry = sockets[interface] else {
            // Opened again on the next send.
            return if_nametoindex(interface) == 0
                ? "no such network interface"
                : "cannot open a socket on UDP port 5353: \(String(cString: strerror(errno)))"
        }
        var errors: [String] = []
        let families: [Family] = family.map { [$0] } ?? [.v4, .v6]
        for family in families {
            let name = family == .v4 ? "IPv4" : "IPv6"
            guard let fd = family == .v4 ? entry.v4 : entry.v6 else {
                errors.append("\(name): no socket")
                continue
            }
            let error =
                family == .v4
                ? Self.send(fd, packet, to: Self.groupV4) : Self.send(fd, packet, to: Self.groupV6(entry.index))
            if let error { errors.append("\(name): \(error)") }
        }
        return errors.count == families.count ? errors.joined(separator: "; ") : nil
    }

    /// Opens `interface`'s sockets if they are not open: true if one is.
    @discardableResult
    func open(_ interface: String) -> Bool {
        let index = if_nametoindex(interface)
        guard index != 0 else {
            close(interface)
            return false
        }
        if sockets[interface]?.index != index {
            close(interface)
            let entry = Sockets(index: index, v4: Self.openV4(index), v6: Self.openV6(index))
            guard entry.v4 != nil || entry.v6 != nil else { return false }
            sockets[interface] = entry
        }
        return true
    }

    /// The open sockets and their interfaces.
    var descriptors: [(fd: Int32, interface: String)] {
        sockets.flatMap { interface, entry in [entry.v4, entry.v6].compactMap { $0 }.map { ($0, interface) } }
    }

    /// A datagram received, and where it came from (for a unicast reply).
    struct Datagram {
        var bytes: [UInt8]
        var source: sockaddr_storage
        var sourceLength: socklen_t
        /// The source address's octets in hex: who sent it (RFC 6762 §7.2).
        var address: String
        var port: UInt16

        var family: Family { Int32(source.ss_family) == AF_INET6 ? .v6 : .v4 }
    }

    /// A socket address's octets in hex (the form `Datagram.address` and `localAddresses`
    /// share) and its port.
    static func endpoint(_ address: UnsafeRawPointer) -> (address: String, port: UInt16) {
        let octets: [UInt8]
        let port: UInt16
        switch Int32(address.load(as: sockaddr.self).sa_family) {
        case AF_INET:
            let v4 = address.load(as: sockaddr_in.self)
            octets = withUnsafeBytes(of: v4.sin_addr) { Array($0) }
            port = UInt16(bigEndian: v4.sin_port)
        case AF_INET6:
            let v6 = address.load(as: sockaddr_in6.self)
            octets = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
            port = UInt16(bigEndian: v6.sin6_port)
        default:
            return ("", 0)
        }
        return (octets.map { String($0, radix: 16) }.joined(separator: ":"), port)
    }

    /// This host's addresses (every interface's), as `Datagram.address` writes them: a query
    /// from one of them is this host's own avahi-daemon asking.
    static func localAddresses() -> Set<String> {
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(first) }
        var addresses: Set<String> = []
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr else { continue }
            let family = Int32(address.pointee.sa_family)
            if family == AF_INET || family == AF_INET6 { addresses.insert(endpoint(UnsafeRawPointer(address)).address) }
        }
        return addresses
    }

    /// The next datagram waiting on `fd`, nil when none is.
    static func receive(_ fd: Int32) -> Datagram? {
        var buffer = [UInt8](repeating: 0, count: 9000)  // RFC 6762 §17: up to 9000 octets
        var source = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let count = buffer.withUnsafeMutableBytes { bytes in
            withUnsafeMutablePointer(to: &source) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, &length)
                }
            }
        }
        guard count >= 0 else { return nil }
        let (address, port) = withUnsafeBytes(of: source) { endpoint($0.baseAddress!) }
        return Datagram(
            bytes: Array(buffer[..<count]), source: source, sourceLength: length, address: address, port: port)
    }

    /// Sends `packet` back to where `datagram` came from, through `fd` (RFC 6762 §6.7).
    static func reply(_ packet: [UInt8], to datagram: Datagram, through fd: Int32) -> String? {
        var source = datagram.source
        let sent = packet.withUnsafeBytes { bytes in
            withUnsafePointer(to: &source) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, datagram.sourceLength)
                }
            }
        }
        return sent < 0 ? String(cString: strerror(errno)) : nil
    }

    func close(_ interface: String) {
        guard let entry = sockets.removeValue(forKey: interface) else { return }
        for fd in [entry.v4, entry.v6].compactMap({ $0 }) { _ = Glibc.close(fd) }
    }

    private static func send<Address>(_ fd: Int32, _ packet: [UInt8], to address: Address) -> String? {
        var address = address
        let sent = packet.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(
                        fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0,
                        socklen_t(MemoryLayout<Address>.size))
                }
            }
        }
        return sent < 0 ? String(cString: strerror(errno)) : nil
    }

    private static let groupV4: sockaddr_in = {
        var group = sockaddr_in()
        group.sin_family = sa_family_t(AF_INET)
        group.sin_port = in_port_t(5353).bigEndian
        group.sin_addr.s_addr = in_addr_t(0xE000_00FB).bigEndian
        return group
    }()

    private static func groupV6(_ index: UInt32) -> sockaddr_in6 {
        var group = sockaddr_in6()
        group.sin6_family = sa_family_t(AF_INET6)
        group.sin6_port = in_port_t(5353).bigEndian
        withUnsafeMutableBytes(of: &group.sin6_addr) { bytes in
            bytes.copyBytes(from: [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfb] as [UInt8])
        }
        group.sin6_scope_id = index
        return group
    }

    private static func option(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) -> Bool {
        var value = value
        return setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
    }

    private static func bind<Address>(_ fd: Int32, _ address: Address) -> Bool {
        var address = address
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) == 0
            }
        }
    }

    /// Linux's IP_MULTICAST_ALL and IPV6_MULTICAST_ALL (not in every libc's headers).
    private static let ipMulticastAll: Int32 = 49
    private static let ipv6MulticastAll: Int32 = 29

    private static func openV4(_ index: UInt32) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var request = ip_mreqn()
        request.imr_ifindex = Int32(index)
        var membership = ip_mreqn()
        membership.imr_multiaddr = groupV4.sin_addr
        membership.imr_ifindex = Int32(index)
        let ready =
            option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            && option(fd, Int32(IPPROTO_IP), ipMulticastAll, 0)
            && bind(fd, groupV4)
            && setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreqn>.size))
                == 0
            && setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &request, socklen_t(MemoryLayout<ip_mreqn>.size)) == 0
            && option(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, 255)
            && option(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, 0)
        if !ready { _ = Glibc.close(fd) }
        return ready ? fd : nil
    }

    private static func join(_ fd: Int32, _ index: UInt32) -> Bool {
        var membership = ipv6_mreq()
        membership.ipv6mr_multiaddr = groupV6(index).sin6_addr
        membership.ipv6mr_interface = index
        return setsockopt(
            fd, Int32(IPPROTO_IPV6), IPV6_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ipv6_mreq>.size)) == 0
    }

    private static func openV6(_ index: UInt32) -> Int32? {
        let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let ready =
            option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            && option(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
            && option(fd, Int32(IPPROTO_IPV6), ipv6MulticastAll, 0)
            && bind(fd, groupV6(index))
            && join(fd, index)
            && option(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_IF, Int32(index))
            && option(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, 255)
            && option(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, 0)
        if !ready { _ = Glibc.close(fd) }
        return ready ? fd : nil
    }
}
