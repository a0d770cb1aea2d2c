import ArgumentParser
import DNSServer
import DNSWire
@_spi(Testing) import DiscoveryProxy
import Foundation
import MDNS
import Testing

@testable import ProxyApp
@testable import discovery_proxy

@Suite("Configuration: YAML, flags and validation")
struct ConfigurationTests {
    let interfaces = InterfaceTable(prefixes: [
        "lo": [IPPrefix("127.0.0.0/8")!],
        "eth1": [IPPrefix("192.0.2.1/24")!, IPPrefix("fe80::1/64")!],
        "eth2": [IPPrefix("198.51.100.1/24")!],
    ])

    @Test("settings in seconds are read straight into durations, to the millisecond")
    func runtimeSettings() throws {
        // 0.57 s is 569.99… ms as a Double: rounded, not truncated.
        var (config, errors) = AppConfiguration.parse(
            yaml: """
                negative-timeout: 0.57
                tcp: {idle-timeout: 2.5}
                push: {keepalive-interval: 0.29}
                """)
        #expect(errors.isEmpty)
        config.links = [AppConfiguration.LinkSpec(interface: "eth1", domain: try DNSName("lab1.example."))]
        #expect(config.proxyConfiguration(interfaces: interfaces).negativeTimeout == .milliseconds(570))
        #expect(config.serverConfiguration.tcpIdleTimeout == .milliseconds(2500))
        #expect(config.serverConfiguration.listenAddresses == config.server.listenAddresses)
        #expect(config.pushSessions.keepaliveInterval == .milliseconds(290))
        let tls = config.pushListenerConfiguration(certificateFile: "c", privateKeyFile: "k")
        #expect(tls.idleTimeout == .milliseconds(2500) && tls.maxConnections == config.pushSessions.maxSessions + 64)
        // Defaults are the owners': the listeners', avahi's.
        #expect(AppConfiguration().server.listenAddresses == DNSServerConfiguration.defaultListenAddresses)
        #expect(AppConfiguration().avahi.perClient == AvahiBackend.defaultClientObjectLimit)
    }

