import DNSWire
import Testing

/// SIG(0) (RFC 2931) with ECDSA P-256 (RFC 6605), checked against a signer we did not write:
/// BIND 9.18's nsupdate, with a key from `dnssec-keygen -a ECDSAP256SHA256 -T KEY -n HOST
/// printer.default.service.arpa.` (Kprinter.default.service.arpa.+013+52450), sending
/// "update delete printer.default.service.arpa.", an AAAA and the KEY to a UDP listener.
@Suite struct SIG0Tests {
    static let nsupdate = hex(
        "dcec280000010000000300010764656661756c74077365727669636504617270610000060001077072696e746572c00c00ff00ff000000000000c026001c000100000078001020010db8000000000000000000000005c026001900010000007800440200030df043adcda00daaa6f956b8069d1f18455276975f9d428bd799b9b1d4e3ce48bc78e8db03727a7a1051c6b9fbc9229bd9b4fe25ed7dbd86f6c9d1b68bc41817f800001800ff00000000007000000d00000000006b0b02b76b0b005fcce2077072696e7465720764656661756c740773657276696365046172706100a498d4c59d8f7130cfc423aba05bc938e2e865ad9c0139c3f372d890482a4a3c631163e88e5e9d03f0c6df70ccc785a67ca50c97f26d8c97f90861f1faf221a4"
    )
    /// The key's file: "printer.default.service.arpa. IN KEY 512 3 13 8EOtza…BgX+A==".
    static let key = SIG0Key(
        flags: 512, protocol: 3, algorithm: 13,
        publicKey: hex(
            "f043adcda00daaa6f956b8069d1f18455276975f9d428bd799b9b1d4e3ce48bc"
                + "78e8db03727a7a1051c6b9fbc9229bd9b4fe25ed7dbd86f6c9d1b68bc41817f8"))

    @Test func keyTagIsBINDs() {
        // RFC 4034 Appendix B, as dnssec-keygen named the file.
        #expect(Self.key.tag == 52450)
        #expect(SIG0Key(rdata: Self.key.rdata) == Self.key)
    }

    @Test func nsupdateSignatureVerifies() throws {
        let message = try Message(wire: Self.nsupdate)
        #expect(message.opcode == .update)
        #expect(message.additional.last?.type == .sig)
        let signature = try #require(try SIG0.find(in: Self.nsupdate))
        #expect(signature.keyTag == 52450)
        #expect(signature.algorithm == SIG0Key.ecdsaP256SHA256)
        #expect(signature.signerName == name("printer.default.service.arpa."))
        #expect(signature.signature.count == 64)
        #expect(signature.isValid(for: Self.key))
    }

    @Test func anyChangedOctetFailsTheSignature() throws {
        // Every octet of the signed message (the header's ID, a record, the SIG RDATA before
        // the signature) and of the signature itself is covered.
        let sigStart = Self.nsupdate.count - 11 - 18 - 30 - 64
        for offset in [0, 2, 13, 40, 100, sigStart - 1, sigStart + 13, sigStart + 20, Self.nsupdate.count - 1] {
            var changed = Self.nsupdate
            changed[offset] ^= 0x01
            let signature = try? SIG0.find(in: changed)
            #expect(signature?.isValid(for: Self.key) != true, "octet \(offset) changed, still valid")
        }
    }

    @Test func anotherKeyFails() throws {
        var other = Self.key
        other.publicKey[5] ^= 0x01  // a point off the curve, or another key: either fails
        let signature = try #require(try SIG0.find(in: Self.nsupdate))
        #expect(!signature.isValid(for: other))
        var otherAlgorithm = Self.key
        otherAlgorithm.algorithm = 8
        #expect(!signature.isValid(for: otherAlgorithm))
    }

    @Test func aMessageWithoutSIGHasNone() throws {
        let query = Message(id: 1, questions: [Question(name: name("printer.default.service.arpa."), type: .aaaa)])
        #expect(try SIG0.find(in: try query.encode()) == nil)
    }

    @Test func updateLeaseOption() {
        // RFC 9664 §4: 4 octets (LEASE) or 8 (LEASE, KEY-LEASE); anything else is not one.
        let long = UpdateLease(EDNS.Option(code: 2, data: [0, 0, 0x1C, 0x20, 0, 0x12, 0x75, 0]))
        #expect(long == UpdateLease(lease: 7200, keyLease: 1_209_600))
        #expect(UpdateLease(EDNS.Option(code: 2, data: [0, 0, 0x1C, 0x20])) == UpdateLease(lease: 7200, keyLease: nil))
        #expect(UpdateLease(EDNS.Option(code: 2, data: [0, 0, 0x1C])) == nil)
        #expect(UpdateLease(EDNS.Option(code: 11, data: [0, 0, 0, 0])) == nil)
        #expect(UpdateLease(long!.option) == long)
    }
}
