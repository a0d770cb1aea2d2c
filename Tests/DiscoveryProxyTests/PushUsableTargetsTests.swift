import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import ProxyTestSupport
import Testing

/// RFC 8766 §5.5.2's unusable-SRV rule on DNS Push, as unicast answers apply it
/// (`UsableTargetsTests`): what a subscriber is told follows the target's address browses.
@Suite("Unusable SRV targets on DNS Push (RFC 8766 §5.5.2)")
struct PushUsableTargetsTests {
    let instance = try! DNSName("x._ipp._tcp.local.")
    let host = try! DNSName("prnt.local.")

    struct Watch {
        let h: Harness
        let service: PushService
        let ptr: FakeTransport
        let srv: FakeTransport
    }

    /// A subscriber of the `_ipp._tcp` PTR browse and one of `x`'s SRV, plus subscriptions to
    /// the target's A and AAAA (as a resolving client makes), then `x` on host `prnt`.
    func watch(suppress: Bool = true) throws -> Watch {
        let h = Harness { $0.suppressLinkLocal = suppress }
        let service = PushService(proxy: h.proxy, logger: Logger(label: "test"))
        func subscribe(_ name: String, _ type: RRType) -> FakeTransport {
            let transport = FakeTransport()
            let session = service.openSession(client: .test(tcp: true), transport: transport)
            session.receive(DSOMessage(id: 1, tlvs: [PushSubscribe(name: try! DNSName(name), type: type).tlv]).encode())
            return transport
        }
        let ptr = subscribe("_ipp._tcp.lab1.example.", .ptr)
        let srv = subscribe("x._ipp._tcp.lab1.example.", .srv)
        _ = subscribe("prnt.lab1.example.", .a)
        _ = subscribe("prnt.lab1.example.", .aaaa)
        h.backend.add("_ipp._tcp.local.", .ptr, .ptr(instance))
        h.backend.add("x._ipp._tcp.local.", .srv, .srv(priority: 0, weight: 0, port: 631, target: host))
        h.clock.advance(by: .milliseconds(20))
        return Watch(h: h, service: service, ptr: ptr, srv: srv)
    }

    /// The target's A and AAAA browses both answer, with link-local addresses only.
    func linkLocalOnly(_ w: Watch) {
        w.h.backend.add("prnt.local.", .a, .a([169, 254, 8, 8]))
        w.h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fe80::88")!))
        w.h.clock.advance(by: .milliseconds(20))
    }

    func ptrChange(_ adding: Bool) throws -> PushChange {
        let owner = try DNSName("_ipp._tcp.lab1.example.")
        let rdata = try RData.ptr(try DNSName("x._ipp._tcp.lab1.example.")).wireBytes()
        return adding ? .add(owner, .ptr, ttl: 4500, rdata: rdata) : .remove(owner, .ptr, rdata: rdata)
    }

    @Test("a target that turns out link-local only: its SRV and the PTR to it are pushed as removed")
    func becomesUnusable() throws {
        let w = try watch()
        #expect(w.ptr.pushes == [try ptrChange(true)], "unknown addresses hide nothing")
        #expect(w.srv.pushes.count == 1)
        w.h.backend.add("prnt.local.", .a, .a([169, 254, 8, 8]))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(w.ptr.pushes.count == 1, "AAAA not settled yet: nothing decided")
        w.h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fe80::88")!))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(w.ptr.pushes.last == (try ptrChange(false)))
        #expect(w.srv.pushes.count == 2)
        #expect(w.srv.pushes.last?.type == .srv && w.srv.pushes.last?.isAddition == false, "SRV removed")
    }

    @Test("a usable address arriving later brings them back; its leaving hides them again")
    func comesBack() throws {
        let w = try watch()
        linkLocalOnly(w)
        #expect(w.ptr.pushes.last == (try ptrChange(false)))
        w.h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("2001:db8:1::88")!))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(w.ptr.pushes.last == (try ptrChange(true)))
        w.h.backend.remove("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("2001:db8:1::88")!))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(w.ptr.pushes.last == (try ptrChange(false)))
        // Removing the withheld PTR itself tells the client nothing new.
        let count = w.ptr.pushes.count
        w.h.backend.remove("_ipp._tcp.local.", .ptr, .ptr(instance))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(w.ptr.pushes.count == count)
    }

    @Test("an address family that never answers settles after the mDNS window, without any event")
    func settlesByTime() throws {
        let w = try watch()
        w.h.backend.add("prnt.local.", .a, .a([169, 254, 8, 8]))
        w.h.clock.advance(by: .seconds(1))
        #expect(w.ptr.pushes.count == 1)
        w.h.clock.advance(by: .seconds(7))
        #expect(w.ptr.pushes.last == (try ptrChange(false)), "re-evaluated when the AAAA browse settled")
    }

    @Test("a subscriber arriving after the target is known unusable is not told about it at all")
    func lateSubscriber() throws {
        let w = try watch()
        linkLocalOnly(w)
        let late = FakeTransport()
        let session = w.service.openSession(client: .test(tcp: true), transport: late)
        session.receive(
            DSOMessage(id: 1, tlvs: [PushSubscribe(name: try DNSName("_ipp._tcp.lab1.example."), type: .ptr).tlv])
                .encode())
        #expect(late.messages.count == 1 && late.messages[0].rcode == .noError && late.pushes.isEmpty)
        w.h.backend.add("prnt.local.", .a, .a([192, 0, 2, 88]))
        w.h.clock.advance(by: .milliseconds(20))
        #expect(late.pushes == [try ptrChange(true)])
    }

    @Test("with link-local suppression off, nothing is withheld")
    func suppressionOff() throws {
        let w = try watch(suppress: false)
        w.h.backend.add("prnt.local.", .a, .a([169, 254, 8, 8]))
        w.h.backend.add("prnt.local.", .aaaa, .aaaa(IPPrefix.parseAddress("fe80::88")!))
        w.h.clock.advance(by: .seconds(10))
        #expect(w.ptr.pushes == [try ptrChange(true)])
        #expect(w.srv.pushes.count == 1)
    }
}
