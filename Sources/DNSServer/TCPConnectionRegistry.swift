import NIOCore
import Synchronization

/// Admits TCP connections within the total, per-client and per-subnet limits and remembers the
/// open ones, so that a graceful shutdown can ask them to finish and then close whatever is left.
final class TCPConnectionRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var perClient: [[UInt8]: Int] = [:]
        var perSubnet: [[UInt8]: Int] = [:]
        var shuttingDown = false
        var limits: Limits
    }

    /// The limits in force; a reload changes them (`apply`). Connections open beyond new,
    /// lower limits stay open: the limits decide admission only.
    struct Limits: Equatable {
        var total: Int
        var perClient: Int
        var perSubnet: Int = .max
    }

    enum Admission: Equatable {
        case admitted
        case overTotalLimit
        case overClientLimit
        case overSubnetLimit
        case shuttingDown
    }

    /// From this many open connections on, the server is short of them (`isShortOfConnections`).
    private let shortageThreshold: Atomic<Int>
    private let state: Mutex<State>
    /// `channels.count`, readable per query without the lock.
    private let open = Atomic<Int>(0)

    init(maxTotal: Int, maxPerClient: Int, maxPerSubnet: Int = .max) {
        let limits = Limits(total: maxTotal, perClient: maxPerClient, perSubnet: maxPerSubnet)
        self.state = Mutex(State(limits: limits))
        self.shortageThreshold = Atomic(Self.shortage(of: limits))
    }

    private static func shortage(of limits: Limits) -> Int { max(1, limits.total - limits.total / 8) }

    var limits: Limits { state.withLock { $0.limits } }

    /// New limits, for the connections admitted from now on.
    func apply(_ limits: Limits) {
        state.withLock { $0.limits = limits }
        shortageThreshold.store(Self.shortage(of: limits), ordering: .relaxed)
    }

    var count: Int {
        self.open.load(ordering: .relaxed)
    }

    /// Seven eighths of the total limit are open: a connection that sends a query now is told
    /// an idle timeout of 0 (RFC 7828 §3.3.2) and closes once idle (RFC 7766 §6.2.3), so that
    /// slots free up before new clients are turned away.
    var isShortOfConnections: Bool {
        self.open.load(ordering: .relaxed) >= self.shortageThreshold.load(ordering: .relaxed)
    }

    /// The subnet a client address counts against: its /24 (IPv4) or /56 (IPv6).
    static func subnet(of address: [UInt8]) -> [UInt8] {
        Array(address.prefix(address.count == 4 ? 3 : 7))
    }

    func admit(_ channel: any Channel, client: [UInt8]) -> Admission {
        self.state.withLock { state in
            if state.shuttingDown { return .shuttingDown }
            if state.channels.count >= state.limits.total { return .overTotalLimit }
            let fromClient = state.perClient[client, default: 0]
            if fromClient >= state.limits.perClient { return .overClientLimit }
            let subnet = Self.subnet(of: client)
            let fromSubnet = state.perSubnet[subnet, default: 0]
            if fromSubnet >= state.limits.perSubnet { return .overSubnetLimit }
            state.channels[ObjectIdentifier(channel)] = channel
            state.perClient[client] = fromClient + 1
            state.perSubnet[subnet] = fromSubnet + 1
            self.open.store(state.channels.count, ordering: .relaxed)
            return .admitted
        }
    }

    func release(_ channel: any Channel, client: [UInt8]) {
        self.state.withLock { state in
            guard state.channels.removeValue(forKey: ObjectIdentifier(channel)) != nil else { return }
            self.open.store(state.channels.count, ordering: .relaxed)
            let left = state.perClient[client, default: 1] - 1
            state.perClient[client] = left > 0 ? left : nil
            let subnet = Self.subnet(of: client)
            let leftInSubnet = state.perSubnet[subnet, default: 1] - 1
            state.perSubnet[subnet] = leftInSubnet > 0 ? leftInSubnet : nil
        }
    }

    /// Refuses new connections from now on (shutdown; the listener's quiescing asks the open
    /// ones to finish).
    func stopAdmitting() {
        self.state.withLock { $0.shuttingDown = true }
    }

    /// Closes every connection still open; returns when they are closed.
    func closeAll() async {
        let channels = self.state.withLock { state in
            state.shuttingDown = true
            return Array(state.channels.values)
        }
        for channel in channels {
            try? await channel.close()
        }
    }
}
