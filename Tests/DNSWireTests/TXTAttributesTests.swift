import DNSWire
import Testing

@Suite struct TXTAttributesTests {
    static func rdata(_ strings: [String]) -> [UInt8] { strings.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } }

    @Test func stringsAreSplitByTheirLengthBytes() {
        #expect(TXTAttributes.strings(Self.rdata(["a=b", "", "flag"])) == [Array("a=b".utf8), [], Array("flag".utf8)])
        #expect(TXTAttributes.strings([]).isEmpty)
        #expect(
            TXTAttributes.strings([10] + Array("a=b".utf8)) == [Array("a=b".utf8)],
            "a short last string keeps what is there")
    }

    @Test func keysAndValues() {
        let parsed = TXTAttributes.parse(Self.rdata(["rp=printers/one", "flag", "empty=", "key=val=ue"]))
        #expect(parsed.map(\.key) == ["rp", "flag", "empty", "key"].map { Array($0.utf8) })
        #expect(parsed.map(\.value) == [Array("printers/one".utf8), nil, [], Array("val=ue".utf8)])
    }

    @Test func rfc6763Section6_4Rules() {
        // Empty strings and strings without a key are skipped; the first of a key wins, in any case.
        let parsed = TXTAttributes.parse(Self.rdata(["", "=no-key", "Color=T", "color=F", "COLOR", "duplex"]))
        #expect(parsed.map(\.key) == [Array("Color".utf8), Array("duplex".utf8)])
        #expect(parsed.first?.value == Array("T".utf8))
        #expect(TXTAttributes.parse([0]).isEmpty)
    }

    @Test func valuesStayBinary() {
        let parsed = TXTAttributes.parse([8] + Array("bin=".utf8) + [0x00, 0x80, 0xFF, 0x3D])
        #expect(parsed.count == 1)
        #expect(parsed[0].value == [0x00, 0x80, 0xFF, 0x3D])
    }
}
