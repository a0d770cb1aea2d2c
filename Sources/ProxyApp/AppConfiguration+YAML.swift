import DNSServer
import DNSWire
import DiscoveryProxy
import YAMLDocument

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AppConfiguration {
    /// Reads the YAML file (see config/discovery-proxy.yaml for every key). Returns what could
    /// be read together with every problem found (unknown keys, values of the wrong type), so
    /// that validation can still report on the rest.
    public static func load(file path: String) -> (AppConfiguration, [ConfigError]) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            return (
                AppConfiguration(),
                [
                    ConfigError(
                        key: "--config", value: path, reason: "cannot read file: \(SystemText.reason(error))",
                        isWholeFile: true)
                ]
            )
        }
        return parse(yaml: text, source: path)
    }

    public static func parse(yaml text: String, source: String = "config") -> (AppConfiguration, [ConfigError]) {
        let document: Any?
        do {
            document = try YAMLDocument.load(text)
        } catch {
            return (
                AppConfiguration(), [ConfigError(key: source, reason: "not valid YAML: \(error)", isWholeFile: true)]
            )
        }
        var config = AppConfiguration()
        guard let document else { return (config, []) }  // an empty file is all defaults
        guard let root = document as? [String: Any] else {
            return (
                config,
                [ConfigError(key: source, reason: "expected a mapping of keys at the top level", isWholeFile: true)]
            )
        }
        var reader = ConfigReader()
        config.read(root, with: &reader)
        return (config, reader.errors)
    }

    /// Reads every key of `options` present in `root` (sections as nested mappings), after
    /// reporting the keys none of them declares.
    mutating func read(_ root: [String: Any], with reader: inout ConfigReader) {
        let options = Self.options
        let sections = Set(options.compactMap(\.section))
        reader.unknownKeys(
            root, known: Set(options.filter { $0.section == nil }.map(\.key)).union(sections), prefix: "")
        var mappings: [String: [String: Any]] = [:]
        var seen = Set<String>()
        for section in options.compactMap(\.section) where seen.insert(section).inserted {
            guard let value = root[section], let mapping = reader.mapping(value, key: section) else { continue }
            reader.unknownKeys(
                mapping, known: Set(options.filter { $0.section == section }.map(\.name)), prefix: section + ".")
            mappings[section] = mapping
        }
        for option in options {
            let value = option.section.map { mappings[$0]?[option.name] } ?? root[option.key]
            if let value { option.read(&reader, value, option.key, &self) }
        }
    }

    /// Applies a command-line flag's value through the option declared for `key` (the YAML
    /// key); problems are named after the flag (`--push-max-sessions`).
    public mutating func apply(_ key: String, flag: String, _ value: Any) -> [ConfigError] {
        guard let option = Self.option(key) else { preconditionFailure("no configuration option \(key)") }
        var reader = ConfigReader()
        option.read(&reader, value, flag, &self)
        return reader.errors
    }

    /// Validation problems that are only echoes of a reading error are left out: no "no link
    /// configured" when a link entry was unreadable, no "no listen address" when every listen
    /// entry was.
    public static func withoutEchoes(_ validation: [ConfigError], of readErrors: [ConfigError]) -> [ConfigError] {
        // An unreadable file leaves only defaults to validate: their problems are not the file's.
        if readErrors.contains(where: \.isWholeFile) { return [] }
        return validation.filter { problem in
            !readErrors.contains { $0.key.hasPrefix(problem.key + "[") || $0.key.hasPrefix("--" + problem.key) }
        }
    }
}
