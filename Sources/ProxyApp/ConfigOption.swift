import DNSServer
import DNSWire
import DiscoveryProxy

/// One configuration key, declared once (`AppConfiguration.options`): how its YAML value is
/// read into `AppConfiguration`, checked, printed by `--check-config`, and when a change takes
/// effect. The file reader, the unknown-key check, the command-line flags, validation,
/// rendering and the reload (which keys changed, which wait for a restart) all walk that table.
struct ConfigOption {
    /// The YAML key; dotted inside a section (`tcp.idle-timeout`).
    let key: String
    /// What it does, in a sentence or two: `--help` of its flag says it, and
    /// config/discovery-proxy.yaml's comment on the key says it too (a test checks).
    let help: String
    /// Reads a YAML (or flag) value into the configuration; problems go to the reader.
    let read: (inout ConfigReader, Any, String, inout AppConfiguration) -> Void
    /// Its lines for `--check-config`, unindented (`key: value`, or a block); empty: not printed.
    let render: (AppConfiguration, InterfaceTable) -> [String]
    /// Its problems, after the file and the flags are applied.
    let validate: (AppConfiguration, InterfaceTable) -> [ConfigError]
    /// When a changed value takes effect.
    let effect: Effect

    enum Effect: Equatable {
        /// At the reload (SIGHUP, `POST /reload`) that reads it.
        case reload
        /// Only when the daemon starts again; the reason says what holds the old value.
        case restart(because: String)
    }

    /// For a restart-only key: copies its value from the first configuration (the one the
    /// daemon started with) into the second (a reload's), so that nothing derived from it
    /// (the DNS Push port advertised, say) changes before the restart.
    let keep: (AppConfiguration, inout AppConfiguration) -> Void

    /// The section a dotted key belongs to (`tcp`), nil for a top-level key.
    var section: String? { key.firstIndex(of: ".").map { String(key[..<$0]) } }
    /// The key inside its section (`idle-timeout`).
    var name: String { key.firstIndex(of: ".").map { String(key[key.index(after: $0)...]) } ?? key }

    init(
        _ key: String, help: String,
        read: @escaping (inout ConfigReader, Any, String, inout AppConfiguration) -> Void,
        render: @escaping (AppConfiguration, InterfaceTable) -> [String],
        validate: @escaping (AppConfiguration, InterfaceTable) -> [ConfigError] = { _, _ in [] },
        effect: Effect = .reload, keep: @escaping (AppConfiguration, inout AppConfiguration) -> Void = { _, _ in }
    ) {
        self.key = key
        self.help = help
        self.read = read
        self.render = render
        self.validate = validate
        self.effect = effect
        self.keep = keep
    }

    /// A restart-only option's `keep` for the field it is read into.
    static func keeping<Value>(_ field: WritableKeyPath<AppConfiguration, Value>) -> (
        AppConfiguration, inout AppConfiguration
    ) -> Void {
        { started, reloaded in reloaded[keyPath: field] = started[keyPath: field] }
    }

    /// A check of one value: `ok`, or the reason it is wrong.
    struct Rule<Value> {
        let ok: (Value, AppConfiguration) -> Bool
        let reason: (AppConfiguration) -> String

        init(_ ok: @escaping (Value) -> Bool, _ reason: String) {
            self.ok = { value, _ in ok(value) }
            self.reason = { _ in reason }
        }

        init(_ ok: @escaping (Value, AppConfiguration) -> Bool, reason: @escaping (AppConfiguration) -> String) {
            self.ok = ok
            self.reason = reason
        }
    }

    /// How a scalar is read from YAML: the reader's typed accessors.
    enum Kind<Value> {
        case number, integer, boolean, text

        func read(_ reader: inout ConfigReader, _ value: Any, key: String) -> Value? {
            switch self {
            case .number: return reader.number(value, key: key) as? Value
            case .integer: return reader.integer(value, key: key) as? Value
            case .boolean: return reader.boolean(value, key: key) as? Value
            case .text: return reader.string(value, key: key) as? Value
            }
        }
    }

    /// How a file value is kept in the field that uses it: seconds as a number become a
    /// `Duration`, 0 becomes nil ("off"). The option converts; nothing else does.
    struct Unit<File, Stored> {
        let store: (File) -> Stored
        let file: (Stored) -> File
    }

