import DNSWire
import Foundation
import Logging
import Synchronization
import Testing

@testable import MDNS

/// Collects a query's events from the backend thread.
final class EventRecorder: Sendable {
    private let events = Mutex<[MDNSEvent]>([])

    var handler: @Sendable (MDNSEvent) -> Void {
        { event in self.events.withLock { $0.append(event) } }
    }

    var all: [MDNSEvent] { self.events.withLock { $0 } }

    var added: [MDNSRecord] {
        self.all.compactMap { if case .added(let record) = $0 { record } else { nil } }
    }

    /// Polls until `predicate` holds or `timeout` passes; returns the last verdict.
    func wait(_ timeout: Duration = .seconds(10), until predicate: ([MDNSEvent]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if predicate(self.all) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return predicate(self.all)
    }
}

private func testLogger(_ level: Logger.Level = .info) -> Logger {
    var logger = Logger(label: "mdns-test")
    logger.logLevel = level
    return logger
}

/// DNS wire name (uncompressed, as avahi hands out RDATA) to labels.
private func wireName(_ bytes: ArraySlice<UInt8>) -> [[UInt8]]? {
    var labels: [[UInt8]] = []
    var index = bytes.startIndex
    while index < bytes.endIndex {
        let length = Int(bytes[index])
        if length == 0 { return labels }
        guard length < 64, index + length < bytes.endIndex else { return nil }
        labels.append(Array(bytes[(index + 1)...(index + length)]))
        index += length + 1
    }
    return nil
}

private func wire(_ labels: [String]) -> [UInt8] {
    labels.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
}

private func txtStrings(_ rdata: [UInt8]) -> [String] {
    var strings: [String] = []
    var index = 0
    while index < rdata.count {
        let length = Int(rdata[index])
        guard index + length < rdata.count else { break }
        strings.append(String(decoding: rdata[(index + 1)...(index + length)], as: UTF8.self))
        index += length + 1
    }
    return strings
}

@Suite("AvahiBackend without a daemon")
struct AvahiBackendOfflineTests {
    @Test func unknownInterfaceThrows() throws {
        let backend = try AvahiBackend(logger: testLogger(.error))
        defer { backend.shutdown() }
        let question = MDNSQuestion(interface: "mdv-nonexistent0", name: try DNSName("_ipp._tcp.local"), type: .ptr)
        #expect(throws: MDNSError.unknownInterface("mdv-nonexistent0")) {
            _ = try backend.startQuery(question) { _ in }
        }
    }

    @Test func unrepresentableNameThrows() throws {
        let backend = try AvahiBackend(logger: testLogger(.error))
        defer { backend.shutdown() }
        let name = try DNSName(labels: [[0x61, 0x00], Array("local".utf8)])
        #expect(throws: MDNSError.self) {
            _ = try backend.startQuery(MDNSQuestion(interface: "lo", name: name, type: .a)) { _ in }
        }
    }

    @Test func shutdownIsIdempotentAndRefusesQueries() throws {
        let backend = try AvahiBackend(logger: testLogger(.error))
        backend.shutdown()
        backend.shutdown()
        #expect(backend.state == .failed)
        #expect(throws: MDNSError.self) {
            _ = try backend.startQuery(MDNSQuestion(interface: "lo", name: try DNSName("x.local"), type: .a)) { _ in }
        }
    }
}

