// (d) DSO sessions (RFC 8490) carrying DNS Push (RFC 8765): a real `PushSession`, opened with
// `PushService.openSession(client:transport:)` on a real `DiscoveryProxy` over the query
// harness's configuration, `FuzzBackend` and a `ManualScheduler`; a capture transport records
// what the session sends. The input is a script run against one proxy: DSO messages (raw or
// built from a few octets), mDNS events, clock steps, ordinary queries, closes, shutdown and
// reloads. A DSO message after a session ended opens a new one (the client reconnects).
//
// Input layout: [flags] [configuration] then operations, each an octet (op % 13) and its operands:
// - flags bits 0-2: the client address (`clients`); bit 3: the session limit is 0 (refused
//   sessions); bit 4: at the end the session is left to time out instead of being closed by the
//   client; bit 5: no batch window; bit 6: 3 subscriptions per session at most; bit 7: 1 s
//   inactivity timeout and 10 s keepalive interval.
// - configuration: bits 0-6, the one in force at first (`configurations`, % 3); bit 7: the
//   default keepalive interval (3600 s) instead of 60 s.
// - 0 raw [len16] [bytes]: a message as the front end hands it on (DSO opcode: the session;
//   else an ordinary query on the connection); 1 SUBSCRIBE [id16 name type flags];
//   2 UNSUBSCRIBE [sel]; 3 RECONFIRM [name type rdata]; 4 Keepalive [id16 flags]; 5 the clock
//   [sel]; 6 an mDNS event [query kind record]; 7 a query [name type flags], from this
//   connection or from elsewhere; 8 the client closes; 9 server shutdown; 10 reload [sel];
//   11 a DSO message from parts [id16 type len flags] (any TLV type, length, QR, padding,
//   additional TLVs, non-zero counts or RCODE); 12 the observer subscribes [name type]: a second
//   session, of the proxy itself (no address, so every check lets it through), that shares the
//   browses and shows what the client's messages do to other subscribers. Only without batch
//   window (flags bit 5), so that what a client's message pushes to it is sent during that
//   message. (One service for both: session IDs name subscribers in the proxy's table.)
//
// Invariants (fatalError): everything sent decodes as DSO, at most 16,382 octets; a response
// answers the request just delivered (its ID, exactly one while the session stays open, padded
// to 468 when the request was padded, a Keepalive NOERROR carries one Keepalive TLV); the server
// sends no requests and only PUSH or Retry Delay unidirectionally, a Retry Delay is followed by
// the close; nothing is sent or closed after the close; a NOERROR SUBSCRIBE never reuses a live ID
// or duplicates a live subscription; every PUSH change belongs to a subscription whose NOERROR
// response went out before it; the service's subscription count follows those; once a session
// ended, neither the proxy nor the service counts a subscription or session for it (nor one of
// the proxy's subscriptions while the model has none); the observer's PUSHes belong to its own
// subscriptions; a silent
// session ends by its keepalive limit; at the end every mDNS query is released (no leaked
// subscription pins a browse).
// Separate checks, each skippable with FUZZ_DSO_SKIP=name[,name] (comma-separated):
// - `acl`: a client the ACL (`allowedClients`) refuses never gets a PUSH or a NOERROR SUBSCRIBE
//   response, holds no subscription in the proxy, and its messages start no mDNS query and
//   reconfirm nothing and push nothing to the observer; a link a client may not see
//   (`Link.clients`) gets it no NOERROR SUBSCRIBE, no PUSH of its names, no mDNS query or
//   reconfirm on it, and its messages push the observer nothing of that link. Judged by the
//   configuration in force at the time.
// - `revoke`: after a reload that takes a subscription away from the client, the session is over.
// - `unsubscribe`: no PUSH change after UNSUBSCRIBE for that subscription (docs/STANDARDS.md,
//   RFC 8765 §6.4), unless another live subscription covers it.

// `@testable` (the proxy's subscription table, a session's ID) needs a module compiled for
// testing: debug builds only, like the tcp harness.
#if DEBUG
import DNSWire
@_spi(Testing) @testable import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Records what a session sends, in order.
final class CaptureTransport: PushTransport {
    enum Event {
        case send([UInt8])
        case close(abort: Bool)
        case awaitClose(Duration)
    }
    private let events = Mutex<[Event]>([])
    func send(_ message: [UInt8]) { events.withLock { $0.append(.send(message)) } }
    func close(abort: Bool) { events.withLock { $0.append(.close(abort: abort)) } }
    func awaitClose(within grace: Duration) { events.withLock { $0.append(.awaitClose(grace)) } }