    @Test("the shipped example file parses and, with a link, validates")
    func exampleFile() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../config/discovery-proxy.yaml").path
        var (config, readErrors) = AppConfiguration.load(file: path)
        #expect(readErrors.isEmpty)
        #expect(config.links.isEmpty)
        #expect(config.server.listenAddresses.map(\.description) == ["[::]:53", "0.0.0.0:53"])
        #expect(config.proxy.negativeTimeout == .milliseconds(800))
        config.links = [.init(interface: "eth1", domain: try DNSName("lab1.example."))]
        config.serverName = try DNSName("ns.example.")
        #expect(config.validate(interfaces: interfaces).isEmpty)
    }

    @Test("the example file shows every key of the table and names the restart-only ones")
    func exampleFileFollowsTheTable() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../config/discovery-proxy.yaml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // A top-level key starts its line (or follows "# ": commented out); a section's key is
        // indented two under the section's line (or commented out there: "  # name:").
        var section: String?
        var shown = Set<String>()
        for line in lines {
            let indented = line.hasPrefix("  ")
            var body = Substring(line).drop { $0 == " " }
            if body.hasPrefix("# ") { body = body.dropFirst(2) }
            guard let colon = body.firstIndex(of: ":"), !body.hasPrefix(" ") else { continue }
            let name = body[..<colon]
            guard !name.isEmpty, name.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) else { continue }
            if !indented {
                section = String(name)
                shown.insert(String(name))
            } else if let section {
                shown.insert(section + "." + name)
            }
        }
        let keys = AppConfiguration.options.map(\.key)
        #expect(keys.filter { !shown.contains($0) } == [], "keys of the table the example file does not show")
        // The header's sentence lists exactly the restart-only keys.
        let header = lines.prefix { $0.hasPrefix("#") }.map { $0.dropFirst(2) }.joined(separator: " ")
        let listed = try #require(header.range(of: "restart only: ").map { header[$0.upperBound...] })
        // Keys hold dots; the sentence ends at a dot before a space, or the header's end.
        let sentence = listed[..<(listed.range(of: ". ")?.lowerBound ?? listed.endIndex)]
        let names = sentence.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " .")) }
        let restart = AppConfiguration.options.filter { $0.effect != .reload }.map(\.key)
        #expect(Set(names) == Set(restart) && names.count == restart.count, "\(names)")
    }

    @Test("each key's comment in the example file says the table's help text, word for word")
    func exampleFileSaysEachHelpText() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../config/discovery-proxy.yaml").path
        let lines = try String(contentsOfFile: path, encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Where each key is (as in `exampleFileFollowsTheTable`).
        var section: String?
        var lineOf: [String: Int] = [:]
        for (index, line) in lines.enumerated() {
            var body = Substring(line).drop { $0 == " " }
            if body.hasPrefix("# ") { body = body.dropFirst(2) }
            guard let colon = body.firstIndex(of: ":"), !body.hasPrefix(" ") else { continue }
            let name = String(body[..<colon])
            guard !name.isEmpty, name.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) else { continue }
            if !line.hasPrefix("  ") {
                section = name
                lineOf[name] = lineOf[name] ?? index
            } else if let section {
                lineOf[section + "." + name] = lineOf[section + "." + name] ?? index
            }
        }
        /// A comment line's text: indentation and the leading `#` dropped.
        func commentText(_ line: some StringProtocol) -> Substring {
            Substring(line).drop { $0 == " " }.drop { $0 == "#" }
        }
        for option in AppConfiguration.options {
            #expect(!option.help.isEmpty && option.help.hasSuffix("."), "\(option.key): help must be a sentence")
            let index = try #require(lineOf[option.key], "\(option.key) is not in the example file")
            // Its comment: the comment lines above it up to a blank line (skipping the keys of the
            // same block), the comment after its value, and that comment's continuation lines.
            var block: [Substring] = []
            var above = index - 1
            while above >= 0, !lines[above].trimmingCharacters(in: .whitespaces).isEmpty {
                block.insert(commentText(lines[above]), at: 0)
                above -= 1
            }
            let line = lines[index]
            let valueStart = line.range(of: ":")?.upperBound ?? line.startIndex
            if let inline = line.range(of: " # ", range: valueStart..<line.endIndex) {
                block.append(line[inline.upperBound...])
                var below = index + 1
                while below < lines.count, lines[below].hasPrefix(String(repeating: " ", count: 20)),
                    lines[below].trimmingCharacters(in: .whitespaces).hasPrefix("#")
                {
                    block.append(commentText(lines[below]))
                    below += 1
                }
            }
            // Line breaks and indentation aside, the help text is in it as one piece. Its first
            // letter may be lower case there (a trailing comment, a clause after a semicolon), and
            // its final period may be missing (a trailing comment) or the sentence go on there.
            let comment = Self.words(block.joined(separator: " "))
            let text = Self.words(option.help.dropLast())
            let lowered = text.prefix(1).lowercased() + text.dropFirst()
            #expect(
                comment.contains(text) || comment.contains(lowered),
                "\(option.key): the example file's comment on it lacks \"\(option.help)\"")
        }
    }

    @Test("--help of each flag that sets one option says that option's help text")
    func flagHelpSaysTheOptionsHelp() throws {
        // Wide enough that no help wraps: each flag's entry is its line and the indented ones
        // after it (the sentence goes under the flag when the flag's column is too narrow).
        let lines = DiscoveryProxyCommand.helpMessage(columns: 10_000).split(separator: "\n")
        var entries: [String: String] = [:]
        var flag: String?
        for line in lines {
            let body = line.drop { $0 == " " }
            if body.hasPrefix("--") {
                let name = String(body.prefix { $0 != " " && $0 != "," })
                flag = name
                entries[name] = String(body)
            } else if let current = flag, line.hasPrefix("    "), !body.isEmpty {
                entries[current, default: ""] += " " + body
            } else {
                flag = nil
            }
        }
        let flags =
            try DiscoveryProxyCommand.parse([]).scalarFlags.map { ($0.key, $0.flag) }
            + [("listen", "--listen"), ("push.listen", "--push-listen")]
        for (key, flag) in flags {
            let option = try #require(AppConfiguration.option(key), "\(flag): no option \(key)")
            let entry = try #require(entries[flag], "\(flag) is not in --help")
            #expect(Self.words(entry).contains(Self.words(option.help)), "\(flag): --help lacks \"\(option.help)\"")
        }
    }

    /// Text with its runs of white space made single spaces, for comparing wrapped text.
    static func words(_ text: some StringProtocol) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    @Test("the srp section: bounds checked, a store whose directory cannot be written named")
    func srpSection() throws {
        let (config, readErrors) = AppConfiguration.parse(
            yaml: """
                links: [{interface: eth1, domain: lab1.example.}]
                server-name: ns.example.
                srp: {enabled: true, store: /nonexistent-dir/r.sqlite, lease-min: 600, lease-max: 60, max-hosts: 0}
                """)
        #expect(readErrors.isEmpty)
        let errors = config.validate(interfaces: interfaces).map(\.description)
        #expect(
            errors == [
                #"srp.store: "/nonexistent-dir/r.sqlite": its directory does not exist or is not writable"#,
                #"srp.lease-max: "60": must be at least srp.lease-min"#,
                #"srp.max-hosts: "0": must be at least 1"#,
            ], "\(errors)")
        #expect(config.registrar.isEnabled && config.registrar.leases.leaseMin == 600)
    }

    @Test("a full file maps onto the proxy configuration, subnets detected without link-local")
    func fullFile() throws {
        let (config, readErrors) = AppConfiguration.parse(
            yaml: """
                links:
                  - interface: eth1
                    domain: "Building 1.example."
                  - interface: eth2
                    domain: lab2.example.
                    subnets: [198.51.100.0/25]
                listen: ["127.0.0.1:5300", "[::1]:5300"]
                server-name: ns.example.
                negative-timeout: 3
                suppress-link-local: false
                tcp: {idle-timeout: 5}
                """)
        #expect(readErrors.isEmpty)
        #expect(config.validate(interfaces: interfaces).isEmpty)
        let proxy = config.proxyConfiguration(interfaces: interfaces)
        #expect(proxy.links[0].zone.labels[0] == Array("Building 1".utf8))
        #expect(proxy.links[0].subnets == [IPPrefix("192.0.2.0/24")!])
        #expect(proxy.links[1].subnets == [IPPrefix("198.51.100.0/25")!])
        #expect(proxy.negativeTimeout == .seconds(3))
        // Valid, but longer than resolvers wait: said at start-up and in --check-config.
        #expect(config.negativeTimeoutAdvice?.contains("PowerDNS Recursor gives up at 1.5 s") == true)
        #expect(
            config.render(interfaces: interfaces).contains(
                "negative-timeout: 3.0  # longer than recursive resolvers wait"))
        #expect(AppConfiguration().negativeTimeoutAdvice == nil)
        #expect(!proxy.suppressLinkLocal)
        #expect(config.server.tcpIdleTimeout == .seconds(5))
        #expect(config.server.listenAddresses[1].host == "::1")
    }

    @Test("every error names the key, the value and why, all at once")
    func errors() throws {
        let yaml =
            "links: [{interface: eth1, domain: 'a..b'}, {interface: eth9, domain: lab2.example.}]\nbogus: 1\nlisten: [nope]"
        let (partial, readErrors) = AppConfiguration.parse(yaml: yaml)
        let read = readErrors.map(\.description)
        #expect(read.contains { $0.hasPrefix("links[0].domain: \"a..b\"") })
        #expect(read.contains("bogus: unknown key"))
        #expect(read.contains { $0.hasPrefix("listen[0]: \"nope\"") })
        // What could be read is still validated, without echoes of the reading errors.
        let checked = AppConfiguration.withoutEchoes(partial.validate(interfaces: interfaces), of: readErrors)
        let (_, broken) = AppConfiguration.parse(yaml: "links: [unclosed")
        #expect(broken.count == 1 && broken[0].isWholeFile)
        #expect(AppConfiguration.withoutEchoes(AppConfiguration().validate(interfaces: interfaces), of: broken).isEmpty)
        #expect(checked.map(\.key) == ["links[1].interface"], "the entry as written, not shifted: \(checked)")
        var config = AppConfiguration()
        config.serverName = try DNSName("ns.lab1.example.")
        config.links = [
            .init(interface: "eth9", domain: try DNSName("lab1.example.")),
            .init(interface: "eth1", domain: try DNSName("LAB1.example.")),
            .init(interface: "eth2", domain: try DNSName("printers.local.")),
        ]
        let lines = config.validate(interfaces: interfaces).map(\.description)
        #expect(lines.contains { $0.hasPrefix("links[0].interface: \"eth9\": no such network interface") })
        #expect(lines.contains { $0.hasPrefix("links[1].domain: \"LAB1.example.\": duplicate domain") })
        #expect(lines.contains { $0.hasPrefix("links[2].domain: \"printers.local.\"") })
        #expect(lines.contains { $0.hasPrefix("server-name: \"ns.lab1.example.\": lies inside") })
        #expect(AppConfiguration().validate(interfaces: interfaces).map(\.key) == ["links"])
    }

    @Test("the printed configuration loads back as the same configuration")
    func renderRoundTrip() throws {
        var config = AppConfiguration()
        config.links = [.init(interface: "eth1", domain: try DNSName("Building\\0322's.example."))]
        config.serverName = try DNSName("ns.example.")
        config.server.listenAddresses = [.init(host: "::1", port: 5300)]
        config.links[0].subnets = [IPPrefix("2001:db8:1::/64")!]
        let (reloaded, errors) = AppConfiguration.parse(yaml: config.render(interfaces: interfaces))
        #expect(errors.isEmpty, "\(errors)")
        #expect(reloaded.allowClients?.contains(IPPrefix("::1/128")!) == true, "IPv6 prefixes survive YAML")
        #expect(reloaded.links[0].subnets == [IPPrefix("2001:db8:1::/64")!])
        #expect(reloaded.links[0].domain.labels[0] == Array("Building 2's".utf8))
        #expect(reloaded.server.listenAddresses == config.server.listenAddresses)
        #expect(reloaded.serverName == config.serverName)
    }

    @Test("limits, rate limiting and user: parsed, validated, rendered")
    func limitsAndUser() throws {
        let (config, errors) = AppConfiguration.parse(
            yaml: """
                max-browses: 500
                interface-check-interval: 2
                user: root
                rate-limit: {responses-per-second: 50, burst: 100, ipv4-prefix-length: 24, ipv6-prefix-length: 56, slip: 3}
                """)
        #expect(errors.isEmpty, "\(errors)")
        #expect(config.proxy.maxBrowses == 500)
        #expect(
            config.rateLimit.responsesPerSecond == 50 && config.rateLimit.burst == 100 && config.rateLimit.slip == 3)
        #expect(config.user == "root")
        #expect(config.interfaceCheck == .seconds(2))
        #expect(AppConfiguration().rateLimit.isEnabled == false, "off by default")
        var bad = config
        bad.links = [.init(interface: "eth1", domain: try DNSName("lab1.example."))]
        bad.serverName = try DNSName("ns.example.")
        bad.proxy.maxBrowses = 100_000
        bad.rateLimit.ipv4PrefixLength = 40
        bad.user = "no-such-user-dpt"
        let problems = bad.validate(interfaces: interfaces).map(\.description)
        #expect(problems.contains { $0.hasPrefix("max-browses: \"100000\"") })
        #expect(problems.contains { $0.hasPrefix("rate-limit.ipv4-prefix-length: \"40\"") })
        #expect(problems.contains { $0 == "user: \"no-such-user-dpt\": no such user on this host" })
        var withLink = config
        withLink.links = bad.links
        let (reloaded, again) = AppConfiguration.parse(yaml: withLink.render(interfaces: interfaces))
        #expect(again.isEmpty, "\(again)")
        #expect(reloaded.rateLimit == config.rateLimit && reloaded.proxy.maxBrowses == 500 && reloaded.user == "root")
    }

    @Test("TCP limits per subnet and on a connection's lifetime: defaults printed, bad values named")
    func tcpLimits() throws {
        let printed = AppConfiguration().render(interfaces: interfaces)
        #expect(printed.contains("  max-connections-per-subnet: 256  # default: 4 × max-connections-per-client\n"))
        #expect(printed.contains("  max-connection-lifetime: 0.0  # no limit\n"))
        let (config, errors) = AppConfiguration.parse(
            yaml: "tcp: {max-connections-per-subnet: 0, max-connection-lifetime: -1}\n")
        #expect(errors.isEmpty, "\(errors)")
        let problems = config.validate(interfaces: interfaces).map(\.description)
        #expect(problems.contains("tcp.max-connections-per-subnet: \"0\": must be at least 1"))
        #expect(problems.contains("tcp.max-connection-lifetime: \"-1.0\": must not be negative (0: no limit)"))
        let (_, wrong) = AppConfiguration.parse(yaml: "tcp: {max-connections-per-subnet: lots}\n")
        #expect(wrong.map(\.description) == ["tcp.max-connections-per-subnet: \"lots\": expected a whole number"])
    }

    @Test("private realms: a link's realm must be defined; printed and read back (RFC 8766 §5.5.2)")
    func privateRealms() throws {
        let yaml = """
            links: [{interface: eth1, domain: lab1.example., realm: building-1}]
            server-name: ns.example.
            private-realms:
              building-1: [10.1.0.0/16, "fd00:1::/48"]
              guest: [10.99.0.0/16]
            """
        let (config, errors) = AppConfiguration.parse(yaml: yaml)
        #expect(errors.isEmpty, "\(errors)")
        #expect(config.validate(interfaces: interfaces).isEmpty)
        #expect(config.links[0].realm == "building-1")
        #expect(config.proxy.privateRealms.realms.map(\.name) == ["building-1", "guest"])
        let proxy = config.proxyConfiguration(interfaces: interfaces)
        #expect(proxy.links[0].realm == "building-1")
        #expect(proxy.privateRealms.realm(of: [10, 99, 3, 4]) == "guest")
        let printed = config.render(interfaces: interfaces)
        #expect(printed.contains("    realm: building-1\n"))
        #expect(
            printed.contains(
                "private-realms:\n  building-1: [\"10.1.0.0/16\", \"fd00:1::/48\"]\n  guest: [\"10.99.0.0/16\"]"))
        #expect(AppConfiguration.parse(yaml: printed).0.proxy.privateRealms == config.proxy.privateRealms)
        #expect(
            AppConfiguration().render(interfaces: interfaces).contains(
                "private-realms: {}  # none: private addresses are shown to every client"))

        var typo = config
        typo.links[0].realm = "buildng-1"
        #expect(
            typo.validate(interfaces: interfaces).map(\.description) == [
                "links[0].realm: \"buildng-1\": not a realm of private-realms (defined: building-1, guest); "
                    + "add it there with its client prefixes"
            ])
        let (_, wrong) = AppConfiguration.parse(yaml: "private-realms: [10.0.0.0/8]\n")
        #expect(wrong.map(\.key) == ["private-realms"])
        let (badName, _) = AppConfiguration.parse(yaml: "private-realms: {\"a b\": [10.0.0.0/8]}\n")
        #expect(badName.validate(interfaces: interfaces).contains { $0.key == "private-realms" && $0.value == "a b" })
    }

    @Test("gateway policy: links[].announce parsed, checked against the links, printed and read back")
    func announce() throws {
        let yaml = """
            links:
              - {interface: eth1, domain: lab1.example.}
              - interface: eth2
                domain: lab2.example.
                announce:
                  - from: lab1.example.
                    services: {allow: [_ipp._tcp, _airplay._tcp], deny: [_ssh._tcp]}
                    subtypes: [_universal._sub._ipp._tcp]
            server-name: ns.example.
            """
        let (config, errors) = AppConfiguration.parse(yaml: yaml)
        #expect(errors.isEmpty, "\(errors)")
        #expect(config.validate(interfaces: interfaces).isEmpty)
        let announcement = try #require(config.proxyConfiguration(interfaces: interfaces).links[1].announce.first)
        #expect(announcement.from == (try DNSName("lab1.example.")))
        #expect(announcement.services.permits("_ipp._tcp") && !announcement.services.permits("_ssh._tcp"))
        #expect(announcement.subtypes == ["_universal._sub._ipp._tcp"])
        let printed = config.render(interfaces: interfaces)
        #expect(
            printed.contains(
                "    announce:\n      - from: 'lab1.example.'  # on eth2: _airplay._tcp, _ipp._tcp\n        services:\n          allow: [_airplay._tcp, _ipp._tcp]\n          deny: [_ssh._tcp]"
            ))
        #expect(AppConfiguration.parse(yaml: printed).0.links.map(\.announce) == config.links.map(\.announce))

        var wrong = config
        wrong.links[1].announce = [
            Announcement(from: try DNSName("lab3.example.")), Announcement(from: try DNSName("lab2.example.")),
        ]
        #expect(
            wrong.validate(interfaces: interfaces).map(\.description) == [
                "links[1].announce[0].from: \"lab3.example.\": no link has this domain; use one of lab1.example., lab2.example.",
                "links[1].announce[1].from: \"lab2.example.\": this link's own domain: its services are on its link already; name another link's domain",
            ])
        var hidden = config
        hidden.links[0].clients = [IPPrefix("192.0.2.0/24")!]
        #expect(
            hidden.warnings(interfaces: interfaces).contains {
                $0.hasPrefix(
                    "links[].announce: eth2: announce from lab1.example.: lab1.example.'s clients view hides it")
            })
        let avahi = AvahiDaemonSettings.parse(
            """
            [server]
            allow-interfaces=eth1, eth3
            [publish]
            # disable-publishing=yes
            """, path: "/etc/avahi/avahi-daemon.conf")
        #expect(
            avahi.gatewayWarnings(for: ["eth2"]) == [
                "links[].announce: avahi-daemon does not serve eth2 (allow-interfaces/deny-interfaces in /etc/avahi/avahi-daemon.conf): "
                    + "nothing can be announced there; add it to allow-interfaces and restart avahi-daemon"
            ])
        #expect(
            AvahiDaemonSettings.parse("[publish]\ndisable-publishing=yes\n", path: "x").gatewayWarnings(for: ["eth2"])
                .count == 1)
        #expect(AvahiDaemonSettings.parse("[server]\nuse-ipv6=yes\n", path: "x").gatewayWarnings(for: ["eth2"]).isEmpty)
        let (_, missing) = AppConfiguration.parse(
            yaml: "links: [{interface: eth1, domain: a.example., announce: [{services: {}}]}]\n")
        #expect(missing.map(\.key) == ["links[0].announce[0].from"])
        let (_, badSubtype) = AppConfiguration.parse(
            yaml:
                "links: [{interface: eth1, domain: a.example., announce: [{from: b.example., subtypes: [_ipp._tcp]}]}]\n"
        )
        #expect(badSubtype.map(\.key) == ["links[0].announce[0].subtypes[0]"])
    }

    @Test("a host-name zone per link: LDH only, no overlap, printed and read back (RFC 8766 §5.3)")
    func hostZone() throws {
        let (config, errors) = AppConfiguration.parse(
            yaml: """
                links: [{interface: eth1, domain: "Building 1.example.", host-zone: hosts.b1.example.}]
                server-name: ns.example.
                """)
        #expect(errors.isEmpty, "\(errors)")
        #expect(config.validate(interfaces: interfaces).isEmpty, "a rich-text zone with spaces is fine (§5.3)")
        #expect(
            config.proxyConfiguration(interfaces: interfaces).links[0].hostZone == (try DNSName("hosts.b1.example.")))
        let printed = config.render(interfaces: interfaces)
        #expect(printed.contains("    host-zone: 'hosts.b1.example.'\n"))
        #expect(AppConfiguration.parse(yaml: printed).0.links[0].hostZone == config.links[0].hostZone)

        var bad = config
        bad.links[0].hostZone = try DNSName("Building 1 hosts.example.")
        #expect(bad.validate(interfaces: interfaces).map(\.key) == ["links[0].host-zone"])
        bad.links[0].hostZone = try DNSName("hosts.Building 1.example.")
        #expect(bad.validate(interfaces: interfaces).contains { $0.reason.hasPrefix("overlaps the zone") })
        bad.links[0].hostZone = try DNSName("-x.example.")
        #expect(bad.validate(interfaces: interfaces).contains { $0.reason.contains("is not letters, digits") })
        bad.links[0].hostZone = try DNSName("hosts.b1.example.")
        bad.serverName = try DNSName("ns.hosts.b1.example.")
        #expect(bad.validate(interfaces: interfaces).map(\.key) == ["server-name"])
    }

    @Test("one table declares every key once; it reads, checks, prints and applies flags")
    func optionTable() throws {
        let keys = AppConfiguration.options.map(\.key)
        #expect(Set(keys).count == keys.count, "a key declared twice")
        // Every key the table declares is a key the file may use: a file setting each scalar
        // to a non-default value is read without an error and prints back the same.
        let (config, errors) = AppConfiguration.parse(
            yaml: """
                links: [{interface: eth1, domain: lab1.example.}]
                server-name: ns.example.
                negative-timeout: 1
                collection-window-ms: 70
                learn-answer-times: false
                browse-idle-timeout: 90
                suppress-link-local: false
                mdns-query-rate: 10
                mdns-query-burst: 30
                mdns-announce-rate: 5
                mdns-announce-burst: 10
                max-udp-payload: 1400
                optimistic-answers: false
                optimistic-max-staleness: 300
                replay-answers: false
                tcp: {idle-timeout: 5, max-connections: 100, max-connections-per-client: 8, max-connections-per-subnet: 20, max-connection-lifetime: 3600, max-in-flight-per-connection: 16}
                avahi: {objects-per-client: 500, object-budget: 5000}
                push: {on-tcp: false, max-sessions: 10, inactivity-timeout: 30, keepalive-interval: 20}
                max-browses: 1000
                """)
        #expect(errors.isEmpty, "\(errors)")
        let (reloaded, again) = AppConfiguration.parse(yaml: config.render(interfaces: interfaces))
        #expect(again.isEmpty, "\(again)")
        // Printing makes detected subnets and the default client list explicit; from then on
        // a print reads back as itself.
        let printed = reloaded.render(interfaces: interfaces)
        #expect(AppConfiguration.parse(yaml: printed).0.render(interfaces: interfaces) == printed)
        #expect(
            reloaded.server.maxInFlightPerConnection == 16 && reloaded.pushSessions.keepaliveInterval == .seconds(20))
        #expect(!reloaded.proxyConfiguration(interfaces: interfaces).learnsAnswerTimes)
        #expect(
            reloaded.server.maxTCPConnectionsPerSubnet == 20
                && reloaded.server.tcpMaxConnectionLifetime == .seconds(3600))
        #expect(
            reloaded.proxyConfiguration(interfaces: interfaces).mdnsAnnouncePacing
                == AnnouncementPacing(packetsPerSecond: 5, burst: 10))
        // Unknown keys are found at the top and inside sections, from the same table.
        let (_, unknown) = AppConfiguration.parse(yaml: "frobnicate: 1\ntcp: {idle-timout: 3}\n")
        #expect(unknown.map(\.key) == ["frobnicate", "tcp.idle-timout"])
        // A flag goes through its option: parsed and named after the flag.
        var flagged = AppConfiguration()
        #expect(flagged.apply("negative-timeout", flag: "--negative-timeout", 2.5).isEmpty)
        #expect(flagged.proxy.negativeTimeout == .milliseconds(2500))
        #expect(
            flagged.apply("admin", flag: "--admin", "nope").map(\.description)
                == ["--admin: \"nope\": expected ADDR:PORT (e.g. 127.0.0.1:8053) or off"])
        // One default, the proxy's own.
        #expect(AppConfiguration().proxy.maxBrowses == ProxyConfiguration(links: [], serverName: .root).maxBrowses)
        #expect(AppConfiguration().proxy.negativeTimeout == .milliseconds(800))
        #expect(AppConfiguration.defaultValue("negative-timeout") == "0.8")
        #expect(AppConfiguration.defaultValue("browse-idle-timeout") == "120")
    }

    @Test("listen addresses parse IPv4 and bracketed IPv6 only")
    func listenAddresses() {
        #expect(AppConfiguration.ListenAddress("0.0.0.0:53")?.port == 53)
        #expect(AppConfiguration.ListenAddress("[::]:5300")?.host == "::")
        #expect(AppConfiguration.ListenAddress("::1:53") == nil)
        #expect(AppConfiguration.ListenAddress("[192.0.2.1]:53") == nil)
        #expect(AppConfiguration.ListenAddress("192.0.2.1:99999") == nil)
        #expect(AppConfiguration.ListenAddress("localhost:53") == nil)
    }

    @Test("the default client ACL leaves out the uplink (a default-route interface that is not a link)")
    func defaultACLLeavesOutTheUplink() throws {
        let router = InterfaceTable(
            prefixes: [
                "lo": [IPPrefix("127.0.0.0/8")!], "wan0": [IPPrefix("203.0.113.7/24")!],
                "eth1": [IPPrefix("192.0.2.1/24")!], "eth2": [IPPrefix("198.51.100.1/24")!],
            ],
            uplinks: ["wan0"])
        var config = AppConfiguration()
        config.links = [.init(interface: "eth1", domain: try DNSName("lab1.example."))]
        let allowed = config.effectiveAllowedClients(interfaces: router).map(\.description)
        #expect(allowed.contains("192.0.2.0/24") && allowed.contains("198.51.100.0/24"))
        #expect(!allowed.contains("203.0.113.0/24"), "the uplink's subnet is the world, not the site")
        config.links.append(.init(interface: "wan0", domain: try DNSName("lab2.example.")))
        #expect(config.effectiveAllowedClients(interfaces: router).map(\.description).contains("203.0.113.0/24"))
    }

    @Test("default-route interfaces are read from the kernel's routing tables")
    func uplinksFromRoutes() {
        let v4 = """
            Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
            wan0\t00000000\t0171A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
            eth1\t0002000C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
            """
        let v6 = """
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 ppp0
            20010db8000100000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth1
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo
            """
        #expect(InterfaceTable.defaultRouteInterfaces(ipv4: v4, ipv6: v6) == ["wan0", "ppp0"])
    }

    @Test("warnings: a server name of one label, a link on the uplink; none for a sound configuration")
    func warnings() throws {
        let router = InterfaceTable(
            prefixes: ["wan0": [IPPrefix("203.0.113.7/24")!], "eth1": [IPPrefix("192.0.2.1/24")!]], uplinks: ["wan0"])
        var config = AppConfiguration()
        config.links = [.init(interface: "eth1", domain: try DNSName("lab1.example."))]
        config.serverName = try DNSName("ns.example.")
        #expect(config.warnings(interfaces: router).isEmpty)
        config.serverName = try DNSName("vm.")
        #expect(config.warnings(interfaces: router).count == 1)
        #expect(config.warnings(interfaces: router).first?.contains("\"vm.\" is not fully qualified") == true)
        config.serverName = try DNSName("ns.example.")
        config.links.append(.init(interface: "wan0", domain: try DNSName("lab2.example.")))
        #expect(config.warnings(interfaces: router).first?.hasPrefix("links: wan0 carries the default route") == true)
    }

    @Test("warnings: more mDNS interfaces than one socket may join groups on (igmp_max_memberships)")
    func multicastGroupLimit() throws {
        let names = (1...21).map { "vlan\($0)" }
        var host = InterfaceTable(
            prefixes: Dictionary(uniqueKeysWithValues: names.map { ($0, [IPPrefix]()) }), ipv4MulticastGroupLimit: 20)
        var config = AppConfiguration()
        config.serverName = try DNSName("ns.example.")
        config.links = try names.prefix(20).map { .init(interface: $0, domain: try DNSName("\($0).example.")) }
        #expect(config.warnings(interfaces: host).isEmpty)
        config.advertiseBrowseDomains = ["vlan1", "vlan21"]  // one more interface, one already a link
        let warning = try #require(config.warnings(interfaces: host).first)
        #expect(warning.hasPrefix("links: 21 interfaces for mDNS, but net.ipv4.igmp_max_memberships is 20"))
        #expect(warning.contains("sysctl -w net.ipv4.igmp_max_memberships=256"))
        host.ipv4MulticastGroupLimit = 1024
        #expect(!config.warnings(interfaces: host).contains { $0.contains("igmp_max_memberships") })
        #expect(AppConfiguration.groupLimitAdvice(200) == 512)
    }

    @Test("cleartext DNS Push is off by default; on with a listener other than loopback, a warning names it")
    func cleartextPush() throws {
        let router = InterfaceTable(prefixes: ["eth1": [IPPrefix("192.0.2.1/24")!]])
        var config = AppConfiguration()
        config.links = [.init(interface: "eth1", domain: try DNSName("lab1.example."))]
        config.serverName = try DNSName("ns.example.")
        #expect(config.push.onTCP == false)
        #expect(config.warnings(interfaces: router).isEmpty)
        config.push.onTCP = true
        config.server.listenAddresses = [.init(host: "127.0.0.1", port: 53), .init(host: "::1", port: 53)]
        #expect(config.warnings(interfaces: router).isEmpty, "loopback only: a lab")
        config.server.listenAddresses.append(.init(host: "0.0.0.0", port: 53))
        let warning = try #require(config.warnings(interfaces: router).first)
        #expect(warning.hasPrefix("push.on-tcp: DNS Push sessions are accepted in cleartext on 0.0.0.0:53"))
        #expect(warning.contains("RFC 8765 §4") && warning.contains("push.on-tcp: false"))
    }
}
