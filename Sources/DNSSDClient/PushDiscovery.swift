import DNSWire

/// Where a zone's DNS Push service is (RFC 8765 §6.1: `_dns-push-tls._tcp.<zone>` SRV).
public struct PushEndpoint: Sendable, Equatable {
    /// The SRV target: the name the certificate must carry.
    public var target: DNSName
    public var port: Int
    /// The target's first address, as text for a connect.
    public var address: String
}

extension DNSSDClient {
    /// The zone's Push service, or nil when the zone does not advertise one (or its target has
    /// no address): the caller then polls.
    public func pushEndpoint(domain: DNSName) throws(DNSSDError) -> PushEndpoint? {
        let name = try ServiceNames.serviceName(
            instance: nil, type: [Array("_dns-push-tls".utf8), Array("_tcp".utf8)], domain: domain)
        let srv = try self.transport.query(Question(name: name, type: .srv))
        guard srv.rcode == .noError,
            let (port, target) = srv.answers.lazy.compactMap({ record -> (UInt16, DNSName)? in
                if case .srv(_, _, let port, let target) = record.rdata { return (port, target) }
                return nil
            }).first
        else { return nil }
        for type in [RRType.a, .aaaa] {
            let response = try self.transport.query(Question(name: target, type: type))
            for record in response.answers where record.name == target {
                switch record.rdata {
                case .a(let bytes):
                    return PushEndpoint(
                        target: target, port: Int(port), address: bytes.map(String.init).joined(separator: "."))
                case .aaaa(let bytes):
                    let groups = stride(from: 0, to: 16, by: 2).map {
                        String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
                    }
                    return PushEndpoint(target: target, port: Int(port), address: groups.joined(separator: ":"))
                default: continue
                }
            }
        }
        return nil
    }

    /// A PUSH change to a browse (`<type>.<domain>` PTR) as the instance it adds or removes.
    public static func instance(from change: PushChange, type: [[UInt8]], domain: DNSName) -> ServiceInstance? {
        guard change.type == .ptr, case .ptr(let target)? = try? RData(type: .ptr, wire: change.rdata),
            let first = target.firstLabel.map(Array.init)
        else { return nil }
        return ServiceInstance(
            instance: first, type: type, domain: domain, fullName: target, ttl: change.isAddition ? change.ttl : 0)
    }
}
