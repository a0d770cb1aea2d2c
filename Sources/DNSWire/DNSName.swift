/// A domain name as a list of raw labels.
///
/// Labels are kept as bytes, never as dotted text, so that an instance name such as
/// `Dot.ted Printer` stays one label (RFC 6763 §4.3) and UTF-8 passes through untouched
/// (RFC 8766 §5.5.4: no Punycode or other translation). Comparison and hashing are
/// ASCII case-insensitive, as DNS requires (RFC 1035 §2.3.3).
public struct DNSName: Sendable, CustomStringConvertible {
    public private(set) var labels: [[UInt8]]

    public static let root = DNSName(uncheckedLabels: [])

    /// Validating initializer: each label 1...63 octets, whole name at most 255 octets on the wire.
    public init(labels: [[UInt8]]) throws(DNSNameError) {
        var wireLength = 1
        for label in labels {
            guard !label.isEmpty else { throw .emptyLabel }
            guard label.count <= 63 else { throw .labelTooLong(label.count) }
            wireLength += label.count + 1
        }
        guard wireLength <= 255 else { throw .nameTooLong(wireLength) }
        self.labels = labels
    }

    init(uncheckedLabels: [[UInt8]]) {
        self.labels = uncheckedLabels
    }

    /// Parses presentation format: `\.` and `\\` escapes, `\DDD` decimal bytes (RFC 1035 §5.1).
    /// A trailing dot is optional; every name is taken as absolute.
    public init(_ text: String) throws(DNSNameError) {
        try self.init(presentation: text.utf8, text: text)
    }

    /// The same parser over bytes, for text that need not be valid UTF-8 (avahi's names).
    public init(presentation bytes: some Collection<UInt8>) throws(DNSNameError) {
        try self.init(presentation: bytes, text: nil)
    }

    private init(presentation input: some Collection<UInt8>, text: String?) throws(DNSNameError) {
        let bytes = Array(input)
        func badEscape() -> DNSNameError { .badEscape(text ?? String(decoding: bytes, as: UTF8.self)) }
        if bytes == [UInt8(ascii: ".")] {
            self = .root
            return
        }
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\") {
                index += 1
                guard index < bytes.count else { throw badEscape() }
                let next = bytes[index]
                if next >= UInt8(ascii: "0") && next <= UInt8(ascii: "9") {
                    guard index + 2 < bytes.count else { throw badEscape() }
                    var value = 0
                    for digit in bytes[index...index + 2] {
                        guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { throw badEscape() }
                        value = value * 10 + Int(digit - UInt8(ascii: "0"))
                    }
                    guard value <= 255 else { throw badEscape() }
                    current.append(UInt8(value))
                    index += 3
                } else {
                    current.append(next)
                    index += 1
                }
            } else if byte == UInt8(ascii: ".") {
                guard !current.isEmpty else { throw .emptyLabel }
                labels.append(current)
                current = []
                index += 1
            } else {
                current.append(byte)
                index += 1
            }
        }
        if !current.isEmpty { labels.append(current) }
        try self.init(labels: labels)
    }

    /// Length on the wire, uncompressed.
    public var wireLength: Int { labels.reduce(1) { $0 + $1.count + 1 } }

    public var isRoot: Bool { labels.isEmpty }

    /// Presentation format with a trailing dot; `.`, `\`, and bytes outside 0x21...0x7E escaped
    /// the way dig prints them (`\032` for a space, `\195\188` for ü).
    public var description: String {
        if labels.isEmpty { return "." }
        var out = ""
        for label in labels {
            for byte in label {
                switch byte {
                case UInt8(ascii: "."), UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: ";"),
                    UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "@"), UInt8(ascii: "$"):
                    out.append("\\")
                    out.append(Character(Unicode.Scalar(byte)))
                case 0x21...0x7E:
                    out.append(Character(Unicode.Scalar(byte)))
                default:
                    let digits = String(byte)
                    out.append("\\" + String(repeating: "0", count: 3 - digits.count) + digits)
                }
            }
            out.append(".")
        }
        return out
    }

    /// True when `self` equals `suffix` or lies below it.
    public func isSubdomain(of suffix: DNSName) -> Bool {
        guard suffix.labels.count <= labels.count else { return false }
        let offset = labels.count - suffix.labels.count
        for i in 0..<suffix.labels.count where !DNSName.labelEqual(labels[offset + i], suffix.labels[i]) {
            return false
        }
        return true
    }

    /// The labels in front of `suffix`, or nil when `self` is not under `suffix`.
    public func labels(before suffix: DNSName) -> [[UInt8]]? {
        guard isSubdomain(of: suffix) else { return nil }
        return Array(labels[0..<(labels.count - suffix.labels.count)])
    }

    /// Replaces the suffix `old` with `new`; nil when `self` is not under `old` or the result is too long.
    public func replacingSuffix(_ old: DNSName, with new: DNSName) -> DNSName? {
        guard let head = labels(before: old) else { return nil }
        return try? DNSName(labels: head + new.labels)
    }

    /// `prefix` labels prepended to `self`; throws when the result is too long.
    public func prepending(_ prefix: [[UInt8]]) throws(DNSNameError) -> DNSName {
        try DNSName(labels: prefix + labels)
    }

    /// The name with its first label removed (root stays root).
    public var parent: DNSName {
        labels.isEmpty ? self : DNSName(uncheckedLabels: Array(labels.dropFirst()))
    }

    /// ASCII case-insensitive label comparison (RFC 1035 §2.3.3; RFC 6763 §7.1 subtypes).
    public static func labelsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool { labelEqual(a, b) }

    static func labelEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count where asciiLower(a[i]) != asciiLower(b[i]) {
            return false
        }
        return true
    }

    @inline(__always)
    static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}

extension DNSName: Hashable {
    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        guard lhs.labels.count == rhs.labels.count else { return false }
        for i in 0..<lhs.labels.count where !labelEqual(lhs.labels[i], rhs.labels[i]) {
            return false
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(labels.count)
        for label in labels {
            hasher.combine(label.count)
            for byte in label { hasher.combine(DNSName.asciiLower(byte)) }
        }
    }
}

public enum DNSNameError: Error, Equatable, Sendable, CustomStringConvertible {
    case emptyLabel
    case labelTooLong(Int)
    case nameTooLong(Int)
    case badEscape(String)

    public var description: String {
        switch self {
        case .emptyLabel: return "empty label (two dots in a row)"
        case .labelTooLong(let n): return "label of \(n) octets (at most 63)"
        case .nameTooLong(let n): return "name of \(n) octets on the wire (at most 255)"
        case .badEscape(let text): return "bad escape in \"\(text)\""
        }
    }
}
