import DNSWire
import MDNS
import ProxyTestSupport
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The shared level of the hit fast path: one encoding per question per epoch, for every client.
@Suite("Answer memo")
struct AnswerMemoTests {
    let printer = try! DNSName("x._ipp._tcp.local.")

    func query(id: UInt16, _ name: String = "_ipp._tcp.lab1.example.", type: RRType = .ptr) -> [UInt8] {
        try! Message(
            id: id, questions: [Question(name: try! DNSName(name), type: type)], edns: EDNS(udpPayloadSize: 1232)
        )
        .encode()
    }

    @Test("an entry answers the same query bytes in the same epoch, with the asker's ID")
    func storeAndAnswer() {
        var memo = AnswerMemo()
        let key = AnswerMemo.Key(query: query(id: 1), transport: .udp)
        memo.store(AnswerMemo.Answer(bytes: [0, 1, 0x84, 0, 9, 9], rcode: "noError"), for: key, epoch: 3)
        let answer = memo.answer(to: AnswerMemo.Key(query: query(id: 0xBEEF), transport: .udp), id: 0xBEEF, epoch: 3)
        #expect(answer?.bytes == [0xBE, 0xEF, 0x84, 0, 9, 9])
        #expect(answer?.rcode == "noError")
        #expect(
            memo.answer(to: AnswerMemo.Key(query: query(id: 1), transport: .tcp), id: 1, epoch: 3) == nil,
            "TCP has its own limit")
        #expect(
            memo.answer(to: AnswerMemo.Key(query: query(id: 1, type: .srv), transport: .udp), id: 1, epoch: 3) == nil)
        #expect(memo.answer(to: key, id: 1, epoch: 4) == nil, "a later epoch may have other data")
    }

    @Test("a newer epoch drops the older entries; an answer from an older epoch is not kept")
    func epochs() {
        var memo = AnswerMemo()
        let a = AnswerMemo.Key(query: query(id: 1), transport: .udp)
        let b = AnswerMemo.Key(query: query(id: 1, type: .srv), transport: .udp)
        memo.store(AnswerMemo.Answer(bytes: [0, 0, 1], rcode: "noError"), for: a, epoch: 5)
        memo.store(AnswerMemo.Answer(bytes: [0, 0, 2], rcode: "noError"), for: b, epoch: 6)
        #expect(memo.count == 1)
        memo.store(AnswerMemo.Answer(bytes: [0, 0, 3], rcode: "noError"), for: a, epoch: 5)
        #expect(memo.count == 1)
        #expect(memo.answer(to: a, id: 0, epoch: 6) == nil)
        #expect(memo.answer(to: b, id: 0, epoch: 6)?.bytes == [0, 0, 2])
    }

    @Test("bounded in entries and in answer bytes: when full it starts over")
    func bounded() {
        var memo = AnswerMemo(maxEntries: 4, maxAnswerBytes: 100)
        for n in 0..<10 {
            memo.store(
                AnswerMemo.Answer(bytes: [0, 0, UInt8(n)], rcode: "noError"),
                for: AnswerMemo.Key(query: query(id: 0, "n\(n).lab1.example.", type: .a), transport: .udp), epoch: 1)
            #expect(memo.count <= 4)
        }
        memo.store(
            AnswerMemo.Answer(bytes: Array(repeating: 0, count: 60), rcode: "noError"),
            for: AnswerMemo.Key(query: query(id: 0, "big1.lab1.example.", type: .a), transport: .udp), epoch: 1)
        memo.store(
            AnswerMemo.Answer(bytes: Array(repeating: 0, count: 60), rcode: "noError"),
            for: AnswerMemo.Key(query: query(id: 0, "big2.lab1.example.", type: .a), transport: .udp), epoch: 1)
        #expect(memo.count == 1, "120 bytes do not fit in 100")
        memo.store(
            AnswerMemo.Answer(bytes: Array(repeating: 0, count: 101), rcode: "noError"),
            for: AnswerMemo.Key(query: query(id: 0, "huge.lab1.example.", type: .a), transport: .udp), epoch: 1)
        #expect(memo.count == 1, "an answer over the byte bound is not kept at all")
    }

    @Test("a second client's hit is the first one's answer; a change in the records is seen at once")
    func sharedButCurrent() throws {
        let h = Harness.warmed(with: printer)
        var replies: [[UInt8]] = []
        for (id, client) in [(UInt16(1), [UInt8]([192, 0, 2, 1])), (2, [192, 0, 2, 2])] {
            let box = ProxyReplies()
            h.proxy.handle(query: query(id: id), from: .test(client)) { box.add($0) }
            replies.append(box.last?.bytes ?? [])
        }
        #expect(Array(replies[0].dropFirst(2)) == Array(replies[1].dropFirst(2)))
        #expect(replies[1].prefix(2) == [0, 2])
        #expect(h.proxy.stats.cacheHits == 2)

        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("y._ipp._tcp.local.")))
        let after = try #require(h.ask("_ipp._tcp.lab1.example.", .ptr).message)
        #expect(after.answers.count == 2, "the memo's answer was from before the change")
    }

    @Test("an allow-list refusal is never answered from the memo")
    func aclFirst() throws {
        let h = Harness { $0.allowedClients = [IPPrefix("192.0.2.0/24")!] }
        let ignored = ProxyReplies()
        h.proxy.handle(query: query(id: 1), from: .test([192, 0, 2, 1])) { ignored.add($0) }
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        h.clock.advance(by: .seconds(1))
        h.proxy.handle(query: query(id: 2), from: .test([192, 0, 2, 1])) { ignored.add($0) }
        #expect(ignored.last.flatMap { $0.bytes.flatMap { try? Message(wire: $0) } }?.answers.count == 1)
        let refused = ProxyReplies()
        h.proxy.handle(query: query(id: 3), from: .test([198, 51, 100, 1])) { refused.add($0) }
        #expect(refused.last.flatMap { $0.bytes.flatMap { try? Message(wire: $0) } }?.rcode == .refused)
    }
}

