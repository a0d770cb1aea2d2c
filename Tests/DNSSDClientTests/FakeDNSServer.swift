import DNSWire
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A tiny DNS server on 127.0.0.1 (UDP and TCP on the same ephemeral port) for round-trip
/// tests. `handler` builds the answer to each query; nil means "stay silent".
final class FakeDNSServer: @unchecked Sendable {
    typealias Handler = @Sendable (_ query: Message, _ overTCP: Bool) -> Message?

    let port: UInt16
    private let udp: Int32
    private let tcp: Int32
    private let handler: Handler
    private let stopped = NSLock()
    private var isStopped = false
    private let done = DispatchSemaphore(value: 0)
    /// Queries seen, as (qname, type, overTCP).
    private var seenQueries: [(String, RRType, Bool)] = []

    var queries: [(String, RRType, Bool)] {
        self.stopped.lock()
        defer { self.stopped.unlock() }
        return self.seenQueries
    }

    init(handler: @escaping Handler) throws {
        self.handler = handler
        var lastError: Int32 = 0
        for _ in 0..<20 {
            let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = Self.loopback(port: 0)
            guard Self.bind(udp, &address) == 0 else {
                lastError = errno
                close(udp)
                continue
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(udp, $0, &length) }
            }
            let port = UInt16(bigEndian: address.sin_port)
            let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var one: Int32 = 1
            setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var tcpAddress = Self.loopback(port: port)
            if Self.bind(tcp, &tcpAddress) == 0 && listen(tcp, 8) == 0 {
                self.udp = udp
                self.tcp = tcp
                self.port = port
                Thread { [self] in self.serve() }.start()
                return
            }
            lastError = errno
            close(udp)
            close(tcp)
        }
        throw POSIXError(POSIXErrorCode(rawValue: lastError) ?? .EADDRINUSE)
    }

    func stop() {
        self.stopped.lock()
        self.isStopped = true
        self.stopped.unlock()
        self.done.wait()
        close(self.udp)
        close(self.tcp)
    }

    private var shouldStop: Bool {
        self.stopped.lock()
        defer { self.stopped.unlock() }
        return self.isStopped
    }

    private func record(_ query: Message, tcp: Bool) {
        guard let question = query.questions.first else { return }
        self.stopped.lock()
        self.seenQueries.append((question.name.description, question.type, tcp))
        self.stopped.unlock()
    }

    private func serve() {
        var buffer = [UInt8](repeating: 0, count: 65535)
        while !self.shouldStop {
            var fds = [
                pollfd(fd: self.udp, events: Int16(POLLIN), revents: 0),
                pollfd(fd: self.tcp, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&fds, 2, 50) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var peer = sockaddr_storage()
                var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                let count = withUnsafeMutablePointer(to: &peer) { peerPointer in
                    peerPointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                        buffer.withUnsafeMutableBytes {
                            recvfrom(self.udp, $0.baseAddress, $0.count, 0, address, &peerLength)
                        }
                    }
                }
                if count > 0, let query = try? Message(wire: Array(buffer[0..<count])) {
                    self.record(query, tcp: false)
                    if let answer = self.handler(query, false), let wire = try? answer.encode() {
                        _ = withUnsafePointer(to: &peer) { peerPointer in
                            peerPointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                                wire.withUnsafeBytes {
                                    sendto(self.udp, $0.baseAddress, $0.count, 0, address, peerLength)
                                }
                            }
                        }
                    }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let connection = accept(self.tcp, nil, nil)
                if connection >= 0 {
                    self.serveTCP(connection)
                    close(connection)
                }
            }
        }
        self.done.signal()
    }

    private func serveTCP(_ fd: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func readExactly(_ count: Int) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: count)
            var got = 0
            while got < count {
                let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
                if n <= 0 { return nil }
                got += n
            }
            return out
        }
        while let prefix = readExactly(2) {
            let length = Int(prefix[0]) << 8 | Int(prefix[1])
            guard let wire = readExactly(length), let query = try? Message(wire: wire) else { return }
            self.record(query, tcp: true)
            guard let answer = self.handler(query, true), let out = try? answer.encode() else { continue }
            let framed = [UInt8(out.count >> 8), UInt8(out.count & 0xFF)] + out
            _ = framed.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func bind(_ fd: Int32, _ address: inout sockaddr_in) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}

/// A response to `query` carrying `answers` (and `additional`), like an authoritative server.
func response(
    to query: Message, rcode: RCode = .noError, answers: [ResourceRecord] = [], authority: [ResourceRecord] = [],
    additional: [ResourceRecord] = [], truncated: Bool = false
) -> Message {
    Message(
        id: query.id, isResponse: true, authoritative: true, truncated: truncated,
        recursionDesired: query.recursionDesired, rcode: rcode, questions: query.questions, answers: answers,
        authority: authority, additional: additional, edns: query.edns.map { _ in EDNS(udpPayloadSize: 1232) })
}

/// NODATA as a DNS-SD zone gives it: NOERROR, the zone's SOA in the authority section.
func noData(to query: Message, zone: DNSName) -> Message {
    let soa = RData.SOA(
        mname: zone, rname: zone, serial: 0, refresh: 7200, retry: 3600, expire: 86400, minimum: 10)
    return response(to: query, authority: [ResourceRecord(name: zone, type: .soa, ttl: 10, rdata: .soa(soa))])
}
