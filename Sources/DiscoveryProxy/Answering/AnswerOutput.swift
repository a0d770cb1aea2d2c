import DNSWire
import Logging
import Metrics
import Synchronization

/// The last step of every query: encodes the reply within the client's size limit (a reply
/// that cannot be encoded becomes SERVFAIL), shares cache-hit answers between clients
/// (`AnswerMemo`), hands the front end a `ReplayTicket` where the answer may be replayed,
/// and records the answer's metrics.
final class AnswerOutput: Sendable {
    let metrics: ProxyMetrics
    private let memo = Mutex(AnswerMemo())
    /// Client queries taken (`began`) and not yet answered (`send`).
    private let unanswered = Atomic<Int>(0)
    private let scheduler: any ProxyScheduler
    private let logger: Logger

    init(scheduler: any ProxyScheduler, logger: Logger, metrics: ProxyMetrics) {
        self.metrics = metrics
        self.scheduler = scheduler
        self.logger = logger
    }

    /// A client query is taken: it is answered through `send` once.
    func began() { unanswered.add(1, ordering: .relaxed) }

    /// Client queries taken and not yet answered: waiting for mDNS, or being answered.
    var inFlight: Int { unanswered.load(ordering: .relaxed) }

    /// A hit another query with the same bytes has already encoded in `epoch`, with `id`.
    func memoized(_ key: AnswerMemo.Key, id: UInt16, epoch: UInt64) -> AnswerMemo.Answer? {
        memo.withLock { $0.answer(to: key, id: id, epoch: epoch) }
    }

    /// Encodes and sends `message`; `replay` says whether (and as what) it may be replayed.
    func finish(_ message: Message, _ context: QueryContext, cache: CacheOutcome, replay: ReplayTicket.Kind? = nil) {
        switch context.asker {
        case .part(let deliver), .proxy(let deliver):
            deliver(message)
            return
        case .client:
            break
        }
        var message = message
        var replay = replay
        if let keepalive = context.tcpKeepalive, message.edns != nil {
            message.edns?.options.append(.tcpKeepalive(timeout: keepalive))
            replay = nil
        }
        var sent = message
        var bytes: [UInt8]?
        do {
            bytes = try message.encode(limit: context.limit)
        } catch {
            logger.error("cannot encode answer", metadata: ["dns.error": "\(error)", "dns.id": "\(message.id)"])
            sent.answers = []
            sent.authority = []
            sent.additional = []
            sent.rcode = .servFail
            bytes = try? sent.encode(limit: context.limit)
        }
        let rcode = "\(sent.rcode)"
        // Only answers as asked are replayed or shared, not a SERVFAIL put in their place.
        let replayable = bytes != nil && sent.rcode == message.rcode ? replay : nil
        if replayable == .hit, let bytes, let key = context.memoKey {
            memo.withLock { $0.store(AnswerMemo.Answer(bytes: bytes, rcode: rcode), for: key, epoch: context.epoch) }
        }
        send(bytes, rcode: rcode, context, cache: cache, replay: replayable)
    }

    /// Sends encoded bytes (nil: nothing) to a client with a replay ticket of kind `replay`,
    /// and records the answer's metrics.
    func send(
        _ bytes: [UInt8]?, rcode: String, _ context: QueryContext, cache: CacheOutcome, replay: ReplayTicket.Kind?
    ) {
        guard case .client(let transport, let respond) = context.asker else { return }
        let counters = metrics.counters(transport: transport.rawValue, qtype: context.qtype, rcode: rcode)
        let ticket = replay.map { kind in
            ReplayTicket(epoch: context.epoch, lifetime: context.replayLifetime, kind: kind, counters: counters)
        }
        // Counted before the front end has it, so that a reader who saw the answer sees it counted.
        metrics.answered(counters, cache: cache.rawValue, seconds: scheduler.now() - context.started)
        unanswered.subtract(1, ordering: .relaxed)
        respond(ProxyReply(bytes: bytes, replay: ticket))
    }
}
