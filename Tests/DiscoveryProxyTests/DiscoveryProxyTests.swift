import DNSWire
@_spi(Testing) import DiscoveryProxy
import MDNS
import ProxyTestSupport
import Testing

@Suite("DiscoveryProxy: answering from mDNS (RFC 8766 §5.5, §5.6)")
struct DiscoveryProxyTests {
    let instance = try! DNSName(labels: [
        Array("My Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8), Array("local".utf8),
    ])

    @Test("a miss starts one mDNS query and is answered at the first result, rewritten into the zone")
    func missThenAnswer() throws {
        let h = Harness()
        let reply = h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(!reply.isAnswered)
        #expect(
            h.backend.started == [MDNSQuestion(interface: "eth1", name: try DNSName("_ipp._tcp.local."), type: .ptr)])
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        #expect(!reply.isAnswered, "waits for the collection window")
        h.clock.advance(by: .milliseconds(50))
        let message = try #require(reply.message)
        #expect(message.rcode == .noError)
        #expect(message.authoritative)
        #expect(message.id == 42)
        #expect(message.answers.count == 1)
        let expected = try DNSName(labels: [Array("My Printer".utf8)] + (try DNSName("_ipp._tcp.lab1.example.")).labels)
        #expect(message.answers[0].rdata == .ptr(expected))
        #expect(message.answers[0].ttl <= 10)
        #expect(message.answers[0].rrClass == .in)
        #expect(reply.calls == 1)
    }

    @Test("a waiting browse holds one timer, moved to the window's end by the first result and gone once answered")
    func oneTimerPerWaitingBrowse() throws {
        let h = Harness()
        let idle = h.clock.pendingTimers  // the sweep's
        let first = h.ask("_ipp._tcp.lab1.example.", .ptr)
        let second = h.ask("_ipp._tcp.lab1.example.", .ptr, id: 43)
        #expect(h.clock.pendingTimers == idle + 1, "one timer for the browse, not one per query")
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        #expect(h.clock.pendingTimers == idle + 1, "the negative deadline's timer replaced by the window's")
        h.clock.advance(by: .milliseconds(50))
        #expect(first.message?.answers.count == 1 && second.message?.answers.count == 1)
        #expect(h.clock.pendingTimers == idle)
        // Answered at once by "all for now": the timer is cancelled, not left to fire.
        let other = h.ask("_http._tcp.lab1.example.", .ptr)
        #expect(h.clock.pendingTimers == idle + 1)
        h.backend.add("_http._tcp.local.", .ptr, .ptr(try DNSName("Web._http._tcp.local.")))
        h.backend.emit(.allForNow, name: "_http._tcp.local.", type: .ptr)
        #expect(other.message?.answers.count == 1 && h.clock.pendingTimers == idle)
    }

