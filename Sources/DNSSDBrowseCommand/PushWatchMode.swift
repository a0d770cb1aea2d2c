import DNSSDClient
import DNSWire
import Synchronization

extension DNSSDBrowse {
    /// `--watch` of a browse with DNS Push (RFC 8765): when every domain advertises the same
    /// `_dns-push-tls._tcp` service, subscribe there and print changes as they come. Returns
    /// false when polling must be used instead: no Push advertised (quietly), or Push failed
    /// (one warning line).
    func watchWithPush(client: DNSSDClient, type: [[UInt8]], domains: [DNSName]) -> Bool {
        guard !self.noPush else { return false }
        var endpoints: [PushEndpoint] = []
        for domain in domains {
            guard let endpoint = try? client.pushEndpoint(domain: domain) else { return false }
            endpoints.append(endpoint)
        }
        guard let endpoint = endpoints.first, endpoints.allSatisfy({ $0 == endpoint }) else { return false }
        let trust: PushTrust = self.pushInsecure ? .insecure : self.pushCA.map { .file($0) } ?? .system
        let questions = domains.compactMap { domain in
            (try? ServiceNames.serviceName(instance: nil, type: type, domain: domain)).map {
                Question(name: $0, type: .ptr)
            }
        }
        let shown = "\(endpoint.target) (\(endpoint.address):\(endpoint.port))"
        let rows = Mutex<[DNSName: [OutputRow]]>([:])
        let json = self.json
        let watch: PushWatch
        do {
            var host = "\(endpoint.target)"
            if host.hasSuffix(".") { host.removeLast() }
            watch = try PushWatch(
                host: endpoint.address, port: endpoint.port, serverName: host, trust: trust, questions: questions,
                timeout: self.timeout
            ) { change in
                guard let domain = domains.first(where: { change.name.isSubdomain(of: $0) }) else { return }
                let time = Console.timeOfDay
                if change.ttl == PushChange.removeSetTTL {
                    // Everything at the name is gone (RFC 8765 §6.3.1).
                    let gone = rows.withLock { $0.removeValue(forKey: domain) ?? [] }
                    for row in gone { Console.out(Self.line(json, added: false, time: time, row: row) + "\n") }
                    return
                }
                guard let instance = DNSSDClient.instance(from: change, type: type, domain: domain) else { return }
                let row = Output.instanceRow(instance)
                let changed = rows.withLock { rows -> Bool in
                    var list = rows[domain] ?? []
                    defer { rows[domain] = list }
                    if change.isAddition {
                        guard !list.contains(where: { $0.key == row.key }) else { return false }
                        list.append(row)
                        return true
                    }
                    guard let index = list.firstIndex(where: { $0.key == row.key }) else { return false }
                    list.remove(at: index)
                    return true
                }
                if changed { Console.out(Self.line(json, added: change.isAddition, time: time, row: row) + "\n") }
            }
        } catch {
            Console.error("dnssd-browse: warning: DNS Push at \(shown) failed (\(error)); polling instead")
            return false
        }
        if watch.wait(seconds: self.duration) { return true }
        Console.error("dnssd-browse: warning: the DNS Push session at \(shown) ended; polling instead")
        return false
    }

    private static func line(_ json: Bool, added: Bool, time: String, row: OutputRow) -> String {
        json
            ? Output.watchJSON(added: added, time: time, row: row)
            : Output.watchLine(added: added, time: time, row: row)
    }
}
