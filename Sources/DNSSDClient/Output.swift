import DNSWire

/// One line of a listing (an instance, a service type or a browse domain): a key to tell
/// adds from removes in `--watch`, its text columns and its JSON object.
public struct OutputRow: Sendable, Hashable {
    public var key: String
    public var text: String
    public var json: JSONValue

    public init(key: String, text: String, json: JSONValue) {
        self.key = key
        self.text = text
        self.json = json
    }
}

/// Text (like `dns-sd -B` / `dns-sd -L`) and JSON renderings of the results.
///
/// JSON keys, always present and in this order:
/// - browse: `server`, `type`, `domains`, `instances` [{`name`, `type`, `domain`, `fullname`, `ttl`}]
/// - resolve: `server`, `name`, `type`, `domain`, `fullname`, `host`, `port`, `priority`,
///   `weight`, `addresses`, `txt` [{`key`, `value` (null for a boolean key)}], `ttl`
/// - types: `server`, `domains`, `types` [{`type`, `domain`, `ttl`}]
/// - domains: `server`, `searched`, `domains` [{`domain`, `browse`, `default`, `legacy`, `source`, `ttl`}]
/// - watch events (one object a line): `event` (`add`/`remove`), `time`, then the row's keys.
/// `fullname` and `host` are in presentation format (`\032` for a space, as dig prints them);
/// the other names are for people (`Dot.ted Printer`, `Küche`).
public enum Output {
    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    // MARK: browse

    public static func instanceHeader(watch: Bool) -> String {
        (watch ? "A/R Time      " : "") + pad("Domain", 22) + pad("Service Type", 18) + "Instance Name"
    }

    public static func instanceRow(_ instance: ServiceInstance) -> OutputRow {
        let domain = ServiceNames.display(instance.domain)
        let type = ServiceNames.display(labels: instance.type)
        return OutputRow(
            key: instance.fullName.description.lowercased(),
            text: pad(domain, 22) + pad(type, 18) + instance.instanceText,
            json: .object([
                ("name", .string(instance.instanceText)), ("type", .string(type)), ("domain", .string(domain)),
                ("fullname", .string(instance.fullName.description)), ("ttl", .int(Int(instance.ttl))),
            ]))
    }

    public static func browseTitle(type: [[UInt8]], domains: [DNSName], server: String) -> String {
        "Browsing for \(ServiceNames.display(labels: type)) in \(domains.map(ServiceNames.display).joined(separator: ", ")) at \(server)"
    }

