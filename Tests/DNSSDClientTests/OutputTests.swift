import DNSWire
import Testing

@testable import DNSSDClient

@Suite("output formatting and error mapping")
struct OutputTests {
    let domain = try! ServiceNames.parseDomain("lab1.example.")
    let type = try! ServiceNames.parseServiceType("_ipp._tcp")

    func instance(_ text: String) -> ServiceInstance {
        let label = Array(text.utf8)
        let name = try! ServiceNames.serviceName(instance: label, type: self.type, domain: self.domain)
        return ServiceInstance(instance: label, type: self.type, domain: self.domain, fullName: name, ttl: 10)
    }

    @Test func browseText() {
        let text = Output.browseText(
            [self.instance("Dot.ted Printer"), self.instance("Drucker Küche")], type: self.type, domains: [self.domain],
            server: "127.0.0.1:5300")
        #expect(
            text == """
                Browsing for _ipp._tcp. in lab1.example. at 127.0.0.1:5300
                Domain                Service Type      Instance Name
                lab1.example.         _ipp._tcp.        Dot.ted Printer
                lab1.example.         _ipp._tcp.        Drucker Küche

                """)
        #expect(
            Output.browseText([], type: self.type, domains: [self.domain], server: "s").hasSuffix("\nno instances\n"))
    }

    @Test func browseJSON() {
        let json = Output.browseJSON(
            [self.instance("Dot.ted Printer")], type: self.type, domains: [self.domain], server: "127.0.0.1:5300")
        #expect(
            json
                == #"{"server":"127.0.0.1:5300","type":"_ipp._tcp.","domains":["lab1.example."],"instances":[{"name":"Dot.ted Printer","type":"_ipp._tcp.","domain":"lab1.example.","fullname":"Dot\\.ted\\032Printer._ipp._tcp.lab1.example.","ttl":10}]}"#
                + "\n")
    }

    @Test func resolveTextAndJSON() throws {
        let label = Array("Printer One".utf8)
        let service = ResolvedService(
            instance: label, type: self.type, domain: self.domain,
            fullName: try ServiceNames.serviceName(instance: label, type: self.type, domain: self.domain),
            host: try DNSName("farhost1.lab1.example."), port: 631, priority: 0, weight: 0,
            addresses: ["192.0.2.10", "2001:db8:1::10"],
            txt: TXTTests.rdata([Array("rp=printers/one".utf8), Array("flag".utf8)]),
            ttl: 10)
        let text = Output.resolveText(service, server: "127.0.0.1:5300")
        #expect(text.contains("Printer\\032One._ipp._tcp.lab1.example. can be reached at farhost1.lab1.example.:631"))
        #expect(text.contains("  addresses: 192.0.2.10 2001:db8:1::10\n"))
        #expect(text.contains("  TXT:       rp=printers/one\n             flag\n"))
        #expect(
            Output.resolveJSON(service, server: "s")
                == #"{"server":"s","name":"Printer One","type":"_ipp._tcp.","domain":"lab1.example.","fullname":"Printer\\032One._ipp._tcp.lab1.example.","host":"farhost1.lab1.example.","port":631,"priority":0,"weight":0,"addresses":["192.0.2.10","2001:db8:1::10"],"txt":[{"key":"rp","value":"printers/one"},{"key":"flag","value":null}],"ttl":10}"#
                + "\n")
    }

    @Test func domainsAndTypes() throws {
        let lab2 = try DNSName("lab2.example.")
        let rows = [
            BrowseDomain(
                domain: self.domain, browse: true, isDefault: true, legacy: true, source: self.domain, ttl: 10),
            BrowseDomain(domain: lab2, browse: true, isDefault: false, legacy: false, source: self.domain, ttl: 10),
        ]
        let text = Output.domainsText(rows, searched: [self.domain], server: "s")
        #expect(text.contains("lab1.example.                 default, legacy (automatic), browse\n"))
        #expect(text.contains("lab2.example.                 browse\n"))
        #expect(
            Output.domainsJSON(rows, searched: [self.domain], server: "s").contains(
                #"{"domain":"lab2.example.","browse":true,"default":false,"legacy":false,"source":"lab1.example.","ttl":10}"#
            ))
        let types = Output.typesText(
            [ServiceTypeEntry(type: self.type, domain: self.domain, ttl: 10)], domains: [self.domain], server: "s")
        #expect(types.hasSuffix("lab1.example.         _ipp._tcp.\n"))
    }

    @Test func watchDiff() {
        let a = Output.instanceRow(self.instance("A"))
        let b = Output.instanceRow(self.instance("B"))
        let c = Output.instanceRow(self.instance("C"))
        let (added, removed) = Output.diff(old: [a, b], new: [b, c])
        #expect(added == [c] && removed == [a])
        #expect(Output.watchLine(added: true, time: "12:00:00", row: c).hasPrefix("+   12:00:00  lab1.example."))
        #expect(Output.watchLine(added: false, time: "12:00:00", row: a).hasSuffix("_ipp._tcp.        A"))
        #expect(Output.watchJSON(added: true, time: "t", row: c).hasPrefix(#"{"event":"add","time":"t","name":"C","#))
    }

    @Test func jsonEscapes() {
        #expect(JSONValue.string("a\"b\\c\n\u{01}ü").rendered == #""a\"b\\c\n\u0001ü""#)
    }

    @Test func rcodeMapping() throws {
        let question = Question(name: try DNSName("_ipp._tcp.example.org."), type: .ptr)
        let domain = try DNSName("example.org.")
        #expect(DNSSDError.from(rcode: .noError, server: "s", question: question, domain: domain) == nil)
        #expect(DNSSDError.from(rcode: .nxDomain, server: "s", question: question, domain: domain) == nil)
        let refused = try #require(
            DNSSDError.from(rcode: .refused, server: "127.0.0.1:5300", question: question, domain: domain))
        #expect(
            refused.description
                == "127.0.0.1:5300 refused the query for _ipp._tcp.example.org. PTR (REFUSED): it does not serve the domain example.org."
        )
        #expect(refused.exitStatus == 3)
        let servfail = try #require(DNSSDError.from(rcode: .servFail, server: "s", question: question, domain: domain))
        #expect(servfail.description.contains("SERVFAIL") && servfail.exitStatus == 3)
        #expect(
            DNSSDError.from(rcode: .notImp, server: "s", question: question, domain: domain)?.description.contains(
                "NOTIMP") == true)
        #expect(
            DNSSDError.timeout(server: "127.0.0.1:5399", seconds: 8, transport: "UDP").description
                == "timeout: no answer from 127.0.0.1:5399 over UDP after 8 s")
        #expect(DNSSDError.timeout(server: "s", seconds: 0.5, transport: "UDP").exitStatus == 4)
        #expect(DNSSDError.connectionRefused(server: "s", transport: "UDP").exitStatus == 5)
        #expect(
            DNSSDError.instanceNotFound(instance: "x", type: "_ipp._tcp.", domain: "d.", server: "s").exitStatus == 1)
        for error in [refused, servfail, .noBrowseDomains(searched: ["a."], server: "s")] {
            #expect(!error.description.contains("\n"))
        }
    }
}
