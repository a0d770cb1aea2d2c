// ldns records owned by Swift, and RDATA and names to and from ldns.

// MARK: - RDATA and names through ldns

internal import CLDNS

// Thin ownership helpers around libldns objects. Nothing here is public: no ldns pointer
// leaves DNSWire.

typealias LDNSRRPointer = UnsafeMutablePointer<ldns_rr>
typealias LDNSRdfPointer = UnsafeMutablePointer<ldns_rdf>

extension ldns_status {
    var isOK: Bool { self == LDNS_STATUS_OK }

    var message: String {
        guard let text = ldns_get_errorstr_by_id(self) else { return "ldns status \(self.rawValue)" }
        return String(cString: text)
    }
}

/// One `ldns_rr` owned by Swift; `ldns_rr_free` (which also frees the owner and rdfs) runs on deinit.
struct LDNSRecord: ~Copyable {
    let pointer: LDNSRRPointer

    init(adopting pointer: LDNSRRPointer) {
        self.pointer = pointer
    }

    init(type: RRType) throws(DNSWireError) {
        guard let pointer = ldns_rr_new() else { throw .encoding("ldns_rr_new: out of memory") }
        // ldns_rr_new leaves the type uninitialised.
        ldns_rr_set_type(pointer, ldns_rr_type(rawValue: UInt32(type.rawValue)))
        self.pointer = pointer
    }

    /// Hands the pointer to a new owner without freeing it.
    consuming func release() -> LDNSRRPointer {
        let pointer = self.pointer
        discard self
        return pointer
    }

    deinit {
        ldns_rr_free(self.pointer)
    }

    var rdfCount: Int { ldns_rr_rd_count(self.pointer) }

    func rdf(_ index: Int) -> LDNSRdfPointer? { ldns_rr_rdf(self.pointer, index) }

    /// Adds an rdf; the record owns it afterwards (it is freed here when the push fails).
    func push(_ rdf: LDNSRdfPointer) throws(DNSWireError) {
        guard ldns_rr_push_rdf(self.pointer, rdf) else {
            ldns_rdf_deep_free(rdf)
            throw .encoding("ldns_rr_push_rdf: out of memory")
        }
    }

    func push(_ type: ldns_rdf_type, _ bytes: [UInt8]) throws(DNSWireError) {
        try self.push(LDNSRdf.make(type, bytes))
    }

    /// The RDATA as ldns holds it: every rdf's bytes in order, names uncompressed.
    var rdataBytes: [UInt8] {
        var out: [UInt8] = []
        for index in 0..<self.rdfCount {
            if let rdf = self.rdf(index) { out.append(contentsOf: LDNSRdf.bytes(rdf)) }
        }
        return out
    }
}

enum LDNSRdf {
    /// A new rdf holding a copy of `bytes` (1...65535 octets).
    static func make(_ type: ldns_rdf_type, _ bytes: [UInt8]) throws(DNSWireError) -> LDNSRdfPointer {
        guard !bytes.isEmpty, bytes.count <= Int(LDNS_MAX_RDFLEN) else {
            throw .encoding("RDATA field of \(bytes.count) octets (1...65535 allowed)")
        }
        let rdf = bytes.withUnsafeBytes { raw in
            ldns_rdf_new_frm_data(type, raw.count, raw.baseAddress)
        }
        guard let rdf else { throw .encoding("ldns_rdf_new_frm_data failed") }
        return rdf
    }

    static func bytes(_ rdf: LDNSRdfPointer) -> [UInt8] {
        let size = ldns_rdf_size(rdf)
        guard size > 0, let data = ldns_rdf_data(rdf) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    static func uint16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    static func uint32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    /// Big-endian integer of an rdf that must be exactly `width` octets long.
    static func integer(_ rdf: LDNSRdfPointer?, width: Int) -> UInt32? {
        guard let rdf else { return nil }
        let bytes = Self.bytes(rdf)
        guard bytes.count == width else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }
}

/// A growable `ldns_buffer`, reused across encodings of the same message.
final class LDNSBuffer {
    let pointer: UnsafeMutablePointer<ldns_buffer>

    init(capacity: Int) throws(DNSWireError) {
        guard let pointer = ldns_buffer_new(capacity) else { throw .encoding("ldns_buffer_new: out of memory") }
        self.pointer = pointer
    }

    deinit {
        ldns_buffer_free(self.pointer)
    }

