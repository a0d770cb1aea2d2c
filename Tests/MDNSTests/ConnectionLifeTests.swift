import Testing

@testable import MDNS

/// The decisions of one avahi client connection, without a daemon: what avahi's client states
/// and the connection's timer ticks mean (`ConnectionLife`), and when the daemon counts as
/// lost and back (`OutageTracker`).
@Suite("Avahi connection life")
struct ConnectionLifeTests {
    let t0 = ContinuousClock.now

    @Test("a connection that comes up attaches its queries at once; a second RUNNING changes nothing")
    func comesUp() {
        var life = ConnectionLife()
        #expect(life.status == .connecting && life.due(now: t0) == nil)
        #expect(life.client(.running, now: t0) == .cameUp)
        #expect(life.status == .running && life.hasRun && life.due(now: t0) == t0)
        #expect(life.client(.running, now: t0) == .none, "REGISTERING after RUNNING")
        #expect(life.tick(now: t0) == ConnectionLife.Due(attach: true))
        #expect(life.due(now: t0) == nil, "nothing left to do")
    }

    @Test("CONNECTING after running: the daemon went away with the connection kept; before running: nothing")
    func lostDaemon() {
        var life = ConnectionLife()
        #expect(life.client(.connecting, now: t0) == .none)
        _ = life.client(.running, now: t0)
        #expect(life.client(.connecting, now: t0) == .lostDaemon)
        #expect(life.status == .connecting && !life.hasRun)
        #expect(life.client(.connecting, now: t0) == .none, "reported once")
    }

    @Test(
        "issue 42: a lost daemon's queries keep their records for 120 s; back sooner, the hold ends; a second loss does not extend it"
    )
    func holdRecords() {
        var life = ConnectionLife()
        _ = life.client(.running, now: t0)
        _ = life.tick(now: t0)
        #expect(life.client(.connecting, now: t0) == .lostDaemon)
        life.hold(now: t0)
        #expect(life.due(now: t0) == t0 + ConnectionLife.holdRecords)
        life.hold(now: t0 + .seconds(60))
        #expect(life.holdUntil == t0 + ConnectionLife.holdRecords, "not extended")
        #expect(life.tick(now: t0 + .seconds(119)) == ConnectionLife.Due())
        #expect(life.tick(now: t0 + .seconds(120)) == ConnectionLife.Due(release: true))
        // Back before the hold runs out: nothing is released.
        var back = ConnectionLife()
        _ = back.client(.running, now: t0)
        _ = back.tick(now: t0)
        _ = back.client(.connecting, now: t0)
        back.hold(now: t0)
        #expect(back.client(.running, now: t0 + .seconds(2)) == .cameUp)
        #expect(back.holdUntil == nil)
        #expect(back.tick(now: t0 + .seconds(200)) == ConnectionLife.Due(attach: true))
    }

    @Test("a failure re-creates the connection: at once when the daemon closed it, else a second later")
    func failure() {
        var life = ConnectionLife()
        _ = life.client(.running, now: t0)
        _ = life.tick(now: t0)
        #expect(life.client(.failed(disconnected: true), now: t0) == .failed)
        #expect(life.status == .down && life.due(now: t0) == t0)
        #expect(life.tick(now: t0) == ConnectionLife.Due(reconnect: true))
        life.connecting()
        #expect(life.client(.failed(disconnected: false), now: t0) == .failed)
        #expect(life.due(now: t0) == t0 + .seconds(1))
        #expect(life.tick(now: t0) == ConnectionLife.Due(), "not due yet")
        #expect(life.tick(now: t0 + .seconds(1)) == ConnectionLife.Due(reconnect: true))
    }

    @Test("no D-Bus: down, retried a second later; a failed browser is re-attached a second later")
    func retries() {
        var life = ConnectionLife()
        life.cannotConnect(now: t0)
        #expect(life.status == .down && life.due(now: t0) == t0 + .seconds(1))
        var running = ConnectionLife()
        _ = running.client(.running, now: t0)
        _ = running.tick(now: t0)
        running.retryAttach(now: t0)
        #expect(running.due(now: t0) == t0 + .seconds(1))
        #expect(running.tick(now: t0 + .seconds(1)) == ConnectionLife.Due(attach: true))
    }

    @Test("an empty connection is collected at the next tick, before anything else due")
    func collect() {
        var life = ConnectionLife()
        life.cannotConnect(now: t0)
        life.wantCollect()
        #expect(life.due(now: t0) == t0)
        #expect(life.tick(now: t0 + .seconds(1)) == ConnectionLife.Due(collect: true, reconnect: true))
        #expect(life.tick(now: t0 + .seconds(2)) == ConnectionLife.Due())
    }

    @Test("the backend's state: failed if any connection is down (or none, or shut down), running if all run")
    func backendState() {
        #expect(ConnectionLife.backendState([], isShutDown: false) == .failed)
        #expect(ConnectionLife.backendState([.running, .down], isShutDown: false) == .failed)
        #expect(ConnectionLife.backendState([.running, .connecting], isShutDown: false) == .connecting)
        #expect(ConnectionLife.backendState([.running, .running], isShutDown: false) == .running)
        #expect(ConnectionLife.backendState([.running], isShutDown: true) == .failed)
    }

    @Test("a query goes on the first running connection with room, else the first with room, else a new one")
    func placement() {
        #expect(ConnectionLife.placement([]) == nil)
        #expect(ConnectionLife.placement([(10, 10, .running), (3, 10, .connecting), (5, 10, .running)]) == 2)
        #expect(ConnectionLife.placement([(10, 10, .running), (3, 10, .connecting)]) == 1)
        #expect(ConnectionLife.placement([(10, 10, .running), (4, 4, .connecting)]) == nil)
    }

    @Test("an outage is announced once, and is over when every connection runs again")
    func outage() {
        var outage = OutageTracker()
        #expect(outage.cameUp(othersRunning: true) == false, "no outage: just connected")
        #expect(outage.lost() && !outage.lost())
        #expect(outage.cameUp(othersRunning: false) == false && outage.inOutage)
        #expect(outage.cameUp(othersRunning: true) && !outage.inOutage)
    }
}
