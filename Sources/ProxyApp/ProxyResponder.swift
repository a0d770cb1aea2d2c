import DNSServer
import DNSWire
import DiscoveryProxy

/// Adapts the front ends' byte-level contract to the proxy logic.
struct ProxyResponder: DNSResponder {
    let proxy: DiscoveryProxy

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        let proxy = self.proxy
        proxy.handle(query: query, from: client) { reply in
            answer(DNSAnswer(bytes: reply.bytes, replay: reply.replay.map { Self.replay($0, of: proxy) }))
        }
    }

    private static func replay(_ ticket: ReplayTicket, of proxy: DiscoveryProxy) -> DNSAnswerReplay {
        DNSAnswerReplay(
            lifetime: ticket.lifetime, isCurrent: { proxy.isCurrent(ticket) },
            replayed: { proxy.replayed(ticket, count: $0) })
    }
}

/// The proxy's responder with DSO sessions: ordinary queries go to the proxy, DSO messages to
/// a DNS Push session per connection.
struct SessionResponder: DNSSessionResponder {
    let queries: any DNSResponder
    let push: PushService

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        queries.handle(query: query, from: client, answer: answer)  // keeps replay permission
    }

    func openSession(client: DNSClient, connection: DNSStreamConnection) -> any DNSStreamSession {
        StreamSession(
            session: push.openSession(client: client, transport: StreamTransport(connection: connection)))
    }
}

/// The front end's connection as the session's transport.
private struct StreamTransport: PushTransport {
    let connection: DNSStreamConnection
    func send(_ message: [UInt8]) { connection.send(message) }
    func close(abort: Bool) { connection.close(abort: abort) }
    func awaitClose(within grace: Duration) { connection.awaitClose(within: grace) }
}

/// The Push session as the front end's stream session.
private struct StreamSession: DNSStreamSession {
    let session: PushSession
    func receive(_ message: [UInt8]) { session.receive(message) }
    func noteQuery(_ message: [UInt8]) { session.noteQuery(message) }
    func connectionClosed() { session.connectionClosed() }
    func serverShuttingDown() { session.shutdown() }
}