    /// The bytes written since the last `clear()`.
    var writtenBytes: [UInt8] {
        let count = ldns_buffer_position(self.pointer)
        guard count > 0, let begin = ldns_buffer_begin(self.pointer) else { return [] }
        return Array(UnsafeBufferPointer(start: begin, count: count))
    }
}

@available(*, unavailable)
extension LDNSBuffer: Sendable {}

extension RData {
    /// Decodes one record's RDATA from raw, uncompressed bytes, as mDNS delivers them
    /// (the avahi record browser hands over RDATA without the rest of the record).
    ///
    /// TXT stays byte for byte (RDLENGTH 0 stays `[]`); unknown types become `.raw`.
    public init(type: RRType, wire: [UInt8]) throws(DNSWireError) {
        guard wire.count <= 65535 else { throw .malformed("\(type) RDATA of \(wire.count) octets") }
        if let empty = RData.emptyRDATA(type: type, length: wire.count) {
            self = empty
            return
        }
        // ldns_wire2rdf reads RDLENGTH itself, so frame the bytes with it.
        var framed: [UInt8] = LDNSRdf.uint16(UInt16(wire.count))
        framed.append(contentsOf: wire)
        let record = try LDNSRecord(type: type)
        var position = 0
        let status = framed.withUnsafeBufferPointer { buffer in
            ldns_wire2rdf(record.pointer, buffer.baseAddress, buffer.count, &position)
        }
        guard status.isOK else { throw .malformed("\(type) RDATA: \(status.message)") }
        guard position == framed.count else {
            throw .malformed("\(type) RDATA: fields end at octet \(position - 2) of \(wire.count)")
        }
        self = try RData(ldnsRecord: record, type: type)
    }

    /// The uncompressed RDATA, for comparing and caching records.
    public func wireBytes() throws(DNSWireError) -> [UInt8] {
        let record = try LDNSRecord(type: .any)
        try self.pushLDNSRdfs(into: record)
        let bytes = record.rdataBytes
        guard bytes.count <= 65535 else { throw .encoding("RDATA of \(bytes.count) octets") }
        return bytes
    }

    /// RDLENGTH 0: TXT keeps its (empty) bytes, anything else becomes `.raw([])`, since an
    /// empty RDATA only makes sense there (RFC 2136 deletions) and must not fail a message.
    static func emptyRDATA(type: RRType, length: Int) -> RData? {
        guard length == 0 else { return nil }
        return type == .txt ? .txt([]) : .raw([])
    }

    /// Maps the rdfs of a record that ldns parsed from the wire. The caller has already checked
    /// that the rdfs cover exactly RDLENGTH octets.
    init(ldnsRecord record: borrowing LDNSRecord, type: RRType) throws(DNSWireError) {
        let count = record.rdfCount
        func bad() -> DNSWireError { .malformed("bad \(type) RDATA") }
        func fixed(_ width: Int) throws(DNSWireError) -> [UInt8] {
            guard count == 1, let rdf = record.rdf(0), ldns_rdf_size(rdf) == width else { throw bad() }
            return LDNSRdf.bytes(rdf)
        }
        func int(_ index: Int, _ width: Int) throws(DNSWireError) -> UInt32 {
            guard let value = LDNSRdf.integer(record.rdf(index), width: width) else { throw bad() }
            return value
        }
        func name(_ index: Int) throws(DNSWireError) -> DNSName {
            try DNSName(ldnsDname: record.rdf(index))
        }

        switch type {
        case .a:
            self = .a(try fixed(4))
        case .aaaa:
            self = .aaaa(try fixed(16))
        case .ptr, .cname, .ns, .dname:
            guard count == 1 else { throw bad() }
            let target = try name(0)
            switch type {
            case .ptr: self = .ptr(target)
            case .cname: self = .cname(target)
            case .ns: self = .ns(target)
            default: self = .dname(target)
            }
        case .mx:
            guard count == 2 else { throw bad() }
            self = .mx(preference: UInt16(try int(0, 2)), exchange: try name(1))
        case .srv:
            guard count == 4 else { throw bad() }
            self = .srv(
                priority: UInt16(try int(0, 2)), weight: UInt16(try int(1, 2)), port: UInt16(try int(2, 2)),
                target: try name(3)
            )
        case .txt:
            // One STR rdf per character-string, each with its length octet: the concatenation is
            // the RDATA exactly as received.
            self = .txt(record.rdataBytes)
        case .soa:
            guard count == 7 else { throw bad() }
            self = .soa(
                SOA(
                    mname: try name(0), rname: try name(1), serial: try int(2, 4), refresh: try int(3, 4),
                    retry: try int(4, 4), expire: try int(5, 4), minimum: try int(6, 4)
                )
            )
        case .nsec:
            guard count == 1 || count == 2 else { throw bad() }
            let bitmap = count == 2 ? record.rdf(1).map(LDNSRdf.bytes) ?? [] : []
            self = .nsec(next: try name(0), types: try RData.nsecTypes(bitmap: bitmap))
        default:
            self = .raw(record.rdataBytes)
        }
    }

    /// Reads an RFC 4034 §4.1.2 type bitmap: windows in increasing order, each 1...32 octets.
    static func nsecTypes(bitmap: [UInt8]) throws(DNSWireError) -> [RRType] {
        var types: [RRType] = []
        var index = 0
        var previousWindow = -1
        while index < bitmap.count {
            guard index + 2 <= bitmap.count else { throw .malformed("NSEC bitmap: truncated window") }
            let window = Int(bitmap[index])
            let length = Int(bitmap[index + 1])
            guard window > previousWindow, (1...32).contains(length), index + 2 + length <= bitmap.count else {
                throw .malformed("NSEC bitmap: bad window \(window)")
            }
            for offset in 0..<length {
                let byte = bitmap[index + 2 + offset]
                for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                    types.append(RRType(UInt16(window << 8 | offset << 3 | bit)))
                }
            }
            previousWindow = window
            index += 2 + length
        }
        return types
    }

