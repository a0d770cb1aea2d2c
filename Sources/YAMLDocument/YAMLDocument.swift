import CYAML

/// A YAML document read by libyaml into the plain Swift values the configuration reader walks:
/// `[String: Any]`, `[Any]`, `String`, `Int`, `Double`, `Bool`, and `YAMLNull`.
///
/// Plain scalars are resolved as YAML 1.1's core types were by Yams, which this replaces
/// (Yams links all of Foundation, and with it ICU): `true/yes/on`, `false/no/off`, `~`/`null`/
/// empty, integers (`0x`, `0o`, `0b`, `_` separators), floats (`.inf`, `.nan`). Quoted and
/// block scalars are strings, as are timestamps (no key of ours is a date). Aliases are
/// followed, and `<<` merges a mapping's keys into the one that holds it.
public enum YAMLDocument {
    /// The first document's root value; nil for an empty document.
    public static func load(_ text: String) throws(YAMLError) -> Any? {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { throw YAMLError(problem: "cannot start the YAML parser") }
        defer { yaml_parser_delete(&parser) }
        let bytes = Array(text.utf8)
        var document = yaml_document_t()
        let loaded = bytes.withUnsafeBufferPointer { buffer -> Int32 in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            return yaml_parser_load(&parser, &document)
        }
        guard loaded == 1 else { throw YAMLError(parser) }
        defer { yaml_document_delete(&document) }
        guard let root = yaml_document_get_root_node(&document) else { return nil }
        var reader = NodeReader(document: &document)
        let value = reader.value(of: root, depth: 0)
        guard reader.budget >= 0 else {
            throw YAMLError(
                problem: "the document expands to more than \(NodeReader.maxValues) values through its aliases")
        }
        return value
    }
}

/// The null value (`~`, `null`, or nothing after a key).
public struct YAMLNull: Sendable, Equatable, CustomStringConvertible {
    public var description: String { "null" }
}

/// What libyaml could not read, with its place: "line 3, column 7: mapping values are not
/// allowed in this context".
public struct YAMLError: Error, Sendable, CustomStringConvertible {
    public var problem: String
    public var line: Int?
    public var column: Int?

    init(problem: String, line: Int? = nil, column: Int? = nil) {
        self.problem = problem
        self.line = line
        self.column = column
    }

    init(_ parser: yaml_parser_t) {
        let problem = parser.problem.map { String(cString: $0) } ?? "cannot be read"
        let context = parser.context.map { String(cString: $0) }
        // libyaml counts from 0.
        self.init(
            problem: context.map { "\(problem) (\($0))" } ?? problem,
            line: Int(parser.problem_mark.line) + 1, column: Int(parser.problem_mark.column) + 1)
    }

    public var description: String {
        guard let line, let column else { return problem }
        return "line \(line), column \(column): \(problem)"
    }
}

/// Turns libyaml's node graph into values. Aliases are node indices libyaml shares, so each
/// use is copied: a budget of values keeps a hostile document (a billion laughs) from growing
/// without end, and a depth limit keeps the recursion shallow.
private struct NodeReader {
    let document: UnsafeMutablePointer<yaml_document_t>
    static let maxDepth = 64
    /// Far above any configuration file: one with 1,000 links has about 10,000.
    static let maxValues = 200_000
    var budget = maxValues

    init(document: UnsafeMutablePointer<yaml_document_t>) { self.document = document }

    mutating func value(of node: UnsafeMutablePointer<yaml_node_t>, depth: Int) -> Any {
        budget -= 1
        guard depth < Self.maxDepth, budget >= 0 else { return YAMLNull() }
        switch node.pointee.type {
        case YAML_SCALAR_NODE:
            let scalar = node.pointee.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            let tag = node.pointee.tag.map { String(cString: $0) }
            return ScalarResolution.value(text, plain: scalar.style == YAML_PLAIN_SCALAR_STYLE, tag: tag)
        case YAML_SEQUENCE_NODE:
            var items: [Any] = []
            var item = node.pointee.data.sequence.items.start
            while let current = item, current != node.pointee.data.sequence.items.top {
                if let child = yaml_document_get_node(document, current.pointee) {
                    items.append(value(of: child, depth: depth + 1))
                }
                item = current + 1
            }
            return items
        case YAML_MAPPING_NODE:
            var mapping: [String: Any] = [:]
            var merged: [[String: Any]] = []
            var pair = node.pointee.data.mapping.pairs.start
            while let current = pair, current != node.pointee.data.mapping.pairs.top {
                defer { pair = current + 1 }
                guard let keyNode = yaml_document_get_node(document, current.pointee.key),
                    let valueNode = yaml_document_get_node(document, current.pointee.value)
                else { continue }
                let key = "\(value(of: keyNode, depth: depth + 1))"
                let child = value(of: valueNode, depth: depth + 1)
                if key == "<<", keyNode.pointee.data.scalar.style == YAML_PLAIN_SCALAR_STYLE {
                    if let one = child as? [String: Any] { merged.append(one) }
                    if let many = child as? [Any] { merged += many.compactMap { $0 as? [String: Any] } }
                    continue
                }
                mapping[key] = child
            }
            // Keys of the mapping itself win over merged ones; earlier merged ones over later.
            for source in merged {
                for (key, value) in source where mapping[key] == nil { mapping[key] = value }
            }
            return mapping
        default:
            return YAMLNull()
        }
    }
}
