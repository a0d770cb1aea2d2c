internal import CLDNS

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
