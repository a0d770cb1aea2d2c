import DNSWire
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The cache's steps, without a proxy, a backend or a clock (RFC 8766 §5.6, §9.3): each
/// returns what the proxy must do, and these tests read it directly.
@Suite("Browse table")
struct BrowseTableTests {
    let configuration: ProxyConfiguration
    let link = Link(interface: "eth1", zone: try! DNSName("lab1.example."), subnets: [IPPrefix("192.0.2.0/24")!])
    let key = BrowseKey(interface: "eth1", name: try! DNSName("_ipp._tcp.local."), type: .ptr)
    let instance = MDNSRecord(
        name: try! DNSName("_ipp._tcp.local."), type: .ptr, rdata: try! DNSName("P._ipp._tcp.local.").wireBytes)

    init() {
        var configuration = ProxyConfiguration(links: [link], serverName: try! DNSName("ns.example."))
        configuration.mdnsQueriesPerSecond = 1
        configuration.mdnsQueryBurst = 2
        configuration.maxBrowses = 2
        self.configuration = configuration
    }

    /// No collection window: the first record answers.
    var immediate: ProxyConfiguration {
        var configuration = self.configuration
        configuration.collectionWindow = .zero
        return configuration
    }

    func lookup(_ table: inout BrowseTable, _ key: BrowseKey, at seconds: Int) -> BrowseTable.Lookup {
        let query = Message(id: 1, questions: [Question(name: try! DNSName("_ipp._tcp.lab1.example."), type: key.type)])
        let plan = MDNSPlan(link: link, zone: link.zone, localName: key.name, type: key.type)
        let context = QueryContext(
            started: .seconds(seconds), epoch: 0, replayLifetime: .seconds(1), qtype: "PTR", limit: 512,
            asker: .client(.udp, respond: { _ in }))
        return table.lookup(
            key, query: query, plan: plan, context: context, now: .seconds(seconds), configuration: configuration)
    }

    @Test("a miss starts a browse; a second query joins it; results make a hit")
    func missJoinHit() throws {
        var table = BrowseTable()
        guard case .wait(let first, let deadline, let start?) = lookup(&table, key, at: 0) else {
            Issue.record("first query should start a browse")
            return
        }
        #expect(deadline == configuration.negativeTimeout && start.delay == .zero && start.evicted == nil)
        guard case .wait(let second, _, nil) = lookup(&table, key, at: 0) else {
            Issue.record("second query should join, not start")
            return
        }
        #expect(first != second)
        let reception = table.receive(
            .added(instance), for: key, generation: start.generation, now: .milliseconds(100),
            configuration: configuration)
        #expect(reception.follow == .armWindow && reception.invalidates && reception.changes.count == 1)
        #expect(reception.firstResultAfter == .milliseconds(100))
        let (waiters, snapshot) = table.takeWaiters(of: key, generation: start.generation, now: .milliseconds(150))
        #expect(waiters.map(\.id) == [first, second] && snapshot.answers.count == 1)
        // The first browse to cross a link teaches it its answer times; until it knows them,
        // an answer is provisional (`AnswerTimesTests`).
        #expect(snapshot.isProvisional && !snapshot.isSettled)
        guard case .hit = lookup(&table, key, at: 1) else {
            Issue.record("a browse with results answers at once")
            return
        }
        #expect(table.counters.cacheHits == 1 && table.counters.cacheMisses == 2)
    }

    @Test("a query while the collection window is open waits for its end with the others")
    func joinWithinTheWindow() throws {
        var table = BrowseTable()
        guard case .wait(let first, _, let start?) = lookup(&table, key, at: 0) else {
            Issue.record("first query should start a browse")
            return
        }
        _ = table.receive(
            .added(instance), for: key, generation: start.generation, now: .milliseconds(20),
            configuration: configuration)
        guard case .wait(let second, _, nil) = lookup(&table, key, at: 0) else {
            Issue.record("a query within the window should wait, not hit a half-filled browse")
            return
        }
        let (waiters, _) = table.takeWaiters(of: key, generation: start.generation, now: .milliseconds(70))
        #expect(waiters.map(\.id) == [first, second])
        guard case .hit = lookup(&table, key, at: 1) else {
            Issue.record("once the window has closed, a browse with results answers at once")
            return
        }
    }

