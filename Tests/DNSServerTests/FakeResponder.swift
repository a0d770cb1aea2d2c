import DNSWire
import Synchronization

@testable import DNSServer

/// Test queries are `[kind, tag, ...]`: `fast` is answered at once (inside `handle`), `silent` is
/// answered with nil at once, anything else waits for `complete(tag:)`. An answer is
/// `[0xAA] + query`.
final class FakeResponder: DNSResponder, Sendable {
    static let fast: UInt8 = 1
    static let slow: UInt8 = 2
    static let silent: UInt8 = 3

    private struct Pending {
        var query: [UInt8]
        var respond: @Sendable ([UInt8]?) -> Void
    }

    private struct State {
        var received: [(query: [UInt8], client: DNSClient)] = []
        var pending: [Pending] = []
    }

    private let state = Mutex(State())

    static func answer(for query: [UInt8]) -> [UInt8] {
        [0xAA] + query
    }

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        let respond: @Sendable ([UInt8]?) -> Void = { answer(DNSAnswer(bytes: $0)) }
        self.state.withLock { $0.received.append((query, client)) }
        switch query.first {
        case Self.fast?:
            respond(Self.answer(for: query))
        case Self.silent?:
            respond(nil)
        default:
            self.state.withLock { $0.pending.append(Pending(query: query, respond: respond)) }
        }
    }

    var receivedQueries: [[UInt8]] {
        self.state.withLock { $0.received.map(\.query) }
    }

    var receivedClients: [DNSClient] {
        self.state.withLock { $0.received.map(\.client) }
    }

    var pendingCount: Int {
        self.state.withLock { $0.pending.count }
    }

    /// Answers the waiting query with this tag (second byte); returns false if none waits.
    @discardableResult
    func complete(tag: UInt8, answer: [UInt8]? = nil) -> Bool {
        let pending: Pending? = self.state.withLock { state in
            guard let index = state.pending.firstIndex(where: { $0.query.count > 1 && $0.query[1] == tag }) else {
                return nil
            }
            return state.pending.remove(at: index)
        }
        guard let pending else { return false }
        pending.respond(answer ?? Self.answer(for: pending.query))
        return true
    }

    /// Answers the oldest waiting query.
    @discardableResult
    func completeOldest() -> Bool {
        let pending: Pending? = self.state.withLock { $0.pending.isEmpty ? nil : $0.pending.removeFirst() }
        guard let pending else { return false }
        pending.respond(Self.answer(for: pending.query))
        return true
    }
}

/// A 2-byte length prefix and the message.
func framed(_ message: [UInt8]) -> [UInt8] {
    [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
}

/// Splits a byte stream into length-prefixed messages; trailing partial bytes are ignored.
func unframe(_ bytes: [UInt8]) -> [[UInt8]] {
    var messages: [[UInt8]] = []
    var index = 0
    while index + 2 <= bytes.count {
        let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
        guard index + 2 + length <= bytes.count else { break }
        messages.append(Array(bytes[(index + 2)..<(index + 2 + length)]))
        index += 2 + length
    }
    return messages
}
