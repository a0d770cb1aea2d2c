import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import Metrics
import ProxyTestSupport
import Synchronization

/// A proxy over a scripted backend and a manual clock, with helpers to query it.
struct Harness {
    let backend = ScriptedBackend()
    let clock = ManualScheduler()
    let proxy: DiscoveryProxy

    init(
        metrics: (any MetricsFactory)? = nil, linkCache: (any MDNSLinkCache)? = nil,
        _ adjust: (inout ProxyConfiguration) -> Void = { _ in }
    ) {
        var config = ProxyConfiguration(
            links: [
                Link(
                    interface: "eth1", zone: try! DNSName("lab1.example."),
                    subnets: [IPPrefix("192.0.2.0/24")!, IPPrefix("2001:db8:1::/64")!]),
                Link(interface: "eth2", zone: try! DNSName("lab2.example."), subnets: [IPPrefix("198.51.100.0/24")!]),
            ],
            serverName: try! DNSName("ns.example."))
        config.inventoryInterval = nil  // its own browses would add to what tests count; LinkInventoryTests turn it on
        adjust(&config)
        proxy = DiscoveryProxy(
            configuration: config, backend: backend, scheduler: clock, logger: Logger(label: "test"),
            metricsFactory: metrics ?? MetricsSystem.factory, linkCache: linkCache)
    }

    /// A harness whose `_ipp._tcp` browse on lab1 has `instance` as its one record and is a
    /// cache hit.
    static func warmed(with instance: DNSName) -> Harness {
        let h = Harness()
        h.ask("_ipp._tcp.lab1.example.", .ptr)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.clock.advance(by: .seconds(1))
        return h
    }

    /// A pending or finished reply.
    final class Reply: Sendable {
        private let box = Mutex<(called: Int, bytes: [UInt8]?)>((0, nil))
        func set(_ bytes: [UInt8]?) { box.withLock { $0 = ($0.called + 1, bytes) } }
        var calls: Int { box.withLock { $0.called } }
        var isAnswered: Bool { calls > 0 }
        var bytes: [UInt8]? { box.withLock { $0.bytes } }
        var message: Message? { bytes.flatMap { try? Message(wire: $0) } }
    }

    @discardableResult
    func ask(
        _ name: String, _ type: RRType, tcp: Bool = false, edns: EDNS? = EDNS(udpPayloadSize: 1232), id: UInt16 = 42
    ) -> Reply {
        let query = Message(
            id: id, recursionDesired: true, questions: [Question(name: try! DNSName(name), type: type)], edns: edns)
        return send(try! query.encode(), tcp: tcp)
    }

    func send(_ bytes: [UInt8], tcp: Bool = false) -> Reply {
        let reply = Reply()
        proxy.handle(query: bytes, from: .test(tcp: tcp)) { reply.set($0) }
        return reply
    }
}

/// Every `ProxyReply` a query got (with its replay ticket), for tests that look past the bytes.
final class ProxyReplies: Sendable {
    private let box = Mutex<[ProxyReply]>([])
    func add(_ reply: ProxyReply) { box.withLock { $0.append(reply) } }
    var last: ProxyReply? { box.withLock { $0.last } }
    var message: Message? { last?.bytes.flatMap { try? Message(wire: $0) } }
}

extension ResourceRecord {
    var text: String { "\(name) \(ttl) \(rrClass) \(type) \(rdata)" }
}

extension DNSClient {
    /// A client for tests: 127.0.0.1 unless said, over UDP or TCP.
    static func test(_ address: [UInt8] = [127, 0, 0, 1], tcp: Bool = false, idle: Duration? = nil) -> DNSClient {
        DNSClient(address: address, port: 5353, transport: tcp ? .tcp : .udp, tcpIdleTimeout: idle)
    }
}
