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
        for (index, label) in labels.enumerated() {
            guard !label.isEmpty else { throw .emptyLabel(after: index == 0 ? nil : labels[index - 1]) }
            guard label.count <= 63 else { throw .labelTooLong(label.count, label: label) }
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
        try self.init(labels: DNSName.labels(presentation: text.utf8))
    }

    /// The same parser over bytes, for text that need not be valid UTF-8 (avahi's names).
    public init(presentation bytes: some Collection<UInt8>) throws(DNSNameError) {
        try self.init(labels: DNSName.labels(presentation: bytes))
    }

    /// Splits presentation format into raw labels, checking escapes and each label (1...63
    /// octets) but not the length of the whole name, so that it also serves relative names
    /// such as a service type. `.` and the empty text give no labels (the root).
    public static func labels(presentation input: some Collection<UInt8>) throws(DNSNameError) -> [[UInt8]] {
        let bytes = Array(input)
        if bytes == [UInt8(ascii: ".")] { return [] }
        func badEscape(at offset: Int, _ problem: DNSNameError.EscapeProblem) -> DNSNameError {
            .badEscape(text: String(decoding: bytes, as: UTF8.self), offset: offset, problem)
        }
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\") {
                guard index + 1 < bytes.count else { throw badEscape(at: index, .trailingBackslash) }
                let next = bytes[index + 1]
                if isDigit(next) {
                    guard index + 3 < bytes.count, bytes[index + 1...index + 3].allSatisfy(isDigit) else {
                        throw badEscape(at: index, .needsThreeDigits)
                    }
                    let value = bytes[index + 1...index + 3].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
                    guard value <= 255 else { throw badEscape(at: index, .outOfRange(value)) }
                    current.append(UInt8(value))
                    index += 4
                } else {
                    current.append(next)
                    index += 2
                }
            } else if byte == UInt8(ascii: ".") {
                guard !current.isEmpty else { throw .emptyLabel(after: labels.last) }
                labels.append(current)
                current = []
                index += 1
            } else {
                current.append(byte)
                index += 1
            }
        }
        if !current.isEmpty { labels.append(current) }
        for label in labels where label.count > 63 {
            throw .labelTooLong(label.count, label: label)
        }
        return labels
    }

    /// Length on the wire, uncompressed.
    public var wireLength: Int { labels.reduce(1) { $0 + $1.count + 1 } }

    public var isRoot: Bool { labels.isEmpty }

    /// Presentation format with a trailing dot; `.`, `\`, and bytes outside 0x21...0x7E escaped
    /// the way dig prints them (`\032` for a space, `\195\188` for ü).
    public var description: String {
        if labels.isEmpty { return "." }
        return labels.map(DNSName.escape).joined(separator: ".") + "."
    }

    /// One label in presentation format, escaped as in `description`.
    public static func escape(_ label: [UInt8]) -> String {
        var out = ""
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

/// What is wrong with a name; each case carries enough to point at the offending part.
public enum DNSNameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An empty label: after the label `after`, or the first label when `after` is nil.
    case emptyLabel(after: [UInt8]?)
    /// A label over 63 octets: its length and the label itself.
    case labelTooLong(Int, label: [UInt8])
    /// The whole name over 255 octets on the wire.
    case nameTooLong(Int)
    /// A backslash escape that does not parse; `offset` is the backslash's byte offset in `text`.
    case badEscape(text: String, offset: Int, EscapeProblem)

    public enum EscapeProblem: Equatable, Sendable {
        /// A backslash as the last character.
        case trailingBackslash
        /// `\D` or `\DD`: a decimal escape needs exactly three digits.
        case needsThreeDigits
        /// `\DDD` above 255.
        case outOfRange(Int)
    }

    public var description: String {
        switch self {
        case .emptyLabel(nil): return "empty first label (starts with a dot)"
        case .emptyLabel(let previous?):
            return "empty label after \"\(DNSName.escape(previous))\" (two dots in a row)"
        case .labelTooLong(let n, let label): return "label \"\(DNSName.escape(label))\" of \(n) octets (at most 63)"
        case .nameTooLong(let n): return "name of \(n) octets on the wire (at most 255)"
        case .badEscape(let text, let offset, .trailingBackslash):
            return "bad escape in \"\(text)\": trailing backslash at offset \(offset)"
        case .badEscape(let text, let offset, .needsThreeDigits):
            return "bad escape in \"\(text)\" at offset \(offset): \\DDD needs three digits"
        case .badEscape(let text, let offset, .outOfRange(let value)):
            return "bad escape in \"\(text)\" at offset \(offset): \\\(value) is above \\255"
        }
    }
}
