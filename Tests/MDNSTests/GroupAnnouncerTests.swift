import DNSWire
import Testing

@testable import MDNS

/// What a group's changes become on the wire (RFC 6762 §8.3, §8.4, §10.1, §10.2).
@Suite struct GroupAnnouncerTests {
    final class Capture: AnnouncementTransport {
        var packets: [(interface: String, packet: [UInt8])] = []
        func send(_ packet: [UInt8], on interface: String) -> String? {
            packets.append((interface, packet))
            return nil
        }

        /// "name type ttl" of every record sent since the last call.
        func take() throws -> [String] {
            defer { packets = [] }
            return try packets.flatMap {
                try Message(wire: $0.packet).answers.map { "\($0.name) \($0.type) \($0.ttl)" }
            }
        }
    }

    static let key = MDNSGroup.Key(interface: "eth2", name: "printer")
    static let host = MDNSGroup.Key(interface: "eth2", name: "host")

    static func record(_ name: String, _ type: RRType, _ data: [UInt8]) -> MDNSRecord {
        MDNSRecord(name: try! DNSName(name), type: type, rdata: data)
    }

    static let ptr = record("_ipp._tcp.local.", .ptr, try! DNSName("P._ipp._tcp.local.").wireBytes)
    static let services = record("_services._dns-sd._udp.local.", .ptr, try! DNSName("_ipp._tcp.local.").wireBytes)
    static let txt1 = record("P._ipp._tcp.local.", .txt, [3, 0x61, 0x3d, 0x31])
    static let txt2 = record("P._ipp._tcp.local.", .txt, [3, 0x61, 0x3d, 0x32])
    static let a1 = record("p-lab1.local.", .a, [192, 0, 2, 1])
    static let a2 = record("p-lab1.local.", .a, [192, 0, 2, 2])
    static let a3 = record("p-lab1.local.", .a, [192, 0, 2, 3])

    func announcer() -> (GroupAnnouncer, Capture) {
        let capture = Capture()
        return (GroupAnnouncer(pacing: AnnouncementPacing(), sender: capture), capture)
    }

