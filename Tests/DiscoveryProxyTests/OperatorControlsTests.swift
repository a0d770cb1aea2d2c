import DNSWire
@_spi(Testing) import DiscoveryProxy
import MDNS
import ProxyTestSupport
import Testing

@Suite("Operator controls: client ACL, service filters, live reconfiguration")
struct OperatorControlsTests {
    func query(_ name: String, _ type: RRType) -> [UInt8] {
        try! Message(id: 5, questions: [Question(name: try! DNSName(name), type: type)]).encode()
    }

    @Test("clients outside the allowed prefixes get REFUSED and are counted (RFC 8766 §9.2)")
    func clientACL() throws {
        let h = Harness { $0.allowedClients = [IPPrefix("127.0.0.0/8")!, IPPrefix("192.0.2.0/24")!] }
        let reply = Harness.Reply()
        h.proxy.handle(query: query("lab1.example.", .soa), from: .test([198, 51, 100, 7])) { reply.set($0) }
        #expect(reply.message?.rcode == .refused)
        let allowed = Harness.Reply()
        h.proxy.handle(query: query("lab1.example.", .soa), from: .test([192, 0, 2, 44])) { allowed.set($0) }
        #expect(allowed.message?.rcode == .noError)
        #expect(h.proxy.stats.aclRefused == 1)
        #expect(h.backend.started.isEmpty)
    }

    @Test("a link's deny list hides a type from browse and resolve without asking mDNS")
    func denyList() throws {
        let h = Harness { $0.links[0].services = ServiceFilter(deny: ["_airplay._tcp"]) }
        #expect(h.ask("_airplay._tcp.lab1.example.", .ptr).message?.answers.isEmpty == true)
        #expect(h.ask("Living Room._airplay._tcp.lab1.example.", .srv).message?.answers.isEmpty == true)
        #expect(h.ask("_sub1._sub._AirPlay._tcp.lab1.example.", .ptr).isAnswered)
        #expect(h.backend.started.isEmpty)
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(h.backend.started.count == 1)
        // The other link is not filtered.
        h.ask("_airplay._tcp.lab2.example.", .ptr)
        #expect(h.backend.started.count == 2)
    }

    @Test("an allow list also filters service type enumeration (RFC 6763 §9)")
    func allowListAndServicesEnumeration() throws {
        let h = Harness { $0.links[0].services = ServiceFilter(allow: ["_ipp._tcp"]) }
        let types = h.ask("_services._dns-sd._udp.lab1.example.", .ptr)
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ipp._tcp.local.")))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ssh._tcp.local.")))
        h.clock.advance(by: .milliseconds(50))
        #expect(types.message?.answers.map(\.rdata) == [.ptr(try DNSName("_ipp._tcp.lab1.example."))])
        #expect(h.ask("_ssh._tcp.lab1.example.", .ptr).message?.answers.isEmpty == true)
        #expect(ServiceFilter.serviceType(of: (try DNSName("a.b._Printer._sub._http._tcp")).labels) == "_http._tcp")
        #expect(ServiceFilter.serviceType(of: (try DNSName("host")).labels) == nil)
    }

    @Test("reconfigure adds and removes links without dropping the others' cache")
    func reconfigure() throws {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("x._ipp._tcp.local.")))
        h.ask("_ipp._tcp.lab2.example.", .ptr)
        let pending = h.ask("_http._tcp.lab2.example.", .ptr)
        h.clock.advance(by: .milliseconds(50))

        var config = h.proxy.catalog.configuration
        config.links[1] = Link(interface: "eth3", zone: try DNSName("lab3.example."))
        h.proxy.reconfigure(config)
        #expect(pending.message?.rcode == .servFail, "a waiter on a removed link is not left hanging")
        #expect(h.ask("_ipp._tcp.lab2.example.", .ptr).message?.rcode == .refused)
        let kept = h.ask("_ipp._tcp.lab1.example.", .ptr)
        #expect(kept.message?.answers.count == 1, "lab1 kept its cache: a hit")
        #expect(h.backend.live.allSatisfy { $0.interface == "eth1" })
    }

    @Test("per-link status lists resolved instances with host, port, addresses and TXT")
    func linkStatus() throws {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("My\\032Printer._ipp._tcp.local.")))
        h.ask("My\\032Printer._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "My\\032Printer._ipp._tcp.local.", .srv,
            .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        h.ask("My\\032Printer._ipp._tcp.lab1.example.", .txt)
        h.backend.add(
            "My\\032Printer._ipp._tcp.local.", .txt, .txt([6] + Array("rp=ipp".utf8) + [5] + Array("color".utf8)))
        h.ask("prnt.lab1.example.", .a)
        h.backend.add("prnt.local.", .a, .a([192, 0, 2, 20]))
        h.clock.advance(by: .seconds(3))
        let status = h.proxy.linkStatus()
        #expect(status.map(\.zone) == ["lab1.example.", "lab2.example."])
        let service = try #require(status[0].services.first)
        #expect(service.type == "_ipp._tcp")
        #expect(service.instance == "My Printer")
        #expect(service.host == "prnt.lab1.example.")
        #expect(service.port == 631)
        #expect(service.addresses == ["192.0.2.20"])
        #expect(service.txt == [TXTEntry(key: "rp", value: "ipp"), TXTEntry(key: "color", value: nil)])
        #expect(service.ageSeconds >= 2)
        #expect(status[0].activeBrowses == 4)
    }
}
