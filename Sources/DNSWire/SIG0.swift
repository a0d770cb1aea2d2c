import CSignature

// SIG(0) transaction signatures (RFC 2931) with ECDSA P-256 (algorithm 13, RFC 6605), the
// public keys they are checked against (KEY, RFC 2535 §3.1, the DNSKEY layout of RFC 4034
// §2.1), and the Update Lease option (RFC 9664): what an SRP update (RFC 9665) carries besides
// its records.

// MARK: - Keys

/// A KEY record's RDATA: flags, protocol, algorithm and public key (RFC 2535 §3.1).
public struct SIG0Key: Hashable, Sendable {
    public var flags: UInt16
    public var `protocol`: UInt8
    public var algorithm: UInt8
    public var publicKey: [UInt8]

    /// ECDSA P-256 with SHA-256 (RFC 6605), the one algorithm SRP requesters use.
    public static let ecdsaP256SHA256: UInt8 = 13

    public init(flags: UInt16 = 0, protocol: UInt8 = 3, algorithm: UInt8, publicKey: [UInt8]) {
        self.flags = flags
        self.protocol = `protocol`
        self.algorithm = algorithm
        self.publicKey = publicKey
    }

    /// Reads KEY RDATA; nil when it is shorter than its fixed fields or holds no key.
    public init?(rdata: [UInt8]) {
        guard rdata.count > 4 else { return nil }
        self.flags = rdata.u16(at: 0)
        self.protocol = rdata[2]
        self.algorithm = rdata[3]
        self.publicKey = Array(rdata[4...])
    }

    public var rdata: [UInt8] {
        var rdata: [UInt8] = []
        rdata.appendU16(flags)
        return rdata + [`protocol`, algorithm] + publicKey
    }

    /// The key tag (RFC 4034 Appendix B), which a SIG names its key by.
    public var tag: UInt16 {
        var sum: UInt32 = 0
        for (index, byte) in rdata.enumerated() {
            sum += index & 1 == 0 ? UInt32(byte) << 8 : UInt32(byte)
        }
        sum += (sum >> 16) & 0xFFFF
        return UInt16(sum & 0xFFFF)
    }
}

// MARK: - Signatures

/// The SIG(0) record that ends a message's additional section, and the octets it signs.
public struct SIG0: Sendable {
    public var algorithm: UInt8
    public var keyTag: UInt16
    public var signerName: DNSName
    /// Seconds since the epoch, modulo 2^32 (RFC 2931 §3.1); not checked: the devices that
    /// send SRP updates often have no clock.
    public var inception: UInt32
    public var expiration: UInt32
    public var signature: [UInt8]
    /// What the signature covers (RFC 2931 §3.1): the SIG RDATA without its signature, then
    /// the message as it was before the SIG was added (ARCOUNT one less).
    public var signedData: [UInt8]

    /// The SIG(0) of a message that `Message(wire:)` decoded, if its last record is one: owned
    /// by the root, class ANY, TTL 0, type covered 0 (RFC 2931 §3.1). Nil when the message has
    /// no such record; throws when it has one that cannot be read.
    public static func find(in wire: [UInt8]) throws(DNSWireError) -> SIG0? {
        guard let header = MessageHeader(wire), header.arCount > 0 else { return nil }
        var walker = WireWalker(wire: wire)
        for _ in 0..<header.qdCount {
            try walker.skipName()
            try walker.skip(4)
        }
        let records = Int(header.anCount) + Int(header.nsCount) + Int(header.arCount)
        var lastStart = walker.offset
        for _ in 0..<records {
            lastStart = walker.offset
            try walker.skipName()
            try walker.skip(8)
            let length = Int(try walker.uint16())
            try walker.skip(length)
        }
        guard walker.offset == wire.count else { throw .malformed("octets after the last record") }
        // The last record: the root (one zero octet), then its fixed fields.
        guard wire[lastStart] == 0, lastStart + 11 <= wire.count else { return nil }
        guard RRType(wire.u16(at: lastStart + 1)) == .sig else { return nil }
        guard RRClass(wire.u16(at: lastStart + 3)) == .any, wire.u32(at: lastStart + 5) == 0 else {
            throw .malformed("SIG(0) must be class ANY with TTL 0 (RFC 2931 §3.1)")
        }
        let rdata = Array(wire[(lastStart + 11)...])
        guard rdata.count >= 18, rdata[0] == 0, rdata[1] == 0 else {
            throw .malformed("SIG(0) RDATA: too short, or covers a type (RFC 2931 §3.1)")
        }
        var nameWalker = WireWalker(wire: rdata, offset: 18)
        let signer: DNSName
        do {
            signer = try DNSName(labels: try nameWalker.uncompressedName())
        } catch let error as DNSWireError {
            throw error
        } catch {
            throw .malformed("SIG signer's name: \(error)")
        }
        var prefix = Array(wire[..<lastStart])
        let arCount = header.arCount - 1
        prefix[10] = UInt8(arCount >> 8)
        prefix[11] = UInt8(arCount & 0xFF)
        return SIG0(
            algorithm: rdata[2], keyTag: rdata.u16(at: 16), signerName: signer,
            inception: rdata.u32(at: 12), expiration: rdata.u32(at: 8), signature: Array(rdata[nameWalker.offset...]),
            signedData: Array(rdata[..<nameWalker.offset]) + prefix)
    }

