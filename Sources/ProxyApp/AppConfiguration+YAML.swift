import DNSServer
import DNSWire
import DiscoveryProxy
import Foundation
import Yams

extension AppConfiguration {
    /// Reads the YAML file (see config/discovery-proxy.yaml for every key). Returns what could
    /// be read together with every problem found (unknown keys, values of the wrong type), so
    /// that validation can still report on the rest.
    public static func load(file path: String) -> (AppConfiguration, [ConfigError]) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            return (AppConfiguration(), [ConfigError(key: "--config", value: path, reason: "cannot read file: \(error.localizedDescription)", isWholeFile: true)])
        }
        return parse(yaml: text, source: path)
    }

    public static func parse(yaml text: String, source: String = "config") -> (AppConfiguration, [ConfigError]) {
        let document: Any?
        do {
            document = try Yams.load(yaml: text)
        } catch {
            return (AppConfiguration(), [ConfigError(key: source, reason: "not valid YAML: \(error)", isWholeFile: true)])
        }
        var config = AppConfiguration()
        guard let document else { return (config, []) }  // an empty file is all defaults
        guard let root = document as? [String: Any] else {
            return (config, [ConfigError(key: source, reason: "expected a mapping of keys at the top level", isWholeFile: true)])
        }
        var reader = YAMLReader()
        reader.read(root, into: &config)
        return (config, reader.errors)
    }

    /// Validation problems that are only echoes of a reading error are left out: no "no link
    /// configured" when a link entry was unreadable, no "no listen address" when every listen
    /// entry was.
    public static func withoutEchoes(_ validation: [ConfigError], of readErrors: [ConfigError]) -> [ConfigError] {
        // An unreadable file leaves only defaults to validate: their problems are not the file's.
        if readErrors.contains(where: \.isWholeFile) { return [] }
        return validation.filter { problem in
            !readErrors.contains { $0.key.hasPrefix(problem.key + "[") || $0.key.hasPrefix("--" + problem.key) }
        }
    }
}

/// Typed access to a YAML mapping that collects errors instead of stopping at the first.
private struct YAMLReader {
    var errors: [ConfigError] = []

    mutating func read(_ root: [String: Any], into config: inout AppConfiguration) {
        let known: Set<String> = [
            "links", "listen", "server-name", "hostmaster", "log-level", "negative-timeout", "collection-window-ms",
            "browse-idle-timeout", "suppress-link-local", "mdns-query-rate", "mdns-query-burst", "max-udp-payload",
            "tcp", "avahi", "admin", "allow-clients", "optimistic-answers", "optimistic-max-staleness", "push",
            "max-browses", "rate-limit", "interface-check-interval", "user", "replay-answers",
        ]
        unknownKeys(root, known: known, prefix: "")
        if let links = root["links"] {
            config.links = readLinks(links)
        }
        if let listen = root["listen"] {
            if let addresses = list(listen, key: "listen", expected: "a list of ADDR:PORT",
                element: "ADDR:PORT, e.g. 0.0.0.0:53 or [::]:53", AppConfiguration.ListenAddress.init)
            {
                config.listen = addresses
            }
        }
        if let name = string(root, "server-name") { config.serverName = domain(name, key: "server-name") }
        if let name = string(root, "hostmaster") { config.hostmaster = domain(name, key: "hostmaster") }
        if let level = string(root, "log-level") { config.logLevel = level }
        number(root, "negative-timeout", into: &config.negativeTimeoutSeconds)
        integer(root, "collection-window-ms", into: &config.collectionWindowMilliseconds)
        number(root, "browse-idle-timeout", into: &config.browseIdleTimeoutSeconds)
        boolean(root, "suppress-link-local", into: &config.suppressLinkLocal)
        number(root, "mdns-query-rate", into: &config.mdnsQueriesPerSecond)
        number(root, "mdns-query-burst", into: &config.mdnsQueryBurst)
        integer(root, "max-udp-payload", into: &config.maxUDPPayload)
        boolean(root, "optimistic-answers", into: &config.optimisticAnswers)
        number(root, "optimistic-max-staleness", into: &config.optimisticMaxStalenessSeconds)
        boolean(root, "replay-answers", into: &config.replayAnswers)
        if let admin = root["admin"] {
            let text = "\(admin)"
            if ["off", "false", "none", ""].contains(text.lowercased()) {
                config.admin = nil
            } else if let address = AppConfiguration.ListenAddress(text) {
                config.admin = address
            } else {
                errors.append(ConfigError(key: "admin", value: text, reason: "expected ADDR:PORT (e.g. 127.0.0.1:8053) or off"))
            }
        }
        if let clients = root["allow-clients"] {
            config.allowClients = prefixes(clients, key: "allow-clients")
        }
        if let tcp = mapping(root, "tcp") {
            unknownKeys(tcp, known: ["idle-timeout", "max-connections", "max-connections-per-client",
                "max-in-flight-per-connection"], prefix: "tcp.")
            number(tcp, "idle-timeout", key: "tcp.idle-timeout", into: &config.tcpIdleTimeoutSeconds)
            integer(tcp, "max-connections", key: "tcp.max-connections", into: &config.tcpMaxConnections)
            integer(tcp, "max-connections-per-client", key: "tcp.max-connections-per-client",
                into: &config.tcpMaxConnectionsPerClient)
            integer(tcp, "max-in-flight-per-connection", key: "tcp.max-in-flight-per-connection",
                into: &config.tcpMaxInFlightPerConnection)
        }
        if let push = mapping(root, "push") { readPush(push, into: &config.push) }
        integer(root, "max-browses", into: &config.maxBrowses)
        number(root, "interface-check-interval", into: &config.interfaceCheckSeconds)
        if let user = string(root, "user") { config.user = user }
        if let limit = mapping(root, "rate-limit") {
            unknownKeys(limit, known: ["responses-per-second", "burst", "ipv4-prefix-length", "ipv6-prefix-length",
                "slip"], prefix: "rate-limit.")
            integer(limit, "responses-per-second", key: "rate-limit.responses-per-second",
                into: &config.rateLimit.responsesPerSecond)
            integer(limit, "burst", key: "rate-limit.burst", into: &config.rateLimit.burst)
            integer(limit, "ipv4-prefix-length", key: "rate-limit.ipv4-prefix-length",
                into: &config.rateLimit.ipv4PrefixLength)
            integer(limit, "ipv6-prefix-length", key: "rate-limit.ipv6-prefix-length",
                into: &config.rateLimit.ipv6PrefixLength)
            integer(limit, "slip", key: "rate-limit.slip", into: &config.rateLimit.slip)
        }
        if let avahi = mapping(root, "avahi") {
            unknownKeys(avahi, known: ["objects-per-client", "object-budget"], prefix: "avahi.")
            integer(avahi, "objects-per-client", key: "avahi.objects-per-client", into: &config.avahiObjectsPerClient)
            integer(avahi, "object-budget", key: "avahi.object-budget", into: &config.avahiObjectBudget)
        }
    }

