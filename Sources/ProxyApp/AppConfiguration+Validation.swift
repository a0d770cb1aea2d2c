import DNSServer
import DNSWire
import DiscoveryProxy

extension AppConfiguration {
    /// Resolvers stop waiting for a server after about 1.5 s (PowerDNS Recursor answers
    /// SERVFAIL then; avahi's wide-area browser gives up at 2.5 s): a longer negative timeout
    /// is valid (RFC 8766 §5.6 says 6 s) but makes every absent type fail through them.
    public var negativeTimeoutAdvice: String? {
        negativeTimeoutSeconds > 1.2
            ? "longer than recursive resolvers wait (PowerDNS Recursor gives up at 1.5 s): absent service types will fail through them; 0.8 is the default"
            : nil
    }

    /// Every problem, one line each, naming the key, the bad value and why. Binding errors
    /// (port in use, permission) are start-up errors, not found here.
    public func validate(interfaces: InterfaceTable) -> [ConfigError] {
        var errors: [ConfigError] = []
        if links.isEmpty {
            errors.append(ConfigError(key: "links", reason: "no link configured: give --link IFACE=DOMAIN or a links: list"))
        }
        let local = try! DNSName("local.")
        func entry(_ index: Int) -> String { links[index].origin ?? "links[\(index)]" }
        for (index, link) in links.enumerated() {
            let key = entry(index)
            if !interfaces.exists(link.interface) {
                let known = interfaces.prefixes.keys.sorted().joined(separator: ", ")
                errors.append(ConfigError(key: key + ".interface", value: link.interface,
                    reason: "no such network interface (this host has: \(known))"))
            }
            if link.domain.isRoot {
                errors.append(ConfigError(key: key + ".domain", value: "\(link.domain)", reason: "the root cannot be a link zone"))
            }
            if link.domain.isSubdomain(of: local) {
                errors.append(ConfigError(key: key + ".domain", value: "\(link.domain)",
                    reason: "\"local.\" belongs to Multicast DNS (RFC 6762); choose a unicast domain such as lab1.example.com."))
            }
            if link.domain.wireLength > 100 {
                errors.append(ConfigError(key: key + ".domain", value: "\(link.domain)",
                    reason: "longer than 100 octets leaves no room for service instance names (RFC 6763 §7.2)"))
            }
            for (otherIndex, other) in links.enumerated() where otherIndex < index {
                if other.interface == link.interface {
                    errors.append(ConfigError(key: key + ".interface", value: link.interface,
                        reason: "already used by \(entry(otherIndex)); each link has exactly one zone"))
                }
                if other.domain == link.domain {
                    errors.append(ConfigError(key: key + ".domain", value: "\(link.domain)",
                        reason: "duplicate domain: already the zone of \(entry(otherIndex)) (\(other.interface))"))
                } else if link.domain.isSubdomain(of: other.domain) || other.domain.isSubdomain(of: link.domain) {
                    errors.append(ConfigError(key: key + ".domain", value: "\(link.domain)",
                        reason: "overlaps the zone \(other.domain) of \(entry(otherIndex)); link zones must not nest"))
                }
            }
        }
        if listen.isEmpty { errors.append(ConfigError(key: "listen", reason: "no listen address")) }
        let server = effectiveServerName
        for (index, link) in links.enumerated() where server.isSubdomain(of: link.domain) {
            errors.append(ConfigError(key: "server-name", value: "\(server)",
                reason: "lies inside the zone of \(entry(index)); an NS target must not (RFC 8766 §6.2)"))
        }
        func check(_ ok: Bool, _ key: String, _ value: some CustomStringConvertible, _ reason: String) {
            if !ok { errors.append(ConfigError(key: key, value: "\(value)", reason: reason)) }
        }
        check(negativeTimeoutSeconds > 0 && negativeTimeoutSeconds <= 60, "negative-timeout", negativeTimeoutSeconds,
            "must be between 0 and 60 seconds (RFC 8766 §5.6 uses 6)")
        check((0...1000).contains(collectionWindowMilliseconds), "collection-window-ms", collectionWindowMilliseconds,
            "must be between 0 and 1000")
        check(browseIdleTimeoutSeconds >= 1, "browse-idle-timeout", browseIdleTimeoutSeconds, "must be at least 1 second")
        check(mdnsQueriesPerSecond > 0, "mdns-query-rate", mdnsQueriesPerSecond, "must be positive")
        check(mdnsQueryBurst >= 1, "mdns-query-burst", mdnsQueryBurst, "must be at least 1")
        check(optimisticMaxStalenessSeconds >= 0, "optimistic-max-staleness", optimisticMaxStalenessSeconds,
            "must not be negative")
        check((512...65535).contains(maxUDPPayload), "max-udp-payload", maxUDPPayload, "must be between 512 and 65535")
        check(tcpIdleTimeoutSeconds > 0, "tcp.idle-timeout", tcpIdleTimeoutSeconds, "must be positive")
        check(tcpMaxConnections >= 1, "tcp.max-connections", tcpMaxConnections, "must be at least 1")
        check(tcpMaxConnectionsPerClient >= 1, "tcp.max-connections-per-client", tcpMaxConnectionsPerClient,
            "must be at least 1")
        check(tcpMaxInFlightPerConnection >= 1, "tcp.max-in-flight-per-connection", tcpMaxInFlightPerConnection,
            "must be at least 1")
        check(avahiObjectsPerClient >= 1, "avahi.objects-per-client", avahiObjectsPerClient, "must be at least 1")
        check(avahiObjectBudget >= avahiObjectsPerClient, "avahi.object-budget", avahiObjectBudget,
            "must be at least avahi.objects-per-client")
        check(maxBrowses >= 1, "max-browses", maxBrowses, "must be at least 1")
        check(maxBrowses <= avahiObjectBudget, "max-browses", maxBrowses,
            "must not exceed avahi.object-budget (\(avahiObjectBudget)): each browse is one avahi object")
        check(interfaceCheckSeconds > 0, "interface-check-interval", interfaceCheckSeconds, "must be positive")
        check(rateLimit.responsesPerSecond >= 0, "rate-limit.responses-per-second", rateLimit.responsesPerSecond,
            "must not be negative (0 turns rate limiting off)")
        check(rateLimit.burst >= 0, "rate-limit.burst", rateLimit.burst, "must not be negative")
        check((8...32).contains(rateLimit.ipv4PrefixLength), "rate-limit.ipv4-prefix-length",
            rateLimit.ipv4PrefixLength, "must be between 8 and 32")
        check((16...128).contains(rateLimit.ipv6PrefixLength), "rate-limit.ipv6-prefix-length",
            rateLimit.ipv6PrefixLength, "must be between 16 and 128")
        check(rateLimit.slip >= 0 && rateLimit.slip <= 10, "rate-limit.slip", rateLimit.slip,
            "must be between 0 (never) and 10")
        if let user {
            check(UnprivilegedUser.lookup(user) != nil, "user", user, "no such user on this host")
        }
        let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
        check(levels.contains(logLevel), "log-level", logLevel, "must be one of \(levels.joined(separator: ", "))")
        errors += push.validate()
        return errors
    }

