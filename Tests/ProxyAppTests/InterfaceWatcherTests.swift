@_spi(Testing) import DiscoveryProxy
import Testing

@testable import ProxyApp

@Suite("Interface watcher: what counts as a link change")
struct InterfaceWatcherTests {
    func table(_ prefixes: [String: [String]], up: Set<String>) -> InterfaceTable {
        InterfaceTable(prefixes: prefixes.mapValues { $0.map { IPPrefix($0)! } }, up: up)
    }

    @Test("down, gone, new subnet and order-only differences")
    func states() {
        let base = table(["eth1": ["192.0.2.1/24", "fe80::1/64"]], up: ["eth1"])
        let before = InterfaceWatcher.state(of: "eth1", in: base)
        #expect(before.description == "up [192.0.2.0/24]", "subnets, without link-local ones")
        #expect(InterfaceWatcher.state(of: "eth1", in: table(["eth1": ["192.0.2.1/24"]], up: [])) != before)
        #expect(InterfaceWatcher.state(of: "eth1", in: table([:], up: [])).description == "gone")
        let added = table(["eth1": ["192.0.2.1/24", "203.0.113.1/24"]], up: ["eth1"])
        #expect(InterfaceWatcher.state(of: "eth1", in: added) != before)
        let reordered = table(["eth1": ["fe80::2/64", "192.0.2.1/24"]], up: ["eth1"])
        #expect(InterfaceWatcher.state(of: "eth1", in: reordered) == before, "a new link-local address is no change")
    }
}
