import DNSServer
import DNSWire
import DiscoveryProxy

/// The records the parent zones need for this configuration (`--print-parent-zone`), in
/// zone-file syntax: each link zone (and host zone) delegated to every proxy of it (RFC 8766
/// §6.2), glue for this proxy's own name where the parent holds it, the `b`/`db`/`lb`
/// browse-domain PTRs (RFC 6763 §11) and the reverse zones' delegations (§6.5). Names are
/// absolute, so the lines can be pasted into a zone with any $ORIGIN.
public enum ParentZone {
    public static func render(_ config: AppConfiguration, interfaces: InterfaceTable, ttl: UInt32 = 3600) -> String {
        let proxy = config.proxyConfiguration(interfaces: interfaces)
        let me = proxy.serverName
        let glue = addresses(config, proxy: proxy, interfaces: interfaces)
        var sections = Sections()
        func add(_ parent: DNSName, _ line: String) { sections.add(line, in: parent) }
        func record(_ owner: DNSName, _ type: String, _ data: String, _ comment: String? = nil) -> String {
            "\(owner)\t\(ttl)\tIN\t\(type)\t\(data)" + (comment.map { "\t; \($0)" } ?? "")
        }

        for link in proxy.links {
            for zone in [link.zone] + (link.hostZone.map { [$0] } ?? []) {
                let parent = zone.parent
                for server in proxy.nameServers(of: link) { add(parent, record(zone, "NS", "\(server)")) }
                // Glue: only this proxy's addresses are known here; fellow proxies print theirs.
                if me.isSubdomain(of: parent) {
                    for address in glue {
                        add(parent, record(me, address.count == 4 ? "A" : "AAAA", IPPrefix.format(address), "glue"))
                    }
                }
            }
            for label in ["b", "lb"] {
                add(link.zone.parent, record(enumeration(label, link.zone.parent), "PTR", "\(link.zone)"))
            }
        }
        for parent in sections.list.map(\.parent) {
            if let first = proxy.links.first(where: { $0.zone.parent == parent }) {
                add(parent, record(enumeration("db", parent), "PTR", "\(first.zone)", "the default browse domain"))
            }
        }
        var reverse = Sections()
        for link in proxy.links {
            for subnet in link.subnets where !subnet.isLinkLocal {
                let zone = subnet.reverseZone
                for server in proxy.nameServers(of: link) {
                    reverse.add(record(zone, "NS", "\(server)"), in: zone.parent)
                }
            }
        }

        var text = """
            ; Parent-zone records for the zones of this discovery proxy (RFC 8766 §6.2, RFC 6763 §11),
            ; printed by discovery-proxy --print-parent-zone. Add each block to the zone it names.

            """
        if proxy.links.contains(where: { proxy.nameServers(of: $0).count > 1 }) {
            text += "; Fellow proxies (name-servers) need their own A/AAAA glue, printed by each of them.\n"
        }
        if glue.isEmpty && sections.list.contains(where: { me.isSubdomain(of: $0.parent) }) {
            text += "; No glue: give \(me) an address in its zone (listen on a specific address, or push.addresses).\n"
        }
        for section in sections.list {
            text += "\n; ---- in zone \(section.parent)\n" + section.lines.joined(separator: "\n") + "\n"
        }
        for section in reverse.list {
            text +=
                "\n; ---- in zone \(section.parent) (reverse lookups and address-based browsing, RFC 8766 §5.4, §6.5)\n"
            text += section.lines.joined(separator: "\n") + "\n"
        }
        return text
    }

    /// Record lines grouped by the zone they go in, in first-seen order, each line once.
    struct Sections {
        var list: [(parent: DNSName, lines: [String])] = []

        mutating func add(_ line: String, in parent: DNSName) {
            if let index = list.firstIndex(where: { $0.parent == parent }) {
                if !list[index].lines.contains(line) { list[index].lines.append(line) }
            } else {
                list.append((parent, [line]))
            }
        }
    }

    /// `<label>._dns-sd._udp.<parent>`.
    static func enumeration(_ label: String, _ parent: DNSName) -> DNSName {
        (try? parent.prepending([Array(label.utf8), Array("_dns-sd".utf8), Array("_udp".utf8)])) ?? parent
    }

    /// This proxy's addresses for glue: the specific listen addresses resolvers can reach, or
    /// else its addresses on the links.
    static func addresses(_ config: AppConfiguration, proxy: ProxyConfiguration, interfaces: InterfaceTable)
        -> [[UInt8]]
    {
        let listened = config.server.listenAddresses.compactMap { IPPrefix.parseAddress($0.host) }.filter { address in
            !address.allSatisfy { $0 == 0 } && !(address.count == 4 && address[0] == 127)
                && address != [UInt8](repeating: 0, count: 15) + [1]
        }
        if !listened.isEmpty { return listened }
        var found: [[UInt8]] = []
        for link in proxy.links {
            for address in interfaces.addresses[link.interface] ?? []
            where !IPPrefix.isLinkLocal(address) && !found.contains(address) {
                found.append(address)
            }
        }
        return found
    }
}
