import DNSServer
import DNSWire
import DiscoveryProxy
import Logging
import MDNS
import RegistrationStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The front ends' DNS Updates go to the registrar (RFC 9665 over UDP, TCP and TLS: the
/// listeners are the proxy's own); every other message to the queries' responder. The opcode
/// is one header octet: a query pays one comparison.
struct UpdateRouting: DNSResponder {
    let queries: any DNSResponder
    let registrar: Registrar

    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        guard query.count >= 12, (query[2] >> 3) & 0x0F == Opcode.update.rawValue else {
            return queries.handle(query: query, from: client, answer: answer)
        }
        registrar.handle(query, from: client) { answer(DNSAnswer(bytes: $0)) }
    }
}

/// The registrar with its store and its own mDNS responder (`LinkResponder`: it probes for
/// and announces the registrations itself; avahi-daemon's entry groups took 5–10 ms of its one
/// thread each, and the daemon dropped the connection past some 2,500).
struct RegistrarService: Sendable {
    let registrar: Registrar
    let publisher: LinkResponder

    /// Opens the store when `srp.enabled` (a damaged one is set aside and reported; one that
    /// cannot be read stops the start), and publishes what it holds: on the links, and to the
    /// proxy's browses through `browsable` (the proxy's backend when `srp.enabled`).
    static func start(
        configuration: AppConfiguration, proxy: ProxyConfiguration, interfaces: InterfaceTable,
        browsable: LocalRecordsBackend?, scheduler: any ProxyScheduler, readers: [any ProxyScheduler], logger: Logger,
        refused: @escaping @Sendable (_ client: DNSClient, _ link: String?) -> Void
    ) throws -> RegistrarService {
        let outcomes = OutcomeForwarder()
        let publisher: LinkResponder
        do {
            publisher = try LinkResponder(
                logger: logger, onCollision: { outcomes.collided($0) }, onEstablished: { outcomes.published($0) })
        } catch {
            throw StartupError("cannot start the mDNS responder: \(error)")
        }
        var table = RegistrationTable()
        var store: RegistrationStore?
        let settings = configuration.registrar
        if settings.isEnabled {
            let path = settings.storePath ?? configuration.push.stateDirectory + "/registrations.sqlite"
            if settings.storePath == nil {
                do {
                    try FileManager.default.createDirectory(
                        atPath: configuration.push.stateDirectory, withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700])
                } catch {
                    throw StartupError(
                        "srp: cannot create the state directory \(configuration.push.stateDirectory): \(SystemText.reason(error))"
                    )
                }
            }
            do {
                let opened = try RegistrationStore.open(path: path)
                if let setAside = opened.setAside { logger.error("srp: registration store damaged: \(setAside)") }
                table = opened.table
                store = opened.store
            } catch {
                throw StartupError("srp: \(error)")
            }
            logger.info(
                "SRP registrar on",
                metadata: [
                    "srp.store": "\(path)", "srp.hosts": "\(table.hosts.count)",
                    "srp.services": "\(table.services.count)",
                ])
        }
        let registrar = Registrar(
            configuration: settings, proxy: proxy, table: table, store: store, publisher: publisher,
            browsable: browsable, scheduler: scheduler, readers: readers, logger: logger, clock: { Int64(time(nil)) },
            refused: refused)
        outcomes.registrar.withLock { $0 = registrar }
        if settings.isEnabled {
            registrar.advertise(RegistrarAdvertisement.groups(configuration: configuration, interfaces: interfaces))
            registrar.start()
        }
        return RegistrarService(registrar: registrar, publisher: publisher)
    }

    /// Answers nothing more, then withdraws the registrations from mDNS (goodbyes); they are
    /// published again at the next start.
    func shutdown() {
        registrar.shutdown()
        publisher.shutdown()
    }
}

/// Hands the publisher's outcomes (on its thread) to the registrar created after it.
private final class OutcomeForwarder: Sendable {
    let registrar = Mutex<Registrar?>(nil)
    func published(_ group: MDNSGroup) { registrar.withLock { $0 }?.published(group.key, records: group.records) }
    func collided(_ key: MDNSGroup.Key) { registrar.withLock { $0 }?.collided(key) }
}
