import DNSWire
import EventCounting
import Logging
import MDNS
import Metrics
import Synchronization

/// The mDNS side of the proxy: starting browses' queries, their events, and answering the
/// queries that wait on them (when results arrive, or at the negative timeout).
extension DiscoveryProxy {
    /// Starts a browse's query now, after its rate-limit delay, or when its link's
    /// `LookupPacer` lets it out.
    func begin(_ start: BrowseTable.Start) {
        if start.queued {
            releaseLookups(on: start.key.interface, armOnly: true)
        } else if start.delay == .zero {
            startBrowse(start.key, generation: start.generation)
        } else {
            scheduler.schedule(after: start.delay) { [weak self] in
                self?.startBrowse(start.key, generation: start.generation)
            }
        }
    }

    /// Starts the gateway's lookups on `interface` that its pacer lets out now, and looks
    /// again while some wait: one timer per link. `armOnly`: a lookup was queued; starts
    /// the timer if none runs.
    private func releaseLookups(on interface: String, armOnly: Bool = false) {
        if armOnly {
            guard state.withLock({ $0.lookupReleases.insert(interface).inserted }) else { return }
        }
        let sent = linkCache?.queriesSent(on: interface)
        let now = scheduler.now()
        let (due, next) = state.withLock { state in
            let released = state.table.releaseLookups(on: interface, sent: sent, now: now)
            if released.next == nil { state.lookupReleases.remove(interface) }
            return released
        }
        for start in due { startBrowse(start.key, generation: start.generation) }
        if let next {
            scheduler.schedule(after: next) { [weak self] in self?.releaseLookups(on: interface) }
        }
    }