/// Needs an avahi-daemon reachable through DBUS_SYSTEM_BUS_ADDRESS that sees, on interface
/// `MDNS_TEST_INTERFACE`, the service published by Tests/MDNSTests/lab.sh: instance
/// `MDNS_TEST_INSTANCE` (default "Dot.ted Printer ü") of _ipp._tcp on host `MDNS_TEST_HOST`
/// (default "mdv-l") at `MDNS_TEST_HOST_IPV4` (default 192.0.2.10), port 631,
/// TXT "rp=printers/lab" and "note=Lab Ü". Run:
///   ip netns exec mdv-r env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/tmp/mdv/r-bus \
///     MDNS_TEST_INTERFACE=v-r swift test --filter MDNSTests
@Suite(
    "AvahiBackend against avahi-daemon",
    .serialized,
    .enabled(
        if: ProcessInfo.processInfo.environment["MDNS_TEST_INTERFACE"] != nil,
        "set MDNS_TEST_INTERFACE (and DBUS_SYSTEM_BUS_ADDRESS) to run against a real avahi-daemon; see Tests/MDNSTests/lab.sh"
    )
)
struct AvahiBackendDaemonTests {
    let environment = ProcessInfo.processInfo.environment
    var interface: String { self.environment["MDNS_TEST_INTERFACE"] ?? "" }
    var instance: String { self.environment["MDNS_TEST_INSTANCE"] ?? "Dot.ted Printer ü" }
    var host: String { self.environment["MDNS_TEST_HOST"] ?? "mdv-l" }
    var hostIPv4: [UInt8] {
        (self.environment["MDNS_TEST_HOST_IPV4"] ?? "192.0.2.10").split(separator: ".").compactMap { UInt8($0) }
    }

    func instanceName() throws -> DNSName {
        try DNSName(labels: [Array(self.instance.utf8)] + DNSName("_ipp._tcp.local").labels)
    }

