/// The `key[=value]` attributes of TXT RDATA (RFC 6763 §6.3–6.5), as raw bytes; callers decide
/// how to show them.
public enum TXTAttributes {
    /// The character strings of TXT RDATA (length-prefixed), as sent. A string whose length
    /// byte runs past the end is taken as far as it goes.
    public static func strings(_ rdata: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var index = 0
        while index < rdata.count {
            let length = Int(rdata[index])
            let end = min(rdata.count, index + 1 + length)
            out.append(Array(rdata[(index + 1)..<end]))
            index = end
        }
        return out
    }

    /// Splits TXT RDATA into attributes: the key before the first `=`, and the value after it
    /// (nil for a boolean attribute without `=`, empty for `key=`). Empty strings (a lone zero
    /// byte, §6.1) and strings beginning with `=` (no key, §6.4) are skipped; only the first
    /// occurrence of a key counts, keys compared ASCII case-insensitively (§6.4).
    public static func parse(_ rdata: [UInt8]) -> [(key: [UInt8], value: [UInt8]?)] {
        var out: [(key: [UInt8], value: [UInt8]?)] = []
        var seen: Set<[UInt8]> = []
        for string in strings(rdata) {
            guard let first = string.first, first != UInt8(ascii: "=") else { continue }
            let key: [UInt8]
            let value: [UInt8]?
            if let equals = string.firstIndex(of: UInt8(ascii: "=")) {
                key = Array(string[..<equals])
                value = Array(string[(equals + 1)...])
            } else {
                key = string
                value = nil
            }
            guard seen.insert(key.map(DNSName.asciiLower)).inserted else { continue }
            out.append((key: key, value: value))
        }
        return out
    }
}

/// One `key[=value]` of a TXT record (RFC 6763 §6.3–6.5): the key as text, the value as the
/// bytes sent (nil for a boolean attribute without `=`, empty for `key=`). How a value is
/// shown is the caller's choice: `text` for the status page, `dnssd-browse`'s escaped form.
/// Encoded (status API) as `{"key": ..., "value": text}`, without `value` for a boolean.
public struct TXTEntry: Sendable, Hashable, Codable {
    public var key: String
    public var value: [UInt8]?

    public init(key: String, bytes: [UInt8]?) {
        self.key = key
        self.value = bytes
    }

    /// From text, as the status page and tests write it.
    public init(key: String, value: String?) {
        self.init(key: key, bytes: value.map { Array($0.utf8) })
    }

    /// The value as UTF-8 text, invalid bytes as replacement characters; nil for a boolean.
    public var text: String? { value.map { String(decoding: $0, as: UTF8.self) } }

    /// Every attribute of TXT RDATA, keys decoded as UTF-8 (`TXTAttributes.parse`).
    public static func parse(_ rdata: [UInt8]) -> [TXTEntry] {
        TXTAttributes.parse(rdata).map { TXTEntry(key: String(decoding: $0.key, as: UTF8.self), bytes: $0.value) }
    }

    private enum CodingKeys: String, CodingKey { case key, value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            key: try container.decode(String.self, forKey: .key),
            value: try container.decodeIfPresent(String.self, forKey: .value))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(key, forKey: .key)
        try container.encodeIfPresent(text, forKey: .value)
    }
}
