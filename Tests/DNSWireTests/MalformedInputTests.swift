import DNSWire
import Testing

@Suite struct MalformedInputTests {
    /// Header with the given counts (flags 0).
    static func header(qd: UInt16 = 1, an: UInt16 = 0, ns: UInt16 = 0, ar: UInt16 = 0) -> [UInt8] {
        [0x12, 0x34, 0x00, 0x00] + [qd, an, ns, ar].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    static let question = hex("045f697070045f746370076578616d706c6500 000c 0001")  // _ipp._tcp.example PTR IN
    static let opt = hex("00 0029 04d0 00000000 0000")
    static let label64: [UInt8] = [64] + Array(repeating: 0x61, count: 64)
    static let longName: [UInt8] = (0..<5).flatMap { _ in [63] + Array(repeating: UInt8(0x62), count: 63) } + [0]

    static let malformed: [(String, [UInt8])] = [
        ("counts promise a question that is missing", header()),
        ("truncated question (no class)", header() + question.dropLast(2)),
        ("answer count lies", header(an: 1) + question),
        ("additional count lies after an OPT", header(ar: 2) + question + opt),
        ("pointer to itself", header() + hex("c00c 000c 0001")),
        ("two-pointer loop", header() + hex("c00e c00c 000c 0001")),
        ("forward pointer past the end", header() + hex("c0ff 000c 0001")),
        ("pointer into the header", header() + hex("c000 000c 0001")),
        // RFC 1035 §4.1.4: pointers go to a prior name; ldns alone would follow these.
        ("forward pointer to the QTYPE's zero octet", header() + hex("c00e 0006 0001")),
        ("pointer to a valid name inside the header", header() + hex("c002 0006 0001")),
        ("label of 64 octets", header() + label64 + [0, 0, 1, 0, 1]),
        ("extended label type 0x41", header() + hex("41 61 00 0001 0001")),
        ("name over 255 octets", header() + longName + [0, 1, 0, 1]),
        ("label runs past the end", header() + hex("0a 6162 63")),
        ("truncated RDATA", header(an: 1) + question + hex("c00c 0001 0001 0000003c 0004 cb00")),
        ("RDLENGTH too short for an A", header(an: 1) + question + hex("c00c 0001 0001 0000003c 0003 cb0071 02")),
        ("RDLENGTH longer than an A", header(an: 1) + question + hex("c00c 0001 0001 0000003c 0006 cb007102 0000")),
        ("PTR name runs past RDLENGTH", header(an: 1) + question + hex("c00c 000c 0001 0000003c 0002 01 61 00")),
        ("TXT string runs past RDLENGTH", header(an: 1) + question + hex("c00c 0010 0001 0000003c 0002 05 61")),
        ("truncated TTL", header(an: 1) + question + hex("c00c 0001 0001 0000")),
        ("two OPT records", header(ar: 2) + question + opt + opt),
        ("OPT not owned by the root", header(ar: 1) + question + hex("c00c 0029 04d0 00000000 0000")),
        ("OPT in the answer section", header(an: 1) + question + opt),
        ("EDNS option runs past the OPT", header(ar: 1) + question + hex("00 0029 04d0 00000000 0006 000a 0008 0102")),
        ("EDNS option header cut short", header(ar: 1) + question + hex("00 0029 04d0 00000000 0002 000a")),
        ("QDCOUNT 0 but a question follows", header(qd: 0) + question),
        ("trailing garbage", header() + question + [0xde, 0xad]),
        ("bad NSEC bitmap", header(an: 1) + question + hex("c00c 002f 0001 0000003c 0005 00 0000 0000")),
        ("SOA cut short", header(an: 1) + question + hex("c00c 0006 0001 0000003c 0006 00 00 00000001")),
    ]

    @Test func shortInputsHaveNoHeader() {
        for length in 0..<12 {
            let wire = Array(Self.header().prefix(length))
            #expect(throws: DNSWireError.noHeader) { try Message(wire: wire) }
        }
    }

    @Test(arguments: malformed.indices)
    func rejectsMalformedInput(_ index: Int) {
        let (what, wire) = Self.malformed[index]
        #expect(MessageHeader(wire) != nil, "\(what): header must be readable")
        do {
            let message = try Message(wire: wire)
            Issue.record("\(what): decoded as \(message)")
        } catch {
            guard case .malformed = error else {
                Issue.record("\(what): \(error)")
                return
            }
        }
    }

    @Test func sanityCheckTheBuildingBlocksAreValid() throws {
        #expect(try Message(wire: Self.header() + Self.question).questions.count == 1)
        #expect(try Message(wire: Self.header(ar: 1) + Self.question + Self.opt).edns != nil)
        let answer = hex("c00c 0001 0001 0000003c 0004 cb007102")
        #expect(try Message(wire: Self.header(an: 1) + Self.question + answer).answers.count == 1)
    }

    /// Mutates valid messages at random: every result must decode or throw, never crash.
    @Test func randomMutationsNeverCrash() throws {
        var generator = SplitMix64(seed: 0x5EED)
        let seeds = [
            DigQueries.ptrNoEDNS, DigQueries.srvWithSpace, DigQueries.soaWithCookieAndDO,
            try MessageEncodeTests.browseResponse().encode(),
        ]
        var decoded = 0
        for round in 0..<20_000 {
            var wire = seeds[round % seeds.count]
            for _ in 0...(generator.next() % 4) {
                let position = Int(generator.next() % UInt64(wire.count))
                switch generator.next() % 4 {
                case 0: wire[position] = UInt8(truncatingIfNeeded: generator.next())
                case 1: wire.removeSubrange(position...)
                case 2: wire[position] = 0xC0 | UInt8(generator.next() % 4)
                default: wire.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                }
                if wire.isEmpty { break }
            }
            if let message = try? Message(wire: wire) {
                decoded += 1
                // Whatever decodes must also re-encode.
                _ = try? message.encode(limit: 512)
            }
        }
        #expect(decoded > 0)
    }
}

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
