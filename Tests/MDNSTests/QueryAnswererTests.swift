import DNSWire
import Testing

@testable import MDNS

/// RFC 6762 §6, §7, §9 and §10.1 for the records a `LinkResponder` holds.
@Suite struct QueryAnswererTests {
    static func record(_ name: String, _ type: RRType, _ data: [UInt8]) -> MDNSRecord {
        MDNSRecord(name: try! DNSName(name), type: type, rdata: data)
    }

    static let ptr = record("_ipp._tcp.local.", .ptr, try! DNSName("P._ipp._tcp.local.").wireBytes)
    static let srv = record(
        "P._ipp._tcp.local.", .srv, [0, 0, 0, 0, 2, 119] + (try! DNSName("p-lab1.local.").wireBytes))
    static let txt = record("P._ipp._tcp.local.", .txt, [3, 0x61, 0x3d, 0x31])
    static let a = record("p-lab1.local.", .a, [192, 0, 2, 1])
    static let held = [ptr, srv, txt, a]
    static let eth2 = QueryAnswerer.Channel(interface: "eth2", family: .v4)

    static func holding(_ name: DNSName) -> [MDNSRecord] { held.filter { $0.name == name } }

    static func query(
        _ name: String, _ type: RRType, known: [MDNSRecord] = [], knownTTL: UInt32 = 4500,
        probe: [MDNSRecord] = [], truncated: Bool = false
    ) throws -> Message {
        var message = Message(id: 0, isResponse: false)
        message.truncated = truncated
        message.questions = [Question(name: try DNSName(name), type: type)]
        message.answers = try known.map {
            ResourceRecord(name: $0.name, type: $0.type, ttl: knownTTL, rdata: try RData(type: $0.type, wire: $0.rdata))
        }
        message.authority = try probe.map {
            ResourceRecord(name: $0.name, type: $0.type, ttl: 120, rdata: try RData(type: $0.type, wire: $0.rdata))
        }
        return message
    }

    static func response(_ records: [MDNSRecord], ttl: UInt32 = 120) throws -> Message {
        var message = Message(id: 0, isResponse: true)
        message.answers = try records.map {
            ResourceRecord(name: $0.name, type: $0.type, ttl: ttl, rdata: try RData(type: $0.type, wire: $0.rdata))
        }
        return message
    }

    func answerer() -> QueryAnswerer { QueryAnswerer(random: { 0 }) }

    func due(_ answerer: inout QueryAnswerer, at now: Duration) -> (answers: [MDNSRecord], additional: [MDNSRecord]) {
        let out = answerer.due(now: now)
        return (out.flatMap { $0.answers.map(\.record) }, out.flatMap { $0.additional.map(\.record) })
    }

