import DNSWire

/// Converts between `DNSName` (raw label bytes) and avahi's textual domain names.
///
/// avahi's rules (avahi-common/domain.c, 0.8): `avahi_escape_label` writes `.` and `\` as
/// `\.` and `\\`, keeps `_`, `-`, `0-9`, `a-z`, `A-Z` as they are, and writes every other byte
/// (space, `@`, each byte of a UTF-8 sequence, ...) as `\DDD` in decimal. `avahi_unescape_label`
/// accepts `\.`, `\\` and `\DDD` (1...255), rejects any other backslash pair, rejects `\000`,
/// and rejects a label that is not valid UTF-8. So labels with NUL bytes or invalid UTF-8
/// cannot be asked for through avahi at all.
enum AvahiName {
    /// avahi's `AVAHI_DOMAIN_NAME_MAX`, including the terminating NUL.
    static let maxTextLength = 1014

    /// The escaped text of one label, exactly as `avahi_escape_label` produces it.
    static func escape(label: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(label.count)
        for byte in label {
            switch byte {
            case UInt8(ascii: "."), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "\\"))
                out.append(UInt8(ascii: "0") + byte / 100)
                out.append(UInt8(ascii: "0") + (byte / 10) % 10)
                out.append(UInt8(ascii: "0") + byte % 10)
            }
        }
        // Only ASCII was written.
        return String(decoding: out, as: UTF8.self)
    }

    /// The name as avahi text (labels joined by `.`, no trailing dot; `""` for the root), or nil
    /// when avahi would reject it: a label with a NUL byte or invalid UTF-8, or text too long.
    static func escape(_ name: DNSName) -> String? {
        var parts: [String] = []
        parts.reserveCapacity(name.labels.count)
        for label in name.labels {
            guard !label.contains(0), String(validating: label, as: UTF8.self) != nil else { return nil }
            parts.append(self.escape(label: label))
        }
        let text = parts.joined(separator: ".")
        guard text.utf8.count < self.maxTextLength else { return nil }
        return text
    }

    /// Parses avahi text into labels. Accepts what `avahi_unescape_label` accepts plus, leniently,
    /// `\x` for any other character x (taken literally): DNS presentation format, byte for byte.
    /// A trailing dot is optional; `""` and `"."` are the root. Nil for an empty inner label, a
    /// bad escape, or an invalid `DNSName`.
    static func unescape<Bytes: Collection<UInt8>>(_ text: Bytes) -> DNSName? {
        try? DNSName(presentation: text)
    }

    /// Parses the NUL-terminated text avahi hands to a callback; copies it.
    static func unescape(cString: UnsafePointer<CChar>) -> DNSName? {
        let length = strlenBytes(cString)
        return cString.withMemoryRebound(to: UInt8.self, capacity: length) { pointer in
            self.unescape(UnsafeBufferPointer(start: pointer, count: length))
        }
    }

    private static func strlenBytes(_ pointer: UnsafePointer<CChar>) -> Int {
        var length = 0
        while pointer[length] != 0 { length += 1 }
        return length
    }
}