    /// The events since the last call.
    func take() -> [Event] {
        events.withLock { events in
            defer { events = [] }
            return events
        }
    }
}

enum DSOHarness {
    /// FUZZ_DSO_TRACE=1: print every operation and what the session sent (for replaying a crash).
    static let tracing = getenv("FUZZ_DSO_TRACE") != nil

    static let skipped: Set<String> = {
        guard let raw = getenv("FUZZ_DSO_SKIP") else { return [] }
        return Set(String(cString: raw).split(separator: ",").map { String($0) })
    }()

    /// Configurations a reload switches between (the query harness's links: lab1 on eth1,
    /// 192.0.2.0/24 and 2001:db8:1::/64; lab2 on eth2, 198.51.100.0/24, `_ipp`/`_http` only).
    static let configurations: [ProxyConfiguration] = {
        func prefixes(_ texts: [String]) -> [IPPrefix] { texts.map { IPPrefix($0)! } }
        // A: ACL 192.0.2/24, 10/8, 2001:db8::/32; lab2 seen by 192.0.2/24 and 2001:db8::/32.
        var a = QueryHarness.configuration
        a.allowedClients = prefixes(["192.0.2.0/24", "10.0.0.0/8", "2001:db8::/32"])
        a.links[1].clients = prefixes(["192.0.2.0/24", "2001:db8::/32"])
        // B: 10/8 refused, 203.0.113/24 allowed; lab1 hidden from 203.0.113/24, lab2 seen only by it.
        var b = a
        b.allowedClients = prefixes(["192.0.2.0/24", "2001:db8::/32", "203.0.113.0/24"])
        b.links[0].clients = prefixes(["192.0.2.0/24", "2001:db8::/32"])
        b.links[1].clients = prefixes(["203.0.113.0/24"])
        // C: no ACL, no views.
        return [a, b, QueryHarness.configuration]
    }()

    static let clients: [[UInt8]] = [
        [127, 0, 0, 1],
        [192, 0, 2, 10],
        [10, 1, 2, 3],
        [0x20, 0x01, 0x0D, 0xB8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
        [203, 0, 113, 9],
        [0x20, 0x01, 0x0D, 0xB9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [198, 51, 100, 20],
        [0x20, 0x01, 0x0D, 0xB8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
    ]

    static func name(_ labels: [String]) -> DNSName { try! DNSName(labels: labels.map { Array($0.utf8) }) }

    /// Names the built operations use: browse, instance, host, enumeration, apex, reverse,
    /// filtered type, outside every zone, the server's own name.
    static let names: [DNSName] = [
        name(["_ipp", "_tcp", "lab1", "example"]),
        name(["_http", "_tcp", "lab2", "example"]),
        name(["Fuzz Printer", "_ipp", "_tcp", "lab1", "example"]),
        name(["fuzz", "lab1", "example"]),
        name(["_services", "_dns-sd", "_udp", "lab1", "example"]),
        name(["b", "_dns-sd", "_udp", "lab1", "example"]),
        name(["lab1", "example"]),
        name(["7", "2", "0", "192", "in-addr", "arpa"]),
        name(["_airplay", "_tcp", "lab2", "example"]),
        name(["x", "outside", "example"]),
        name(["_IPP", "_tcp", "LAB1", "example"]),
        name(["Fuzz Printer", "_http", "_tcp", "lab2", "example"]),
        name(["20", "100", "51", "198", "in-addr", "arpa"]),
        name(["b", "_dns-sd", "_udp", "0", "2", "0", "192", "in-addr", "arpa"]),
        name(["ns", "example"]),
        name(["_printer", "_sub", "_ipp", "_tcp", "lab1", "example"]),
    ]
    static let types: [RRType] = [
        .ptr, .srv, .txt, .a, .aaaa, .any, .nsec, .soa, .ns, .cname, RRType(0xFF00), RRType(0),
    ]
    static let durations: [Duration] = [
        .zero, .milliseconds(1), .milliseconds(10), .milliseconds(50), .milliseconds(800), .seconds(1),
        .seconds(5), .seconds(6), .seconds(15), .seconds(30), .seconds(31), .seconds(60), .seconds(121),
        .seconds(150), .seconds(600), .seconds(7201),
    ]
    /// Primary TLV types of the built messages: every DSO and Push type, unknown ones, 0.
    static let tlvTypes: [UInt16] = [1, 2, 3, 0x40, 0x41, 0x42, 0x43, 0x44, 0xF7FF, 0]

    static let views = configurations.map(DSOView.init)

    static func run(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        var run = DSORun(
            flags: bytes[0], configuration: Int(bytes[1] & 0x7F) % configurations.count,
            productionKeepalive: bytes[1] & 0x80 != 0, raw: Array(bytes.suffix(16)))
        var input = DSOInput(bytes: bytes, index: 2)
        while let op = input.next() { run.perform(op, &input) }
        run.finish()
    }
}

/// Reads operands; past the end, zeros.
struct DSOInput {
    let bytes: [UInt8]
    var index: Int
    mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }
    mutating func byte() -> UInt8 { next() ?? 0 }
    mutating func u16() -> UInt16 { UInt16(byte()) << 8 | UInt16(byte()) }
    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, index + count)
        defer { index = end }
        return index < end ? Array(bytes[index..<end]) : []
    }
}

