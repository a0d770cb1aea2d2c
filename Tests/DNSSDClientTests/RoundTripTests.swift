import DNSWire
import Synchronization
import Testing

@testable import DNSSDClient

#if canImport(Glibc)
import Glibc
#endif

/// The client against `FakeDNSServer` on 127.0.0.1, port 0.
@Suite("loopback round trips", .serialized)
struct RoundTripTests {
    static let zone = try! DNSName("lab1.example.")
    static let ippType = try! DNSName("_ipp._tcp.lab1.example.")
    static let host = try! DNSName("farhost1.lab1.example.")
    static let names = ["Printer One", "Dot.ted Printer", "Drucker Küche"]

    static func instanceName(_ text: String) -> DNSName { try! ippType.prepending([Array(text.utf8)]) }

    /// The lab's zone: three _ipp._tcp instances, SRV/TXT for them, A/AAAA of the host,
    /// REFUSED outside lab1.example.
    static func zoneHandler(query: Message, overTCP: Bool) -> Message? {
        let question = query.questions[0]
        guard question.name.isSubdomain(of: zone) else { return response(to: query, rcode: .refused) }
        switch question.type {
        case .ptr where question.name == ippType:
            return response(
                to: query,
                answers: names.map { ResourceRecord(name: ippType, type: .ptr, ttl: 10, rdata: .ptr(instanceName($0))) }
            )
        case .srv where names.map(instanceName).contains(question.name):
            return response(
                to: query,
                answers: [
                    ResourceRecord(
                        name: question.name, type: .srv, ttl: 10,
                        rdata: .srv(priority: 0, weight: 0, port: 631, target: host))
                ])
        case .txt where names.map(instanceName).contains(question.name):
            return response(
                to: query,
                answers: [
                    ResourceRecord(
                        name: question.name, type: .txt, ttl: 10,
                        rdata: .txt(TXTTests.rdata([Array("rp=printers/one".utf8), Array("ty=Küche".utf8)])))
                ])
        case .a where question.name == host:
            return response(
                to: query, answers: [ResourceRecord(name: host, type: .a, ttl: 10, rdata: .a([192, 0, 2, 10]))])
        case .aaaa where question.name == host:
            return response(
                to: query,
                answers: [
                    ResourceRecord(
                        name: host, type: .aaaa, ttl: 10,
                        rdata: .aaaa([0x20, 0x01, 0x0d, 0xb8, 0, 1] + Array(repeating: 0, count: 9) + [0x10]))
                ])
        default:
            return noData(to: query, zone: zone)
        }
    }

    func client(_ server: FakeDNSServer, timeout: Double = 3, tcp: Bool = false) throws -> DNSSDClient {
        DNSSDClient(
            transport: DNSSocketClient(
                server: try ServerAddress(parsing: "127.0.0.1:\(server.port)"), timeout: timeout, tcpOnly: tcp,
                retryInterval: 0.3))
    }

    @Test(arguments: [false, true])
    func browseAndResolve(tcp: Bool) throws {
        let server = try FakeDNSServer(handler: Self.zoneHandler)
        defer { server.stop() }
        let client = try self.client(server, tcp: tcp)
        let instances = try client.browse(type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        #expect(instances.map(\.instanceText) == ["Dot.ted Printer", "Drucker Küche", "Printer One"])
        #expect(instances.allSatisfy { $0.domain == Self.zone })

        let service = try client.resolve(
            instance: try ServiceNames.instanceLabel("Dot.ted Printer"),
            type: try ServiceNames.parseServiceType("_ipp._tcp"),
            domain: Self.zone)
        #expect(service.host == Self.host && service.port == 631)
        #expect(service.addresses == ["192.0.2.10", "2001:db8:1::10"])
        #expect(service.txtEntries.map(\.description) == ["rp=printers/one", "ty=Küche"])
        #expect(server.queries.allSatisfy { $0.2 == tcp })
    }

    @Test func instanceNotFound() throws {
        let server = try FakeDNSServer(handler: Self.zoneHandler)
        defer { server.stop() }
        #expect(
            throws: DNSSDError.instanceNotFound(
                instance: "Nobody", type: "_ipp._tcp.", domain: "lab1.example.", server: "127.0.0.1:\(server.port)")
        ) {
            try self.client(server).resolve(
                instance: Array("Nobody".utf8), type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        }
    }

    @Test func emptyBrowseIsNoError() throws {
        let server = try FakeDNSServer(handler: Self.zoneHandler)
        defer { server.stop() }
        #expect(
            try self.client(server).browse(type: try ServiceNames.parseServiceType("_none._tcp"), domain: Self.zone)
                .isEmpty)
    }

