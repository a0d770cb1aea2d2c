// libFuzzer harnesses for the DNS wire codec and the proxy's query path.
//
// Built by scripts/fuzz.sh with `-sanitize=fuzzer,address -DFUZZING`: libFuzzer then provides
// `main` and calls `LLVMFuzzerTestOneInput`. In a normal `swift build` (no -DFUZZING) the
// target is a tiny executable that replays files given on the command line through the same
// harness, so the package always builds and a crashing input can be re-run without libFuzzer.
//
// The harness is chosen by the FUZZ_TARGET environment variable: `decode` (default), `query`,
// `tcp` (TCPHarness.swift), `dso` (DSOHarness.swift) or `srp` (SRPHarness.swift).

import DNSWire
@_spi(Testing) import DiscoveryProxy
import Logging
import MDNS
import ProxyTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

enum FuzzTarget: String {
    case decode, query, tcp, dso, srp

    static let selected: FuzzTarget = {
        guard let raw = getenv("FUZZ_TARGET") else { return .decode }
        guard let target = FuzzTarget(rawValue: String(cString: raw)) else {
            fatalError("FUZZ_TARGET must be decode, query, tcp, dso or srp")
        }
        return target
    }()

    func run(_ bytes: [UInt8]) {
        switch self {
        case .decode: DecodeHarness.run(bytes)
        case .query: QueryHarness.run(bytes)
        case .srp: SRPHarness.run(bytes)
        case .tcp:
            #if DEBUG
            TCPHarness.run(bytes)
            #else
            fatalError("FUZZ_TARGET=tcp needs a debug build (scripts/fuzz.sh)")
            #endif
        case .dso:
            #if DEBUG
            DSOHarness.run(bytes)
            #else
            fatalError("FUZZ_TARGET=dso needs a debug build (scripts/fuzz.sh)")
            #endif
        }
    }
}

/// (a) `Message(wire:)` over arbitrary bytes; when it decodes, `encode(limit:)` at the UDP
/// minimum and the TCP maximum, and the full encoding must decode again.
enum DecodeHarness {
    static func run(_ bytes: [UInt8]) {
        guard let message = try? Message(wire: bytes) else { return }
        _ = try? message.encode(limit: 512)
        guard let full = try? message.encode(limit: 65535) else { return }
        do {
            _ = try Message(wire: full)
        } catch {
            fatalError("re-encoded message does not decode: \(error)")
        }
    }
}

/// (b) `DiscoveryProxy.handle(query:from:respond:)` with an in-memory mDNS backend and a
/// manual clock. Each input gets a fresh proxy. Every mDNS query the proxy starts is answered
/// with records (well-formed ones and raw RDATA cut from the input), then the clock runs past
/// the negative timeout so every waiter is answered. Checks: `respond` is called exactly once,
/// and a reply decodes and carries the query's ID.
enum QueryHarness {
    static let logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    static let configuration: ProxyConfiguration = {
        var configuration = ProxyConfiguration(
            links: [
                Link(
                    interface: "eth1", zone: try! DNSName("lab1.example."),
                    subnets: [IPPrefix("192.0.2.0/24")!, IPPrefix("2001:db8:1::/64")!]),
                Link(
                    interface: "eth2", zone: try! DNSName("lab2.example."),
                    subnets: [IPPrefix("198.51.100.0/24")!],
                    services: ServiceFilter(allow: ["_ipp._tcp", "_http._tcp"])),
            ],
            serverName: try! DNSName("ns.example."))
        configuration.inventoryInterval = nil  // the query path only
        return configuration
    }()

    static func run(_ bytes: [UInt8]) {
        let backend = FuzzBackend()
        let clock = ManualScheduler()
        let proxy = DiscoveryProxy(configuration: configuration, backend: backend, scheduler: clock, logger: logger)
        let replies = Mutex<[[UInt8]?]>([])
        let transport: DNSTransport = bytes.count > 1 && bytes[1] & 1 == 1 ? .tcp : .udp
        proxy.handle(query: bytes, from: DNSClient(address: [127, 0, 0, 1], port: 5353, transport: transport)) {
            reply in
            replies.withLock { $0.append(reply) }
        }

        let tail = Array(bytes.suffix(64))
        for handle in backend.live {
            for record in records(for: handle.question, raw: tail) { handle.handler(.added(record)) }
            handle.handler(.allForNow)
        }
        clock.advance(by: .seconds(7))

        let got = replies.withLock { $0 }
        guard got.count == 1 else { fatalError("respond called \(got.count) times") }
        guard let reply = got[0] else { return }
        guard let header = MessageHeader(bytes) else { fatalError("a reply to a headerless message") }
        do {
            let message = try Message(wire: reply)
            guard message.id == header.id, message.isResponse else { fatalError("reply ID or QR wrong") }
            if transport == .udp, reply.count > max(512, Int(message.edns?.udpPayloadSize ?? 512)) {
                fatalError("UDP reply of \(reply.count) octets")
            }
        } catch {
            fatalError("reply does not decode: \(error)")
        }
    }

