import DNSWire

/// One instance found by a browse (a PTR answer `<type>.<domain> → <instance>.<type>.<domain>`).
public struct ServiceInstance: Sendable, Hashable {
    /// The instance label, raw bytes (RFC 6763 §4.1.1).
    public var instance: [UInt8]
    public var type: [[UInt8]]
    public var domain: DNSName
    /// The full PTR target.
    public var fullName: DNSName
    public var ttl: UInt32

    public init(instance: [UInt8], type: [[UInt8]], domain: DNSName, fullName: DNSName, ttl: UInt32) {
        self.instance = instance
        self.type = type
        self.domain = domain
        self.fullName = fullName
        self.ttl = ttl
    }

    public var instanceText: String { ServiceNames.displayLabel(self.instance) }
}

/// A service type found under `_services._dns-sd._udp.<domain>` (RFC 6763 §9).
public struct ServiceTypeEntry: Sendable, Hashable {
    public var type: [[UInt8]]
    public var domain: DNSName
    public var ttl: UInt32

    public init(type: [[UInt8]], domain: DNSName, ttl: UInt32) {
        self.type = type
        self.domain = domain
        self.ttl = ttl
    }
}

/// A browse domain from domain enumeration (RFC 6763 §11), with the lists that named it.
public struct BrowseDomain: Sendable, Hashable {
    public var domain: DNSName
    /// Listed under `b` (browse domains).
    public var browse: Bool
    /// Listed under `db` (the default browse domain).
    public var isDefault: Bool
    /// Listed under `lb` (legacy browse: browsed automatically by clients that name no domain).
    public var legacy: Bool
    /// The domain whose `_dns-sd._udp` names listed it.
    public var source: DNSName
    public var ttl: UInt32

    public init(domain: DNSName, browse: Bool, isDefault: Bool, legacy: Bool, source: DNSName, ttl: UInt32) {
        self.domain = domain
        self.browse = browse
        self.isDefault = isDefault
        self.legacy = legacy
        self.source = source
        self.ttl = ttl
    }
}

/// The result of resolving one instance (SRV, TXT, and the addresses of the SRV target).
public struct ResolvedService: Sendable, Hashable {
    public var instance: [UInt8]
    public var type: [[UInt8]]
    public var domain: DNSName
    public var fullName: DNSName
    public var host: DNSName
    public var port: UInt16
    public var priority: UInt16
    public var weight: UInt16
    /// IPv4 then IPv6 addresses as text.
    public var addresses: [String]
    /// The TXT RDATA as received (empty when there was none).
    public var txt: [UInt8]
    public var ttl: UInt32

    public init(
        instance: [UInt8], type: [[UInt8]], domain: DNSName, fullName: DNSName, host: DNSName, port: UInt16,
        priority: UInt16, weight: UInt16, addresses: [String], txt: [UInt8], ttl: UInt32
    ) {
        self.instance = instance
        self.type = type
        self.domain = domain
        self.fullName = fullName
        self.host = host
        self.port = port
        self.priority = priority
        self.weight = weight
        self.addresses = addresses
        self.txt = txt
        self.ttl = ttl
    }

    public var txtEntries: [TXTEntry] { TXTRecord.parse(self.txt) }
}

/// Unicast DNS-SD (RFC 6763) over a `DNSSocketClient`: browse, resolve, service-type and
/// browse-domain enumeration. Every call is blocking; queries that do not depend on each
/// other are sent together.
public struct DNSSDClient: Sendable {
    public var transport: DNSSocketClient

    public init(transport: DNSSocketClient) {
        self.transport = transport
    }

    var serverText: String { self.transport.server.description }

