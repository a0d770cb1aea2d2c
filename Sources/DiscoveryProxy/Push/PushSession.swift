import DNSWire
import Logging
import Synchronization

/// Where a DSO session's messages go: one stream connection (TCP or TLS). `send` queues a
/// whole message (without the length prefix) and never calls back into the session; sends
/// and the close are carried out in the order they were made.
public protocol PushTransport: Sendable {
    func send(_ message: [UInt8])
    /// `abort`: reset the connection (RFC 8490 §5.3 fatal error) instead of closing it.
    func close(abort: Bool)
    /// The client was sent a Retry Delay: send nothing more, read nothing more, and reset
    /// the connection unless the client has closed it within `grace` (RFC 8490 §6.6.1).
    func awaitClose(within grace: Duration)
}

/// One DSO session (RFC 8490) carrying DNS Push subscriptions (RFC 8765), as a state machine
/// fed with decoded messages and timer ticks; no sockets. Messages are acted on in order and
/// every response is sent as soon as it is known (§5.4); PUSHes for a subscription never
/// precede its SUBSCRIBE response.
///
/// Locking: the session's own mutex is never held while calling into the proxy (which may
/// call avahi); the transport only queues, so sending under the mutex keeps the order.
public final class PushSession: PushSink, Sendable {
    let id: Int
    /// Who holds the session, for the client ACL, the link views and the private realms.
    let client: DNSClient
    /// Strong: a session's timers may outlive the service's last other reference; the
    /// service drops its sessions when they end.
    private let service: PushService
    private let transport: any PushTransport
    private let logger: Logger
    private let state: Mutex<State>

    private enum Phase {
        /// Connected, no DSO request answered with NOERROR yet (§5.1).
        case new
        case established
        /// Over the session limit: the first request is refused, then the connection closes.
        case refused
        case closed
    }

    private struct Subscription {
        var request: PushSubscribe
        var keys: [BrowseKey] = []
        /// False while the proxy is being asked; changes wait in `queued` until the response went.
        var ready = false
        var queued: [PushChange] = []
    }

    private struct State {
        var phase: Phase
        var subscriptions: [UInt16: Subscription] = [:]
        /// Changes waiting for the batch window, by subscription: an UNSUBSCRIBE in the window
        /// drops its own (RFC 8765 §6.4: no PUSH for it after UNSUBSCRIBE).
        var pending: [(subscription: UInt16, change: PushChange)] = []
        var flushArmed = false
        /// Last message received other than a Keepalive (the inactivity timer, §6.2).
        var lastActivity: Duration
        /// Last message in either direction (the keepalive timer, §6.5).
        var lastTraffic: Duration
        var timer: (any ProxyTimer)?
    }

    init(
        id: Int, service: PushService, transport: any PushTransport, admitted: Bool, client: DNSClient,
        logger: Logger
    ) {
        self.id = id
        self.client = client
        self.service = service
        self.transport = transport
        self.logger = logger
        let now = service.scheduler.now()
        self.state = Mutex(State(phase: admitted ? .new : .refused, lastActivity: now, lastTraffic: now))
        armTimer(after: service.idleLimit)
    }

    private var configuration: PushConfiguration { service.configuration }

    // MARK: Input

    /// A DSO message (OPCODE 6) from the client.
    public func receive(_ bytes: [UInt8]) {
        let message: DSOMessage
        do {
            message = try DSOMessage(wire: bytes)
        } catch {
            // §5.4: non-zero counts or broken TLV framing. A request gets FORMERR; anything
            // else cannot be answered and is fatal.
            guard let header = MessageHeader(bytes), !header.isResponse, header.id != 0 else {
                return fail("undecodable DSO message: \(error)")
            }
            noteReceived(keepalive: false)
            return respond(to: header.id, rcode: .formErr, extra: [])
        }
        let isKeepalive = message.primary?.type == DSOTLV.keepaliveType
        guard noteReceived(keepalive: isKeepalive) else { return }
        if message.isResponse {
            // We send no requests, so every response carries an unknown ID (§5.4: fatal).
            return fail("DSO response from the client (ID \(message.id))")
        }
        if message.isUnidirectional {
            return receiveUnidirectional(message)
        }
        receiveRequest(message)
    }