    /// Plausible mDNS answers for `question`, plus one with raw RDATA from the input.
    static func records(for question: MDNSQuestion, raw: [UInt8]) -> [MDNSRecord] {
        let name = question.name
        let local = try! DNSName("fuzz.local.")
        var out: [MDNSRecord] = []
        switch question.type {
        case .ptr:
            let instance = (try? DNSName(labels: [Array("Fuzz Printer".utf8)] + name.labels)) ?? local
            out.append(MDNSRecord(name: name, type: .ptr, rdata: wire(instance)))
        case .srv:
            out.append(MDNSRecord(name: name, type: .srv, rdata: [0, 0, 0, 0, 0x02, 0x77] + wire(local)))
        case .txt:
            out.append(MDNSRecord(name: name, type: .txt, rdata: [UInt8(min(raw.count, 63))] + raw.prefix(63)))
        case .a:
            out.append(MDNSRecord(name: name, type: .a, rdata: [192, 0, 2, 7]))
            out.append(MDNSRecord(name: name, type: .a, rdata: [169, 254, 1, 1]))
        case .aaaa:
            out.append(MDNSRecord(name: name, type: .aaaa, rdata: [0xfe, 0x80] + Array(repeating: 0, count: 13) + [1]))
            out.append(
                MDNSRecord(name: name, type: .aaaa, rdata: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 1, count: 12)))
        default:
            break
        }
        out.append(MDNSRecord(name: name, type: question.type, rdata: raw))
        return out
    }

    static func wire(_ name: DNSName) -> [UInt8] {
        name.labels.flatMap { [UInt8($0.count)] + $0 } + [0]
    }
}

/// An in-memory backend that remembers its queries so the harness can answer them, and the
/// reconfirmations it was asked for (the dso harness checks who caused what).
final class FuzzBackend: MDNSBackend {
    final class Handle: MDNSQueryHandle {
        let question: MDNSQuestion
        let tag: UInt32
        weak let receiver: (any MDNSQueryReceiver)?
        let cancelled = Atomic<Bool>(false)
        init(question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver) {
            self.question = question
            self.tag = tag
            self.receiver = receiver
        }
        func handler(_ event: MDNSEvent) { receiver?.receive(event, for: question, tag: tag) }
        func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }
    }

    private let handles = Mutex<[Handle]>([])
    var state: MDNSBackendState { .running }

    func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle {
        guard question.interface == "eth1" || question.interface == "eth2" else {
            throw .unknownInterface(question.interface)
        }
        let handle = Handle(question: question, tag: tag, receiver: receiver)
        handles.withLock { $0.append(handle) }
        return handle
    }

    var live: [Handle] {
        handles.withLock { $0.filter { !$0.cancelled.load(ordering: .sequentiallyConsistent) } }
    }

    /// Every query started, cancelled or not, in order.
    var all: [Handle] { handles.withLock { $0 } }

    private let reconfirmed = Mutex<[MDNSQuestion]>([])
    var reconfirms: [MDNSQuestion] { reconfirmed.withLock { $0 } }

    func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        reconfirmed.withLock { $0.append(question) }
    }
}

#if FUZZING
/// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer). A direct reference, so the
/// static archive member is linked in; pointer and int arguments pass the same way in Swift's
/// and C's conventions.
// swift-format-ignore: AlwaysUseLowerCamelCase
// libFuzzer's C name.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt
#endif

/// libFuzzer's per-input entry point.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    FuzzTarget.selected.run(bytes)
    return 0
}

/// SwiftPM links every executable with `main` renamed to the module's entry point, so
/// libFuzzer's own `main` is never used: with -DFUZZING this `main` starts libFuzzer through
/// `LLVMFuzzerRunDriver`; otherwise it replays the files named on the command line.
@main
enum FuzzMain {
    static func main() {
        #if FUZZING
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, { data, size in fuzzTestOneInput(data, size) }))
        #else
        replay(Array(CommandLine.arguments.dropFirst()))
        #endif
    }

    static func replay(_ paths: [String]) {
        if paths.isEmpty {
            print("usage: FUZZ_TARGET=decode|query|tcp|dso|srp fuzz-dns FILE...  (scripts/fuzz.sh runs libFuzzer)")
        }
        for path in paths {
            guard let file = fopen(path, "rb") else {
                print("cannot open \(path)")
                exit(1)
            }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = fread(&buffer, 1, buffer.count, file)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            fclose(file)
            FuzzTarget.selected.run(bytes)
        }
        print("replayed \(paths.count) input(s) through \(FuzzTarget.selected.rawValue)")
    }
}
