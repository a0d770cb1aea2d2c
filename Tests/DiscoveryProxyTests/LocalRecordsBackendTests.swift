import DNSWire
import Logging
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

@testable import DiscoveryProxy

/// The records the registrar's own responder publishes, seen by the proxy's browses
/// (`LocalRecordsBackend` over avahi's backend, here a scripted one).
@Suite struct LocalRecordsBackendTests {
    final class Events: MDNSQueryReceiver {
        let all = Mutex<[String]>([])
        func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
            let text: String
            switch event {
            case .added(let record): text = "+\(record.rdata.last ?? 0)"
            case .removed(let record): text = "-\(record.rdata.last ?? 0)"
            case .allForNow: text = "all"
            case .verifying: text = "verifying"
            case .restarted: text = "restarted"
            case .failed: text = "failed"
            }
            all.withLock { $0.append("\(tag):\(text)") }
        }
        func take() -> [String] {
            all.withLock { events in
                defer { events = [] }
                return events
            }
        }
    }

    /// The backend's deferred work (the proxy's scheduler), run when the test says.
    final class Later: Sendable {
        let works = Mutex<[@Sendable () -> Void]>([])
        func take(_ work: @escaping @Sendable () -> Void) { works.withLock { $0.append(work) } }
        func run() {
            for work in works.withLock({ works in
                defer { works = [] }
                return works
            }) { work() }
        }
    }

    static func backend(_ inner: ScriptedBackend = ScriptedBackend()) -> (LocalRecordsBackend, Later) {
        let later = Later()
        return (LocalRecordsBackend(wrapping: inner, later: { later.take($0) }), later)
    }

    static let name = "printer.local."
    static func a(_ last: UInt8) -> MDNSRecord {
        MDNSRecord(name: try! DNSName(name), type: .a, rdata: [192, 0, 2, last])
    }
    static func group(_ name: String, _ records: [MDNSRecord], on interface: String = "eth1") -> MDNSGroup {
        MDNSGroup(key: MDNSGroup.Key(interface: interface, name: name), records: records)
    }
    static let question = MDNSQuestion(interface: "eth1", name: try! DNSName(name), type: .a)

    @Test("a query gets what is held at once, then its changes; another interface's and another type's not")
    func heldAndChanges() throws {
        let inner = ScriptedBackend()
        let (backend, later) = Self.backend(inner)
        backend.update(changed: [Self.group("srp printer", [Self.a(1)])], removed: [])
        backend.update(changed: [Self.group("srp printer", [Self.a(9)], on: "eth2")], removed: [])
        let events = Events()
        let handle = try backend.startQuery(Self.question, tag: 7, receiver: events)
        let aaaa = try backend.startQuery(
            MDNSQuestion(interface: "eth1", name: try DNSName(Self.name), type: .aaaa), tag: 8, receiver: events)
        #expect(events.take().isEmpty, "not on the caller's thread")
        later.run()
        #expect(events.take() == ["7:+1"])
        backend.update(changed: [Self.group("srp printer", [Self.a(2)])], removed: [])
        #expect(events.take() == ["7:-1", "7:+2"])
        backend.update(changed: [], removed: [MDNSGroup.Key(interface: "eth1", name: "srp printer")])
        #expect(events.take() == ["7:-2"])
        #expect(backend.heldCount == 1)
        handle.cancel()
        aaaa.cancel()
        backend.update(changed: [Self.group("srp printer", [Self.a(3)])], removed: [])
        #expect(events.take().isEmpty, "no event after cancel()")
        #expect(inner.live.isEmpty, "the other backend's queries cancelled too")
    }

    @Test(
        "the other backend's events keep the query's tag; after .failed, .verifying or .restarted the held records come again"
    )
    func relayed() throws {
        let inner = ScriptedBackend()
        let (backend, later) = Self.backend(inner)
        backend.update(changed: [Self.group("srp printer", [Self.a(1)])], removed: [])
        let events = Events()
        let handle = try backend.startQuery(Self.question, tag: 7, receiver: events)
        later.run()
        _ = events.take()
        inner.add(Self.name, .a, .a([192, 0, 2, 50]))
        inner.emit(.allForNow, name: Self.name, type: .a)
        #expect(events.take() == ["7:+50", "7:all"])
        inner.emit(.verifying, name: Self.name, type: .a)
        #expect(events.take() == ["7:verifying", "7:+1"], "holders count from zero after .verifying")
        inner.emitToAll(.failed("gone"))
        #expect(events.take() == ["7:failed", "7:+1"], "the holder dropped what it had")
        inner.emitToAll(.restarted)
        #expect(events.take() == ["7:restarted", "7:+1"])
        handle.cancel()
    }

    @Test("a change before the held records are delivered is not delivered twice")
    func changeBeforePriming() throws {
        let (backend, later) = Self.backend()
        backend.update(changed: [Self.group("srp printer", [Self.a(1)])], removed: [])
        let events = Events()
        let handle = try backend.startQuery(Self.question, tag: 7, receiver: events)
        backend.update(changed: [Self.group("srp printer", [Self.a(1), Self.a(2)])], removed: [])
        #expect(events.take().isEmpty)
        later.run()
        #expect(events.take() == ["7:+1", "7:+2"])
        backend.update(changed: [Self.group("srp printer", [Self.a(2)])], removed: [])
        #expect(events.take() == ["7:-1"])
        handle.cancel()
    }

    /// Starts another query from inside `receive`, as the proxy's inventory does.
    final class Starter: MDNSQueryReceiver {
        let backend: LocalRecordsBackend
        let started = Mutex<[any MDNSQueryHandle]>([])
        init(backend: LocalRecordsBackend) { self.backend = backend }
        func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
            guard case .added = event else { return }
            let next = MDNSQuestion(interface: "eth1", name: try! DNSName("other.local."), type: .a)
            if let handle = try? backend.startQuery(next, tag: 0, receiver: self) {
                started.withLock { $0.append(handle) }
            }
        }
    }

    @Test("a receiver may start a query while it is handed an event (no lock held across it)")
    func reentrant() throws {
        let inner = ScriptedBackend()
        let (backend, later) = Self.backend(inner)
        let starter = Starter(backend: backend)
        let handle = try backend.startQuery(Self.question, tag: 1, receiver: starter)
        backend.update(changed: [Self.group("srp printer", [Self.a(1)])], removed: [])
        inner.add(Self.name, .a, .a([192, 0, 2, 50]))
        later.run()
        #expect(starter.started.withLock { $0.count } == 2, "one from the held record, one from the relayed one")
        handle.cancel()
    }

    @Test("a record two groups hold goes when the last of them lets it go")
    func shared() throws {
        let (backend, _) = Self.backend()
        let events = Events()
        let handle = try backend.startQuery(Self.question, tag: 1, receiver: events)
        backend.replaceAll([Self.group("one", [Self.a(1)]), Self.group("two", [Self.a(1)])])
        #expect(events.take() == ["1:+1"])
        backend.replaceAll([Self.group("two", [Self.a(1)])])
        #expect(events.take().isEmpty)
        backend.replaceAll([])
        #expect(events.take() == ["1:-1"])
        handle.cancel()
    }

    @Test("cancelled queries are swept: a browse churn does not grow the backend")
    func sweep() throws {
        let (backend, _) = Self.backend()
        let events = Events()
        for index in 0..<1000 {
            let question = MDNSQuestion(interface: "eth1", name: try DNSName("h\(index).local."), type: .a)
            try backend.startQuery(question, tag: 0, receiver: events).cancel()
        }
        #expect(backend.queryCount < 200)
    }

    @Test("a registration is seen by the proxy's browses once registered, not while it is probed for")
    func registeredIsBrowsable() throws {
        let (backend, _) = Self.backend(ScriptedBackend(interfaces: ["lab0"]))
        let publisher = RegistrarTests.Publisher()
        var settings = RegistrarConfiguration()
        settings.isEnabled = true
        let proxy = ProxyConfiguration(
            links: [Link(interface: "lab0", zone: try DNSName("lab1.example."), subnets: [IPPrefix("192.0.2.0/24")!])],
            serverName: try DNSName("proxy.example."))
        let scheduler = ManualScheduler()
        let registrar = Registrar(
            configuration: settings, proxy: proxy, table: RegistrationTable(), store: nil, publisher: publisher,
            browsable: backend, scheduler: scheduler, logger: Logger(label: "local-records-tests"),
            clock: { 1_000_000 })
        registrar.start()
        let events = Events()
        let browse = try backend.startQuery(
            MDNSQuestion(interface: "lab0", name: try DNSName("_ipp._tcp.local."), type: .ptr), tag: 3,
            receiver: events)
        let replies = RegistrarTests.Replies()
        registrar.handle(SRPUpdateTests.signed, from: DNSClient(address: [192, 0, 2, 7], port: 5353, transport: .udp)) {
            replies.record($0)
        }
        scheduler.advance(by: .zero)
        #expect(events.take().isEmpty, "being probed for")
        for group in publisher.groups { registrar.published(group.key) }
        scheduler.advance(by: .zero)
        #expect(replies.last?.rcode == .noError)
        #expect(events.take().count == 1, "the instance's PTR")
        browse.cancel()
        registrar.shutdown()
    }
}
