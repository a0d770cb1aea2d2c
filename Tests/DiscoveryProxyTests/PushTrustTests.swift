import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Testing

/// The client ACL and the per-link views on every DSO message type (RFC 8766 §9.2): a client
/// they refuse learns nothing through DNS Push and causes no mDNS traffic, however it asks.
@Suite("DNS Push obeys the client ACL and the link views")
struct PushTrustTests {
    let allowed: [UInt8] = [192, 0, 2, 9]
    let outsider: [UInt8] = [198, 51, 100, 10]

    /// Clients in 192.0.2.0/24 only; lab2.example. (eth2) for 192.0.2.0/25 only.
    func harness() -> Harness {
        Harness {
            $0.allowedClients = [IPPrefix("192.0.2.0/24")!]
            $0.links[1].clients = [IPPrefix("192.0.2.0/25")!]
        }
    }

    func open(_ service: PushService, from address: [UInt8]) -> (PushSession, FakeTransport) {
        let transport = FakeTransport()
        return (service.openSession(client: .test(address, tcp: true), transport: transport), transport)
    }

    func keepalive(_ id: UInt16) -> [UInt8] {
        DSOMessage(id: id, tlvs: [.keepalive(inactivityMilliseconds: 0, keepaliveMilliseconds: 0)]).encode()
    }

    func subscribe(_ id: UInt16, _ name: String, _ type: RRType = .ptr) -> [UInt8] {
        DSOMessage(id: id, tlvs: [PushSubscribe(name: try! DNSName(name), type: type).tlv]).encode()
    }

    func reconfirm(_ name: String, _ rdata: RData) -> [UInt8] {
        DSOMessage(
            id: 0, tlvs: [PushReconfirm(name: try! DNSName(name), type: .ptr, rdata: try! rdata.wireBytes()).tlv]
        )
        .encode()
    }

    @Test(
        "a client the ACL refuses holds no session: any request gets REFUSED with a Retry Delay, then 5 s to close",
        arguments: ["keepalive", "subscribe", "subscribe-outside", "unknown-tlv"])
    func aclRefusesEveryRequest(_ kind: String) throws {
        let h = harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (session, transport) = open(service, from: outsider)
        let request: [UInt8] =
            switch kind {
            case "keepalive": keepalive(3)
            case "subscribe": subscribe(3, "_ipp._tcp.lab1.example.")
            // Not NOTAUTH: a refused client does not even learn which zones exist.
            case "subscribe-outside": subscribe(3, "_ipp._tcp.example.org.")
            default: DSOMessage(id: 3, tlvs: [DSOTLV(type: 0xF900, data: [1])]).encode()
            }
        session.receive(request)
        let reply = try #require(transport.messages.first)
        #expect(transport.messages.count == 1)
        #expect(reply.isResponse && reply.id == 3 && reply.rcode == .refused)
        #expect(reply.tlvs.map(\.type) == [DSOTLV.retryDelayType], "nothing but the Retry Delay")
        #expect(transport.grace == .seconds(5) && transport.closed == nil)
        #expect(service.sessionCount == 0 && service.subscriptionCount == 0)
        #expect(h.backend.started.isEmpty, "no mDNS query")
        #expect(h.proxy.stats.aclRefused == 1 && h.proxy.stats.refused == 1, "counted like a refused query")
        // Whatever follows on the connection is not read.
        session.receive(subscribe(4, "_ipp._tcp.lab1.example."))
        #expect(transport.messages.count == 1 && h.backend.started.isEmpty)
    }

    @Test("a RECONFIRM from a client the ACL refuses, before any session, is fatal and reaches no mDNS")
    func aclRefusedReconfirm() throws {
        let h = harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (session, transport) = open(service, from: outsider)
        session.receive(reconfirm("_ipp._tcp.lab1.example.", .ptr(try DNSName("P._ipp._tcp.lab1.example."))))
        #expect(transport.closed == true && transport.messages.isEmpty)
        #expect(h.backend.reconfirms.isEmpty && h.backend.started.isEmpty)
    }

