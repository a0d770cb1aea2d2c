import ArgumentParser
import DNSSDBrowseCommand

// One executable for both commands: the package installs dnssd-browse as a link to
// discovery-proxy (one copy of the Swift runtime, NIO and TLS on a router's flash instead of
// two: docs/BENCHMARKS.md, "Footprint"), and the name it is run by chooses the command.
if CommandLine.arguments.first?.split(separator: "/").last == "dnssd-browse" {
    DNSSDBrowse.main()
} else {
    DiscoveryProxyCommand.main()
}
