import DNSWire
import Testing

@testable import MDNS

/// Probing before announcing (RFC 6762 §8.1, §8.2), as the SRP registrar's responder does it.
@Suite struct GroupProberTests {
    static let key = MDNSGroup.Key(interface: "eth2", name: "srp p.lab1.example.")
    static let other = MDNSGroup.Key(interface: "eth2", name: "srp q.lab1.example.")

    static func record(_ name: String, _ type: RRType, _ data: [UInt8]) -> MDNSRecord {
        MDNSRecord(name: try! DNSName(name), type: type, rdata: data)
    }

    static let host = try! DNSName("p.local.")
    static let instance = try! DNSName("P._ipp._tcp.local.")
    static let a = record("p.local.", .a, [192, 0, 2, 1])
    static let srv = record("P._ipp._tcp.local.", .srv, [0, 0, 0, 0, 2, 119] + host.wireBytes)
    static let ptr = record("_ipp._tcp.local.", .ptr, instance.wireBytes)
    static let group = [ptr, srv, a]

    static func ms(_ value: Int) -> Duration { .milliseconds(value) }

    /// A response another host sends with `records` as its answers.
    static func response(_ records: [MDNSRecord]) -> Message {
        Message(
            isResponse: true, authoritative: true,
            answers: records.map { ResourceRecord(name: $0.name, type: $0.type, ttl: 120, rdata: .raw($0.rdata)) })
    }

    @Test("three probes 250 ms apart, then the group is won 250 ms after the third (§8.1)")
    func threeProbes() throws {
        var prober = GroupProber()
        prober.start(Self.key, records: Self.group, names: [Self.host, Self.instance], now: .zero, delay: Self.ms(100))
        #expect(prober.due(now: Self.ms(99)).packets.isEmpty)
        var sentAt: [Duration] = []
        var wonAt: Duration?
        var now = Self.ms(100)
        while now <= Self.ms(1200), wonAt == nil {
            let (packets, won) = prober.due(now: now)
            if !packets.isEmpty { sentAt.append(now) }
            if !won.isEmpty {
                #expect(won.map(\.key) == [Self.key])
                #expect(won[0].records == Self.group)
                wonAt = now
            }
            now += Self.ms(10)
        }
        #expect(sentAt == [Self.ms(100), Self.ms(350), Self.ms(600)])
        #expect(wonAt == Self.ms(850))
        #expect(prober.isEmpty)
    }

    @Test("a probe asks ANY for each new name, QM, with the proposed unique records in the authority section")
    func probePacket() throws {
        var prober = GroupProber()
        prober.start(Self.key, records: Self.group, names: [Self.host, Self.instance], now: .zero, delay: .zero)
        let (packets, _) = prober.due(now: .zero)
        #expect(packets.count == 1)
        let message = try Message(wire: packets[0].bytes)
        #expect(!message.isResponse)
        #expect(Set(message.questions.map(\.name)) == [Self.host, Self.instance])
        #expect(message.questions.allSatisfy { $0.type == .any && $0.qclass == .in })
        #expect(Set(message.authority.map(\.type)) == [.a, .srv], "the shared PTR is not probed for")
        #expect(message.authority.allSatisfy { $0.rrClass == .in }, "no cache-flush bit in a query (§10.2)")
    }

    @Test("probes of many groups share packets, none over the size limit")
    func shared() throws {
        var prober = GroupProber()
        for index in 0..<200 {
            let host = try DNSName("h\(index).local.")
            let a = MDNSRecord(name: host, type: .a, rdata: [192, 0, 2, UInt8(index)])
            prober.start(
                MDNSGroup.Key(interface: "eth2", name: "srp h\(index)"), records: [a], names: [host], now: .zero,
                delay: .zero)
        }
        let (packets, _) = prober.due(now: .zero)
        #expect(packets.count > 1 && packets.count < 20)
        #expect(packets.allSatisfy { $0.bytes.count <= AnnouncementQueue.packetSize })
        let questions = try packets.reduce(0) { $0 + (try Message(wire: $1.bytes)).questions.count }
        #expect(questions == 200)
    }

    @Test("another host answering a probed name with other data loses the group; the same data does not")
    func conflict() throws {
        var prober = GroupProber()
        prober.start(Self.key, records: Self.group, names: [Self.host, Self.instance], now: .zero, delay: .zero)
        _ = prober.due(now: .zero)
        #expect(prober.heard(Self.response([Self.a]), on: "eth2", now: Self.ms(50)).isEmpty, "§8.2: same data")
        #expect(prober.heard(Self.response([Self.ptr]), on: "eth2", now: Self.ms(60)).isEmpty, "PTRs are shared")
        let taken = Self.record("p.local.", .a, [192, 0, 2, 99])
        #expect(prober.heard(Self.response([taken]), on: "eth3", now: Self.ms(70)).isEmpty, "another link")
        #expect(prober.heard(Self.response([taken]), on: "eth2", now: Self.ms(80)) == [Self.key])
        #expect(prober.isEmpty)
    }

    @Test("a simultaneous probe: the lexicographically later data wins, the loser probes again a second later (§8.2)")
    func tieBreak() throws {
        var prober = GroupProber()
        prober.start(Self.key, records: Self.group, names: [Self.host], now: .zero, delay: .zero)
        _ = prober.due(now: .zero)
        func probe(_ address: UInt8) -> Message {
            Message(
                questions: [Question(name: Self.host, type: .any)],
                authority: [ResourceRecord(name: Self.host, type: .a, ttl: 120, rdata: .raw([192, 0, 2, address]))])
        }
        #expect(prober.heard(probe(0), on: "eth2", now: Self.ms(10)).isEmpty)
        #expect(prober.probes[Self.key]?.sent == 1, "ours (192.0.2.1) is later: probing goes on")
        #expect(prober.heard(probe(2), on: "eth2", now: Self.ms(20)).isEmpty)
        #expect(prober.probes[Self.key]?.sent == 0, "theirs is later: start again")
        #expect(prober.probes[Self.key]?.due == Self.ms(1020))
        #expect(GroupProber.compare([Self.a], [Self.a]) == .orderedSame)
        #expect(GroupProber.compare([Self.a], [Self.a, Self.a]) == .orderedAscending)
    }

    @Test("only names the group has not announced are probed for: a new address is not")
    func newNames() {
        let moved = Self.record("p.local.", .a, [192, 0, 2, 7])
        #expect(LinkResponder.newNames([Self.ptr, Self.srv, moved], held: Self.group).isEmpty)
        #expect(LinkResponder.newNames(Self.group, held: []) == [Self.host, Self.instance])
        #expect(LinkResponder.newNames(Self.group, held: [Self.a]) == [Self.instance])
    }
}
