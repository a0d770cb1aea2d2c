import DiscoveryProxy
import Logging
import ServiceLifecycle
import Synchronization

/// Notices a link's interface going down, coming back, disappearing, or changing addresses
/// (getifaddrs every `interval`; cheap, and needs no netlink socket). A change is logged and
/// applied through `Reloader.refresh`: the link's browses are re-created on the interface as
/// it is now, and reverse zones follow its subnets. The other links are untouched.
struct InterfaceWatcher: Service {
    let reloader: Reloader
    /// `interface-check-interval`, read each time the poll re-arms (a reload changes it).
    let interval: IntervalSetting
    /// The proxy's timer thread: a change re-creates browses there, as its timers do.
    let scheduler: any ProxyScheduler
    let logger: Logger
    var read: @Sendable () -> InterfaceTable = { InterfaceTable.system() }

    /// What matters about one link's interface.
    struct LinkState: Equatable, CustomStringConvertible {
        var exists: Bool
        var up: Bool
        var prefixes: [IPPrefix]

        var description: String {
            guard exists else { return "gone" }
            return (up ? "up" : "down") + " [" + prefixes.map(\.description).joined(separator: ", ") + "]"
        }
    }

    static func state(of interface: String, in table: InterfaceTable) -> LinkState {
        let prefixes = (table.prefixes[interface] ?? []).filter { !$0.isLinkLocal }
            .sorted { $0.description < $1.description }
        return LinkState(exists: table.exists(interface), up: table.up.contains(interface), prefixes: prefixes)
    }

    func run() async throws {
        let poll = Poll(watcher: self)
        poll.start()
        // Waits without a thread; cancellation (a failed sibling service) ends it too.
        try? await gracefulShutdown()
        poll.stop()
    }

    /// The polling itself, on the proxy's timer thread rather than in a sleeping task: nothing
    /// periodic runs on Swift concurrency's thread pool, so on a quiet daemon libdispatch's
    /// pool monitor never finds work waiting (docs/RELIABILITY.md, "A pool with nothing to do").
    private final class Poll: Sendable {
        let watcher: InterfaceWatcher
        private let state = Mutex(State())

        struct State {
            var last: [String: LinkState] = [:]
            var timer: (any ProxyTimer)?
            var stopped = false
        }

        init(watcher: InterfaceWatcher) { self.watcher = watcher }

        func start() {
            let table = watcher.read()
            var last: [String: LinkState] = [:]
            for interface in watcher.reloader.links.map(\.interface) + watcher.reloader.advertised {
                last[interface] = InterfaceWatcher.state(of: interface, in: table)
            }
            state.withLock {
                $0.last = last
                arm(&$0)
            }
        }

        func stop() {
            state.withLock {
                $0.stopped = true
                $0.timer?.cancel()
            }
        }

        private func arm(_ state: inout State) {
            guard !state.stopped else { return }
            state.timer = watcher.scheduler.schedule(after: watcher.interval.value) { [self] in
                tick()
                self.state.withLock { arm(&$0) }
            }
        }

        private func tick() {
            let last = state.withLock { $0.stopped ? nil : $0.last }
            guard let last else { return }
            let table = watcher.read()
            let (now, changed, announcementChanged) = watcher.compare(last, with: table)
            state.withLock { $0.last = now }
            if !changed.isEmpty || announcementChanged {
                watcher.reloader.refresh(interfaces: table, changed: changed)
            }
        }
    }

    /// The states now, and which links changed since `last` (each change logged).
    private func compare(
        _ last: [String: LinkState], with table: InterfaceTable
    ) -> (now: [String: LinkState], changed: Set<String>, announcementChanged: Bool) {
        var changed = Set<String>()
        var now: [String: LinkState] = [:]
        for link in reloader.links {
            let state = Self.state(of: link.interface, in: table)
            now[link.interface] = state
            guard let before = last[link.interface], before != state else { continue }
            changed.insert(link.interface)
            let metadata: Logger.Metadata = [
                "link.interface": "\(link.interface)", "link.before": "\(before)", "link.now": "\(state)",
            ]
            if state.exists && state.up {
                logger.notice("link interface changed; re-creating its mDNS queries", metadata: metadata)
            } else {
                logger.warning("link interface is down; other links are still served", metadata: metadata)
            }
        }
        // Interfaces that only announce browse domains: a change re-plans the announcement
        // (subnets decide the zones; a re-created interface needs its records again).
        var announcementChanged = false
        for interface in reloader.advertised where now[interface] == nil {
            let state = Self.state(of: interface, in: table)
            now[interface] = state
            guard let before = last[interface], before != state else { continue }
            announcementChanged = true
            logger.notice(
                "interface of advertise-browse-domains changed; announcing again",
                metadata: ["mdns.interface": "\(interface)", "link.before": "\(before)", "link.now": "\(state)"])
        }
        return (now, changed, announcementChanged)
    }
}
