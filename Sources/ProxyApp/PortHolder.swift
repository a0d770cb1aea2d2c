import AdminHTTP
import DNSServer
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Who holds a local port, read from /proc (Linux), so that "address already in use" can name
/// the other program. Finding the process needs permission to read other processes' file
/// descriptors (root, before `--user` drops it); without it the message names the port only.
enum PortHolder {
    /// "dnsmasq (pid 812)", or nil when no socket or no process is found.
    static func describe(port: Int, udp: Bool) -> String? {
        let inodes = socketInodes(port: port, udp: udp)
        guard !inodes.isEmpty, let pids = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
            return nil
        }
        for pid in pids where pid.allSatisfy(\.isNumber) && pid != "\(getpid())" {
            guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { continue }
            for fd in fds {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                    inodes.contains(target)
                else { continue }
                let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
                    .trimmed()
                return "\(command ?? "process") (pid \(pid))"
            }
        }
        return nil
    }

    /// `socket:[inode]` of every socket bound to `port` (TCP: listening only).
    static func socketInodes(port: Int, udp: Bool) -> Set<String> {
        let tables = udp ? ["/proc/net/udp", "/proc/net/udp6"] : ["/proc/net/tcp", "/proc/net/tcp6"]
        var inodes: Set<String> = []
        for table in tables {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count > 9, let local = fields[1].split(separator: ":").last,
                    Int(local, radix: 16) == port, udp || fields[3] == "0A"
                else { continue }
                inodes.insert("socket:[\(fields[9])]")
            }
        }
        return inodes
    }
}

extension StartupError {
    /// A DNS listener that could not bind, with who holds the port and the flag that moves it.
    init(_ error: DNSServerError) {
        var text = "\(error)"
        if error.code == .cannotListen, error.reason == SystemText.errnoText(EADDRINUSE),
            let match = error.address.firstMatch(of: /:(\d+)\/(udp|tcp|tls)$/), let port = Int(match.1)
        {
            if let holder = PortHolder.describe(port: port, udp: match.2 == "udp") { text += ", held by \(holder)" }
            let flag = match.2 == "tls" ? "--push-listen" : "--listen"
            text += "; stop that program, or give this proxy another address with \(flag) ADDR:PORT"
        }
        self.init(text)
    }

    /// The admin endpoint could not bind, said the same way.
    init(_ error: AdminServerError) {
        let address = "\(error.host.contains(":") ? "[\(error.host)]" : error.host):\(error.port)"
        guard let io = error.underlying as? IOError else {
            self.init("admin HTTP server cannot listen on \(address): \(error.underlying)")
            return
        }
        var text = "admin HTTP server cannot listen on \(address)/tcp: \(SystemText.errnoText(io.errnoCode))"
        if io.errnoCode == EADDRINUSE {
            if let holder = PortHolder.describe(port: error.port, udp: false) { text += ", held by \(holder)" }
            text += "; stop that program, or move the admin endpoint with --admin ADDR:PORT (or --admin off)"
        }
        self.init(text)
    }
}