    /// A scalar field: read by `kind`, converted by `unit` into the field, checked by `rules`
    /// (in the file's unit; the first failing rule reported), printed as `key: value` with an
    /// optional trailing comment.
    static func scalar<Value: CustomStringConvertible, Stored>(
        _ key: String, help: String, _ field: WritableKeyPath<AppConfiguration, Stored>, _ kind: Kind<Value>,
        _ unit: Unit<Value, Stored>, _ rules: [Rule<Value>] = [],
        comment: @escaping (AppConfiguration) -> String? = { _ in nil }, effect: Effect = .reload
    ) -> ConfigOption {
        ConfigOption(
            key, help: help,
            read: { reader, value, key, config in
                if let parsed = kind.read(&reader, value, key: key) { config[keyPath: field] = unit.store(parsed) }
            },
            render: { config, _ in
                let name = key.split(separator: ".").last.map(String.init) ?? key
                let value = unit.file(config[keyPath: field])
                return ["\(name): \(value)" + (comment(config).map { "  # \($0)" } ?? "")]
            },
            validate: { config, _ in
                let value = unit.file(config[keyPath: field])
                return rules.filter { !$0.ok(value, config) }.map {
                    ConfigError(key: key, value: "\(value)", reason: $0.reason(config))
                }
            }, effect: effect, keep: keeping(field))
    }

    /// A scalar field kept as the file gives it.
    static func scalar<Value: CustomStringConvertible>(
        _ key: String, help: String, _ field: WritableKeyPath<AppConfiguration, Value>, _ kind: Kind<Value>,
        _ rules: [Rule<Value>] = [], comment: @escaping (AppConfiguration) -> String? = { _ in nil },
        effect: Effect = .reload
    ) -> ConfigOption {
        scalar(key, help: help, field, kind, Unit(store: { $0 }, file: { $0 }), rules, comment: comment, effect: effect)
    }

    /// An optional text field, printed (quoted as given by `quote`) only when set.
    static func optionalText(
        _ key: String, help: String, _ field: WritableKeyPath<AppConfiguration, String?>, quote: Bool,
        _ rules: [Rule<String>] = [], effect: Effect = .reload
    ) -> ConfigOption {
        ConfigOption(
            key, help: help,
            read: { reader, value, key, config in
                if let text = reader.string(value, key: key) { config[keyPath: field] = text }
            },
            render: { config, _ in
                let name = key.split(separator: ".").last.map(String.init) ?? key
                return config[keyPath: field].map { ["\(name): " + (quote ? "\"\($0)\"" : $0)] } ?? []
            },
            validate: { config, _ in
                guard let value = config[keyPath: field] else { return [] }
                return rules.filter { !$0.ok(value, config) }.map {
                    ConfigError(key: key, value: value, reason: $0.reason(config))
                }
            }, effect: effect, keep: keeping(field))
    }
}

/// Typed access to YAML values that collects errors instead of stopping at the first.
struct ConfigReader {
    var errors: [ConfigError] = []

    mutating func string(_ value: Any, key: String) -> String? {
        if let text = value as? String { return text }
        if value is Int || value is Double { return "\(value)" }
        errors.append(ConfigError(key: key, value: "\(value)", reason: "expected a string"))
        return nil
    }

    mutating func number(_ value: Any, key: String) -> Double? {
        if let number = value as? Double { return number }
        if let number = value as? Int { return Double(number) }
        errors.append(ConfigError(key: key, value: "\(value)", reason: "expected a number"))
        return nil
    }

    mutating func integer(_ value: Any, key: String) -> Int? {
        if let number = value as? Int { return number }
        errors.append(ConfigError(key: key, value: "\(value)", reason: "expected a whole number"))
        return nil
    }

    mutating func boolean(_ value: Any, key: String) -> Bool? {
        if let flag = value as? Bool { return flag }
        errors.append(ConfigError(key: key, value: "\(value)", reason: "expected true or false"))
        return nil
    }

    mutating func domain(_ text: String, key: String) -> DNSName? {
        do {
            return try DNSName(text)
        } catch {
            errors.append(ConfigError(key: key, value: text, reason: "not a valid domain name: \(error)"))
            return nil
        }
    }

    mutating func mapping(_ value: Any, key: String) -> [String: Any]? {
        guard let mapping = value as? [String: Any] else {
            errors.append(ConfigError(key: key, value: "\(value)", reason: "expected a mapping"))
            return nil
        }
        return mapping
    }

    mutating func unknownKeys(_ mapping: [String: Any], known: Set<String>, prefix: String) {
        for key in mapping.keys.sorted() where !known.contains(key) {
            errors.append(ConfigError(key: prefix + key, reason: "unknown key"))
        }
    }

