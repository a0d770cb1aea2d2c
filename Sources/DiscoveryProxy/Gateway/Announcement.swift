import DNSWire

/// A client link's mDNS gateway policy (`links[].announce`): the services of the link whose zone
/// is `from` that are announced over mDNS on the client link, for clients that browse `.local`
/// only. One direction: the far link learns nothing of the client link's services from it.
public struct Announcement: Hashable, Sendable {
    /// The far link's zone.
    public var from: DNSName
    /// Which of the far link's service types; the far link's own `services` filter applies too.
    public var services: ServiceFilter
    /// Subtypes to announce too, e.g. `_universal._sub._ipp._tcp` (RFC 6763 §7.1). mDNS cannot
    /// list an instance's subtypes, so they are named; each is followed when its type is
    /// announced, and its instances get the subtype PTR on the client link.
    public var subtypes: [String]

    public init(from: DNSName, services: ServiceFilter = ServiceFilter(), subtypes: [String] = []) {
        self.from = from
        self.services = services
        self.subtypes = subtypes.map { $0.lowercased() }
    }

    /// The types announced, with the far link's own filter applied: for `--check-config`.
    public func effectiveTypes(far: Link?) -> String {
        let deny = services.deny.union(far?.services.deny ?? [])
        if let allowed = ServiceFilter.allowedByAll([services] + (far.map { [$0.services] } ?? [])) {
            let types = allowed.filter { !deny.contains($0) }
            return types.isEmpty ? "no type (the allow lists do not overlap)" : types.joined(separator: ", ")
        }
        let except = deny.isEmpty ? "" : " except \(deny.sorted().joined(separator: ", "))"
        return "every type \(from) shares\(except)"
    }

    /// Why the configured announcements of `configuration` cannot run (a view hides the far
    /// link from the client link, the ACL refuses its subnets, it has no subnet).
    public static func problems(_ configuration: ProxyConfiguration) -> [String] {
        AnnouncementRoute.routes(configuration).problems
    }
}

/// One far link announced on one client link, resolved against the configuration.
struct AnnouncementRoute: Hashable, Sendable {
    var client: Link
    var far: Link
    var services: ServiceFilter
    var subtypes: [String]
    /// Whom the route's subscriptions are made as: a client at the first address of the
    /// client link's first subnet, so that the ACL, the far link's view and private realms
    /// judge the announcements as they judge a unicast client of that link.
    var requester: DNSClient

    func permits(_ type: String) -> Bool { services.permits(type) && far.services.permits(type) }

    /// The routes of `configuration`, and why a configured announcement has none.
    static func routes(_ configuration: ProxyConfiguration) -> (routes: [AnnouncementRoute], problems: [String]) {
        var routes: [AnnouncementRoute] = []
        var problems: [String] = []
        for client in configuration.links {
            for announcement in client.announce {
                let what = "\(client.interface): announce from \(announcement.from)"
                guard let far = configuration.links.first(where: { $0.zone == announcement.from }) else {
                    problems.append("\(what): no link has that domain")
                    continue
                }
                guard far.interface != client.interface else {
                    problems.append("\(what): a link's own services are on it already")
                    continue
                }
                guard let subnet = client.subnets.first else {
                    problems.append(
                        "\(what): \(client.interface) has no subnet, so no client of it could reach the services")
                    continue
                }
                let admitted =
                    configuration.allowedClients.map { allowed in
                        client.subnets.allSatisfy { subnet in allowed.contains { $0.contains(subnet) } }
                    } ?? true
                guard admitted else {
                    problems.append("\(what): allow-clients does not admit all of \(client.interface)'s subnets")
                    continue
                }
                guard client.subnets.allSatisfy({ far.isVisible(toEveryClientOf: $0) }) else {
                    problems.append("\(what): \(far.zone)'s clients view hides it from \(client.interface)'s subnets")
                    continue
                }
                routes.append(
                    AnnouncementRoute(
                        client: client, far: far, services: announcement.services, subtypes: announcement.subtypes,
                        requester: DNSClient(address: subnet.address, port: 0, transport: .udp)))
            }
        }
        return (routes, problems)
    }
}

/// How a far service is named on a client link: deterministic, so that a restart and the
/// other router of an HA pair choose the same names and publish identical records (RFC 6762
/// §8.2: identical data is no conflict).
///
/// - Host names: the far host's labels joined by `-`, then `-` and the far zone's first label:
///   `printer.lab1.example.` → `printer-lab1.local.` (one label, RFC 6762 §3; at most 63 octets).
/// - Instance names stay as on the far link. When that name is taken on the client link (the
///   probe collides, §9), the far one is renamed, never the local one: `Name (lab1)`, then
///   `Name (lab1 2)`, `Name (lab1 3)`.
enum AnnouncementNames {
    static func tag(of far: Link) -> [UInt8] { far.zone.labels.first ?? [] }

    static func host(_ relative: [[UInt8]], far: Link) -> DNSName? {
        guard !relative.isEmpty else { return nil }
        let suffix = Array("-".utf8) + tag(of: far)
        let joined = Array(relative.joined(separator: [UInt8(ascii: "-")]))
        let label = truncated(joined, to: 63 - suffix.count) + suffix
        return try? DNSName(labels: [label, Array("local".utf8)])
    }

    /// The instance label after `renames` collisions.
    static func instance(_ label: [UInt8], far: Link, renames: Int) -> [UInt8] {
        guard renames > 0 else { return label }
        let number = renames == 1 ? "" : " \(renames)"
        let suffix = Array(" (".utf8) + tag(of: far) + Array("\(number))".utf8)
        return truncated(label, to: 63 - suffix.count) + suffix
    }

    /// At most `limit` octets, cut at a UTF-8 character boundary.
    static func truncated(_ bytes: [UInt8], to limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var end = max(0, limit)
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }
}
