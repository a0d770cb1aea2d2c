import DNSWire
import Synchronization

/// RFC 8766 §5.5.3: an NSEC (or NSEC3) query is answered with one synthesized NSEC for the
/// queried name alone, its type bitmap saying which types exist there.
///
/// The RFC has the proxy send an mDNS ANY query; avahi refuses ANY ("pattern") keys for
/// record browsers (`AVAHI_ERR_IS_PATTERN`), so the proxy asks instead, through the shared
/// browses every other query uses, each type the name can hold in DNS-SD's structure
/// (`Catalog.recordTypes(at:)`: SRV and TXT of an instance, PTR of a service type, A and
/// AAAA of a host). Each type is one part, answered like any query (a cache hit at once, a
/// miss at its first results or the negative timeout); the NSEC goes out when every part
/// has answered. Raw mDNS NSEC records are never forwarded: they lack the NSEC bit.
///
/// - NSEC query: the NSEC in the answer section.
/// - NSEC3 query: NODATA, with the SOA and the same NSEC in the authority section (the shape
///   of RFC 4035 §3.1.3.1's NODATA proof). The zones are not signed, so there are no NSEC3
///   parameters to hash with.
///
/// The next name is `\000.<owner>`, the name's immediate successor (RFC 4470 §3), so the NSEC
/// denies no other name; the owner itself when that would be too long.
final class NSECSynthesis: Sendable {
    private struct State {
        var remaining: Int
        var launching = true
        var present: Set<RRType> = []
        var ttl: UInt32
        var failure: RCode?
    }

    /// The reply's skeleton (`AnswerBuilder.reply(to:)`): header, question, OPT.
    private let skeleton: Message
    private let zone: ZoneRecords
    private let state: Mutex<State>
    /// Called once, with the reply and whether every part was a cache hit.
    private let complete: @Sendable (Message, _ fromCache: Bool) -> Void

    init(
        skeleton: Message, zone: ZoneRecords, types: Int, ttlCap: UInt32,
        complete: @escaping @Sendable (Message, _ fromCache: Bool) -> Void
    ) {
        self.skeleton = skeleton
        self.zone = zone
        self.state = Mutex(State(remaining: types, ttl: ttlCap))
        self.complete = complete
    }

    /// The NSEC for `owner` with `types` and the NSEC bit set (unicast DNS sets it; mDNS does not).
    static func record(owner: DNSName, types: some Sequence<RRType>, ttl: UInt32) -> ResourceRecord {
        let next = (try? owner.prepending([[0]])) ?? owner
        let bitmap = Set(types).union([.nsec]).sorted { $0.rawValue < $1.rawValue }
        return ResourceRecord(name: owner, type: .nsec, ttl: ttl, rdata: .nsec(next: next, types: bitmap))
    }

    /// Where the answer to the part asking `type` goes: present when it has answers, its TTLs
    /// (a provisional negative's included) bounding the NSEC's.
    func part(_ type: RRType) -> @Sendable (Message) -> Void {
        { [self] answer in
            let done = state.withLock { state -> Bool in
                if answer.rcode != .noError {
                    state.failure = state.failure ?? answer.rcode
                } else if !answer.answers.isEmpty {
                    state.present.insert(type)
                }
                for record in answer.answers + answer.authority { state.ttl = min(state.ttl, record.ttl) }
                state.remaining -= 1
                return state.remaining == 0 && !state.launching
            }
            if done { finish(fromCache: false) }
        }
    }

    /// Every part has been asked: answers now if all of them have answered already.
    func launched() {
        let done = state.withLock { state -> Bool in
            state.launching = false
            return state.remaining == 0
        }
        if done { finish(fromCache: true) }
    }

    private func finish(fromCache: Bool) {
        let state = state.withLock { $0 }
        var reply = skeleton
        let question = skeleton.questions[0]
        if let failure = state.failure {
            reply.authoritative = false
            reply.rcode = failure
        } else {
            let nsec = Self.record(owner: question.name, types: state.present, ttl: state.ttl)
            if question.type == .nsec {
                reply.answers = [nsec]
            } else {
                reply.authority = [zone.soa(negativeTTL: state.ttl), nsec]
            }
        }
        complete(reply, fromCache)
    }
}
