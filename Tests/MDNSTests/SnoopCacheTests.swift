import DNSWire
import Testing

@testable import MDNS

/// What `LinkSnooper` keeps of a far link's responses: SRV, TXT and addresses, until their
/// TTL or their goodbye (RFC 6762 §10.1).
@Suite struct SnoopCacheTests {
    static let host = try! DNSName("p.local.")
    static let a1 = MDNSRecord(name: host, type: .a, rdata: [192, 0, 2, 1])
    static let a2 = MDNSRecord(name: host, type: .a, rdata: [192, 0, 2, 2])
    static let ptr = MDNSRecord(
        name: try! DNSName("_ipp._tcp.local."), type: .ptr, rdata: try! DNSName("P._ipp._tcp.local.").wireBytes)

    static func response(_ records: [MDNSRecord], ttl: UInt32 = 120, isResponse: Bool = true) throws -> Message {
        var message = Message(id: 0, isResponse: isResponse)
        message.answers = try records.map {
            ResourceRecord(name: $0.name, type: $0.type, ttl: ttl, rdata: try RData(type: $0.type, wire: $0.rdata))
        }
        return message
    }

    static let question = MDNSQuestion(interface: "eth1", name: try! DNSName("P.LOCAL."), type: .a)

    @Test("responses are kept by interface, name (any case) and type, until their TTL")
    func keptUntilTTL() throws {
        var cache = SnoopCache()
        cache.heard(try Self.response([Self.a1, Self.a2, Self.ptr]), on: "eth1", now: .zero)
        cache.heard(try Self.response([Self.a1], isResponse: false), on: "eth1", now: .zero)
        #expect(cache.records(for: Self.question, now: .seconds(119)) == [Self.a1, Self.a2])
        #expect(cache.records(for: MDNSQuestion(interface: "eth2", name: Self.host, type: .a), now: .zero).isEmpty)
        #expect(cache.records(for: Self.question, now: .seconds(120)).isEmpty)
        #expect(cache.count == 2, "PTRs are not kept; a query is not a response")
    }

    @Test("a goodbye removes the record; hearing it again renews it")
    func goodbyeAndRenewal() throws {
        var cache = SnoopCache()
        cache.heard(try Self.response([Self.a1, Self.a2]), on: "eth1", now: .zero)
        cache.heard(try Self.response([Self.a1], ttl: 0), on: "eth1", now: .seconds(1))
        cache.heard(try Self.response([Self.a2]), on: "eth1", now: .seconds(100))
        #expect(cache.records(for: Self.question, now: .seconds(150)) == [Self.a2])
        #expect(cache.count == 1)
    }

    @Test("past its limit, expired records go, then the oldest half")
    func bounded() throws {
        var cache = SnoopCache(limit: 16)
        for index in 0..<40 {
            let record = MDNSRecord(name: try DNSName("h\(index).local."), type: .a, rdata: [192, 0, 2, UInt8(index)])
            cache.heard(try Self.response([record]), on: "eth1", now: .seconds(Int64(index)))
        }
        #expect(cache.count <= 16)
        #expect(
            cache.records(
                for: MDNSQuestion(interface: "eth1", name: try DNSName("h39.local."), type: .a), now: .seconds(40)
            ).count == 1)
        #expect(
            cache.records(
                for: MDNSQuestion(interface: "eth1", name: try DNSName("h0.local."), type: .a), now: .seconds(40)
            ).isEmpty)
        cache.keep(only: ["eth2"])
        #expect(cache.count == 0)
    }
}
