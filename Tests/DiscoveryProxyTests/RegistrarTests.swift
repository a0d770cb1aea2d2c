import DNSWire
import Logging
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

@testable import DiscoveryProxy

/// The registrar between the listeners and the table (RFC 9665): who may register, the wait
/// for avahi-daemon's probe, what is published on the link, and what each outcome answers.
/// The updates are SRPUpdateTests' signed vectors, registered in `default.service.arpa.` from
/// a client on `lab0` (192.0.2.0/24, zone lab1.example.).
@Suite struct RegistrarTests {
    /// Takes changes as avahi's publisher does, and counts the groups it was handed.
    final class Publisher: MDNSGroupUpdates {
        let published = Mutex<(groups: [MDNSGroup.Key: MDNSGroup], handed: Int)>(([:], 0))
        func publish(_ groups: [MDNSGroup]) {
            published.withLock {
                $0.groups = Dictionary(groups.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
                $0.handed += groups.count
            }
        }
        func update(changed: [MDNSGroup], removed: [MDNSGroup.Key]) {
            published.withLock {
                for group in changed { $0.groups[group.key] = group }
                for key in removed { $0.groups[key] = nil }
                $0.handed += changed.count + removed.count
            }
        }
        func shutdown() {}
        var groups: [MDNSGroup] { published.withLock { $0.groups.values.sorted { $0.key < $1.key } } }
        var handed: Int { published.withLock { $0.handed } }
    }

    final class Replies: Sendable {
        final class Log: Sendable { let all = Mutex<[String]>([]) }

        let all = Mutex<[Message?]>([])
        func record(_ bytes: [UInt8]?) { all.withLock { $0.append(bytes.flatMap { try? Message(wire: $0) }) } }
        var last: Message? { all.withLock { $0.last ?? nil } }
        var count: Int { all.withLock { $0.count } }
    }

    /// A store that counts its transactions.
    final class Saves: RegistrationPersistence, Sendable {
        let count = Mutex(0)
        func save(_ changes: RegistrationTable.Changes, of table: RegistrationTable) throws {
            if !changes.isEmpty { count.withLock { $0 += 1 } }
        }
        var size: Int { 0 }
    }

    final class Clock: Sendable {
        let seconds = Mutex<Int64>(1_000_000)
        func advance(_ by: Int64) { seconds.withLock { $0 += by } }
        var now: Int64 { seconds.withLock { $0 } }
    }

    struct Lab {
        let registrar: Registrar
        let publisher = Publisher()
        let scheduler = ManualScheduler()
        /// The registrar's readers (none: it reads on `scheduler`).
        let readers: [ManualScheduler]
        let clock = Clock()
        /// The refusals handed to the proxy's counters: the link, "" for the client ACL.
        let refusals = Replies.Log()

        init(
            configure: (inout RegistrarConfiguration) -> Void = { _ in }, allowed: [IPPrefix]? = nil,
            linkClients: [IPPrefix]? = nil, store: Saves? = nil, readers: Int = 0
        ) {
            self.readers = (0..<readers).map { _ in ManualScheduler() }
            var settings = RegistrarConfiguration()
            settings.isEnabled = true
            configure(&settings)
            var proxy = ProxyConfiguration(
                links: [
                    Link(interface: "lab0", zone: try! DNSName("lab1.example."), subnets: [IPPrefix("192.0.2.0/24")!])
                ], serverName: try! DNSName("proxy.example."))
            proxy.links[0].clients = linkClients
            proxy.allowedClients = allowed
            let (clock, refusals) = (self.clock, self.refusals)
            registrar = Registrar(
                configuration: settings, proxy: proxy, table: RegistrationTable(), store: store, publisher: publisher,
                scheduler: scheduler, readers: self.readers, logger: Logger(label: "registrar-tests"),
                clock: { clock.now },
                refused: { _, link in refusals.all.withLock { $0.append(link ?? "") } })
            registrar.start()
        }

        func send(_ update: [UInt8], from address: [UInt8] = [192, 0, 2, 7]) -> Replies {
            let replies = Replies()
            registrar.handle(update, from: DNSClient(address: address, port: 5353, transport: .udp)) {
                replies.record($0)
            }
            for reader in readers { reader.advance(by: .zero) }
            scheduler.advance(by: .zero)  // the registrar's thread takes it
            return replies
        }

        /// avahi-daemon's probe succeeded for every group published.
        func established() {
            for group in publisher.groups { registrar.published(group.key) }
            scheduler.advance(by: .zero)
        }
    }

    static let host = try! DNSName("printer.lab1.example.")

