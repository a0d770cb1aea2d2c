import DNSWire
import MDNS
import Synchronization

/// An in-memory mDNS backend: records which questions were asked and lets a test play the
/// network's part by emitting events to them.
final class ScriptedBackend: MDNSBackend {
    final class Handle: MDNSQueryHandle {
        let question: MDNSQuestion
        let tag: UInt32
        weak let receiver: (any MDNSQueryReceiver)?
        private let cancelled = Atomic<Bool>(false)
        init(question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver) {
            self.question = question
            self.tag = tag
            self.receiver = receiver
        }
        func deliver(_ event: MDNSEvent) { receiver?.receive(event, for: question, tag: tag) }
        func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }
        var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    }

    private let handles = Mutex<[Handle]>([])
    /// Interfaces that exist; others throw like a real backend.
    let interfaces: Set<String>

    init(interfaces: Set<String> = ["eth1", "eth2"]) {
        self.interfaces = interfaces
    }

    private let currentState = Mutex(MDNSBackendState.running)
    var state: MDNSBackendState {
        get { currentState.withLock { $0 } }
        set { currentState.withLock { $0 = newValue } }
    }

    func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle {
        guard interfaces.contains(question.interface) else { throw .unknownInterface(question.interface) }
        let handle = Handle(question: question, tag: tag, receiver: receiver)
        handles.withLock { $0.append(handle) }
        return handle
    }

    private let reconfirmed = Mutex<[(MDNSQuestion, MDNSRecord)]>([])
    func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        reconfirmed.withLock { $0.append((question, record)) }
    }
    var reconfirms: [MDNSRecord] { reconfirmed.withLock { $0.map(\.1) } }

    /// Every query ever started, in order.
    var started: [MDNSQuestion] { handles.withLock { $0.map(\.question) } }
    var live: [MDNSQuestion] { handles.withLock { $0.filter { !$0.isCancelled }.map(\.question) } }

    /// Delivers `event` to the live queries for `name`/`type` on `interface`.
    func emit(_ event: MDNSEvent, name: String, type: RRType, interface: String = "eth1") {
        let target = MDNSQuestion(interface: interface, name: try! DNSName(name), type: type)
        let matching = handles.withLock { $0.filter { !$0.isCancelled && $0.question == target } }
        precondition(!matching.isEmpty, "no live query for \(target)")
        for handle in matching { handle.deliver(event) }
    }

    /// Delivers `event` to every live query, as the daemon going away (`.failed`) or coming
    /// back (`.restarted`) does.
    func emitToAll(_ event: MDNSEvent) {
        for handle in handles.withLock({ $0.filter { !$0.isCancelled } }) { handle.deliver(event) }
    }

    func add(_ name: String, _ type: RRType, _ rdata: RData, interface: String = "eth1") {
        let record = MDNSRecord(name: try! DNSName(name), type: type, rdata: try! rdata.wireBytes())
        emit(.added(record), name: name, type: type, interface: interface)
    }

    func remove(_ name: String, _ type: RRType, _ rdata: RData, interface: String = "eth1") {
        let record = MDNSRecord(name: try! DNSName(name), type: type, rdata: try! rdata.wireBytes())
        emit(.removed(record), name: name, type: type, interface: interface)
    }
}
