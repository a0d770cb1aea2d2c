import DNSWire
import Testing

@Suite struct RDataTests {
    static let target = name(#"prnt.local."#)

    static let cases: [(RRType, RData)] = [
        (.a, .a([203, 0, 113, 2])),
        (.aaaa, .aaaa([0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])),
        (.ptr, .ptr(name(#"Dot\.ted\032Printer._ipp._tcp.local."#))),
        (.cname, .cname(name("alias.example."))),
        (.ns, .ns(name("ns1.example."))),
        (.dname, .dname(name("other.example."))),
        (.mx, .mx(preference: 10, exchange: name("mail.example."))),
        (.srv, .srv(priority: 0, weight: 0, port: 631, target: target)),
        (.txt, .txt([0x00])),
        (.txt, .txt([3] + Array("k=v".utf8) + [5] + Array("=a=b=".utf8))),
        (
            .soa,
            .soa(
                .init(
                    mname: name("ns1.example."), rname: name(#"host\.master.example."#), serial: 0,
                    refresh: 7200, retry: 3600, expire: 1_209_600, minimum: 10
                )
            )
        ),
        (.nsec, .nsec(next: name(#"My\032Printer.local."#), types: [.txt, .srv])),
        (.nsec, .nsec(next: name("x.local."), types: [.a, .aaaa, .rrsig, .nsec, RRType(1234), RRType(65534)])),
        (.nsec, .nsec(next: name("x.local."), types: [])),
        (.hinfo, .raw([3] + Array("CPU".utf8) + [2] + Array("OS".utf8))),
        (RRType(65280), .raw([0xde, 0xad, 0xbe, 0xef, 0x00, 0xc0, 0x0c])),
    ]

    @Test(arguments: cases.indices)
    func roundTripsThroughWireBytes(_ index: Int) throws {
        let (type, rdata) = Self.cases[index]
        let wire = try rdata.wireBytes()
        let decoded = try RData(type: type, wire: wire)
        #expect(decoded == rdata)
        #expect(try decoded.wireBytes() == wire)
    }

    @Test func srvFromAvahiBytes() throws {
        // priority 0, weight 0, port 631, target prnt.local (uncompressed, as avahi hands it over)
        let wire = hex("0000 0000 0277 0470726e74 056c6f63616c 00")
        #expect(try RData(type: .srv, wire: wire) == .srv(priority: 0, weight: 0, port: 631, target: Self.target))
    }

    @Test func txtStaysByteExact() throws {
        let binary: [UInt8] = [4, 0x00, 0xff, 0x3d, 0x0a, 1, 0x3d, 0]
        #expect(try RData(type: .txt, wire: binary) == .txt(binary))
        #expect(try RData(type: .txt, wire: [0]) == .txt([0]))
        // RDLENGTH 0 stays empty: the proxy maps it to [0] itself.
        #expect(try RData(type: .txt, wire: []) == .txt([]))
        #expect(try RData.txt([]).wireBytes() == [])
    }

    @Test func largeTXTStaysByteExact() throws {
        var wire: [UInt8] = []
        var byte: UInt8 = 0
        while wire.count + 256 <= 9000 {
            wire.append(255)
            for _ in 0..<255 {
                wire.append(byte)
                byte &+= 37
            }
        }
        let rest = 9000 - wire.count - 1
        wire.append(UInt8(rest))
        wire.append(contentsOf: Array(repeating: 0x3d, count: rest))
        #expect(wire.count == 9000)
        let decoded = try RData(type: .txt, wire: wire)
        #expect(decoded == .txt(wire))
        #expect(try decoded.wireBytes() == wire)
    }

    @Test func unknownTypeIsRaw() throws {
        let bytes: [UInt8] = [1, 2, 3]
        #expect(try RData(type: RRType(65000), wire: bytes) == .raw(bytes))
        #expect(try RData(type: .a, wire: []) == .raw([]))
    }

    @Test func rejectsRDATAThatDoesNotMatchTheType() {
        #expect(throws: DNSWireError.self) { try RData(type: .a, wire: [1, 2, 3]) }
        #expect(throws: DNSWireError.self) { try RData(type: .a, wire: [1, 2, 3, 4, 5]) }
        #expect(throws: DNSWireError.self) { try RData(type: .aaaa, wire: [1, 2, 3, 4]) }
        #expect(throws: DNSWireError.self) { try RData(type: .ptr, wire: [4, 0x61, 0x62]) }
        #expect(throws: DNSWireError.self) { try RData(type: .ptr, wire: [1, 0x61, 0, 0xff]) }
        #expect(throws: DNSWireError.self) { try RData(type: .srv, wire: [0, 0, 0, 0, 2]) }
        #expect(throws: DNSWireError.self) { try RData(type: .txt, wire: [5, 0x61]) }
        #expect(throws: DNSWireError.self) { try RData(type: .nsec, wire: [0, 0, 0]) }  // window length 0
        #expect(throws: DNSWireError.self) { try RData(type: .nsec, wire: [0, 1, 6, 0, 2, 0x40]) }  // windows unordered
    }

    @Test func rejectsValuesThatCannotBeEncoded() {
        #expect(throws: DNSWireError.self) { try RData.a([1, 2, 3]).wireBytes() }
        #expect(throws: DNSWireError.self) { try RData.aaaa([1]).wireBytes() }
        #expect(throws: DNSWireError.self) { try RData.raw(Array(repeating: 0, count: 65536)).wireBytes() }
    }

    @Test func nsecBitmapMatchesRFC4034Example() throws {
        // RFC 4034 §4.3: A MX RRSIG NSEC TYPE1234
        let rfcBitmap = hex("0006400100000003041b") + Array(repeating: 0, count: 26) + [0x20]
        let wire = [4] + Array("host".utf8) + [7] + Array("example".utf8) + [3] + Array("com".utf8) + [0] + rfcBitmap
        let decoded = try RData(type: .nsec, wire: wire)
        #expect(decoded == .nsec(next: name("host.example.com."), types: [.a, .mx, .rrsig, .nsec, RRType(1234)]))
        #expect(try decoded.wireBytes() == wire)
    }
}