    private mutating func readPush(_ push: [String: Any], into settings: inout PushSettings) {
        unknownKeys(push, known: ["listen", "tls-cert", "tls-key", "state-dir", "on-tcp", "addresses", "max-sessions",
            "max-subscriptions-per-session", "inactivity-timeout", "keepalive-interval"], prefix: "push.")
        if let listen = push["listen"], let addresses = list(listen, key: "push.listen", expected: "a list of ADDR:PORT",
            element: "ADDR:PORT or ADDR (port 853)", PushSettings.listenAddress)
        {
            settings.listen = addresses
        }
        if let file = string(push, "tls-cert", key: "push.tls-cert") { settings.certificateFile = file }
        if let file = string(push, "tls-key", key: "push.tls-key") { settings.privateKeyFile = file }
        if let directory = string(push, "state-dir", key: "push.state-dir") { settings.stateDirectory = directory }
        boolean(push, "on-tcp", into: &settings.onTCP)
        if let addresses = push["addresses"], let parsed = list(addresses, key: "push.addresses",
            expected: "a list of IP addresses", element: "an IP address", { text in IPPrefix.parseAddress(text).map { _ in text } })
        {
            settings.addresses = parsed
        }
        integer(push, "max-sessions", key: "push.max-sessions", into: &settings.maxSessions)
        integer(push, "max-subscriptions-per-session", key: "push.max-subscriptions-per-session",
            into: &settings.maxSubscriptionsPerSession)
        number(push, "inactivity-timeout", key: "push.inactivity-timeout", into: &settings.inactivityTimeoutSeconds)
        number(push, "keepalive-interval", key: "push.keepalive-interval", into: &settings.keepaliveIntervalSeconds)
    }