    /// The configured server name, or this host's name.
    public var effectiveServerName: DNSName {
        if let serverName { return serverName }
        return (try? DNSName(systemHostName())) ?? (try! DNSName("localhost."))
    }

    /// The clients allowed to query: as configured, or by default loopback plus every subnet
    /// of this host's interfaces (the site's own clients).
    public func effectiveAllowedClients(interfaces: InterfaceTable) -> [IPPrefix] {
        if let allowClients { return allowClients }
        var prefixes = [IPPrefix("127.0.0.0/8")!, IPPrefix("::1/128")!]
        for prefix in interfaces.prefixes.values.joined() where !prefixes.contains(prefix) {
            prefixes.append(prefix)
        }
        return prefixes
    }

    /// The pure proxy's view, with subnets detected from the interfaces where not configured.
    public func proxyConfiguration(interfaces: InterfaceTable) -> ProxyConfiguration {
        let links = self.links.map { spec in
            Link(interface: spec.interface, zone: spec.domain,
                subnets: (spec.subnets ?? interfaces.prefixes[spec.interface] ?? []).filter { !$0.isLinkLocal },
                services: spec.services)
        }
        var config = ProxyConfiguration(links: links, serverName: effectiveServerName, hostmaster: hostmaster)
        config.negativeTimeout = .milliseconds(Int(negativeTimeoutSeconds * 1000))
        config.collectionWindow = .milliseconds(collectionWindowMilliseconds)
        config.browseIdleTimeout = .milliseconds(Int(browseIdleTimeoutSeconds * 1000))
        config.suppressLinkLocal = suppressLinkLocal
        config.mdnsQueriesPerSecond = mdnsQueriesPerSecond
        config.mdnsQueryBurst = mdnsQueryBurst
        config.maxUDPPayload = maxUDPPayload
        config.optimisticAnswers = optimisticAnswers
        config.optimisticMaxStaleness = .milliseconds(Int(optimisticMaxStalenessSeconds * 1000))
        config.allowedClients = effectiveAllowedClients(interfaces: interfaces)
        config.push = push.advertisement(interfaces: interfaces, links: links.map(\.interface))
        config.maxBrowses = maxBrowses
        return config
    }

