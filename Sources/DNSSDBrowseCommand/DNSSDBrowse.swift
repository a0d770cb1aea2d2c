import ArgumentParser
import BuildInfo
import DNSSDClient
import DNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `dnssd-browse`. A library target, so that the package's one executable can be this command
/// too when run by that name (`discovery-proxy`'s main.swift).
public struct DNSSDBrowse: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "dnssd-browse",
        abstract: "Browse and resolve DNS-SD services over unicast DNS (RFC 6763), e.g. through a Discovery Proxy.",
        usage: """
            dnssd-browse [--server ADDR[:PORT]] [--tcp] [--json] [--watch] TYPE [DOMAIN]
              dnssd-browse --resolve INSTANCE TYPE [DOMAIN]
              dnssd-browse --types [DOMAIN]
              dnssd-browse --domains [DOMAIN]
            """,
        discussion: """
            TYPE is a service type such as _ipp._tcp (or a subtype, _printer._sub._http._tcp). \
            INSTANCE is the instance name as shown by a browse, taken as one label: spaces, dots \
            and UTF-8 are part of the name. DOMAIN is a DNS name (\\. and \\DDD escapes allowed).

            Without --server the first nameserver of resolv.conf is used (port 53). Without \
            DOMAIN, browse domains are discovered (RFC 6763 §11): for each search/domain entry of \
            resolv.conf, lb._dns-sd._udp.<domain> then b._dns-sd._udp.<domain> PTR.

            --watch polls again every TTL seconds (at least 5) and prints '+' and '-' lines for \
            instances (types, domains) that appear and disappear, until --count polls or \
            --duration seconds have passed (or forever). A browse --watch subscribes with DNS \
            Push (RFC 8765) instead when the zone answers _dns-push-tls._tcp.<domain> SRV, and \
            prints changes as they happen; the certificate must be valid for the SRV target \
            (system trust store, or --push-ca FILE; --push-insecure skips the check). If Push \
            fails it prints one warning line and polls; --no-push always polls.

            Exit status:
              0  success (a browse that finds no instances prints "no instances" and exits 0)
              1  not found: no such instance (--resolve), no browse domain discovered, or DOMAIN
                 not served as a DNS-SD domain (NXDOMAIN, or an empty answer without SOA)
              2  malformed name or server address
              3  the server answered with an error: REFUSED (domain not served there), SERVFAIL, ...
              4  timeout: no answer within --timeout seconds
              5  network error: connection refused (ICMP port unreachable), unreachable, bad response
              6  no usable resolv.conf (no nameserver line)
             64  usage error
            """,
        version: "dnssd-browse \(BuildInfo.description)")

    @Option(
        name: .long,
        help: ArgumentHelp("DNS server, numeric: ADDR, ADDR:PORT or [IPv6]:PORT.", valueName: "ADDR[:PORT]"))
    var server: String?

    @Flag(name: .long, help: "Use TCP only (otherwise UDP, falling back to TCP when the answer is truncated).")
    var tcp = false

    @Flag(name: .long, help: "Resolve one instance: host, port, addresses and TXT (like dns-sd -L).")
    var resolve = false

    @Flag(name: .long, help: "List service types (_services._dns-sd._udp.DOMAIN PTR).")
    var types = false

    @Flag(name: .long, help: "List browse domains (b/db/lb._dns-sd._udp.DOMAIN PTR).")
    var domains = false

    @Flag(name: .long, help: "Print JSON (one object; with --watch one object a line per change).")
    var json = false

    @Flag(name: .long, help: "Poll again every TTL seconds (at least 5) and print +/- lines for changes.")
    var watch = false

    @Flag(name: .long, help: "With --watch: always poll, even where the zone offers DNS Push.")
    var noPush = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --watch: trust this PEM (a CA, or the proxy's own self-signed certificate) for DNS Push TLS.",
            valueName: "FILE"))
    var pushCA: String?

    @Flag(name: .long, help: "With --watch: do not verify the DNS Push server's certificate (labs only).")
    var pushInsecure = false

    @Option(
        name: .long, parsing: .unconditional, help: ArgumentHelp("With --watch: stop after N polls.", valueName: "N"))
    var count: Int?

    @Option(
        name: .long, parsing: .unconditional, help: ArgumentHelp("With --watch: stop after S seconds.", valueName: "S"))
    var duration: Double?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Seconds to wait for each answer (the proxy may take 6 s on a miss).", valueName: "SECONDS"))
    var timeout: Double = 8

    @Option(name: .long, help: ArgumentHelp("Resolver configuration to read.", valueName: "PATH"))
    var resolvConf = "/etc/resolv.conf"

    @Argument(
        help: ArgumentHelp(
            "TYPE [DOMAIN], INSTANCE TYPE [DOMAIN] (--resolve) or [DOMAIN] (--types, --domains).", valueName: "NAMES"))
    var names: [String] = []

    enum Mode { case browse, resolve, types, domains }

    var mode: Mode {
        if self.resolve { return .resolve }
        if self.types { return .types }
        if self.domains { return .domains }
        return .browse
    }

    public init() {}

    public func validate() throws {
        guard [self.resolve, self.types, self.domains].filter({ $0 }).count <= 1 else {
            throw ValidationError("--resolve, --types and --domains exclude each other")
        }
        let range: ClosedRange<Int>
        switch self.mode {
        case .browse: range = 1...2
        case .resolve: range = 2...3
        case .types, .domains: range = 0...1
        }
        guard range.contains(self.names.count) else {
            switch self.mode {
            case .browse: throw ValidationError("expected TYPE [DOMAIN]")
            case .resolve: throw ValidationError("expected INSTANCE TYPE [DOMAIN] after --resolve")
            case .types, .domains: throw ValidationError("expected at most one DOMAIN")
            }
        }
        guard self.timeout > 0 else {
            throw ValidationError("--timeout must be positive (seconds), not \(self.timeout.formatted)")
        }
        if self.watch && self.mode == .resolve { throw ValidationError("--watch works with lists, not --resolve") }
        if !self.watch && (self.count != nil || self.duration != nil) {
            throw ValidationError("--count and --duration need --watch")
        }
        if let count = self.count, count < 1 { throw ValidationError("--count must be at least 1, not \(count)") }
        if let duration = self.duration, duration <= 0 {
            throw ValidationError("--duration must be positive (seconds), not \(duration.formatted)")
        }
    }

    public func run() throws {
        do {
            try self.execute()
        } catch {
            Console.error("dnssd-browse: \(error)")
            throw ExitCode(error.exitStatus)
        }
    }

    func execute() throws(DNSSDError) {
        // Parse every name first: a malformed one is reported before any network traffic.
        let request = try self.request()
        let session = try self.makeSession(domain: request.domain)
        switch request {
        case .browse(let type, _): try self.browse(type: type, in: session)
        case .resolve(let instance, let type, _): try self.resolve(instance: instance, type: type, in: session)
        case .types: try self.listTypes(in: session)
        case .domains: try self.listDomains(in: session)
        }
    }

    /// What the command line asks, its names parsed.
    enum Request {
        case browse(type: [[UInt8]], domain: DNSName?)
        case resolve(instance: [UInt8], type: [[UInt8]], domain: DNSName?)
        case types(domain: DNSName?)
        case domains(domain: DNSName?)

        var domain: DNSName? {
            switch self {
            case .browse(_, let domain), .resolve(_, _, let domain), .types(let domain), .domains(let domain): domain
            }
        }
    }

    func request() throws(DNSSDError) -> Request {
        func domain(at index: Int) throws(DNSSDError) -> DNSName? {
            try self.names.count > index ? ServiceNames.parseDomain(self.names[index]) : nil
        }
        switch self.mode {
        case .browse:
            return .browse(type: try ServiceNames.parseServiceType(self.names[0]), domain: try domain(at: 1))
        case .resolve:
            return .resolve(
                instance: try ServiceNames.instanceLabel(self.names[0]),
                type: try ServiceNames.parseServiceType(self.names[1]),
                domain: try domain(at: 2))
        case .types: return .types(domain: try domain(at: 0))
        case .domains: return .domains(domain: try domain(at: 0))
        }
    }

    /// The server to ask, and the domains to ask in: DOMAIN, or resolv.conf's search domains.
    struct Session {
        let client: DNSSDClient
        let serverText: String
        let explicitDomain: DNSName?
        let searchDomains: [DNSName]

        /// DOMAIN, or the browse domains the search domains lead to (RFC 6763 §11).
        func browseDomains() throws(DNSSDError) -> [DNSName] {
            if let explicitDomain { return [explicitDomain] }
            let found = try client.discoverBrowseDomains(searchDomains: searchDomains)
            guard !found.isEmpty else {
                throw .noBrowseDomains(searched: searchDomains.map(ServiceNames.display), server: serverText)
            }
            return found.map(\.domain)
        }
    }

    func makeSession(domain explicitDomain: DNSName?) throws(DNSSDError) -> Session {
        var resolvConf: ResolverConfiguration?
        func loadResolvConf() throws(DNSSDError) -> ResolverConfiguration {
            if let resolvConf { return resolvConf }
            let loaded = try ResolverConfiguration.load(path: self.resolvConf)
            resolvConf = loaded
            return loaded
        }
        let server: ServerAddress
        if let text = self.server {
            server = try ServerAddress(parsing: text)
        } else {
            guard let first = try loadResolvConf().nameservers.first else {
                throw .resolvConf(path: self.resolvConf, reason: "no nameserver line; use --server ADDR[:PORT]")
            }
            server = first
        }
        let searchDomains: [DNSName]
        if explicitDomain == nil {
            searchDomains = try loadResolvConf().searchDomains.compactMap { try? ServiceNames.parseDomain($0) }
        } else {
            searchDomains = []
        }
        return Session(
            client: DNSSDClient(transport: DNSSocketClient(server: server, timeout: self.timeout, tcpOnly: self.tcp)),
            serverText: server.description, explicitDomain: explicitDomain, searchDomains: searchDomains)
    }

    /// Polls until --count or --duration; prints +/- lines for what changed. The first poll
    /// prints every row as an add.
    func watchLoop(_ poll: () throws(DNSSDError) -> (rows: [OutputRow], minTTL: UInt32?)) throws(DNSSDError) {
        let start = Console.monotonic
        var previous: [OutputRow] = []
        var polls = 0
        while true {
            let (rows, minTTL) = try poll()
            let (added, removed) = Output.diff(old: previous, new: rows)
            let time = Console.timeOfDay
            for row in removed {
                Console.out(
                    (self.json
                        ? Output.watchJSON(added: false, time: time, row: row)
                        : Output.watchLine(added: false, time: time, row: row)) + "\n")
            }
            for row in added {
                Console.out(
                    (self.json
                        ? Output.watchJSON(added: true, time: time, row: row)
                        : Output.watchLine(added: true, time: time, row: row)) + "\n")
            }
            previous = rows
            polls += 1
            if let count = self.count, polls >= count { return }
            var interval = Double(max(5, minTTL ?? 10))
            if let duration = self.duration {
                let remaining = start + duration - Console.monotonic
                if remaining <= 0 { return }
                if remaining < interval {
                    Console.sleep(remaining)
                    return
                }
                interval = min(interval, remaining)
            }
            Console.sleep(interval)
        }
    }
}

/// Unbuffered output (write(2)), so --watch lines reach a pipe at once; time helpers.
enum Console {
    static func out(_ text: String, unless skip: Bool = false) {
        guard !skip else { return }
        self.write(1, text)
    }

    static func error(_ line: String) {
        self.write(2, line + "\n")
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                #if canImport(Glibc)
                Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                Darwin.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
            }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return }
            offset += written
        }
    }

    static var monotonic: Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    /// Local time as HH:MM:SS.
    static var timeOfDay: String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

    static func sleep(_ seconds: Double) {
        guard seconds > 0 else { return }
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}

extension Double {
    /// `-3` rather than `-3.0`, as the user typed it, in error messages.
    fileprivate var formatted: String { self == rounded() && abs(self) < 1e15 ? String(Int(self)) : String(self) }
}
