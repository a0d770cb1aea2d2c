import DNSWire
import Testing

@Suite struct MessageDecodeTests {
    @Test func digQueryWithoutEDNS() throws {
        let message = try Message(wire: DigQueries.ptrNoEDNS)
        #expect(message.id == 0xfeed)
        #expect(!message.isResponse && !message.recursionDesired && message.authenticData)
        #expect(message.questions == [Question(name: name("_ipp._tcp.example."), type: .ptr)])
        #expect(message.answers.isEmpty && message.authority.isEmpty && message.additional.isEmpty)
        #expect(message.edns == nil)
        #expect(message.rcode == .noError)
    }

    @Test func digQueryWithSpaceInLabelAndEDNS() throws {
        let message = try Message(wire: DigQueries.srvWithSpace)
        #expect(message.questions.count == 1)
        #expect(message.questions[0].name.labels[0] == Array("My Printer".utf8))
        #expect(message.questions[0].name.description == #"My\032Printer._ipp._tcp.example."#)
        #expect(message.questions[0].type == .srv)
        #expect(message.additional.isEmpty, "OPT must not show up in additional")
        #expect(message.edns == EDNS(udpPayloadSize: 1232, extendedRCodeHigh: 0, version: 0, dnssecOK: false))
    }

    @Test func digQueryWithCookieAndDO() throws {
        let message = try Message(wire: DigQueries.soaWithCookieAndDO)
        let edns = try #require(message.edns)
        #expect(edns.dnssecOK)
        #expect(edns.udpPayloadSize == 1232)
        #expect(edns.options == [EDNS.Option(code: 10, data: [1, 2, 3, 4, 5, 6, 7, 8])])
    }

    @Test func digQueryWithEDNSVersion1AndUnknownOption() throws {
        let message = try Message(wire: DigQueries.ednsVersion1)
        #expect(message.recursionDesired)
        let edns = try #require(message.edns)
        #expect(edns.version == 1)
        #expect(edns.options == [EDNS.Option(code: 65001, data: [0])])
        #expect(message.questions[0].name == name("bldg-1.example.com."))
    }

    @Test func reencodingDigQueriesGivesTheSameBytes() throws {
        let queries = [
            DigQueries.ptrNoEDNS, DigQueries.srvWithSpace, DigQueries.soaWithCookieAndDO, DigQueries.ednsVersion1,
        ]
        for query in queries {
            #expect(try Message(wire: query).encode() == query)
        }
    }

    @Test func masksMDNSTopBitsOfClasses() throws {
        // QU question plus a cache-flush answer, as an mDNS responder would send them.
        var wire = hex("0000 8400 0001 0001 0000 0000")
        wire += hex("0470726e74 056c6f63616c 00 0001 8001")
        wire += hex("c00c 0001 8001 00000078 0004 cb007102")
        let message = try Message(wire: wire)
        #expect(message.questions[0].qclass == .in)
        #expect(message.answers[0].rrClass == .in)
        #expect(message.answers[0].ttl == 120)
        #expect(message.answers[0].rdata == .a([203, 0, 113, 2]))
        #expect(message.answers[0].name == name("prnt.local."))
    }

    @Test func extendedRCodeIsRecombined() throws {
        // Response, header rcode 0, OPT ext-rcode 1: BADVERS (16).
        let wire = hex("1234 8000 0000 0000 0000 0001 00 0029 04d0 01000000 0000")
        let message = try Message(wire: wire)
        #expect(message.rcode == .badVers)
        #expect(message.edns?.extendedRCodeHigh == 1)
    }

    @Test func bareHeaderWithNoQuestionsDecodes() throws {
        // QDCOUNT 0 is legal on the wire (DSO uses it); the query handler decides on FORMERR.
        let message = try Message(wire: hex("0001 3000 0000 0000 0000 0000"))
        #expect(message.questions.isEmpty)
        #expect(message.opcode == .dso)
    }
}