    /// `<type>.<domain> PTR`: the instances, sorted by name. No answer is an empty list.
    public func browse(type: [[UInt8]], domain: DNSName) throws(DNSSDError) -> [ServiceInstance] {
        let qname = try ServiceNames.serviceName(instance: nil, type: type, domain: domain)
        let records = try self.listed(Question(name: qname, type: .ptr), domain: domain)
        var seen: Set<DNSName> = []
        var out: [ServiceInstance] = []
        for record in records {
            guard case .ptr(let target) = record.rdata, let first = target.firstLabel.map(Array.init),
                seen.insert(target).inserted
            else { continue }
            let rest = target.parent
            let instanceDomain = rest.labelCount >= type.count ? rest.dropping(labels: type.count) : domain
            out.append(
                ServiceInstance(instance: first, type: type, domain: instanceDomain, fullName: target, ttl: record.ttl))
        }
        return out.sorted { $0.instanceText.lowercased() < $1.instanceText.lowercased() }
    }

    /// `_services._dns-sd._udp.<domain> PTR` (RFC 6763 §9).
    public func serviceTypes(domain: DNSName) throws(DNSSDError) -> [ServiceTypeEntry] {
        let qname = try ServiceNames.serviceName(
            instance: nil, type: [Array("_services".utf8), Array("_dns-sd".utf8), Array("_udp".utf8)], domain: domain)
        var seen: Set<DNSName> = []
        var out: [ServiceTypeEntry] = []
        for record in try self.listed(Question(name: qname, type: .ptr), domain: domain) {
            guard case .ptr(let target) = record.rdata, seen.insert(target).inserted else { continue }
            let type = target.labels(before: domain) ?? Array(target.labels.prefix(2))
            out.append(ServiceTypeEntry(type: type, domain: domain, ttl: record.ttl))
        }
        return out.sorted { ServiceNames.display(labels: $0.type) < ServiceNames.display(labels: $1.type) }
    }

    /// `b`, `db` and `lb._dns-sd._udp.<domain> PTR` (RFC 6763 §11), merged per domain,
    /// in the order: legacy (automatic) ones first, then the rest as listed.
    public func browseDomains(in domain: DNSName) throws(DNSSDError) -> [BrowseDomain] {
        let kinds = ["lb", "b", "db"]
        let questions = try kinds.map { (kind) throws(DNSSDError) in
            Question(
                name: try ServiceNames.serviceName(
                    instance: Array(kind.utf8), type: [Array("_dns-sd".utf8), Array("_udp".utf8)], domain: domain),
                type: .ptr)
        }
        let responses = try self.transport.query(questions)
        var out: [BrowseDomain] = []
        for (kind, (question, response)) in zip(kinds, zip(questions, responses)) {
            for record in try self.checked(response, question: question, domain: domain) {
                guard case .ptr(let target) = record.rdata else { continue }
                let index: Int
                if let existing = out.firstIndex(where: { $0.domain == target }) {
                    index = existing
                } else {
                    out.append(
                        BrowseDomain(
                            domain: target, browse: false, isDefault: false, legacy: false, source: domain,
                            ttl: record.ttl))
                    index = out.count - 1
                }
                switch kind {
                case "lb": out[index].legacy = true
                case "db": out[index].isDefault = true
                default: out[index].browse = true
                }
                out[index].ttl = min(out[index].ttl, record.ttl)
            }
        }
        return out
    }

    /// Browse domains for a client that names none (RFC 6763 §11): for each search domain,
    /// `lb` then `b` names. A search domain the server refuses or fails is skipped (the
    /// lists are advisory); transport errors end the search.
    public func discoverBrowseDomains(searchDomains: [DNSName]) throws(DNSSDError) -> [BrowseDomain] {
        var out: [BrowseDomain] = []
        for search in searchDomains {
            let found: [BrowseDomain]
            do {
                found = try self.browseDomains(in: search)
            } catch {
                switch error {
                case .refused, .serverFailure, .errorRCode, .malformedName: continue
                default: throw error
                }
            }
            for entry in found where entry.legacy || entry.browse {
                if !out.contains(where: { $0.domain == entry.domain }) { out.append(entry) }
            }
        }
        return out
    }

