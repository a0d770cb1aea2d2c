import DNSWire

/// An IPv4 or IPv6 network prefix, such as a link's subnet.
public struct IPPrefix: Hashable, Sendable, CustomStringConvertible {
    /// 4 or 16 bytes, host bits zeroed.
    public let address: [UInt8]
    public let length: Int

    public init?(address: [UInt8], length: Int) {
        guard address.count == 4 || address.count == 16, length >= 0, length <= address.count * 8 else { return nil }
        var masked = address
        for i in 0..<masked.count {
            let bitsHere = max(0, min(8, length - i * 8))
            masked[i] &= bitsHere == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - bitsHere))
        }
        self.address = masked
        self.length = length
    }

    public var isIPv4: Bool { address.count == 4 }

    public func contains(_ other: [UInt8]) -> Bool {
        guard other.count == address.count else { return false }
        return IPPrefix(address: other, length: length)?.address == address
    }

    /// Whether every address of `other` is inside this prefix.
    public func contains(_ other: IPPrefix) -> Bool {
        length <= other.length && contains(other.address)
    }

    /// 169.254/16 and fe80::/10: not usable by off-link clients (RFC 8766 §5.5.2).
    public static func isLinkLocal(_ address: [UInt8]) -> Bool {
        if address.count == 4 { return address[0] == 169 && address[1] == 254 }
        if address.count == 16 { return address[0] == 0xFE && (address[1] & 0xC0) == 0x80 }
        return false
    }

    public var isLinkLocal: Bool { IPPrefix.isLinkLocal(address) }

    /// 127.0.0.0/8 and ::1: this host.
    public static let loopback = [IPPrefix("127.0.0.0/8")!, IPPrefix("::1/128")!]

    public static func isLoopback(_ address: [UInt8]) -> Bool { loopback.contains { $0.contains(address) } }

    /// The reverse-mapping zone that covers this prefix, rounded out to an octet (IPv4) or
    /// nibble (IPv6) boundary: 192.0.2.0/24 → `2.0.192.in-addr.arpa.` (RFC 8766 §5.4).
    public var reverseZone: DNSName {
        reverseName(units: isIPv4 ? length / 8 : length / 4)
    }

    /// The subnet base address fully reversed, the parent of the address-based domain
    /// enumeration names: 192.0.2.0/24 → `0.2.0.192.in-addr.arpa.` (RFC 6763 §11, RFC 8766 §5.2.1).
    public var enumerationDomain: DNSName {
        reverseName(units: isIPv4 ? 4 : 32)
    }

    /// Whether `name` is a whole address in reverse form (four decimal labels under
    /// `in-addr.arpa.`, 32 nibbles under `ip6.arpa.`). Only such names hold records, a PTR
    /// (RFC 1035 §3.5, RFC 3596 §2.5); shorter names are empty non-terminals of the tree.
    public static func isReverseAddress(_ name: DNSName) -> Bool {
        let labels = name.labels
        guard labels.count >= 2 else { return false }
        let family = labels[labels.count - 2]
        let units = labels.dropLast(2)
        if DNSName.labelsEqual(family, Array("in-addr".utf8)) {
            return units.count == 4 && units.allSatisfy(isOctet)
        }
        if DNSName.labelsEqual(family, Array("ip6".utf8)) {
            return units.count == 32 && units.allSatisfy { $0.count == 1 && isHexDigit($0[0]) }
        }
        return false
    }

    private static func isOctet(_ label: [UInt8]) -> Bool {
        guard (1...3).contains(label.count), label.allSatisfy({ (0x30...0x39).contains($0) }) else { return false }
        return label.reduce(0) { $0 * 10 + Int($1 - 0x30) } <= 255
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte | 0x20)
    }

    private func reverseName(units: Int) -> DNSName {
        var labels: [[UInt8]] = []
        if isIPv4 {
            for i in 0..<units { labels.insert(Array(String(address[i]).utf8), at: 0) }
            labels += [Array("in-addr".utf8), Array("arpa".utf8)]
        } else {
            let hex = Array("0123456789abcdef".utf8)
            for i in 0..<units {
                let byte = address[i / 2]
                let nibble = i % 2 == 0 ? byte >> 4 : byte & 0x0F
                labels.insert([hex[Int(nibble)]], at: 0)
            }
            labels += [Array("ip6".utf8), Array("arpa".utf8)]
        }
        // Never too long: at most 34 short labels.
        return (try? DNSName(labels: labels)) ?? .root
    }

    public var description: String { "\(IPPrefix.format(address))/\(length)" }

    /// An address as text (`IPAddressText`, RFC 5952 for IPv6).
    public static func format(_ address: [UInt8]) -> String { IPAddressText.format(address) }

    /// Parses `192.0.2.0/24` or `2001:db8::/64`.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let length = Int(parts[1]), let address = IPPrefix.parseAddress(String(parts[0])) else {
            return nil
        }
        self.init(address: address, length: length)
    }

    /// Parses an IPv4 or IPv6 address into 4 or 16 bytes.
    public static func parseAddress(_ text: String) -> [UInt8]? {
        if text.contains(":") { return parseIPv6(text) }
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var out: [UInt8] = []
        for octet in octets {
            guard !octet.isEmpty, octet.count <= 3, let value = UInt8(octet) else { return nil }
            out.append(value)
        }
        return out
    }

    private static func parseIPv6(_ text: String) -> [UInt8]? {
        // Split at "::" (at most one) without Foundation.
        let chars = Array(text)
        var halves: [String] = []
        var start = 0
        var i = 0
        while i < chars.count - 1 {
            if chars[i] == ":" && chars[i + 1] == ":" {
                halves.append(String(chars[start..<i]))
                start = i + 2
                i += 2
            } else {
                i += 1
            }
        }
        halves.append(String(chars[min(start, chars.count)...]))
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            for group in part.split(separator: ":", omittingEmptySubsequences: false) {
                guard !group.isEmpty, group.count <= 4, let value = UInt16(group, radix: 16) else { return nil }
                out.append(value)
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        var all = head
        if halves.count == 2 {
            guard let tail = groups(halves[1]), head.count + tail.count < 8 else { return nil }
            all += Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        }
        guard all.count == 8 else { return nil }
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }
}
