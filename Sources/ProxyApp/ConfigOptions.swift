import DNSServer
import DNSWire
import DiscoveryProxy
import MDNS

#if canImport(Glibc)
import Glibc
#endif

extension AppConfiguration {
    /// Every configuration key, once, in the order `--check-config` prints them, each read
    /// straight into the field of the structure that uses it (the proxy's, the listeners', the
    /// Push sessions', …), whose default is the option's. Adding an option: the field in its
    /// owner, one entry here with its help text (which `--help` of its flag says, and the
    /// example file's comment on the key must say: `ConfigurationTests`; `ReloadMatrixTests`
    /// asks how a reload applies it), and an `@Option` in the command if it has a flag
    /// (`DiscoveryProxyCommand.scalarFlags`, its help `AppConfiguration.flagHelp`).
    static var options: [ConfigOption] {
        typealias Rule = ConfigOption.Rule
        let local = try! DNSName("local.")
        return [
            ConfigOption(
                "server-name",
                help: "The proxy's own host name: the NS target of every zone and the SOA MNAME (RFC 8766 §6.1, §6.2).",
                read: { reader, value, key, config in
                    if let text = reader.string(value, key: key) { config.serverName = reader.domain(text, key: key) }
                },
                render: { config, _ in ["server-name: \(yamlQuoted(config.effectiveServerName))"] },
                validate: { config, _ in config.insideLinkZones(config.effectiveServerName, key: "server-name") }),
            ConfigOption(
                "name-servers",
                help:
                    "Several proxies on the same links (high availability): list them all, this one's server-name included, identically on each.",
                read: { reader, value, key, config in
                    config.proxy.nameServers = reader.nameServers(value, key: key)
                },
                render: { config, _ in
                    config.proxy.nameServers.isEmpty
                        ? []
                        : ["name-servers: [\(config.proxy.nameServers.map { yamlQuoted($0) }.joined(separator: ", "))]"]
                },
                validate: { config, _ in
                    config.validateNameServers(config.proxy.nameServers, key: "name-servers")
                        + config.links.indices.flatMap { index in
                            config.validateNameServers(
                                config.links[index].nameServers ?? [], key: config.entry(index) + ".name-servers")
                        }
                }),
            ConfigOption(
                "hostmaster", help: "SOA RNAME, the administrator's mailbox as a name (default hostmaster.<zone>).",
                read: { reader, value, key, config in
                    if let text = reader.string(value, key: key) {
                        config.proxy.hostmaster = reader.domain(text, key: key)
                    }
                },
                render: { config, _ in config.proxy.hostmaster.map { ["hostmaster: \(yamlQuoted($0))"] } ?? [] }),
            ConfigOption(
                "listen", help: "Where to answer DNS, UDP and TCP on each. IPv6 addresses in brackets.",
                read: { reader, value, key, config in
                    if let addresses = reader.list(
                        value, key: key, expected: "a list of ADDR:PORT",
                        element: "ADDR:PORT, e.g. 0.0.0.0:53 or [::]:53", AppConfiguration.ListenAddress.init)
                    {
                        config.server.listenAddresses = addresses
                    }
                },
                render: { config, _ in ["listen:"] + config.server.listenAddresses.map { "  - \"\($0)\"" } },
                validate: { config, _ in
                    config.server.listenAddresses.isEmpty
                        ? [ConfigError(key: "listen", reason: "no listen address")] : []
                }, effect: .restart(because: "the DNS sockets are bound at start"),
                keep: ConfigOption.keeping(\.server.listenAddresses)),
            ConfigOption(
                "links",
                help: "The links to serve: each interface facing a remote subnet becomes one DNS zone (RFC 8766 §5.1).",
                read: { reader, value, _, config in config.links = reader.links(value) },
                render: { config, interfaces in config.renderLinks(interfaces: interfaces) },
                validate: { config, interfaces in config.validateLinks(interfaces: interfaces, local: local) }),
            .scalar(
                "negative-timeout",
                help:
                    "Seconds to wait for mDNS before answering NOERROR/no data. RFC 8766 §5.6 says 6, but recursive resolvers stop waiting for an authoritative server long before.",
                \.proxy.negativeTimeout, .number, .seconds,
                [Rule({ $0 > 0 && $0 <= 60 }, "must be between 0 and 60 seconds (RFC 8766 §5.6 uses 6)")],
                comment: { $0.negativeTimeoutAdvice }),
            .scalar(
                "collection-window-ms",
                help:
                    "After the first mDNS result, collect further results for this many milliseconds before answering.",
                \.proxy.collectionWindow, .integer, .milliseconds,
                [Rule({ (0...1000).contains($0) }, "must be between 0 and 1000")]),
            .scalar(
                "learn-answer-times", help: "Learn each link's mDNS answer times from its recent browses.",
                \.proxy.learnsAnswerTimes, .boolean),
            .scalar(
                "browse-idle-timeout", help: "Seconds an mDNS browse stays alive after the last query that used it.",
                \.proxy.browseIdleTimeout, .number, .seconds,
                [Rule({ $0 >= 1 }, "must be at least 1 second")]),
            .scalar(
                "suppress-link-local",
                help:
                    "Drop 169.254/16 A and fe80::/10 AAAA records: they are useless to off-link clients (RFC 8766 §5.5.2).",
                \.proxy.suppressLinkLocal, .boolean),
            .scalar(
                "mdns-query-rate",
                help:
                    "Rate limit of the mDNS queries the proxy starts, per link (RFC 8766 §9.3; about 20 packets/s suits 802.11).",
                \.proxy.mdnsQueriesPerSecond, .number, [Rule({ $0 > 0 }, "must be positive")]),
            .scalar(
                "mdns-query-burst", help: "mDNS queries a link may start at once.", \.proxy.mdnsQueryBurst, .number,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "mdns-announce-rate",
                help:
                    "Budget of the mDNS gateway's announcements and goodbyes (links[].announce), per client link: mDNS packets per second.",
                \.proxy.mdnsAnnouncePacing.packetsPerSecond, .number,
                [Rule({ $0 > 0 }, "must be positive")]),
            .scalar(
                "mdns-announce-burst", help: "How many announcements may go at once.", \.proxy.mdnsAnnouncePacing.burst,
                .number,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "max-udp-payload",
                help: "Largest UDP answer sent, whatever a client's EDNS0 buffer size (RFC 6891 §6.2.5).",
                \.proxy.maxUDPPayload, .integer,
                [Rule({ (512...65535).contains($0) }, "must be between 512 and 65535")]),
            .scalar(
                "optimistic-answers",
                help:
                    "Optimistic answers: a query whose browse was released (idle) not long ago is answered at once from that browse's last results, with a 2 s TTL, while a fresh mDNS browse starts in the background.",
                \.proxy.optimisticAnswers, .boolean),
            .scalar(
                "optimistic-max-staleness", help: "Results older than optimistic-max-staleness seconds are never used.",
                \.proxy.optimisticMaxStaleness, .number, .seconds,
                [Rule({ $0 >= 0 }, "must not be negative")]),
            .scalar(
                "replay-answers",
                help:
                    "Each network thread keeps the exact answers it sent each client and replays them (new ID patched in) for that client's identical queries, without asking the proxy at all.",
                \.server.replayAnswers, .boolean),
            .scalar(
                "inventory-interval",
                help:
                    "Link inventory for the status page: every inventory-interval seconds the proxy asks each link for its service types (_services._dns-sd._udp, RFC 6763 §9) and browses each type to count its instances. 0 turns it off.",
                \.proxy.inventoryInterval, .number, .secondsOrOff,
                [Rule({ $0 == 0 || $0 >= 10 }, "must be 0 (off) or at least 10 seconds")]),
            .scalar(
                "inventory-max-types",
                help:
                    "At most inventory-max-types types per link, and none while the browses fill more than half of max-browses.",
                \.proxy.inventoryMaxTypes, .integer,
                [Rule({ (1...1000).contains($0) }, "must be between 1 and 1000")]),
            .scalar(
                "log-level", help: "trace, debug, info, notice, warning, error, critical. Logs go to stderr.",
                \.logLevel, .text,
                [Rule({ Self.logLevels.contains($0) }, "must be one of \(Self.logLevels.joined(separator: ", "))")]),
            ConfigOption(
                "admin",
                help:
                    "Admin HTTP endpoint: GET /metrics (Prometheus), /healthz, / (status page), /api/services (JSON), POST /reload. Keep it on loopback unless you mean otherwise; \"off\" disables it.",
                read: { reader, value, key, config in
                    let text = "\(value)"
                    if ["off", "false", "none", ""].contains(text.lowercased()) {
                        config.admin = nil
                    } else if let address = AppConfiguration.ListenAddress(text) {
                        config.admin = address
                    } else {
                        reader.errors.append(
                            ConfigError(
                                key: key, value: text,
                                reason: "expected ADDR:PORT (e.g. 127.0.0.1:8053) or off"))
                    }
                },
                render: { config, _ in ["admin: \(config.admin.map { "\"\($0)\"" } ?? "off")"] },
                effect: .restart(because: "the admin socket is bound at start"), keep: ConfigOption.keeping(\.admin)),
            ConfigOption(
                "allow-clients",
                help: "Clients allowed to query (RFC 8766 §9.2): everyone else gets REFUSED, counted in the metrics.",
                read: { reader, value, key, config in config.allowClients = reader.prefixes(value, key: key) },
                render: { config, interfaces in
                    // Quoted: a plain `::1/128` is not valid YAML inside a flow sequence.
                    let clients = config.effectiveAllowedClients(interfaces: interfaces).map { "\"\($0)\"" }
                    let note =
                        config.allowClients == nil ? "  # default: loopback + this host's subnets but the uplink's" : ""
                    return ["allow-clients: [\(clients.joined(separator: ", "))]\(note)"]
                }),
            ConfigOption(
                "advertise-browse-domains",
                help:
                    "Announce the link zones as browse domains over mDNS on these client-facing interfaces (RFC 6763 §11).",
                read: { reader, value, key, config in
                    config.advertiseBrowseDomains =
                        reader.list(
                            value, key: key, expected: "a list of interface names",
                            element: "an interface name such as eth1"
                        ) { $0.isEmpty ? nil : $0 } ?? []
                },
                render: { config, interfaces in config.renderAdvertisement(interfaces: interfaces) },
                validate: { config, interfaces in config.validateAdvertisement(interfaces: interfaces) }),
            ConfigOption(
                "private-realms",
                help:
                    "Private address realms (RFC 8766 §5.5.2): networks whose private addresses (RFC 1918, ULA fc00::/7) do not route to each other.",
                read: { reader, value, key, config in
                    if let realms = reader.privateRealms(value, key: key) { config.proxy.privateRealms = realms }
                },
                render: { config, _ in
                    guard !config.proxy.privateRealms.isEmpty else {
                        return ["private-realms: {}  # none: private addresses are shown to every client"]
                    }
                    return ["private-realms:"]
                        + config.proxy.privateRealms.realms.map { realm in
                            "  \(realm.name): [\(realm.clients.map { "\"\($0)\"" }.joined(separator: ", "))]"
                        }
                },
                validate: { config, _ in
                    let names = config.proxy.privateRealms.realms.map(\.name)
                    var errors = names.filter { !Self.isRealmName($0) }.map {
                        ConfigError(
                            key: "private-realms", value: $0,
                            reason: "a realm name is letters, digits, '-', '_' and '.'")
                    }
                    for (index, link) in config.links.enumerated() {
                        guard let realm = link.realm, !names.contains(realm) else { continue }
                        let known = names.isEmpty ? "none is defined" : "defined: " + names.joined(separator: ", ")
                        errors.append(
                            ConfigError(
                                key: config.entry(index) + ".realm", value: realm,
                                reason:
                                    "not a realm of private-realms (\(known)); add it there with its client prefixes"))
                    }
                    return errors
                }),
            .scalar(
                "tcp.idle-timeout", help: "Seconds without a complete query, nothing in flight.",
                \.server.tcpIdleTimeout, .number, .seconds, [Rule({ $0 > 0 }, "must be positive")]),
            .scalar(
                "tcp.max-connections", help: "Connections in total; more are accepted and closed at once.",
                \.server.maxTCPConnections, .integer, [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "tcp.max-connections-per-client", help: "Connections per client address.",
                \.server.maxTCPConnectionsPerClient, .integer,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            ConfigOption(
                "tcp.max-connections-per-subnet",
                help: "Connections per client /24 (IPv4) or /56 (IPv6); default 4 × per client.",
                read: { reader, value, key, config in
                    if let limit = reader.integer(value, key: key) { config.server.maxTCPConnectionsPerSubnet = limit }
                },
                render: { config, _ in
                    guard let limit = config.server.maxTCPConnectionsPerSubnet else {
                        let derived = DNSServerConfiguration.defaultMaxTCPConnectionsPerSubnet(
                            perClient: config.server.maxTCPConnectionsPerClient)
                        return [
                            "max-connections-per-subnet: \(derived)  # default: "
                                + "\(DNSServerConfiguration.subnetClients) × max-connections-per-client"
                        ]
                    }
                    return ["max-connections-per-subnet: \(limit)"]
                },
                validate: { config, _ in
                    guard let limit = config.server.maxTCPConnectionsPerSubnet, limit < 1 else { return [] }
                    return [
                        ConfigError(
                            key: "tcp.max-connections-per-subnet", value: "\(limit)",
                            reason: "must be at least 1")
                    ]
                }),
            .scalar(
                "tcp.max-connection-lifetime",
                help:
                    "Seconds; then the connection answers what it has and closes (0: no limit; DNS Push sessions are exempt).",
                \.server.tcpMaxConnectionLifetime, .number, .secondsOrOff,
                [Rule({ $0 >= 0 }, "must not be negative (0: no limit)")],
                comment: { $0.server.tcpMaxConnectionLifetime == nil ? "no limit" : nil }),
            .scalar(
                "tcp.max-in-flight-per-connection", help: "Pipelined queries being answered; beyond, reading pauses.",
                \.server.maxInFlightPerConnection, .integer,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "avahi.objects-per-client",
                help:
                    "avahi objects the proxy puts on each of its connections to avahi-daemon, below its objects-per-client-max.",
                \.avahi.perClient, .integer,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "avahi.object-budget", help: "mDNS queries in total, on all connections.", \.avahi.total, .integer,
                [Rule({ $0 >= $1.avahi.perClient }, reason: { _ in "must be at least avahi.objects-per-client" })]),
            ConfigOption(
                "push.listen",
                help:
                    "Where to serve DNS Push (RFC 8765) over TLS: ADDR or ADDR:PORT (port 853, RFC 7858, when omitted); none: Push is off.",
                read: { reader, value, key, config in
                    if let addresses = reader.list(
                        value, key: key, expected: "a list of ADDR:PORT",
                        element: "ADDR:PORT or ADDR (port 853)", PushSettings.listenAddress)
                    {
                        config.push.listen = addresses
                    }
                },
                render: { config, _ in ["listen: [\(config.push.listen.map { "\"\($0)\"" }.joined(separator: ", "))]"]
                },
                validate: { config, _ in
                    guard let first = config.push.listen.first, first.port == 0 else { return [] }
                    return [ConfigError(key: "push.listen", value: "\(first)", reason: "port 0 cannot be advertised")]
                }, effect: .restart(because: "the DNS Push sockets are bound at start"),
                keep: ConfigOption.keeping(\.push.listen)),
            .optionalText(
                "push.tls-cert",
                help:
                    "PEM certificate chain of the DNS Push TLS listeners. Default: a self-signed ECDSA P-256 certificate for server-name, made in state-dir at first start and kept for the next ones.",
                \.push.certificateFile, quote: true,
                effect: .restart(because: "the DNS Push listener loads its certificate at start")),
            .optionalText(
                "push.tls-key",
                help: "PEM private key of tls-cert's certificate: give both or neither.",
                \.push.privateKeyFile, quote: true,
                effect: .restart(because: "the DNS Push listener loads its key at start")),
            ConfigOption(
                "push.state-dir", help: "Where state is kept, such as the self-signed certificate.",
                read: { reader, value, key, config in
                    if let text = reader.string(value, key: key) { config.push.stateDirectory = text }
                },
                render: { config, _ in ["state-dir: \"\(config.push.stateDirectory)\""] },
                validate: { config, _ in
                    // Checked here, beside the files it concerns: both or neither.
                    let push = config.push
                    guard (push.certificateFile == nil) != (push.privateKeyFile == nil) else { return [] }
                    return [
                        ConfigError(
                            key: push.certificateFile == nil ? "push.tls-cert" : "push.tls-key",
                            reason: "give both push.tls-cert and push.tls-key, or neither for a self-signed certificate"
                        )
                    ]
                },
                effect: .restart(because: "the DNS Push listener reads its self-signed certificate from it at start"),
                keep: ConfigOption.keeping(\.push.stateDirectory)),
            .scalar(
                "push.on-tcp",
                help: "Also accept DSO sessions on the plain TCP listeners, in cleartext: a lab and testing setting.",
                \.push.onTCP, .boolean),
            ConfigOption(
                "push.addresses", help: "A/AAAA answered for server-name while Push is on.",
                read: { reader, value, key, config in
                    if let parsed = reader.list(
                        value, key: key, expected: "a list of IP addresses",
                        element: "an IP address", { text in IPPrefix.parseAddress(text).map { _ in text } })
                    {
                        config.push.addresses = parsed
                    }
                },
                render: { config, _ in
                    config.push.addresses.map { ["addresses: [\($0.map { "\"\($0)\"" }.joined(separator: ", "))]"] }
                        ?? []
                },
                validate: { config, _ in
                    (config.push.addresses ?? []).enumerated().filter { IPPrefix.parseAddress($0.element) == nil }.map {
                        ConfigError(key: "push.addresses[\($0.offset)]", value: $0.element, reason: "not an IP address")
                    }
                }),
            .scalar(
                "push.max-sessions", help: "DNS Push sessions at once; more get REFUSED with a Retry Delay of 60 s.",
                \.pushSessions.maxSessions, .integer, [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "push.max-subscriptions-per-session",
                help: "SUBSCRIBEs per session; more get REFUSED with a Retry Delay.",
                \.pushSessions.maxSubscriptionsPerSession, .integer,
                [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "push.inactivity-timeout",
                help:
                    "Seconds (Keepalive TLV); a session with no subscription and no traffic ends after twice this (at least 5 s).",
                \.pushSessions.inactivityTimeout, .number, .seconds,
                [Rule({ $0 >= 1 }, "must be at least 1 second")]),
            .scalar(
                "push.keepalive-interval",
                help:
                    "Seconds (at least 10; RFC 8490 §6.5.2 recommends 60 min); silence for twice this ends a session.",
                \.pushSessions.keepaliveInterval, .number, .seconds,
                [Rule({ $0 >= 10 }, "must be at least 10 seconds (RFC 8490 §7.1)")]),
            .scalar(
                "max-browses",
                help:
                    "Live mDNS browses at most (each is one avahi record browser plus its cached records), so memory and avahi objects stay bounded whatever names clients invent.",
                \.proxy.maxBrowses, .integer,
                [
                    Rule({ $0 >= 1 }, "must be at least 1"),
                    Rule(
                        { $0 <= $1.avahi.total },
                        reason: {
                            "must not exceed avahi.object-budget (\($0.avahi.total)): each browse is one avahi object"
                        }),
                ]),
            .scalar(
                "interface-check-interval", help: "Seconds between checks of the links' interfaces (getifaddrs).",
                \.interfaceCheck, .number, .seconds, [Rule({ $0 > 0 }, "must be positive")]),
            .scalar(
                "rate-limit.responses-per-second", help: "Answers per second to each client prefix; 0: off.",
                \.rateLimit.responsesPerSecond, .integer,
                [Rule({ $0 >= 0 }, "must not be negative (0 turns rate limiting off)")]),
            .scalar(
                "rate-limit.burst", help: "Answers at once to a client prefix; 0: the rate.", \.rateLimit.burst,
                .integer, [Rule({ $0 >= 0 }, "must not be negative")]),
            .scalar(
                "rate-limit.ipv4-prefix-length", help: "The IPv4 client prefix the limit counts by.",
                \.rateLimit.ipv4PrefixLength, .integer,
                [Rule({ (8...32).contains($0) }, "must be between 8 and 32")]),
            .scalar(
                "rate-limit.ipv6-prefix-length", help: "The IPv6 client prefix the limit counts by.",
                \.rateLimit.ipv6PrefixLength, .integer,
                [Rule({ (16...128).contains($0) }, "must be between 16 and 128")]),
            .scalar(
                "rate-limit.slip",
                help:
                    "Every slip-th answer over the limit goes as a truncated reply, so that a real client retries over TCP.",
                \.rateLimit.slip, .integer,
                [Rule({ $0 >= 0 && $0 <= 10 }, "must be between 0 (never) and 10")]),
            .scalar(
                "srp.enabled",
                help:
                    "Take SRP registrations (RFC 9665) on every link, over UDP, TCP and TLS, and publish them over mDNS on the link they came from (the advertising proxy).",
                \.registrar.isEnabled, .boolean,
                effect: .restart(because: "the registration store is opened at start")),
            .optionalText(
                "srp.store",
                help:
                    "The SQLite file that keeps the registrations across restarts. Default: registrations.sqlite in push.state-dir.",
                \.registrar.storePath, quote: true,
                [
                    Rule(
                        { path in
                            let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
                            return access(directory.isEmpty ? "/" : directory, W_OK) == 0
                        }, "its directory does not exist or is not writable")
                ],
                effect: .restart(because: "the registration store is opened at start")),
            .scalar(
                "srp.lease-min", help: "Shortest LEASE granted, in seconds (RFC 9664).", \.registrar.leases.leaseMin,
                .integer, .uint32, [Rule({ $0 >= 1 }, "must be at least 1 second")]),
            .scalar(
                "srp.lease-max", help: "Longest LEASE granted, in seconds (27 hours, as Apple's and OpenThread's).",
                \.registrar.leases.leaseMax, .integer, .uint32,
                [Rule({ $0 >= Int($1.registrar.leases.leaseMin) }, reason: { _ in "must be at least srp.lease-min" })]),
            .scalar(
                "srp.key-lease-min", help: "Shortest KEY-LEASE granted, in seconds: how long a name stays claimed.",
                \.registrar.leases.keyLeaseMin, .integer, .uint32, [Rule({ $0 >= 1 }, "must be at least 1 second")]),
            .scalar(
                "srp.key-lease-max", help: "Longest KEY-LEASE granted, in seconds (7 days).",
                \.registrar.leases.keyLeaseMax, .integer, .uint32,
                [
                    Rule(
                        { $0 >= Int($1.registrar.leases.keyLeaseMin) },
                        reason: { _ in "must be at least srp.key-lease-min" })
                ]),
            .scalar(
                "srp.max-hosts",
                help:
                    "Hosts registered at once, on all links; an update adding one more gets REFUSED. Each host is one avahi entry group: stay below avahi-daemon's objects-per-client-max.",
                \.registrar.maxHosts, .integer, [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "srp.max-hosts-per-client", help: "Hosts registered at once from one client address.",
                \.registrar.maxHostsPerClient, .integer, [Rule({ $0 >= 1 }, "must be at least 1")]),
            .scalar(
                "srp.max-update-size", help: "Largest update taken, in octets; larger ones get REFUSED.",
                \.registrar.maxUpdateSize, .integer,
                [Rule({ (512...65535).contains($0) }, "must be between 512 and 65535")]),
            .scalar(
                "srp.max-update-rate",
                help:
                    "Updates a second from one client address (twice that at once), checked before the signature; more get REFUSED. 0: no limit.",
                \.registrar.maxUpdateRate, .integer, [Rule({ $0 >= 0 }, "must not be negative")]),
            .optionalText(
                "user",
                help:
                    "Run as this user once every socket is bound (start as root: port 53 needs root or CAP_NET_BIND_SERVICE).",
                \.user, quote: false,
                [Rule({ UnprivilegedUser.lookup($0) != nil }, "no such user on this host")],
                effect: .restart(because: "privileges are dropped once, after the sockets are bound")),
        ]
    }

    /// What a section's header line says after its name (`rate-limit:  # off: ...`).
    static func sectionNote(_ section: String, _ config: AppConfiguration) -> String {
        section == "rate-limit" && !config.rateLimit.isEnabled ? "  # off: responses-per-second 0" : ""
    }

    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    static func isRealmName(_ name: String) -> Bool {
        !name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    /// The default of a scalar option as `--help` writes it (`0.8`, `120`, `true`): the
    /// table's own rendering of a configuration with nothing set.
    public static func defaultValue(_ key: String) -> String {
        guard let value = defaultText(key) else { preconditionFailure("no scalar configuration option \(key)") }
        return value
    }

    /// What `--help` says of the flag that sets `key`: the option's help text, and its default
    /// when it has a single value by default.
    public static func flagHelp(_ key: String, showingDefault: Bool = true) -> String {
        guard let option = option(key) else { preconditionFailure("no configuration option \(key)") }
        return option.help + (showingDefault ? defaultText(key).map { " Default: \($0)." } ?? "" : "")
    }

    private static func defaultText(_ key: String) -> String? {
        guard let line = option(key)?.render(AppConfiguration(), InterfaceTable(prefixes: [:], up: [])).first,
            let colon = line.firstIndex(of: ":")
        else { return nil }
        let value = String(
            (line[line.index(after: colon)...].split(separator: "#").first ?? "").drop { $0 == " " }.reversed()
                .drop { $0 == " " }.reversed())
        guard !value.isEmpty else { return nil }
        if value.count > 1, value.first == "\"", value.last == "\"" { return String(value.dropFirst().dropLast()) }
        if let number = Double(value), number == number.rounded(), abs(number) < 1e15 { return String(Int(number)) }
        return value
    }

    /// The option declared for `key`, for the flags.
    static func option(_ key: String) -> ConfigOption? { options.first { $0.key == key } }

    /// Single-quoted YAML has no escapes of its own, so a name's `\032` survives a reload.
    static func yamlQuoted(_ name: DNSName) -> String {
        "'" + "\(name)".split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
    }
}