    /// Single-quoted YAML has no escapes of its own, so a name's `\032` survives a reload.
    private func yamlQuoted(_ name: DNSName) -> String {
        "'" + "\(name)".split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
    }

    /// The effective configuration as YAML, for `--check-config`; it loads back as the same.
    public func render(interfaces: InterfaceTable) -> String {
        var lines = ["# effective configuration"]
        lines.append("server-name: \(yamlQuoted(effectiveServerName))")
        if let hostmaster { lines.append("hostmaster: \(yamlQuoted(hostmaster))") }
        lines.append("listen:")
        lines += listen.map { "  - \"\($0)\"" }
        lines.append("links:")
        for link in links {
            lines.append("  - interface: \(link.interface)")
            lines.append("    domain: \(yamlQuoted(link.domain))")
            let subnets = link.subnets ?? (interfaces.prefixes[link.interface] ?? []).filter { !$0.isLinkLocal }
            let origin = link.subnets == nil ? "  # detected" : ""
            lines.append("    subnets: [\(subnets.map { "\"\($0)\"" }.joined(separator: ", "))]\(origin)")
            if let allow = link.services.allow {
                lines.append("    services:")
                lines.append("      allow: [\(allow.sorted().joined(separator: ", "))]")
            }
            if !link.services.deny.isEmpty {
                if link.services.allow == nil { lines.append("    services:") }
                lines.append("      deny: [\(link.services.deny.sorted().joined(separator: ", "))]")
            }
        }
        lines.append("negative-timeout: \(negativeTimeoutSeconds)\(negativeTimeoutAdvice.map { "  # \($0)" } ?? "")")
        lines.append("collection-window-ms: \(collectionWindowMilliseconds)")
        lines.append("browse-idle-timeout: \(browseIdleTimeoutSeconds)")
        lines.append("suppress-link-local: \(suppressLinkLocal)")
        lines.append("mdns-query-rate: \(mdnsQueriesPerSecond)")
        lines.append("mdns-query-burst: \(mdnsQueryBurst)")
        lines.append("max-udp-payload: \(maxUDPPayload)")
        lines.append("optimistic-answers: \(optimisticAnswers)")
        lines.append("optimistic-max-staleness: \(optimisticMaxStalenessSeconds)")
        lines.append("replay-answers: \(replayAnswers)")
        lines.append("log-level: \(logLevel)")
        lines.append("admin: \(admin.map { "\"\($0)\"" } ?? "off")")
        // Quoted: a plain `::1/128` is not valid YAML inside a flow sequence.
        let clients = effectiveAllowedClients(interfaces: interfaces).map { "\"\($0)\"" }.joined(separator: ", ")
        lines.append("allow-clients: [\(clients)]\(allowClients == nil ? "  # default: loopback + this host's subnets" : "")")
        lines.append("tcp:")
        lines.append("  idle-timeout: \(tcpIdleTimeoutSeconds)")
        lines.append("  max-connections: \(tcpMaxConnections)")
        lines.append("  max-connections-per-client: \(tcpMaxConnectionsPerClient)")
        lines.append("  max-in-flight-per-connection: \(tcpMaxInFlightPerConnection)")
        lines.append("avahi:")
        lines.append("  objects-per-client: \(avahiObjectsPerClient)")
        lines.append("  object-budget: \(avahiObjectBudget)")
        lines += push.render()
        lines.append("max-browses: \(maxBrowses)")
        lines.append("interface-check-interval: \(interfaceCheckSeconds)")
        lines.append("rate-limit:\(rateLimit.isEnabled ? "" : "  # off: responses-per-second 0")")
        lines.append("  responses-per-second: \(rateLimit.responsesPerSecond)")
        lines.append("  burst: \(rateLimit.burst)")
        lines.append("  ipv4-prefix-length: \(rateLimit.ipv4PrefixLength)")
        lines.append("  ipv6-prefix-length: \(rateLimit.ipv6PrefixLength)")
        lines.append("  slip: \(rateLimit.slip)")
        if let user { lines.append("user: \(user)") }
        return lines.joined(separator: "\n")
    }
}
