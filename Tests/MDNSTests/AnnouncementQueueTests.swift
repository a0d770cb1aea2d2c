import DNSWire
import Testing

@testable import MDNS

/// The publisher's own announcements (RFC 6762 §8.3, §8.4, §10.1), paced per interface.
@Suite struct AnnouncementQueueTests {
    static func record(_ name: String, _ type: RRType = .txt, _ data: [UInt8] = [3, 0x61, 0x3d, 0x31]) -> MDNSRecord {
        MDNSRecord(name: try! DNSName(name), type: type, rdata: data)
    }

    static func outgoing(_ record: MDNSRecord, ttl: UInt32 = 4500) -> AnnouncementQueue.Outgoing {
        .init(record: record, unique: record.type != .ptr, ttl: ttl)
    }

    /// Records and TTLs of one packet, read back by a parser we did not write (ldns).
    static func parse(_ packet: [UInt8]) throws -> [(name: String, type: RRType, flush: Bool, ttl: UInt32)] {
        #expect(Array(packet[0..<4]) == [0, 0, 0x84, 0], "ID 0, QR and AA (RFC 6762 §18)")
        let message = try Message(wire: packet)
        #expect(message.questions.isEmpty)
        // The cache-flush bit is the class's top bit, which the parser masks: read it from the bytes.
        var flush: [Bool] = []
        var offset = 12
        for _ in message.answers {
            // The owner name: labels, then the root or a compression pointer (RFC 1035 §4.1.4).
            while packet[offset] != 0 && packet[offset] & 0xC0 != 0xC0 { offset += Int(packet[offset]) + 1 }
            offset += packet[offset] == 0 ? 1 : 2
            flush.append(packet[offset + 2] & 0x80 != 0)
            offset += 10 + (Int(packet[offset + 8]) << 8 | Int(packet[offset + 9]))
        }
        #expect(offset == packet.count)
        return zip(message.answers, flush).map { ("\($0.name)", $0.type, $1, $0.ttl) }
    }

    @Test("two announcements one second apart, unique records with the cache-flush bit (§8.3, §10.2)")
    func twoAnnouncements() throws {
        var queue = AnnouncementQueue()
        let ptr = Self.record("_ipp._tcp.local.", .ptr, try DNSName("P._ipp._tcp.local.").wireBytes)
        let txt = Self.record("P._ipp._tcp.local.")
        queue.announce([Self.outgoing(ptr), Self.outgoing(txt)], on: "eth1", now: .seconds(10))
        let first = queue.due(now: .seconds(10))
        #expect(first.count == 1 && first[0].interface == "eth1")
        let records = try Self.parse(first[0].packet)
        #expect(records.map(\.type) == [.ptr, .txt] && records.map(\.flush) == [false, true])
        #expect(records.allSatisfy { $0.ttl == 4500 })
        #expect(queue.nextDue == .seconds(11))
        #expect(queue.due(now: .milliseconds(10_999)).isEmpty)
        #expect(try Self.parse(queue.due(now: .seconds(11))[0].packet).count == 2)
        #expect(queue.isEmpty && queue.nextDue == nil)
    }

    @Test("a goodbye has TTL zero and cancels the pending second announcement (§10.1)")
    func goodbyeCancels() throws {
        var queue = AnnouncementQueue()
        let txt = Self.record("P._ipp._tcp.local.")
        queue.announce([Self.outgoing(txt)], on: "eth1", now: .zero)
        _ = queue.due(now: .zero)
        queue.goodbye([Self.outgoing(txt)], on: "eth1", now: .milliseconds(500))
        let packets = queue.due(now: .milliseconds(500))
        #expect(try Self.parse(packets[0].packet).map(\.ttl) == [0])
        #expect(queue.isEmpty, "no second announcement after the goodbye")
    }

    @Test("new data for a unique record replaces the pending announcement of the old (§8.4)")
    func updateReplaces() throws {
        var queue = AnnouncementQueue()
        let old = Self.record("P._ipp._tcp.local.", .txt, [3, 0x61, 0x3d, 0x31])
        let new = Self.record("P._ipp._tcp.local.", .txt, [3, 0x61, 0x3d, 0x32])
        queue.announce([Self.outgoing(old)], on: "eth1", now: .zero)
        _ = queue.due(now: .zero)
        queue.announce([Self.outgoing(new)], on: "eth1", now: .milliseconds(300))
        _ = queue.due(now: .milliseconds(300))
        let second = queue.due(now: .seconds(2))
        #expect(second.count == 1)
        let message = try Message(wire: second[0].packet)
        #expect(message.answers.count == 1)
        #expect(try message.answers[0].rdata.wireBytes() == [3, 0x61, 0x3d, 0x32])
    }