    /// A non-DSO message on the same connection (an ordinary query): it counts as activity,
    /// and once the session exists an EDNS TCP keepalive option in it is fatal (§7.1.2).
    public func noteQuery(_ bytes: [UInt8]) {
        guard noteReceived(keepalive: false) else { return }
        guard state.withLock({ $0.phase == .established }) else { return }
        if let query = try? Message(wire: bytes), query.edns?.options.contains(where: { $0.code == 11 }) == true {
            fail("edns-tcp-keepalive inside a DSO session")
        }
    }

    /// The connection went away (client close, reset, or our own close).
    public func connectionClosed() {
        end(.client)
    }

    /// Server shutdown: an established session is told to go away with a unidirectional Retry
    /// Delay (§7.2, RCODE NOERROR) and given time to close; any other is closed.
    public func shutdown() {
        goAway(
            .shutdown, rcode: .noError,
            retryDelay: .retryDelay(milliseconds: Self.milliseconds(configuration.busyRetryDelay)))
    }

    /// After a reload: a client the new ACL refuses, or one holding a subscription it may no
    /// longer see (a view, or the zone is gone), is told to go away with a unidirectional
    /// Retry Delay (REFUSED); reconnecting, it is asked again.
    func review(_ catalog: Catalog) {
        let client = self.client
        let revoked = state.withLock { state in
            state.phase == .established
                && (!catalog.admits(client)
                    || state.subscriptions.values.contains {
                        catalog.zone(containing: $0.request.name) == nil
                            || catalog.hiddenLink(holding: $0.request.name, from: client) != nil
                    })
        }
        guard revoked else { return }
        logger.info(
            "DNS Push session revoked: the new configuration refuses its client or hides a subscription",
            metadata: ["dso.session": "\(id)"])
        goAway(.refused, rcode: .refused, retryDelay: Self.retryDelay(for: .refused))
    }

    /// An established session gets a unidirectional Retry Delay (§7.2), then `leave`; one not
    /// yet established, to which no DSO message may be sent (§5.1), is closed.
    private func goAway(_ reason: PushSessionEnd, rcode: RCode, retryDelay: DSOTLV) {
        let established = state.withLock { state -> Bool in
            guard state.phase == .established else { return false }
            let message = DSOMessage(id: 0, rcode: rcode, tlvs: [retryDelay])
            transport.send(message.encode())
            return true
        }
        if established { leave(reason) } else { end(reason, close: true) }
    }

    /// After a Retry Delay (§6.6.1): the session ends now, and the client has
    /// `retryDelayGrace` to close the connection before it is reset.
    private func leave(_ reason: PushSessionEnd) {
        end(reason)
        transport.awaitClose(within: PushConfiguration.retryDelayGrace)
    }

    /// Returns false when the session is already over.
    @discardableResult
    private func noteReceived(keepalive: Bool) -> Bool {
        let now = service.scheduler.now()
        return state.withLock { state in
            guard state.phase != .closed else { return false }
            state.lastTraffic = now
            if !keepalive { state.lastActivity = now }
            return true
        }
    }