    private func startBrowse(_ key: BrowseKey, generation: UInt32) {
        let handle: any MDNSQueryHandle
        do {
            handle = try backend.startQuery(key, tag: generation, receiver: self)
        } catch {
            logger.warning(
                "cannot start mDNS query", metadata: ["mdns.question": "\(key)", "mdns.error": "\(error)"])
            let waiters = state.withLock { state -> [Waiter] in
                let waiters = state.table.abandon(key, generation: generation)
                rearm(key, in: &state.table, now: scheduler.now())  // drops its timer
                return waiters
            }
            invalidateReplays()
            let answers = AnswerBuilder(configuration: configuration)
            for waiter in waiters {
                output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .miss)
            }
            return
        }
        metrics.mdnsQueriesStarted[key.interface].increment()
        let attached = state.withLock { $0.table.attach(handle, to: key, generation: generation) }
        if !attached { handle.cancel() }
        logger.debug("mDNS query started", metadata: ["mdns.question": "\(key)"])
    }

    /// The backend's events for a browse; `tag` is its generation. Called on the backend's
    /// thread; must not call the backend.
    public func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
        if case .added(let record) = event, isOwn(record, on: question.interface) { return }
        if case .removed(let record) = event, isOwn(record, on: question.interface) { return }
        let key = question
        let generation = tag
        let now = scheduler.now()
        let configuration = self.configuration
        var pending = false
        let (reception, pushes) = state.withLock { state -> (BrowseTable.Reception, [PushDelivery]) in
            let reception = state.table.receive(
                event, for: key, generation: generation, now: now, configuration: configuration)
            if reception.invalidates { invalidateReplays() }
            var pushes: [PushDelivery] = []
            if reception.cleared {
                pushes = state.subscriptions.changes(clearing: key)
                state.subscriptions.forgetWithheld(key)
            }
            if reception.follow == .armWindow { rearm(key, in: &state.table, now: now) }
            guard !reception.changes.isEmpty, state.subscriptions.count > 0 else { return (reception, pushes) }
            pushes += state.subscriptions.changes(
                after: reception.changes, of: key, in: state.table, now: now, enabled: configuration.suppressLinkLocal,
                pending: &pending)
            return (reception, pushes)
        }
        if let after = reception.firstResultAfter { metrics.firstResult.record(duration: after) }
        deliver(pushes)
        if pending { scheduleTargetRecheck(key.interface) }
        if case .failed(let why) = event {
            logger.debug("mDNS query failed", metadata: ["mdns.question": "\(key)", "mdns.error": "\(why)"])
        }
        switch reception.follow {
        case .none, .armWindow: break  // the window is the browse's timer's (`rearm` above)
        case .flushNow: flush(key, generation: generation)
        }
    }

    /// Answers every waiter of a browse from what it has now.
    private func flush(_ key: BrowseKey, generation: UInt32) {
        let now = scheduler.now()
        let (waiters, snapshot) = state.withLock { state in
            let taken = state.table.takeWaiters(of: key, generation: generation, now: now)
            rearm(key, in: &state.table, now: now)
            return taken
        }
        answer(waiters, of: key, from: snapshot, now: now)
    }

    /// Answers waiters the collection window collected, from what their browse has now.
    private func answer(_ waiters: [Waiter], of key: BrowseKey, from snapshot: Snapshot, now: Duration) {
        let answers = AnswerBuilder(configuration: configuration)
        for waiter in waiters {
            // Per-query timing, like a connection establishment report: how long mDNS took
            // to bring the first result for this query, and when the answer went out.
            if let firstResultAt = waiter.firstResultAt {
                logger.debug(
                    "answered from mDNS",
                    metadata: [
                        "mdns.question": "\(key)", "dns.id": "\(waiter.query.id)",
                        "mdns.first_result_ms":
                            "\(max(.zero, firstResultAt - waiter.context.started).wholeMilliseconds)",
                        "dns.answer_ms": "\((now - waiter.context.started).wholeMilliseconds)",
                    ])
            }
            output.finish(
                answers.answer(waiter.query, plan: waiter.plan, snapshot: snapshot, for: waiter.context),
                waiter.context,
                cache: .miss)
        }
    }

    /// A browse's timer: the collection window has ended (every waiter is answered from what
    /// the browse has), or negative deadlines have come (those waiters get whatever is known,
    /// usually nothing). Then the timer is set for what is left.
    ///
    /// `firedAt`: the time it was set for, so that a timer run a moment early (by another
    /// clock's reckoning) still finds its waiters due.
    func wake(_ key: BrowseKey, generation: UInt32, firedAt: Duration) {
        let now = max(scheduler.now(), firedAt)
        let woken = state.withLock { state in
            let woken = state.table.wake(key, generation: generation, now: now)
            rearm(key, in: &state.table, now: now)
            return woken
        }
        answer(woken.flushed, of: key, from: woken.snapshot, now: now)
        expire(woken.expired, of: key, from: woken.snapshot)
    }

    /// The negative timeout of waiters: answer with whatever is known (usually nothing).
    private func expire(_ waiters: [Waiter], of key: BrowseKey, from snapshot: Snapshot) {
        guard !waiters.isEmpty else { return }
        let answers = AnswerBuilder(configuration: configuration)
        for waiter in waiters {
            if snapshot.answers.isEmpty && backend.state != .running {
                // The daemon is away: "nothing found" would be a lie that clients cache. SERVFAIL
                // tells them to try again.
                logger.debug("mDNS backend \(backend.state.rawValue): SERVFAIL", metadata: ["mdns.question": "\(key)"])
                output.finish(answers.failure(waiter.query, .servFail), waiter.context, cache: .miss)
                continue
            }
            logger.debug("mDNS query timed out", metadata: ["mdns.question": "\(key)"])
            output.finish(
                answers.answer(waiter.query, plan: waiter.plan, snapshot: snapshot, for: waiter.context),
                waiter.context,
                cache: .miss)
        }
    }

    /// Sets `key`'s browse timer to its next due time (`BrowseTable.rearm`); called under the
    /// proxy's lock, which scheduling a timer does not take.
    func rearm(_ key: BrowseKey, in table: inout BrowseTable, now: Duration) {
        let replaced = table.rearm(key) { at, generation in
            scheduler.schedule(after: at - now) { [weak self] in self?.wake(key, generation: generation, firedAt: at) }
        }
        replaced?.cancel()
    }

    /// Cancels the timers of the browses a reload released or a shutdown closed.
    func cancelOrphanedWakeups() {
        for timer in state.withLock({ $0.table.takeOrphanedWakeups() }) { timer.cancel() }
    }
}
