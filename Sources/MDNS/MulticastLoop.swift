internal import CAvahiClient

/// A thread of its own for mDNS sockets the proxy opens beside avahi-daemon's
/// (`MulticastSender`): an avahi threaded poll (no D-Bus) with one timer and a watch per open
/// socket, for `LinkResponder` and `LinkSnooper`.
///
/// The sockets are opened, sent on, closed and watched on its thread only, under its lock
/// (`locked`): avahi's poll asserts when a watch appears between its poll(2) and its
/// dispatch, and a socket closed under a live watch could leave the watch reading a
/// descriptor number the process has since given to another socket. Other threads change
/// their owner's state under the lock and `wake` the thread, whose `onTimer` does the rest.
/// The thread starts with the first `start`; `stop` ends it, then frees the watches.
final class MulticastLoop {
    let sockets = MulticastSender()
    private let poll: OpaquePointer  // AvahiThreadedPoll*
    private let pollAPI: UnsafePointer<AvahiPoll>
    private var timer: OpaquePointer?  // AvahiTimeout*
    private var watches: [Int32: (watch: OpaquePointer, interface: String)] = [:]
    private(set) var isRunning = false
    /// `shutDown` was called (guarded by the lock): the owner does nothing more.
    private(set) var isShutDown = false
    private var onTimer: () -> Void = {}
    private var onReadable: (Int32, String) -> Void = { _, _ in }

    /// A burst of datagrams is read this many at a time before the thread moves on.
    static let readBatch = 64

    init() throws(MDNSError) {
        guard let poll = avahi_threaded_poll_new() else { throw .daemon("cannot create an mDNS socket thread's poll") }
        self.poll = poll
        self.pollAPI = avahi_threaded_poll_get(poll)
        self.timer = cavahi_timeout_new(pollAPI, loopTimerCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        stop()
        avahi_threaded_poll_free(poll)
    }

    /// What the thread runs, its lock held: at each `wake` (or `wake(after:)`), and for each
    /// socket with something to read (its descriptor and interface). Set before `start`; the
    /// owner's closures hold it unowned (the owner stops the loop before it goes).
    func handle(timer: @escaping () -> Void, readable: @escaping (Int32, String) -> Void) {
        onTimer = timer
        onReadable = readable
    }

    func locked<R>(_ body: () -> R) -> R {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return body()
    }

    /// Starts the thread if it does not run (lock held): it waits for the lock before it
    /// looks at the timer. False if it cannot run.
    func start() -> Bool {
        if !isRunning { isRunning = avahi_threaded_poll_start(poll) >= 0 }
        return isRunning
    }

    /// Runs `onTimer` on the thread `delay` from now (lock held).
    func wake(after delay: Duration = .zero) {
        guard let timer else { return }
        cavahi_timeout_arm(pollAPI, timer, UInt32(clamping: Int64(delay / .milliseconds(1)) + (delay > .zero ? 1 : 0)))
    }

    /// Cancels a pending `wake` (lock held).
    func disarm() {
        if let timer { cavahi_timeout_disarm(pollAPI, timer) }
    }

    /// Watches every open socket and no closed one (its thread, lock held). True if a socket
    /// is watched that was not before.
    @discardableResult
    func watchSockets() -> Bool {
        let open = sockets.descriptors
        for (fd, entry) in watches where !open.contains(where: { $0.fd == fd && $0.interface == entry.interface }) {
            cavahi_watch_free(pollAPI, entry.watch)
            watches[fd] = nil
        }
        var added = false
        for (fd, interface) in open where watches[fd] == nil {
            guard
                let watch = cavahi_watch_new(pollAPI, fd, loopWatchCallback, Unmanaged.passUnretained(self).toOpaque())
            else { continue }
            watches[fd] = (watch, interface)
            added = true
        }
        return added
    }

    /// Marks the loop shut down and stops it (not from its thread, lock not held); true the
    /// first time only, when the owner says its last words (goodbyes) on the sockets.
    func shutDown() -> Bool {
        let first = locked { () -> Bool in
            defer { isShutDown = true }
            return !isShutDown
        }
        if first { stop() }
        return first
    }

    /// Ends the thread (not from it, lock not held), then frees the watches and the timer;
    /// the sockets stay open. Idempotent.
    private func stop() {
        if isRunning { avahi_threaded_poll_stop(poll) }
        isRunning = false
        for entry in watches.values { cavahi_watch_free(pollAPI, entry.watch) }
        watches = [:]
        if let timer { cavahi_timeout_free(pollAPI, timer) }
        timer = nil
    }

    fileprivate func timerFired() { onTimer() }

    fileprivate func readable(_ fd: Int32) {
        guard let interface = watches[fd]?.interface else { return }
        onReadable(fd, interface)
    }
}

// MARK: - C callbacks (the poll's lock held)

private let loopTimerCallback: AvahiTimeoutCallback = { _, userdata in
    guard let userdata else { return }
    Unmanaged<MulticastLoop>.fromOpaque(userdata).takeUnretainedValue().timerFired()
}

private let loopWatchCallback: AvahiWatchCallback = { _, fd, _, userdata in
    guard let userdata else { return }
    Unmanaged<MulticastLoop>.fromOpaque(userdata).takeUnretainedValue().readable(fd)
}
