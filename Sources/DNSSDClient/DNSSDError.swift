import DNSWire

/// Everything that can go wrong in a lookup, each with a one-line message and an exit status.
///
/// Exit statuses (also listed by `dnssd-browse --help`):
/// 0 success (a browse with no instances included), 1 not found (resolve without an SRV
/// record, no browse domain discovered, a domain not served as DNS-SD), 2 bad input (malformed name or server address),
/// 3 the server answered with an error rcode (REFUSED, SERVFAIL, ...), 4 timeout,
/// 5 network error (connection refused, unreachable, unusable response),
/// 6 local configuration (no usable resolv.conf). ArgumentParser's usage errors exit 64.
public enum DNSSDError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformedName(kind: String, text: String, reason: String)
    case badServerAddress(text: String, reason: String)
    case resolvConf(path: String, reason: String)
    case connectionRefused(server: String, transport: String)
    case unreachable(server: String, reason: String)
    case timeout(server: String, seconds: Double, transport: String)
    case refused(server: String, domain: String, qname: String)
    case serverFailure(server: String, qname: String)
    case errorRCode(server: String, qname: String, rcode: String)
    case badResponse(server: String, reason: String)
    case instanceNotFound(instance: String, type: String, domain: String, server: String)
    case noBrowseDomains(searched: [String], server: String)
    /// A list (browse, service types) answered NXDOMAIN, or empty without an SOA: the domain
    /// is not served there as a DNS-SD zone (a discovery proxy answers NOERROR with its SOA).
    case notABrowseDomain(server: String, qname: String, domain: String, answer: String)
    case system(String)

    public enum ExitStatus {
        public static let notFound: Int32 = 1
        public static let badInput: Int32 = 2
        public static let serverError: Int32 = 3
        public static let timeout: Int32 = 4
        public static let network: Int32 = 5
        public static let configuration: Int32 = 6
    }

    public var exitStatus: Int32 {
        switch self {
        case .instanceNotFound, .noBrowseDomains, .notABrowseDomain: return ExitStatus.notFound
        case .malformedName, .badServerAddress: return ExitStatus.badInput
        case .refused, .serverFailure, .errorRCode: return ExitStatus.serverError
        case .timeout: return ExitStatus.timeout
        case .connectionRefused, .unreachable, .badResponse, .system: return ExitStatus.network
        case .resolvConf: return ExitStatus.configuration
        }
    }

    /// One line, without the program name.
    public var description: String {
        switch self {
        case .malformedName(let kind, let text, let reason):
            return "malformed \(kind) \"\(text)\": \(reason)"
        case .badServerAddress(let text, let reason):
            return "bad server address \"\(text)\": \(reason)"
        case .resolvConf(let path, let reason):
            return "\(path): \(reason)"
        case .connectionRefused(let server, let transport):
            return "\(server): connection refused (nothing listens on that \(transport) port)"
        case .unreachable(let server, let reason):
            return "\(server): \(reason)"
        case .timeout(let server, let seconds, let transport):
            return "timeout: no answer from \(server) over \(transport) after \(Self.seconds(seconds))"
        case .refused(let server, let domain, let qname):
            return "\(server) refused the query for \(qname) (REFUSED): it does not serve the domain \(domain)"
        case .serverFailure(let server, let qname):
            return "\(server) could not answer \(qname) (SERVFAIL); try again later"
        case .errorRCode(let server, let qname, let rcode):
            return "\(server) answered \(qname) with \(rcode)"
        case .badResponse(let server, let reason):
            return "\(server): unusable response: \(reason)"
        case .instanceNotFound(let instance, let type, let domain, let server):
            return "instance \"\(instance)\" of \(type) not found in \(domain) (no SRV record at \(server))"
        case .noBrowseDomains(let searched, let server):
            if searched.isEmpty {
                return "no browse domain: resolv.conf has no search or domain entry; give DOMAIN"
            }
            return "no browse domain found: lb/b._dns-sd._udp under \(searched.joined(separator: ", ")) "
                + "gave no PTR at \(server); give DOMAIN"
        case .notABrowseDomain(let server, let qname, let domain, let answer):
            return "\(server) answered \(qname) with \(answer): \(domain) is not a DNS-SD domain there "
                + "(a discovery proxy answers NOERROR with its SOA); check DOMAIN, or list browse domains with --domains"
        case .system(let what):
            return what
        }
    }

    static func seconds(_ value: Double) -> String {
        if value == value.rounded() { return "\(Int(value)) s" }
        return "\((value * 10).rounded() / 10) s"
    }

    /// Maps an error rcode of the response to `question` about `domain`; nil for NOERROR and
    /// NXDOMAIN (both simply mean "no records").
    public static func from(rcode: RCode, server: String, question: Question, domain: DNSName) -> DNSSDError? {
        let qname = "\(ServiceNames.display(question.name)) \(question.type)"
        switch rcode {
        case .noError, .nxDomain: return nil
        case .refused: return .refused(server: server, domain: ServiceNames.display(domain), qname: qname)
        case .servFail: return .serverFailure(server: server, qname: qname)
        default: return .errorRCode(server: server, qname: qname, rcode: rcode.description)
        }
    }
}
