/// Encoded cache-hit answers by query, shared by every client: a client's first query for a
/// question another client has asked since the last change gets a copy of that answer with
/// its own ID, instead of a snapshot, a `Message` and an ldns encoding (measured in
/// docs/BENCHMARKS.md: the copy is an order of magnitude cheaper).
///
/// The front ends' replay caches do the same per client and per event loop, without the
/// proxy; this is the shared level behind them, so that many clients asking the same few
/// questions (a site's laptops browsing for printers) cost one encoding, not one each.
///
/// Keyed by the query's bytes after the ID (name as spelled, flags, EDNS OPT) and the
/// transport (the size limit). Valid for one epoch only (`DiscoveryProxy.invalidateReplays`):
/// any change that could alter an answer retires every entry, as it retires replay tickets.
/// Bounded in entries and in answer bytes; when full it starts over.
struct AnswerMemo: Sendable {
    struct Key: Hashable, Sendable {
        /// The query without its ID.
        var query: [UInt8]
        var overTCP: Bool

        init(query message: [UInt8], overTCP: Bool) {
            self.query = Array(message.dropFirst(2))
            self.overTCP = overTCP
        }

        func hash(into hasher: inout Hasher) {
            query.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(overTCP)
        }
    }

    struct Answer: Sendable {
        /// The encoded answer; its ID is the first query's and is replaced on each use.
        var bytes: [UInt8]
        /// Its rcode as the metrics label it.
        var rcode: String
    }

    private var entries: [Key: Answer] = [:]
    /// The epoch all entries belong to.
    private var epoch: UInt64 = 0
    private var answerBytes = 0
    let maxEntries: Int
    let maxAnswerBytes: Int

    init(maxEntries: Int = 4096, maxAnswerBytes: Int = 1 << 20) {
        self.maxEntries = maxEntries
        self.maxAnswerBytes = maxAnswerBytes
    }

    var count: Int { entries.count }

    /// The answer stored for `key` in `epoch`, with `id` patched in.
    func answer(to key: Key, id: UInt16, epoch: UInt64) -> Answer? {
        guard epoch == self.epoch, var answer = entries[key], answer.bytes.count >= 2 else { return nil }
        answer.bytes[0] = UInt8(id >> 8)
        answer.bytes[1] = UInt8(id & 0xFF)
        return answer
    }

    /// Stores an answer built from the data of `epoch`. A newer epoch drops every older entry;
    /// an answer from an older epoch than the entries' is already out of date and not kept.
    mutating func store(_ answer: Answer, for key: Key, epoch: UInt64) {
        guard epoch >= self.epoch, answer.bytes.count <= maxAnswerBytes else { return }
        if epoch > self.epoch || entries.count >= maxEntries || answerBytes + answer.bytes.count > maxAnswerBytes {
            entries.removeAll(keepingCapacity: epoch == self.epoch)
            answerBytes = 0
            self.epoch = epoch
        }
        if let old = entries.updateValue(answer, forKey: key) { answerBytes -= old.bytes.count }
        answerBytes += answer.bytes.count
    }
}
