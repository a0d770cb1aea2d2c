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
