import DNSWire
import ProxyTestSupport
import Synchronization
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// RFC 7828 edns-tcp-keepalive in answers: the front end says which idle timeout the
/// connection has (`tcpIdleTimeout`); the proxy puts it in the answer to a TCP query that asked.
@Suite("edns-tcp-keepalive (RFC 7828)")
struct TCPKeepaliveTests {
    let printer = try! DNSName("x._ipp._tcp.local.")

    /// A query for `name`, with edns-tcp-keepalive when `asks` (OPTION-LENGTH 0, §3.2.1).
    func ask(
        _ h: Harness, _ name: String, _ type: RRType, tcp: Bool = true, asks: Bool = true,
        timeout: Duration? = .seconds(10), id: UInt16 = 7
    ) -> ProxyReplies {
        let replies = ProxyReplies()
        let options = asks ? [EDNS.Option(code: EDNS.Option.tcpKeepaliveCode, data: [])] : []
        let query = Message(
            id: id, questions: [Question(name: try! DNSName(name), type: type)],
            edns: EDNS(udpPayloadSize: 1232, options: options))
        h.proxy.handle(query: try! query.encode(), from: .test(tcp: tcp, idle: timeout)) { replies.add($0) }
        return replies
    }

    func keepalive(_ replies: ProxyReplies) -> [EDNS.Option] {
        (replies.message?.edns?.options ?? []).filter { $0.code == EDNS.Option.tcpKeepaliveCode }
    }

    @Test("a TCP query that asks gets the connection's idle timeout in units of 100 ms (§3.3.2)")
    func announcesTimeout() {
        let h = Harness.warmed(with: printer)
        #expect(keepalive(ask(h, "_ipp._tcp.lab1.example.", .ptr)) == [EDNS.Option(code: 11, data: [0, 100])])
        #expect(
            keepalive(ask(h, "lab1.example.", .soa, timeout: .milliseconds(2550))) == [
                EDNS.Option(code: 11, data: [0, 25])
            ])
        #expect(
            keepalive(ask(h, "_none._tcp.lab1.example.", .a)) == [EDNS.Option(code: 11, data: [0, 100])], "a NODATA too"
        )
    }

    @Test("zero when the front end wants the connection closed (§3.3.2)")
    func announcesZero() {
        let h = Harness()
        #expect(keepalive(ask(h, "lab1.example.", .soa, timeout: .zero)) == [EDNS.Option(code: 11, data: [0, 0])])
    }

    @Test("an mDNS miss answered later carries it too")
    func missCarriesIt() {
        let h = Harness()
        let replies = ask(h, "_ipp._tcp.lab1.example.", .ptr)
        #expect(replies.last == nil)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer))
        h.clock.advance(by: .seconds(1))
        #expect(keepalive(replies) == [EDNS.Option(code: 11, data: [0, 100])])
    }

    @Test("never over UDP, never unasked, never inside a DSO session (§3.3.1; RFC 8490 §7.1.2)")
    func onlyWhenAskedOverTCP() {
        let h = Harness.warmed(with: printer)
        #expect(keepalive(ask(h, "_ipp._tcp.lab1.example.", .ptr, tcp: false)).isEmpty, "UDP: the option is ignored")
        #expect(keepalive(ask(h, "_ipp._tcp.lab1.example.", .ptr, asks: false)).isEmpty)
        #expect(keepalive(ask(h, "_ipp._tcp.lab1.example.", .ptr, timeout: nil)).isEmpty, "nil: in a session")
        #expect(ask(h, "_ipp._tcp.lab1.example.", .ptr).message?.answers.count == 1, "the answer itself is unchanged")
    }

    @Test("such an answer is for this connection now: neither replayed nor shared")
    func notReplayedOrShared() throws {
        let h = Harness.warmed(with: printer)
        #expect(ask(h, "_ipp._tcp.lab1.example.", .ptr).last?.replay == nil)
        #expect(ask(h, "lab1.example.", .soa).last?.replay == nil)
        #expect(ask(h, "_ipp._tcp.lab1.example.", .ptr, asks: false).last?.replay != nil)
        // The same bytes with another timeout: each gets its own, not a memoized answer.
        _ = ask(h, "_ipp._tcp.lab1.example.", .ptr, timeout: .seconds(10))
        #expect(
            keepalive(ask(h, "_ipp._tcp.lab1.example.", .ptr, timeout: .zero)) == [EDNS.Option(code: 11, data: [0, 0])])
    }
}