    func running(_ backend: AvahiBackend) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while backend.state != .running && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        return backend.state == .running
    }

    @Test func browsesThePublishedInstance() async throws {
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        #expect(await self.running(backend))
        let recorder = EventRecorder()
        let question = MDNSQuestion(interface: self.interface, name: try DNSName("_ipp._tcp.local"), type: .ptr)
        let handle = try backend.startQuery(question, handler: recorder.handler)
        defer { handle.cancel() }
        let expected = try self.instanceName().labels
        #expect(await recorder.wait { events in events.contains(.allForNow) })
        #expect(await recorder.wait { _ in recorder.added.contains { wireName($0.rdata[...]) == expected } })
        // avahi delivers the PTR once per IP protocol it was seen on: one `.added` each, all
        // the same record (holders count them; see `MDNSEvent`).
        try await Task.sleep(for: .seconds(2))
        let matches = recorder.added.filter { wireName($0.rdata[...]) == expected }
        #expect((1...2).contains(matches.count))
        #expect(Set(matches).count == 1)
        let record = try #require(matches.first)
        #expect(record.name == (try DNSName("_ipp._tcp.local")))
        #expect(record.type == .ptr)
        #expect(record.rrClass == .in)
        #expect(backend.liveQueryCount == 1)
    }

    @Test func resolvesSRVAndTXTByteExact() async throws {
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        let name = try self.instanceName()

        let srv = EventRecorder()
        let srvHandle = try backend.startQuery(
            MDNSQuestion(interface: self.interface, name: name, type: .srv), handler: srv.handler)
        defer { srvHandle.cancel() }
        let expectedSRV: [UInt8] = [0, 0, 0, 0, 0x02, 0x77] + wire([self.host, "local"])
        #expect(await srv.wait { _ in srv.added.contains { $0.rdata == expectedSRV } })
        let srvRecord = try #require(srv.added.first)
        #expect(srvRecord.name == name)
        #expect(srvRecord.name.labels[0] == Array(self.instance.utf8))  // byte-exact instance label
        #expect(srvRecord.type == .srv)
        #expect(srvRecord.rrClass == .in)  // cache-flush bit masked

        let txt = EventRecorder()
        let txtHandle = try backend.startQuery(
            MDNSQuestion(interface: self.interface, name: name, type: .txt), handler: txt.handler)
        defer { txtHandle.cancel() }
        #expect(await txt.wait { _ in !txt.added.isEmpty })
        let txtRecord = try #require(txt.added.first)
        #expect(Set(txtStrings(txtRecord.rdata)) == ["rp=printers/lab", "note=Lab Ü"])
        // avahi sends the strings in the order of the .service file.
        let expectedTXT = ["rp=printers/lab", "note=Lab Ü"].flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        #expect(txtRecord.rdata == expectedTXT)
        // One record, delivered once per IP protocol it was seen on (see `MDNSEvent`).
        #expect((1...2).contains(txt.added.count))
        #expect(Set(txt.added).count == 1)
    }

    @Test func hostAddressRecord() async throws {
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        let recorder = EventRecorder()
        let question = MDNSQuestion(interface: self.interface, name: try DNSName("\(self.host).local"), type: .a)
        let handle = try backend.startQuery(question, handler: recorder.handler)
        defer { handle.cancel() }
        #expect(await recorder.wait { _ in recorder.added.contains { $0.rdata == self.hostIPv4 } })
        #expect(recorder.added.allSatisfy { $0.type == .a && $0.rdata.count == 4 })
    }

    @Test func cancelInsideHandlerStopsEvents() async throws {
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        let recorder = EventRecorder()
        let box = Mutex<(any MDNSQueryHandle)?>(nil)
        let question = MDNSQuestion(interface: self.interface, name: try DNSName("_ipp._tcp.local"), type: .ptr)
        let handle = try backend.startQuery(question) { event in
            recorder.handler(event)
            // Runs on the poll thread with the poll lock held: must not deadlock.
            box.withLock { $0 }?.cancel()
        }
        box.withLock { $0 = handle }
        #expect(await recorder.wait { !$0.isEmpty })
        try await Task.sleep(for: .seconds(1))
        #expect(recorder.all.count == 1)
        #expect(backend.liveQueryCount == 0)
        handle.cancel()  // idempotent
    }

    /// Publishes a service on this daemon with avahi-publish and withdraws it again.
    @Test func withdrawnServiceIsRemoved() async throws {
        let publisher = URL(fileURLWithPath: "/usr/bin/avahi-publish")
        try #require(FileManager.default.isExecutableFile(atPath: publisher.path), "avahi-publish not installed")
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        let recorder = EventRecorder()
        let instance = "Removal Test \(getpid())"
        let expected = [Array(instance.utf8)] + (try DNSName("_ipp._tcp.local")).labels
        let question = MDNSQuestion(interface: self.interface, name: try DNSName("_ipp._tcp.local"), type: .ptr)
        let handle = try backend.startQuery(question, handler: recorder.handler)
        defer { handle.cancel() }

        let process = Process()
        process.executableURL = publisher
        process.arguments = ["-s", instance, "_ipp._tcp", "632"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        #expect(await recorder.wait { _ in recorder.added.contains { wireName($0.rdata[...]) == expected } })
        // SIGKILL: Foundation starts children with SIGTERM blocked. avahi-daemon withdraws the
        // service when its D-Bus client goes away.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(
            await recorder.wait { events in
                events.contains {
                    if case .removed(let record) = $0 { wireName(record.rdata[...]) == expected } else { false }
                }
            }
        )
    }

    @Test func thousandConcurrentQueriesUseAPool() async throws {
        let backend = try AvahiBackend(logger: testLogger(.warning))
        defer { backend.shutdown() }
        #expect(await self.running(backend))
        let recorder = EventRecorder()
        var handles: [any MDNSQueryHandle] = []
        for index in 0..<1000 {
            let question = MDNSQuestion(
                interface: self.interface, name: try DNSName("q\(index).mdv-none.local"), type: .a)
            handles.append(try backend.startQuery(question, handler: recorder.handler))
        }
        #expect(backend.liveQueryCount == 1000)
        #expect(backend.clientCount == 2)  // 900 + 100
        // Every browser exists on the daemon: each reports all-for-now.
        #expect(await recorder.wait(.seconds(60)) { $0.count(where: { $0 == .allForNow }) >= 1000 })
        #expect(!recorder.all.contains { if case .failed = $0 { true } else { false } })
        for handle in handles { handle.cancel() }
        #expect(backend.liveQueryCount == 0)
        let deadline = ContinuousClock.now + .seconds(5)
        while backend.clientCount > 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(backend.clientCount == 1)
    }

    @Test func smallPoolAndBudget() async throws {
        let backend = try AvahiBackend(logger: testLogger(.warning), clientObjectLimit: 10, totalObjectBudget: 25)
        defer { backend.shutdown() }
        #expect(await self.running(backend))
        var handles: [any MDNSQueryHandle] = []
        for index in 0..<25 {
            let question = MDNSQuestion(
                interface: self.interface, name: try DNSName("b\(index).mdv-none.local"), type: .a)
            handles.append(try backend.startQuery(question) { _ in })
        }
        #expect(backend.clientCount == 3)
        let extra = MDNSQuestion(interface: self.interface, name: try DNSName("extra.mdv-none.local"), type: .a)
        #expect(throws: MDNSError.budgetExhausted(limit: 25)) {
            _ = try backend.startQuery(extra) { _ in }
        }
        handles.removeLast().cancel()
        let handle = try backend.startQuery(extra) { _ in }
        handle.cancel()
        for handle in handles { handle.cancel() }
    }

    /// Restarts avahi-daemon (or dbus-daemon) with `MDNS_TEST_RESTART_COMMAND`, e.g.
    /// `sh Tests/MDNSTests/lab.sh restart-avahi`, and expects `.failed`, then `.restarted`,
    /// then the records again.
    @Test(
        .enabled(
            if: ProcessInfo.processInfo.environment["MDNS_TEST_RESTART_COMMAND"] != nil,
            "set MDNS_TEST_RESTART_COMMAND to a command that restarts the daemon"
        ),
        .timeLimit(.minutes(1))
    )
    func survivesDaemonRestart() async throws {
        let backend = try AvahiBackend(logger: testLogger())
        defer { backend.shutdown() }
        #expect(await self.running(backend))
        let recorder = EventRecorder()
        let question = MDNSQuestion(interface: self.interface, name: try DNSName("_ipp._tcp.local"), type: .ptr)
        let handle = try backend.startQuery(question, handler: recorder.handler)
        defer { handle.cancel() }
        let expected = try self.instanceName().labels
        #expect(await recorder.wait { _ in recorder.added.contains { wireName($0.rdata[...]) == expected } })
        // A second backend with a pool of 3 connections (5 + 5 + 2 queries).
        let pool = try AvahiBackend(logger: testLogger(.warning), clientObjectLimit: 5)
        defer { pool.shutdown() }
        #expect(await self.running(pool))
        let pooled = (0..<12).map { _ in EventRecorder() }
        var pooledHandles: [any MDNSQueryHandle] = []
        for (index, pooledRecorder) in pooled.enumerated() {
            let name = try DNSName("r\(index).mdv-none.local")
            let question = MDNSQuestion(interface: self.interface, name: name, type: .a)
            pooledHandles.append(try pool.startQuery(question, handler: pooledRecorder.handler))
        }
        defer { for handle in pooledHandles { handle.cancel() } }
        #expect(pool.clientCount == 3)

        // system(3), not Process: Foundation did not notice the shell's exit once it had
        // started daemons in the background.
        let status = system(self.environment["MDNS_TEST_RESTART_COMMAND"] ?? "false")
        #expect(status == 0)

        #expect(await recorder.wait(.seconds(30)) { $0.contains { if case .failed = $0 { true } else { false } } })
        #expect(await recorder.wait(.seconds(30)) { $0.contains(.restarted) })
        #expect(await self.running(backend))
        let events = recorder.all
        let failedAt = try #require(events.firstIndex { if case .failed = $0 { true } else { false } })
        let restartedAt = try #require(events.lastIndex(of: .restarted))
        #expect(failedAt < restartedAt)
        #expect(
            await recorder.wait(.seconds(20)) { events in
                events[(restartedAt + 1)...].contains {
                    if case .added(let record) = $0 { wireName(record.rdata[...]) == expected } else { false }
                }
            }
        )
        for pooledRecorder in pooled {
            #expect(
                await pooledRecorder.wait { events in
                    guard let failed = events.firstIndex(where: { if case .failed = $0 { true } else { false } }),
                        let restarted = events.firstIndex(of: .restarted)
                    else { return false }
                    return failed < restarted
                }
            )
        }
        #expect(pool.clientCount == 3)
        #expect(pool.state == .running)
        let summary = recorder.all.map { event -> String in
            switch event {
            case .added(let record): "added(\(record.name) \(record.type))"
            case .removed(let record): "removed(\(record.name))"
            default: "\(event)"
            }
        }
        print("restart events: \(summary)")
    }
}