    /// Appends this RDATA as rdfs to `record`: names as DNAME rdfs built from their labels
    /// (so ldns can compress them where the type allows), TXT and raw RDATA as one opaque rdf
    /// that ldns copies to the wire byte for byte.
    func pushLDNSRdfs(into record: borrowing LDNSRecord) throws(DNSWireError) {
        switch self {
        case .a(let bytes):
            guard bytes.count == 4 else { throw .encoding("A RDATA of \(bytes.count) octets") }
            try record.push(LDNS_RDF_TYPE_A, bytes)
        case .aaaa(let bytes):
            guard bytes.count == 16 else { throw .encoding("AAAA RDATA of \(bytes.count) octets") }
            try record.push(LDNS_RDF_TYPE_AAAA, bytes)
        case .ptr(let name), .cname(let name), .ns(let name), .dname(let name):
            try record.push(name.makeLDNSDname())
        case .mx(let preference, let exchange):
            try record.push(LDNS_RDF_TYPE_INT16, LDNSRdf.uint16(preference))
            try record.push(exchange.makeLDNSDname())
        case .srv(let priority, let weight, let port, let target):
            try record.push(LDNS_RDF_TYPE_INT16, LDNSRdf.uint16(priority))
            try record.push(LDNS_RDF_TYPE_INT16, LDNSRdf.uint16(weight))
            try record.push(LDNS_RDF_TYPE_INT16, LDNSRdf.uint16(port))
            try record.push(target.makeLDNSDname())
        case .txt(let bytes), .raw(let bytes):
            if !bytes.isEmpty { try record.push(LDNS_RDF_TYPE_UNKNOWN, bytes) }
        case .soa(let soa):
            try record.push(soa.mname.makeLDNSDname())
            try record.push(soa.rname.makeLDNSDname())
            for value in [soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum] {
                try record.push(LDNS_RDF_TYPE_INT32, LDNSRdf.uint32(value))
            }
        case .nsec(let next, let types):
            try record.push(next.makeLDNSDname())
            if !types.isEmpty {
                var ldnsTypes = types.map { ldns_rr_type(rawValue: UInt32($0.rawValue)) }
                let bitmap = ldnsTypes.withUnsafeMutableBufferPointer { buffer in
                    ldns_dnssec_create_nsec_bitmap(buffer.baseAddress, buffer.count, LDNS_RR_TYPE_NSEC)
                }
                guard let bitmap else { throw .encoding("ldns_dnssec_create_nsec_bitmap failed") }
                try record.push(bitmap)
            }
        }
    }
}

extension DNSName {
    /// Decodes one uncompressed wire-format name that spans all of `wire`.
    public init(wire: [UInt8]) throws(DNSWireError) {
        var position = 0
        var rdf: LDNSRdfPointer?
        let status = wire.withUnsafeBufferPointer { buffer in
            ldns_wire2dname(&rdf, buffer.baseAddress, buffer.count, &position)
        }
        guard status.isOK, let rdf else { throw .malformed("name: \(status.message)") }
        defer { ldns_rdf_deep_free(rdf) }
        guard position == wire.count else {
            throw .malformed("name ends at octet \(position) of \(wire.count)")
        }
        try self.init(ldnsDname: rdf)
    }

    /// From an ldns DNAME rdf, which always holds uncompressed labels ending in the root label.
    /// Labels are taken byte for byte: dots, spaces and UTF-8 inside a label stay inside it.
    init(ldnsDname rdf: LDNSRdfPointer?) throws(DNSWireError) {
        guard let rdf, ldns_rdf_get_type(rdf) == LDNS_RDF_TYPE_DNAME else {
            throw .malformed("expected a domain name")
        }
        let bytes = LDNSRdf.bytes(rdf)
        var index = 0
        while index < bytes.count, bytes[index] != 0 {
            let length = Int(bytes[index])
            guard length <= 63, index + 1 + length < bytes.count else { throw .malformed("bad domain name") }
            index += 1 + length
        }
        guard index == bytes.count - 1 else { throw .malformed("bad domain name") }
        guard bytes.count <= 255 else { throw .malformed("domain name: \(DNSNameError.nameTooLong(bytes.count))") }
        self.init(uncheckedWire: bytes)
    }

    /// A new ldns DNAME rdf built from the wire form (never from presentation text).
    func makeLDNSDname() throws(DNSWireError) -> LDNSRdfPointer {
        // Every DNSName is well formed (labels 1...63 octets, at most 255 in all) by construction.
        try LDNSRdf.make(LDNS_RDF_TYPE_DNAME, self.wireBytes)
    }
}
