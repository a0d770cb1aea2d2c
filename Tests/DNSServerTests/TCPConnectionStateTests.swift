import DNSWire
import Testing

@testable import DNSServer

/// The TCP connection's logic without a channel (RFC 7766 §6.2): pipelining up to the cap,
/// holding reads at it, draining, and closing once.
@Suite struct TCPConnectionStateTests {
    func opened(maxInFlight: Int = 2) -> TCPConnectionState {
        var state = TCPConnectionState(maxInFlight: maxInFlight)
        let refusal = state.activate(admission: .admitted)
        #expect(refusal == nil)
        return state
    }

    @Test func refusedConnectionsCloseForTheirLimit() {
        var overLimit = TCPConnectionState(maxInFlight: 2)
        let refusal = overLimit.activate(admission: .overClientLimit)
        #expect(refusal == .limit && !overLimit.admitted)
        let closing = overLimit.close(.limit)
        #expect(closing)
        var late = TCPConnectionState(maxInFlight: 2)
        let lateRefusal = late.activate(admission: .shuttingDown)
        #expect(lateRefusal == .shutdown)
    }

    @Test func pipelinesUpToTheCapThenHoldsReads() {
        var state = opened(maxInFlight: 2)
        for n in 0..<3 { _ = state.queryRead([UInt8(n)]) }
        var ids: [UInt64] = []
        while state.nextQuery() != nil { ids.append(state.queryDispatched()) }
        #expect(ids.count == 2, "the third waits at the cap")
        let read = state.readRequested()
        #expect(!read, "no read at the cap")
        let first = state.answered(ids[1])
        let duplicate = state.answered(ids[1])
        #expect(first && !duplicate, "a duplicate answer is ignored")
        let third = state.nextQuery()
        #expect(third == [2])
        _ = state.queryDispatched()
        let atCap = state.afterProgress()
        #expect(atCap == .none, "still at the cap")
        _ = state.answered(ids[0])
        let below = state.afterProgress()
        #expect(below == .resumeReading)
    }

    @Test func drainingClosesOnceEverythingIsAnswered() {
        var state = opened()
        _ = state.queryRead([1])
        _ = state.nextQuery()
        let id = state.queryDispatched()
        let started = state.startDraining(.client)
        let again = state.startDraining(.shutdown)
        #expect(started && !again, "already draining")
        let pending = state.afterProgress()
        #expect(pending == .none)
        #expect(state.isWritable, "answers still go out while draining")
        _ = state.answered(id)
        let done = state.afterProgress()
        #expect(done == .close(.client))
        let closing = state.close(.client)
        let closingAgain = state.close(.error)
        #expect(closing && !closingAgain, "closing is decided once")
        let input = state.queryRead([2])
        #expect(!input, "no input once closing")
        let finished = state.finish()
        #expect(finished?.reason == .client && finished?.wasAdmitted == true)
        let finishedAgain = state.finish()
        #expect(finishedAgain == nil)
    }

    @Test func idleCloseOnlyWithNothingOutstanding() {
        var state = opened()
        #expect(state.mayCloseIdle)
        _ = state.queryRead([1])
        #expect(!state.mayCloseIdle)
    }

    @Test func neverActiveFinishesWithoutAReason() {
        var state = TCPConnectionState(maxInFlight: 1)
        let started = state.startDraining(.shutdown)
        let finished = state.finish()
        #expect(!started && finished == nil)
    }
}