    /// A YAML list whose elements are parsed from their text; each bad element is one error
    /// naming `key[index]`, and the good ones are kept. Nil (and one error) when it is no list.
    mutating func list<Element>(
        _ value: Any, key: String, expected: String, element: String, _ parse: (String) -> Element?
    ) -> [Element]? {
        guard let items = value as? [Any] else {
            errors.append(ConfigError(key: key, value: "\(value)", reason: "expected \(expected)"))
            return nil
        }
        var parsed: [Element] = []
        for (index, item) in items.enumerated() {
            let text = "\(item)"
            if let value = parse(text) {
                parsed.append(value)
            } else {
                errors.append(ConfigError(key: "\(key)[\(index)]", value: text, reason: "expected \(element)"))
            }
        }
        return parsed
    }

    /// `private-realms`: a mapping of realm names to client prefix lists.
    mutating func privateRealms(_ value: Any, key: String) -> PrivateRealms? {
        guard let mapping = value as? [String: Any] else {
            errors.append(
                ConfigError(
                    key: key, value: "\(value)",
                    reason: "expected a mapping of realm names to client prefixes, e.g. {campus: [\"10.0.0.0/8\"]}"))
            return nil
        }
        return PrivateRealms(
            mapping.keys.sorted().map { name in
                PrivateRealms.Realm(name: name, clients: prefixes(mapping[name] ?? [], key: "\(key).\(name)"))
            })
    }

    mutating func nameServers(_ value: Any, key: String) -> [DNSName] {
        list(value, key: key, expected: "a list of domain names", element: "a domain name such as ns2.example.com.") {
            try? DNSName($0)
        } ?? []
    }

    mutating func prefixes(_ value: Any, key: String) -> [IPPrefix] {
        list(
            value, key: key, expected: "a list of prefixes",
            element: "a prefix such as 192.0.2.0/24 or 2001:db8::/64"
        ) { IPPrefix($0) } ?? []
    }

    /// `_ipp._tcp`-style service types: `_name` (RFC 6763 §7: up to 15 characters) then `_tcp` or `_udp`.
    mutating func serviceTypes(_ value: Any, key: String) -> [String] {
        list(
            value, key: key, expected: "a list of service types like _ipp._tcp",
            element: "a service type like _ipp._tcp (RFC 6763 §7)"
        ) { text in
            Self.isServiceType(text.lowercased().split(separator: ".", omittingEmptySubsequences: false)[...])
                ? text : nil
        } ?? []
    }

    /// `_name._tcp` or `_name._udp`, the name at most 15 characters (RFC 6763 §7), lowercased parts.
    static func isServiceType(_ parts: ArraySlice<Substring>) -> Bool {
        guard parts.count == 2, let name = parts.first, let proto = parts.last else { return false }
        return name.hasPrefix("_") && (2...16).contains(name.count) && (proto == "_tcp" || proto == "_udp")
    }

    /// A text field of a mapping; nil when absent or not text.
    private mutating func field(_ mapping: [String: Any], _ name: String, key: String) -> String? {
        mapping[name].flatMap { string($0, key: key) }
    }

    mutating func links(_ value: Any) -> [AppConfiguration.LinkSpec] {
        guard let items = value as? [Any] else {
            errors.append(ConfigError(key: "links", reason: "expected a list of {interface, domain} entries"))
            return []
        }
        var links: [AppConfiguration.LinkSpec] = []
        for (index, item) in items.enumerated() {
            let key = "links[\(index)]"
            guard let entry = item as? [String: Any] else {
                errors.append(
                    ConfigError(key: key, value: "\(item)", reason: "expected a mapping with interface and domain"))
                continue
            }
            unknownKeys(
                entry,
                known: [
                    "interface", "domain", "host-zone", "subnets", "services", "realm", "clients", "name-servers",
                    "announce",
                ], prefix: key + ".")
            guard let interface = field(entry, "interface", key: key + ".interface") else {
                errors.append(ConfigError(key: key + ".interface", reason: "missing"))
                continue
            }
            guard let domainText = field(entry, "domain", key: key + ".domain") else {
                errors.append(ConfigError(key: key + ".domain", reason: "missing"))
                continue
            }
            guard let zone = domain(domainText, key: key + ".domain") else { continue }
            let subnets = entry["subnets"].map { prefixes($0, key: key + ".subnets") }
            let filter = entry["services"].map { serviceFilter($0, key: key + ".services") } ?? ServiceFilter()
            var spec = AppConfiguration.LinkSpec(
                interface: interface, domain: zone, subnets: subnets, origin: key, services: filter,
                realm: field(entry, "realm", key: key + ".realm"),
                hostZone: field(entry, "host-zone", key: key + ".host-zone").flatMap {
                    domain($0, key: key + ".host-zone")
                },
                clients: entry["clients"].map { prefixes($0, key: key + ".clients") },
                nameServers: entry["name-servers"].map { nameServers($0, key: key + ".name-servers") })
            spec.announce = entry["announce"].map { announcements($0, key: key + ".announce") } ?? []
            links.append(spec)
        }
        return links
    }

