import DNSWire

/// `dnssd-browse`'s view of a TXT attribute (DNSWire's `TXTEntry`).
extension TXTEntry {
    /// The value for display: UTF-8 text with control characters and invalid bytes as `\xHH`
    /// and a backslash as `\\`; nil for a boolean attribute.
    public var displayValue: String? {
        value.map(TXTRecord.displayBytes)
    }

    /// `key=value`, or `key` alone.
    public var description: String {
        displayValue.map { "\(key)=\($0)" } ?? key
    }
}

public enum TXTRecord {
    /// Parses TXT RDATA (length-prefixed strings) into entries with DNSWire's `TXTAttributes`:
    /// empty strings and strings beginning with `=` are skipped, only the first occurrence of a
    /// key counts, compared case-insensitively (RFC 6763 §6.4), and a string whose length byte
    /// runs past the end is taken as far as it goes.
    public static func parse(_ rdata: [UInt8]) -> [TXTEntry] {
        TXTAttributes.parse(rdata).map { TXTEntry(key: ServiceNames.displayLabel($0.key), bytes: $0.value) }
    }

    /// The character strings of TXT RDATA, as sent.
    public static func strings(_ rdata: [UInt8]) -> [[UInt8]] {
        TXTAttributes.strings(rdata)
    }

    static func displayBytes(_ bytes: [UInt8]) -> String {
        var out = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let length = ServiceNames.utf8SequenceLength(bytes, at: index)
            if length > 1 {
                out += String(decoding: bytes[index..<index + length], as: UTF8.self)
                index += length
                continue
            }
            if byte < 0x20 || byte >= 0x7F {
                let hex = String(byte, radix: 16, uppercase: true)
                out += "\\x" + (hex.count == 1 ? "0" : "") + hex
            } else if byte == UInt8(ascii: "\\") {
                out += "\\\\"
            } else {
                out += String(UnicodeScalar(byte))
            }
            index += 1
        }
        return out
    }
}
