import DNSServer
import DNSWire
import DiscoveryProxy
import MDNS

/// The SRP registrar's own service on each link it serves (RFC 9665 §10): an instance of
/// `_dnssd-srp._tcp` at the DNS listeners' port (SRP over UDP and TCP), and of
/// `_dnssd-srp-tls._tcp` at the DNS Push TLS port when there is one, so that a device finds the
/// registrar by browsing its own link. The SRV target is a host name of the proxy's own,
/// `<server-name's first label>-srp.local.`, with this host's addresses on that interface:
/// avahi-daemon's host name is its own, and asking it would be a D-Bus call.
enum RegistrarAdvertisement {
    static func groups(configuration: AppConfiguration, interfaces: InterfaceTable) -> [MDNSGroup] {
        guard configuration.registrar.isEnabled, let port = configuration.server.listenAddresses.first?.port,
            let label = configuration.effectiveServerName.labels.first
        else { return [] }
        let local = [Array("local".utf8)]
        guard let host = try? DNSName(labels: [label + Array("-srp".utf8)] + local) else { return [] }
        var services = [("_dnssd-srp", port)]
        if let tls = configuration.push.listen.first?.port { services.append(("_dnssd-srp-tls", tls)) }
        return configuration.proxyConfiguration(interfaces: interfaces).links.compactMap { link in
            let addresses = interfaces.addresses[link.interface] ?? []
            guard !addresses.isEmpty else { return nil }
            var records = addresses.map { address in
                MDNSRecord(name: host, type: address.count == 4 ? .a : .aaaa, rdata: address)
            }
            for (service, port) in services {
                guard let type = try? DNSName(labels: [Array(service.utf8), Array("_tcp".utf8)] + local),
                    let instance = try? DNSName(labels: [label] + type.labels)
                else { continue }
                records.append(MDNSRecord(name: type, type: .ptr, rdata: instance.wireBytes))
                records.append(
                    MDNSRecord(
                        name: instance, type: .srv,
                        rdata: [0, 0, 0, 0, UInt8(port >> 8), UInt8(port & 0xFF)] + host.wireBytes))
                records.append(MDNSRecord(name: instance, type: .txt, rdata: [0]))
            }
            return MDNSGroup(key: MDNSGroup.Key(interface: link.interface, name: "srp registrar"), records: records)
        }
    }
}
