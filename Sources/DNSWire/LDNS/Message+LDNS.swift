// A message to and from the wire through ldns: decoding (the checked reader) and encoding within a
// size limit.

// MARK: - Reading the wire

// MARK: - Encoding

internal import CLDNS

extension Message {
    /// Decodes a whole message with libldns.
    ///
    /// Throws `.noHeader` for fewer than 12 octets and `.malformed` for anything else that is
    /// wrong: names ldns rejects (pointer loops, pointers out of range, labels over 63 octets,
    /// names over 255), counts that promise more than is there, RDATA that does not fill its
    /// RDLENGTH, trailing octets, OPT outside the additional section, an OPT not owned by the
    /// root, or two OPTs (RFC 6891 §6.1.1). The OPT goes to `edns`, never to `additional`.
    /// Class top bits (mDNS QU and cache-flush) are masked.
    public init(wire: [UInt8]) throws(DNSWireError) {
        guard let header = MessageHeader(wire) else { throw .noHeader }
        self = try wire.withUnsafeBufferPointer { (buffer) throws(DNSWireError) -> Message in
            var reader = LDNSWireReader(buffer)
            return try Message(header: header, reader: &reader)
        }
    }

    private init(header: MessageHeader, reader: inout LDNSWireReader) throws(DNSWireError) {
        let flags = header.flags
        self.init(
            id: header.id, isResponse: header.isResponse, opcode: header.opcode,
            authoritative: flags & 0x0400 != 0, truncated: flags & 0x0200 != 0,
            recursionDesired: header.recursionDesired, recursionAvailable: flags & 0x0080 != 0,
            authenticData: flags & 0x0020 != 0, checkingDisabled: flags & 0x0010 != 0,
            rcode: RCode(flags & 0x000F)
        )
        self.questions.reserveCapacity(Int(header.qdCount))
        for index in 0..<Int(header.qdCount) {
            self.questions.append(try reader.question(index))
        }
        for index in 0..<Int(header.anCount) {
            self.answers.append(try Message.plainRecord(reader.record("answer \(index + 1)")))
        }
        for index in 0..<Int(header.nsCount) {
            self.authority.append(try Message.plainRecord(reader.record("authority \(index + 1)")))
        }
        for index in 0..<Int(header.arCount) {
            let record = try reader.record("additional \(index + 1)")
            guard record.type == .opt else {
                self.additional.append(try Message.plainRecord(record))
                continue
            }
            guard self.edns == nil else { throw .malformed("two OPT records (RFC 6891 §6.1.1)") }
            guard record.name.isRoot else { throw .malformed("OPT record owned by \(record.name), not the root") }
            guard case .raw(let rdata) = record.rdata else { throw .malformed("bad OPT RDATA") }
            let extendedRCode = UInt8(record.ttl >> 24)
            self.edns = EDNS(
                udpPayloadSize: record.rawClass, extendedRCodeHigh: extendedRCode,
                version: UInt8((record.ttl >> 16) & 0xFF), dnssecOK: record.ttl & 0x8000 != 0,
                options: try LDNSEDNS.options(rdata)
            )
            self.rcode = RCode(UInt16(extendedRCode) << 4 | self.rcode.rawValue)
        }
        guard reader.remaining == 0 else {
            throw .malformed("\(reader.remaining) octets after the last record")
        }
    }

    private static func plainRecord(_ record: LDNSWireReader.WireRecord) throws(DNSWireError) -> ResourceRecord {
        guard record.type != .opt else { throw .malformed("OPT record outside the additional section") }
        // The top bit is mDNS's cache-flush bit (RFC 6762 §10.2).
        return ResourceRecord(
            name: record.name, type: record.type, rrClass: RRClass(record.rawClass & 0x7FFF), ttl: record.ttl,
            rdata: record.rdata
        )
    }

