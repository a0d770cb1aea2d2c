#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What dnssd-browse takes from resolv.conf(5): the name servers (port 53) and the
/// `domain`/`search` entries where browse domains are discovered (RFC 6763 §11).
public struct ResolverConfiguration: Sendable, Equatable {
    public var nameservers: [ServerAddress]
    /// Every `domain` and `search` entry, in file order, without duplicates.
    public var searchDomains: [String]
    /// Lines that could not be used, for diagnostics: (line number, reason).
    public var problems: [String]

    public init(nameservers: [ServerAddress] = [], searchDomains: [String] = [], problems: [String] = []) {
        self.nameservers = nameservers
        self.searchDomains = searchDomains
        self.problems = problems
    }

    /// Parses resolv.conf text. Comments start with `#` or `;`; unknown keywords are ignored.
    public static func parse(_ text: String) -> ResolverConfiguration {
        var config = ResolverConfiguration()
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = Substring(rawLine)
            if let comment = line.firstIndex(where: { $0 == "#" || $0 == ";" }) { line = line[..<comment] }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            guard let keyword = words.first else { continue }
            switch keyword {
            case "nameserver":
                guard words.count >= 2 else {
                    config.problems.append("line \(lineNumber): nameserver without an address")
                    continue
                }
                // resolv.conf addresses carry no port; a bare IPv6 address must not be split on ':'.
                let text = words[1].contains(":") && !words[1].hasPrefix("[") ? "[\(words[1])]" : words[1]
                do {
                    config.nameservers.append(try ServerAddress(parsing: text, defaultPort: 53))
                } catch {
                    config.problems.append("line \(lineNumber): \(error)")
                }
            case "domain", "search":
                for domain in words.dropFirst() where domain != "." && !config.searchDomains.contains(domain) {
                    config.searchDomains.append(domain)
                }
            default:
                continue
            }
        }
        return config
    }

    /// Reads and parses `path`.
    public static func load(path: String = "/etc/resolv.conf") throws(DNSSDError) -> ResolverConfiguration {
        guard let file = fopen(path, "r") else {
            throw .resolvConf(path: path, reason: "cannot read: \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count > 0 { bytes += chunk[0..<count] }
            if count < chunk.count { break }
        }
        return parse(String(decoding: bytes, as: UTF8.self))
    }
}