/// One input's proxy, service and client, and the model the checks compare against.
struct DSORun {
    let backend = FuzzBackend()
    let clock = ManualScheduler()
    let proxy: DiscoveryProxy
    let service: PushService
    let client: [UInt8]
    let endByTimeout: Bool
    let raw: [UInt8]
    var configuration: Int

    /// The current connection's session and what it was sent; nil before the first DSO message.
    var session: PushSession?
    var transport = CaptureTransport()
    /// The transports of earlier connections: they must stay silent.
    var retired: [CaptureTransport] = []
    /// The connection is over (closed by the session, or by the client).
    var ended = true
    /// Subscriptions answered NOERROR and not unsubscribed, by ID.
    var live: [UInt16: PushSubscribe] = [:]
    var unsubscribed: [PushSubscribe] = []

    /// The observer: a second session, opened by its first SUBSCRIBE and never reopened.
    var observer: PushSession?
    let observerTransport = CaptureTransport()
    var observerEnded = false
    var observerLive: [UInt16: PushSubscribe] = [:]
    var observerNextID: UInt16 = 1

    init(flags: UInt8, configuration: Int, productionKeepalive: Bool, raw: [UInt8]) {
        self.client = DSOHarness.clients[Int(flags & 7)]
        self.endByTimeout = flags & 0x10 != 0
        self.raw = raw
        self.configuration = configuration
        proxy = DiscoveryProxy(
            configuration: DSOHarness.configurations[configuration], backend: backend, scheduler: clock,
            logger: QueryHarness.logger)
        var push = PushConfiguration()
        // The old 60 s keepalive unless asked for the default (3600 s): a silent session then
        // ends after 2 min, not 2 h of clock (each sweep of the idle browses costs time).
        if !productionKeepalive { push.keepaliveInterval = .seconds(60) }
        if flags & 0x08 != 0 { push.maxSessions = 0 }
        if flags & 0x20 != 0 { push.batchWindow = .zero }
        if flags & 0x40 != 0 { push.maxSubscriptionsPerSession = 3 }
        if flags & 0x80 != 0 {
            push.inactivityTimeout = .seconds(1)
            push.keepaliveInterval = .seconds(10)
        }
        service = PushService(proxy: proxy, configuration: push, logger: QueryHarness.logger)
    }

    // MARK: Operations

