import DNSWire

/// Building DNS-SD names from what a user types, and showing them back.
///
/// An instance name is one label taken byte for byte (UTF-8, spaces and dots included), never
/// split on dots (RFC 6763 §4.3). Service types and domains are presentation-format names
/// (`\.`, `\\` and `\DDD` escapes, RFC 1035 §5.1); a malformed one names the part that is wrong.
public enum ServiceNames {
    /// A domain such as `lab1.example.` or `Building\0322.example`; a trailing dot is optional.
    public static func parseDomain(_ text: String) throws(DNSSDError) -> DNSName {
        let labels = try self.labels(of: text, kind: "domain")
        guard !labels.isEmpty else {
            throw .malformedName(kind: "domain", text: text, reason: "empty (the root cannot be browsed)")
        }
        return try self.name(labels, kind: "domain", text: text)
    }

    /// A service type such as `_ipp._tcp` or a subtype such as `_printer._sub._http._tcp`
    /// (RFC 6763 §7, §7.1): labels in front of the domain.
    public static func parseServiceType(_ text: String) throws(DNSSDError) -> [[UInt8]] {
        let labels = try self.labels(of: text, kind: "service type")
        func fail(_ reason: String) -> DNSSDError { .malformedName(kind: "service type", text: text, reason: reason) }
        guard labels.count >= 2 else { throw fail("expected _service._tcp or _service._udp") }
        let proto = labels[labels.count - 1]
        guard DNSName.labelsEqual(proto, Array("_tcp".utf8)) || DNSName.labelsEqual(proto, Array("_udp".utf8))
        else {
            throw fail("last label \"\(displayLabel(proto))\" must be _tcp or _udp")
        }
        let service = labels[labels.count - 2]
        guard service.first == UInt8(ascii: "_"), service.count >= 2 else {
            throw fail("service label \"\(displayLabel(service))\" must start with an underscore")
        }
        if labels.count > 2 {
            guard labels.count == 4, DNSName.labelsEqual(labels[1], Array("_sub".utf8)) else {
                throw fail("expected _service._proto or _subtype._sub._service._proto")
            }
        }
        return labels
    }

    /// An instance name as one label: its UTF-8 bytes, 1...63 octets, no control characters
    /// (RFC 6763 §4.1.1).
    public static func instanceLabel(_ text: String) throws(DNSSDError) -> [UInt8] {
        let bytes = Array(text.utf8)
        func fail(_ reason: String) -> DNSSDError { .malformedName(kind: "instance name", text: text, reason: reason) }
        guard !bytes.isEmpty else { throw fail("empty") }
        guard bytes.count <= 63 else { throw fail("\(bytes.count) octets in UTF-8 (at most 63)") }
        if let bad = bytes.first(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw fail("control character 0x\(String(bad, radix: 16, uppercase: true)) is not allowed")
        }
        return bytes
    }

    /// `<instance>.<type>.<domain>`, or `<type>.<domain>` without an instance.
    public static func serviceName(instance: [UInt8]?, type: [[UInt8]], domain: DNSName) throws(DNSSDError) -> DNSName {
        let head = (instance.map { [$0] } ?? []) + type
        do {
            return try domain.prepending(head)
        } catch {
            let text =
                (instance.map { displayLabel($0) + "." } ?? "") + type.map { displayLabel($0) }.joined(separator: ".")
            throw .malformedName(kind: "name", text: text + "." + display(domain), reason: reason(error))
        }
    }

    /// A name for people: labels as UTF-8 text, only `.` and `\` escaped (RFC 6763 §4.3), and
    /// control or invalid bytes as `\DDD`; with a trailing dot.
    public static func display(_ name: DNSName) -> String {
        if name.labels.isEmpty { return "." }
        return name.labels.map { displayLabel($0, escapeDots: true) }.joined(separator: ".") + "."
    }

    /// Labels joined for display, e.g. a service type `_ipp._tcp.`.
    public static func display(labels: [[UInt8]]) -> String {
        labels.map { displayLabel($0, escapeDots: true) }.joined(separator: ".") + "."
    }

    /// One label as text: unescaped by default (an instance name as the user knows it), with
    /// control characters and bytes that are not UTF-8 shown as `\DDD`.
    public static func displayLabel(_ label: [UInt8], escapeDots: Bool = false) -> String {
        var out = ""
        var index = 0
        while index < label.count {
            let byte = label[index]
            let length = utf8SequenceLength(label, at: index)
            if length > 1 {
                out += String(decoding: label[index..<index + length], as: UTF8.self)
                index += length
                continue
            }
            if byte < 0x20 || byte >= 0x7F {
                out += "\\" + String(repeating: "0", count: byte < 10 ? 2 : (byte < 100 ? 1 : 0)) + String(byte)
            } else if escapeDots && (byte == UInt8(ascii: ".") || byte == UInt8(ascii: "\\")) {
                out += "\\" + String(UnicodeScalar(byte))
            } else {
                out += String(UnicodeScalar(byte))
            }
            index += 1
        }
        return out
    }

    /// Length of a valid multi-byte UTF-8 sequence at `index`, else 1.
    static func utf8SequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return 1
        }
        guard index + length <= bytes.count else { return 1 }
        let slice = bytes[index..<index + length]
        guard String(validating: slice, as: UTF8.self) != nil else { return 1 }
        return length
    }

    /// Splits presentation text into raw labels with DNSWire's parser (the root `.` gives none),
    /// reporting empty labels and bad escapes by position.
    static func labels(of text: String, kind: String) throws(DNSSDError) -> [[UInt8]] {
        if text.isEmpty { throw .malformedName(kind: kind, text: text, reason: "empty") }
        do {
            return try DNSName.labels(presentation: text.utf8)
        } catch {
            throw .malformedName(kind: kind, text: text, reason: reason(error))
        }
    }

    /// A `DNSNameError` in words for people, labels shown as `display` shows them.
    static func reason(_ error: DNSNameError) -> String {
        switch error {
        case .emptyLabel(nil): return "starts with a dot (empty first label)"
        case .emptyLabel(let previous?):
            return "empty label after \"\(displayLabel(previous, escapeDots: true))\" (two dots in a row)"
        case .labelTooLong(let count, let label):
            return "label \"\(displayLabel(label, escapeDots: true))\" is \(count) octets (at most 63)"
        case .badEscape(_, _, .trailingBackslash): return "trailing backslash"
        case .badEscape(_, let offset, .needsThreeDigits):
            return "bad escape at offset \(offset): \\DDD needs three digits"
        case .badEscape(_, let offset, .outOfRange(let value)):
            return "bad escape \\\(value) at offset \(offset) (at most \\255)"
        case .nameTooLong: return error.description
        }
    }

    static func name(_ labels: [[UInt8]], kind: String, text: String) throws(DNSSDError) -> DNSName {
        do {
            return try DNSName(labels: labels)
        } catch {
            throw .malformedName(kind: kind, text: text, reason: reason(error))
        }
    }
}
