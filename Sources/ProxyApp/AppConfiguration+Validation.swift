import DNSServer
import DNSWire
import DiscoveryProxy
import MDNS

extension AppConfiguration {
    /// Resolvers stop waiting for a server after about 1.5 s (PowerDNS Recursor answers
    /// SERVFAIL then; avahi's wide-area browser gives up at 2.5 s): a longer negative timeout
    /// is valid (RFC 8766 §5.6 says 6 s) but makes every absent type fail through them.
    public var negativeTimeoutAdvice: String? {
        proxy.negativeTimeout > .milliseconds(1200)
            ? "longer than recursive resolvers wait (PowerDNS Recursor gives up at 1.5 s): absent service types will fail through them; 0.8 is the default"
            : nil
    }

    /// Every problem, one line each, naming the key, the bad value and why. Binding errors
    /// (port in use, permission) are start-up errors, not found here.
    public func validate(interfaces: InterfaceTable) -> [ConfigError] {
        Self.options.flatMap { $0.validate(self, interfaces) }
    }

    /// Where link `index` was configured, as errors name it.
    func entry(_ index: Int) -> String { links[index].origin ?? "links[\(index)]" }

    /// The error of a configuration with no link: it cannot run, though as a file it is fine
    /// (the shipped example has its links commented out).
    public static let noLinks = ConfigError(
        key: "links", reason: "no link configured: give --link IFACE=DOMAIN or a links: list")

    /// What is allowed but probably not meant, one line each (`--check-config` prints them, the
    /// daemon logs them at start).
    public func warnings(interfaces: InterfaceTable) -> [String] {
        var warnings: [String] = []
        let server = effectiveServerName
        if server.labelCount < 2 {
            let origin = serverName == nil ? " (this host's name)" : ""
            warnings.append(
                "server-name: \"\(server)\"\(origin) is not fully qualified: resolvers cannot look it up as the "
                    + "NS target of the link zones; set server-name (--server-name) to a name such as ns.example.com. "
                    + "that resolves to this host")
        }
        for link in links where interfaces.uplinks.contains(link.interface) {
            warnings.append(
                "links: \(link.interface) carries the default route (the uplink): the services found there are "
                    + "served as \(link.domain); serve the interfaces that face your own subnets instead")
        }
        let mdnsInterfaces = Set(links.map(\.interface) + advertiseBrowseDomains).count
        if let limit = interfaces.ipv4MulticastGroupLimit, mdnsInterfaces > limit {
            warnings.append(
                "links: \(mdnsInterfaces) interfaces for mDNS, but net.ipv4.igmp_max_memberships is \(limit): "
                    + "avahi-daemon joins the mDNS group on every interface with one socket, and IPv4 mDNS fails on those "
                    + "beyond \(limit) (\"IP_ADD_MEMBERSHIP failed: No buffer space available\" in its log); raise it: "
                    + "sysctl -w net.ipv4.igmp_max_memberships=\(Self.groupLimitAdvice(mdnsInterfaces)), "
                    + "kept in /etc/sysctl.d/, then restart avahi-daemon")
        }
        let advertised = BrowseDomainAdvertisement(configuration: self, interfaces: interfaces)
        for interface in advertiseBrowseDomains where interfaces.exists(interface) {
            if interfaces.uplinks.contains(interface) {
                warnings.append(
                    "advertise-browse-domains: \(interface) carries the default route (the uplink): the link zones "
                        + "are announced to the network behind it; list the interfaces that face your clients")
            } else if advertised.zones[interface] == nil {
                warnings.append(
                    "advertise-browse-domains: \(interface): no link zone is visible to all of its subnets "
                        + "(allow-clients, links[].clients), or it has no address; nothing is announced there")
            }
        }
        for problem in Announcement.problems(proxyConfiguration(interfaces: interfaces)) {
            warnings.append("links[].announce: \(problem); nothing is announced there")
        }
        if links.contains(where: { !$0.announce.isEmpty }) {
            warnings += AvahiDaemonSettings.read().gatewayWarnings(
                for: links.filter { !$0.announce.isEmpty }.map(\.interface))
        }
        if push.onTCP,
            let exposed = self.server.listenAddresses.first(where: {
                IPPrefix.parseAddress($0.host).map(IPPrefix.isLoopback) != true
            })
        {
            warnings.append(
                "push.on-tcp: DNS Push sessions are accepted in cleartext on \(exposed): anyone on the path can read and "
                    + "forge them (RFC 8765 §4 has Push run over TLS only); this is a lab and testing setting. Serve Push "
                    + "with push.listen (--push-listen) and set push.on-tcp: false, or listen on loopback only")
        }
        return warnings
    }

