internal import CLDNS

extension DNSName {
    /// The uncompressed wire form: each label as a length octet plus its bytes, then the root octet.
    public var wireBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(self.wireLength)
        for label in self.labels {
            out.append(UInt8(truncatingIfNeeded: label.count))
            out.append(contentsOf: label)
        }
        out.append(0)
        return out
    }

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
        var labels: [[UInt8]] = []
        var index = 0
        while index < bytes.count, bytes[index] != 0 {
            let length = Int(bytes[index])
            guard length <= 63, index + 1 + length < bytes.count else { throw .malformed("bad domain name") }
            labels.append(Array(bytes[(index + 1)...(index + length)]))
            index += 1 + length
        }
        guard index == bytes.count - 1 else { throw .malformed("bad domain name") }
        do {
            try self.init(labels: labels)
        } catch {
            throw .malformed("domain name: \(error)")
        }
    }

    /// A new ldns DNAME rdf built from the labels (never from presentation text).
    func makeLDNSDname() throws(DNSWireError) -> LDNSRdfPointer {
        var length = 1
        for label in self.labels {
            guard (1...63).contains(label.count) else {
                throw .encoding("label of \(label.count) octets in \(self)")
            }
            length += label.count + 1
        }
        guard length <= 255 else { throw .encoding("name of \(length) octets: \(self)") }
        return try LDNSRdf.make(LDNS_RDF_TYPE_DNAME, self.wireBytes)
    }
}
