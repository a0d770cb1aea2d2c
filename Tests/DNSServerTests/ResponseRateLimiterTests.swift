@_spi(Testing) import DNSServer
import DNSWire
import Synchronization
import Testing

@Suite("UDP response rate limiting per client prefix")
struct ResponseRateLimiterTests {
    func limiter(rate: Int = 5, slip: Int = 2) -> ResponseRateLimiter {
        var limit = ResponseRateLimit()
        limit.responsesPerSecond = rate
        limit.slip = slip
        return ResponseRateLimiter(limit)
    }

    @Test("off by default: every answer is sent")
    func offByDefault() {
        let limiter = ResponseRateLimiter(ResponseRateLimit())
        #expect(!limiter.limit.isEnabled)
        for _ in 0..<1000 { #expect(limiter.decide(client: [192, 0, 2, 1], now: .zero) == .send) }
    }

    @Test("a /24 shares one bucket; beyond it every 2nd limited answer slips, the rest drop")
    func sharedPrefixAndSlip() {
        let limiter = limiter()
        var decisions: [RateLimitDecision] = []
        for host in 1...9 { decisions.append(limiter.decide(client: [192, 0, 2, UInt8(host)], now: .zero)) }
        #expect(decisions == [.send, .send, .send, .send, .send, .drop, .slip, .drop, .slip])
        #expect(limiter.decide(client: [198, 51, 100, 1], now: .zero) == .send, "another /24 has its own bucket")
        #expect(limiter.decide(client: [192, 0, 2, 1], now: .seconds(1)) == .send, "refilled at 5/s")
    }

    @Test("a reload's limit applies at once: on, stricter, off")
    func appliedLive() {
        let limiter = ResponseRateLimiter(ResponseRateLimit())
        #expect(limiter.decide(client: [192, 0, 2, 1], now: .zero) == .send)
        var limit = ResponseRateLimit()
        limit.responsesPerSecond = 2
        limit.slip = 0
        limiter.apply(limit)
        #expect(limiter.isEnabled)
        let decisions = (0..<4).map { _ in limiter.decide(client: [192, 0, 2, 1], now: .zero) }
        #expect(decisions == [.send, .send, .drop, .drop])
        limit.ipv4PrefixLength = 32
        limiter.apply(limit)
        #expect(limiter.decide(client: [192, 0, 2, 2], now: .zero) == .send, "a /32 of its own: new buckets")
        limiter.apply(ResponseRateLimit())
        #expect(!limiter.isEnabled && limiter.trackedPrefixes == 0)
        #expect((0..<10).allSatisfy { _ in limiter.decide(client: [192, 0, 2, 1], now: .zero) == .send })
    }

    @Test("IPv6 clients are grouped by /56")
    func ipv6Prefix() {
        let limiter = limiter(rate: 1, slip: 0)
        let a: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0x01, 0, 0x01] + [UInt8](repeating: 1, count: 8)
        var b = a
        b[7] = 0xff  // same /56 (first 7 bytes)
        var c = a
        c[6] = 0x02  // another /56
        #expect(limiter.decide(client: a, now: .zero) == .send)
        #expect(limiter.decide(client: b, now: .zero) == .drop)
        #expect(limiter.decide(client: c, now: .zero) == .send)
        #expect(limiter.prefix(of: a) == [0x20, 0x01, 0x0d, 0xb8, 0, 0x01, 0] + [UInt8](repeating: 0, count: 9))
    }

    @Test("the tracked prefixes stay bounded under a flood from many prefixes")
    func boundedTable() {
        var limit = ResponseRateLimit()
        limit.responsesPerSecond = 10
        limit.maxTrackedPrefixes = 100
        let limiter = ResponseRateLimiter(limit)
        for index in 0..<10_000 {
            _ = limiter.decide(
                client: [10, UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF), 1], now: .milliseconds(index))
        }
        #expect(limiter.trackedPrefixes <= 100)
    }

    @Test("a slip is the header with TC set, no records, and the question")
    func truncatedReply() throws {
        // ID 0x1234, QR AA, RCODE 0, QD 1 AN 1, question a.example. A IN, then one answer byte run.
        let question: [UInt8] = [1, 0x61, 7] + Array("example".utf8) + [0, 0, 1, 0, 1]
        let answer: [UInt8] =
            [0x12, 0x34, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 1] + question + [
                0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 192, 0, 2, 1,
            ]
        let reply = try #require(ResponseRateLimiter.truncatedReply(to: answer))
        #expect(reply == [0x12, 0x34, 0x86, 0x00, 0, 1, 0, 0, 0, 0, 0, 0] + question)
        #expect(ResponseRateLimiter.truncatedReply(to: [1, 2, 3]) == nil)
    }

    @Test("the responder wrapper limits UDP only and counts drops and slips")
    func wrapper() {
        let responder = RateLimitedResponder(FakeResponder(), limiter: limiter(rate: 2, slip: 2))
        let sent = Mutex<[[UInt8]?]>([])
        for transport in [DNSTransport.tcp, .udp] {
            for _ in 0..<6 {
                let header: [UInt8] = [FakeResponder.fast, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
                responder.handle(
                    query: header, from: DNSClient(address: [192, 0, 2, 7], port: 5353, transport: transport)
                ) {
                    answer in sent.withLock { $0.append(answer.bytes) }
                }
            }
        }
        let answers = sent.withLock { $0 }
        #expect(answers.prefix(6).allSatisfy { $0 != nil }, "TCP is never limited")
        #expect(answers.suffix(6).filter { $0 == nil }.count == 2)
        #expect(responder.limited == 2)
        #expect(responder.slipped == 2)
    }
}