    private mutating func readLinks(_ value: Any) -> [AppConfiguration.LinkSpec] {
        guard let items = value as? [Any] else {
            errors.append(ConfigError(key: "links", reason: "expected a list of {interface, domain} entries"))
            return []
        }
        var links: [AppConfiguration.LinkSpec] = []
        for (index, item) in items.enumerated() {
            let key = "links[\(index)]"
            guard let entry = item as? [String: Any] else {
                errors.append(ConfigError(key: key, value: "\(item)", reason: "expected a mapping with interface and domain"))
                continue
            }
            unknownKeys(entry, known: ["interface", "domain", "subnets", "services"], prefix: key + ".")
            guard let interface = string(entry, "interface", key: key + ".interface") else {
                errors.append(ConfigError(key: key + ".interface", reason: "missing"))
                continue
            }
            guard let domainText = string(entry, "domain", key: key + ".domain") else {
                errors.append(ConfigError(key: key + ".domain", reason: "missing"))
                continue
            }
            guard let zone = domain(domainText, key: key + ".domain") else { continue }
            let subnets = entry["subnets"].map { prefixes($0, key: key + ".subnets") }
            var filter = ServiceFilter()
            if let services = entry["services"] {
                if let services = services as? [String: Any] {
                    unknownKeys(services, known: ["allow", "deny"], prefix: key + ".services.")
                    filter = ServiceFilter(
                        allow: services["allow"].map { serviceTypes($0, key: key + ".services.allow") },
                        deny: services["deny"].map { serviceTypes($0, key: key + ".services.deny") } ?? [])
                } else {
                    errors.append(ConfigError(key: key + ".services", value: "\(services)",
                        reason: "expected a mapping with allow and/or deny lists"))
                }
            }
            links.append(AppConfiguration.LinkSpec(
                interface: interface, domain: zone, subnets: subnets, origin: key, services: filter))
        }
        return links
    }

    private mutating func prefixes(_ value: Any, key: String) -> [IPPrefix] {
        list(value, key: key, expected: "a list of prefixes",
            element: "a prefix such as 192.0.2.0/24 or 2001:db8::/64") { IPPrefix($0) } ?? []
    }

    /// `_ipp._tcp`-style service types: `_name` (RFC 6763 §7: up to 15 characters) then `_tcp` or `_udp`.
    private mutating func serviceTypes(_ value: Any, key: String) -> [String] {
        list(value, key: key, expected: "a list of service types like _ipp._tcp",
            element: "a service type like _ipp._tcp (RFC 6763 §7)") { text in
            let parts = text.lowercased().split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].hasPrefix("_"), (2...16).contains(parts[0].count),
                parts[1] == "_tcp" || parts[1] == "_udp"
            else { return nil }
            return text
        } ?? []
    }

    /// A YAML list whose elements are parsed from their text; each bad element is one error
    /// naming `key[index]`, and the good ones are kept. Nil (and one error) when it is no list.
    private mutating func list<Element>(
        _ value: Any, key: String, expected: String, element: String, _ parse: (String) -> Element?
    ) -> [Element]? {
        guard let items = value as? [Any] else {
            errors.append(ConfigError(key: key, value: "\(value)", reason: "expected \(expected)"))
            return nil
        }
        var parsed: [Element] = []
        for (index, item) in items.enumerated() {
            let text = "\(item)"
            if let value = parse(text) {
                parsed.append(value)
            } else {
                errors.append(ConfigError(key: "\(key)[\(index)]", value: text, reason: "expected \(element)"))
            }
        }
        return parsed
    }

    private mutating func unknownKeys(_ mapping: [String: Any], known: Set<String>, prefix: String) {
        for key in mapping.keys.sorted() where !known.contains(key) {
            errors.append(ConfigError(key: prefix + key, reason: "unknown key"))
        }
    }

    private mutating func domain(_ text: String, key: String) -> DNSName? {
        do {
            return try DNSName(text)
        } catch {
            errors.append(ConfigError(key: key, value: text, reason: "not a valid domain name: \(error)"))
            return nil
        }
    }

    private mutating func mapping(_ root: [String: Any], _ name: String) -> [String: Any]? {
        guard let value = root[name] else { return nil }
        guard let mapping = value as? [String: Any] else {
            errors.append(ConfigError(key: name, value: "\(value)", reason: "expected a mapping"))
            return nil
        }
        return mapping
    }

    private mutating func string(_ root: [String: Any], _ name: String, key: String? = nil) -> String? {
        guard let value = root[name] else { return nil }
        if let text = value as? String { return text }
        if value is Int || value is Double { return "\(value)" }
        errors.append(ConfigError(key: key ?? name, value: "\(value)", reason: "expected a string"))
        return nil
    }

    private mutating func number(_ root: [String: Any], _ name: String, key: String? = nil, into target: inout Double) {
        guard let value = root[name] else { return }
        if let number = value as? Double { target = number; return }
        if let number = value as? Int { target = Double(number); return }
        errors.append(ConfigError(key: key ?? name, value: "\(value)", reason: "expected a number"))
    }

    private mutating func integer(_ root: [String: Any], _ name: String, key: String? = nil, into target: inout Int) {
        guard let value = root[name] else { return }
        if let number = value as? Int { target = number; return }
        errors.append(ConfigError(key: key ?? name, value: "\(value)", reason: "expected a whole number"))
    }

    private mutating func boolean(_ root: [String: Any], _ name: String, into target: inout Bool) {
        guard let value = root[name] else { return }
        if let flag = value as? Bool { target = flag; return }
        errors.append(ConfigError(key: name, value: "\(value)", reason: "expected true or false"))
    }
}
