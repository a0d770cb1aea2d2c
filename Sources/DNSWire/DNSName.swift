/// A domain name, kept as its uncompressed wire form: length-prefixed raw labels and the root
/// octet, in one array.
///
/// Labels are kept as bytes, never as dotted text, so that an instance name such as
/// `Dot.ted Printer` stays one label (RFC 6763 §4.3) and UTF-8 passes through untouched
/// (RFC 8766 §5.5.4: no Punycode or other translation). Comparison and hashing are
/// ASCII case-insensitive, as DNS requires (RFC 1035 §2.3.3).
///
/// One allocation per name, not one per label: the proxy holds several names for every
/// instance it knows (owner, SRV target, their `.local` originals), so this is most of its
/// memory per instance. Length octets are at most 63, below `A` (65), so lowering every byte
/// of two wire forms compares the names label by label.
public struct DNSName: Sendable, CustomStringConvertible {
    /// The uncompressed wire form, root octet included: always at least `[0]`.
    public let wireBytes: [UInt8]

    public static let root = DNSName(uncheckedWire: [0])

    /// Validating initializer: each label 1...63 octets, whole name at most 255 octets on the wire.
    public init(labels: [[UInt8]]) throws(DNSNameError) {
        self = try DNSName.root.prepending(labels)
    }

    /// From a wire form already known to be well formed (labels 1...63, root octet, ≤ 255).
    init(uncheckedWire wire: [UInt8]) {
        self.wireBytes = wire
    }

    /// This name kept in `bytes` when they are exactly its wire form, else itself: lets a
    /// holder of both (a PTR record's RDATA and its decoded target) keep one array, not two.
    public func sharingStorage(with bytes: [UInt8]) -> DNSName {
        bytes == wireBytes ? DNSName(uncheckedWire: bytes) : self
    }

    /// Parses presentation format: `\.` and `\\` escapes, `\DDD` decimal bytes (RFC 1035 §5.1).
    /// A trailing dot is optional; every name is taken as absolute.
    public init(_ text: String) throws(DNSNameError) {
        try self.init(presentation: text.utf8)
    }

    /// The same parser over bytes, for text that need not be valid UTF-8 (avahi's names).
    public init(presentation bytes: some Collection<UInt8>) throws(DNSNameError) {
        var wire = try DNSName.relativeWire(presentation: bytes)
        wire.append(0)
        guard wire.count <= 255 else { throw .nameTooLong(wire.count) }
        self.wireBytes = wire
    }

    /// Splits presentation format into raw labels, checking escapes and each label (1...63
    /// octets) but not the length of the whole name, so that it also serves relative names
    /// such as a service type. `.` and the empty text give no labels (the root).
    public static func labels(presentation input: some Collection<UInt8>) throws(DNSNameError) -> [[UInt8]] {
        DNSName.split(try DNSName.relativeWire(presentation: input)[...])
    }