    @Test("a repeat is a cache hit: answered at once, no new mDNS query (§5.6)")
    func cacheHit() throws {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(50))
        let again = h.ask("_ipp._tcp.lab1.example.", .ptr, id: 7)
        #expect(again.isAnswered)
        #expect(again.message?.id == 7)
        #expect(again.message?.answers.count == 1)
        #expect(h.backend.started.count == 1)
        #expect(h.proxy.stats.cacheHits == 1)
    }

    @Test("allForNow with results answers without waiting for the window")
    func allForNowFlushes() throws {
        let h = Harness()
        let reply = h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.backend.emit(.allForNow, name: "_ipp._tcp.local.", type: .ptr)
        #expect(reply.message?.answers.count == 1)
    }

    /// The SOA of a negative answer: its negative-caching time (RFC 2308 §5) and owner.
    func negativeTTL(_ message: Message) throws -> UInt32 {
        #expect(message.rcode == .noError)
        #expect(message.answers.isEmpty)
        #expect(message.authority.count == 1)
        #expect(message.authority.first?.name == (try DNSName("lab1.example.")))
        guard let soa = message.authority.first, case .soa(let values) = soa.rdata else {
            Issue.record("expected SOA in authority")
            return 0
        }
        return min(values.minimum, soa.ttl)
    }

    @Test("nothing found: NOERROR, no answers, SOA after the 0.8 s negative timeout, cached 2 s; never NXDOMAIN")
    func negativeAfterTimeout() throws {
        let h = Harness()
        let reply = h.ask("nosuch._ipp._tcp.lab1.example.", .txt)
        h.clock.advance(by: .milliseconds(700))
        #expect(!reply.isAnswered)
        h.clock.advance(by: .milliseconds(100))
        // Early, before mDNS has had its 6 s (RFC 8766 §5.6): a short negative-caching time.
        #expect(try negativeTTL(try #require(reply.message)) == 2)
        // A repeat now is a known negative: answered at once.
        #expect(h.ask("nosuch._ipp._tcp.lab1.example.", .txt).isAnswered)
        // After 6 s of mDNS queries "nothing" is final: MINIMUM 10, TTL ≤ 10 (§5.5.1, §6.1).
        h.clock.advance(by: .seconds(6))
        let settled = h.ask("nosuch._ipp._tcp.lab1.example.", .txt, id: 9)
        #expect(try negativeTTL(try #require(settled.message)) == 10)
        #expect(h.backend.started.count == 1)
    }

    @Test("after an early negative the mDNS query runs on: a slow responder is in the next answer")
    func slowResponderAfterEarlyNegative() throws {
        let h = Harness()
        let first = h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.clock.advance(by: .milliseconds(800))
        #expect(first.message?.answers.isEmpty == true)
        #expect(h.backend.live.count == 1, "the browse is not cancelled by the answer")
        h.clock.advance(by: .milliseconds(1200))
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))  // the responder's answer at 2 s
        let second = h.ask("_ipp._tcp.lab1.example.", .ptr, id: 2)
        #expect(second.message?.answers.count == 1)
        #expect(h.backend.started.count == 1)
    }

    @Test("negative-timeout 6 keeps RFC 8766 §5.6's wait, and its negative is final")
    func rfcNegativeTimeout() throws {
        let h = Harness { $0.negativeTimeout = .seconds(6) }
        let reply = h.ask("nosuch._ipp._tcp.lab1.example.", .txt)
        h.clock.advance(by: .milliseconds(5900))
        #expect(!reply.isAnswered)
        h.clock.advance(by: .milliseconds(200))
        #expect(try negativeTTL(try #require(reply.message)) == 10)
    }

    @Test("with the mDNS daemon away, a miss ends in SERVFAIL, not a cacheable negative")
    func daemonAway() throws {
        let h = Harness()
        h.backend.state = .connecting
        let reply = h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.clock.advance(by: .seconds(6))
        #expect(reply.message?.rcode == .servFail)
        h.backend.state = .running
        let later = h.ask("_ipp._tcp.lab1.example.", .txt)
        h.clock.advance(by: .seconds(6))
        #expect(later.message?.rcode == .noError)
    }

    @Test("a second client joining a pending browse shares the mDNS query and the first deadline")
    func joinPending() throws {
        let h = Harness()
        let first = h.ask("_ipp._tcp.lab1.example.", .ptr, id: 1)
        h.clock.advance(by: .milliseconds(500))
        let second = h.ask("_ipp._tcp.lab1.example.", .ptr, id: 2)
        #expect(h.backend.started.count == 1)
        h.clock.advance(by: .milliseconds(300))
        #expect(first.isAnswered)
        #expect(second.isAnswered, "the browse has run its negative timeout: its negative covers the joiner too")
    }

    @Test("TXT is byte-exact and an empty TXT becomes one zero byte (RFC 6763 §6.1)")
    func txtBytes() throws {
        let h = Harness()
        let txt: [UInt8] = [3, 0x61, 0x3D, 0x62, 4, 0x00, 0xFF, 0x3D, 0x3D, 0]
        let name = "x._ipp._tcp.local."
        let full = h.ask("x._ipp._tcp.lab1.example.", .txt)
        h.backend.add(name, .txt, .txt(txt))
        h.clock.advance(by: .milliseconds(50))
        #expect(full.message?.answers.map(\.rdata) == [.txt(txt)])

        let empty = h.ask("y._ipp._tcp.lab1.example.", .txt)
        h.backend.emit(
            .added(MDNSRecord(name: try DNSName("y._ipp._tcp.local."), type: .txt, rdata: [])),
            name: "y._ipp._tcp.local.", type: .txt)
        h.clock.advance(by: .milliseconds(50))
        #expect(empty.message?.answers.map(\.rdata) == [.txt([0])])
    }

    @Test("SRV targets are rewritten; names outside .local are left alone (§5.5)")
    func srvRewrite() throws {
        let h = Harness()
        let reply = h.ask("x._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.clock.advance(by: .milliseconds(50))
        #expect(
            reply.message?.answers.map(\.rdata) == [
                .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.lab1.example."))
            ])

        let cname = h.ask("alias.lab1.example.", .cname)
        h.backend.add("alias.local.", .cname, .cname(try DNSName("www.example.org.")))
        h.clock.advance(by: .milliseconds(50))
        #expect(cname.message?.answers.map(\.rdata) == [.cname(try DNSName("www.example.org."))])
    }

    @Test("a .local RDATA name too long for the zone drops the record, never leaks .local (§5.5)")
    func rdataNameTooLongForZone() throws {
        // 250 octets under local. are 257 under lab1.example.: over RFC 1035's 255.
        let long = [[UInt8]](
            arrayLiteral: Array(repeating: 0x61, count: 63), Array(repeating: 0x62, count: 63),
            Array(repeating: 0x63, count: 63), Array(repeating: 0x64, count: 39))
        let target = try DNSName(labels: long + [Array("_long".utf8), Array("_tcp".utf8), Array("local".utf8)])
        let h = Harness()
        let reply = h.ask("_long._tcp.lab1.example.", .ptr)
        h.backend.add("_long._tcp.local.", .ptr, .ptr(target))
        h.backend.add("_long._tcp.local.", .ptr, .ptr(try DNSName("Short._long._tcp.local.")))
        h.clock.advance(by: .milliseconds(50))
        #expect(reply.message?.answers.map(\.rdata) == [.ptr(try DNSName("Short._long._tcp.lab1.example."))])
    }

    @Test("link-local addresses are suppressed by default and shown when the option is off (§5.5.2)")
    func linkLocal() throws {
        for suppress in [true, false] {
            let h = Harness { $0.suppressLinkLocal = suppress }
            let a = h.ask("host.lab1.example.", .a)
            h.backend.add("host.local.", .a, .a([169, 254, 3, 4]))
            h.backend.add("host.local.", .a, .a([192, 0, 2, 9]))
            h.clock.advance(by: .milliseconds(50))
            let aaaa = h.ask("host.lab1.example.", .aaaa)
            h.backend.add("host.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fe80::1")!))
            h.backend.add("host.local.", .aaaa, .aaaa(IPPrefix.parseAddress("2001:db8:1::9")!))
            h.clock.advance(by: .milliseconds(50))
            #expect(a.message?.answers.count == (suppress ? 1 : 2))
            #expect(aaaa.message?.answers.count == (suppress ? 1 : 2))
            if suppress {
                #expect(a.message?.answers.first?.rdata == .a([192, 0, 2, 9]))
            }
        }
    }

    @Test("a PTR answer carries known SRV, TXT and addresses as additionals (RFC 6763 §12)")
    func additionals() throws {
        let h = Harness()
        h.ask("x._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.ask("x._ipp._tcp.lab1.example.", .txt)
        h.backend.add("x._ipp._tcp.local.", .txt, .txt([3, 0x61, 0x3D, 0x62]))
        h.ask("prnt.lab1.example.", .a)
        h.backend.add("prnt.local.", .a, .a([192, 0, 2, 20]))
        h.clock.advance(by: .milliseconds(50))

        let browse = h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("x._ipp._tcp.local.")))
        h.clock.advance(by: .milliseconds(50))
        let message = try #require(browse.message)
        #expect(message.additional.map(\.type) == [.srv, .txt, .a])
        #expect(message.additional.allSatisfy { $0.ttl <= 10 })
        #expect(message.additional[0].name == (try DNSName("x._ipp._tcp.lab1.example.")))
        #expect(message.additional[2].name == (try DNSName("prnt.lab1.example.")))

        // An SRV answer carries the target's addresses.
        let srv = h.ask("x._ipp._tcp.lab1.example.", .srv)
        #expect(srv.message?.additional.map(\.type) == [.a])
    }

    @Test("a removed record is gone from the next answer")
    func removal() throws {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(50))
        h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(instance))
        let after = h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(after.isAnswered)
        #expect(after.message?.answers.isEmpty == true)
    }

    @Test("links are isolated: a result on eth2 never shows in lab1 (§5.1)")
    func isolation() throws {
        let h = Harness()
        let one = h.ask("_ipp._tcp.lab1.example.", .ptr)
        let two = h.ask("_ipp._tcp.lab2.example.", .ptr)
        #expect(Set(h.backend.started.map(\.interface)) == ["eth1", "eth2"])
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance), interface: "eth2")
        h.clock.advance(by: .milliseconds(50))
        #expect(!one.isAnswered)
        #expect(two.message?.answers.count == 1)
        h.clock.advance(by: .seconds(6))
        #expect(one.message?.answers.isEmpty == true)
    }

    @Test("idle browses are released and their mDNS query cancelled")
    func idleRelease() throws {
        let h = Harness { $0.browseIdleTimeout = .seconds(20) }
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .seconds(10))
        #expect(h.backend.live.count == 1)
        h.clock.advance(by: .seconds(30))
        #expect(h.backend.live.isEmpty)
        #expect(h.proxy.stats.activeBrowses == 0)
        // The next query starts over.
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(h.backend.started.count == 2)
    }

    @Test("mDNS queries are rate limited per link (§9.3)")
    func rateLimit() throws {
        let h = Harness {
            $0.mdnsQueriesPerSecond = 10
            $0.mdnsQueryBurst = 5
        }
        var replies: [Harness.Reply] = []
        for i in 0..<100 { replies.append(h.ask("n\(i).lab1.example.", .a)) }
        #expect(h.backend.started.count == 5, "only the burst starts at once")
        let refused = replies.filter { $0.message?.rcode == .servFail }.count
        #expect(refused > 0, "what cannot start within the negative timeout is refused at once")
        h.clock.advance(by: .seconds(1))
        #expect(h.backend.started.count <= 16)
        // Another link has its own budget.
        h.ask("n.lab2.example.", .a)
        #expect(h.backend.started.contains { $0.interface == "eth2" })
    }

    @Test("a failed daemon drops what it had; restarted browses fill again")
    func daemonRestart() throws {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(50))
        h.backend.emit(.failed("daemon gone"), name: "_ipp._tcp.local.", type: .ptr)
        let during = h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(!during.isAnswered, "stale data is not served; the query waits")
        h.backend.emit(.restarted, name: "_ipp._tcp.local.", type: .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(50))
        #expect(during.message?.answers.count == 1)
    }
}