    @Test func aRegistrationWaitsForTheProbeThenIsAnsweredWithItsLeases() throws {
        let lab = Lab()
        let replies = lab.send(SRPUpdateTests.signed)
        #expect(replies.count == 0, "the answer waits for the publication")
        let group = try #require(lab.publisher.groups.first)
        #expect(group.key.interface == "lab0")
        // §2.1.2 of the advertising-proxy draft: the zone replaced by local.
        let names = Set(group.records.map { "\($0.name) \($0.type)" })
        #expect(
            names == [
                "printer.local. A", "printer.local. AAAA", #"Printer\0321._ipp._tcp.local. SRV"#,
                #"Printer\0321._ipp._tcp.local. TXT"#, "_ipp._tcp.local. PTR", "_universal._sub._ipp._tcp.local. PTR",
            ])
        let txt = try #require(group.records.first { $0.type == .txt })
        #expect(txt.rdata == Array("\u{0C}rp=ipp/print\u{06}ty=Lab".utf8), "TXT byte for byte")
        lab.established()
        let reply = try #require(replies.last)
        #expect(reply.rcode == .noError && reply.isResponse && reply.opcode == .update)
        // RFC 9664 §4: the granted leases (asked: 7200 s and 14 days; KEY-LEASE capped at 7 days).
        let lease = try #require(reply.edns?.options.lazy.compactMap(UpdateLease.init).first)
        #expect(lease == UpdateLease(lease: 7200, keyLease: 604_800))
        #expect(lab.registrar.table.hosts[Self.host] != nil, "landed in the link's zone")
        #expect(lab.registrar.table.hosts[Self.host]?.source == [192, 0, 2, 7])
    }

    @Test func aRenewalWithTheSameRecordsIsAnsweredAtOnce() throws {
        let lab = Lab()
        _ = lab.send(SRPUpdateTests.signed)
        // The host's group alone, while it is tried and once it is registered: never the
        // whole set of hosts.
        #expect(lab.publisher.handed == 1)
        lab.established()
        #expect(lab.publisher.handed == 1, "the won group is what the publisher holds: not handed again")
        let again = lab.send(SRPUpdateTests.signed)
        #expect(again.last?.rcode == .noError)
        #expect(lab.publisher.handed == 1, "a renewal costs the publisher nothing")
    }

    @Test func anUpdateIsReadByItsClientsReaderThenAppliedOnTheRegistrarsThread() throws {
        let lab = Lab(readers: 2)
        let address: [UInt8] = [192, 0, 2, 7]
        let replies = Replies()
        lab.registrar.handle(SRPUpdateTests.signed, from: DNSClient(address: address, port: 5353, transport: .udp)) {
            replies.record($0)
        }
        lab.scheduler.advance(by: .zero)
        #expect(lab.publisher.groups.isEmpty, "not read: its reader has not run")
        let mine = Registrar.reader(of: address, among: 2)
        lab.readers[1 - mine].advance(by: .zero)
        lab.scheduler.advance(by: .zero)
        #expect(lab.publisher.groups.isEmpty, "the other reader has nothing of it")
        lab.readers[mine].advance(by: .zero)
        #expect(lab.publisher.groups.isEmpty, "read, and waiting for the registrar's thread")
        lab.scheduler.advance(by: .zero)
        #expect(lab.publisher.groups.count == 1, "its trial began")
        lab.established()
        #expect(replies.last?.rcode == .noError)
        #expect(lab.send(SRPUpdateTests.signed).last?.rcode == .noError, "a renewal, through the same reader")
    }

    @Test func anOutcomeForOtherRecordsLeavesTheTrialWaiting() throws {
        let lab = Lab()
        let replies = lab.send(SRPUpdateTests.signed)
        let group = try #require(lab.publisher.groups.first)
        // An earlier trial's records (settled by the wait), reported after this one began.
        lab.registrar.published(group.key, records: Array(group.records.dropLast()))
        lab.scheduler.advance(by: .zero)
        #expect(replies.count == 0, "still waiting for its own probe")
        lab.registrar.published(group.key, records: group.records)
        lab.scheduler.advance(by: .zero)
        #expect(replies.last?.rcode == .noError)
        #expect(lab.registrar.table.hosts[Self.host] != nil)
    }

    @Test func updatesThatArriveTogetherShareOneTransaction() throws {
        let saves = Saves()
        let lab = Lab(store: saves)
        _ = lab.send(SRPUpdateTests.signed)
        lab.established()
        #expect(saves.count.withLock { $0 } == 1)
        // Three renewals read while the registrar's thread was busy: one drain, one commit.
        let replies = Replies()
        for _ in 0..<3 {
            lab.registrar.handle(
                SRPUpdateTests.signed, from: DNSClient(address: [192, 0, 2, 7], port: 1, transport: .udp)
            ) {
                replies.record($0)
            }
        }
        lab.scheduler.advance(by: .zero)
        #expect(replies.all.withLock { $0.map { $0?.rcode } } == [.noError, .noError, .noError])
        #expect(saves.count.withLock { $0 } == 2)
    }