    /// Room for the links, avahi's other interfaces and growth: the next multiple of 256 above twice as many.
    static func groupLimitAdvice(_ interfaces: Int) -> Int { (interfaces * 2 / 256 + 1) * 256 }

    /// The error for an interface this host does not have, listing those it has.
    static func unknownInterface(_ name: String, key: String, interfaces: InterfaceTable) -> ConfigError? {
        guard !interfaces.exists(name) else { return nil }
        let known = interfaces.prefixes.keys.sorted().joined(separator: ", ")
        return ConfigError(key: key, value: name, reason: "no such network interface (this host has: \(known))")
    }

    func validateAdvertisement(interfaces: InterfaceTable) -> [ConfigError] {
        var errors: [ConfigError] = []
        for (index, interface) in advertiseBrowseDomains.enumerated() {
            let key = "advertise-browse-domains[\(index)]"
            if let error = Self.unknownInterface(interface, key: key, interfaces: interfaces) { errors.append(error) }
            if advertiseBrowseDomains[..<index].contains(interface) {
                errors.append(ConfigError(key: key, value: interface, reason: "listed twice"))
            }
        }
        return errors
    }

    func renderAdvertisement(interfaces: InterfaceTable) -> [String] {
        guard !advertiseBrowseDomains.isEmpty else { return ["advertise-browse-domains: []  # none"] }
        let zones = BrowseDomainAdvertisement(configuration: self, interfaces: interfaces).zones
        return ["advertise-browse-domains:  # b/lb._dns-sd._udp.local. PTRs (RFC 6763 §11)"]
            + advertiseBrowseDomains.map { interface in
                let names = zones[interface].map { $0.map { "\($0)" }.joined(separator: ", ") } ?? "nothing"
                return "  - \(interface)  # \(names)"
            }
    }

    /// An NS target (`key`: server-name, name-servers) inside a link's zone: one error per
    /// such link (RFC 8766 §6.2: an NS target never lies inside a delegated zone).
    func insideLinkZones(_ name: DNSName, key: String) -> [ConfigError] {
        links.indices.filter { links[$0].zones.contains { name.isSubdomain(of: $0) } }.map {
            ConfigError(
                key: key, value: "\(name)",
                reason: "lies inside the zone of \(entry($0)); an NS target must not (RFC 8766 §6.2)")
        }
    }

    /// A `name-servers` list (top level or a link's): this proxy among them, none inside a
    /// link zone (RFC 8766 §6.2). Empty: nothing to check.
    func validateNameServers(_ servers: [DNSName], key: String) -> [ConfigError] {
        guard !servers.isEmpty else { return [] }
        var errors: [ConfigError] = []
        let server = effectiveServerName
        if !servers.contains(server) {
            errors.append(
                ConfigError(
                    key: key, value: "\(server)",
                    reason: "must list this proxy's own server-name too (RFC 8766 §6.2: each proxy answers NS "
                        + "with its own record and its fellow proxies')"))
        }
        return errors + servers.flatMap { insideLinkZones($0, key: key) }
    }

