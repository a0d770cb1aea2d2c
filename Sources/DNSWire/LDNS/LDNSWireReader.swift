internal import CLDNS

/// Walks the sections of a message with ldns's record decoder (`ldns_wire2rr` for owner, type
/// and class, `ldns_wire2rdf` for RDATA), keeping the position so that it can check what
/// `ldns_wire2pkt` does not: RDATA that does not fill RDLENGTH exactly, the OPT owner and
/// count, and trailing octets.
struct LDNSWireReader: ~Copyable {
    private let base: UnsafePointer<UInt8>
    private let count: Int
    private(set) var position: Int

    /// A record as read from the wire, before the OPT record is split off.
    struct WireRecord {
        var name: DNSName
        var type: RRType
        /// The class field as sent: for OPT the UDP payload size, elsewhere possibly with the
        /// mDNS cache-flush bit.
        var rawClass: UInt16
        var ttl: UInt32
        var rdata: RData
    }

    init(_ buffer: UnsafeBufferPointer<UInt8>) {
        // Callers checked for a 12-byte header, so baseAddress is not nil.
        self.base = buffer.baseAddress!
        self.count = buffer.count
        self.position = 12
    }

    var remaining: Int { self.count - self.position }

    mutating func question(_ index: Int) throws(DNSWireError) -> Question {
        let record = try self.ownerTypeClass("question \(index + 1)")
        let name = try DNSName(ldnsDname: ldns_rr_owner(record.pointer))
        let type = RRType(UInt16(truncatingIfNeeded: ldns_rr_get_type(record.pointer).rawValue))
        let rawClass = UInt16(truncatingIfNeeded: ldns_rr_get_class(record.pointer).rawValue)
        // The top bit is mDNS's unicast-response (QU) bit (RFC 6762 §5.4).
        return Question(name: name, type: type, qclass: RRClass(rawClass & 0x7FFF))
    }

    mutating func record(_ what: @autoclosure () -> String) throws(DNSWireError) -> WireRecord {
        let record = try self.ownerTypeClass(what())
        guard self.position + 6 <= self.count else { throw .malformed("\(what()): truncated before RDATA") }
        let ttl = self.uint32(at: self.position)
        let rdLength = Int(self.uint16(at: self.position + 4))
        let rdataEnd = self.position + 6 + rdLength
        ldns_rr_set_ttl(record.pointer, ttl)
        self.position += 4
        let type = RRType(UInt16(truncatingIfNeeded: ldns_rr_get_type(record.pointer).rawValue))
        let status = ldns_wire2rdf(record.pointer, self.base, self.count, &self.position)
        guard status.isOK else { throw .malformed("\(what()) (\(type)) RDATA: \(status.message)") }
        // ldns stops after the last field it knows and lets names run past RDLENGTH.
        guard self.position == rdataEnd else {
            throw .malformed("\(what()) (\(type)): RDLENGTH \(rdLength) does not match its fields")
        }
        let name = try DNSName(ldnsDname: ldns_rr_owner(record.pointer))
        let rawClass = UInt16(truncatingIfNeeded: ldns_rr_get_class(record.pointer).rawValue)
        let rdata: RData
        if let empty = RData.emptyRDATA(type: type, length: rdLength) {
            rdata = empty
        } else if type == .opt {
            rdata = .raw(record.rdataBytes)
        } else {
            rdata = try RData(ldnsRecord: record, type: type)
        }
        return WireRecord(name: name, type: type, rawClass: rawClass, ttl: ttl, rdata: rdata)
    }

    private mutating func ownerTypeClass(_ what: String) throws(DNSWireError) -> LDNSRecord {
        try self.checkCompressionPointers(from: self.position, what)
        var pointer: LDNSRRPointer?
        let status = ldns_wire2rr(&pointer, self.base, self.count, &self.position, LDNS_SECTION_QUESTION)
        guard status.isOK, let pointer else { throw .malformed("\(what): \(status.message)") }
        return LDNSRecord(adopting: pointer)
    }