    /// Presentation text as length-prefixed labels without the root octet.
    private static func relativeWire(presentation input: some Collection<UInt8>) throws(DNSNameError) -> [UInt8] {
        let bytes = Array(input)
        if bytes == [UInt8(ascii: ".")] { return [] }
        func badEscape(at offset: Int, _ problem: DNSNameError.EscapeProblem) -> DNSNameError {
            .badEscape(text: String(decoding: bytes, as: UTF8.self), offset: offset, problem)
        }
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        var wire: [UInt8] = [0]
        wire.reserveCapacity(bytes.count + 2)
        var labelStart = 0  // offset of the current label's length octet
        var previousStart: Int?
        /// Closes the current label: fills in its length octet and opens the next one.
        func closeLabel() throws(DNSNameError) {
            let length = wire.count - labelStart - 1
            guard length > 0 else {
                throw .emptyLabel(after: previousStart.map { Array(wire[($0 + 1)..<labelStart]) })
            }
            guard length <= 63 else { throw .labelTooLong(length, label: Array(wire[(labelStart + 1)...])) }
            wire[labelStart] = UInt8(length)
            previousStart = labelStart
            labelStart = wire.count
            wire.append(0)
        }
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
                    wire.append(UInt8(value))
                    index += 4
                } else {
                    wire.append(next)
                    index += 2
                }
            } else if byte == UInt8(ascii: ".") {
                try closeLabel()
                index += 1
            } else {
                wire.append(byte)
                index += 1
            }
        }
        if wire.count > labelStart + 1 {
            try closeLabel()
        }
        wire.removeLast()  // the length octet of a label never begun
        return wire
    }

    /// Length on the wire, uncompressed.
    public var wireLength: Int { wireBytes.count }

    public var isRoot: Bool { wireBytes.count == 1 }

    /// The raw labels, one array each. Allocates: prefer the name's own operations.
    public var labels: [[UInt8]] { DNSName.split(wireBytes.dropLast()) }

    /// How many labels the name has (0 for the root).
    public var labelCount: Int {
        var count = 0
        var index = 0
        while wireBytes[index] != 0 {
            count += 1
            index += Int(wireBytes[index]) + 1
        }
        return count
    }

    /// The first label (nil for the root), without splitting the rest.
    public var firstLabel: ArraySlice<UInt8>? {
        isRoot ? nil : wireBytes[1...Int(wireBytes[0])]
    }

    /// Length-prefixed labels (no root octet) as arrays of raw bytes.
    private static func split(_ wire: ArraySlice<UInt8>) -> [[UInt8]] {
        var labels: [[UInt8]] = []
        var index = wire.startIndex
        while index < wire.endIndex {
            let length = Int(wire[index])
            labels.append(Array(wire[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
        return labels
    }

    /// Presentation format with a trailing dot; `.`, `\`, and bytes outside 0x21...0x7E escaped
    /// the way dig prints them (`\032` for a space, `\195\188` for ü).
    public var description: String {
        if isRoot { return "." }
        var out = ""
        var index = 0
        while wireBytes[index] != 0 {
            let length = Int(wireBytes[index])
            DNSName.escape(wireBytes[(index + 1)...(index + length)], into: &out)
            out.append(".")
            index += 1 + length
        }
        return out
    }

    /// One label in presentation format, escaped as in `description`.
    public static func escape(_ label: [UInt8]) -> String {
        var out = ""
        escape(label[...], into: &out)
        return out
    }

    private static func escape(_ label: ArraySlice<UInt8>, into out: inout String) {
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
    }

    /// Where `suffix` starts in `wireBytes`, or nil when `self` is neither `suffix` nor below it.
    private func offset(ofSuffix suffix: DNSName) -> Int? {
        let offset = wireBytes.count - suffix.wireBytes.count
        guard offset >= 0 else { return nil }
        var index = 0
        while index < offset { index += Int(wireBytes[index]) + 1 }
        guard index == offset else { return nil }  // not on a label boundary
        return DNSName.equalIgnoringASCIICase(wireBytes[offset...], suffix.wireBytes[...]) ? offset : nil
    }

    /// True when `self` equals `suffix` or lies below it.
    public func isSubdomain(of suffix: DNSName) -> Bool {
        offset(ofSuffix: suffix) != nil
    }

    /// The labels in front of `suffix`, or nil when `self` is not under `suffix`.
    public func labels(before suffix: DNSName) -> [[UInt8]]? {
        guard let offset = offset(ofSuffix: suffix) else { return nil }
        return DNSName.split(wireBytes[0..<offset])
    }

    /// Replaces the suffix `old` with `new`; nil when `self` is not under `old` or the result is too long.
    public func replacingSuffix(_ old: DNSName, with new: DNSName) -> DNSName? {
        guard let offset = offset(ofSuffix: old), offset + new.wireBytes.count <= 255 else { return nil }
        var wire: [UInt8] = []
        wire.reserveCapacity(offset + new.wireBytes.count)
        wire.append(contentsOf: wireBytes[0..<offset])
        wire.append(contentsOf: new.wireBytes)
        return DNSName(uncheckedWire: wire)
    }

    /// `prefix` labels prepended to `self`; throws when the result is too long.
    /// Validates each label (1...63 octets), then the whole name (at most 255 octets).
    public func prepending(_ prefix: [[UInt8]]) throws(DNSNameError) -> DNSName {
        var wire: [UInt8] = []
        wire.reserveCapacity(prefix.reduce(wireBytes.count) { $0 + $1.count + 1 })
        for (index, label) in prefix.enumerated() {
            guard !label.isEmpty else { throw .emptyLabel(after: index == 0 ? nil : prefix[index - 1]) }
            guard label.count <= 63 else { throw .labelTooLong(label.count, label: label) }
            wire.append(UInt8(label.count))
            wire.append(contentsOf: label)
        }
        wire.append(contentsOf: wireBytes)
        guard wire.count <= 255 else { throw .nameTooLong(wire.count) }
        return DNSName(uncheckedWire: wire)
    }

    /// The name with its first label removed (root stays root).
    public var parent: DNSName {
        isRoot ? self : DNSName(uncheckedWire: Array(wireBytes[(Int(wireBytes[0]) + 1)...]))
    }

    /// The name with its first `count` labels removed (the root when it has no more).
    public func dropping(labels count: Int) -> DNSName {
        var index = 0
        for _ in 0..<count where wireBytes[index] != 0 {
            index += Int(wireBytes[index]) + 1
        }
        return index == 0 ? self : DNSName(uncheckedWire: Array(wireBytes[index...]))
    }

    /// ASCII case-insensitive label comparison (RFC 1035 §2.3.3; RFC 6763 §7.1 subtypes).
    public static func labelsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool { equalIgnoringASCIICase(a[...], b[...]) }

    /// A label with ASCII letters lowered: a set or dictionary key that compares as
    /// `labelsEqual` does.
    public static func lowercased(label: [UInt8]) -> [UInt8] { label.map(asciiLower) }

    /// Byte strings equal but for ASCII case: labels, or whole wire forms (their length
    /// octets, at most 63, are never letters).
    static func equalIgnoringASCIICase(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
    }

    @inline(__always)
    static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}

extension DNSName: Hashable {
    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        equalIgnoringASCIICase(lhs.wireBytes[...], rhs.wireBytes[...])
    }

    /// Lowered bytes, eight to a word: one combine per word rather than per byte.
    public func hash(into hasher: inout Hasher) {
        let wire = wireBytes
        hasher.combine(wire.count)
        var word: UInt64 = 0
        var shift: UInt64 = 0
        for byte in wire {
            word |= UInt64(DNSName.asciiLower(byte)) << shift
            shift += 8
            if shift == 64 {
                hasher.combine(word)
                word = 0
                shift = 0
            }
        }
        hasher.combine(word)
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
