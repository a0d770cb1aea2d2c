import DNSWire
import Testing

@Suite struct DNSNameTests {
    @Test func parsesDecimalEscapesAsOneLabel() throws {
        let parsed = try DNSName(#"My\032Printer._ipp._tcp.lab1.example."#)
        #expect(
            parsed.labels == [
                Array("My Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8),
                Array("lab1".utf8), Array("example".utf8),
            ])
        #expect(parsed.description == #"My\032Printer._ipp._tcp.lab1.example."#)
    }

    @Test func escapedDotStaysInsideTheLabel() throws {
        let parsed = try DNSName(#"Dot\.ted\032Printer._ipp._tcp.example"#)
        #expect(parsed.labels.count == 4)
        #expect(parsed.labels[0] == Array("Dot.ted Printer".utf8))
        #expect(parsed.description == #"Dot\.ted\032Printer._ipp._tcp.example."#)
        #expect(try DNSName(parsed.description) == parsed)
    }

    @Test func backslashRoundTrips() throws {
        let parsed = try DNSName(#"Back\\slash.example."#)
        #expect(parsed.labels[0] == Array(#"Back\slash"#.utf8))
        #expect(parsed.description == #"Back\\slash.example."#)
    }

    @Test func utf8IsKeptAsBytesAndPrintedLikeDig() throws {
        let parsed = try DNSName("Drucker Küche._ipp._tcp.example.")
        #expect(parsed.labels[0] == Array("Drucker Küche".utf8))
        #expect(parsed.description == #"Drucker\032K\195\188che._ipp._tcp.example."#)
        #expect(try DNSName(parsed.description) == parsed)
    }

    @Test func rootAndCaseInsensitiveEquality() throws {
        #expect(try DNSName(".") == DNSName.root)
        #expect(DNSName.root.description == ".")
        #expect(DNSName.root.wireBytes == [0])
        #expect(try DNSName("WWW.Example.COM") == DNSName("www.example.com."))
        #expect(try DNSName("WWW.Example.COM").hashValue == DNSName("www.example.com.").hashValue)
    }

    @Test func rejectsBadText() {
        #expect(throws: DNSNameError.emptyLabel(after: Array("a".utf8))) { try DNSName("a..b") }
        let x64 = [UInt8](repeating: UInt8(ascii: "x"), count: 64)
        #expect(throws: DNSNameError.labelTooLong(64, label: x64)) {
            try DNSName(String(repeating: "x", count: 64) + ".example")
        }
        #expect(throws: DNSNameError.self) { try DNSName(#"bad\2"#) }
        #expect(throws: DNSNameError.self) { try DNSName(#"bad\256x"#) }
        let long = Array(repeating: String(repeating: "x", count: 63), count: 4).joined(separator: ".")
        #expect(throws: DNSNameError.nameTooLong(257)) { try DNSName(long) }
    }

    @Test func errorsSayWhereTheTextIsWrong() {
        #expect(throws: DNSNameError.emptyLabel(after: nil)) { try DNSName(".a") }
        #expect(throws: DNSNameError.emptyLabel(after: Array("a.b".utf8))) { try DNSName(#"a\.b..c"#) }
        #expect(throws: DNSNameError.badEscape(text: #"a\"#, offset: 1, .trailingBackslash)) { try DNSName(#"a\"#) }
        #expect(throws: DNSNameError.badEscape(text: #"a\12.b"#, offset: 1, .needsThreeDigits)) {
            try DNSName(#"a\12.b"#)
        }
        #expect(throws: DNSNameError.badEscape(text: #"ab\300"#, offset: 2, .outOfRange(300))) {
            try DNSName(#"ab\300"#)
        }
        #expect(throws: DNSNameError.badEscape(text: #"a\\\"#, offset: 3, .trailingBackslash)) {
            try DNSName(presentation: Array(#"a\\\"#.utf8))
        }
        #expect(DNSNameError.emptyLabel(after: nil).description == "empty first label (starts with a dot)")
        #expect(
            DNSNameError.emptyLabel(after: Array("a.b".utf8)).description
                == #"empty label after "a\.b" (two dots in a row)"#)
        #expect(
            DNSNameError.labelTooLong(64, label: [UInt8](repeating: 0x78, count: 64)).description.contains("64 octets"))
        #expect(DNSNameError.badEscape(text: #"a\12"#, offset: 1, .needsThreeDigits).description.contains("offset 1"))
    }

    @Test func labelsOfRelativeNamesSkipTheWholeNameLimit() throws {
        #expect(try DNSName.labels(presentation: Array(".".utf8)).isEmpty)
        #expect(try DNSName.labels(presentation: [UInt8]()).isEmpty)
        #expect(try DNSName.labels(presentation: Array(#"_printer._sub._http._tcp."#.utf8)).count == 4)
        let long = Array(repeating: String(repeating: "x", count: 63), count: 4).joined(separator: ".")
        #expect(try DNSName.labels(presentation: Array(long.utf8)).count == 4)
        #expect(throws: DNSNameError.nameTooLong(257)) { try DNSName(presentation: Array(long.utf8)) }
    }

    @Test func wireBytesRoundTripThroughLDNS() throws {
        let original = try DNSName(#"Dot\.ted\032Printer.Drucker\032K\195\188che.example."#)
        let wire = original.wireBytes
        #expect(wire.count == original.wireLength)
        #expect(Array(wire.prefix(16)) == [15] + Array("Dot.ted Printer".utf8))
        let decoded = try DNSName(wire: wire)
        #expect(decoded.labels == original.labels)
    }

    @Test func wireInitRejectsGarbage() {
        #expect(throws: DNSWireError.self) { try DNSName(wire: []) }
        #expect(throws: DNSWireError.self) { try DNSName(wire: [3, 0x61, 0x62]) }  // runs past the end
        #expect(throws: DNSWireError.self) { try DNSName(wire: [1, 0x61, 0, 0]) }  // trailing octet
        #expect(throws: DNSWireError.self) { try DNSName(wire: [64] + Array(repeating: 0x61, count: 64) + [0]) }
    }

    @Test func suffixOperationsWorkOnLabelBoundariesOnly() throws {
        let zone = try DNSName("Example.")
        let name = try DNSName(#"My\032Printer._ipp._tcp.example."#)
        #expect(name.isSubdomain(of: zone))
        #expect(name.isSubdomain(of: name))
        #expect(name.isSubdomain(of: .root))
        #expect(!(try DNSName("xexample.")).isSubdomain(of: zone))  // same bytes, not a label boundary
        #expect(!(try DNSName(#"a\005example.com."#)).isSubdomain(of: try DNSName("example.com.")))
        #expect(!zone.isSubdomain(of: name))
        #expect(name.labels(before: zone) == [Array("My Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8)])
        #expect(name.labels(before: try DNSName("other.")) == nil)
        let local = try #require(name.replacingSuffix(zone, with: try DNSName("local.")))
        #expect(local.description == #"My\032Printer._ipp._tcp.local."#)
        let wide = try DNSName(labels: Array(repeating: [UInt8](repeating: 0x78, count: 63), count: 3))
        let label63 = try DNSName(labels: [[UInt8](repeating: 0x79, count: 63)])
        #expect(wide.replacingSuffix(.root, with: label63) == nil)  // 257 octets
        #expect(wide.replacingSuffix(.root, with: try DNSName("y.")) != nil)
    }

    @Test func labelCountParentAndDropping() throws {
        let name = try DNSName("a.b.c.")
        #expect(name.labelCount == 3)
        #expect(DNSName.root.labelCount == 0)
        #expect(name.firstLabel.map(Array.init) == Array("a".utf8))
        #expect(DNSName.root.firstLabel == nil)
        #expect(name.parent == (try DNSName("b.c.")))
        #expect(DNSName.root.parent == .root)
        #expect(name.dropping(labels: 2) == (try DNSName("c.")))
        #expect(name.dropping(labels: 9) == .root)
        #expect(name.dropping(labels: 0) == name)
        #expect(try name.prepending([Array("x y".utf8)]).description == #"x\032y.a.b.c."#)
        #expect(throws: DNSNameError.emptyLabel(after: nil)) { try name.prepending([[]]) }
    }

    @Test func equalNamesHashEquallyWhateverTheirCase() throws {
        let pairs = [
            ("A.EXAMPLE.", "a.example."), (#"Caf\195\169.Lab1.example."#, #"caf\195\169.lab1.EXAMPLE."#),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZ.x.", "abcdefghijklmnopqrstuvwxyz.X."),
        ]
        for (a, b) in pairs {
            #expect(try DNSName(a) == DNSName(b))
            #expect(try DNSName(a).hashValue == DNSName(b).hashValue)
        }
        #expect(try DNSName("ab.c.") != DNSName("a.bc."))  // same letters, other labels
        #expect(try DNSName(#"\195\169.x."#) != DNSName(#"\195\137.x."#))  // only ASCII folds (é vs É)
    }
}