@Suite("DiscoveryProxy: protocol edges (RFC 1035, 6891, 2181)")
struct ProtocolEdgeTests {
    @Test("refused outside the zones, with no recursion and no mDNS")
    func refused() throws {
        let h = Harness()
        let message = try #require(h.ask("www.example.org.", .a).message)
        #expect(message.rcode == .refused)
        #expect(!message.recursionAvailable)
        #expect(h.backend.started.isEmpty)
    }

    @Test("OPT is echoed only when the query had one (RFC 6891 §7)")
    func optEcho() throws {
        let h = Harness()
        #expect(h.ask("lab1.example.", .soa).message?.edns != nil)
        #expect(h.ask("lab1.example.", .soa, edns: nil).message?.edns == nil)
    }

    @Test("EDNS version 1 gets BADVERS with an OPT at version 0 (RFC 6891 §6.1.3)")
    func badVers() throws {
        let h = Harness()
        let message = try #require(h.ask("lab1.example.", .soa, edns: EDNS(udpPayloadSize: 1232, version: 1)).message)
        #expect(message.rcode == .badVers)
        #expect(message.edns?.version == 0)
    }

    @Test("a UDP answer that does not fit sets TC; over TCP everything comes (RFC 2181 §9)")
    func truncation() throws {
        let h = Harness()
        let pending = h.ask("_bulk._tcp.lab1.example.", .ptr, edns: nil)
        for i in 0..<80 {
            let name = try DNSName(labels: [
                Array("Instance number \(i) with a long name".utf8), Array("_bulk".utf8), Array("_tcp".utf8),
                Array("local".utf8),
            ])
            h.backend.add("_bulk._tcp.local.", .ptr, .ptr(name))
        }
        h.clock.advance(by: .milliseconds(50))
        let udp = try #require(pending.message)
        #expect(udp.truncated)
        #expect(try #require(pending.bytes).count <= 512)
        let big = try #require(h.ask("_bulk._tcp.lab1.example.", .ptr, edns: EDNS(udpPayloadSize: 100)).bytes)
        #expect(big.count <= 512, "a payload below 512 counts as 512")
        let tcp = try #require(h.ask("_bulk._tcp.lab1.example.", .ptr, tcp: true).message)
        #expect(!tcp.truncated)
        #expect(tcp.answers.count == 80)
    }

