import DNSWire
import Testing

@Suite struct TruncationTests {
    static let service = name(#"_ipp._tcp.Building\0321.example.com."#)

    /// A PTR answer plus additional RRsets SRV, TXT (large), A, in that order.
    static func response(txtSize: Int, edns: EDNS? = EDNS(udpPayloadSize: 1232)) -> Message {
        let instance = try! Self.service.prepending([Array("My Printer".utf8)])
        let host = name(#"prnt.Building\0321.example.com."#)
        var txt: [UInt8] = []
        while txt.count < txtSize {
            let length = min(255, txtSize - txt.count - 1)
            txt += [UInt8(length)] + Array(repeating: 0x61, count: length)
        }
        return Message(
            id: 9, isResponse: true, authoritative: true, questions: [Question(name: Self.service, type: .ptr)],
            answers: [ResourceRecord(name: Self.service, type: .ptr, ttl: 10, rdata: .ptr(instance))],
            additional: [
                ResourceRecord(
                    name: instance, type: .srv, ttl: 10, rdata: .srv(priority: 0, weight: 0, port: 631, target: host)
                ),
                ResourceRecord(name: instance, type: .txt, ttl: 10, rdata: .txt(txt)),
                ResourceRecord(name: host, type: .a, ttl: 10, rdata: .a([203, 0, 113, 2])),
                ResourceRecord(name: host, type: .a, ttl: 10, rdata: .a([203, 0, 113, 3])),
            ],
            edns: edns
        )
    }

    @Test func fitsUntouched() throws {
        let message = Self.response(txtSize: 100)
        let wire = try message.encode(limit: 512)
        #expect(try Message(wire: wire) == message)
    }

    @Test func dropsWholeAdditionalRRsetsLastFirstWithoutTC() throws {
        let message = Self.response(txtSize: 600)
        let full = try message.encode()
        #expect(full.count > 512)
        let wire = try message.encode(limit: 512)
        #expect(wire.count <= 512)
        #expect(!wire.header.truncatedFlag)
        let decoded = try Message(wire: wire)
        #expect(decoded.answers == message.answers)
        // The TXT RRset does not fit, so it and every RRset after it (both A records) are gone.
        #expect(decoded.additional == [message.additional[0]])
        #expect(decoded.edns == message.edns)
    }

    @Test func keepsEveryRRsetThatFitsAndDropsTheRRsetWhole() throws {
        var message = Self.response(txtSize: 100)
        let full = try message.encode()
        // Room for everything except the second A record: the A RRset must go as a whole.
        let wire = try message.encode(limit: full.count - 1)
        let decoded = try Message(wire: wire)
        #expect(!wire.header.truncatedFlag)
        #expect(decoded.additional == Array(message.additional.prefix(2)))
        // Interleaved RRsets: the A RRset (first seen at index 0) survives as a whole.
        message.additional = [message.additional[2], message.additional[1], message.additional[3]]
        let interleavedFull = try message.encode()
        let interleaved = try Message(wire: try message.encode(limit: interleavedFull.count - 1))
        #expect(interleaved.additional == [message.additional[0], message.additional[2]])
    }

    @Test func setsTCAndKeepsQuestionAndOPTWhenAnswersDoNotFit() throws {
        var message = Self.response(txtSize: 10)
        // About 50 KB of answers: 70 printers with 700-byte TXT records (RFC 8766 §5.5.5).
        let txt =
            [255] + Array(repeating: UInt8(0x62), count: 255) + [255] + Array(repeating: UInt8(0x63), count: 255)
            + [187] + Array(repeating: UInt8(0x64), count: 187)
        message.answers = (0..<70).map { index in
            ResourceRecord(
                name: try! Self.service.prepending([Array("Printer \(index)".utf8)]), type: .txt, ttl: 10,
                rdata: .txt(txt)
            )
        }
        message.edns?.options = [EDNS.Option(code: 10, data: Array(repeating: 7, count: 24))]
        let wire = try message.encode(limit: 1232)
        #expect(wire.count <= 1232)
        let header = wire.header
        #expect(header.truncatedFlag)
        #expect(header.qdCount == 1 && header.anCount == 0 && header.nsCount == 0 && header.arCount == 1)
        let decoded = try Message(wire: wire)
        #expect(decoded.truncated)
        #expect(decoded.questions == message.questions)
        #expect(decoded.edns == message.edns, "RFC 6891 §7: a TC=1 reply still has the OPT")
        #expect(decoded.answers.isEmpty && decoded.additional.isEmpty)

        // Over TCP the same message fits whole.
        let tcp = try message.encode(limit: 65535)
        #expect(!tcp.header.truncatedFlag)
        #expect(try Message(wire: tcp).answers.count == 70)
    }

    @Test func truncatesWithoutOPTWhenThereIsNone() throws {
        var message = Self.response(txtSize: 10, edns: nil)
        message.answers += (0..<40).map { index in
            ResourceRecord(
                name: Self.service, type: .ptr, ttl: 10,
                rdata: .ptr(try! Self.service.prepending([Array("A rather long printer name number \(index)".utf8)]))
            )
        }
        let wire = try message.encode(limit: 512)
        #expect(wire.header.truncatedFlag)
        #expect(wire.header.arCount == 0)
        #expect(wire.count == 12 + Self.service.wireLength + 4)
    }

    @Test func neverExceedsTheLimit() throws {
        let message = Self.response(txtSize: 900)
        let full = try message.encode()
        let minimal = 12 + Self.service.wireLength + 4 + 11
        var sawTrimmed = false
        var sawTruncated = false
        for limit in stride(from: minimal, through: full.count + 10, by: 7) {
            let wire = try message.encode(limit: limit)
            #expect(wire.count <= limit, "limit \(limit)")
            let decoded = try Message(wire: wire)
            if wire.header.truncatedFlag {
                sawTruncated = true
                #expect(decoded.answers.isEmpty)
            } else {
                #expect(decoded.answers == message.answers)
                if decoded.additional.count < message.additional.count { sawTrimmed = true }
            }
        }
        #expect(sawTrimmed && sawTruncated)
        #expect(throws: DNSWireError.self) { try message.encode(limit: minimal - 1) }
        #expect(throws: DNSWireError.self) { try message.encode(limit: 11) }
    }
}