    @Test("a PTR question waits 20 ms at least (§6, shared) and brings SRV, TXT and the address (RFC 6763 §12)")
    func sharedAnswer() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        #expect(answerer.nextDue == .milliseconds(20))
        #expect(due(&answerer, at: .milliseconds(19)).answers.isEmpty)
        let sent = due(&answerer, at: .milliseconds(20))
        #expect(sent.answers == [Self.ptr])
        #expect(sent.additional == [Self.srv, Self.txt, Self.a])
        #expect(answerer.nextDue == nil)
    }

    @Test("a unique answer goes at once; the same record not again within a second (§6)")
    func uniqueAnswerAndRepeat() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("P._ipp._tcp.local.", .srv), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        #expect(due(&answerer, at: .zero) == ([Self.srv], [Self.a]))
        _ = answerer.received(
            try Self.query("P._ipp._tcp.local.", .srv), port: 5353, on: Self.eth2, now: .milliseconds(500),
            held: Self.holding)
        #expect(answerer.nextDue == nil)
        _ = answerer.received(
            try Self.query("P._ipp._tcp.local.", .srv), port: 5353, on: Self.eth2, now: .seconds(1), held: Self.holding)
        #expect(due(&answerer, at: .seconds(1)).answers == [Self.srv])
    }

    @Test("known answers with half their TTL left are not sent again (§7.1); older ones are")
    func knownAnswers() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr, known: [Self.ptr]), port: 5353, on: Self.eth2, now: .zero,
            held: Self.holding)
        #expect(answerer.nextDue == nil)
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr, known: [Self.ptr], knownTTL: 2000), port: 5353, on: Self.eth2,
            now: .zero, held: Self.holding)
        #expect(due(&answerer, at: .seconds(1)).answers == [Self.ptr])
    }

    @Test("another responder's answer before ours is due cancels ours (§7.4)")
    func duplicateSuppression() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        let reaction = answerer.received(
            try Self.response([Self.ptr], ttl: 4500), port: 5353, on: Self.eth2, now: .milliseconds(5),
            held: Self.holding)
        #expect(reaction == QueryAnswerer.Reaction())
        #expect(answerer.nextDue == nil)
    }

    @Test("a TC query waits 400 ms for its known answers; a probe for our name is answered at once (§6, §8.2)")
    func truncatedAndProbe() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr, truncated: true), port: 5353, on: Self.eth2, now: .zero,
            held: Self.holding)
        #expect(answerer.nextDue == .milliseconds(400))
        var other = self.answerer()
        let theirs = Self.record(
            "P._ipp._tcp.local.", .srv, [0, 0, 0, 0, 0, 9] + (try DNSName("elsewhere.local.").wireBytes))
        _ = other.received(
            try Self.query("P._ipp._tcp.local.", .any, probe: [theirs]), port: 5353, on: Self.eth2, now: .zero,
            held: Self.holding)
        #expect(due(&other, at: .zero).answers == [Self.srv, Self.txt])
    }

    @Test("a truncated query's known answers go on in its sender's next packets, which prune the answer (§7.2)")
    func multipacketKnownAnswers() throws {
        var answerer = answerer()
        let q = Self.record("_ipp._tcp.local.", .ptr, try DNSName("Q._ipp._tcp.local.").wireBytes)
        let holding = { (name: DNSName) in (Self.held + [q]).filter { $0.name == name } }
        _ = answerer.received(
            try Self.query("_ipp._tcp.local.", .ptr, known: [q], truncated: true), from: "a", port: 5353, on: Self.eth2,
            now: .zero,
            held: holding)
        var next = Message(id: 0, isResponse: false)
        next.answers = [
            ResourceRecord(
                name: Self.ptr.name, type: .ptr, ttl: 4500, rdata: try RData(type: .ptr, wire: Self.ptr.rdata))
        ]
        // Another querier's known answers do not count for this one.
        _ = answerer.received(next, from: "b", port: 5353, on: Self.eth2, now: .milliseconds(10), held: holding)
        #expect(answerer.nextDue == .milliseconds(400))
        _ = answerer.received(next, from: "a", port: 5353, on: Self.eth2, now: .milliseconds(20), held: holding)
        #expect(answerer.nextDue == nil, "every answer was known")
    }

    @Test("another host's data under our unique name is a conflict (§9); identical data and shared PTRs are not (§8.2)")
    func conflicts() throws {
        var answerer = answerer()
        let theirs = Self.record(
            "P._ipp._tcp.local.", .srv, [0, 0, 0, 0, 0, 9] + (try DNSName("elsewhere.local.").wireBytes))
        let otherPTR = Self.record("_ipp._tcp.local.", .ptr, try DNSName("Q._ipp._tcp.local.").wireBytes)
        let reaction = answerer.received(
            try Self.response([theirs, Self.txt, Self.a, otherPTR]), port: 5353, on: Self.eth2, now: .zero,
            held: Self.holding)
        #expect(reaction.conflicts == [.init(name: try DNSName("P._ipp._tcp.local."), type: .srv)])
        #expect(reaction.goodbyes.isEmpty)
    }

    @Test("another host's goodbye for a record we hold is reported, to be announced again (§10.1)")
    func goodbyes() throws {
        var answerer = answerer()
        let reaction = answerer.received(
            try Self.response([Self.ptr, Self.srv], ttl: 0), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        #expect(reaction.goodbyes == [Self.ptr, Self.srv])
        #expect(reaction.conflicts.isEmpty)
    }

    @Test("a legacy query (not from port 5353) is answered to its sender: its ID, its question, TTL 10 (§6.7)")
    func legacyUnicast() throws {
        var answerer = answerer()
        var query = try Self.query("P._ipp._tcp.local.", .txt)
        query.id = 0x1234
        let reaction = answerer.received(query, port: 40000, on: Self.eth2, now: .zero, held: Self.holding)
        let reply = try Message(wire: try #require(reaction.legacyReply))
        #expect(reply.id == 0x1234 && reply.isResponse && reply.questions == query.questions)
        #expect(reply.answers.map { "\($0.name) \($0.type) \($0.ttl)" } == ["P._ipp._tcp.local. TXT 10"])
        #expect(answerer.nextDue == nil)
    }

    @Test("a question for nothing we hold is not answered")
    func nothingHeld() throws {
        var answerer = answerer()
        _ = answerer.received(
            try Self.query("_http._tcp.local.", .ptr), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        _ = answerer.received(
            try Self.query("P._ipp._tcp.local.", .aaaa), port: 5353, on: Self.eth2, now: .zero, held: Self.holding)
        #expect(answerer.nextDue == nil)
    }
}
