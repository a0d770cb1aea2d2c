/// YAML 1.1 scalar resolution, as Yams' default resolver did it: a plain scalar becomes the
/// first type whose form it has; a quoted or block scalar is a string. An explicit standard
/// tag (`!!int`, `!!float`, `!!bool`, `!!null`) chooses the type. libyaml's loader gives an
/// untagged scalar the `!!str` tag, so `!!str` on a plain scalar cannot be told from no tag:
/// it is resolved like one (quote the value to keep it a string).
enum ScalarResolution {
    static let tagPrefix = "tag:yaml.org,2002:"

    static func value(_ text: String, plain: Bool, tag: String?) -> Any {
        if let tag, tag.hasPrefix(tagPrefix) {
            switch tag.dropFirst(tagPrefix.count) {
            case "null": return YAMLNull()
            case "bool": return bool(text) ?? text
            case "int": return int(text) ?? text
            case "float": return float(text) ?? text
            default: break
            }
        }
        guard plain else { return text }
        if isNull(text) { return YAMLNull() }
        if let flag = bool(text) { return flag }
        if let number = int(text) { return number }
        if let number = float(text) { return number }
        return text
    }

    static func isNull(_ text: String) -> Bool {
        text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
    }

    static func bool(_ text: String) -> Bool? {
        switch text {
        case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON": true
        case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF": false
        default: nil
        }
    }

    /// `[-+]` then `0b…`, `0o…` or `0…` (octal), `0x…`, or decimal; `_` separates digits.
    static func int(_ text: String) -> Int? {
        var body = Substring(text)
        var negative = false
        if let sign = body.first, sign == "-" || sign == "+" {
            negative = sign == "-"
            body = body.dropFirst()
        }
        guard let first = body.first, first.isASCII, first.isNumber else { return nil }
        let radix: Int
        if body.hasPrefix("0b") {
            radix = 2
            body = body.dropFirst(2)
        } else if body.hasPrefix("0x") {
            radix = 16
            body = body.dropFirst(2)
        } else if body.hasPrefix("0o") {
            radix = 8
            body = body.dropFirst(2)
        } else if body.count > 1, body.hasPrefix("0") {
            radix = 8
            body = body.dropFirst()
        } else {
            radix = 10
        }
        let digits = body.filter { $0 != "_" }
        guard !digits.isEmpty, digits.first != "+", digits.first != "-",
            let magnitude = Int(digits, radix: radix)
        else { return nil }
        return negative ? -magnitude : magnitude
    }

    /// Decimal with an optional fraction and exponent, `.inf`, `.nan`; `_` separates digits.
    static func float(_ text: String) -> Double? {
        switch text {
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .infinity
        case "-.inf", "-.Inf", "-.INF": return -.infinity
        case ".nan", ".NaN", ".NAN": return .nan
        default: break
        }
        let cleaned = text.filter { $0 != "_" }
        guard cleaned.contains(where: \.isNumber),
            cleaned.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) })
        else { return nil }
        return Double(cleaned)
    }
}
