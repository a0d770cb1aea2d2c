import NIOCore
import Synchronization

/// Admits TCP connections within the total and per-client limits and remembers the open ones,
/// so that a graceful shutdown can ask them to finish and then close whatever is left.
final class TCPConnectionRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var perClient: [[UInt8]: Int] = [:]
        var shuttingDown = false
    }

    enum Admission: Equatable {
        case admitted
        case overTotalLimit
        case overClientLimit
        case shuttingDown
    }

    private let maxTotal: Int
    private let maxPerClient: Int
    private let state = Mutex(State())

    init(maxTotal: Int, maxPerClient: Int) {
        self.maxTotal = maxTotal
        self.maxPerClient = maxPerClient
    }

    var count: Int {
        self.state.withLock { $0.channels.count }
    }

    func admit(_ channel: any Channel, client: [UInt8]) -> Admission {
        self.state.withLock { state in
            if state.shuttingDown { return .shuttingDown }
            if state.channels.count >= self.maxTotal { return .overTotalLimit }
            let fromClient = state.perClient[client, default: 0]
            if fromClient >= self.maxPerClient { return .overClientLimit }
            state.channels[ObjectIdentifier(channel)] = channel
            state.perClient[client] = fromClient + 1
            return .admitted
        }
    }

    func release(_ channel: any Channel, client: [UInt8]) {
        self.state.withLock { state in
            guard state.channels.removeValue(forKey: ObjectIdentifier(channel)) != nil else { return }
            let left = state.perClient[client, default: 1] - 1
            state.perClient[client] = left > 0 ? left : nil
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
