import DNSWire
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// The gateway's lookups on a far link, paced by the query packets this host sends there
/// (issue 45: "measured in multicast packets actually sent").
@Suite("Lookup pacer")
struct LookupPacerTests {
    let settings = LookupPacer.Settings(packetsPerSecond: 20, most: 250, burst: 500, least: 10)

    func start(_ n: Int) -> BrowseTable.Start {
        BrowseTable.Start(
            key: BrowseKey(interface: "eth1", name: try! DNSName("far\(n).local."), type: .srv), generation: UInt32(n),
            delay: .zero)
    }

    func queued(_ count: Int, settings: LookupPacer.Settings? = nil) -> LookupPacer {
        var pacer = LookupPacer(settings: settings ?? self.settings, now: .zero)
        for n in 0..<count { pacer.enqueue(start(n)) }
        return pacer
    }

    /// Lets lookups out every tick from `from` for `seconds`, the link carrying `packets(t)`
    /// query packets a second; returns how many went out in each second.
    func run(_ pacer: inout LookupPacer, from: Int = 0, seconds: Int, sentBefore: Int = 0, packets: (Int) -> Int)
        -> [Int]
    {
        var before = sentBefore
        var perSecond: [Int] = []
        for second in from..<from + seconds {
            var out = 0
            for tick in 0..<20 {
                let now = Duration.seconds(second) + LookupPacer.tick * tick
                let sent = before + packets(second) * tick / 20
                pacer.observe(sent: sent, now: now)
                out += pacer.release(now: now).due.count
            }
            perSecond.append(out)
            before += packets(second)
        }
        return perSecond
    }

    @Test("without a count of packets, the lookups go at the most: a burst at once, then the rate, oldest first")
    func withoutCount() {
        var pacer = queued(1_000)
        pacer.observe(sent: nil, now: .zero)
        let (first, next) = pacer.release(now: .zero)
        #expect(first.count == 500 && first.map(\.generation) == (0..<500).map(UInt32.init))
        #expect(next != nil && next! >= LookupPacer.tick)
        pacer.observe(sent: nil, now: .seconds(1))
        #expect(pacer.release(now: .seconds(1)).due.first?.generation == 500)
        #expect(pacer.queued == 250)
    }

    @Test("a link over its packet budget slows the lookups in proportion, never below the least")
    func overBudget() {
        var pacer = queued(4_000)
        #expect(pacer.pace == 80, "four lookups a packet at first")
        _ = run(&pacer, seconds: 2) { _ in 40 }
        #expect(pacer.pace < 45, "twice the budget halves the pace, \(pacer.pace)")
        _ = run(&pacer, from: 2, seconds: 5, sentBefore: 80) { _ in 400 }
        #expect(pacer.pace == 10, "the least, however busy the link")
        #expect(pacer.packetRate.map { $0 >= 380 } == true)
    }

    @Test("a quiet link lets the pace grow by a quarter a second while lookups wait, up to the most")
    func underBudget() {
        var pacer = queued(4_000)
        let perSecond = run(&pacer, seconds: 4) { _ in 0 }
        #expect(perSecond[3] > perSecond[1], "\(perSecond)")
        #expect(pacer.pace > 80 && pacer.pace <= 250)
        _ = run(&pacer, from: 4, seconds: 10) { _ in 0 }
        #expect(pacer.pace == 250)
        // At the budget: the pace holds.
        var steady = queued(4_000)
        _ = run(&steady, seconds: 3) { _ in 18 }
        #expect(steady.pace == 80)
    }

    @Test("nothing waiting: the pace does not grow, and the queue's room is given back")
    func idle() {
        var pacer = queued(10)
        let perSecond = run(&pacer, seconds: 3) { _ in 0 }
        #expect(perSecond == [10, 0, 0] && pacer.queued == 0 && pacer.pace == 80)
        #expect(pacer.release(now: .seconds(4)).next == nil)
    }

    @Test("a lookup queued behind others is expected when the pace lets it out")
    func estimate() {
        let pacer = queued(160)
        #expect(pacer.estimate(now: .seconds(1)) == .seconds(3))
    }

    @Test("the browse table lets the gateway's lookups out through the pacer, and drops those of browses gone")
    func tableReleases() {
        var configuration = ProxyConfiguration(
            links: [Link(interface: "eth1", zone: try! DNSName("lab1.example."))],
            serverName: try! DNSName("ns.example."))
        configuration.maxBrowses = 10_000
        configuration.gatewayLookupsPerSecond = 100
        configuration.gatewayLookupBurst = 50
        var table = BrowseTable()
        let keys = (0..<120).map { BrowseKey(interface: "eth1", name: try! DNSName("far\($0).local."), type: .srv) }
        let starts = keys.compactMap {
            table.subscribe($0, now: .zero, configuration: configuration, budget: .gateway).start
        }
        #expect(starts.count == 120 && starts.allSatisfy(\.queued))
        #expect(table.browses[keys[119]].map { $0.startedAt > .zero } == true, "expected to ask later")
        let first = table.releaseLookups(on: "eth1", sent: nil, now: .zero)
        #expect(first.due.count == 50 && first.next != nil)
        #expect(table.browses[keys[0]]?.startedAt == .zero)
        // A browse gone meanwhile asks nothing.
        _ = table.close()
        #expect(table.releaseLookups(on: "eth1", sent: nil, now: .seconds(1)).due.isEmpty)
    }
}