    /// Encodes the message with libldns, compressing names, in at most `limit` octets.
    ///
    /// `rcode` is split between the header (low 4 bits) and the OPT (high 8 bits); an OPT is
    /// written only when `edns` is set, and its extended RCODE comes from `rcode`, not from
    /// `edns.extendedRCodeHigh`. When the message is too long (RFC 1035 §4.2.1, RFC 2181 §9,
    /// RFC 6891 §7), whole additional RRsets are dropped, last first, without TC; when the
    /// answer and authority sections still do not fit, the result is the header, the questions
    /// and the OPT with TC set. Callers pass max(512, EDNS payload) for UDP and 65535 for TCP.
    public func encode(limit: Int = 65535) throws(DNSWireError) -> [UInt8] {
        let limit = Swift.min(limit, 65535)
        guard limit >= 12 else { throw .encoding("limit \(limit) is smaller than a header") }
        let encoder = try LDNSMessageEncoder(self)

        guard self.questions.count <= 65535 else { throw .encoding("\(self.questions.count) questions") }
        // Lower bounds on the size skip encodings that cannot fit: a browse of 1000 instances
        // over UDP goes straight to TC instead of encoding 1000 PTRs plus their additionals.
        let fixed = 12 + self.questions.reduce(0) { $0 + $1.name.wireLength + 4 } + (self.edns == nil ? 0 : 11)
        let answerBound = (self.answers + self.authority).reduce(fixed) { $0 + $1.minimumWireLength }
        if answerBound > limit {
            return try Self.minimal(encoder, limit: limit)
        }
        if self.answers.count <= 65535, self.authority.count <= 65535, self.additional.count <= 65535 {
            let full = try encoder.encode(
                answers: encoder.answers, authority: encoder.authority, additional: encoder.additional,
                truncated: self.truncated
            )
            if full.count <= limit { return full }
        }

        if let trimmed = try self.dropAdditionalRRsets(encoder, limit: limit, answerBound: answerBound) {
            return trimmed
        }
        return try Self.minimal(encoder, limit: limit)
    }

    /// TC with only the header, question and OPT (RFC 2181 §9, RFC 6891 §7).
    private static func minimal(_ encoder: LDNSMessageEncoder, limit: Int) throws(DNSWireError) -> [UInt8] {
        let minimal = try encoder.encode(answers: [], authority: [], additional: [], truncated: true)
        guard minimal.count <= limit else {
            throw .encoding("header, question and OPT need \(minimal.count) octets, limit is \(limit)")
        }
        return minimal
    }

    /// Keeps the longest prefix of additional RRsets (in order of first appearance) that fits,
    /// found by binary search; nil when answer and authority alone do not fit.
    private func dropAdditionalRRsets(
        _ encoder: LDNSMessageEncoder, limit: Int, answerBound: Int
    ) throws(DNSWireError) -> [UInt8]? {
        struct RRSetKey: Hashable {
            var name: DNSName
            var type: RRType
            var rrClass: RRClass
        }
        var setIndexByKey: [RRSetKey: Int] = [:]
        var setOfRecord: [Int] = []
        /// Lower bound of the message size when keeping the first n sets, at [n].
        var boundKeeping: [Int] = [answerBound]
        setOfRecord.reserveCapacity(self.additional.count)
        for record in self.additional {
            let key = RRSetKey(name: record.name, type: record.type, rrClass: record.rrClass)
            let index = setIndexByKey[key] ?? setIndexByKey.count
            if index == setIndexByKey.count { boundKeeping.append(boundKeeping[index]) }
            setIndexByKey[key] = index
            setOfRecord.append(index)
            boundKeeping[index + 1] += record.minimumWireLength
        }
        // Bounds are cumulative (records of a set may come later), so fix them up in order.
        for n in boundKeeping.indices.dropFirst() { boundKeeping[n] = max(boundKeeping[n], boundKeeping[n - 1]) }

        func attempt(keepingSets count: Int) throws(DNSWireError) -> [UInt8]? {
            var kept: [LDNSRRPointer] = []
            for (index, record) in encoder.additional.enumerated() where setOfRecord[index] < count {
                kept.append(record)
            }
            guard kept.count <= 65535 else { return nil }
            let bytes = try encoder.encode(
                answers: encoder.answers, authority: encoder.authority, additional: kept,
                truncated: self.truncated
            )
            return bytes.count <= limit ? bytes : nil
        }

        guard self.answers.count <= 65535, self.authority.count <= 65535,
            var best = try attempt(keepingSets: 0)
        else { return nil }
        // Invariant: keeping `fits` sets fits, keeping `tooMany` does not.
        var fits = 0
        // Keeping every set does not fit (the caller tried); nor does keeping any number of
        // sets whose size bound is already over the limit.
        var tooMany = boundKeeping.firstIndex { $0 > limit }.map { max(1, $0) } ?? setIndexByKey.count
        tooMany = min(tooMany, setIndexByKey.count)
        while tooMany - fits > 1 {
            let middle = (fits + tooMany) / 2
            if let bytes = try attempt(keepingSets: middle) {
                best = bytes
                fits = middle
            } else {
                tooMany = middle
            }
        }
        return best
    }
}