    private func receiveRequest(_ message: DSOMessage) {
        let padded = message.additional.contains { $0.type == DSOTLV.paddingType }
        // The client ACL, asked again on every request (a reload may change it): a client it
        // refuses holds no session. Its request is refused, counted like a refused query, and
        // it is told to go away (RFC 8490 §5.1: the session never becomes established).
        guard service.proxy.catalog.admits(client) else {
            service.proxy.noteRefused(.client, client: client, asking: Self.name(of: message.primary?.type))
            respond(to: message.id, rcode: .refused, extra: [Self.retryDelay(for: .refused)], padded: padded)
            return leave(.refused)
        }
        let phase = state.withLock { $0.phase }
        if phase == .refused {
            // Over the session limit: busy, come back later (§7.2), then close.
            respond(
                to: message.id, rcode: .refused,
                extra: [.retryDelay(milliseconds: Self.milliseconds(configuration.busyRetryDelay))],
                padded: padded)
            return leave(.limit)
        }
        if state.withLock({ $0.subscriptions[message.id] != nil }) {
            // The ID of a live SUBSCRIBE stays in use until UNSUBSCRIBE (RFC 8765 §6.2).
            return fail("request reuses the message ID \(message.id) of a live subscription")
        }
        guard let primary = message.primary else {
            return respond(to: message.id, rcode: .formErr, extra: [], padded: padded)
        }
        switch primary.type {
        case DSOTLV.keepaliveType:
            guard primary.keepaliveValues != nil else {
                return respond(to: message.id, rcode: .formErr, extra: [], padded: padded)
            }
            // §7.1: the response carries exactly one Keepalive TLV, with the server's values.
            let keepalive = DSOTLV.keepalive(
                inactivityMilliseconds: Self.milliseconds(configuration.inactivityTimeout),
                keepaliveMilliseconds: Self.milliseconds(
                    max(configuration.keepaliveInterval, PushConfiguration.minimumKeepalive)))
            respond(to: message.id, rcode: .noError, extra: [keepalive], padded: padded, establishes: true)
        case DSOTLV.subscribeType:
            subscribe(message, primary, padded: padded)
        case DSOTLV.retryDelayType:
            fail("Retry Delay from the client")  // §7.2: only servers send it
        case DSOTLV.paddingType, DSOTLV.pushType, DSOTLV.unsubscribeType, DSOTLV.reconfirmType:
            // Padding is never primary; PUSH goes the other way; the other two are unidirectional.
            respond(to: message.id, rcode: .formErr, extra: [], padded: padded)
        default:
            // §5.1.1: DSOTYPENI, without echoing the unknown TLV.
            respond(to: message.id, rcode: .dsoTypeNI, extra: [], padded: padded)
        }
    }

    private func receiveUnidirectional(_ message: DSOMessage) {
        guard state.withLock({ $0.phase == .established }) else {
            return fail("unidirectional DSO message before the session was established")  // §5.1
        }
        guard let primary = message.primary else { return fail("unidirectional DSO message without a TLV") }
        switch primary.type {
        case DSOTLV.unsubscribeType:
            guard let request = try? PushUnsubscribe(tlv: primary) else { return fail("malformed UNSUBSCRIBE") }
            let now = service.scheduler.now()
            let removed = state.withLock { state -> Subscription? in
                state.lastActivity = now
                // Batched changes go with it: a later SUBSCRIBE may reuse the ID (RFC 8765 §6.4).
                state.pending.removeAll { $0.subscription == request.subscriptionID }
                return state.subscriptions.removeValue(forKey: request.subscriptionID)
            }
            // RFC 8765 §6.4: an unknown ID is silently ignored.
            guard let removed else { return }
            service.subscriptionsChanged(by: -1)
            for key in removed.keys { service.proxy.unsubscribe(from: key, session: id, id: request.subscriptionID) }
        case DSOTLV.reconfirmType:
            guard let request = try? PushReconfirm(tlv: primary), request.type != .any, request.rrClass != .any else {
                return fail("malformed RECONFIRM")
            }
            service.proxy.reconfirm(request, from: client)
        default:
            // §5.4.5: an unknown (or misplaced) primary TLV in a unidirectional message: abort.
            fail("unidirectional DSO message with primary TLV \(primary.type)")
        }
    }

    // MARK: SUBSCRIBE

