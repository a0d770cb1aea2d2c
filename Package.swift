// swift-tools-version:6.1
import PackageDescription

// Layers, one way: CLDNS (C) → DNSWire → MDNS (avahi, with CAvahiClient) → DiscoveryProxy
// (pure logic over the MDNSBackend protocol) → AdminHTTP; DNSServer (NIO front ends) knows
// none of them; ProxyApp composes everything (its YAML through YAMLDocument, with CYAML) →
// executables. DNSSDClient (→ dnssd-browse) needs DNSWire only. RegistrationStore (SQLite, with
// CSQLite) keeps DiscoveryProxy's SRP registrations on disk.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

// Modules off the query path (start-up, configuration, the admin endpoint, the CLI, the SRP
// store, the mDNS backend and responders) are optimised for size in release builds: 0.16 MB
// of the executable's 25 MB budget (docs/BENCHMARKS.md, "Footprint", steps 6 and 7). The query
// path (DNSWire, DiscoveryProxy, DNSServer) keeps -O.
let coldSwiftSettings: [SwiftSetting] = swiftSettings + [.unsafeFlags(["-Osize"], .when(configuration: .release))]

// Release executables on Linux (the .deb, Docker, install.sh; docs/BENCHMARKS.md "Footprint,
// step 4"): lld packs the relative relocations (DT_RELR, glibc >= 2.36) and exports no
// symbols, which the static runtime's -export-dynamic would add. The Swift backtracer
// names no frame from those exports in a stripped binary anyway: debug symbols do.
let releaseLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(
        ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"],
        .when(platforms: [.linux], configuration: .release))
]

// The proxy's executable laid out for a small resident set (docs/BENCHMARKS.md, "Footprint,
// step 5"; Linking/README.md). The functions a running proxy uses come first, in the order of
// Linking/symbol-order.txt (a profile from the lab, scripts/symbol-order.py); Swift's private
// helpers, which have no name to order by, go together in front (Linking/private-text.ld);
// identical functions are folded into one. Names the code no longer has are skipped without
// a warning: a stale order costs memory, never correctness. The order and the folding need a
// section per function, which the release builds ask for (debian/rules, Dockerfile).
let proxyLinkerSettings: [LinkerSetting] =
    releaseLinkerSettings + [
        .unsafeFlags(
            [
                "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Linking/symbol-order.txt",
                "-Xlinker", "--no-warn-symbol-ordering",
                "-Xlinker", "--script=\(Context.packageDirectory)/Linking/private-text.ld",
                "-Xlinker", "--icf=all",
            ],
            .when(platforms: [.linux], configuration: .release))
    ]