    mutating func perform(_ op: UInt8, _ input: inout DSOInput) {
        if DSOHarness.tracing {
            trace("op \(op % 13) at octet \(input.index - 1), t=\(clock.now()), \(clock.pendingTimers) timers")
        }
        switch op % 13 {
        case 0:
            let length = Int(input.u16())
            deliver(input.take(length))
        case 1:
            let id = input.u16()
            let name = DSOHarness.names[Int(input.byte()) % DSOHarness.names.count]
            let type = DSOHarness.types[Int(input.byte()) % DSOHarness.types.count]
            let flags = input.byte()
            let rrClass: RRClass = flags & 1 != 0 ? .any : flags & 2 != 0 ? RRClass(3) : .in
            var message = DSOMessage(id: id, tlvs: [PushSubscribe(name: name, type: type, rrClass: rrClass).tlv])
            if flags & 4 != 0 { message.tlvs.append(.padding(Int(flags >> 3))) }
            deliver(message.encode())
        case 2:
            // A live subscription's ID, or a small one (unknown IDs are ignored, §6.4).
            let selector = input.byte()
            let ids = live.keys.sorted()
            let id = selector & 0x80 != 0 && !ids.isEmpty ? ids[Int(selector & 0x7F) % ids.count] : UInt16(selector)
            deliver(DSOMessage(id: 0, tlvs: [PushUnsubscribe(subscriptionID: id).tlv]).encode())
        case 3:
            let name = DSOHarness.names[Int(input.byte()) % DSOHarness.names.count]
            let type = DSOHarness.types[Int(input.byte()) % DSOHarness.types.count]
            let rdata: [UInt8]
            // The harness's PTR (held once mDNS added it), a PTR never added (its removal is
            // pushed at once), A, AAAA, SRV as the query harness's records, raw octets, nothing.
            switch input.byte() % 7 {
            case 0:
                rdata = QueryHarness.wire((try? DNSName(labels: [Array("Fuzz Printer".utf8)] + name.labels)) ?? name)
            case 1: rdata = [192, 0, 2, 7]
            case 2: rdata = [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 1, count: 12)
            case 3: rdata = [0, 0, 0, 0, 0x02, 0x77] + QueryHarness.wire(DSOHarness.name(["fuzz", "lab1", "example"]))
            case 4: rdata = raw
            case 5: rdata = QueryHarness.wire((try? DNSName(labels: [Array("Gone".utf8)] + name.labels)) ?? name)
            default: rdata = []
            }
            deliver(DSOMessage(id: 0, tlvs: [PushReconfirm(name: name, type: type, rdata: rdata).tlv]).encode())
        case 4:
            let id = input.u16()
            let flags = input.byte()
            var keepalive = DSOTLV.keepalive(inactivityMilliseconds: 15_000, keepaliveMilliseconds: 60_000)
            if flags & 1 != 0 { keepalive.data.removeLast() }
            var message = DSOMessage(id: flags & 2 != 0 ? 0 : id, tlvs: [keepalive])
            if flags & 4 != 0 { message.tlvs.append(.padding(Int(flags >> 3))) }
            deliver(message.encode())
        case 5:
            let delay = DSOHarness.durations[Int(input.byte()) % DSOHarness.durations.count]
            step(messageStep: false) { run in run.clock.advance(by: delay) }
        case 6:
            let handleSelector = Int(input.byte())
            let kind = input.byte()
            let recordSelector = Int(input.byte())
            let live = backend.live
            guard !live.isEmpty else { return }
            let handle = live[handleSelector % live.count]
            let records = QueryHarness.records(for: handle.question, raw: raw)
            let record = records[recordSelector % records.count]
            let event: MDNSEvent =
                switch kind % 8 {
                case 0, 1, 2: .added(record)
                case 3, 4: .removed(record)
                case 5: .allForNow
                case 6: kind & 8 != 0 ? .verifying : .restarted
                default: .failed("fuzz")
                }
            step(messageStep: false) { _ in handle.handler(event) }
        case 7:
            let name = DSOHarness.names[Int(input.byte()) % DSOHarness.names.count]
            let type = DSOHarness.types[Int(input.byte()) % DSOHarness.types.count]
            let flags = input.byte()
            var query = Message(id: UInt16(flags) << 8 | 0x42, questions: [Question(name: name, type: type)])
            if flags & 2 != 0 { query.edns = EDNS(options: [.tcpKeepalive(timeout: .seconds(10))]) }
            guard let bytes = try? query.encode(limit: 65535) else { return }
            if flags & 1 != 0 {
                connectionQuery(bytes)
            } else {
                step(messageStep: false) { run in
                    run.proxy.handle(
                        query: bytes, from: DNSClient(address: [127, 0, 0, 1], port: 5353, transport: .udp),
                        respond: { _ in })
                }
            }
        case 8:
            guard let session, !ended else { return }
            step(messageStep: false) { run in
                session.connectionClosed()
                run.connectionEnded()
            }
        case 9:
            step(messageStep: false) { run in run.service.shutdown() }
        case 10:
            let next = Int(input.byte()) % DSOHarness.configurations.count
            step(messageStep: false) { run in
                run.configuration = next
                run.proxy.reconfigure(DSOHarness.configurations[next])
            }
        case 12:
            let request = PushSubscribe(
                name: DSOHarness.names[Int(input.byte()) % DSOHarness.names.count],
                type: DSOHarness.types[Int(input.byte()) % DSOHarness.types.count])
            // A duplicate would end the observer (§6.2); that is the client's part to try.
            guard service.configuration.batchWindow == .zero, !observerEnded, !observerLive.values.contains(request)
            else {
                return
            }
            let observer =
                observer
                ?? service.openSession(
                    client: DNSClient(address: [127, 0, 0, 1], port: 853, transport: .tcp), transport: observerTransport
                )
            self.observer = observer
            let id = observerNextID
            observerNextID &+= 1
            step(messageStep: false, observerRequest: (id, request)) { _ in
                observer.receive(DSOMessage(id: id, tlvs: [request.tlv]).encode())
            }
        default:
            let id = input.u16()
            let type = DSOHarness.tlvTypes[Int(input.byte()) % DSOHarness.tlvTypes.count]
            let length = Int(input.byte())
            let flags = input.byte()
            var message = DSOMessage(
                id: id, isResponse: flags & 1 != 0, rcode: flags & 0x10 != 0 ? .refused : .noError,
                tlvs: [DSOTLV(type: type, data: input.take(length))])
            if flags & 2 != 0 { message.tlvs.append(.padding(Int(flags >> 5) * 9)) }
            if flags & 4 != 0 { message.tlvs.append(DSOTLV(type: 0xF7FF, data: [1, 2, 3])) }
            if flags & 8 != 0 { message.tlvs.append(.keepalive(inactivityMilliseconds: 1, keepaliveMilliseconds: 2)) }
            var wire = message.encode()
            if flags & 0x20 != 0, wire.count >= 12 { wire[5] = 1 }  // QDCOUNT 1: FORMERR (§5.4)
            if flags & 0x40 != 0, wire.count > 13 { wire.removeLast() }  // the last TLV overruns
            deliver(wire)
        }
    }

