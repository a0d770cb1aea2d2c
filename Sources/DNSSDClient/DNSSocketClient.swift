import DNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Blocking DNS exchanges over POSIX sockets, for a command-line client.
///
/// - UDP: one connected socket (so an ICMP port unreachable comes back as "connection
///   refused"); every question is sent at once with its own ID and retransmitted after
///   `retryInterval`, doubling, until `timeout` has passed since the first send.
/// - TCP (RFC 7766): one connection, each message behind a 2-byte length, all queries
///   pipelined, answers matched by ID.
/// - A UDP answer with TC=1 is asked again over TCP (RFC 1035 §4.2.1).
///
/// Answers are matched on ID, QR and question; anything else is ignored.
public struct DNSSocketClient: Sendable {
    public var server: ServerAddress
    /// Total time allowed for one exchange (per transport), in seconds.
    public var timeout: Double
    /// Use TCP from the start.
    public var tcpOnly: Bool
    /// First UDP retransmission interval in seconds; doubles after each retransmission.
    public var retryInterval: Double
    /// Advertised EDNS(0) UDP payload size (RFC 6891).
    public var udpPayloadSize: UInt16

    public init(
        server: ServerAddress, timeout: Double = 8, tcpOnly: Bool = false, retryInterval: Double = 2,
        udpPayloadSize: UInt16 = 1232
    ) {
        self.server = server
        self.timeout = timeout
        self.tcpOnly = tcpOnly
        self.retryInterval = retryInterval
        self.udpPayloadSize = udpPayloadSize
    }

    /// Asks every question (concurrently) and returns the responses in the same order.
    public func query(_ questions: [Question]) throws(DNSSDError) -> [Message] {
        var queries: [Message] = []
        var usedIDs: Set<UInt16> = []
        for question in questions {
            var id = UInt16.random(in: 0...UInt16.max)
            while !usedIDs.insert(id).inserted { id = UInt16.random(in: 0...UInt16.max) }
            queries.append(
                Message(
                    id: id, recursionDesired: true, questions: [question],
                    edns: EDNS(udpPayloadSize: self.udpPayloadSize)))
        }
        if self.tcpOnly { return try self.exchangeTCP(queries) }
        var answers = try self.exchangeUDP(queries)
        let truncated = answers.indices.filter { answers[$0].truncated }
        if !truncated.isEmpty {
            let again = try self.exchangeTCP(truncated.map { queries[$0] })
            for (slot, answer) in zip(truncated, again) { answers[slot] = answer }
        }
        return answers
    }

    /// Asks one question.
    public func query(_ question: Question) throws(DNSSDError) -> Message {
        try self.query([question])[0]
    }

    // MARK: UDP

    func exchangeUDP(_ queries: [Message]) throws(DNSSDError) -> [Message] {
        let wires = try queries.map { (query) throws(DNSSDError) in try self.encode(query) }
        let socket = try Socket(server: self.server, stream: false)
        defer { socket.close() }
        try socket.connect(deadline: Clock.now + self.timeout, timeout: self.timeout, transport: "UDP")
        var answers = [Message?](repeating: nil, count: queries.count)
        let start = Clock.now
        let deadline = start + self.timeout
        var interval = self.retryInterval
        var nextSend = start
        var buffer = [UInt8](repeating: 0, count: 65535)
        while answers.contains(where: { $0 == nil }) {
            let now = Clock.now
            if now >= deadline {
                throw .timeout(server: self.server.description, seconds: self.timeout, transport: "UDP")
            }
            if now >= nextSend {
                for index in queries.indices where answers[index] == nil {
                    try socket.send(wires[index], transport: "UDP")
                }
                nextSend = now + interval
                interval *= 2
            }
            guard try socket.waitReadable(until: min(deadline, nextSend)) else { continue }
            guard let count = try socket.receive(into: &buffer, transport: "UDP") else { continue }
            guard let message = try? Message(wire: Array(buffer[0..<count])) else { continue }
            if let index = Self.match(message, queries), answers[index] == nil { answers[index] = message }
        }
        return answers.map { $0! }
    }

    // MARK: TCP

    func exchangeTCP(_ queries: [Message]) throws(DNSSDError) -> [Message] {
        let deadline = Clock.now + self.timeout
        let socket = try Socket(server: self.server, stream: true)
        defer { socket.close() }
        try socket.connect(deadline: deadline, timeout: self.timeout, transport: "TCP")
        var out: [UInt8] = []
        for query in queries {
            let wire = try self.encode(query)
            out += [UInt8(wire.count >> 8), UInt8(wire.count & 0xFF)] + wire
        }
        try socket.sendAll(out, deadline: deadline, timeout: self.timeout)
        var answers = [Message?](repeating: nil, count: queries.count)
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65535)
        while answers.contains(where: { $0 == nil }) {
            guard try socket.waitReadable(until: deadline) else {
                throw .timeout(server: self.server.description, seconds: self.timeout, transport: "TCP")
            }
            guard let count = try socket.receive(into: &buffer, transport: "TCP") else { continue }
            if count == 0 {
                throw .badResponse(server: self.server.description, reason: "TCP connection closed before the answer")
            }
            pending += buffer[0..<count]
            while pending.count >= 2 {
                let length = Int(pending[0]) << 8 | Int(pending[1])
                guard pending.count >= 2 + length else { break }
                let wire = Array(pending[2..<2 + length])
                pending.removeFirst(2 + length)
                guard let message = try? Message(wire: wire) else {
                    throw .badResponse(server: self.server.description, reason: "undecodable DNS message over TCP")
                }
                if let index = Self.match(message, queries) { answers[index] = message }
            }
        }
        return answers.map { $0! }
    }

    func encode(_ query: Message) throws(DNSSDError) -> [UInt8] {
        do {
            return try query.encode()
        } catch {
            throw .system("cannot encode the query: \(error)")
        }
    }

    /// Index of the query `message` answers, if any.
    static func match(_ message: Message, _ queries: [Message]) -> Int? {
        guard message.isResponse else { return nil }
        return queries.firstIndex { query in
            query.id == message.id && (message.questions.isEmpty || message.questions == query.questions)
        }
    }
}

