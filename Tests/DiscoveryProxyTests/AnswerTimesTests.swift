import DNSWire
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// What a link learns of its devices' answer times, and what it changes (docs/ARCHITECTURE.md,
/// "Slow links"): RFC 8766 §5.6 leaves the wait before "nothing" to the proxy; resolvers
/// bound it (1.2 s), and RFC 2308 §5 makes a short TTL the way to be asked again soon.
@Suite("Learned answer times")
struct AnswerTimesTests {
    static func ms(_ value: Int) -> Duration { .milliseconds(value) }
    func ms(_ value: Int) -> Duration { .milliseconds(value) }

    /// A link whose browses each got records at these ages (milliseconds).
    static func learned(_ browses: [[Int]]) -> AnswerTimes {
        var times = AnswerTimes()
        for (generation, ages) in browses.enumerated() {
            for (index, age) in ages.enumerated() {
                times.observe(generation: UInt32(generation), age: ms(age), isFirst: index == 0)
            }
        }
        return times
    }

    @Test("the usual figure is the second-longest: one outlier does not count, one browse teaches nothing")
    func usual() {
        #expect(AnswerTimes.secondLongest([ms(5)]) == nil)
        #expect(AnswerTimes.secondLongest([ms(30), ms(2900), ms(40), ms(35)]) == ms(40))
        #expect(Self.learned([[400]]).usualFirst == nil)
        let sleepy = Self.learned([[900], [1400], [1000]])
        #expect(sleepy.usualFirst == ms(1000) && sleepy.usualSpread == .zero)
    }

    @Test("records from avahi's cache, and records after the first round, teach nothing")
    func whatTeaches() {
        var times = Self.learned([[2], [3], [3500]])
        #expect(times.samples.isEmpty)
        times = Self.learned([[30, 250, 3600], [30, 600]])
        #expect(times.samples.map(\.last) == [ms(250), ms(600)] && times.usualSpread == nil, "two browses: not yet")
        times.observe(generation: 2, age: ms(40), isFirst: true)
        #expect(times.usualSpread == ms(220))
        // Only the link's last 16 browses count.
        times = Self.learned([[30, 1000], [30, 1000]] + Array(repeating: [30], count: 16))
        #expect(times.samples.count == AnswerTimes.capacity && times.usualSpread == .zero)
    }

    @Test("a slow link waits longer for its first answer, up to 1.2 s, never less than configured")
    func negativeTimeout() {
        let configured = ms(800)
        #expect(AnswerTimes().negativeTimeout(configured: configured) == configured)
        #expect(Self.learned([[60], [80], [40]]).negativeTimeout(configured: configured) == configured)
        #expect(Self.learned([[900], [1000], [700]]).negativeTimeout(configured: configured) == ms(1000))
        #expect(Self.learned([[1400], [1500]]).negativeTimeout(configured: configured) == ms(1200))
        #expect(Self.learned([[1400], [1500]]).negativeTimeout(configured: .seconds(6)) == .seconds(6))
        #expect(Self.learned([[1400], [1500]]).negativeTimeout(configured: .seconds(2)) == .seconds(2))
    }

    @Test("devices that answer at different times: the window lasts the usual spread, up to 1.2 s after the query")
    func window() {
        let window = ms(50)
        let prompt = Self.learned([[60, 61], [40], [50]])
        #expect(prompt.answerAt(startedAt: .zero, firstAt: ms(30), window: window, negativeTimeout: ms(800)) == ms(80))
        let three = Self.learned([[30, 250, 600], [35, 260, 610], [30]])
        #expect(three.answerAt(startedAt: .zero, firstAt: ms(30), window: window, negativeTimeout: ms(800)) == ms(625))
        let spread = Self.learned([[30, 70], [30, 70], [30]])
        #expect(
            spread.answerAt(startedAt: .zero, firstAt: ms(30), window: window, negativeTimeout: ms(800)) == ms(95),
            "a spread of 40 ms: 25 ms past it")
        #expect(
            three.answerAt(startedAt: ms(1000), firstAt: ms(1900), window: window, negativeTimeout: ms(800))
                == ms(2200), "at 1.2 s after the query")
        #expect(
            three.answerAt(startedAt: .zero, firstAt: ms(1190), window: window, negativeTimeout: ms(800))
                == ms(1240), "never sooner than the configured window")
    }

    @Test("an answer given within the usual spread expects more")
    func expectsMore() {
        var times = Self.learned([[30, 600], [30, 600]])
        times.observe(generation: 7, age: ms(30), isFirst: true)
        #expect(times.expectsMore(generation: 7, startedAt: .seconds(1), now: .seconds(1) + ms(500)))
        #expect(!times.expectsMore(generation: 7, startedAt: .seconds(1), now: .seconds(1) + ms(600)))
        #expect(!times.expectsMore(generation: 8, startedAt: .seconds(1), now: .seconds(1) + ms(100)), "no sample")
        #expect(!Self.learned([[30], [40], [50]]).expectsMore(generation: 2, startedAt: .zero, now: ms(51)))
        // A link that has taught one browse may be slow: up to 1.2 s, its answers are provisional.
        let unknown = Self.learned([[30]])
        #expect(unknown.expectsMore(generation: 0, startedAt: .zero, now: ms(1199)))
        #expect(!unknown.expectsMore(generation: 0, startedAt: .zero, now: ms(1200)))
    }
}

