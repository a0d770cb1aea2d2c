import DNSWire
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// Which subscriptions a target's change re-checks (RFC 8766 §5.5.2 on DNS Push).
@Suite("Subscription table")
struct SubscriptionTableTests {
    final class NullSink: PushSink {
        func deliver(_ changes: [PushChange], subscription: UInt16) {}
    }

    let link = Link(interface: "eth1", zone: try! DNSName("lab1.example."))

    func subscriber(_ id: UInt16, appliesRule: Bool) -> Subscriber {
        Subscriber(
            session: 1, id: id, owner: try! DNSName("x._ipp._tcp.lab1.example."), type: .srv,
            presentation: ZonePresentation(link: link, suppressLinkLocal: true, hidesPrivateAddresses: false),
            sink: NullSink(), appliesUsableRule: appliesRule)
    }

    @Test(
        "issue 45: only browses with subscribers that apply the rule are indexed for re-checks, and leave it with the last"
    )
    func ruledIndex() throws {
        var table = SubscriptionTable()
        let srv = BrowseKey(interface: "eth1", name: try DNSName("x._ipp._tcp.local."), type: .srv)
        let address = BrowseKey(interface: "eth1", name: try DNSName("prnt.local."), type: .a)
        let gateway = BrowseKey(interface: "eth1", name: try DNSName("y._ipp._tcp.local."), type: .srv)
        table.add(subscriber(1, appliesRule: true), to: srv)
        table.add(subscriber(2, appliesRule: true), to: srv)
        table.add(subscriber(3, appliesRule: true), to: address)  // a target type: not ruled
        table.add(subscriber(4, appliesRule: false), to: gateway)  // the gateway judges for itself
        #expect(table.ruled == ["eth1": [srv: 2]])
        table.remove(session: 1, id: 4, from: gateway)
        table.remove(session: 1, id: 1, from: srv)
        #expect(table.ruled == ["eth1": [srv: 1]])
        table.remove(session: 1, id: 2, from: srv)
        #expect(table.ruled.isEmpty && table.count == 1)
    }
}