    @Test("records due together share packets of at most 1400 bytes, in order")
    func packing() throws {
        var queue = AnnouncementQueue()
        let records = (0..<40).map {
            Self.outgoing(Self.record("Printer \($0)._ipp._tcp.local.", .txt, Array(repeating: 7, count: 80)))
        }
        queue.announce(records, on: "eth1", now: .zero)
        let packets = queue.due(now: .zero)
        #expect(packets.count > 1 && packets.count < 10)
        #expect(packets.allSatisfy { $0.packet.count <= AnnouncementQueue.packetSize })
        let names = try packets.flatMap { try Self.parse($0.packet).map(\.name) }
        #expect(names == records.map { "\($0.record.name)" })
    }

    @Test("names are compressed (RFC 6762 §18.14), in owners and in PTR and SRV RDATA, and read back exactly")
    func compression() throws {
        // What the gateway announces for far instances: type PTR, `_services` PTR, SRV, TXT, A.
        let type = try DNSName("_ipp._tcp.local.")
        var records: [AnnouncementQueue.Outgoing] = []
        for k in 0..<60 {
            let instance = try DNSName("Crowd \(k)._ipp._tcp.local.")
            let host = try DNSName("crowd-\(k)-lab1.local.")
            records += [
                Self.outgoing(MDNSRecord(name: type, type: .ptr, rdata: instance.wireBytes)),
                Self.outgoing(
                    MDNSRecord(name: try DNSName("_services._dns-sd._udp.local."), type: .ptr, rdata: type.wireBytes)),
                Self.outgoing(MDNSRecord(name: instance, type: .srv, rdata: [0, 0, 0, 0, 2, 0x77] + host.wireBytes)),
                Self.outgoing(
                    Self.record("Crowd \(k)._ipp._tcp.local.", .txt, [6] + Array("dev=\(k % 10)\(k % 10)".utf8))),
                Self.outgoing(MDNSRecord(name: host, type: .a, rdata: [192, 0, 2, UInt8(k)])),
            ]
        }
        let packets = MDNSResponseEncoder.packets(records, limit: AnnouncementQueue.packetSize)
        var read: [AnnouncementQueue.Outgoing] = []
        for packet in packets {
            #expect(packet.bytes.count <= AnnouncementQueue.packetSize)
            for answer in try Message(wire: packet.bytes).answers {
                // ldns decompresses; the RDATA it returns must be the records' own, octet for octet.
                let sent = try #require(
                    records.first {
                        $0.record.name == answer.name && $0.record.type == answer.type
                            && (try? RData(type: $0.record.type, wire: $0.record.rdata)) == answer.rdata
                    })
                #expect("\(answer.name)" == "\(sent.record.name)", "case and spelling kept")
                read.append(sent)
            }
        }
        #expect(read == records)
        let uncompressed = records.reduce(0) { $0 + $1.record.name.wireBytes.count + 10 + $1.record.rdata.count }
        let compressed = packets.reduce(0) { $0 + $1.bytes.count - MDNSResponseEncoder.headerSize }
        #expect(compressed * 2 < uncompressed, "\(compressed) of \(uncompressed) octets")
    }

    @Test("a record larger than a packet goes alone (RFC 6762 §17)")
    func largeRecord() throws {
        var queue = AnnouncementQueue()
        let big = Self.record("Big._ipp._tcp.local.", .txt, Array(repeating: 7, count: 3000))
        queue.announce([Self.outgoing(Self.record("A._ipp._tcp.local.")), Self.outgoing(big)], on: "eth1", now: .zero)
        let packets = queue.due(now: .zero)
        #expect(packets.count == 2 && packets[1].packet.count > 3000)
    }

    @Test("the budget spreads a burst over time per interface and drops nothing")
    func pacing() throws {
        var queue = AnnouncementQueue(pacing: AnnouncementPacing(packetsPerSecond: 10, burst: 2))
        let records = (0..<20).map {
            Self.outgoing(Self.record("Printer \($0)._ipp._tcp.local.", .txt, Array(repeating: 7, count: 600)))
        }
        queue.announce(records, on: "eth1", now: .zero)
        queue.announce([Self.outgoing(Self.record("Other._ipp._tcp.local."))], on: "eth2", now: .zero)
        var sent: [Duration: [String]] = [:]
        var now = Duration.zero
        var seen: [String] = []
        var times: [String: [Duration]] = [:]
        while let next = queue.nextDue, next < .seconds(10) {
            now = max(now, next)
            for (interface, packet) in queue.due(now: now) {
                sent[now, default: []].append(interface)
                guard interface == "eth1" else { continue }
                for name in try Self.parse(packet).map(\.name) {
                    seen.append(name)
                    times[name, default: []].append(now)
                }
            }
        }
        // A record held back by the budget still gets two announcements, a second apart.
        #expect(times.values.allSatisfy { $0.count == 2 && $0[1] - $0[0] >= .seconds(1) })
        #expect(sent[.zero]?.filter { $0 == "eth1" }.count == 2, "the burst")
        #expect(sent[.zero]?.contains("eth2") == true, "another interface has its own budget")
        let eth1Times = sent.filter { $0.value.contains("eth1") }.keys.sorted()
        #expect(zip(eth1Times, eth1Times.dropFirst()).allSatisfy { $1 - $0 >= .milliseconds(99) })
        // Every record twice (both announcements), none lost.
        #expect(seen.count == 40 && Set(seen).count == 20)
    }

    @Test("what the budget holds back goes out before any second announcement, and a change to it replaces it there")
    func heldBackFirst() throws {
        var queue = AnnouncementQueue(pacing: AnnouncementPacing(packetsPerSecond: 2, burst: 1))
        let records = (0..<6).map {
            Self.outgoing(Self.record("Printer \($0)._ipp._tcp.local.", .txt, Array(repeating: 7, count: 600)))
        }
        queue.announce(records, on: "eth1", now: .zero)
        // Printer 5's TXT changes while it waits: the old data never goes out (§8.4).
        let changed = Self.outgoing(Self.record("Printer 5._ipp._tcp.local.", .txt, [3, 0x62, 0x3d, 0x32]))
        queue.announce([changed], on: "eth1", now: .milliseconds(100))
        var order: [(name: String, ttlData: Int)] = []
        var now = Duration.zero
        while let next = queue.nextDue, next < .seconds(20) {
            now = max(now, next)
            for (_, packet) in queue.due(now: now) {
                let message = try Message(wire: packet)
                order += message.answers.map { ("\($0.name)", (try? $0.rdata.wireBytes().count) ?? 0) }
            }
        }
        let names = order.map(\.name)
        #expect(names.count == 12 && Set(names).count == 6, "each twice")
        let firsts = names.indices.filter { i in !names[..<i].contains(names[i]) }
        #expect(firsts == Array(0..<6), "every first announcement before any second: \(names)")
        #expect(order.filter { $0.name.hasPrefix("Printer 5") }.allSatisfy { $0.ttlData == 4 }, "only the new TXT")
    }

    @Test("changes trickling in while the budget is spent: no window holds more than burst + rate x its length")
    func budgetHoldsInEveryWindow() throws {
        var queue = AnnouncementQueue()  // the defaults: 20 a second, bursts of 40
        let records = try (0..<1000).map { i in
            AnnouncementQueue.Outgoing(
                record: MDNSRecord(
                    name: try DNSName("Crowd \(i)._ipp._tcp.local."), type: .txt, rdata: Array(repeating: 7, count: 80)),
                unique: true, ttl: 4500)
        }
        // Twenty records every millisecond for the first 50 ms, as a thousand far devices arrive.
        var times: [Duration] = []
        var arrived = 0
        var now = Duration.zero
        while arrived < records.count || queue.nextDue != nil {
            if arrived < records.count {
                queue.announce(Array(records[arrived..<arrived + 20]), on: "eth1", now: now)
                arrived += 20
                now += .milliseconds(1)
            } else {
                now = max(now, queue.nextDue!)
            }
            times += queue.due(now: now).map { _ in now }
        }
        var worst = -Double.infinity
        for i in times.indices {
            for j in i..<times.count {
                worst = max(worst, Double(j - i + 1) - (40 + 20 * Double((times[j] - times[i]) / .seconds(1))))
            }
        }
        #expect(times.count > 100 && worst <= 0, "\(times.count) packets, at worst \(worst) over the budget")
    }

    @Test("shutdown sends everything at once, whatever the budget")
    func ignoringPacing() throws {
        var queue = AnnouncementQueue(pacing: AnnouncementPacing(packetsPerSecond: 1, burst: 1))
        let records = (0..<20).map {
            Self.outgoing(Self.record("Printer \($0)._ipp._tcp.local.", .txt, Array(repeating: 7, count: 600)))
        }
        queue.goodbye(records, on: "eth1", now: .zero)
        #expect(queue.due(now: .zero, ignoringPacing: true).count == 10)
        #expect(queue.isEmpty)
    }
}

extension AnnouncementQueue {
    /// What is due on every interface, in the interfaces' order (`GroupAnnouncer.send` takes
    /// them one interface at a time, each with the clock read then).
    mutating func due(now: Duration, ignoringPacing: Bool = false) -> [(interface: String, packet: [UInt8])] {
        interfaces.flatMap { interface in
            due(on: interface, now: now, ignoringPacing: ignoringPacing).map { (interface, $0) }
        }
    }
}