    /// A message from the client, routed as `DSOSessionHandler` does: OPCODE 6 to the session
    /// (opened by the first one; after an end the client reconnects), anything else is an
    /// ordinary query, noted by a live session.
    mutating func deliver(_ message: [UInt8]) {
        let isDSO = message.count >= 12 && (message[2] >> 3) & 0x0F == 6
        guard isDSO else { return connectionQuery(message) }
        if ended {
            if session != nil { retired.append(transport) }
            transport = CaptureTransport()
            session = service.openSession(
                client: DNSClient(address: client, port: 853, transport: .tcp), transport: transport)
            ended = false
            live = [:]
            unsubscribed = []
        }
        let session = session!
        step(messageStep: true, delivered: message) { _ in session.receive(message) }
    }

    /// An ordinary query on the connection: answered by the proxy with the client's address.
    mutating func connectionQuery(_ message: [UInt8]) {
        let session = ended ? nil : session
        step(messageStep: true) { run in
            session?.noteQuery(message)
            run.proxy.handle(
                query: message, from: DNSClient(address: run.client, port: 853, transport: .tcp), respond: { _ in })
        }
    }

    mutating func connectionEnded() {
        ended = true
        live = [:]
        unsubscribed = []
    }

    // MARK: Checks

    /// Runs one operation, then checks what the session sent during it. `messageStep`: the
    /// client's own message (the ACL checks apply to what it caused); `delivered`: a DSO
    /// message handed to the session.
    mutating func step(
        messageStep: Bool, delivered: [UInt8]? = nil, observerRequest: (UInt16, PushSubscribe)? = nil,
        _ body: (inout DSORun) -> Void
    ) {
        let wasOpen = !ended
        let startsBefore = backend.all.count
        let reconfirmsBefore = backend.reconfirms.count
        body(&self)
        let view = DSOHarness.views[configuration]
        for old in retired where !old.take().isEmpty {
            violation("a message sent (or a close) after the connection ended")
        }

        // The request this step delivered, if the session may answer it.
        var request: (id: UInt16, message: DSOMessage?)?
        if wasOpen, let delivered, let header = MessageHeader(delivered), !header.isResponse, header.id != 0 {
            request = (header.id, try? DSOMessage(wire: delivered))
        }
        let decoded = delivered.flatMap { try? DSOMessage(wire: $0) }

        var responses = 0
        var retryDelayPending = false
        for event in transport.take() {
            if DSOHarness.tracing { traceEvent(event) }
            if retryDelayPending, case .send = event { violation("a message after the Retry Delay, before the close") }
            switch event {
            case .close, .awaitClose:
                if ended { violation("the connection is closed twice (or after the client closed it)") }
                ended = true
                retryDelayPending = false
            case .send(let bytes):
                if ended { violation("a message sent after the connection was closed") }
                let message: DSOMessage
                do {
                    message = try DSOMessage(wire: bytes)
                } catch {
                    violation("the session sent something that is not DSO: \(error)")
                }
                if bytes.count > DSOMessage.maxPushMessageSize { violation("a DSO message of \(bytes.count) octets") }
                if message.isResponse {
                    responses += 1
                    checkResponse(message, octets: bytes.count, to: request, number: responses, view: view)
                } else {
                    guard message.id == 0 else { violation("the server sent a request (ID \(message.id))") }
                    switch message.primary?.type {
                    case DSOTLV.pushType:
                        checkPush(message, view: view)
                    case DSOTLV.retryDelayType:
                        retryDelayPending = true
                    default:
                        violation("a unidirectional message with primary TLV \(message.primary?.type ?? 0)")
                    }
                }
            }
        }
        if retryDelayPending { violation("a Retry Delay without the close after it") }
        checkObserver(request: observerRequest, view: view, clientStep: messageStep)
        if let request, !ended, responses != 1 {
            violation("\(responses) responses to request \(request.id) on an open session")
        }
        // UNSUBSCRIBE on a session that stays open took the subscription away.
        if !ended, let decoded, decoded.isUnidirectional, let primary = decoded.primary,
            primary.type == DSOTLV.unsubscribeType, let unsubscribe = try? PushUnsubscribe(tlv: primary),
            let gone = live.removeValue(forKey: unsubscribe.subscriptionID)
        {
            unsubscribed.append(gone)
        }
        if ended {
            live = [:]
            unsubscribed = []
        }

        // The counts: the service's follow the NOERROR responses; nothing outlives the session.
        // The observer, when it is open, was admitted: its first request would have ended it.
        let observerAlive = observer != nil && !observerEnded
        if ended, service.sessionCount != (observerAlive ? 1 : 0) {
            violation("\(service.sessionCount) sessions counted after the session ended")
        }
        if service.subscriptionCount != live.count + observerLive.count {
            violation(
                "the service counts \(service.subscriptionCount) subscriptions, \(live.count) + \(observerLive.count) were answered NOERROR"
            )
        }
        if live.isEmpty, proxySubscriptions(of: session) != 0 {
            violation(
                "the proxy holds \(proxySubscriptions(of: session)) subscriptions of a session that has none (leaked)")
        }
        if observerLive.isEmpty, proxySubscriptions(of: observer) != 0 {
            violation(
                "the proxy holds \(proxySubscriptions(of: observer)) subscriptions of the observer, which has none")
        }

        // ACL and views.
        guard !DSOHarness.skipped.contains("acl") else { return }
        if !view.admits(client) {
            if proxySubscriptions(of: session) != 0 {
                aclViolation(
                    "the proxy holds \(proxySubscriptions(of: session)) subscriptions of a client the ACL refuses")
            }
            if messageStep, backend.all.count != startsBefore {
                aclViolation("a client the ACL refuses started \(backend.all.count - startsBefore) mDNS queries")
            }
            if messageStep, backend.reconfirms.count != reconfirmsBefore {
                aclViolation("a client the ACL refuses had mDNS reconfirm a record")
            }
        }
        if messageStep {
            for handle in backend.all.dropFirst(startsBefore)
            where view.hides(interface: handle.question.interface, from: client) {
                aclViolation("a client that may not see \(handle.question.interface) started an mDNS query there")
            }
            for question in backend.reconfirms.dropFirst(reconfirmsBefore)
            where view.hides(interface: question.interface, from: client) {
                aclViolation("a client that may not see \(question.interface) had mDNS reconfirm a record there")
            }
        }
        if !DSOHarness.skipped.contains("revoke"), !ended,
            let kept = live.values.first(where: { !view.admits(client) || view.hides($0.name, from: client) })
        {
            aclViolation(
                "[revoke] the session goes on holding a subscription (\(kept.name) \(kept.type)) the configuration no longer gives its client"
            )
        }
    }

