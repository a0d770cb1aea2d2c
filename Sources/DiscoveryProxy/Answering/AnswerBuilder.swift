import DNSWire

/// Builds reply messages: what the cache knows (a `Snapshot`) presented in the link's zone
/// with its additionals (RFC 6763 §12), ANY (RFC 8482), negatives with the zone's SOA
/// (RFC 2308, never NXDOMAIN: §5.6), and failures. No state: one per configuration.
struct AnswerBuilder: Sendable {
    let configuration: ProxyConfiguration

    /// The answer to an mDNS-planned query from `snapshot`, every TTL `ttl` (default: the cap,
    /// or the provisional TTL while the link's devices may add to it);
    /// `context` says whether the client may see the link's private addresses.
    func answer(
        _ query: Message, plan: MDNSPlan, snapshot: Snapshot, ttl: UInt32? = nil, for context: QueryContext
    ) -> Message {
        var reply = reply(to: query)
        let owner = query.questions[0].name
        let ttl =
            ttl
            ?? (snapshot.isProvisional
                ? min(configuration.ttlCap, DiscoveryProxy.provisionalTTL) : configuration.ttlCap)
        let presentation = ZonePresentation(
            link: plan.link, suppressLinkLocal: configuration.suppressLinkLocal,
            hidesPrivateAddresses: context.hidesPrivateAddresses)
        let usable = UsableTargets(
            snapshot: snapshot, presentation: presentation, enabled: configuration.suppressLinkLocal)
        reply.answers = snapshot.answers.compactMap { record in
            guard usable.shows(record) else { return nil }
            return presentation.rdata(of: record).map {
                ResourceRecord(name: owner, type: record.type, ttl: ttl, rdata: $0)
            }
        }
        if reply.answers.isEmpty {
            // NODATA, never NXDOMAIN: the name may be an empty non-terminal (§5.6).
            let zone = ZoneRecords(origin: plan.zone, link: plan.link, configuration: configuration)
            reply.authority = [snapshot.isSettled ? zone.soa : zone.soa(negativeTTL: DiscoveryProxy.provisionalTTL)]
            return reply
        }
        let answered = Set(reply.answers)
        var additional: [ResourceRecord] = []
        for record in snapshot.additional where usable.shows(record) {
            guard let rdata = presentation.rewritten(record), let name = presentation.owner(of: record) else {
                continue
            }
            let rr = ResourceRecord(name: name, type: record.type, ttl: ttl, rdata: rdata)
            if !answered.contains(rr) && !additional.contains(rr) { additional.append(rr) }
        }
        reply.additional = additional
        return reply
    }

    /// A query of type ANY (RFC 8482 §4.1: a subset of the RRsets is a complete answer):
    /// `records`, every RRset the live browses hold for the name, or with none the
    /// synthesized HINFO of RFC 8482 §4.2.
    func any(_ query: Message, plan: MDNSPlan, records: [CachedRecord], for context: QueryContext) -> Message {
        var reply = answer(query, plan: plan, snapshot: Snapshot(answers: records), for: context)
        if reply.answers.isEmpty {
            reply.authority = []
            reply.answers = [
                ResourceRecord(
                    name: query.questions[0].name, type: .hinfo, ttl: configuration.ttlCap,
                    rdata: .raw([7] + Array("RFC8482".utf8) + [0]))
            ]
        }
        return reply
    }

    /// An answer from configuration (`QueryPlan.immediate`); empty answers carry the SOA.
    func immediate(_ query: Message, zone: DNSName, link: Link?, answers: [ResourceRecord]) -> Message {
        var reply = reply(to: query)
        reply.answers = answers
        if answers.isEmpty {
            reply.authority = [ZoneRecords(origin: zone, link: link, configuration: configuration).soa]
        }
        return reply
    }

    /// The skeleton of a reply: ID, opcode, RD and CD echoed, the question, AA (we are
    /// authoritative for every zone we answer), OPT only when the query had one (RFC 6891 §7),
    /// with the query's DO bit copied (RFC 3225 §3); unknown EDNS flags and options are not.
    func reply(to query: Message) -> Message {
        Message(
            id: query.id, isResponse: true, opcode: query.opcode, authoritative: true,
            recursionDesired: query.recursionDesired, checkingDisabled: query.checkingDisabled,
            questions: query.questions,
            edns: query.edns.map {
                EDNS(udpPayloadSize: UInt16(clamping: configuration.maxUDPPayload), dnssecOK: $0.dnssecOK)
            })
    }

    func failure(_ query: Message, _ rcode: RCode) -> Message {
        var reply = reply(to: query)
        reply.authoritative = false
        reply.rcode = rcode
        if rcode == .formErr && query.questions.count != 1 { reply.questions = [] }
        return reply
    }
}
