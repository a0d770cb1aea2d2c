// (c) The DNS-over-TCP front end (RFC 7766) as the server builds it: `DNSServer.addTCPHandlers`
// (NIOExtras 2-octet length framing both ways + TCPDNSHandler) on an EmbeddedChannel, with a
// scripted responder. Only the pipeline builder and the public `DNSResponder` protocol are
// used, so the harness survives changes inside TCPDNSHandler.
//
// Input layout: [control] [k] [k chunk sizes] [TCP byte stream...]
// - control bits 0-1: in-flight cap 1, 2, 3 or the default; bit 2: the client half-closes
//   after the stream; bit 3: one deferred answer completes after every chunk; bit 4: the
//   deferred answers left at the end complete newest first.
// - the stream is written in chunks of (size + 1) octets, cycling through the k sizes (k < 16;
//   k = 0 writes it at once), so frames and length prefixes are cut everywhere; the 48th
//   chunk takes the rest.
// - the first payload octet of each frame scripts the responder: 0, 1 answer at once, 2 later,
//   3 with nil (no answer). A second octet of 0xFE asks for a 65535-octet answer (the largest
//   that fits a frame), 0xFF for 65536 (must be dropped, not framed).
//
// Invariants: the responder gets exactly the complete non-empty frames, in stream order (a
// zero-length message is dropped, a trailing partial frame is never handed on); the client
// reads exactly the answers in the order they completed, each framed whole; nothing closes the
// connection early (a 2-octet prefix cannot exceed the 65535-octet DNS maximum, so no prefix is
// oversize); after a half-close the connection closes once everything is answered, otherwise
// it closes after the idle timeout; afterwards no connection is counted open.

// `@testable` needs a module compiled for testing: debug builds only (scripts/fuzz.sh builds
// debug). `swift build -c release` still builds this executable, without the tcp harness.
#if DEBUG
@testable import DNSServer
import DNSWire
import NIOCore
import NIOEmbedded
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

enum TCPHarness {
    static let maxChunks = 48

    static func run(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        let control = bytes[0]
        let cuts = Array(bytes.dropFirst(2).prefix(Int(bytes[1] % 16)))
        let stream = Array(bytes.dropFirst(2 + cuts.count))

        var configuration = DNSServerConfiguration()
        let caps = [1, 2, 3, configuration.maxInFlightPerConnection]
        configuration.maxInFlightPerConnection = caps[Int(control & 3)]
        let halfClose = control & 4 != 0
        let completeAsWeGo = control & 8 != 0
        let newestFirst = control & 16 != 0

        let responder = ScriptedResponder()
        let counters = DNSServerCounters()
        let registry = TCPConnectionRegistry(
            maxTotal: configuration.maxTCPConnections, maxPerClient: configuration.maxTCPConnectionsPerClient)
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        do {
            try DNSServer.addTCPHandlers(
                to: channel.pipeline.syncOperations, responder: responder, counters: counters,
                registry: registry, configuration: configuration)
            try channel.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 40000)).wait()
        } catch {
            fatalError("cannot set up the TCP pipeline: \(error)")
        }

        // ByteBuffer and memcmp, not [UInt8] loops: this module is built without optimisation
        // and with ASan, and answers can be 64 KiB.
        var output = channel.allocator.buffer(capacity: 0)
        func step() {
            channel.embeddedEventLoop.run()
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) {
                output.writeImmutableBuffer(buffer)
            }
        }

        var offset = 0
        var cutIndex = 0
        while offset < stream.count {
            // At most `maxChunks` writes (each costs a pass through the unoptimised, instrumented
            // pipeline); the rest of the stream goes in the last one.
            let size =
                cuts.isEmpty || cutIndex == Self.maxChunks - 1 ? stream.count : Int(cuts[cutIndex % cuts.count]) + 1
            cutIndex += 1
            let chunk = stream[offset..<min(stream.count, offset + size)]
            offset += chunk.count
            guard channel.isActive else { fatalError("connection closed while the client was sending") }
            do {
                try channel.writeInbound(ByteBuffer(bytes: chunk))
            } catch {
                fatalError("pipeline error on a chunk: \(error)")
            }
            step()
            if completeAsWeGo { responder.completeOne(newestFirst: false) }
            step()
        }
        guard channel.isActive else { fatalError("connection closed before the end of the stream") }

        if halfClose {
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            step()
        }
        while responder.completeOne(newestFirst: newestFirst) { step() }
        step()

        let expected = Self.frames(in: stream).filter { !$0.isEmpty }
        let received = responder.received
        guard received == expected else {
            fatalError("responder got \(received.count) queries, the stream holds \(expected.count)")
        }
        let completed = responder.completedAnswers
        for (index, answer) in completed.enumerated() {
            guard let length = output.readInteger(as: UInt16.self), let body = output.readSlice(length: Int(length))
            else {
                fatalError("client read \(index) answers, \(completed.count) completed")
            }
            guard ScriptedResponder.matches(body, answer) else {
                fatalError("answer \(index) is not the one completed")
            }
        }
        guard output.readableBytes == 0 else { fatalError("more written than answered, or a partial frame") }

        if halfClose {
            guard !channel.isActive else { fatalError("still open after half-close with every query answered") }
        } else {
            guard channel.isActive else { fatalError("closed without half-close or idle timeout") }
            let idle = TimeAmount(configuration.tcpIdleTimeout) + .seconds(1)
            channel.embeddedEventLoop.advanceTime(by: idle)
            step()
            guard !channel.isActive else { fatalError("still open after the idle timeout") }
        }
        guard registry.count == 0, counters.snapshot().tcp.open == 0 else {
            fatalError("a closed connection is still counted open")
        }
    }

    /// The complete length-prefixed messages at the start of `bytes` (a partial tail is ignored).
    static func frames(in bytes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var i = 0
        while i + 2 <= bytes.count {
            let length = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            guard i + 2 + length <= bytes.count else { break }
            out.append(Array(bytes[(i + 2)..<(i + 2 + length)]))
            i += 2 + length
        }
        return out
    }
}