    /// The proxy's subscriptions of one session (its subscription table, through `@testable`).
    func proxySubscriptions(of session: PushSession?) -> Int {
        guard let session else { return 0 }
        return proxy.state.withLock { state in
            state.subscriptions.byKey.values.reduce(0) { $0 + $1.count { $0.session == session.id } }
        }
    }

    /// The observer's messages: responses to its SUBSCRIBE of this step, PUSHes of its own
    /// subscriptions only, Retry Delay then close. During a message of the client, nothing the
    /// client may not cause: no PUSH at all when the ACL refuses it, none of a link it may not see.
    mutating func checkObserver(request: (UInt16, PushSubscribe)?, view: DSOView, clientStep: Bool) {
        var responded = false
        var retryDelayPending = false
        for event in observerTransport.take() {
            if DSOHarness.tracing {
                trace("  (observer)")
                traceEvent(event)
            }
            if retryDelayPending, case .send = event { violation("observer: a message after the Retry Delay") }
            switch event {
            case .close, .awaitClose:
                if observerEnded { violation("observer: the connection is closed twice") }
                observerEnded = true
                observerLive = [:]
                retryDelayPending = false
            case .send(let bytes):
                if observerEnded { violation("observer: a message sent after the connection was closed") }
                guard let message = try? DSOMessage(wire: bytes) else { violation("observer: not DSO") }
                if message.isResponse {
                    guard let (id, subscribe) = request, message.id == id, !responded else {
                        violation("observer: a response (ID \(message.id)) to no request")
                    }
                    responded = true
                    if message.rcode == .noError { observerLive[id] = subscribe }
                    continue
                }
                guard message.id == 0, let primary = message.primary else {
                    violation("observer: a request from the server")
                }
                if primary.type == DSOTLV.retryDelayType {
                    retryDelayPending = true
                    continue
                }
                guard primary.type == DSOTLV.pushType, let push = try? PushNotification(tlv: primary) else {
                    violation("observer: a unidirectional message with primary TLV \(primary.type)")
                }
                for change in push.changes {
                    if !observerLive.values.contains(where: { Self.covers($0, change) }) {
                        violation("observer: a PUSH of \(change.name) \(change.type) with no subscription of its own")
                    }
                    guard clientStep, !DSOHarness.skipped.contains("acl") else { continue }
                    if !view.admits(client) {
                        aclViolation(
                            "a message of a client the ACL refuses pushed \(change.name) \(change.type) to another session"
                        )
                    }
                    if view.hides(change.name, from: client) {
                        aclViolation(
                            "a message of a client that may not see \(change.name) pushed it to another session")
                    }
                }
            }
        }
        if retryDelayPending { violation("observer: a Retry Delay without the close after it") }
        if request != nil, !observerEnded, !responded { violation("observer: its SUBSCRIBE went unanswered") }
    }