    private func subscribe(_ message: DSOMessage, _ primary: DSOTLV, padded: Bool) {
        guard let request = try? PushSubscribe(tlv: primary) else {
            return respond(to: message.id, rcode: .formErr, extra: [Self.retryDelay(for: .formErr)], padded: padded)
        }
        enum Check { case ok, duplicate, full }
        let check = state.withLock { state -> Check in
            if state.subscriptions.values.contains(where: {
                $0.request.name == request.name && $0.request.type == request.type
                    && $0.request.rrClass == request.rrClass
            }) {
                return .duplicate
            }
            if state.subscriptions.count >= configuration.maxSubscriptionsPerSession { return .full }
            state.subscriptions[message.id] = Subscription(request: request)
            return .ok
        }
        switch check {
        case .duplicate:
            // RFC 8765 §6.2: a duplicate SUBSCRIBE on one session is a fatal error.
            return fail("duplicate SUBSCRIBE for \(request.name) \(request.type)")
        case .full:
            return respond(
                to: message.id, rcode: .refused,
                extra: [.retryDelay(milliseconds: Self.milliseconds(configuration.busyRetryDelay))], padded: padded)
        case .ok:
            break
        }
        let outcome = service.proxy.subscribe(request, session: id, id: message.id, from: client, sink: self)
        switch outcome {
        case .notAuthoritative, .refused:
            let rcode: RCode = if case .notAuthoritative = outcome { .notAuth } else { .refused }
            state.withLock { _ = $0.subscriptions.removeValue(forKey: message.id) }
            respond(to: message.id, rcode: rcode, extra: [Self.retryDelay(for: rcode)], padded: padded)
        case .subscribed(let initial, let keys):
            let closed = state.withLock { state -> Bool in
                guard state.phase != .closed, var subscription = state.subscriptions[message.id] else { return true }
                subscription.keys = keys
                subscription.ready = true
                let changes = initial + subscription.queued
                subscription.queued = []
                state.subscriptions[message.id] = subscription
                // Answered at once, then a PUSH with what is known (RFC 8765 §6.2).
                sendResponse(to: message.id, rcode: .noError, extra: [], padded: padded, state: &state)
                state.phase = .established
                sendPushes(changes, state: &state)
                return false
            }
            if closed {
                for key in keys { service.proxy.unsubscribe(from: key, session: id, id: message.id) }
            } else {
                service.subscriptionsChanged(by: 1)
            }
        }
    }

    /// RFC 8765 §6.2.2: how long not to retry a SUBSCRIBE after each error.
    static func retryDelay(for rcode: RCode) -> DSOTLV {
        let seconds: UInt32 =
            switch rcode {
            case .servFail: 60
            case .notImp, .dsoTypeNI: 3600
            default: 300
            }
        return .retryDelay(milliseconds: seconds * 1000)
    }

    /// A DSO request's primary TLV, for logs.
    static func name(of type: UInt16?) -> String {
        switch type {
        case DSOTLV.keepaliveType: "Keepalive"
        case DSOTLV.subscribeType: "SUBSCRIBE"
        case DSOTLV.unsubscribeType: "UNSUBSCRIBE"
        case DSOTLV.reconfirmType: "RECONFIRM"
        case let type?: "DSO type \(type)"
        case nil: "DSO request without TLV"
        }
    }

    // MARK: Output

    func deliver(_ changes: [PushChange], subscription: UInt16) {
        let arm = state.withLock { state -> Bool in
            guard state.phase != .closed, var entry = state.subscriptions[subscription] else { return false }
            guard entry.ready else {
                entry.queued += changes
                state.subscriptions[subscription] = entry
                return false
            }
            state.pending += changes.map { (subscription, $0) }
            guard !state.flushArmed else { return false }
            state.flushArmed = true
            return true
        }
        guard arm else { return }
        if configuration.batchWindow == .zero {
            flush()
        } else {
            service.scheduler.schedule(after: configuration.batchWindow) { [weak self] in self?.flush() }
        }
    }

    private func flush() {
        state.withLock { state in
            state.flushArmed = false
            let changes = state.pending.filter { state.subscriptions[$0.subscription] != nil }.map(\.change)
            state.pending = []
            sendPushes(changes, state: &state)
        }
    }

    /// One or more PUSH messages (each ≤ 16,382 octets), each distinct change once (§6.3.1).
    private func sendPushes(_ changes: [PushChange], state: inout State) {
        guard !changes.isEmpty, state.phase != .closed else { return }
        var seen = Set<PushChange>()
        let unique = changes.filter { seen.insert($0).inserted }
        for message in PushNotification.messages(for: unique) {
            let bytes = message.encode()
            transport.send(bytes)
            service.metrics.pushSent(bytes: bytes.count)
        }
        state.lastTraffic = service.scheduler.now()
    }

