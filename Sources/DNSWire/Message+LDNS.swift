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
