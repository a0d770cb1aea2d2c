import DNSWire
import Testing

@testable import MDNS

/// avahi's escaping (avahi-common/domain.c): `\.` and `\\`; `_ - 0-9 a-z A-Z` as they are;
/// every other byte as `\DDD`. No daemon needed.
@Suite("avahi name escaping")
struct AvahiNameTests {
    private func name(_ labels: [String]) throws -> DNSName {
        try DNSName(labels: labels.map { Array($0.utf8) })
    }

    @Test func plainNamesStayPlain() throws {
        #expect(AvahiName.escape(try self.name(["_ipp", "_tcp", "local"])) == "_ipp._tcp.local")
        #expect(AvahiName.escape(try self.name(["mdv-l", "local"])) == "mdv-l.local")
        #expect(AvahiName.escape(.root) == "")
    }

    @Test func dotsBackslashesSpacesAndUTF8() throws {
        #expect(AvahiName.escape(label: Array("Dot.ted".utf8)) == #"Dot\.ted"#)
        #expect(AvahiName.escape(label: Array(#"back\slash"#.utf8)) == #"back\\slash"#)
        #expect(AvahiName.escape(label: Array("a b".utf8)) == #"a\032b"#)
        #expect(AvahiName.escape(label: Array("ü".utf8)) == #"\195\188"#)
        #expect(AvahiName.escape(label: Array("(x)@y".utf8)) == #"\040x\041\064y"#)
        let instance = try self.name(["Dot.ted Printer ü", "_ipp", "_tcp", "local"])
        // What avahi-browse -p prints for the lab's printer.
        #expect(AvahiName.escape(instance) == #"Dot\.ted\032Printer\032\195\188._ipp._tcp.local"#)
    }

    @Test func unescapeAvahiText() throws {
        let parsed = try #require(AvahiName.unescape(Array(#"Dot\.ted\032Printer\032\195\188._ipp._tcp.local"#.utf8)))
        #expect(
            parsed.labels == [
                Array("Dot.ted Printer ü".utf8), Array("_ipp".utf8), Array("_tcp".utf8), Array("local".utf8),
            ])
        #expect(AvahiName.unescape(Array(#"a\\b.local."#.utf8))?.labels == [Array(#"a\b"#.utf8), Array("local".utf8)])
        // Unescaped UTF-8 and spaces (as avahi may also hand them out) pass through.
        #expect(
            AvahiName.unescape(Array("Zoë Printer.local".utf8))?.labels == [
                Array("Zoë Printer".utf8), Array("local".utf8),
            ])
        #expect(AvahiName.unescape(Array(".".utf8)) == .root)
        #expect(AvahiName.unescape([UInt8]()) == .root)
    }

    @Test func unescapeRejectsMalformedText() {
        #expect(AvahiName.unescape(Array(#"a\"#.utf8)) == nil)  // dangling backslash
        #expect(AvahiName.unescape(Array(#"a\25"#.utf8)) == nil)  // short \DDD
        #expect(AvahiName.unescape(Array(#"a\256.local"#.utf8)) == nil)  // > 255
        #expect(AvahiName.unescape(Array("a..local".utf8)) == nil)  // empty label
        #expect(AvahiName.unescape(Array(String(repeating: "x", count: 64).utf8)) == nil)  // label too long
    }

    @Test func roundTripIsByteExact() throws {
        let labels: [[UInt8]] = [
            Array("Dot.ted Printer ü".utf8), Array(#"\\."#.utf8), Array("日本語 プリンタ".utf8), Array("tab\there".utf8),
            Array("~!#$%^&*()+={}[]|:;\"'<>,?/`".utf8), [0x7F, 0x01], Array("_sub".utf8), Array("local".utf8),
        ]
        let name = try DNSName(labels: labels)
        let text = try #require(AvahiName.escape(name))
        #expect(text.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E })
        let back = try #require(AvahiName.unescape(Array(text.utf8)))
        #expect(back.labels == labels)
        for byte in UInt8(1)...UInt8(127) {
            let label = [UInt8(ascii: "x"), byte]
            #expect(AvahiName.unescape(Array(AvahiName.escape(label: label).utf8))?.labels == [label])
        }
    }

    @Test func namesAvahiCannotTakeAreRefused() throws {
        #expect(AvahiName.escape(try DNSName(labels: [[0x61, 0x00, 0x62], Array("local".utf8)])) == nil)  // NUL
        #expect(AvahiName.escape(try DNSName(labels: [[0xC3], Array("local".utf8)])) == nil)  // invalid UTF-8
        // The longest name that escapes every byte still fits AVAHI_DOMAIN_NAME_MAX.
        let wide = [UInt8](repeating: 0x20, count: 62)
        let longest = try #require(AvahiName.escape(try DNSName(labels: [wide, wide, wide, wide])))
        #expect(longest.utf8.count == 4 * 62 * 4 + 3)
    }
}
