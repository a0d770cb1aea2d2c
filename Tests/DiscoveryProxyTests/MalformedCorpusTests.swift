import DNSWire
@_spi(Testing) import DiscoveryProxy
import Testing

/// A hand-written table of malformed and adversarial queries, built as raw bytes, each with the
/// outcome the proxy must produce. After every one, the same proxy instance must still answer
/// a good query (apex SOA) correctly. Complements the libFuzzer harnesses (docs/FUZZING.md).
@Suite("DiscoveryProxy: malformed and adversarial queries")
struct MalformedCorpusTests {
    enum Outcome: CustomStringConvertible, Sendable {
        /// No reply at all (`respond(nil)`).
        case dropped
        /// A reply with this RCODE and the query's ID.
        case rcode(RCode)

        var description: String {
            switch self {
            case .dropped: return "dropped"
            case .rcode(let rcode): return "\(rcode)"
            }
        }
    }

    struct Case: CustomStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var outcome: Outcome
        /// The ID the reply must carry.
        var id: UInt16 = MalformedCorpusTests.id
        var description: String { "\(name) → \(outcome)" }
    }

    // MARK: Raw builders

    static let id: UInt16 = 0xBEEF

    static func u16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func u32(_ value: UInt32) -> [UInt8] { u16(UInt16(value >> 16)) + u16(UInt16(value & 0xFFFF)) }

    static func header(
        id: UInt16 = id, flags: UInt16 = 0x0100, qd: UInt16 = 1, an: UInt16 = 0, ns: UInt16 = 0, ar: UInt16 = 0
    ) -> [UInt8] {
        u16(id) + u16(flags) + u16(qd) + u16(an) + u16(ns) + u16(ar)
    }

    static func name(_ text: String) -> [UInt8] {
        text.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    static func question(_ qname: String = "lab1.example.", type: UInt16 = 6, qclass: UInt16 = 1) -> [UInt8] {
        name(qname) + u16(type) + u16(qclass)
    }

    /// An OPT record: owner, payload size, version, RDATA.
    static func opt(owner: [UInt8] = [0], payload: UInt16 = 1232, version: UInt8 = 0, rdata: [UInt8] = []) -> [UInt8] {
        owner + u16(41) + u16(payload) + u32(UInt32(version) << 16) + u16(UInt16(rdata.count)) + rdata
    }

    /// A well-formed query with one question and optionally an OPT.
    static func query(
        _ qname: String = "lab1.example.", type: UInt16 = 6, qclass: UInt16 = 1, flags: UInt16 = 0x0100,
        edns: Bool = true, version: UInt8 = 0
    ) -> [UInt8] {
        header(flags: flags, ar: edns ? 1 : 0) + question(qname, type: type, qclass: qclass)
            + (edns ? opt(version: version) : [])
    }

    static func opcodeFlags(_ opcode: UInt16) -> UInt16 { 0x0100 | opcode << 11 }

    static let label63 = [UInt8(63)] + [UInt8](repeating: UInt8(ascii: "a"), count: 63)

    // MARK: The table

    static let cases: [Case] = {
        let soa = question()
        var table: [Case] = [
            // Too short for a header: nothing to reply to.
            Case(name: "zero-length message", bytes: [], outcome: .dropped),
            Case(name: "1-byte message", bytes: [0x12], outcome: .dropped),
            Case(name: "11-byte truncated header", bytes: Array(header().prefix(11)), outcome: .dropped),
            // Responses are never answered (no reflection).
            Case(name: "response bit set", bytes: query(flags: 0x8100), outcome: .dropped),
            Case(
                name: "response bit set, garbage body", bytes: header(flags: 0x8000, qd: 9) + [0xC0, 0xFF],
                outcome: .dropped),
            Case(name: "512 octets of 0xFF (QR set)", bytes: [UInt8](repeating: 0xFF, count: 512), outcome: .dropped),

            // Counts that lie.
            Case(name: "header only, QDCOUNT 1", bytes: header(), outcome: .rcode(.formErr)),
            Case(
                name: "question cut mid-label", bytes: header() + Array(name("lab1.example.").prefix(7)),
                outcome: .rcode(.formErr)),
            Case(
                name: "question without QCLASS", bytes: header() + name("lab1.example.") + u16(6),
                outcome: .rcode(.formErr)),
            Case(name: "QDCOUNT 0", bytes: header(qd: 0), outcome: .rcode(.formErr)),
            Case(
                name: "QDCOUNT 2, two questions", bytes: header(qd: 2) + soa + question("lab2.example."),
                outcome: .rcode(.formErr)),
            Case(name: "QDCOUNT 2, one question", bytes: header(qd: 2) + soa, outcome: .rcode(.formErr)),
            Case(name: "QDCOUNT 65535, one question", bytes: header(qd: 0xFFFF) + soa, outcome: .rcode(.formErr)),
            Case(name: "QDCOUNT 1, two questions", bytes: header(qd: 1) + soa + soa, outcome: .rcode(.formErr)),
            Case(name: "ANCOUNT 1, no answer", bytes: header(an: 1) + soa, outcome: .rcode(.formErr)),
            Case(name: "NSCOUNT 1, no authority", bytes: header(ns: 1) + soa, outcome: .rcode(.formErr)),
            Case(name: "ARCOUNT 1, no additional", bytes: header(ar: 1) + soa, outcome: .rcode(.formErr)),
            Case(name: "ARCOUNT 0 but an OPT follows", bytes: header(ar: 0) + soa + opt(), outcome: .rcode(.formErr)),
            Case(name: "trailing garbage", bytes: query() + [0xDE, 0xAD, 0xBE, 0xEF], outcome: .rcode(.formErr)),
            Case(name: "one trailing zero octet", bytes: query() + [0], outcome: .rcode(.formErr)),
            Case(
                name: "4096 zero octets (QDCOUNT 0, trailing)", bytes: [UInt8](repeating: 0, count: 4096),
                outcome: .rcode(.formErr), id: 0),

            // Names.
            Case(
                name: "compression pointer to itself", bytes: header() + [0xC0, 12] + u16(6) + u16(1),
                outcome: .rcode(.formErr)),
            Case(
                name: "two pointers pointing at each other",
                bytes: header(an: 1) + [0xC0, 18] + u16(6) + u16(1) + [0xC0, 12] + u16(1) + u16(1) + u32(0) + u16(0),
                outcome: .rcode(.formErr)),
            Case(
                name: "pointer past the end", bytes: header() + [0xC0, 200] + u16(6) + u16(1), outcome: .rcode(.formErr)
            ),
            Case(
                name: "forward pointer (to the QTYPE's zero octet)", bytes: header() + [0xC0, 14] + u16(6) + u16(1),
                outcome: .rcode(.formErr)),
            Case(
                name: "pointer into the header", bytes: header() + [0xC0, 2] + u16(6) + u16(1),
                outcome: .rcode(.formErr)),
            Case(
                name: "label of 64 octets",
                bytes: header() + [64] + [UInt8](repeating: UInt8(ascii: "a"), count: 64) + name("lab1.example.")
                    + u16(6) + u16(1),
                outcome: .rcode(.formErr)),
            Case(
                name: "name of 257 octets",
                bytes: header() + label63 + label63 + label63 + label63 + [0] + u16(1) + u16(1),
                outcome: .rcode(.formErr)),
            Case(
                name: "name over 255 through compression",
                bytes: header(an: 1) + label63 + label63 + label63 + [0] + u16(1) + u16(1)
                    + label63 + [0xC0, 12] + u16(1) + u16(1) + u32(0) + u16(4) + [192, 0, 2, 1],
                outcome: .rcode(.formErr)),
            Case(
                name: "extended label type 0x40",
                bytes: header() + [0x41, 0x01] + name("lab1.example.") + u16(6) + u16(1), outcome: .rcode(.formErr)),
            Case(
                name: "reserved label type 0x80",
                bytes: header() + [0x80, 0x01] + name("lab1.example.") + u16(6) + u16(1), outcome: .rcode(.formErr)),

            // Classes: only IN and ANY.
            Case(name: "class CH", bytes: query(qclass: 3), outcome: .rcode(.refused)),
            Case(name: "class HS", bytes: query(qclass: 4), outcome: .rcode(.refused)),
            Case(name: "class NONE", bytes: query(qclass: 254), outcome: .rcode(.refused)),
            Case(name: "class 0", bytes: query(qclass: 0), outcome: .rcode(.refused)),
            Case(name: "class ANY is fine", bytes: query(qclass: 255), outcome: .rcode(.noError)),

            // EDNS.
            Case(name: "two OPT records", bytes: header(ar: 2) + soa + opt() + opt(), outcome: .rcode(.formErr)),
            Case(
                name: "OPT not owned by the root", bytes: header(ar: 1) + soa + opt(owner: name("x.")),
                outcome: .rcode(.formErr)),
            Case(name: "OPT in the answer section", bytes: header(an: 1) + soa + opt(), outcome: .rcode(.formErr)),
            Case(name: "OPT in the authority section", bytes: header(ns: 1) + soa + opt(), outcome: .rcode(.formErr)),
            Case(name: "EDNS version 1", bytes: query(version: 1), outcome: .rcode(.badVers)),
            Case(name: "EDNS version 255", bytes: query(version: 255), outcome: .rcode(.badVers)),
            Case(
                name: "EDNS option longer than the OPT RDATA",
                bytes: header(ar: 1) + soa + opt(rdata: u16(10) + u16(40) + [1, 2, 3, 4]),
                outcome: .rcode(.formErr)),

            // Additional records.
            Case(
                name: "huge RDLENGTH in additional",
                bytes: header(ar: 1) + soa + [0] + u16(1) + u16(1) + u32(0) + u16(0xFFFF) + [192, 0, 2, 1],
                outcome: .rcode(.formErr)),

            // Header flags that do not stop an answer.
            Case(name: "TC bit set on a query", bytes: query(flags: 0x0300), outcome: .rcode(.noError)),
            Case(name: "Z bit set", bytes: query(flags: 0x0140), outcome: .rcode(.noError)),
        ]
        // Every opcode but QUERY (0): NOTIMP, including IQUERY, STATUS, NOTIFY, UPDATE, DSO.
        for opcode in UInt16(1)...15 {
            table.append(
                Case(name: "opcode \(opcode)", bytes: query(flags: opcodeFlags(opcode)), outcome: .rcode(.notImp)))
        }
        table.append(Case(name: "question type 0", bytes: query(type: 0), outcome: .rcode(.noError)))
        return table
    }()

    @Test("the table is big enough")
    func tableSize() {
        #expect(Self.cases.count >= 40)
    }

    @Test("each malformed query gets its outcome, and the proxy still answers afterwards", arguments: cases)
    func malformed(_ item: Case) throws {
        let h = Harness()
        let reply = h.send(item.bytes)
        #expect(reply.calls == 1, "answered synchronously, exactly once")
        switch item.outcome {
        case .dropped:
            #expect(reply.bytes == nil)
        case .rcode(let rcode):
            let bytes = try #require(reply.bytes)
            #expect(bytes.count <= 512)
            let message = try #require(reply.message, "the reply decodes")
            #expect(message.isResponse)
            #expect(message.id == item.id)
            #expect(message.rcode == rcode)
            #expect(!message.truncated)
            if rcode == .formErr { #expect(message.answers.isEmpty) }
        }

        let good = h.ask("lab1.example.", .soa, id: 0x5150)
        let answer = try #require(good.message)
        #expect(answer.id == 0x5150)
        #expect(answer.rcode == .noError)
        #expect(answer.authoritative)
        #expect(answer.answers.count == 1)
        #expect(answer.answers.first?.type == .soa)
    }

    @Test("the whole table through one proxy instance, then a good query")
    func sharedInstance() throws {
        let h = Harness()
        for item in Self.cases {
            let reply = h.send(item.bytes)
            #expect(reply.calls == 1, "\(item.name)")
            let good = try #require(h.ask("lab1.example.", .soa, id: 0x5150).message, "after \(item.name)")
            #expect(good.rcode == .noError && good.answers.count == 1, "after \(item.name)")
        }
        // The counters' invariant (`ProxyStats.isBalanced`): each query answered once, or dropped.
        let stats = h.proxy.stats
        #expect(stats.isBalanced && stats.inFlight == 0, "\(stats)")
        #expect(stats.queries == 2 * Self.cases.count)
        let dropped = Self.cases.filter { if case .dropped = $0.outcome { true } else { false } }.count
        #expect(stats.dropped == dropped)
    }
}
