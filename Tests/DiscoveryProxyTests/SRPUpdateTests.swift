import DNSWire
import Testing

@testable import DiscoveryProxy

/// SRP updates (RFC 9665 §3.3) as a requester sends them. The signed ones were made by
/// scripts/srp/srp_update.py (dnspython and cryptography; its SIG(0) construction is checked
/// against BIND's nsupdate in SIG0Tests and by that script's `verify`), with one key for the
/// first four and another for the last:
///   srp_update.py --key-file K --hex --id 4660 --host printer --address 2001:db8::5
///     --address 192.0.2.5 --service _ipp._tcp --instance "Printer 1" --subtype _universal
///     --port 631 --txt rp=ipp/print --txt ty=Lab
/// and the variations named below. The structure checks come before the signature's, so the
/// malformed instruction sets are built here, unsigned.
@Suite struct SRPUpdateTests {
    static let zone = try! DNSName("default.service.arpa.")
    static let signed = bytes(
        "1234280000010000000a00020764656661756c74077365727669636504617270610000060001045f697070045f746370"
            + "c00c000c000100000078000c095072696e7465722031c0260a5f756e6976657273616c045f737562c026000c00010000"
            + "00780002c03cc03c00ff00ff000000000000c03c00210001000000780010000000000277077072696e746572c00cc03c"
            + "001000010000007800140c72703d6970702f7072696e740674793d4c6162c03c001900010000007800440000030d2c6a"
            + "bd7b00f27d983dd06d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a8944a97fe01e90e7202e"
            + "34c9186ff9c76bf143448e31d132c08400ff00ff000000000000c084001c000100000078001020010db8000000000000"
            + "000000000005c08400010001000000780004c0000205c084001900010000007800440000030d2c6abd7b00f27d983dd0"
            + "6d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a8944a97fe01e90e7202e34c9186ff9c76bf1"
            + "43448e31d13200002904d000000000000c0002000800001c200012750000001800ff00000000007000000d0000000000"
            + "6b0b02c46b0b006cfc20077072696e7465720764656661756c740773657276696365046172706100650c5548ba67e824"
            + "94fe8f022961e76a77a6b4d30a0682cec338962f6ac5cdf8e2724f5cebb27e37950407dd928b7ea53b10f00809a3a191"
            + "2f0020accae5f111")
    /// The same without the Update Lease option (--lease -1), as nsupdate sends.
    static let withoutLease = bytes(
        "1234280000010000000800020764656661756c74077365727669636504617270610000060001045f697070045f746370"
            + "c00c000c000100000078000c095072696e7465722031c026c03c00ff00ff000000000000c03c00210001000000780010"
            + "000000000277077072696e746572c00cc03c0010000100000078000d0c72703d6970702f7072696e74c03c0019000100"
            + "00007800440000030d2c6abd7b00f27d983dd06d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f774"
            + "2a8944a97fe01e90e7202e34c9186ff9c76bf143448e31d132c06600ff00ff000000000000c066001c00010000007800"
            + "1020010db8000000000000000000000005c066001900010000007800440000030d2c6abd7b00f27d983dd06d645b6f47"
            + "aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a8944a97fe01e90e7202e34c9186ff9c76bf143448e31d1"
            + "3200002904d000000000000000001800ff00000000007000000d00000000006b0b02c46b0b006cfc20077072696e7465"
            + "720764656661756c740773657276696365046172706100f87d6bb0ba3bd34dd1b6c7996b458249dd3f76f441e63958c3"
            + "b6d7456ccbac4c638c01a8d6179d5d7a7abe40e7a5c3be4412894a4d2be1c089b2283902212f09")
    /// Removal: LEASE 0, KEY-LEASE 0, the PTR deleted, the instance and host deleted (--remove).
    static let removal = bytes(
        "1234280000010000000500020764656661756c74077365727669636504617270610000060001045f697070045f746370"
            + "c00c000c00fe00000000000c095072696e7465722031c026c03c00ff00ff000000000000c03c00190001000000780044"
            + "0000030d2c6abd7b00f27d983dd06d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a8944a97f"
            + "e01e90e7202e34c9186ff9c76bf143448e31d132077072696e746572c00c00ff00ff000000000000c0a4001900010000"
            + "007800440000030d2c6abd7b00f27d983dd06d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a"
            + "8944a97fe01e90e7202e34c9186ff9c76bf143448e31d13200002904d000000000000c00020008000000000000000000"
            + "001800ff00000000007000000d00000000006b0b03096b0b00b1fc20077072696e7465720764656661756c7407736572"
            + "7669636504617270610021fcc03058b00e374c1ad380fa509ecbbe29070a65908d9dd245ccfd0ff5e5c2c36ffb23e1ee"
            + "83c7594285b1cc69014d408b4c14a00d2a58d1c1b29ac38dd0db")
    /// A 4-octet Update Lease option: LEASE 7200, no KEY-LEASE (--key-lease -1).
    static let shortLease = bytes(
        "1234280000010000000800020764656661756c74077365727669636504617270610000060001045f697070045f746370"
            + "c00c000c000100000078000c095072696e7465722031c026c03c00ff00ff000000000000c03c00210001000000780010"
            + "000000000277077072696e746572c00cc03c0010000100000078000d0c72703d6970702f7072696e74c03c0019000100"
            + "00007800440000030d2c6abd7b00f27d983dd06d645b6f47aad85c359b383f155618db7934e9e0afdc009b08ab23f774"
            + "2a8944a97fe01e90e7202e34c9186ff9c76bf143448e31d132c06600ff00ff000000000000c066001c00010000007800"
            + "1020010db8000000000000000000000005c066001900010000007800440000030d2c6abd7b00f27d983dd06d645b6f47"
            + "aad85c359b383f155618db7934e9e0afdc009b08ab23f7742a8944a97fe01e90e7202e34c9186ff9c76bf143448e31d1"
            + "3200002904d00000000000080002000400001c2000001800ff00000000007000000d00000000006b0b02c46b0b006cfc"
            + "20077072696e7465720764656661756c7407736572766963650461727061008bd26d9a91e5389b0868cee407b1bcef07"
            + "4e5ab576607a90df608bd38e5cf1043e33e736f9fce2f85fa41dbb38a345c6985527b1cbd5c6d817b3ff5e73091ed9")
    /// The same names under another key (--address 2001:db8::6).
    static let otherKey = bytes(
        "1235280000010000000800020764656661756c74077365727669636504617270610000060001045f697070045f746370"
            + "c00c000c000100000078000c095072696e7465722031c026c03c00ff00ff000000000000c03c00210001000000780010"
            + "000000000277077072696e746572c00cc03c0010000100000078000d0c72703d6970702f7072696e74c03c0019000100"
            + "00007800440000030dba5d3ee8b86bad47eb6c05722feb44ce9a269292714ee4b2efd99cdfc1385d5e934a7b6c5f5c3e"
            + "4a3d22853cde2e468f8a275180c1dca8734e0a5def2a6a1058c06600ff00ff000000000000c066001c00010000007800"
            + "1020010db8000000000000000000000006c066001900010000007800440000030dba5d3ee8b86bad47eb6c05722feb44"
            + "ce9a269292714ee4b2efd99cdfc1385d5e934a7b6c5f5c3e4a3d22853cde2e468f8a275180c1dca8734e0a5def2a6a10"
            + "5800002904d000000000000c0002000800001c200012750000001800ff00000000007000000d00000000006b0b02c46b"
            + "0b006cb5d8077072696e7465720764656661756c7407736572766963650461727061006f1988aa4e0ae162076f3d2412"
            + "72c3ff2fda1ea7e5807ff7e1c2d01841da7a4db67d6cd8fe91f46a476f2da9e5e43dfa8a103cf0369a2896368b60a6c4"
            + "2542f4")

