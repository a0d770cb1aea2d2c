import DNSWire
@_spi(Testing) import DiscoveryProxy
import ProxyTestSupport
import Testing

/// What outside checkers (dig, zonemaster, dnsviz, EDNS compliance testers) look at first.
@Suite("Protocol conformance: the DO bit and zone transfers")
struct ProtocolConformanceTests {
    @Test("RFC 3225 §3: the DO bit of the query is copied into the response, on every kind of answer")
    func doBitCopied() throws {
        let h = Harness.warmed(with: try DNSName("P._ipp._tcp.local."))
        let withDO = EDNS(udpPayloadSize: 1232, dnssecOK: true)
        for (name, type) in [
            ("lab1.example.", RRType.soa),  // immediate
            ("_ipp._tcp.lab1.example.", .ptr),  // cache hit
            ("printer.example.org.", .a),  // refused
        ] {
            let reply = try #require(h.ask(name, type, edns: withDO).message)
            #expect(reply.edns?.dnssecOK == true, "\(name) \(type)")
            #expect(h.ask(name, type, edns: EDNS(udpPayloadSize: 1232)).message?.edns?.dnssecOK == false)
        }
        let miss = h.ask("_http._tcp.lab1.example.", .ptr, edns: withDO)
        h.clock.advance(by: .seconds(1))
        #expect(miss.message?.edns?.dnssecOK == true, "answered from mDNS")
        #expect(h.ask("lab1.example.", .soa, edns: nil).message?.edns == nil, "no OPT without one in the query")
    }

    @Test(
        "RFC 5936 §2.2.1: AXFR and IXFR are refused in one message, at once, over UDP and TCP; no mDNS",
        arguments: [RRType.axfr, .ixfr], [false, true])
    func transfersRefused(_ type: RRType, _ tcp: Bool) throws {
        let h = Harness()
        for name in ["lab1.example.", "2.0.192.in-addr.arpa.", "_ipp._tcp.lab1.example."] {
            let reply = h.ask(name, type, tcp: tcp)
            #expect(reply.calls == 1, "answered synchronously, once")
            let message = try #require(reply.message)
            #expect(message.rcode == .refused && message.answers.isEmpty && message.authority.isEmpty, "\(name)")
        }
        #expect(h.backend.started.isEmpty)
        #expect(h.proxy.stats.refused == 3)
    }
}