    @Test func aNameTakenOnTheLinkIsYXDomainAndChangesNothing() throws {
        let lab = Lab()
        let replies = lab.send(SRPUpdateTests.signed)
        let key = try #require(lab.publisher.groups.first?.key)
        lab.registrar.collided(key)
        lab.scheduler.advance(by: .zero)
        #expect(replies.last?.rcode == .yxDomain)
        #expect(lab.registrar.table.hosts.isEmpty && lab.registrar.table.claims.isEmpty)
        #expect(lab.publisher.groups.isEmpty, "the trial withdrawn")
    }

    @Test func anotherKeyForAHeldNameIsYXDomain() throws {
        let lab = Lab()
        _ = lab.send(SRPUpdateTests.signed)
        lab.established()
        #expect(lab.send(SRPUpdateTests.otherKey).last?.rcode == .yxDomain)
        #expect(
            lab.registrar.table.hosts[Self.host]?.addresses.contains(
                .aaaa(Array(IPPrefix.parseAddress("2001:db8::5")!))) == true)
    }

    @Test func withoutAnOutcomeTheRegistrationIsTakenAfterTheWait() throws {
        let lab = Lab()
        let replies = lab.send(SRPUpdateTests.signed)
        lab.scheduler.advance(by: .milliseconds(1299))
        #expect(replies.count == 0)
        lab.scheduler.advance(by: .milliseconds(1))
        #expect(replies.last?.rcode == .noError)
    }

    @Test func removalWithLeaseZeroWithdrawsAtOnce() throws {
        let lab = Lab()
        _ = lab.send(SRPUpdateTests.signed)
        lab.established()
        let removal = lab.send(SRPUpdateTests.removal)
        #expect(removal.last?.rcode == .noError)
        #expect(lab.registrar.table.hosts.isEmpty && lab.registrar.table.services.isEmpty)
        #expect(lab.publisher.groups.isEmpty, "withdrawn: avahi-daemon sends the goodbyes")
    }

    @Test func leasesExpireOnTheWallClock() throws {
        let lab = Lab()
        _ = lab.send(SRPUpdateTests.signed)
        lab.established()
        lab.clock.advance(7199)
        lab.scheduler.advance(by: .seconds(7199))
        #expect(!lab.registrar.table.hosts.isEmpty)
        lab.clock.advance(1)
        lab.scheduler.advance(by: .seconds(1) + .milliseconds(20))
        #expect(lab.registrar.table.hosts.isEmpty && lab.publisher.groups.isEmpty)
        // The name stays claimed until KEY-LEASE ends.
        #expect(lab.send(SRPUpdateTests.otherKey).last?.rcode == .yxDomain)
    }

    @Test func whoMayRegister() throws {
        // Off: NOTIMP, as before the registrar.
        #expect(Lab(configure: { $0.isEnabled = false }).send(SRPUpdateTests.signed).last?.rcode == .notImp)
        // On no served link.
        #expect(Lab().send(SRPUpdateTests.signed, from: [203, 0, 113, 9]).last?.rcode == .refused)
        // Outside allow-clients.
        let acl = Lab(allowed: [IPPrefix("198.51.100.0/24")!])
        #expect(acl.send(SRPUpdateTests.signed).last?.rcode == .refused)
        #expect(acl.refusals.all.withLock { $0 } == [""], "counted with the proxy's refusals (dns_acl_refused_total)")
        // Outside the link's view (`clients`): counted for the link (dns_link_refused_total).
        let view = Lab(linkClients: [IPPrefix("192.0.2.128/25")!])
        #expect(view.send(SRPUpdateTests.signed).last?.rcode == .refused)
        #expect(view.refusals.all.withLock { $0 } == ["lab0"])
        // Too large.
        #expect(Lab(configure: { $0.maxUpdateSize = 512 }).send(SRPUpdateTests.signed).last?.rcode == .refused)
        // Over the rate (1 a second, 2 at once), before the signature is looked at.
        let rate = Lab(configure: { $0.maxUpdateRate = 1 })
        #expect(rate.send(SRPUpdateTests.withoutLease).last?.rcode == .refused)
        _ = rate.send(SRPUpdateTests.withoutLease)
        #expect(rate.send(SRPUpdateTests.signed).last?.rcode == .refused, "the third at once")
        rate.scheduler.advance(by: .seconds(1))
        #expect(rate.send(SRPUpdateTests.signed).count == 0, "a second later: taken, waiting for the probe")
        // Not SRP (no lease option, as nsupdate sends).
        #expect(Lab().send(SRPUpdateTests.withoutLease).last?.rcode == .refused)
        // A changed octet: the signature does not verify.
        var bad = SRPUpdateTests.signed
        bad[bad.count - 1] ^= 1
        #expect(Lab().send(bad).last?.rcode == .refused)
    }
}
