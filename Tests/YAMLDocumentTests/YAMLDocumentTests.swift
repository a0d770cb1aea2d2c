import Testing
import YAMLDocument

@Suite("YAML documents (libyaml), resolved as Yams resolved them")
struct YAMLDocumentTests {
    func root(_ text: String) throws -> [String: Any] {
        try #require(try YAMLDocument.load(text) as? [String: Any])
    }

    @Test("plain scalars: booleans, integers, floats, null; quoted and block scalars stay strings")
    func scalars() throws {
        let r = try root(
            """
            a: true
            b: no
            c: On
            d: 42
            e: -0x1F
            f: 0o17
            g: 1_000
            h: 0.8
            i: 1e3
            j: .inf
            k: ~
            l:
            m: "true"
            n: '42'
            o: lab1.example.
            p: 2001:db8::1
            q: |
              two
              lines
            r: 08
            s: !!str 7
            t: !!int "7"
            """)
        #expect(r["a"] as? Bool == true && r["b"] as? Bool == false && r["c"] as? Bool == true)
        #expect(r["d"] as? Int == 42 && r["e"] as? Int == -31 && r["f"] as? Int == 15 && r["g"] as? Int == 1000)
        #expect(r["h"] as? Double == 0.8 && r["i"] as? Double == 1000 && r["j"] as? Double == .infinity)
        #expect(r["k"] is YAMLNull && r["l"] is YAMLNull)
        #expect(r["m"] as? String == "true" && r["n"] as? String == "42")
        #expect(r["o"] as? String == "lab1.example." && r["p"] as? String == "2001:db8::1")
        #expect(r["q"] as? String == "two\nlines\n")
        #expect(r["r"] as? Double == 8, "not octal: a float, as YAML 1.1 reads it")
        #expect(r["s"] as? Int == 7, "libyaml cannot tell !!str on a plain scalar from no tag")
        #expect(r["t"] as? Int == 7)
    }

    @Test("sequences, nested mappings, flow style, anchors and << merges")
    func structure() throws {
        let r = try root(
            """
            listen: ["[::]:53", 0.0.0.0:53]
            defaults: &d {services: {deny: [_ssh._tcp]}, realm: office}
            links:
              - interface: eth1
                <<: *d
                realm: lab
              - {interface: eth2, <<: *d}
            """)
        #expect(r["listen"] as? [String] == ["[::]:53", "0.0.0.0:53"])
        let links = try #require(r["links"] as? [[String: Any]])
        #expect(links.count == 2)
        #expect(links[0]["realm"] as? String == "lab", "the mapping's own key wins over a merged one")
        #expect(links[1]["realm"] as? String == "office")
        #expect((links[1]["services"] as? [String: Any])?["deny"] as? [String] == ["_ssh._tcp"])
        #expect(links[0]["<<"] == nil)
    }

    @Test("an empty document is nil; a bare scalar is itself")
    func roots() throws {
        #expect(try YAMLDocument.load("") == nil)
        #expect(try YAMLDocument.load("# only a comment\n") == nil)
        #expect(try YAMLDocument.load("hello") as? String == "hello")
    }

    @Test("a syntax error names its line and column")
    func errors() throws {
        do {
            _ = try YAMLDocument.load("links:\n  - interface: eth1\n    domain: a: b\n")
            Issue.record("no error")
        } catch {
            #expect(error.line == 3)
            #expect(error.description.hasPrefix("line 3, column "), "\(error)")
            #expect(error.description.contains("mapping values are not allowed"), "\(error)")
        }
    }

    @Test("aliases nested without end (a billion laughs) are refused, not expanded")
    func aliasBomb() throws {
        var text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1..<12 {
            text +=
                "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
                + "]\n"
        }
        #expect(throws: YAMLError.self) { try YAMLDocument.load(text) }
    }
}