    func validateLinks(interfaces: InterfaceTable, local: DNSName) -> [ConfigError] {
        var errors: [ConfigError] = []
        if links.isEmpty { errors.append(Self.noLinks) }
        for (index, link) in links.enumerated() {
            let key = entry(index)
            if let error = Self.unknownInterface(link.interface, key: key + ".interface", interfaces: interfaces) {
                errors.append(error)
            }
            if link.domain.isRoot {
                errors.append(
                    ConfigError(key: key + ".domain", value: "\(link.domain)", reason: "the root cannot be a link zone")
                )
            }
            if link.domain.isSubdomain(of: local) {
                errors.append(
                    ConfigError(
                        key: key + ".domain", value: "\(link.domain)",
                        reason:
                            "\"local.\" belongs to Multicast DNS (RFC 6762); choose a unicast domain such as lab1.example.com."
                    ))
            }
            if link.domain.wireLength > 100 {
                errors.append(
                    ConfigError(
                        key: key + ".domain", value: "\(link.domain)",
                        reason: "longer than 100 octets leaves no room for service instance names (RFC 6763 §7.2)"))
            }
            if let hostZone = link.hostZone {
                errors += validateHostZone(hostZone, of: index, local: local)
            }
            for (announceIndex, announcement) in link.announce.enumerated() {
                let announceKey = "\(key).announce[\(announceIndex)].from"
                if announcement.from == link.domain {
                    errors.append(
                        ConfigError(
                            key: announceKey, value: "\(announcement.from)",
                            reason:
                                "this link's own domain: its services are on its link already; name another link's domain"
                        ))
                } else if !links.contains(where: { $0.domain == announcement.from }) {
                    errors.append(
                        ConfigError(
                            key: announceKey, value: "\(announcement.from)",
                            reason:
                                "no link has this domain; use one of \(links.map { "\($0.domain)" }.joined(separator: ", "))"
                        ))
                }
                if link.announce[..<announceIndex].contains(where: { $0.from == announcement.from }) {
                    errors.append(
                        ConfigError(
                            key: announceKey, value: "\(announcement.from)",
                            reason: "listed twice; merge the two entries' services"))
                }
            }
            for (otherIndex, other) in links.enumerated() where otherIndex < index {
                if other.interface == link.interface {
                    errors.append(
                        ConfigError(
                            key: key + ".interface", value: link.interface,
                            reason: "already used by \(entry(otherIndex)); each link has exactly one zone"))
                }
                if other.domain == link.domain {
                    errors.append(
                        ConfigError(
                            key: key + ".domain", value: "\(link.domain)",
                            reason: "duplicate domain: already the zone of \(entry(otherIndex)) (\(other.interface))"))
                } else if link.domain.isSubdomain(of: other.domain) || other.domain.isSubdomain(of: link.domain) {
                    errors.append(
                        ConfigError(
                            key: key + ".domain", value: "\(link.domain)",
                            reason:
                                "overlaps the zone \(other.domain) of \(entry(otherIndex)); link zones must not nest"))
                }
            }
        }
        return errors
    }

    /// RFC 8766 §5.3: the host-name zone is letters, digits and hyphens (RFC 952, RFC 1123
    /// §2.1), and like every zone of the proxy it must not coincide with or nest in another.
    private func validateHostZone(_ hostZone: DNSName, of index: Int, local: DNSName) -> [ConfigError] {
        let key = entry(index) + ".host-zone"
        var errors: [ConfigError] = []
        if hostZone.isRoot || hostZone.isSubdomain(of: local) {
            errors.append(
                ConfigError(
                    key: key, value: "\(hostZone)", reason: "must be a unicast domain such as hosts.lab1.example.com."))
        }
        if let label = hostZone.labels.first(where: { !Self.isLDHLabel($0) }) {
            errors.append(
                ConfigError(
                    key: key, value: "\(hostZone)",
                    reason:
                        "label \"\(String(decoding: label, as: UTF8.self))\" is not letters, digits and inner hyphens; "
                        + "host names need an LDH zone (RFC 8766 §5.3), the rich-text name belongs in domain"))
        }
        for (otherIndex, other) in links.enumerated() {
            // Another link's host zone is checked once, from the later of the two.
            let zones = otherIndex < index ? other.zones : [other.domain]
            for zone in zones where hostZone.isSubdomain(of: zone) || zone.isSubdomain(of: hostZone) {
                errors.append(
                    ConfigError(
                        key: key, value: "\(hostZone)",
                        reason: "overlaps the zone \(zone) of \(entry(otherIndex)); the proxy's zones must not nest"))
            }
        }
        return errors
    }