extension ResourceRecord {
    /// The fewest octets this record can take in a message: a compressed owner (2), type,
    /// class, TTL and RDLENGTH (10), and RDATA with every name compressed to a pointer (2).
    var minimumWireLength: Int {
        let rdata: Int
        switch self.rdata {
        case .a: rdata = 4
        case .aaaa: rdata = 16
        case .ptr, .cname, .ns, .dname, .nsec: rdata = 2
        case .mx: rdata = 4
        case .srv: rdata = 8
        case .soa: rdata = 24
        case .txt(let bytes), .raw(let bytes): rdata = bytes.count
        }
        return 12 + rdata
    }
}

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

/// Builds the `ldns_rr`s of a message once, then encodes chosen subsets of them with
/// `ldns_pkt2buffer_wire` (name compression on), so truncation can try several sizes cheaply.
///
/// The packet's section lists only borrow the records: they are emptied before `ldns_pkt_free`,
/// and the records themselves are freed from `owned`.
final class LDNSMessageEncoder {
    private let packet: UnsafeMutablePointer<ldns_pkt>
    private let buffer: LDNSBuffer
    private var owned: [LDNSRRPointer] = []
    private(set) var questions: [LDNSRRPointer] = []
    private(set) var answers: [LDNSRRPointer] = []
    private(set) var authority: [LDNSRRPointer] = []
    private(set) var additional: [LDNSRRPointer] = []

    init(_ message: Message) throws(DNSWireError) {
        guard let packet = ldns_pkt_new() else { throw .encoding("ldns_pkt_new: out of memory") }
        do {
            self.buffer = try LDNSBuffer(capacity: 512)
        } catch {
            ldns_pkt_free(packet)
            throw error
        }
        self.packet = packet
        // Fully initialised from here on: deinit cleans up whatever a throw leaves behind.
        try self.setHeader(message)
        for question in message.questions {
            self.questions.append(try self.adopt(self.makeQuestion(question)))
        }
        for record in message.answers {
            self.answers.append(try self.adopt(LDNSMessageEncoder.makeRecord(record)))
        }
        for record in message.authority {
            self.authority.append(try self.adopt(LDNSMessageEncoder.makeRecord(record)))
        }
        for record in message.additional {
            self.additional.append(try self.adopt(LDNSMessageEncoder.makeRecord(record)))
        }
    }

    deinit {
        for list in [
            ldns_pkt_question(self.packet), ldns_pkt_answer(self.packet), ldns_pkt_authority(self.packet),
            ldns_pkt_additional(self.packet),
        ] {
            if let list { ldns_rr_list_set_rr_count(list, 0) }
        }
        ldns_pkt_free(self.packet)
        for record in self.owned { ldns_rr_free(record) }
    }

    /// Encodes the questions, OPT, and the given records; header counts follow the lists.
    func encode(
        answers: [LDNSRRPointer], authority: [LDNSRRPointer], additional: [LDNSRRPointer], truncated: Bool
    ) throws(DNSWireError) -> [UInt8] {
        // ldns counts records in uint16_t loops: more than 65535 would never end.
        for list in [self.questions, answers, authority, additional] where list.count > 65535 {
            throw .encoding("more than 65535 records in a section")
        }
        try Self.fill(ldns_pkt_question(self.packet), self.questions)
        try Self.fill(ldns_pkt_answer(self.packet), answers)
        try Self.fill(ldns_pkt_authority(self.packet), authority)
        try Self.fill(ldns_pkt_additional(self.packet), additional)
        ldns_pkt_set_qdcount(self.packet, UInt16(self.questions.count))
        ldns_pkt_set_ancount(self.packet, UInt16(answers.count))
        ldns_pkt_set_nscount(self.packet, UInt16(authority.count))
        ldns_pkt_set_arcount(self.packet, UInt16(additional.count))
        ldns_pkt_set_tc(self.packet, truncated)

        ldns_buffer_clear(self.buffer.pointer)
        let status = ldns_pkt2buffer_wire(self.buffer.pointer, self.packet)
        guard status.isOK, ldns_buffer_status_ok(self.buffer.pointer) else {
            throw .encoding("ldns_pkt2buffer_wire: \(status.message)")
        }
        return self.buffer.writtenBytes
    }