/// Answers as the first payload octet says; remembers every query and every completed answer.
final class ScriptedResponder: DNSResponder {
    private struct State {
        var received: [[UInt8]] = []
        var deferred: [(query: [UInt8], respond: @Sendable ([UInt8]?) -> Void)] = []
        /// Answers handed back, in order, that fit a TCP frame (larger ones must be dropped).
        var completedAnswers: [Answer] = []
    }

    private let state = Mutex(State())

    var received: [[UInt8]] { self.state.withLock { $0.received } }
    var completedAnswers: [Answer] { self.state.withLock { $0.completedAnswers } }

    /// An answer is 0xAA, the query, then 0x55 padding up to `length`.
    struct Answer {
        var query: [UInt8]
        var length: Int
    }

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        let respond: @Sendable ([UInt8]?) -> Void = { answer(DNSAnswer(bytes: $0)) }
        let deferred = self.state.withLock { state in
            state.received.append(query)
            if query.first.map({ $0 % 4 == 2 }) == true {
                state.deferred.append((query, respond))
                return true
            }
            return false
        }
        if !deferred { self.complete(query: query, respond: respond) }
    }

    /// Completes one deferred query; false when none is left.
    @discardableResult
    func completeOne(newestFirst: Bool) -> Bool {
        let next = self.state.withLock { state in
            state.deferred.isEmpty ? nil : (newestFirst ? state.deferred.removeLast() : state.deferred.removeFirst())
        }
        guard let next else { return false }
        self.complete(query: next.query, respond: next.respond)
        return true
    }

    private func complete(query: [UInt8], respond: @Sendable ([UInt8]?) -> Void) {
        guard query.first.map({ $0 % 4 == 3 }) != true else { return respond(nil) }
        var length = 1 + query.count
        if query.count >= 2, query[1] >= 0xFE {
            length = max(length, query[1] == 0xFE ? Int(UInt16.max) : Int(UInt16.max) + 1)
        }
        var answer = [UInt8](repeating: 0x55, count: length)
        answer[0] = 0xAA
        answer.withUnsafeMutableBytes { out in
            query.withUnsafeBytes {
                out.baseAddress!.advanced(by: 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
        }
        if length <= Int(UInt16.max) {
            self.state.withLock { $0.completedAnswers.append(Answer(query: query, length: length)) }
        }
        respond(answer)
    }

    /// Whether `body` is exactly the answer described (checked with memcmp/memchr-speed loops).
    static func matches(_ body: ByteBuffer, _ answer: Answer) -> Bool {
        guard body.readableBytes == answer.length else { return false }
        return body.withUnsafeReadableBytes { bytes in
            guard bytes[0] == 0xAA else { return false }
            let prefix = answer.query.withUnsafeBytes { q in
                memcmp(bytes.baseAddress! + 1, q.baseAddress!, q.count) == 0
            }
            let pad = 1 + answer.query.count
            return prefix && (pad == bytes.count || (bytes[pad] == 0x55 && bytes[bytes.count - 1] == 0x55))
        }
    }
}
#endif
