/// A minimal JSON value with a fixed key order, so `--json` output is stable byte for byte.
/// Foundation's `JSONEncoder` keeps no key order (only `.sortedKeys`, alphabetical), and the
/// documented order of `--json` output (`Output`) is part of the CLI's interface.
public indirect enum JSONValue: Sendable, Hashable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null
    case array([JSONValue])
    /// Keys in the order they are written.
    case members([Member])

    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
    }

    /// An object from `(key, value)` pairs, in the order given.
    public static func object(_ pairs: [(String, JSONValue)]) -> JSONValue {
        .members(pairs.map { Member(key: $0.0, value: $0.1) })
    }

    /// Compact JSON text (RFC 8259), UTF-8 kept as is, control characters escaped.
    public var rendered: String {
        var out = ""
        self.write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .string(let text): Self.writeString(text, to: &out)
        case .int(let value): out += String(value)
        case .bool(let value): out += value ? "true" : "false"
        case .null: out += "null"
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .members(let members):
            out += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                Self.writeString(member.key, to: &out)
                out += ":"
                member.value.write(to: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
