import DNSWire
import Testing

@testable import DNSSDClient

@Suite("resolv.conf and server addresses")
struct ResolverConfigurationTests {
    @Test func parsesNameserversAndSearchDomains() throws {
        let config = ResolverConfiguration.parse(
            """
            # generated
            nameserver 192.0.2.53
            nameserver 2001:db8::53   ; trailing comment
            nameserver fe80::1%lo
            nameserver not-an-address
            domain lab1.example
            search lab1.example. Building\\0322.example example.org
            options ndots:2
            nameserver
            """)
        #expect(config.nameservers.map(\.description) == ["192.0.2.53:53", "[2001:db8::53]:53", "[fe80::1%lo]:53"])
        #expect(config.nameservers[2].scopeID != 0)
        #expect(config.searchDomains == ["lab1.example", "lab1.example.", "Building\\0322.example", "example.org"])
        #expect(config.problems.count == 2)
    }

    @Test func emptyFileHasNothing() {
        let config = ResolverConfiguration.parse("")
        #expect(config.nameservers.isEmpty && config.searchDomains.isEmpty)
    }

    @Test func missingFileIsAConfigurationError() {
        #expect(throws: DNSSDError.self) { try ResolverConfiguration.load(path: "/nonexistent/resolv.conf") }
        do {
            _ = try ResolverConfiguration.load(path: "/nonexistent/resolv.conf")
        } catch {
            #expect(error.exitStatus == 6)
            #expect(error.description.hasPrefix("/nonexistent/resolv.conf: cannot read"))
        }
    }

    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1:53"), ("127.0.0.1:5300", "127.0.0.1:5300"), ("[::1]:5300", "[::1]:5300"),
        ("::1", "[::1]:53"), ("[2001:db8::1]", "[2001:db8::1]:53"),
    ])
    func serverAddresses(text: String, expected: String) throws {
        #expect(try ServerAddress(parsing: text).description == expected)
    }

    @Test(arguments: ["ns.example", "127.0.0.1:0", "127.0.0.1:70000", "[::1", "[::1]x", "fe80::1%nosuchif0"])
    func badServerAddresses(text: String) {
        #expect(throws: DNSSDError.self) { try ServerAddress(parsing: text) }
    }
}

@Suite("names from instance, type and domain")
struct NameTests {
    let domain = try! ServiceNames.parseDomain("lab1.example")

    @Test func instanceWithDotAndSpaceIsOneLabel() throws {
        let instance = try ServiceNames.instanceLabel("Dot.ted Printer")
        let type = try ServiceNames.parseServiceType("_ipp._tcp")
        let name = try ServiceNames.serviceName(instance: instance, type: type, domain: self.domain)
        #expect(name.labels.count == 5)
        #expect(name.labels[0] == Array("Dot.ted Printer".utf8))
        #expect(name.description == "Dot\\.ted\\032Printer._ipp._tcp.lab1.example.")
        #expect(ServiceNames.display(name) == "Dot\\.ted Printer._ipp._tcp.lab1.example.")
    }

    @Test func utf8InstanceStaysBytes() throws {
        let instance = try ServiceNames.instanceLabel("Drucker Küche")
        #expect(instance == Array("Drucker K\u{00FC}che".utf8))
        let name = try ServiceNames.serviceName(
            instance: instance, type: try ServiceNames.parseServiceType("_ipp._tcp."), domain: self.domain)
        #expect(name.description == "Drucker\\032K\\195\\188che._ipp._tcp.lab1.example.")
        #expect(ServiceNames.displayLabel(name.labels[0]) == "Drucker Küche")
    }

    @Test func instanceLimits() {
        #expect(throws: DNSSDError.self) { try ServiceNames.instanceLabel("") }
        #expect(throws: DNSSDError.self) { try ServiceNames.instanceLabel(String(repeating: "ü", count: 32)) }
        #expect(throws: DNSSDError.self) { try ServiceNames.instanceLabel("bell\u{07}") }
        #expect((try? ServiceNames.instanceLabel(String(repeating: "x", count: 63))) != nil)
    }

    @Test func escapedDomains() throws {
        let domain = try ServiceNames.parseDomain("Building\\0322.example.")
        #expect(domain.labels == [Array("Building 2".utf8), Array("example".utf8)])
        #expect(ServiceNames.display(domain) == "Building 2.example.")
        #expect(try ServiceNames.parseDomain("a\\.b.example").labels.count == 2)
    }

    @Test(arguments: [
        ("a..b", "empty label after \"a\""), (".a", "starts with a dot"), ("", "empty"), (".", "root"),
        ("a\\", "trailing backslash"), ("a\\12.b", "three digits"), ("a\\300.b", "at most \\255"),
        (String(repeating: "x", count: 64) + ".example", "64 octets"),
        (Array(repeating: String(repeating: "x", count: 60), count: 5).joined(separator: "."), "at most 255"),
    ])
    func malformedDomains(text: String, reason: String) {
        do {
            _ = try ServiceNames.parseDomain(text)
            Issue.record("\(text) accepted")
        } catch {
            #expect(error.description.contains(reason), "\(error)")
            #expect(error.description.hasPrefix("malformed domain \""))
            #expect(error.exitStatus == 2)
        }
    }

    @Test func serviceTypes() throws {
        #expect(try ServiceNames.parseServiceType("_printer._sub._http._tcp").count == 4)
        #expect(try ServiceNames.parseServiceType("_ipp._UDP").count == 2)
        for bad in ["_ipp", "ipp._tcp", "_ipp._sctp", "_a._b._ipp._tcp", "_ipp.._tcp", "_"] {
            #expect(throws: DNSSDError.self, "\(bad)") { try ServiceNames.parseServiceType(bad) }
        }
    }
}

@Suite("TXT records")
struct TXTTests {
    static func rdata(_ strings: [[UInt8]]) -> [UInt8] { strings.flatMap { [UInt8($0.count)] + $0 } }

    @Test func keyValuePairs() {
        let entries = TXTRecord.parse(
            Self.rdata([
                Array("rp=printers/one".utf8), Array("note=lab one".utf8), Array("flag".utf8), Array("empty=".utf8),
                Array("key=val=ue".utf8), Array("=leading-equals".utf8), Array("RP=second".utf8), [],
            ]))
        #expect(entries.map(\.description) == ["rp=printers/one", "note=lab one", "flag", "empty=", "key=val=ue"])
        #expect(entries[2].value == nil)
        #expect(entries[3].value == [])
    }

    @Test func binaryAndUTF8Values() {
        let entries = TXTRecord.parse(
            Self.rdata([[UInt8]("bin=".utf8) + [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF], Array("utf8=Küche".utf8)]))
        #expect(entries[0].displayValue == "\\x00\\x01\\x7F\\x80\\xFE\\xFF")
        #expect(entries[0].value == [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
        #expect(entries[1].description == "utf8=Küche")
    }

    @Test func emptyForms() {
        #expect(TXTRecord.parse([]).isEmpty)
        #expect(TXTRecord.parse([0]).isEmpty)
        // A length byte running past the end keeps what is there.
        #expect(TXTRecord.parse([10] + Array("a=b".utf8)).map(\.description) == ["a=b"])
    }
}