    struct NoTimer: ProxyTimer {
        func cancel() {}
    }

    @Test("a browse's one timer: the waiters' negative deadline, then the window's end; gone once they are answered")
    func wakeups() throws {
        var table = BrowseTable()
        var scheduled: [Duration] = []
        let schedule = { (at: Duration, _: UInt32) -> any ProxyTimer in
            scheduled.append(at)
            return NoTimer()
        }
        guard case .wait(_, let deadline, let start?) = lookup(&table, key, at: 0) else {
            Issue.record("first query should start a browse")
            return
        }
        #expect(table.rearm(key, schedule: schedule) == nil)
        _ = lookup(&table, key, at: 0)
        #expect(table.rearm(key, schedule: schedule) == nil)
        #expect(scheduled == [deadline], "one timer for both waiters")
        #expect(
            table.wake(key, generation: start.generation, now: .milliseconds(10)).expired.isEmpty, "nothing due yet")
        _ = table.receive(
            .added(instance), for: key, generation: start.generation, now: .milliseconds(100),
            configuration: configuration)
        #expect(table.rearm(key, schedule: schedule) != nil, "the deadline's timer is replaced")
        #expect(scheduled == [deadline, .milliseconds(150)])
        let woken = table.wake(key, generation: start.generation, now: .milliseconds(150))
        #expect(woken.flushed.count == 2 && woken.expired.isEmpty && woken.snapshot.answers.count == 1)
        #expect(table.rearm(key, schedule: schedule) == nil && table.wakeups[key] == nil)
    }

    @Test("at the negative deadline the waiters get what is known, and an empty answer is counted")
    func negativeDeadline() throws {
        var table = BrowseTable()
        guard case .wait(_, let deadline, let start?) = lookup(&table, key, at: 0) else { return }
        _ = table.rearm(key) { _, _ in NoTimer() }
        let woken = table.wake(key, generation: start.generation, now: deadline)
        #expect(woken.expired.count == 1 && woken.flushed.isEmpty && woken.snapshot.answers.isEmpty)
        #expect(table.counters.negativeTimeouts == 1 && table.browses[key]?.waiters.isEmpty == true)
        // A browse closed while a query waits leaves its timer to be cancelled.
        let other = BrowseKey(interface: "eth1", name: try DNSName("_http._tcp.local."), type: .ptr)
        _ = lookup(&table, other, at: 1)
        _ = table.rearm(other) { _, _ in NoTimer() }
        #expect(table.close().count == 2 && table.takeOrphanedWakeups().count == 1 && table.wakeups.isEmpty)
    }

    @Test("events of an older browse of the same question are dropped")
    func staleGeneration() {
        var table = BrowseTable()
        _ = lookup(&table, key, at: 0)
        let reception = table.receive(.added(instance), for: key, generation: 99, now: .zero, configuration: immediate)
        #expect(reception.follow == .none && !reception.invalidates)
        #expect(table.browses[key]?.records.isEmpty == true)
    }

    @Test("§9.3: past the link's burst a start is delayed; past the negative timeout refused")
    func rateLimit() {
        var table = BrowseTable()
        var configuration = self.configuration
        configuration.maxBrowses = 100
        let names = (0..<4).map { BrowseKey(interface: "eth1", name: try! DNSName("h\($0).local."), type: .a) }
        var delays: [Duration?] = []
        for name in names {
            let query = Message(id: 1, questions: [Question(name: try! DNSName("x.lab1.example."), type: .a)])
            let plan = MDNSPlan(link: link, zone: link.zone, localName: name.name, type: .a)
            let context = QueryContext(
                started: .zero, epoch: 0, replayLifetime: .seconds(1), qtype: "A", limit: 512,
                asker: .client(.udp, respond: { _ in }))
            switch table.lookup(
                name, query: query, plan: plan, context: context, now: .zero, configuration: configuration)
            {
            case .wait(_, _, let start?): delays.append(start.delay)
            case .rateLimited: delays.append(nil)
            default: Issue.record("unexpected step")
            }
        }
        // Burst 2, 1 per second, negative timeout 0.8 s: two now, the third would wait ~1 s.
        #expect(delays[0] == .zero && delays[1] == .zero && delays[2] == nil && delays[3] == nil)
        #expect(table.metrics.mdnsRateLimited.total == 2 && table.browses.count == 2)
    }

    @Test("the gateway's lookups have a budget of their own: clients' queries neither wait behind them nor lose theirs")
    func gatewayBudget() {
        var table = BrowseTable()
        var configuration = self.configuration
        configuration.maxBrowses = 10_000
        configuration.gatewayLookupsPerSecond = 100
        configuration.gatewayLookupBurst = 50
        let hosts = (0..<250).map { BrowseKey(interface: "eth1", name: try! DNSName("far\($0).local."), type: .srv) }
        let starts = hosts.compactMap {
            table.subscribe($0, now: .zero, configuration: configuration, budget: .gateway).start
        }
        // Queued for the far link's pacer; without a packet count, 50 at once, then 100 a
        // second: the 250th goes after 2 s, not the 124 s of 1 a second, burst 2.
        #expect(starts.count == 250 && starts.allSatisfy(\.queued))
        var released: [Int] = []  // by each 50 ms tick
        for tick in 0...41 {
            released.append(
                (released.last ?? 0)
                    + table.releaseLookups(on: "eth1", sent: nil, now: .milliseconds(50 * tick)).due.count)
        }
        #expect(released[0] == 50 && released[20] == 150 && released[39] == 245 && released[40] == 250, "\(released)")
        // The link's clients still have their whole burst: a miss and a subscription start at once.
        let query = Message(id: 1, questions: [Question(name: try! DNSName("_ipp._tcp.lab1.example."), type: .ptr)])
        let plan = MDNSPlan(link: link, zone: link.zone, localName: key.name, type: .ptr)
        let context = QueryContext(
            started: .zero, epoch: 0, replayLifetime: .seconds(1), qtype: "PTR", limit: 512,
            asker: .client(.udp, respond: { _ in }))
        let miss = table.lookup(
            key, query: query, plan: plan, context: context, now: .zero, configuration: configuration)
        guard case .wait(_, _, let start?) = miss else {
            Issue.record("a client's miss should start a browse at once")
            return
        }
        #expect(start.delay == .zero)
        let pushed = BrowseKey(interface: "eth1", name: try! DNSName("_http._tcp.local."), type: .ptr)
        #expect(table.subscribe(pushed, now: .zero, configuration: configuration).start?.delay == .zero)
        #expect(table.metrics.mdnsRateLimited.total == 0)
    }

    @Test("at maxBrowses an idle browse makes room, and its handle comes back to be cancelled")
    func eviction() throws {
        var table = BrowseTable()
        let other = BrowseKey(interface: "eth1", name: try! DNSName("_http._tcp.local."), type: .ptr)
        let third = BrowseKey(interface: "eth1", name: try! DNSName("_smb._tcp.local."), type: .ptr)
        _ = lookup(&table, key, at: 0)
        _ = lookup(&table, other, at: 1)  // `key` is the least recently used
        guard case .full = lookup(&table, third, at: 1) else {
            Issue.record("every browse has a waiter: none may go")
            return
        }
        _ = table.wake(key, generation: table.browses[key]!.generation, now: .seconds(1))
        _ = table.wake(other, generation: table.browses[other]!.generation, now: .seconds(1))
        guard case .wait(_, _, let start?) = lookup(&table, third, at: 40) else {
            Issue.record("an idle browse should make room")
            return
        }
        #expect(start.evicted?.key == key)
        #expect(table.counters.browsesEvicted == 1 && table.browses.count == 2)
    }

    @Test("a released browse answers optimistically while a fresh one starts; a subscribed one is kept")
    func sweepAndOptimistic() throws {
        var table = BrowseTable()
        guard case .wait(_, _, let start?) = lookup(&table, key, at: 0) else { return }
        _ = table.receive(
            .added(instance), for: key, generation: start.generation, now: .zero, configuration: immediate)
        _ = table.takeWaiters(of: key, generation: start.generation, now: .zero)
        #expect(table.sweep(now: .seconds(200), configuration: configuration, pinned: EveryBrowsePinned()).isEmpty)
        let released = table.sweep(now: .seconds(200), configuration: configuration, pinned: NoPinnedBrowses())
        #expect(released.map(\.0) == [key] && table.released[key] != nil)
        guard case .optimistic(let snapshot, let restart?) = lookup(&table, key, at: 201) else {
            Issue.record("expected an optimistic answer")
            return
        }
        #expect(snapshot.answers.count == 1 && restart.generation != start.generation)
        #expect(table.released[key] == nil && table.counters.optimisticAnswers == 1)
    }

    @Test("verification: what \"all for now\" does not deliver again is removed")
    func verification() {
        var table = BrowseTable()
        guard case .wait(_, _, let start?) = lookup(&table, key, at: 0) else { return }
        _ = table.receive(
            .added(instance), for: key, generation: start.generation, now: .zero, configuration: immediate)
        _ = table.receive(.verifying, for: key, generation: start.generation, now: .zero, configuration: immediate)
        let reception = table.receive(
            .allForNow, for: key, generation: start.generation, now: .zero, configuration: immediate)
        #expect(reception.changes.count == 1 && reception.invalidates)
        #expect(table.browses[key]?.records.isEmpty == true)
    }

    @Test(
        "a seeded browse starts with what the link said; \"all for now\" keeps what the daemon delivers and removes the rest"
    )
    func seeded() throws {
        var table = BrowseTable()
        let other = MDNSRecord(name: instance.name, type: .ptr, rdata: try DNSName("Q._ipp._tcp.local.").wireBytes)
        let (records, start) = table.subscribe(
            key, now: .zero, configuration: immediate, budget: .gateway, seed: [instance, other])
        #expect(
            records.compactMap(\.rdata) == [
                .ptr(try DNSName("P._ipp._tcp.local.")), .ptr(try DNSName("Q._ipp._tcp.local.")),
            ])
        let begun = try #require(start)
        _ = table.receive(
            .added(instance), for: key, generation: begun.generation, now: .zero, configuration: immediate)
        #expect(table.browses[key]?.drained == false && table.browses[key]?.verifying == true)
        let reception = table.receive(
            .allForNow, for: key, generation: begun.generation, now: .zero, configuration: immediate)
        #expect(reception.changes.count == 1)
        #expect(table.browses[key]?.orderedRecords.compactMap(\.rdata) == [.ptr(try DNSName("P._ipp._tcp.local."))])
        #expect(table.browses[key]?.drained == true && table.browses[key]?.verifying == false)
    }

    @Test("after close nothing starts")
    func closed() {
        var table = BrowseTable()
        _ = lookup(&table, key, at: 0)
        #expect(table.close().count == 1)
        guard case .rateLimited = lookup(&table, key, at: 1) else {
            Issue.record("a closed table starts no browse")
            return
        }
        #expect(table.subscribe(key, now: .seconds(1), configuration: configuration).start == nil)
    }
}

/// Every browse has subscribers.
struct EveryBrowsePinned: PinnedBrowses {
    func isPinned(_ key: BrowseKey) -> Bool { true }
}