    @Test("a client a link's view hides: SUBSCRIBE REFUSED, RECONFIRM ignored, both counted; other links served")
    func viewHidesLink() throws {
        let h = harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let hidden: [UInt8] = [192, 0, 2, 200]  // allowed, but outside lab2's 192.0.2.0/25
        let (session, transport) = open(service, from: hidden)
        session.receive(subscribe(1, "_ipp._tcp.lab1.example."))
        #expect(transport.messages.last?.rcode == .noError, "lab1 is visible")
        session.receive(subscribe(2, "_ipp._tcp.lab2.example."))
        #expect(transport.messages.last?.rcode == .refused && transport.messages.last?.id == 2)
        session.receive(subscribe(3, "lab2.example.", .soa))
        #expect(transport.messages.last?.rcode == .refused, "not even the apex")
        #expect(h.backend.started.map(\.interface) == ["eth1"], "no mDNS query on the hidden link")
        // A record of the hidden link's browse, held because an allowed client asked.
        let staff = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (other, _) = open(staff, from: allowed)
        other.receive(subscribe(1, "_ipp._tcp.lab2.example."))
        let printer = try DNSName("P._ipp._tcp.local.")
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(printer), interface: "eth2")
        h.clock.advance(by: .seconds(1))
        let count = transport.messages.count
        session.receive(reconfirm("_ipp._tcp.lab2.example.", .ptr(try DNSName("P._ipp._tcp.lab2.example."))))
        session.receive(reconfirm("_ipp._tcp.lab2.example.", .ptr(try DNSName("Ghost._ipp._tcp.lab2.example."))))
        h.clock.advance(by: .seconds(1))
        #expect(h.backend.reconfirms.isEmpty, "no mDNS traffic for a hidden link")
        #expect(transport.messages.count == count, "nothing sent back")
        #expect(transport.closed == nil && transport.grace == nil, "the session stays for the links it may see")
        #expect(h.proxy.stats.refused == 4 && h.proxy.stats.aclRefused == 0)
    }

    @Test("a reload that takes a subscription away ends the session with a Retry Delay (REFUSED)")
    func reloadRevokes() throws {
        let h = harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (kept, tk) = open(service, from: allowed)
        kept.receive(subscribe(1, "_ipp._tcp.lab1.example."))
        let (viewed, tv) = open(service, from: allowed)
        viewed.receive(subscribe(1, "_ipp._tcp.lab2.example."))
        #expect(service.subscriptionCount == 2)

        var configuration = h.proxy.catalog.configuration
        configuration.links[1].clients = [IPPrefix("192.0.2.128/25")!]
        h.proxy.reconfigure(configuration)
        let goodbye = try #require(tv.messages.last)
        #expect(goodbye.isUnidirectional && goodbye.rcode == .refused)
        #expect(goodbye.primary?.type == DSOTLV.retryDelayType)
        #expect(tv.grace == .seconds(5))
        #expect(tk.grace == nil, "a session whose subscriptions stay visible is kept")
        #expect(service.subscriptionCount == 1)

        configuration.allowedClients = [IPPrefix("203.0.113.0/24")!]
        h.proxy.reconfigure(configuration)
        #expect(tk.messages.last?.isUnidirectional == true && tk.messages.last?.rcode == .refused)
        #expect(service.subscriptionCount == 0 && service.sessionCount == 0)
    }

    @Test("a reload revokes subscriptions answered from configuration too (found by the dso fuzz harness)")
    func reloadRevokesImmediate() throws {
        let h = harness()
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        let (session, transport) = open(service, from: allowed)
        session.receive(subscribe(1, "lab2.example.", .soa))
        #expect(transport.messages.last?.rcode == .noError)
        #expect(h.backend.started.isEmpty, "answered from configuration: no browse, not in the proxy's table")
        var configuration = h.proxy.catalog.configuration
        configuration.links[1].clients = [IPPrefix("192.0.2.128/25")!]
        h.proxy.reconfigure(configuration)
        #expect(transport.messages.last?.isUnidirectional == true && transport.messages.last?.rcode == .refused)
        #expect(transport.grace == .seconds(5) && service.sessionCount == 0)
    }
}