@Suite struct MessageEncodeTests {
    static let zone = name(#"Building\0321.example.com."#)

    static func instance(_ label: String) -> DNSName {
        try! Self.zone.prepending([Array(label.utf8), Array("_ipp".utf8), Array("_tcp".utf8)])
    }

    static func browseResponse() -> Message {
        let service = try! Self.zone.prepending([Array("_ipp".utf8), Array("_tcp".utf8)])
        let host = try! Self.zone.prepending([Array("prnt".utf8)])
        let labels = ["Dot.ted Printer", "Drucker Küche", #"Back\slash"#, "plain"]
        var message = Message(
            id: 7, isResponse: true, authoritative: true, recursionDesired: true,
            questions: [Question(name: service, type: .ptr)], edns: EDNS(udpPayloadSize: 1232)
        )
        for label in labels {
            let instance = Self.instance(label)
            message.answers.append(ResourceRecord(name: service, type: .ptr, ttl: 10, rdata: .ptr(instance)))
            message.additional.append(
                ResourceRecord(
                    name: instance, type: .srv, ttl: 10, rdata: .srv(priority: 0, weight: 0, port: 631, target: host)
                )
            )
            message.additional.append(
                ResourceRecord(name: instance, type: .txt, ttl: 10, rdata: .txt([7] + Array("rp=ipp/".utf8)))
            )
        }
        message.additional.append(ResourceRecord(name: host, type: .a, ttl: 10, rdata: .a([203, 0, 113, 2])))
        return message
    }

    @Test func roundTripsEveryRDataCase() throws {
        var message = Message(id: 0xbeef, isResponse: true, questions: [Question(name: Self.zone, type: .any)])
        for (index, (type, rdata)) in RDataTests.cases.enumerated() {
            let owner = Self.instance("r\(index) x.y")
            let record = ResourceRecord(name: owner, type: type, ttl: UInt32(index), rdata: rdata)
            switch index % 3 {
            case 0: message.answers.append(record)
            case 1: message.authority.append(record)
            default: message.additional.append(record)
            }
        }
        let wire = try message.encode()
        #expect(try Message(wire: wire) == message)
    }

    @Test func roundTripsHeaderFlags() throws {
        let message = Message(
            id: 0xffff, isResponse: true, opcode: .query, authoritative: true, truncated: true,
            recursionDesired: true, recursionAvailable: true, authenticData: true, checkingDisabled: true,
            rcode: .nxDomain, questions: [Question(name: name("a.example."), type: .a, qclass: .any)]
        )
        let wire = try message.encode()
        #expect(wire.prefix(4) == [0xff, 0xff, 0x87, 0xb3])
        #expect(try Message(wire: wire) == message)
    }

    @Test func browseResponseRoundTripsAndCompressesOwners() throws {
        let message = Self.browseResponse()
        let wire = try message.encode()
        #expect(try Message(wire: wire) == message)
        // The first answer's owner equals the question name: a pointer to offset 12.
        let questionEnd = 12 + message.questions[0].name.wireLength + 4
        #expect(wire[questionEnd] == 0xC0 && wire[questionEnd + 1] == 0x0C)
        // Without compression the zone name alone would repeat 1 + 4 + 8 times.
        #expect(wire.count < 600)
    }

    @Test func txtBytesAppearOnTheWireUnchanged() throws {
        let owner = Self.instance("t")
        let binary: [UInt8] = [9, 0x00, 0xff, 0x3d, 0x3d, 0x0a, 0x5c, 0x2e, 0x20, 0x01]
        var large: [UInt8] = []
        while large.count + 256 <= 9000 { large += [255] + (0..<255).map { UInt8($0) } }
        large += [UInt8(9000 - large.count - 1)] + Array(repeating: 0x3d, count: 9000 - large.count - 1)
        for txt in [[0x00], binary, [4] + Array("=a=b".utf8), large] {
            let message = Message(
                isResponse: true, answers: [ResourceRecord(name: owner, type: .txt, ttl: 10, rdata: .txt(txt))]
            )
            let wire = try message.encode()
            // RDLENGTH followed by the exact bytes, at the very end of the message.
            let rdLength: [UInt8] = [UInt8(txt.count >> 8), UInt8(txt.count & 0xFF)]
            #expect(Array(wire.suffix(txt.count + 2)) == rdLength + txt)
            #expect(try Message(wire: wire).answers[0].rdata == .txt(txt))
        }
    }

    @Test func badversSplitsBetweenHeaderAndOPT() throws {
        let message = Message(
            id: 1, isResponse: true, rcode: .badVers,
            questions: [Question(name: name("bldg-1.example.com."), type: .soa)],
            edns: EDNS(udpPayloadSize: 1232, extendedRCodeHigh: 1)
        )
        let wire = try message.encode()
        #expect(wire.header.headerRCode == 0)
        #expect(wire.header.arCount == 1)
        // OPT: root owner, type 41, class 1232, TTL ext-rcode 1 / version 0 / flags 0, RDLENGTH 0.
        #expect(Array(wire.suffix(11)) == hex("00 0029 04d0 01 00 0000 0000"))
        #expect(try Message(wire: wire) == message)
    }

    @Test func ednsFieldsAndOptionsRoundTrip() throws {
        let edns = EDNS(
            udpPayloadSize: 4096, extendedRCodeHigh: 0, version: 0, dnssecOK: true,
            options: [
                EDNS.Option(code: 10, data: Array(0..<24)), EDNS.Option(code: 12, data: []),
                EDNS.Option(code: 65001, data: [0]),
            ]
        )
        let message = Message(id: 2, questions: [Question(name: name("x.example."), type: .a)], edns: edns)
        let wire = try message.encode()
        #expect(try Message(wire: wire) == message)
        #expect(wire.firstRange(of: hex("000a 0018") + Array(0..<24)) != nil)
        #expect(wire.firstRange(of: hex("000c 0000 fde9 0001 00")) != nil)
    }

    /// ldns compares names case-insensitively when compressing (ldns_dname_compare): an owner
    /// that differs from an earlier name only in case becomes a pointer to that spelling.
    @Test func compressionIsCaseInsensitive() throws {
        let asked = name(#"my\032printer._ipp._tcp.example."#)
        let owner = name(#"My\032Printer._ipp._tcp.example."#)
        let message = Message(
            isResponse: true, questions: [Question(name: asked, type: .txt)],
            answers: [ResourceRecord(name: owner, type: .txt, ttl: 10, rdata: .txt([0]))]
        )
        let wire = try message.encode()
        #expect(wire.count == 12 + asked.wireLength + 4 + 2 + 10 + 1)
        #expect(try Message(wire: wire).answers[0].name.labels == asked.labels)
    }

    @Test func zeroPayloadOPTIsStillEmitted() throws {
        let message = Message(questions: [Question(name: .root, type: .ns)], edns: EDNS(udpPayloadSize: 0))
        let wire = try message.encode()
        #expect(wire.header.arCount == 1)
        #expect(try Message(wire: wire).edns == EDNS(udpPayloadSize: 0))
    }

    @Test func noOPTWithoutEDNS() throws {
        let message = Message(questions: [Question(name: name("x.example."), type: .a)])
        let wire = try message.encode()
        #expect(wire.header.arCount == 0)
        #expect(wire.count == 12 + 11 + 4)
    }

    @Test func extendedRCodeWithoutOPTIsAnError() {
        let message = Message(rcode: .badVers, questions: [Question(name: name("x.example."), type: .a)])
        #expect(throws: DNSWireError.self) { try message.encode() }
    }

    @Test func optInAdditionalIsRejectedOnEncode() {
        let message = Message(additional: [ResourceRecord(name: .root, type: .opt, ttl: 0, rdata: .raw([]))])
        #expect(throws: DNSWireError.self) { try message.encode() }
    }
}
