import DNSWire
import MDNS
import ProxyTestSupport
import Synchronization
import Testing

@_spi(Testing) @testable import DiscoveryProxy

/// What the proxy keeps per known instance: the shapes that keep it small must not change
/// what clients are told.
@Suite("Browse storage")
struct BrowseStorageTests {
    let printer = try! DNSName("Printer._ipp._tcp.local.")

    /// Where a name's bytes live: two names with the same address share one array.
    func storage(_ name: DNSName) -> UnsafeRawPointer? {
        name.wireBytes.withUnsafeBytes { $0.baseAddress }
    }

    /// The sizes Browse.swift's comments give, as strides (what each takes in an array or a
    /// table slot): one `RecordState` per record of every browse, one `Browse` per browse.
    @Test("per-record and per-browse storage stay at 32 and 72 bytes")
    func sizes() {
        #expect(MemoryLayout<RecordState>.stride == 32)
        #expect(MemoryLayout<Browse>.stride == 72)
    }

    @Test("an instance's SRV and TXT browses keep the name the PTR record brought, not copies of the query's")
    func sharedInstanceName() throws {
        let h = Harness.warmed(with: printer)
        h.ask("Printer._ipp._tcp.lab1.example.", .srv)
        h.ask("Printer._ipp._tcp.lab1.example.", .txt)
        let asked = h.backend.started.filter { $0.name == printer }
        #expect(asked.map(\.type) == [.srv, .txt])
        #expect(storage(asked[0].name) == storage(asked[1].name))
    }

    @Test("a client's spelling that differs from the PTR record's is kept for its own browse")
    func differentSpellingNotShared() throws {
        let h = Harness.warmed(with: printer)
        h.ask("PRINTER._ipp._tcp.lab1.example.", .srv)
        let asked = try #require(h.backend.started.last)
        #expect(asked.name.description == "PRINTER._ipp._tcp.local.")
    }

    @Test("names are rewritten into the link zone per answer: PTR, SRV target, additionals (RFC 8766 §5.5.1)")
    func translatedPerAnswer() throws {
        let h = Harness.warmed(with: printer)
        h.ask("Printer._ipp._tcp.lab1.example.", .srv)
        h.backend.add(
            "Printer._ipp._tcp.local.", .srv,
            .srv(priority: 1, weight: 2, port: 631, target: try DNSName("host.local.")))
        h.ask("host.lab1.example.", .a)
        h.backend.add("host.local.", .a, .a([192, 0, 2, 7]))
        h.ask("host.lab1.example.", .aaaa)
        h.backend.add("host.local.", .aaaa, .aaaa([0xfe, 0x80] + Array(repeating: 0, count: 13) + [1]))
        h.clock.advance(by: .seconds(1))

        let srv = try #require(h.ask("Printer._ipp._tcp.lab1.example.", .srv).message)
        #expect(
            srv.answers.map(\.rdata) == [
                .srv(priority: 1, weight: 2, port: 631, target: try DNSName("host.lab1.example."))
            ])
        // The host's address follows the SRV; its link-local IPv6 address does not (§5.5.2).
        #expect(srv.additional.map(\.rdata) == [.a([192, 0, 2, 7])])
        #expect(srv.additional.map(\.name) == [try DNSName("host.lab1.example.")])

        let ptr = try #require(h.ask("_ipp._tcp.lab1.example.", .ptr).message)
        #expect(ptr.answers.map(\.rdata) == [.ptr(try DNSName("Printer._ipp._tcp.lab1.example."))])
        #expect(
            ptr.additional.map(\.name) == [
                try DNSName("Printer._ipp._tcp.lab1.example."), try DNSName("host.lab1.example."),
            ])
    }

    @Test("a query started with a handler gets its events while the handle is held, none after cancel")
    func handlerQueries() throws {
        let backend = ScriptedBackend()
        let events = Mutex<[MDNSEvent]>([])
        let question = MDNSQuestion(interface: "eth1", name: printer, type: .txt)
        let handle = try backend.startQuery(question) { event in events.withLock { $0.append(event) } }
        backend.emit(.allForNow, name: "Printer._ipp._tcp.local.", type: .txt)
        #expect(events.withLock { $0 } == [.allForNow])
        handle.cancel()
        #expect(backend.live.isEmpty)
    }
}