    @Test("a group is announced in full with RFC 6762 §10 TTLs; a changed TXT alone")
    func establishedAndChanged() throws {
        let (announcer, capture) = announcer()
        announcer.established(Self.key, records: [Self.ptr, Self.services, Self.txt1])
        _ = announcer.send()
        #expect(
            try capture.take() == [
                "_ipp._tcp.local. PTR 4500", "_services._dns-sd._udp.local. PTR 4500", "P._ipp._tcp.local. TXT 4500",
            ])
        announcer.established(Self.key, records: [Self.ptr, Self.services, Self.txt2])
        _ = announcer.send()
        #expect(try capture.take() == ["P._ipp._tcp.local. TXT 4500"], "the new TXT flushes the old: no goodbye")
    }

    @Test("an RRset that gains or loses a member goes out whole, so cache-flush keeps the rest (§10.2)")
    func wholeRRset() throws {
        let (announcer, capture) = announcer()
        announcer.established(Self.host, records: [Self.a1, Self.a2])
        _ = announcer.send()
        _ = try capture.take()
        announcer.established(Self.host, records: [Self.a1, Self.a2, Self.a3])
        _ = announcer.send()
        #expect(try capture.take() == ["p-lab1.local. A 120", "p-lab1.local. A 120", "p-lab1.local. A 120"])
        announcer.established(Self.host, records: [Self.a1])
        _ = announcer.send()
        #expect(try capture.take() == ["p-lab1.local. A 120"], "A1 alone with cache-flush removes the others")
    }

    @Test("a withdrawn group's goodbyes leave out what another group on the link still holds")
    func sharedPTRKept() throws {
        let (announcer, capture) = announcer()
        let other = MDNSGroup.Key(interface: "eth2", name: "other")
        let otherPTR = Self.record("_ipp._tcp.local.", .ptr, try DNSName("Q._ipp._tcp.local.").wireBytes)
        announcer.established(Self.key, records: [Self.ptr, Self.services, Self.txt1])
        announcer.established(other, records: [otherPTR, Self.services])
        _ = announcer.send()
        _ = try capture.take()
        announcer.withdrawn(Self.key)
        _ = announcer.send()
        #expect(try capture.take() == ["_ipp._tcp.local. PTR 0", "P._ipp._tcp.local. TXT 0"])
    }

    @Test("a collision says goodbye to our unique records only; the PTR is the owner's too")
    func collided() throws {
        let (announcer, capture) = announcer()
        announcer.established(Self.key, records: [Self.ptr, Self.txt1])
        _ = announcer.send()
        _ = try capture.take()
        announcer.collided(Self.key)
        _ = announcer.send()
        #expect(try capture.take() == ["P._ipp._tcp.local. TXT 0"])
    }

    @Test("what is held under a name is what the groups hold now, each record once")
    func heldByName() throws {
        let (announcer, _) = announcer()
        let other = MDNSGroup.Key(interface: "eth2", name: "other")
        announcer.established(Self.key, records: [Self.ptr, Self.txt1])
        announcer.established(other, records: [Self.ptr])
        #expect(announcer.held(try DNSName("_ipp._tcp.local."), on: "eth2") == [Self.ptr])
        #expect(announcer.held(try DNSName("p._IPP._tcp.local."), on: "eth2") == [Self.txt1])
        #expect(announcer.held(try DNSName("_ipp._tcp.local."), on: "eth3").isEmpty)
        #expect(announcer.groups(holding: try DNSName("P._ipp._tcp.local."), .txt, on: "eth2") == [Self.key])
        announcer.withdrawn(Self.key)
        #expect(announcer.held(try DNSName("_ipp._tcp.local."), on: "eth2") == [Self.ptr])
        #expect(announcer.held(try DNSName("P._ipp._tcp.local."), on: "eth2").isEmpty)
    }

    @Test("a link that came back: everything is announced again (§8.3)")
    func reannounce() throws {
        let (announcer, capture) = announcer()
        announcer.established(Self.key, records: [Self.ptr, Self.txt1])
        _ = announcer.send()
        _ = try capture.take()
        announcer.reannounce()
        _ = announcer.send()
        #expect(try capture.take() == ["_ipp._tcp.local. PTR 4500", "P._ipp._tcp.local. TXT 4500"])
    }

    @Test("shutdown sends every goodbye at once")
    func shutdown() throws {
        let (announcer, capture) = announcer()
        announcer.established(Self.key, records: [Self.ptr, Self.txt1])
        _ = announcer.send()
        _ = try capture.take()
        #expect(announcer.shutdown().isEmpty)
        #expect(try capture.take() == ["_ipp._tcp.local. PTR 0", "P._ipp._tcp.local. TXT 0"])
    }
    @Test("each instance's host is announced right after it, not after every instance")
    func hostsFollowTheirInstances() throws {
        func srv(_ target: String) throws -> [UInt8] { [0, 0, 0, 0, 0x02, 0x77] + (try DNSName(target).wireBytes) }
        var wanted: [MDNSGroup.Key: [MDNSRecord]] = [:]
        for i in 0..<3 {
            wanted[MDNSGroup.Key(interface: "eth2", name: "_ipp._tcp P\(i)")] = [
                Self.record("P\(i)._ipp._tcp.local.", .srv, try srv("Host-\(i).local.")), Self.txt1,
            ]
            wanted[MDNSGroup.Key(interface: "eth2", name: "host \(i)")] = [
                Self.record("host-\(i).local.", .a, [192, 0, 2, UInt8(i)])
            ]
        }
        wanted[MDNSGroup.Key(interface: "eth2", name: "host 9")] = [Self.record("nobody.local.", .a, [192, 0, 2, 9])]
        #expect(
            LinkResponder.announcementOrder(wanted).map(\.name) == [
                "_ipp._tcp P0", "host 0", "_ipp._tcp P1", "host 1", "_ipp._tcp P2", "host 2", "host 9",
            ])
    }
}