    /// `services: {allow: [...], deny: [...]}`.
    mutating func serviceFilter(_ value: Any, key: String) -> ServiceFilter {
        guard let services = value as? [String: Any] else {
            errors.append(
                ConfigError(key: key, value: "\(value)", reason: "expected a mapping with allow and/or deny lists"))
            return ServiceFilter()
        }
        unknownKeys(services, known: ["allow", "deny"], prefix: key + ".")
        return ServiceFilter(
            allow: services["allow"].map { serviceTypes($0, key: key + ".allow") },
            deny: services["deny"].map { serviceTypes($0, key: key + ".deny") } ?? [])
    }

    /// `announce: [{from: lab1.example., services: {allow: [...], deny: [...]}}]`.
    mutating func announcements(_ value: Any, key: String) -> [Announcement] {
        guard let items = value as? [Any] else {
            errors.append(
                ConfigError(
                    key: key, value: "\(value)",
                    reason: "expected a list of {from: <another link's domain>, services: {allow: [...]}} entries"))
            return []
        }
        var announcements: [Announcement] = []
        for (index, item) in items.enumerated() {
            let key = "\(key)[\(index)]"
            guard let entry = item as? [String: Any] else {
                errors.append(
                    ConfigError(
                        key: key, value: "\(item)", reason: "expected a mapping with from (another link's domain)"))
                continue
            }
            unknownKeys(entry, known: ["from", "services", "subtypes"], prefix: key + ".")
            guard let text = field(entry, "from", key: key + ".from") else {
                errors.append(
                    ConfigError(
                        key: key + ".from", reason: "missing: the domain of the link whose services are announced"))
                continue
            }
            guard let from = domain(text, key: key + ".from") else { continue }
            let subtypes =
                entry["subtypes"].map { value in
                    list(
                        value, key: key + ".subtypes", expected: "a list of subtypes like _universal._sub._ipp._tcp",
                        element: "a subtype like _universal._sub._ipp._tcp (RFC 6763 §7.1)"
                    ) { text -> String? in
                        let parts = text.lowercased().split(separator: ".", omittingEmptySubsequences: false)
                        guard parts.count == 4, parts[0].hasPrefix("_"), (2...63).contains(parts[0].count),
                            parts[1] == "_sub",
                            Self.isServiceType(parts[2...])
                        else { return nil }
                        return text
                    } ?? []
                } ?? []
            announcements.append(
                Announcement(
                    from: from,
                    services: entry["services"].map { serviceFilter($0, key: key + ".services") } ?? ServiceFilter(),
                    subtypes: subtypes))
        }
        return announcements
    }
}

extension ConfigOption.Unit where File == Double, Stored == Duration {
    /// Seconds, to the millisecond (0.57 is 570 ms).
    static var seconds: Self { .init(store: { .configured(seconds: $0) }, file: { $0 / .seconds(1) }) }
}

extension ConfigOption.Unit where File == Double, Stored == Duration? {
    /// Seconds, 0 meaning none (no limit, off). A negative value is kept, for its rule to name.
    static var secondsOrOff: Self {
        .init(store: { $0 != 0 ? .configured(seconds: $0) : nil }, file: { ($0 ?? .zero) / .seconds(1) })
    }
}

extension ConfigOption.Unit where File == Int, Stored == UInt32 {
    /// A count of seconds in 32 bits (an SRP lease); a negative value is kept as 0, for its rule.
    static var uint32: Self { .init(store: { UInt32(clamping: $0) }, file: { Int($0) }) }
}

extension ConfigOption.Unit where File == Int, Stored == Duration {
    static var milliseconds: Self { .init(store: { .milliseconds($0) }, file: { Int($0 / .milliseconds(1)) }) }
}