/// Monotonic seconds.
enum Clock {
    static var now: Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A non-blocking socket file descriptor connected to one server; every wait goes through poll(2).
struct Socket {
    let fd: Int32
    let server: ServerAddress

    init(server: ServerAddress, stream: Bool) throws(DNSSDError) {
        self.server = server
        let family = server.family == .v4 ? AF_INET : AF_INET6
        #if canImport(Glibc)
        let type =
            Int32(stream ? SOCK_STREAM.rawValue : SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | Int32(SOCK_NONBLOCK.rawValue)
        #else
        let type = stream ? SOCK_STREAM : SOCK_DGRAM
        #endif
        let fd = socket(family, type, 0)
        guard fd >= 0 else { throw .system("socket: \(Self.errorText(errno))") }
        #if !canImport(Glibc)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        #endif
        self.fd = fd
    }

    func close() {
        #if canImport(Glibc)
        _ = Glibc.close(self.fd)
        #else
        _ = Darwin.close(self.fd)
        #endif
    }

    /// connect(2); for TCP waits until established or `deadline`.
    func connect(deadline: Double, timeout: Double, transport: String) throws(DNSSDError) {
        let result = self.server.withSockAddr { address, length in
            #if canImport(Glibc)
            Glibc.connect(self.fd, address, length)
            #else
            Darwin.connect(self.fd, address, length)
            #endif
        }
        if result == 0 { return }
        let code = errno
        guard code == EINPROGRESS else { throw self.mapError(code, transport: transport) }
        var descriptor = pollfd(fd: self.fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let remaining = deadline - Clock.now
            if remaining <= 0 {
                throw .timeout(server: self.server.description, seconds: timeout, transport: transport)
            }
            let ready = poll(&descriptor, 1, Int32(min(remaining * 1000 + 1, 1e9)))
            if ready < 0 && errno == EINTR { continue }
            if ready > 0 { break }
        }
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(self.fd, SOL_SOCKET, SO_ERROR, &error, &size)
        if error != 0 { throw self.mapError(error, transport: transport) }
    }

    func send(_ bytes: [UInt8], transport: String) throws(DNSSDError) {
        let sent = bytes.withUnsafeBytes { self.rawSend($0) }
        if sent < 0 && errno != EAGAIN { throw self.mapError(errno, transport: transport) }
    }

    private func rawSend(_ bytes: UnsafeRawBufferPointer) -> Int {
        #if canImport(Glibc)
        Glibc.send(self.fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        #else
        Darwin.send(self.fd, bytes.baseAddress, bytes.count, 0)
        #endif
    }

    func sendAll(_ bytes: [UInt8], deadline: Double, timeout: Double) throws(DNSSDError) {
        var offset = 0
        var descriptor = pollfd(fd: self.fd, events: Int16(POLLOUT), revents: 0)
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { self.rawSend($0) }
            if sent > 0 {
                offset += sent
                continue
            }
            let code = errno
            guard sent < 0, code == EAGAIN || code == EINTR else { throw self.mapError(code, transport: "TCP") }
            let remaining = deadline - Clock.now
            if remaining <= 0 { throw .timeout(server: self.server.description, seconds: timeout, transport: "TCP") }
            _ = poll(&descriptor, 1, Int32(min(remaining * 1000 + 1, 1e9)))
        }
    }

    /// Waits until readable; false when `until` passes first.
    func waitReadable(until: Double) throws(DNSSDError) -> Bool {
        var descriptor = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = until - Clock.now
            if remaining <= 0 { return false }
            let ready = poll(&descriptor, 1, Int32(min(remaining * 1000 + 1, 1e9)))
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { throw .system("poll: \(Self.errorText(errno))") }
        }
    }

    /// recv(2): bytes read (0 at end of stream), nil when nothing is there after all, or the error mapped.
    func receive(into buffer: inout [UInt8], transport: String) throws(DNSSDError) -> Int? {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if count >= 0 { return count }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN { return nil }
            throw self.mapError(code, transport: transport)
        }
    }

    func mapError(_ code: Int32, transport: String) -> DNSSDError {
        let name = self.server.description
        switch code {
        case ECONNREFUSED: return .connectionRefused(server: name, transport: transport)
        case ENETUNREACH: return .unreachable(server: name, reason: "network unreachable (no route to the server)")
        case EHOSTUNREACH: return .unreachable(server: name, reason: "host unreachable")
        case EADDRNOTAVAIL: return .unreachable(server: name, reason: "address not available here")
        case ECONNRESET: return .badResponse(server: name, reason: "connection reset over \(transport)")
        default: return .unreachable(server: name, reason: "\(transport): \(Self.errorText(code))")
        }
    }

    static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