    /// Whether `key` made this signature: ECDSA P-256 only, the key's algorithm and tag the
    /// signature's, 64 octets of r and s (RFC 6605 §4).
    public func isValid(for key: SIG0Key) -> Bool {
        guard algorithm == SIG0Key.ecdsaP256SHA256, key.algorithm == algorithm, key.tag == keyTag,
            key.publicKey.count == 64, signature.count == 64
        else { return false }
        return key.publicKey.withUnsafeBufferPointer { publicKey in
            signature.withUnsafeBufferPointer { signature in
                signedData.withUnsafeBufferPointer { data in
                    dp_p256_verify(publicKey.baseAddress, data.baseAddress, data.count, signature.baseAddress) == 1
                }
            }
        }
    }
}

/// Skips over the parts of a message that `Message(wire:)` has already checked, bounds-checked
/// all the same.
private struct WireWalker {
    let wire: [UInt8]
    var offset: Int

    init(wire: [UInt8], offset: Int = 12) {
        self.wire = wire
        self.offset = offset
    }

    mutating func skip(_ count: Int) throws(DNSWireError) {
        guard offset + count <= wire.count else { throw .malformed("record runs past the message") }
        offset += count
    }

    mutating func uint16() throws(DNSWireError) -> UInt16 {
        try skip(2)
        return wire.u16(at: offset - 2)
    }

    /// A name: labels up to the root or a compression pointer.
    mutating func skipName() throws(DNSWireError) {
        while true {
            try skip(1)
            let length = wire[offset - 1]
            if length == 0 { return }
            if length & 0xC0 == 0xC0 { return try skip(1) }
            guard length & 0xC0 == 0 else { throw .malformed("reserved label type") }
            try skip(Int(length))
        }
    }

    /// The labels of a name inside SIG RDATA, which may not be compressed (RFC 3597 §4).
    mutating func uncompressedName() throws(DNSWireError) -> [[UInt8]] {
        var labels: [[UInt8]] = []
        while true {
            try skip(1)
            let length = Int(wire[offset - 1])
            if length == 0 { return labels }
            guard length & 0xC0 == 0 else { throw .malformed("SIG signer's name is compressed") }
            try skip(length)
            labels.append(Array(wire[(offset - length)..<offset]))
        }
    }
}

// MARK: - Leases

/// The Update Lease option (RFC 9664 §4, EDNS option 2): how long the records of an update
/// (LEASE) and its KEY (KEY-LEASE) are to stay, in seconds. A 4-octet option has no KEY-LEASE.
public struct UpdateLease: Hashable, Sendable {
    public var lease: UInt32
    public var keyLease: UInt32?

    public static let code: UInt16 = 2

    public init(lease: UInt32, keyLease: UInt32?) {
        self.lease = lease
        self.keyLease = keyLease
    }

    /// Reads the option; nil when it is another option or not 4 or 8 octets long.
    public init?(_ option: EDNS.Option) {
        guard option.code == Self.code, option.data.count == 4 || option.data.count == 8 else { return nil }
        self.lease = option.data.u32(at: 0)
        self.keyLease = option.data.count == 8 ? option.data.u32(at: 4) : nil
    }

    /// The option with both values, as a registrar answers (RFC 9665 §5.1).
    public var option: EDNS.Option {
        var data: [UInt8] = []
        data.appendU32(lease)
        data.appendU32(keyLease ?? lease)
        return EDNS.Option(code: Self.code, data: data)
    }
}