    static func read(_ wire: [UInt8]) throws -> Result<SRPUpdate, SRPUpdate.Rejection> {
        SRPUpdate.read(try Message(wire: wire), wire: wire, zones: [zone])
    }

    @Test func aSignedUpdateIsRead() throws {
        let update = try Self.read(Self.signed).get()
        #expect(update.zone == Self.zone)
        #expect(update.host.name == (try DNSName("printer.default.service.arpa.")))
        #expect(update.host.addresses.count == 2)
        #expect(update.host.key.algorithm == SIG0Key.ecdsaP256SHA256)
        #expect(update.keyTag == update.host.key.tag)
        #expect(update.lease == UpdateLease(lease: 7200, keyLease: 1_209_600))
        #expect(update.services.count == 1)
        let service = update.services[0]
        #expect(service.instance == (try DNSName(#"Printer\0321._ipp._tcp.default.service.arpa."#)))
        #expect(service.srv?.port == 631)
        #expect(service.txt == [Array("\u{0C}rp=ipp/print\u{06}ty=Lab".utf8)])
        #expect(
            service.serviceNames == [
                try DNSName("_ipp._tcp.default.service.arpa."),
                try DNSName("_universal._sub._ipp._tcp.default.service.arpa."),
            ])
        #expect(!service.isDeleted)
    }

    @Test func aRemovalIsRead() throws {
        let update = try Self.read(Self.removal).get()
        #expect(update.lease == UpdateLease(lease: 0, keyLease: 0))
        #expect(update.host.addresses.isEmpty)
        #expect(update.services.count == 1)
        #expect(update.services[0].isDeleted)
        #expect(update.services[0].serviceNames.isEmpty)
    }

    @Test func anotherKeyIsStillAnSRPUpdate() throws {
        // First come, first served needs the names held: the registrar's check, not this one.
        let first = try Self.read(Self.signed).get()
        let second = try Self.read(Self.otherKey).get()
        #expect(first.host.name == second.host.name)
        #expect(first.host.key != second.host.key)
    }

    @Test func withoutTheLeaseOptionItIsRefused() throws {
        // §3.3.2: no Update Lease option, not an SRP update; we do no other updates.
        let rejection = try #require(try Self.read(Self.withoutLease).failure)
        #expect(rejection.rcode == .refused)
        #expect(rejection.reason.contains("Update Lease"))
    }

    @Test func aChangedOctetIsRefused() throws {
        // The ID, a TXT octet, the signature: the SIG(0) no longer verifies (§3.3.3).
        for offset in [1, Self.signed.count / 2, Self.signed.count - 3] {
            var changed = Self.signed
            changed[offset] ^= 0x20
            guard let message = try? Message(wire: changed) else { continue }
            let result = SRPUpdate.read(message, wire: changed, zones: [Self.zone])
            #expect(result.failure?.rcode == .refused || result.failure?.rcode == .formErr, "octet \(offset)")
        }
    }

    @Test func aZoneNotOursIsRefused() throws {
        let result = SRPUpdate.read(
            try Message(wire: Self.signed), wire: Self.signed, zones: [try DNSName("lab1.example.")])
        #expect(result.failure?.rcode == .refused)
    }

    // MARK: - Instruction sets (§3.3.1), unsigned

    static let host = try! DNSName("printer.default.service.arpa.")
    static let instance = try! DNSName("p1._ipp._tcp.default.service.arpa.")
    static let type = try! DNSName("_ipp._tcp.default.service.arpa.")
    static let key = ResourceRecord(
        name: host, type: .key, ttl: 120, rdata: .raw([0, 0, 3, 13] + Array(repeating: 7, count: 64)))

    static func deleteAll(_ name: DNSName) -> ResourceRecord {
        ResourceRecord(name: name, type: .any, rrClass: .any, ttl: 0, rdata: .raw([]))
    }

    static func update(_ records: [ResourceRecord], zone: DNSName = zone, prerequisites: [ResourceRecord] = [])
        -> Message
    {
        Message(
            id: 7, opcode: .update, questions: [Question(name: zone, type: .soa)], answers: prerequisites,
            authority: records,
            edns: EDNS(udpPayloadSize: 1232, options: [UpdateLease(lease: 7200, keyLease: 86400).option]))
    }

    static let valid: [ResourceRecord] = [
        ResourceRecord(name: type, type: .ptr, ttl: 120, rdata: .ptr(instance)),
        deleteAll(instance),
        ResourceRecord(
            name: instance, type: .srv, ttl: 120, rdata: .srv(priority: 0, weight: 0, port: 631, target: host)),
        ResourceRecord(name: instance, type: .txt, ttl: 120, rdata: .txt([0])),
        deleteAll(host),
        ResourceRecord(
            name: host, type: .aaaa, ttl: 120,
            rdata: .aaaa([0x20, 1, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [5])),
        key,
    ]

    static func reason(_ message: Message) throws -> SRPUpdate.Rejection {
        let wire = try message.encode()
        return try #require(SRPUpdate.read(try Message(wire: wire), wire: wire, zones: [zone]).failure)
    }

    @Test func aWellFormedSetGetsAsFarAsTheSignature() throws {
        let rejection = try Self.reason(Self.update(Self.valid))
        #expect(rejection.rcode == .refused)
        #expect(rejection.reason.contains("no SIG(0)"))
    }

    /// Each a well-formed set with one thing wrong.
    static let malformed: [(what: String, records: [ResourceRecord])] = {
        func replacing(_ index: Int, with record: ResourceRecord) -> [ResourceRecord] {
            var records = valid
            records[index] = record
            return records
        }
        let other = try! DNSName("other.default.service.arpa.")
        let address = { (last: UInt8) in RData.aaaa([0x20, 1, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [last]) }
        return [
            (
                "SRV target is not the host",
                replacing(
                    2,
                    with: ResourceRecord(
                        name: instance, type: .srv, ttl: 120,
                        rdata: .srv(priority: 0, weight: 0, port: 631, target: other)))
            ),
            ("TXT without SRV", valid.enumerated().filter { $0.offset != 2 }.map(\.element)),
            (
                "a PTR to an instance not described",
                replacing(
                    0,
                    with: ResourceRecord(
                        name: type, type: .ptr, ttl: 120,
                        rdata: .ptr(try! DNSName("p2._ipp._tcp.default.service.arpa."))))
            ),
            (
                "a PTR of another service type",
                replacing(
                    0,
                    with: ResourceRecord(
                        name: try! DNSName("_http._tcp.default.service.arpa."), type: .ptr, ttl: 120,
                        rdata: .ptr(instance)))
            ),
            (
                "a host with two KEYs",
                valid + [
                    ResourceRecord(
                        name: host, type: .key, ttl: 120, rdata: .raw([0, 0, 3, 13] + Array(repeating: 8, count: 64)))
                ]
            ),
            (
                "a host with an MX",
                valid + [ResourceRecord(name: host, type: .mx, ttl: 120, rdata: .mx(preference: 1, exchange: host))]
            ),
            ("an RRset with two TTLs", valid + [ResourceRecord(name: host, type: .aaaa, ttl: 60, rdata: address(6))]),
            (
                "a name outside the zone",
                valid + [
                    ResourceRecord(
                        name: try! DNSName("printer.lab1.example."), type: .aaaa, ttl: 120, rdata: address(7))
                ]
            ),
            (
                "a single-RRset delete",
                valid + [ResourceRecord(name: host, type: .a, rrClass: .any, ttl: 0, rdata: .raw([]))]
            ),
            (
                "records added to a name not deleted first",
                valid + [ResourceRecord(name: other, type: .aaaa, ttl: 120, rdata: address(8))]
            ),
        ]
    }()

    @Test(arguments: malformed.indices)
    func aMalformedSetIsRefused(case index: Int) throws {
        let (what, records) = Self.malformed[index]
        let rejection = try Self.reason(Self.update(records))
        #expect(rejection.rcode == .refused, "\(what): \(rejection)")
        #expect(!rejection.reason.contains("no SIG(0)"), "\(what) passed the structure checks")
    }

    @Test func noHostOrTwoHostsIsRefused() throws {
        let withoutHost = Self.valid.filter { $0.name != Self.host }
        #expect(try Self.reason(Self.update(withoutHost)).reason.contains("Host Description"))
        let second = try DNSName("second.default.service.arpa.")
        let twoHosts =
            Self.valid + [
                Self.deleteAll(second), ResourceRecord(name: second, type: .key, ttl: 120, rdata: Self.key.rdata),
            ]
        #expect(try Self.reason(Self.update(twoHosts)).reason.contains("2 Host Description"))
    }

    @Test func prerequisitesOrAWrongZoneSection() throws {
        let prerequisite = ResourceRecord(name: Self.host, type: .any, rrClass: .any, ttl: 0, rdata: .raw([]))
        #expect(try Self.reason(Self.update(Self.valid, prerequisites: [prerequisite])).rcode == .refused)
        var twoZones = Self.update(Self.valid)
        twoZones.questions.append(Question(name: Self.zone, type: .soa))
        #expect(try Self.reason(twoZones).rcode == .formErr)
        var notSOA = Self.update(Self.valid)
        notSOA.questions = [Question(name: Self.zone, type: .a)]
        #expect(try Self.reason(notSOA).rcode == .formErr)
    }

    @Test func leasesAreClampedToTheBounds() {
        let bounds = LeaseBounds.default
        #expect(
            bounds.grant(UpdateLease(lease: 7200, keyLease: 1_209_600)) == UpdateLease(lease: 7200, keyLease: 604_800))
        #expect(bounds.grant(UpdateLease(lease: 5, keyLease: 10)) == UpdateLease(lease: 30, keyLease: 30))
        #expect(
            bounds.grant(UpdateLease(lease: 1_000_000, keyLease: 1_000_000))
                == UpdateLease(lease: 97_200, keyLease: 604_800))
        #expect(bounds.grant(UpdateLease(lease: 600, keyLease: nil)) == UpdateLease(lease: 600, keyLease: 4200))
        #expect(bounds.grant(UpdateLease(lease: .max, keyLease: nil)) == UpdateLease(lease: 97_200, keyLease: 604_800))
        #expect(bounds.grant(UpdateLease(lease: 0, keyLease: 0)) == UpdateLease(lease: 0, keyLease: 0))
        #expect(bounds.grant(UpdateLease(lease: 0, keyLease: 86400)) == UpdateLease(lease: 0, keyLease: 86400))
        let narrow = LeaseBounds(lease: 30...100_000, keyLease: 30...60)
        #expect(narrow.grant(UpdateLease(lease: 600, keyLease: 3600)) == UpdateLease(lease: 600, keyLease: 600))
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

private func bytes(_ text: String) -> [UInt8] {
    let digits = Array(text)
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}