/// The same, through the cache: what a query on a learned link waits for and is told.
@Suite("Learned answer times in the cache")
struct LearnedBrowseTableTests {
    let link = Link(interface: "eth1", zone: try! DNSName("lab1.example."), subnets: [IPPrefix("192.0.2.0/24")!])
    var configuration: ProxyConfiguration

    init() {
        configuration = ProxyConfiguration(links: [link], serverName: try! DNSName("ns.example."))
        configuration.mdnsQueryBurst = 100
    }

    func key(_ type: String) -> BrowseKey {
        BrowseKey(interface: "eth1", name: try! DNSName("\(type)._tcp.local."), type: .ptr)
    }

    func instance(_ n: Int, of key: BrowseKey) -> MDNSRecord {
        MDNSRecord(name: key.name, type: .ptr, rdata: try! DNSName("Device \(n).\(key.name)").wireBytes)
    }

    func lookup(_ table: inout BrowseTable, _ key: BrowseKey, at now: Duration) -> BrowseTable.Lookup {
        let query = Message(id: 1, questions: [Question(name: try! DNSName("_x._tcp.lab1.example."), type: .ptr)])
        let plan = MDNSPlan(link: link, zone: link.zone, localName: key.name, type: .ptr)
        let context = QueryContext(
            started: now, epoch: 0, replayLifetime: .seconds(1), qtype: "PTR", limit: 512,
            asker: .client(.udp, respond: { _ in }))
        return table.lookup(key, query: query, plan: plan, context: context, now: now, configuration: configuration)
    }

    /// One cold browse of `key` at `start`: devices answer at these delays (ms). Returns
    /// (when the waiters are answered, what they get).
    func browse(
        _ table: inout BrowseTable, _ key: BrowseKey, at start: Duration, devices: [Int]
    ) -> (at: Duration, snapshot: Snapshot) {
        guard case .wait(_, let deadline, let begun?) = lookup(&table, key, at: start) else {
            Issue.record("a cold query waits")
            return (.zero, Snapshot())
        }
        var due = deadline
        var delivered = 0
        for (n, delay) in devices.enumerated() {
            let now = start + AnswerTimesTests.ms(delay)
            if now >= due { break }
            _ = table.receive(
                .added(instance(n, of: key)), for: key, generation: begun.generation, now: now,
                configuration: configuration)
            if let flushAt = table.wakeups[key]?.flushAt { due = min(deadline, flushAt) }
            delivered += 1
        }
        let woken = table.wake(key, generation: begun.generation, now: due)
        for n in devices.indices.dropFirst(delivered) {
            let now = start + AnswerTimesTests.ms(devices[n])
            _ = table.receive(
                .added(instance(n, of: key)), for: key, generation: begun.generation, now: now,
                configuration: configuration)
        }
        return (due, woken.snapshot)
    }