    /// SRV and TXT of `<instance>.<type>.<domain>`, then A and AAAA of the SRV target
    /// (from the additional section when the server sent them, RFC 6763 §12, else asked).
    public func resolve(instance: [UInt8], type: [[UInt8]], domain: DNSName) throws(DNSSDError) -> ResolvedService {
        let name = try ServiceNames.serviceName(instance: instance, type: type, domain: domain)
        let questions = [Question(name: name, type: .srv), Question(name: name, type: .txt)]
        let responses = try self.transport.query(questions)
        let srvRecords = try self.checked(responses[0], question: questions[0], domain: domain)
        let txtRecords = try self.checked(responses[1], question: questions[1], domain: domain)
        guard let srv = srvRecords.first, case .srv(let priority, let weight, let port, let target) = srv.rdata else {
            throw .instanceNotFound(
                instance: ServiceNames.displayLabel(instance), type: ServiceNames.display(labels: type),
                domain: ServiceNames.display(domain), server: self.serverText)
        }
        var txt: [UInt8] = []
        if let record = txtRecords.first, case .txt(let bytes) = record.rdata { txt = bytes }
        var v4: [String] = []
        var v6: [String] = []
        func collect(_ records: [ResourceRecord]) {
            for record in records where record.name == target {
                switch record.rdata {
                case .a(let bytes):
                    if !v4.contains(IPAddressText.format(bytes)) { v4.append(IPAddressText.format(bytes)) }
                case .aaaa(let bytes):
                    if !v6.contains(IPAddressText.format(bytes)) { v6.append(IPAddressText.format(bytes)) }
                default: continue
                }
            }
        }
        collect(responses[0].additional)
        if v4.isEmpty && v6.isEmpty && !target.isRoot {
            let addressQuestions = [Question(name: target, type: .a), Question(name: target, type: .aaaa)]
            let addressResponses = try self.transport.query(addressQuestions)
            for (question, response) in zip(addressQuestions, addressResponses) {
                collect((try? self.checked(response, question: question, domain: domain)) ?? [])
            }
        }
        return ResolvedService(
            instance: instance, type: type, domain: domain, fullName: name, host: target, port: port,
            priority: priority, weight: weight, addresses: v4 + v6, txt: txt, ttl: srv.ttl)
    }

    // MARK: helpers

    /// Answers of `question`'s type at its name (following nothing: DNS-SD names are not aliases).
    func answers(_ question: Question, domain: DNSName) throws(DNSSDError) -> [ResourceRecord] {
        try self.checked(try self.transport.query(question), question: question, domain: domain)
    }

    /// Answers of a list in the user's domain (browse, service types). An empty list is fine,
    /// but only as a DNS-SD zone gives it: NOERROR with the zone's SOA. NXDOMAIN, or nothing
    /// and no SOA, means the domain is not served there, which "no instances" would hide.
    func listed(_ question: Question, domain: DNSName) throws(DNSSDError) -> [ResourceRecord] {
        let response = try self.transport.query(question)
        let records = try self.checked(response, question: question, domain: domain)
        let answer: String? =
            if response.rcode == .nxDomain {
                "NXDOMAIN"
            } else if records.isEmpty && !response.authority.contains(where: { $0.type == .soa }) {
                "no records and no SOA"
            } else { nil }
        if let answer {
            throw .notABrowseDomain(
                server: self.serverText, qname: "\(ServiceNames.display(question.name)) \(question.type)",
                domain: ServiceNames.display(domain), answer: answer)
        }
        return records
    }

    func checked(_ response: Message, question: Question, domain: DNSName) throws(DNSSDError) -> [ResourceRecord] {
        if let error = DNSSDError.from(
            rcode: response.rcode, server: self.serverText, question: question, domain: domain)
        {
            throw error
        }
        return response.answers.filter { $0.name == question.name && $0.type == question.type }
    }
}