    private static func fill(
        _ list: UnsafeMutablePointer<ldns_rr_list>?, _ records: [LDNSRRPointer]
    ) throws(DNSWireError) {
        guard let list else { throw .encoding("ldns packet without section list") }
        ldns_rr_list_set_rr_count(list, 0)
        for record in records where !ldns_rr_list_push_rr(list, record) {
            throw .encoding("ldns_rr_list_push_rr: out of memory")
        }
    }

    private func adopt(_ record: consuming LDNSRecord) -> LDNSRRPointer {
        let pointer = record.release()
        self.owned.append(pointer)
        return pointer
    }

    private func setHeader(_ message: Message) throws(DNSWireError) {
        guard message.opcode.rawValue <= 15 else { throw .encoding("opcode \(message.opcode.rawValue)") }
        guard message.rcode.rawValue <= 0xFFF else { throw .encoding("rcode \(message.rcode.rawValue)") }
        ldns_pkt_set_id(self.packet, message.id)
        ldns_pkt_set_qr(self.packet, message.isResponse)
        ldns_pkt_set_opcode(self.packet, ldns_pkt_opcode(rawValue: UInt32(message.opcode.rawValue)))
        ldns_pkt_set_aa(self.packet, message.authoritative)
        ldns_pkt_set_rd(self.packet, message.recursionDesired)
        ldns_pkt_set_ra(self.packet, message.recursionAvailable)
        ldns_pkt_set_ad(self.packet, message.authenticData)
        ldns_pkt_set_cd(self.packet, message.checkingDisabled)
        // RFC 6891 §6.1.3: the low 4 bits go in the header, the high 8 bits in the OPT TTL.
        ldns_pkt_set_rcode(self.packet, UInt8(message.rcode.rawValue & 0xF))
        guard let edns = message.edns else {
            guard message.rcode.rawValue <= 0xF else {
                throw .encoding("rcode \(message.rcode) needs an OPT record")
            }
            return
        }
        ldns_pkt_set_edns_udp_size(self.packet, edns.udpPayloadSize)
        ldns_pkt_set_edns_extended_rcode(self.packet, UInt8(message.rcode.rawValue >> 4))
        ldns_pkt_set_edns_version(self.packet, edns.version)
        ldns_pkt_set_edns_z(self.packet, edns.dnssecOK ? 0x8000 : 0)
        // ldns_pkt_edns() is false for an all-zero OPT; this makes ldns emit it anyway.
        self.packet.pointee._edns_present = 1
        if let list = try LDNSEDNS.makeOptionList(edns.options) {
            ldns_pkt_set_edns_option_list(self.packet, list)
        }
    }

    private func makeQuestion(_ question: Question) throws(DNSWireError) -> LDNSRecord {
        let record = try LDNSRecord(type: question.type)
        ldns_rr_set_owner(record.pointer, try question.name.makeLDNSDname())
        ldns_rr_set_class(record.pointer, ldns_rr_class(rawValue: UInt32(question.qclass.rawValue)))
        ldns_rr_set_question(record.pointer, true)
        return record
    }

    static func makeRecord(_ record: ResourceRecord) throws(DNSWireError) -> LDNSRecord {
        guard record.type != .opt else { throw .encoding("OPT belongs in Message.edns") }
        let made = try LDNSRecord(type: record.type)
        ldns_rr_set_owner(made.pointer, try record.name.makeLDNSDname())
        ldns_rr_set_class(made.pointer, ldns_rr_class(rawValue: UInt32(record.rrClass.rawValue)))
        ldns_rr_set_ttl(made.pointer, record.ttl)
        try record.rdata.pushLDNSRdfs(into: made)
        let length = (0..<made.rdfCount).reduce(0) { sum, index in
            sum + (made.rdf(index).map { ldns_rdf_size($0) } ?? 0)
        }
        guard length <= 65535 else { throw .encoding("\(record.type) RDATA of \(length) octets") }
        return made
    }
}

@available(*, unavailable)
extension LDNSMessageEncoder: Sendable {}