    @Test("three devices at 30, 250 and 600 ms: once learned, the first answer lists all three")
    func threeDevices() {
        var table = BrowseTable()
        let before = browse(&table, key("_a"), at: .zero, devices: [30, 250, 600])
        #expect(before.at == .milliseconds(80) && before.snapshot.answers.count == 1, "nothing learned yet")
        #expect(before.snapshot.isProvisional, "so it may be incomplete: a 2 s TTL")
        _ = browse(&table, key("_b"), at: .seconds(10), devices: [30, 250, 600])
        let after = browse(&table, key("_c"), at: .seconds(20), devices: [30, 250, 600])
        #expect(after.at == .seconds(20) + .milliseconds(625) && after.snapshot.answers.count == 3)
        #expect(after.snapshot.isProvisional, "complete as far as the link has shown, but young (issue 42)")
        #expect(
            !table.snapshot(for: key("_c"), now: .seconds(21) + .milliseconds(200)).isProvisional, "past the ceiling")
        // A hit on a young browse within the spread is provisional: a 2 s TTL, not replayed.
        let young = key("_d")
        guard case .wait(_, _, let begun?) = lookup(&table, young, at: .seconds(30)) else { return }
        _ = table.receive(
            .added(instance(0, of: young)), for: young, generation: begun.generation,
            now: .seconds(30) + .milliseconds(30), configuration: configuration)
        // avahi's "all for now" does not cut the window short on this link.
        let allForNow = table.receive(
            .allForNow, for: young, generation: begun.generation, now: .seconds(30) + .milliseconds(40),
            configuration: configuration)
        #expect(allForNow.follow == .none)
        let snapshot = table.snapshot(for: young, now: .seconds(30) + .milliseconds(100))
        #expect(snapshot.isProvisional && !snapshot.isSettled)
        let plan = MDNSPlan(link: link, zone: link.zone, localName: young.name, type: .ptr)
        let query = Message(id: 1, questions: [Question(name: try! DNSName("_d._tcp.lab1.example."), type: .ptr)])
        let context = QueryContext(
            started: .zero, epoch: 0, replayLifetime: .seconds(1), qtype: "PTR", limit: 512,
            asker: .client(.udp, respond: { _ in }))
        let reply = AnswerBuilder(configuration: configuration).answer(
            query, plan: plan, snapshot: snapshot, for: context)
        #expect(reply.answers.map(\.ttl) == [DiscoveryProxy.provisionalTTL])
        #expect(table.snapshot(for: young, now: .seconds(31)).isProvisional, "past the spread, but young (issue 42)")
        #expect(!table.snapshot(for: young, now: .seconds(31) + .milliseconds(200)).isProvisional, "past the ceiling")
    }

    @Test(
        "issue 42: a link that learned a spread of zero from one-device browses still gives a new type's first answer the short TTL"
    )
    func youngBrowseAfterPromptSingles() {
        var table = BrowseTable()
        for n in 0..<3 { _ = browse(&table, key("_one\(n)"), at: .seconds(10 * n), devices: [30]) }
        #expect(table.answerTimes["eth1"]?.usualSpread == .zero, "the link learned a spread of zero")
        let first = browse(&table, key("_three"), at: .seconds(40), devices: [30, 250, 600])
        #expect(first.snapshot.answers.count == 1, "answered before the late devices")
        #expect(first.snapshot.isProvisional && !first.snapshot.isSettled, "so a 2 s TTL, not 10 s, and not replayed")
        let later = table.snapshot(for: key("_three"), now: .seconds(40) + .milliseconds(1300))
        #expect(later.answers.count == 3 && !later.isProvisional)
    }

    @Test("a sleepy link waits up to 1.2 s for its first answer; an answer cut short by that is provisional")
    func sleepy() {
        var table = BrowseTable()
        _ = browse(&table, key("_a"), at: .zero, devices: [1000])
        _ = browse(&table, key("_b"), at: .seconds(10), devices: [1400])
        #expect(table.negativeTimeout(on: "eth1", configuration) == .milliseconds(1100))
        _ = browse(&table, key("_c"), at: .seconds(20), devices: [1300, 1800])
        _ = browse(&table, key("_d"), at: .seconds(30), devices: [1000, 1600])
        #expect(table.negativeTimeout(on: "eth1", configuration) == .milliseconds(1200))
        let cut = browse(&table, key("_e"), at: .seconds(40), devices: [900, 1500])
        #expect(cut.at == .seconds(40) + .milliseconds(1200) && cut.snapshot.answers.count == 1)
        #expect(cut.snapshot.isProvisional)
        // Another link learned nothing.
        #expect(table.negativeTimeout(on: "eth2", configuration) == configuration.negativeTimeout)
    }

    @Test("a prompt link answers as configured once known; learning off changes nothing")
    func prompt() {
        var table = BrowseTable()
        for n in 0..<4 {
            // Two instances in one mDNS packet: avahi delivers them together.
            let result = browse(&table, key("_p\(n)"), at: .seconds(10 * n), devices: [25, 25])
            #expect(result.at == .seconds(10 * n) + .milliseconds(75) && result.snapshot.answers.count == 2)
            #expect(
                result.snapshot.isProvisional, "a first answer before the ceiling is provisional, known link or not")
            #expect(!table.snapshot(for: key("_p\(n)"), now: .seconds(10 * n) + .milliseconds(1200)).isProvisional)
        }
        #expect(table.negativeTimeout(on: "eth1", configuration) == configuration.negativeTimeout)
        // A reload keeps what a kept link learned; turning learning off forgets it all.
        _ = table.release(keepingLinks: ["eth1"])
        #expect(table.answerTimes["eth1"]?.samples.count == 4)
        _ = table.release(keepingLinks: ["eth1"], learns: false)
        #expect(table.answerTimes.isEmpty)
        var off = self
        off.configuration.learnsAnswerTimes = false
        var unlearned = BrowseTable()
        for n in 0..<3 {
            let result = off.browse(&unlearned, key("_q\(n)"), at: .seconds(10 * n), devices: [30, 250, 600])
            #expect(result.at == .seconds(10 * n) + .milliseconds(80) && result.snapshot.answers.count == 1)
        }
        #expect(unlearned.answerTimes.isEmpty)
    }
}
