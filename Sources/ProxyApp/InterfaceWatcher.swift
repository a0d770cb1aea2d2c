import DiscoveryProxy
import Logging
import ServiceLifecycle

/// Notices a link's interface going down, coming back, disappearing, or changing addresses
/// (getifaddrs every `interval`; cheap, and needs no netlink socket). A change is logged and
/// applied through `Reloader.refresh`: the link's browses are re-created on the interface as
/// it is now, and reverse zones follow its subnets. The other links are untouched.
struct InterfaceWatcher: Service {
    let reloader: Reloader
    let interval: Duration
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
        // A sleep is not woken by graceful shutdown by itself: cancel it, so SIGTERM is prompt.
        await cancelWhenGracefulShutdown { await self.watch() }
    }

    private func watch() async {
        var last: [String: LinkState] = [:]
        let table = read()
        for interface in reloader.links.map(\.interface) + reloader.advertised {
            last[interface] = Self.state(of: interface, in: table)
        }
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let table = read()
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
            last = now
            if !changed.isEmpty || announcementChanged { reloader.refresh(interfaces: table, changed: changed) }
        }
    }
}
