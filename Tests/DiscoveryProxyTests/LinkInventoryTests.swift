import DNSWire
import MDNS
import ProxyTestSupport
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The link inventory behind the status page: every interval, each link's service types
/// (RFC 6763 §9) and a browse per type to count instances, through the shared browses.
@Suite("Link inventory (status page)")
struct LinkInventoryTests {
    func harness(maxTypes: Int = 32, _ adjust: @escaping (inout ProxyConfiguration) -> Void = { _ in }) -> Harness {
        Harness { config in
            config.inventoryInterval = .seconds(60)
            config.inventoryMaxTypes = maxTypes
            adjust(&config)
        }
    }

    func inventory(_ h: Harness, _ interface: String = "eth1") -> LinkInventory? {
        h.proxy.linkStatus().first { $0.interface == interface }?.inventory
    }

    @Test("types, then a browse per type; counts shown; the browses are the ones clients share")
    func roundTrip() throws {
        let h = harness()
        #expect(h.backend.started.isEmpty)
        h.clock.advance(by: .seconds(10))  // the first round, soon after start
        let enumeration = MDNSQuestion(
            interface: "eth1", name: try DNSName("_services._dns-sd._udp.local."), type: .ptr)
        #expect(h.backend.started.contains(enumeration))
        #expect(h.backend.started.contains { $0.interface == "eth2" }, "every link")
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ipp._tcp.local.")))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_http._tcp.local.")))
        h.clock.advance(by: .milliseconds(100))
        #expect(h.backend.live.contains { $0.name == (try! DNSName("_ipp._tcp.local.")) && $0.type == .ptr })
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("a._ipp._tcp.local.")))
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("b._ipp._tcp.local.")))
        h.clock.advance(by: .seconds(1))  // _http._tcp: nothing, at the negative timeout
        let taken = try #require(inventory(h))
        #expect(taken.types == [.init(type: "_http._tcp", instances: 0), .init(type: "_ipp._tcp", instances: 2)])
        #expect(taken.intervalSeconds == 60 && taken.omittedTypes == 0)
        // The instances are on the status page too, from the same browse.
        #expect(h.proxy.linkStatus().first?.services.map(\.instance) == ["a", "b"])
        #expect(h.proxy.stats.cacheHits == 0 && h.proxy.stats.cacheMisses == 0, "not clients' lookups")
        // A client's browse of the type is a cache hit: the inventory's browse is shared.
        let started = h.backend.started.count
        #expect(h.ask("_ipp._tcp.lab1.example.", .ptr).message?.answers.count == 2)
        #expect(h.backend.started.count == started)

        // The next round, a minute later, sees a third instance; the browses never lapsed.
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(try DNSName("c._ipp._tcp.local.")))
        h.clock.advance(by: .seconds(61))
        #expect(inventory(h)?.types.last == .init(type: "_ipp._tcp", instances: 3))
        #expect(h.backend.started.count == started, "no browse restarted")
    }

    @Test("at most inventory-max-types types browsed; the rest counted as omitted")
    func cap() throws {
        let h = harness(maxTypes: 1)
        h.clock.advance(by: .seconds(10))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ipp._tcp.local.")))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_http._tcp.local.")))
        h.clock.advance(by: .seconds(1))
        h.clock.advance(by: .seconds(1))
        let taken = try #require(inventory(h))
        #expect(taken.types.map(\.type) == ["_http._tcp"])
        #expect(taken.omittedTypes == 1)
    }

    @Test("a type the link does not share is neither browsed nor listed")
    func filtered() throws {
        let h = harness { config in config.links[0].services = ServiceFilter(allow: ["_ipp._tcp"]) }
        h.clock.advance(by: .seconds(10))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ipp._tcp.local.")))
        h.backend.add("_services._dns-sd._udp.local.", .ptr, .ptr(try DNSName("_ssh._tcp.local.")))
        h.clock.advance(by: .seconds(2))
        #expect(inventory(h)?.types.map(\.type) == ["_ipp._tcp"])
        #expect(!h.backend.started.contains { $0.name == (try! DNSName("_ssh._tcp.local.")) })
    }

    @Test("off: no browse of its own, no inventory on the status page; a reload turns it on")
    func off() throws {
        let h = Harness()
        h.clock.advance(by: .seconds(120))
        #expect(h.backend.started.isEmpty)
        #expect(h.proxy.linkStatus().allSatisfy { $0.inventory == nil })
        var config = h.proxy.catalog.configuration
        config.inventoryInterval = .seconds(60)
        h.proxy.reconfigure(config)
        h.clock.advance(by: .seconds(10))
        #expect(!h.backend.started.isEmpty)
    }
}