let package = Package(
    name: "discovery-proxy",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "discovery-proxy", targets: ["discovery-proxy"]),
        .executable(name: "dnssd-browse", targets: ["dnssd-browse"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Without its default traits: "FullFoundation" links all of Foundation, and with it ICU
        // (37 MB of a static binary); "ConfigurationSupport" brings swift-configuration. The
        // admin endpoint needs neither (docs/BENCHMARKS.md, "Footprint").
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // TLS for DNS Push (RFC 8765): already in the graph through Hummingbird's test client,
        // so BoringSSL is built once either way.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // C libraries from Debian: libldns-dev, libavahi-client-dev. Headers are in /usr/include
        // and the module maps link the libraries; no pkg-config (Debian ships no libldns.pc, and
        // avahi-client's -D_REENTRANT is a flag SwiftPM refuses).
        .systemLibrary(name: "CLDNS", providers: [.apt(["libldns-dev"])]),
        .systemLibrary(name: "CAvahiClient", providers: [.apt(["libavahi-client-dev"])]),
        .systemLibrary(name: "CYAML", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),

        // Version and git revision, for both executables (GitRevision writes the revision).
        .target(name: "BuildInfo", swiftSettings: coldSwiftSettings, plugins: ["GitRevision"]),
        .plugin(name: "GitRevision", capability: .buildTool()),

        // One counter per event, read by the status page and exported to Prometheus alike.
        .target(
            name: "EventCounting", dependencies: [.product(name: "Metrics", package: "swift-metrics")],
            swiftSettings: swiftSettings),
        // Wire format: Sendable DNS message types; the only module that calls ldns.
        .target(name: "DNSWire", dependencies: ["CLDNS", "CSignature"], swiftSettings: swiftSettings),
        // SIG(0)'s ECDSA P-256 check (RFC 6605), with the system's OpenSSL libcrypto, which libldns
        // loads anyway.
        .target(name: "CSignature", linkerSettings: [.linkedLibrary("crypto")]),
        // mDNS backend protocol and its avahi implementation; no NIO.
        .target(
            name: "MDNS",
            dependencies: [
                "DNSWire", "EventCounting", "CAvahiClient", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: coldSwiftSettings
        ),
        // RFC 8766 logic: zones, name mapping, browses, cache, query answering. No sockets.
        .target(
            name: "DiscoveryProxy",
            dependencies: [
                "DNSWire", "MDNS", "EventCounting", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the tests and fuzz harnesses share (a clock moved by hand); no executable links it.
        .target(name: "ProxyTestSupport", dependencies: ["DiscoveryProxy"], swiftSettings: swiftSettings),
        // UDP, TCP and TLS (DNS Push) DNS front ends.
        .target(
            name: "DNSServer",
            dependencies: [
                "DNSWire", "EventCounting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Admin HTTP endpoint: /metrics (Prometheus), /healthz, status page, /api/services.
        .target(
            name: "AdminHTTP",
            dependencies: [
                // DNSServer for its counters' types (`TCPConnectionStats`), shown as they are.
                "DiscoveryProxy", "DNSWire", "DNSServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: coldSwiftSettings
        ),
        // Unicast DNS-SD client (browse, resolve, enumerate) behind the dnssd-browse CLI.
        .target(
            name: "DNSSDClient",
            dependencies: [
                "DNSWire",
                // DNS Push subscriptions for `--watch` (TLS).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: coldSwiftSettings
        ),
        // The dnssd-browse command, in a library so that discovery-proxy can be it too.
        .target(
            name: "DNSSDBrowseCommand",
            dependencies: [
                "DNSSDClient", "DNSWire", "BuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: coldSwiftSettings
        ),
        .executableTarget(
            name: "dnssd-browse",
            dependencies: ["DNSSDBrowseCommand", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings,
            linkerSettings: releaseLinkerSettings
        ),
        // The DNS Push listener's self-signed identity, made with the system's OpenSSL libcrypto
        // (libldns loads it already): no second BoringSSL beside swift-nio-ssl's.
        .target(name: "CTLSIdentity", linkerSettings: [.linkedLibrary("crypto")]),
        // The configuration file's YAML, read by libyaml into plain Swift values.
        .target(name: "YAMLDocument", dependencies: ["CYAML"], swiftSettings: coldSwiftSettings),
        // The SRP registrar's durable store: registrations in SQLite, written before an answer.
        .target(
            name: "RegistrationStore", dependencies: ["DNSWire", "DiscoveryProxy", "CSQLite"],
            swiftSettings: coldSwiftSettings),
        // Configuration (YAML + flags), validation and composition of the services.
        .target(
            name: "ProxyApp",
            dependencies: [
                "DNSWire", "MDNS", "DiscoveryProxy", "DNSServer", "AdminHTTP", "BuildInfo", "YAMLDocument",
                "CTLSIdentity", "RegistrationStore",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: coldSwiftSettings
        ),
        .executableTarget(
            name: "discovery-proxy",
            dependencies: [
                "ProxyApp", "BuildInfo", "DNSSDBrowseCommand",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: coldSwiftSettings,
            linkerSettings: proxyLinkerSettings
        ),

        // libFuzzer harnesses (decode, query path, TCP framing); scripts/fuzz.sh builds them with
        // -sanitize=fuzzer,address -DFUZZING. Without -DFUZZING it is a corpus replayer.
        .executableTarget(
            name: "fuzz-dns",
            dependencies: [
                "DNSWire", "MDNS", "DiscoveryProxy", "DNSServer", "ProxyTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ],
            path: "Tests/Fuzz/DNS",
            swiftSettings: swiftSettings
        ),

        .testTarget(name: "DNSWireTests", dependencies: ["DNSWire"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RegistrationStoreTests",
            dependencies: ["RegistrationStore", "DiscoveryProxy", "DNSWire", "CSQLite"],
            swiftSettings: swiftSettings),
        .testTarget(name: "YAMLDocumentTests", dependencies: ["YAMLDocument"], swiftSettings: swiftSettings),
        .testTarget(name: "MDNSTests", dependencies: ["MDNS"], exclude: ["lab.sh"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AdminHTTPTests",
            dependencies: [
                "AdminHTTP", "DiscoveryProxy", "DNSWire", "DNSServer",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "DNSSDClientTests", dependencies: ["DNSSDClient", "DNSWire"], swiftSettings: swiftSettings),
        .testTarget(
            name: "ProxyAppTests",
            dependencies: [
                "ProxyApp", "DiscoveryProxy", "DNSWire", "DNSServer", "MDNS", "ProxyTestSupport",
                // The command, for its --help (each flag's sentence is its option's).
                "discovery-proxy", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "DiscoveryProxyTests",
            dependencies: [
                "DiscoveryProxy", "DNSWire", "MDNS", "ProxyTestSupport",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DNSServerTests",
            dependencies: [
                "DNSServer", "DNSWire", .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
