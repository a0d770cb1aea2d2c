import DNSWire
import Testing

@Suite("DSO and DNS Push TLV codec (RFC 8490 §5.4, RFC 8765 §6)")
struct DSOCodecTests {
    @Test("a Keepalive request round-trips: OPCODE 6, zero counts, one TLV")
    func keepaliveRoundTrip() throws {
        let message = DSOMessage(
            id: 0x1234, tlvs: [.keepalive(inactivityMilliseconds: 15000, keepaliveMilliseconds: 60000)])
        let wire = message.encode()
        #expect(Array(wire[0..<12]) == hex("1234 3000 0000 0000 0000 0000"))
        #expect(Array(wire[12...]) == hex("0001 0008 00003a98 0000ea60"))
        let decoded = try DSOMessage(wire: wire)
        #expect(decoded == message)
        #expect(decoded.primary?.keepaliveValues?.keepalive == 60000)
        #expect(!decoded.isUnidirectional)
    }

    @Test("non-zero counts and overrunning TLVs are malformed (§5.4: FORMERR)")
    func malformed() {
        #expect(throws: DSOError.self) { try DSOMessage(wire: hex("0001 3000 0001 0000 0000 0000")) }
        #expect(throws: DSOError.self) { try DSOMessage(wire: hex("0001 3000 0000 0000 0000 0000 0040 0010 00")) }
        #expect(throws: DSOError.notDSO) { try DSOMessage(wire: hex("0001 0000 0000 0000 0000 0000")) }
        #expect(throws: DSOError.noHeader) { try DSOMessage(wire: [0, 1]) }
    }

    @Test("SUBSCRIBE, UNSUBSCRIBE and RECONFIRM round-trip; names are never compressed")
    func pushTLVs() throws {
        let subscribe = PushSubscribe(name: name("_ipp._tcp.lab1.example."), type: .ptr)
        #expect(subscribe.tlv.data == name("_ipp._tcp.lab1.example.").wireBytes + hex("000c 0001"))
        #expect(try PushSubscribe(tlv: subscribe.tlv) == subscribe)
        #expect(try PushUnsubscribe(tlv: PushUnsubscribe(subscriptionID: 77).tlv).subscriptionID == 77)
        let reconfirm = PushReconfirm(name: name("a.lab1.example."), type: .a, rdata: [192, 0, 2, 1])
        #expect(try PushReconfirm(tlv: reconfirm.tlv) == reconfirm)
        let pointer = DSOTLV(type: DSOTLV.subscribeType, data: hex("c00c 000c 0001"))
        #expect(throws: DSOError.self) { try PushSubscribe(tlv: pointer) }
    }

    @Test("PUSH: additions, single-record and RRset removals round-trip (§6.3.1 TTLs)")
    func pushChanges() throws {
        let owner = name("_ipp._tcp.lab1.example.")
        let target = try RData.ptr(name("P._ipp._tcp.lab1.example.")).wireBytes()
        let changes: [PushChange] = [
            .add(owner, .ptr, ttl: 4500, rdata: target),
            .remove(owner, .ptr, rdata: target),
            .removeSet(owner, .any),
        ]
        let messages = PushNotification.messages(for: changes)
        #expect(messages.count == 1)
        #expect(messages[0].isUnidirectional)
        let decoded = try PushNotification(tlv: try #require(try DSOMessage(wire: messages[0].encode()).primary))
        #expect(decoded.changes == changes)
        #expect(decoded.changes[1].ttl == 0xFFFF_FFFF)
        #expect(decoded.changes[2].ttl == 0xFFFF_FFFE && decoded.changes[2].rdata.isEmpty)
    }

    @Test("changes are split so that no PUSH exceeds 16,382 octets, in order, none lost")
    func split() throws {
        let owner = name("_bulk._tcp.lab1.example.")
        let changes = (0..<200).map { i in
            PushChange.add(owner, .txt, ttl: 4500, rdata: [UInt8](repeating: UInt8(i % 256), count: 700))
        }
        let messages = PushNotification.messages(for: changes)
        #expect(messages.count > 1)
        var back: [PushChange] = []
        for message in messages {
            let wire = message.encode()
            #expect(wire.count <= DSOMessage.maxPushMessageSize)
            back += try PushNotification(tlv: try #require(try DSOMessage(wire: wire).primary)).changes
        }
        #expect(back == changes)
    }
}