    public static func browseText(
        _ instances: [ServiceInstance], type: [[UInt8]], domains: [DNSName], server: String
    ) -> String {
        var lines = [browseTitle(type: type, domains: domains, server: server)]
        if instances.isEmpty {
            lines.append("no instances")
        } else {
            lines.append(instanceHeader(watch: false))
            lines += instances.map { instanceRow($0).text }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public static func browseJSON(
        _ instances: [ServiceInstance], type: [[UInt8]], domains: [DNSName], server: String
    ) -> String {
        JSONValue.object([
            ("server", .string(server)), ("type", .string(ServiceNames.display(labels: type))),
            ("domains", .array(domains.map { .string(ServiceNames.display($0)) })),
            ("instances", .array(instances.map { instanceRow($0).json })),
        ]).rendered + "\n"
    }

    // MARK: resolve

    public static func resolveText(_ service: ResolvedService, server: String) -> String {
        let txt = service.txtEntries
        var lines = [
            "Lookup \"\(ServiceNames.displayLabel(service.instance))\" \(ServiceNames.display(labels: service.type)) "
                + "in \(ServiceNames.display(service.domain)) at \(server)",
            "\(service.fullName) can be reached at \(service.host):\(service.port) "
                + "(priority \(service.priority), weight \(service.weight), TTL \(service.ttl))",
            "  host:      \(ServiceNames.display(service.host))",
            "  port:      \(service.port)",
            "  addresses: " + (service.addresses.isEmpty ? "(none)" : service.addresses.joined(separator: " ")),
        ]
        if txt.isEmpty {
            lines.append("  TXT:       (empty)")
        } else {
            for (index, entry) in txt.enumerated() {
                lines.append((index == 0 ? "  TXT:       " : "             ") + entry.description)
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public static func resolveJSON(_ service: ResolvedService, server: String) -> String {
        JSONValue.object([
            ("server", .string(server)), ("name", .string(ServiceNames.displayLabel(service.instance))),
            ("type", .string(ServiceNames.display(labels: service.type))),
            ("domain", .string(ServiceNames.display(service.domain))),
            ("fullname", .string(service.fullName.description)), ("host", .string(service.host.description)),
            ("port", .int(Int(service.port))), ("priority", .int(Int(service.priority))),
            ("weight", .int(Int(service.weight))), ("addresses", .array(service.addresses.map { .string($0) })),
            (
                "txt",
                .array(
                    service.txtEntries.map { entry in
                        .object([
                            ("key", .string(entry.key)), ("value", entry.displayValue.map { .string($0) } ?? .null),
                        ])
                    })
            ),
            ("ttl", .int(Int(service.ttl))),
        ]).rendered + "\n"
    }

    // MARK: service types

    public static func typeHeader(watch: Bool) -> String {
        (watch ? "A/R Time      " : "") + pad("Domain", 22) + "Service Type"
    }

    public static func typeRow(_ entry: ServiceTypeEntry) -> OutputRow {
        let type = ServiceNames.display(labels: entry.type)
        let domain = ServiceNames.display(entry.domain)
        return OutputRow(
            key: (type + domain).lowercased(), text: pad(domain, 22) + type,
            json: .object([("type", .string(type)), ("domain", .string(domain)), ("ttl", .int(Int(entry.ttl)))]))
    }

    public static func typesText(_ types: [ServiceTypeEntry], domains: [DNSName], server: String) -> String {
        var lines = ["Service types in \(domains.map(ServiceNames.display).joined(separator: ", ")) at \(server)"]
        if types.isEmpty {
            lines.append("no service types")
        } else {
            lines.append(typeHeader(watch: false))
            lines += types.map { typeRow($0).text }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public static func typesJSON(_ types: [ServiceTypeEntry], domains: [DNSName], server: String) -> String {
        JSONValue.object([
            ("server", .string(server)), ("domains", .array(domains.map { .string(ServiceNames.display($0)) })),
            ("types", .array(types.map { typeRow($0).json })),
        ]).rendered + "\n"
    }

    // MARK: browse domains

    public static func domainHeader(watch: Bool) -> String {
        (watch ? "A/R Time      " : "") + pad("Browse Domain", 30) + "Flags"
    }

    public static func domainRow(_ entry: BrowseDomain) -> OutputRow {
        var flags: [String] = []
        if entry.isDefault { flags.append("default") }
        if entry.legacy { flags.append("legacy (automatic)") }
        if entry.browse { flags.append("browse") }
        let domain = ServiceNames.display(entry.domain)
        return OutputRow(
            key: domain.lowercased(), text: pad(domain, 30) + flags.joined(separator: ", "),
            json: .object([
                ("domain", .string(domain)), ("browse", .bool(entry.browse)), ("default", .bool(entry.isDefault)),
                ("legacy", .bool(entry.legacy)), ("source", .string(ServiceNames.display(entry.source))),
                ("ttl", .int(Int(entry.ttl))),
            ]))
    }

    public static func domainsText(_ domains: [BrowseDomain], searched: [DNSName], server: String) -> String {
        var lines = [
            "Browse domains listed under \(searched.map(ServiceNames.display).joined(separator: ", ")) at \(server)"
        ]
        if domains.isEmpty {
            lines.append("no browse domains")
        } else {
            lines.append(domainHeader(watch: false))
            lines += domains.map { domainRow($0).text }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public static func domainsJSON(_ domains: [BrowseDomain], searched: [DNSName], server: String) -> String {
        JSONValue.object([
            ("server", .string(server)), ("searched", .array(searched.map { .string(ServiceNames.display($0)) })),
            ("domains", .array(domains.map { domainRow($0).json })),
        ]).rendered + "\n"
    }

    // MARK: watch

    /// Differences between two polls: removes first, then adds, each in the new/old order.
    public static func diff(old: [OutputRow], new: [OutputRow]) -> (added: [OutputRow], removed: [OutputRow]) {
        let oldKeys = Set(old.map(\.key))
        let newKeys = Set(new.map(\.key))
        return (new.filter { !oldKeys.contains($0.key) }, old.filter { !newKeys.contains($0.key) })
    }

    /// `+ 12:00:01  <row>` or `- 12:00:01  <row>`.
    public static func watchLine(added: Bool, time: String, row: OutputRow) -> String {
        (added ? "+   " : "-   ") + pad(time, 10) + row.text
    }

    public static func watchJSON(added: Bool, time: String, row: OutputRow) -> String {
        var members = [
            JSONValue.Member(key: "event", value: .string(added ? "add" : "remove")),
            JSONValue.Member(key: "time", value: .string(time)),
        ]
        if case .members(let rowMembers) = row.json { members += rowMembers }
        return JSONValue.members(members).rendered
    }
}
