import DNSServer
import DiscoveryProxy

/// Adapts the front ends' byte-level contract to the proxy logic.
struct ProxyResponder: DNSResponder {
    let proxy: DiscoveryProxy

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        let proxy = self.proxy
        proxy.handle(
            query: query, overTCP: client.transport == .tcp, client: client.address,
            tcpIdleTimeout: client.tcpIdleTimeout
        ) { reply in
            answer(DNSAnswer(bytes: reply.bytes, replay: reply.replay.map { Self.replay($0, of: proxy) }))
        }
    }

    private static func replay(_ ticket: ReplayTicket, of proxy: DiscoveryProxy) -> DNSAnswerReplay {
        DNSAnswerReplay(
            lifetime: ticket.lifetime, isCurrent: { proxy.isCurrent(ticket) },
            replayed: { proxy.replayed(ticket, count: $0) })
    }
}