    static func covers(_ subscription: PushSubscribe, _ change: PushChange) -> Bool {
        subscription.name == change.name && (subscription.type == .any || subscription.type == change.type)
            && (subscription.rrClass == .any || subscription.rrClass == change.rrClass)
    }

    func traceEvent(_ event: CaptureTransport.Event) {
        switch event {
        case .send(let bytes):
            if let message = try? DSOMessage(wire: bytes) {
                let push = message.primary.flatMap { try? PushNotification(tlv: $0) }
                trace(
                    "  sent ID \(message.id) QR \(message.isResponse) RCODE \(message.rcode) TLVs \(message.tlvs.map(\.type))"
                        + (push.map { " changes \($0.changes.map { "\($0.name) \($0.type) ttl \($0.ttl)" })" } ?? ""))
            } else {
                trace("  sent \(bytes.count) undecodable octets")
            }
        case .close(let abort): trace("  close(abort: \(abort)) at t=\(clock.now())")
        case .awaitClose(let grace): trace("  awaitClose(within: \(grace)) at t=\(clock.now())")
        }
    }

    mutating func checkResponse(
        _ response: DSOMessage, octets: Int, to request: (id: UInt16, message: DSOMessage?)?, number: Int, view: DSOView
    ) {
        guard let request else { violation("a response (ID \(response.id)) with no request delivered") }
        guard response.id == request.id else { violation("response ID \(response.id) to request \(request.id)") }
        guard number == 1 else { violation("\(number) responses to request \(request.id)") }
        guard let message = request.message, let primary = message.primary else { return }
        if message.additional.contains(where: { $0.type == DSOTLV.paddingType }), octets % 468 != 0 {
            violation("a padded request got a response of \(octets) octets (not a multiple of 468)")
        }
        if primary.type == DSOTLV.keepaliveType, response.rcode == .noError {
            let keepalives = response.tlvs.filter { $0.type == DSOTLV.keepaliveType }
            guard keepalives.count == 1, keepalives[0].keepaliveValues != nil, response.primary == keepalives[0] else {
                violation("a Keepalive NOERROR response without exactly one Keepalive TLV first")
            }
        }
        guard primary.type == DSOTLV.subscribeType, response.rcode == .noError else { return }
        // A new subscription: its PUSHes may follow from now on.
        guard let subscribe = try? PushSubscribe(tlv: primary) else { violation("NOERROR to a malformed SUBSCRIBE") }
        if live[request.id] != nil { violation("NOERROR to a SUBSCRIBE reusing the live ID \(request.id)") }
        if live.values.contains(where: {
            $0.name == subscribe.name && $0.type == subscribe.type && $0.rrClass == subscribe.rrClass
        }) {
            violation("NOERROR to a duplicate SUBSCRIBE for \(subscribe.name) \(subscribe.type)")
        }
        if !DSOHarness.skipped.contains("acl") {
            if !view.admits(client) { aclViolation("NOERROR to a SUBSCRIBE from a client the ACL refuses") }
            if view.hides(subscribe.name, from: client) {
                aclViolation("NOERROR to a SUBSCRIBE for \(subscribe.name) from a client that may not see it")
            }
        }
        live[request.id] = subscribe
    }

