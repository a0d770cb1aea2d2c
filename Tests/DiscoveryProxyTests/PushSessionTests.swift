import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

/// Collects what a session sends, as the DNSServer connection would.
final class FakeTransport: PushTransport {
    private let box = Mutex<(sent: [[UInt8]], closed: Bool?, grace: Duration?)>(([], nil, nil))
    func send(_ message: [UInt8]) { box.withLock { $0.sent.append(message) } }
    func close(abort: Bool) { box.withLock { $0.closed = abort } }
    func awaitClose(within grace: Duration) { box.withLock { $0.grace = grace } }
    var messages: [DSOMessage] { box.withLock { $0.sent }.map { try! DSOMessage(wire: $0) } }
    /// nil: open; true: reset; false: closed.
    var closed: Bool? { box.withLock { $0.closed } }
    /// Set when the session told the client to go away and waits for it to close (§6.6.1).
    var grace: Duration? { box.withLock { $0.grace } }
    var pushes: [PushChange] {
        messages.filter { $0.primary?.type == DSOTLV.pushType }.flatMap {
            try! PushNotification(tlv: $0.primary!).changes
        }
    }
}

@Suite("DNS Push sessions on the shared browses (RFC 8765, RFC 8490)")
struct PushSessionTests {
    let instance = try! DNSName(labels: [
        Array("My Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8), Array("local".utf8),
    ])
    let zoneInstance = try! DNSName(labels: [
        Array("My Printer".utf8), Array("_ipp".utf8), Array("_tcp".utf8), Array("lab1".utf8), Array("example".utf8),
    ])

    func open(_ h: Harness, _ service: PushService) -> (PushSession, FakeTransport) {
        let transport = FakeTransport()
        return (service.openSession(client: .test(tcp: true), transport: transport), transport)
    }

    func subscribe(_ session: PushSession, id: UInt16, _ name: String, _ type: RRType) {
        session.receive(DSOMessage(id: id, tlvs: [PushSubscribe(name: try! DNSName(name), type: type).tlv]).encode())
    }

    @Test("SUBSCRIBE is answered at once; mDNS adds and removals follow as PUSHes with mDNS TTLs")
    func subscribeAndPush() throws {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (session, transport) = open(h, service)
        subscribe(session, id: 5, "_ipp._tcp.lab1.example.", .ptr)
        #expect(transport.messages.count == 1)
        #expect(
            transport.messages[0].isResponse && transport.messages[0].id == 5 && transport.messages[0].rcode == .noError
        )
        #expect(transport.messages[0].tlvs.isEmpty, "the response carries no SUBSCRIBE TLV")
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(10))
        let target = try RData.ptr(zoneInstance).wireBytes()
        #expect(transport.pushes == [.add(try DNSName("_ipp._tcp.lab1.example."), .ptr, ttl: 4500, rdata: target)])
        h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(10))
        #expect(transport.pushes.last == .remove(try DNSName("_ipp._tcp.lab1.example."), .ptr, rdata: target))
        h.backend.emit(.failed("gone"), name: "_ipp._tcp.local.", type: .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.backend.emit(.failed("gone"), name: "_ipp._tcp.local.", type: .ptr)
        h.clock.advance(by: .milliseconds(10))
        #expect(transport.pushes.last == .removeSet(try DNSName("_ipp._tcp.lab1.example."), .ptr))
        #expect(service.subscriptionCount == 1)
    }

    @Test("subscriptions share one browse with unicast queries; it outlives the idle timeout while subscribed")
    func sharedBrowse() throws {
        let h = Harness { $0.browseIdleTimeout = .seconds(30) }
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (a, ta) = open(h, service)
        let (b, _) = open(h, service)
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        subscribe(a, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        subscribe(b, id: 1, "_IPP._tcp.lab1.example.", .ptr)
        #expect(h.backend.started.count == 1)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .seconds(100))  // past the idle timeout, within the keepalive limit
        #expect(h.backend.live.count == 1, "a browse with subscribers is never released")
        #expect(ta.pushes.count == 1)
        a.receive(DSOMessage(id: 0, tlvs: [PushUnsubscribe(subscriptionID: 1).tlv]).encode())
        b.connectionClosed()
        h.clock.advance(by: .seconds(60))
        #expect(h.backend.live.isEmpty, "released after the last subscriber and the idle timeout")
        #expect(service.subscriptionCount == 0)
    }

    @Test("a known record goes out at once after the response; TYPE ANY follows every DNS-SD type")
    func initialPushAndAny() throws {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(50))
        let (session, transport) = open(h, service)
        subscribe(session, id: 9, "_ipp._tcp.lab1.example.", .ptr)
        #expect(transport.messages.count == 2)
        #expect(transport.messages[0].isResponse && transport.messages[1].primary?.type == DSOTLV.pushType)
        subscribe(session, id: 10, "My\\032Printer._ipp._tcp.lab1.example.", .any)
        #expect(Set(h.backend.live.filter { $0.name == instance }.map(\.type)) == [.ptr, .srv, .txt, .a, .aaaa])
    }

    @Test("fatal errors reset the connection: duplicate SUBSCRIBE, Retry Delay or a response from the client")
    func fatal() {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (a, ta) = open(h, service)
        subscribe(a, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        subscribe(a, id: 2, "_IPP._TCP.lab1.example.", .ptr)
        #expect(ta.closed == true)
        let (b, tb) = open(h, service)
        b.receive(DSOMessage(id: 3, tlvs: [.retryDelay(milliseconds: 1)]).encode())
        #expect(tb.closed == true)
        let (c, tc) = open(h, service)
        c.receive(DSOMessage(id: 3, isResponse: true).encode())
        #expect(tc.closed == true)
        let (d, td) = open(h, service)
        d.receive(DSOMessage(id: 0, tlvs: [PushUnsubscribe(subscriptionID: 1).tlv]).encode())
        #expect(td.closed == true, "unidirectional before the session exists")
        #expect(service.sessionCount == 0)
        #expect(
            h.backend.live.count == 1, "the aborted session's subscription left; the browse stays for its idle time")
    }

    @Test("unknown primary TLV: DSOTYPENI without the TLV; NOTAUTH outside the zones")
    func errors() {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (s, t) = open(h, service)
        s.receive(DSOMessage(id: 4, tlvs: [DSOTLV(type: 0xF900, data: [1, 2])]).encode())
        #expect(t.messages.last?.rcode == .dsoTypeNI && t.messages.last?.tlvs.isEmpty == true)
        subscribe(s, id: 6, "printer.example.org.", .ptr)
        #expect(t.messages.last?.rcode == .notAuth)
        #expect(t.messages.last?.tlvs.first?.type == DSOTLV.retryDelayType)
        #expect(t.closed == nil)
    }

    @Test("inactivity: aborted after 2 × 15 s without subscriptions; a subscription keeps it")
    func timers() {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (idle, ti) = open(h, service)
        idle.receive(
            DSOMessage(id: 1, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode())
        #expect(ti.messages.last?.primary?.keepaliveValues?.inactivity == 15000)
        let (busy, tb) = open(h, service)
        subscribe(busy, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        h.clock.advance(by: .seconds(29))
        #expect(ti.closed == nil)
        h.clock.advance(by: .seconds(2))
        #expect(ti.closed == true)
        #expect(tb.closed == nil)
        h.clock.advance(by: .seconds(7100))
        #expect(tb.closed == nil, "RFC 8490 §6.5.2: the keepalive interval is 60 minutes")
        h.clock.advance(by: .seconds(200))
        #expect(tb.closed == true, "2 × 60 min keepalive without traffic")
    }

    @Test(
        "RFC 8765 §6.4: a change batched before UNSUBSCRIBE is not pushed after it, also when a SUBSCRIBE reuses the ID in the batch window (both found by the dso fuzz harness)",
        arguments: [false, true])
    func unsubscribeDropsBatched(reuseID: Bool) throws {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (session, transport) = open(h, service)
        subscribe(session, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))  // waits for the 10 ms batch window
        session.receive(DSOMessage(id: 0, tlvs: [PushUnsubscribe(subscriptionID: 1).tlv]).encode())
        if reuseID { subscribe(session, id: 1, "_ipp._tcp.lab1.example.", .srv) }
        h.clock.advance(by: .milliseconds(20))
        if reuseID {
            #expect(transport.pushes.allSatisfy { $0.type != .ptr }, "no PTR change after the PTR subscription ended")
        } else {
            #expect(transport.pushes.isEmpty)
        }
    }

    @Test("RECONFIRM: a held record goes to mDNS; one not held is pushed as removed")
    func reconfirm() throws {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (s, t) = open(h, service)
        subscribe(s, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .milliseconds(10))
        let held = try RData.ptr(zoneInstance).wireBytes()
        s.receive(
            DSOMessage(
                id: 0, tlvs: [PushReconfirm(name: try DNSName("_ipp._tcp.lab1.example."), type: .ptr, rdata: held).tlv]
            ).encode())
        #expect(h.backend.reconfirms.count == 1)
        let ghost = try RData.ptr(try DNSName("Ghost._ipp._tcp.lab1.example.")).wireBytes()
        s.receive(
            DSOMessage(
                id: 0, tlvs: [PushReconfirm(name: try DNSName("_ipp._tcp.lab1.example."), type: .ptr, rdata: ghost).tlv]
            ).encode())
        h.clock.advance(by: .milliseconds(10))
        #expect(t.pushes.last == .remove(try DNSName("_ipp._tcp.lab1.example."), .ptr, rdata: ghost))
    }

    @Test("shutdown: established sessions get a unidirectional Retry Delay and 5 s to close (RFC 8490 §6.6.1)")
    func shutdown() {
        let h = Harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (s, t) = open(h, service)
        subscribe(s, id: 1, "_ipp._tcp.lab1.example.", .ptr)
        service.shutdown()
        #expect(t.messages.last?.isUnidirectional == true)
        #expect(t.messages.last?.primary?.type == DSOTLV.retryDelayType)
        #expect(t.closed == nil && t.grace == .seconds(5), "the client closes; reset only after 5 s")
        #expect(service.sessionCount == 0 && service.subscriptionCount == 0)
        let (late, tl) = open(h, service)
        late.receive(
            DSOMessage(id: 2, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode())
        #expect(tl.messages.last?.rcode == .refused, "no new sessions after shutdown")
    }

    @Test("over the session limit: REFUSED with a Retry Delay, then closed")
    func sessionLimit() {
        let h = Harness()
        var configuration = PushConfiguration()
        configuration.maxSessions = 1
        let service = PushService(proxy: h.proxy, configuration: configuration, logger: Logger(label: "test"))
        let (first, _) = open(h, service)
        first.receive(
            DSOMessage(id: 1, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode())
        let (second, t) = open(h, service)
        second.receive(
            DSOMessage(id: 1, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode())
        #expect(t.messages.last?.rcode == .refused)
        #expect(t.messages.last?.tlvs.first?.type == DSOTLV.retryDelayType)
        #expect(t.closed == nil && t.grace == .seconds(5))
        #expect(service.sessionCount == 1)

        // A reload raises the limit: the next session is admitted, and a session's
        // keepalive answer carries the new inactivity timeout.
        configuration.maxSessions = 2
        configuration.inactivityTimeout = .seconds(40)
        service.apply(configuration)
        let (third, t3) = open(h, service)
        third.receive(
            DSOMessage(id: 1, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode())
        #expect(t3.messages.last?.rcode == .noError)
        #expect(
            t3.messages.last?.tlvs.first == .keepalive(inactivityMilliseconds: 40_000, keepaliveMilliseconds: 3_600_000)
        )
        #expect(service.sessionCount == 2)
    }
}