    static func isLDHLabel(_ label: [UInt8]) -> Bool {
        func ok(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard let first = label.first, let last = label.last, ok(first), ok(last) else { return false }
        return label.allSatisfy { ok($0) || $0 == UInt8(ascii: "-") }
    }

    /// The configured server name, or this host's name.
    public var effectiveServerName: DNSName {
        if let serverName { return serverName }
        return (try? DNSName(systemHostName())) ?? (try! DNSName("localhost."))
    }

    /// The clients allowed to query: as configured, or by default loopback plus the subnets of
    /// this host's interfaces (the site's own clients), except those of an interface with a
    /// default route that is not a link (on a router, the uplink: the world behind it is not
    /// the site).
    public func effectiveAllowedClients(interfaces: InterfaceTable) -> [IPPrefix] {
        if let allowClients { return allowClients }
        var prefixes = IPPrefix.loopback
        let links = Set(self.links.map(\.interface))
        for (name, subnets) in interfaces.prefixes.sorted(by: { $0.key < $1.key })
        where links.contains(name) || !interfaces.uplinks.contains(name) {
            for prefix in subnets where !prefixes.contains(prefix) { prefixes.append(prefix) }
        }
        return prefixes
    }

    /// The effective configuration as YAML, for `--check-config`; it loads back as the same.
    public func render(interfaces: InterfaceTable) -> String {
        var lines = ["# effective configuration"]
        var section: String?
        for option in Self.options {
            if option.section != section, let new = option.section {
                lines.append("\(new):" + Self.sectionNote(new, self))
            }
            section = option.section
            lines += option.render(self, interfaces).map { section == nil ? $0 : "  " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    func renderLinks(interfaces: InterfaceTable) -> [String] {
        var lines = ["links:"]
        let proxyLinks = links.contains { !$0.announce.isEmpty } ? proxyConfiguration(interfaces: interfaces).links : []
        for link in links {
            lines.append("  - interface: \(link.interface)")
            lines.append("    domain: \(Self.yamlQuoted(link.domain))")
            if let hostZone = link.hostZone { lines.append("    host-zone: \(Self.yamlQuoted(hostZone))") }
            if let clients = link.clients {
                lines.append("    clients: [\(clients.map { "\"\($0)\"" }.joined(separator: ", "))]")
            }
            if let servers = link.nameServers {
                lines.append("    name-servers: [\(servers.map { Self.yamlQuoted($0) }.joined(separator: ", "))]")
            }
            let subnets = link.subnets ?? (interfaces.prefixes[link.interface] ?? []).filter { !$0.isLinkLocal }
            let origin = link.subnets == nil ? "  # detected" : ""
            lines.append("    subnets: [\(subnets.map { "\"\($0)\"" }.joined(separator: ", "))]\(origin)")
            lines += Self.render(link.services, indent: "    ")
            if let realm = link.realm { lines.append("    realm: \(realm)") }
            if !link.announce.isEmpty { lines.append("    announce:") }
            for announcement in link.announce {
                let far = proxyLinks.first { $0.zone == announcement.from }
                lines.append(
                    "      - from: \(Self.yamlQuoted(announcement.from))  # on \(link.interface): \(announcement.effectiveTypes(far: far))"
                )
                lines += Self.render(announcement.services, indent: "        ")
                if !announcement.subtypes.isEmpty {
                    lines.append("        subtypes: [\(announcement.subtypes.joined(separator: ", "))]")
                }
            }
        }
        return lines
    }

    /// `services:` with its allow and deny lists; nothing for an open filter.
    private static func render(_ filter: ServiceFilter, indent: String) -> [String] {
        var lines: [String] = []
        if let allow = filter.allow { lines.append("\(indent)  allow: [\(allow.sorted().joined(separator: ", "))]") }
        if !filter.deny.isEmpty { lines.append("\(indent)  deny: [\(filter.deny.sorted().joined(separator: ", "))]") }
        return lines.isEmpty ? [] : ["\(indent)services:"] + lines
    }
}