/// Records as avahi delivers them: once per IP protocol, and again after a reconfirm restart.
@Suite("Record deliveries")
struct RecordDeliveryTests {
    let printer = try! DNSName("x._ipp._tcp.local.")
    let other = try! DNSName("y._ipp._tcp.local.")

    func warmed() -> Harness { Harness.warmed(with: printer) }

    func instances(_ h: Harness) -> Int { h.ask("_ipp._tcp.lab1.example.", .ptr).message?.answers.count ?? -1 }

    @Test("a record delivered on IPv4 and IPv6 stays until both deliveries are removed")
    func countedPerDelivery() {
        let h = warmed()
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        #expect(instances(h) == 1, "the second delivery is the same record")
        h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(printer))
        #expect(instances(h) == 1, "still delivered on the other protocol")
        h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(printer))
        #expect(instances(h) == 0)
    }

    @Test("verifying: what is not delivered again by all-for-now is gone, the rest stays (RFC 8765 §6.5)")
    func verifying() {
        let h = warmed()
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(other))
        #expect(instances(h) == 2)
        h.backend.emit(.verifying, name: "_ipp._tcp.local.", type: .ptr)
        #expect(instances(h) == 2, "answers keep what is known while mDNS verifies")
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        h.backend.emit(.allForNow, name: "_ipp._tcp.local.", type: .ptr)
        let message = h.ask("_ipp._tcp.lab1.example.", .ptr).message
        #expect(message?.answers.count == 1)
        #expect(message?.answers.first?.rdata == .ptr(try! DNSName("x._ipp._tcp.lab1.example.")))
        h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(printer))
        #expect(instances(h) == 0, "counting starts over after verifying")
    }
}
