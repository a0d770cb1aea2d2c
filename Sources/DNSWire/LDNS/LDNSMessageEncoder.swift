internal import CLDNS

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