    @Test("malformed input: FORMERR with a readable header, dropped without one, responses dropped")
    func malformed() throws {
        let h = Harness()
        #expect(h.send([1, 2, 3]).calls == 1)
        #expect(h.send([1, 2, 3]).bytes == nil)
        // A header claiming one question with nothing behind it.
        let formErr = try #require(h.send([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]).message)
        #expect(formErr.rcode == .formErr)
        #expect(formErr.id == 0x1234)
        // QR set: never answered (no reflection).
        #expect(h.send([0x12, 0x34, 0x81, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]).bytes == nil)
    }

    @Test("opcode other than QUERY gets NOTIMP; QDCOUNT 0 or 2 gets FORMERR")
    func opcodeAndCounts() throws {
        let h = Harness()
        var notify = Message(
            id: 9, opcode: Opcode(rawValue: 4), questions: [Question(name: try DNSName("lab1.example."), type: .soa)])
        #expect(h.send(try notify.encode()).message?.rcode == .notImp)
        notify.opcode = .query
        notify.questions.append(Question(name: try DNSName("lab2.example."), type: .soa))
        #expect(h.send(try notify.encode()).message?.rcode == .formErr)
        notify.questions = []
        #expect(h.send(try notify.encode()).message?.rcode == .formErr)
    }

    @Test("apex and metadata answers never touch mDNS")
    func immediateNeverMulticast() throws {
        let h = Harness()
        #expect(h.ask("lab1.example.", .soa).message?.answers.count == 1)
        #expect(h.ask("lab1.example.", .ns).message?.answers.count == 1)
        #expect(h.ask("_dns-update._udp.lab1.example.", .srv).message?.answers.isEmpty == true)
        #expect(h.ask("b._dns-sd._udp.lab1.example.", .ptr).message?.answers.count == 2)
        #expect(h.backend.started.isEmpty)
    }
}