    /// Something that is not a discovery proxy for the domain: "no instances" would hide it.
    @Test(arguments: [RCode.nxDomain, RCode.noError])
    func notABrowseDomain(rcode: RCode) throws {
        let server = try FakeDNSServer { query, _ in response(to: query, rcode: rcode) }
        defer { server.stop() }
        do {
            _ = try self.client(server).browse(type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
            Issue.record("no error")
        } catch let error as DNSSDError {
            guard case .notABrowseDomain(_, _, let domain, let answer) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(domain == "lab1.example.")
            #expect(answer == (rcode == .nxDomain ? "NXDOMAIN" : "no records and no SOA"))
            #expect(error.exitStatus == 1)
            #expect(error.description.contains("--domains"))
        }
    }

    @Test func truncatedAnswerFallsBackToTCP() throws {
        let server = try FakeDNSServer { query, overTCP in
            overTCP ? Self.zoneHandler(query: query, overTCP: true) : response(to: query, truncated: true)
        }
        defer { server.stop() }
        let instances = try self.client(server).browse(
            type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        #expect(instances.count == 3)
        #expect(server.queries.map(\.2) == [false, true])
    }

    @Test func refusedNamesTheDomain() throws {
        let server = try FakeDNSServer(handler: Self.zoneHandler)
        defer { server.stop() }
        do {
            _ = try self.client(server).browse(
                type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: try DNSName("example.org."))
            Issue.record("no error")
        } catch let error as DNSSDError {
            guard case .refused(_, let domain, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(domain == "example.org.")
        }
    }

    @Test func servfail() throws {
        let server = try FakeDNSServer { query, _ in response(to: query, rcode: .servFail) }
        defer { server.stop() }
        #expect(
            throws: DNSSDError.serverFailure(server: "127.0.0.1:\(server.port)", qname: "_ipp._tcp.lab1.example. PTR")
        ) {
            try self.client(server).browse(type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        }
    }

    @Test func silentServerTimesOutAfterRetries() throws {
        let server = try FakeDNSServer { _, _ in nil }
        defer { server.stop() }
        #expect(throws: DNSSDError.timeout(server: "127.0.0.1:\(server.port)", seconds: 1, transport: "UDP")) {
            try self.client(server, timeout: 1).browse(
                type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        }
        // Sent at 0, 0.3 and 0.9 s (the interval doubles): three copies within one second.
        #expect(server.queries.count == 3)
    }

    @Test func lateAnswerToAnEarlierSendCounts() throws {
        // Answers only the second copy: retransmission keeps the ID, so it still matches.
        let server = try FakeDNSServer { query, _ in
            Self.seen.withLock {
                $0 += 1
                return $0
            } >= 2 ? Self.zoneHandler(query: query, overTCP: false) : nil
        }
        Self.seen.withLock { $0 = 0 }
        defer { server.stop() }
        #expect(
            try self.client(server).browse(type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
                .count == 3)
    }

    static let seen = LockedCounter()

    @Test func closedPortIsConnectionRefused() throws {
        // Bind, learn the port, close: nobody listens there any more.
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 ? getsockname(fd, $0, &length) : -1
            }
        }
        close(fd)
        let port = UInt16(bigEndian: address.sin_port)
        let transport = DNSSocketClient(
            server: try ServerAddress(parsing: "127.0.0.1:\(port)"), timeout: 2, retryInterval: 0.3)
        #expect(throws: DNSSDError.connectionRefused(server: "127.0.0.1:\(port)", transport: "UDP")) {
            try DNSSDClient(transport: transport).browse(
                type: try ServiceNames.parseServiceType("_ipp._tcp"), domain: Self.zone)
        }
        #expect(throws: DNSSDError.connectionRefused(server: "127.0.0.1:\(port)", transport: "TCP")) {
            var tcp = transport
            tcp.tcpOnly = true
            _ = try tcp.query(Question(name: Self.ippType, type: .ptr))
        }
    }

    @Test func domainEnumeration() throws {
        let lab2 = try DNSName("lab2.example.")
        let server = try FakeDNSServer { query, _ in
            let question = query.questions[0]
            guard question.name.isSubdomain(of: Self.zone) else { return response(to: query, rcode: .refused) }
            let kind = String(decoding: question.name.labels[0], as: UTF8.self)
            let targets: [DNSName] = kind == "db" ? [Self.zone] : (kind == "lb" ? [Self.zone] : [Self.zone, lab2])
            return response(
                to: query,
                answers: targets.map { ResourceRecord(name: question.name, type: .ptr, ttl: 10, rdata: .ptr($0)) })
        }
        defer { server.stop() }
        let client = try self.client(server)
        let found = try client.browseDomains(in: Self.zone)
        #expect(found.map(\.domain) == [Self.zone, lab2])
        #expect(found[0].legacy && found[0].isDefault && found[0].browse)
        #expect(!found[1].legacy && !found[1].isDefault && found[1].browse)
        // Discovery skips a search domain the server refuses.
        let discovered = try client.discoverBrowseDomains(searchDomains: [try DNSName("example.org."), Self.zone])
        #expect(discovered.map(\.domain) == [Self.zone, lab2])
        #expect(try client.discoverBrowseDomains(searchDomains: [try DNSName("example.org.")]).isEmpty)
    }
}

final class LockedCounter: Sendable {
    private let value = Mutex(0)
    func withLock<R>(_ body: (inout Int) -> R) -> R { self.value.withLock { body(&$0) } }
}