    private func respond(
        to id: UInt16, rcode: RCode, extra: [DSOTLV], padded: Bool = false, establishes: Bool = false
    ) {
        state.withLock { state in
            guard state.phase != .closed else { return }
            sendResponse(to: id, rcode: rcode, extra: extra, padded: padded, state: &state)
            if establishes, state.phase == .new { state.phase = .established }
        }
    }

    private func sendResponse(to id: UInt16, rcode: RCode, extra: [DSOTLV], padded: Bool, state: inout State) {
        var response = DSOMessage(id: id, isResponse: true, rcode: rcode, tlvs: extra)
        if padded {
            // §7.3: a padded request gets a padded response; RFC 8467 §4.1 block of 468.
            let size = response.encode().count + 4
            response.tlvs.append(.padding((468 - size % 468) % 468))
        }
        transport.send(response.encode())
        state.lastTraffic = service.scheduler.now()
    }

    // MARK: Timers and ending

    private func armTimer(after delay: Duration) {
        let timer = service.scheduler.schedule(after: delay) { [weak self] in self?.timerFired() }
        let stale = state.withLock { state -> Bool in
            guard state.phase != .closed else { return true }
            state.timer?.cancel()
            state.timer = timer
            return false
        }
        if stale { timer.cancel() }
    }

    /// The inactivity limit applies only without subscriptions (§6.2: a session with an
    /// active subscription is never idle); the keepalive limit always.
    private func timerFired() {
        let now = service.scheduler.now()
        let verdict = state.withLock { state -> (PushSessionEnd?, Duration) in
            guard state.phase != .closed else { return (nil, .zero) }
            let keepaliveDeadline = state.lastTraffic + service.keepaliveLimit
            if now >= keepaliveDeadline { return (.keepalive, .zero) }
            var next = keepaliveDeadline
            if state.subscriptions.isEmpty {
                let idleDeadline = state.lastActivity + service.idleLimit
                if now >= idleDeadline { return (.inactivity, .zero) }
                next = min(next, idleDeadline)
            } else {
                next = min(next, now + service.idleLimit)
            }
            return (nil, next - now)
        }
        if let reason = verdict.0 {
            logger.debug(
                "DSO session timed out", metadata: ["dso.session": "\(id)", "dso.reason": "\(reason.rawValue)"])
            end(reason, close: true, abort: true)
        } else if verdict.1 > .zero {
            armTimer(after: verdict.1)
        }
    }

    /// A fatal protocol error (RFC 8490 §5.3): reset the connection.
    private func fail(_ why: String) {
        logger.debug("DSO protocol error: aborting", metadata: ["dso.session": "\(id)", "dso.error": "\(why)"])
        end(.protocolError, close: true, abort: true)
    }

    /// Ends the session once: drops its subscriptions (the browses stay shared with others),
    /// releases its slot, and closes the connection when asked.
    private func end(_ reason: PushSessionEnd, close: Bool = false, abort: Bool = false) {
        let ended = state.withLock { state -> [UInt16: Subscription]? in
            guard state.phase != .closed else { return nil }
            state.phase = .closed
            state.timer?.cancel()
            state.timer = nil
            state.pending = []
            let subscriptions = state.subscriptions
            state.subscriptions = [:]
            return subscriptions
        }
        guard let ended else { return }
        if close { transport.close(abort: abort) }
        let live = ended.filter { $0.value.ready }
        for (subscriptionID, subscription) in live {
            for key in subscription.keys { service.proxy.unsubscribe(from: key, session: id, id: subscriptionID) }
        }
        service.subscriptionsChanged(by: -live.count)
        service.sessionEnded(self, reason: reason)
    }

    static func milliseconds(_ duration: Duration) -> UInt32 {
        UInt32(clamping: duration.wholeMilliseconds)
    }
}
