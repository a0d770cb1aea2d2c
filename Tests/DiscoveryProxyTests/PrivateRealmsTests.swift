import DNSWire
import ProxyTestSupport
import Synchronization
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// RFC 8766 §5.5.2: private addresses (RFC 1918, ULA) are not given to a client the proxy
/// knows to be in another address realm than the link.
@Suite("Private address realms (RFC 8766 §5.5.2)")
struct PrivateRealmsTests {
    static let realms = PrivateRealms([
        .init(name: "lab1", clients: [IPPrefix("192.0.2.0/24")!, IPPrefix("2001:db8:1::/48")!]),
        .init(name: "lab2", clients: [IPPrefix("198.51.100.0/24")!]),
        .init(name: "lab2-annex", clients: [IPPrefix("198.51.100.128/25")!]),
    ])

    @Test("RFC 1918 and fc00::/7 are private; documentation, public and link-local are not")
    func privateRanges() {
        for text in ["10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "fd00::1", "fc12::1"] {
            #expect(PrivateRealms.isPrivate(IPPrefix.parseAddress(text)!), "\(text)")
        }
        for text in ["172.32.0.1", "172.15.0.1", "192.0.2.1", "8.8.8.8", "169.254.1.1", "2001:db8::1", "fe80::1"] {
            #expect(!PrivateRealms.isPrivate(IPPrefix.parseAddress(text)!), "\(text)")
        }
    }

    @Test("a client's realm is that of its most specific prefix")
    func clientRealm() {
        #expect(Self.realms.realm(of: [192, 0, 2, 9]) == "lab1")
        #expect(Self.realms.realm(of: [198, 51, 100, 9]) == "lab2")
        #expect(Self.realms.realm(of: [198, 51, 100, 200]) == "lab2-annex")
        #expect(Self.realms.realm(of: [203, 0, 113, 9]) == nil)
    }

    @Test("hidden only when link and client are both in a realm, and in different ones")
    func whenHidden() {
        var link = Link(interface: "eth1", zone: try! DNSName("lab1.example."), realm: "lab1")
        #expect(!Self.realms.hidesPrivateAddresses(of: link, from: .test([192, 0, 2, 9])))
        #expect(Self.realms.hidesPrivateAddresses(of: link, from: .test([198, 51, 100, 9])))
        #expect(!Self.realms.hidesPrivateAddresses(of: link, from: .test([203, 0, 113, 9])), "client in no realm")
        link.realm = nil
        #expect(!Self.realms.hidesPrivateAddresses(of: link, from: .test([198, 51, 100, 9])), "link in no realm")
    }

    func harness() -> Harness {
        Harness { config in
            config.links[0].realm = "lab1"
            config.privateRealms = Self.realms
        }
    }

    func ask(_ h: Harness, _ name: String, _ type: RRType, from client: [UInt8]) -> Harness.Reply {
        let reply = Harness.Reply()
        let query = Message(id: 9, questions: [Question(name: try! DNSName(name), type: type)], edns: EDNS())
        h.proxy.handle(query: try! query.encode(), from: .test(client)) { reply.set($0) }
        return reply
    }

    @Test("A and AAAA answers leave private addresses out for a client of another realm")
    func answers() throws {
        let h = harness()
        _ = ask(h, "host.lab1.example.", .a, from: [192, 0, 2, 9])
        _ = ask(h, "host.lab1.example.", .aaaa, from: [192, 0, 2, 9])
        h.backend.add("host.local.", .a, .a([10, 1, 2, 3]))
        h.backend.add("host.local.", .a, .a([192, 0, 2, 40]))
        h.backend.add("host.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fd00::40")!))
        h.backend.add("host.local.", .aaaa, .aaaa(IPPrefix.parseAddress("2001:db8:1::40")!))
        h.clock.advance(by: .seconds(1))
        func addresses(_ type: RRType, from client: [UInt8]) -> [RData] {
            ask(h, "host.lab1.example.", type, from: client).message?.answers.map(\.rdata) ?? []
        }
        // Another realm first, so that a shared (memoized) answer would show.
        #expect(addresses(.a, from: [198, 51, 100, 9]) == [.a([192, 0, 2, 40])])
        #expect(addresses(.aaaa, from: [198, 51, 100, 9]) == [.aaaa(IPPrefix.parseAddress("2001:db8:1::40")!)])
        #expect(Set(addresses(.a, from: [192, 0, 2, 9])) == [.a([10, 1, 2, 3]), .a([192, 0, 2, 40])], "same realm")
        #expect(addresses(.a, from: [203, 0, 113, 9]).count == 2, "a client in no realm")
        #expect(addresses(.a, from: [198, 51, 100, 9]) == [.a([192, 0, 2, 40])], "still hidden after a shared hit")
    }

    @Test("additional addresses of an SRV answer follow the same rule")
    func additionals() throws {
        let h = harness()
        _ = ask(h, "x._ipp._tcp.lab1.example.", .srv, from: [192, 0, 2, 9])
        h.backend.add(
            "x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: try DNSName("prnt.local.")))
        _ = ask(h, "prnt.lab1.example.", .a, from: [192, 0, 2, 9])
        h.backend.add("prnt.local.", .a, .a([192, 168, 1, 20]))
        h.backend.add("prnt.local.", .a, .a([192, 0, 2, 20]))
        h.clock.advance(by: .milliseconds(50))
        let other = ask(h, "x._ipp._tcp.lab1.example.", .srv, from: [198, 51, 100, 9]).message
        #expect(other?.additional.map(\.rdata) == [.a([192, 0, 2, 20])])
        let same = ask(h, "x._ipp._tcp.lab1.example.", .srv, from: [192, 0, 2, 9]).message
        #expect(same?.additional.count == 2)
    }
}