    mutating func checkPush(_ message: DSOMessage, view: DSOView) {
        let changes: [PushChange]
        do {
            changes = try PushNotification(tlv: message.primary!).changes
        } catch {
            violation("a PUSH that does not decode: \(error)")
        }
        if message.tlvs.count != 1 { violation("a PUSH with \(message.tlvs.count) TLVs") }
        for change in changes {
            func covers(_ subscription: PushSubscribe) -> Bool { Self.covers(subscription, change) }
            if !DSOHarness.skipped.contains("acl") {
                if !view.admits(client) { aclViolation("a PUSH to a client the ACL refuses: \(change.name)") }
                if view.hides(change.name, from: client) {
                    aclViolation("a PUSH of \(change.name) to a client that may not see it")
                }
            }
            if live.values.contains(where: covers) { continue }
            if unsubscribed.contains(where: covers) {
                if DSOHarness.skipped.contains("unsubscribe") { continue }
                violation("[unsubscribe] a PUSH of \(change.name) \(change.type) after its UNSUBSCRIBE")
            }
            violation("a PUSH of \(change.name) \(change.type) with no subscription answered NOERROR before it")
        }
    }

    // MARK: End of input

    mutating func finish() {
        if DSOHarness.tracing { trace("end of input, t=\(clock.now())") }
        if !ended, let session {
            if endByTimeout {
                // §6.5: twice the keepalive interval (at least 10 s) without traffic in either
                // direction ends it. Timers armed earlier may still push (the batch and
                // collection windows, the 6 s mDNS window), each push restarting the count.
                let limit = max(service.configuration.keepaliveInterval, .seconds(10)) * 2 + .seconds(1)
                for _ in 0..<4 where !ended {
                    step(messageStep: false) { run in run.clock.advance(by: limit) }
                }
                if !ended { violation("a silent session outlived four keepalive limits") }
            } else {
                step(messageStep: false) { run in
                    session.connectionClosed()
                    run.connectionEnded()
                }
            }
        }
        if let observer, !observerEnded {
            step(messageStep: false) { run in
                observer.connectionClosed()
                run.observerEnded = true
                run.observerLive = [:]
            }
        }
        // Past the browse idle timeout and the sweep: every mDNS query is released unless a
        // leaked subscription still pins its browse.
        let idle = DSOHarness.configurations[configuration].browseIdleTimeout
        step(messageStep: false) { run in run.clock.advance(by: idle * 2 + idle / 4) }
        if proxy.subscriptionCount != 0 { violation("\(proxy.subscriptionCount) subscriptions left in the proxy") }
        if service.sessionCount != 0 || service.subscriptionCount != 0 {
            violation(
                "the service still counts \(service.sessionCount) sessions, \(service.subscriptionCount) subscriptions")
        }
        let live = backend.live
        if !live.isEmpty { violation("\(live.count) mDNS queries never released, e.g. \(live[0].question)") }
    }
}

/// Who may see what under one configuration, worked out here rather than asked of the proxy.
struct DSOView {
    let configuration: ProxyConfiguration
    let catalog: Catalog

    init(_ configuration: ProxyConfiguration) {
        self.configuration = configuration
        self.catalog = Catalog(configuration: configuration)
    }

    func admits(_ client: [UInt8]) -> Bool {
        guard let allowed = configuration.allowedClients else { return true }
        return allowed.contains { $0.contains(client) }
    }

    static func hides(_ link: Link, from client: [UInt8]) -> Bool {
        guard let clients = link.clients else { return false }
        return !clients.contains { $0.contains(client) }
    }

    func hides(_ name: DNSName, from client: [UInt8]) -> Bool {
        guard let link = catalog.zone(containing: name)?.link else { return false }
        return Self.hides(link, from: client)
    }

    func hides(interface: String, from client: [UInt8]) -> Bool {
        guard let link = configuration.links.first(where: { $0.interface == interface }) else { return false }
        return Self.hides(link, from: client)
    }
}

/// A line of FUZZ_DSO_TRACE output, on stderr (unbuffered: it survives the crash).
func trace(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

func violation(_ why: String) -> Never {
    fatalError("dso: \(why)")
}

/// The separate, clearly marked ACL check (FUZZ_DSO_SKIP=acl turns it off).
func aclViolation(_ why: String) -> Never {
    fatalError("dso [acl]: \(why)")
}
#endif