    /// RFC 1035 §4.1.4: a compression pointer refers to a *prior* occurrence of a name. ldns
    /// follows pointers anywhere (forward, or into the header), so owner names are checked here
    /// first: every pointer must land after the header and before the start of the labels it
    /// continues (the owner name's start, then each jump target). Targets therefore strictly
    /// decrease, so the walk ends even on hostile input. Everything else is left to ldns.
    private func checkCompressionPointers(from start: Int, _ what: String) throws(DNSWireError) {
        var segmentStart = start
        var offset = start
        while offset < self.count {
            let length = self.base[offset]
            if length == 0 { return }
            if length & 0xC0 == 0xC0 {
                guard offset + 1 < self.count else { return }  // truncated: ldns reports it
                let target = Int(length & 0x3F) << 8 | Int(self.base[offset + 1])
                guard target >= 12, target < segmentStart else {
                    throw .malformed("\(what): compression pointer at \(offset) to \(target) is not to an earlier name")
                }
                segmentStart = target
                offset = target
            } else if length & 0xC0 != 0 {
                return  // reserved label types: ldns rejects them
            } else {
                offset += 1 + Int(length)
            }
        }
    }

    private func uint16(at offset: Int) -> UInt16 {
        UInt16(self.base[offset]) << 8 | UInt16(self.base[offset + 1])
    }

    private func uint32(at offset: Int) -> UInt32 {
        UInt32(self.uint16(at: offset)) << 16 | UInt32(self.uint16(at: offset + 2))
    }
}

enum LDNSEDNS {
    /// Splits OPT RDATA into options with ldns's EDNS option parser.
    static func options(_ rdata: [UInt8]) throws(DNSWireError) -> [EDNS.Option] {
        guard !rdata.isEmpty else { return [] }
        // ldns parses options only out of a packet's EDNS data.
        guard let packet = ldns_pkt_new() else { throw .malformed("ldns_pkt_new: out of memory") }
        defer { ldns_pkt_free(packet) }
        let data: LDNSRdfPointer
        do {
            data = try LDNSRdf.make(LDNS_RDF_TYPE_UNKNOWN, rdata)
        } catch {
            throw .malformed("OPT RDATA: \(error)")
        }
        ldns_pkt_set_edns_data(packet, data)
        guard let list = ldns_pkt_edns_get_option_list(packet) else {
            throw .malformed("OPT RDATA: option runs past the end")
        }
        var options: [EDNS.Option] = []
        for index in 0..<ldns_edns_option_list_get_count(list) {
            guard let option = ldns_edns_option_list_get_option(list, index) else { continue }
            let size = ldns_edns_get_size(option)
            var bytes: [UInt8] = []
            if size > 0, let start = ldns_edns_get_data(option) {
                bytes = Array(UnsafeBufferPointer(start: start, count: size))
            }
            let code = UInt16(truncatingIfNeeded: ldns_edns_get_code(option).rawValue)
            options.append(EDNS.Option(code: code, data: bytes))
        }
        return options
    }

    /// An option list for `ldns_pkt_set_edns_option_list`, or nil for no options.
    static func makeOptionList(
        _ options: [EDNS.Option]
    ) throws(DNSWireError) -> UnsafeMutablePointer<ldns_edns_option_list>? {
        guard !options.isEmpty else { return nil }
        var total = 0
        for option in options {
            guard option.data.count <= 65535 else { throw .encoding("EDNS option of \(option.data.count) octets") }
            total += 4 + option.data.count
        }
        guard total <= 65535 else { throw .encoding("EDNS options of \(total) octets") }
        guard let list = ldns_edns_option_list_new() else { throw .encoding("out of memory") }
        for option in options {
            // A one-octet placeholder keeps memcpy's source non-null for empty options.
            let data = option.data.isEmpty ? [0] : option.data
            let code = ldns_edns_option_code(rawValue: UInt32(option.code))
            let created = data.withUnsafeBytes { raw in
                ldns_edns_new_from_data(code, option.data.count, raw.baseAddress)
            }
            guard let created, ldns_edns_option_list_push(list, created) else {
                if let created { ldns_edns_deep_free(created) }
                ldns_edns_option_list_deep_free(list)
                throw .encoding("EDNS option list: out of memory")
            }
        }
        return list
    }
}
