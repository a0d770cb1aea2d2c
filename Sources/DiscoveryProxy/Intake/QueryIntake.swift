import DNSWire

/// The first step of every query, before any cache state: decode, the client ACL, protocol
/// checks (opcode, question count, EDNS version and size), and `Catalog.plan`. Pure: the
/// proxy counts, logs and sends what it decides.
struct QueryIntake: Sendable {
    let catalog: Catalog
    let answers: AnswerBuilder

    init(catalog: Catalog) {
        self.catalog = catalog
        self.answers = AnswerBuilder(configuration: catalog.configuration)
    }

    enum Decision {
        /// No header, or a response: drop, never reflect.
        case drop
        /// Undecodable: FORMERR, or NOTIMP for a DSO message (`isDSO`).
        case malformed(Message, isDSO: Bool, error: any Error)
        /// The client is outside the allowed prefixes (RFC 8766 §9.2, RFC 7766 §10): REFUSED.
        case clientRefused(Message)
        /// Wrong opcode, question count or EDNS version; `rcode` says which.
        case protocolFailure(Message, RCode)
        /// Outside every zone, or a class we do not serve.
        case refused(Message)
        /// A zone of a link this client may not see (`Link.clients`): REFUSED, counted per link.
        case linkRefused(Message, link: String)
        /// Answered from configuration.
        case immediate(Message)
        /// To be answered from mDNS.
        case mdns(Message, MDNSPlan)
    }

    /// What the answer may be: its size limit, its qtype label for metrics, and whether it
    /// may carry edns-tcp-keepalive (a TCP query that asked for it, RFC 7828 §3.3.2; over UDP
    /// the option is ignored, §3.3.1).
    struct Limits {
        var size = 512
        var qtype = "none"
        var asksTCPKeepalive = false
    }

    func decide(_ bytes: [UInt8], from client: DNSClient) -> (Decision, Limits) {
        var limits = Limits()
        guard let header = MessageHeader(bytes), !header.isResponse else { return (.drop, limits) }
        let query: Message
        do {
            query = try Message(wire: bytes)
        } catch {
            // A DSO message (TLVs after the header) here came over UDP or a listener without
            // sessions: NOTIMP (RFC 8490 §5.1), not FORMERR.
            let isDSO = header.opcode == .dso
            let reply = Message(
                id: header.id, isResponse: true, opcode: header.opcode,
                recursionDesired: header.recursionDesired, rcode: isDSO ? .notImp : .formErr)
            return (.malformed(reply, isDSO: isDSO, error: error), limits)
        }
        limits.size = Self.answerLimit(for: query, over: client.transport, configuration: catalog.configuration)
        limits.qtype = query.questions.first.map { QueryContext.label(for: $0.type) } ?? "none"
        limits.asksTCPKeepalive = client.transport == .tcp && query.edns?.asksTCPKeepalive == true
        guard catalog.admits(client) else { return (.clientRefused(answers.failure(query, .refused)), limits) }
        if let rcode = Self.protocolFailure(query) {
            return (.protocolFailure(answers.failure(query, rcode), rcode), limits)
        }
        if let link = catalog.hiddenLink(holding: query.questions[0].name, from: client) {
            return (.linkRefused(answers.failure(query, .refused), link: link.interface), limits)
        }
        switch catalog.plan(query.questions[0]) {
        case .refused:
            return (.refused(answers.failure(query, .refused)), limits)
        case .immediate(let zone, let records):
            let shown = catalog.visible(records, to: client)
            // The zone's link matters only for its own name servers (in an empty answer's SOA).
            let link = catalog.hasLinkNameServers && shown.isEmpty ? catalog.zone(containing: zone)?.link : nil
            return (.immediate(answers.immediate(query, zone: zone, link: link, answers: shown)), limits)
        case .mdns(let plan):
            return (.mdns(query, plan), limits)
        }
    }

    /// RFC 6891 §6.2.5: a payload below 512 counts as 512; never above our own maximum.
    /// Without OPT, 512 (RFC 1035 §4.2.1). TCP: 65535.
    static func answerLimit(for query: Message, over transport: DNSTransport, configuration: ProxyConfiguration) -> Int
    {
        if transport == .tcp { return 65535 }
        guard let edns = query.edns else { return 512 }
        return min(max(512, Int(edns.udpPayloadSize)), max(512, configuration.maxUDPPayload))
    }

    /// Queries the proxy cannot plan: wrong opcode (DSO included, RFC 8490 §5.1, where no
    /// session is offered), question count, or EDNS version (RFC 6891 §6.1.3, answered with
    /// our OPT at version 0).
    static func protocolFailure(_ query: Message) -> RCode? {
        guard query.opcode == .query else { return .notImp }
        guard query.questions.count == 1 else { return .formErr }
        if let edns = query.edns, edns.version != 0 { return .badVers }
        return nil
    }
}
