import CSQLite
import DNSWire
import DiscoveryProxy
import Testing

@testable import RegistrationStore

#if canImport(Glibc)
import Glibc
#endif

/// The registrar's store: what is saved is there after reopening, in one transaction per
/// change; what cannot be read is moved aside and reported, never emptied in place.
@Suite struct RegistrationStoreTests {
    static let key = SIG0Key(algorithm: 13, publicKey: Array(0..<64))
    static let host = try! DNSName("printer.default.service.arpa.")
    static let instance = try! DNSName(#"Printer\0321._ipp._tcp.default.service.arpa."#)

    static var table: RegistrationTable {
        RegistrationTable(
            claims: [
                host: .init(key: key, expiry: 1_800_000_000), instance: .init(key: key, expiry: 1_800_000_000),
            ],
            hosts: [
                host: .init(
                    name: host, key: key,
                    addresses: [
                        .aaaa([0x20, 1, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [5]), .a([192, 0, 2, 5]),
                    ],
                    ttl: 120, expiry: 1_700_007_200)
            ],
            services: [
                instance: .init(
                    instance: instance, host: host, srv: .init(priority: 0, weight: 0, port: 631),
                    txt: [Array("\u{0C}rp=ipp/print".utf8), []],
                    serviceNames: [
                        try! DNSName("_ipp._tcp.default.service.arpa."),
                        try! DNSName("_universal._sub._ipp._tcp.default.service.arpa."),
                    ],
                    ttl: 120, expiry: 1_700_007_200)
            ])
    }

    static var everything: RegistrationTable.Changes {
        var changes = RegistrationTable.Changes()
        changes.claimed = [host, instance]
        changes.hosts = Array(table.hosts.values)
        changes.services = Array(table.services.values)
        return changes
    }

    /// A fresh directory for one test's store.
    static func directory() -> String {
        var template = Array("/tmp/registration-store-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    @Test func whatIsSavedIsReadBack() throws {
        let path = Self.directory() + "/registrations.sqlite"
        do {
            let (store, table, setAside) = try RegistrationStore.open(path: path)
            #expect(table == RegistrationTable() && setAside == nil)
            try store.save(Self.everything, of: Self.table)
            #expect(store.size > 0)
        }
        let (_, reread, setAside) = try RegistrationStore.open(path: path)
        #expect(setAside == nil)
        #expect(reread == Self.table)
    }

    @Test func removalsAreSavedToo() throws {
        let path = Self.directory() + "/registrations.sqlite"
        do {
            let (store, _, _) = try RegistrationStore.open(path: path)
            try store.save(Self.everything, of: Self.table)
            var removal = RegistrationTable.Changes()
            removal.removedHosts = [Self.host]
            removal.removedServices = [Self.instance]
            let kept = RegistrationTable(claims: Self.table.claims, hosts: [:], services: [:])
            try store.save(removal, of: kept)
        }
        let (_, reread, _) = try RegistrationStore.open(path: path)
        #expect(reread.hosts.isEmpty && reread.services.isEmpty)
        #expect(reread.claims == Self.table.claims)
    }

    @Test func aCorruptStoreIsSetAsideNotEmptied() throws {
        let directory = Self.directory()
        let path = directory + "/registrations.sqlite"
        let garbage = Array(repeating: UInt8(0x5A), count: 8192)
        let file = try #require(fopen(path, "wb"))
        _ = garbage.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
        let (store, table, setAside) = try RegistrationStore.open(path: path)
        #expect(table == RegistrationTable())
        let report = try #require(setAside)
        #expect(report.contains("moved aside to \(path).corrupt-"))
        // The unreadable file is still there, under its new name, byte for byte.
        let aside = String(report.split(separator: " ").first { $0.hasPrefix(path + ".corrupt-") }!.dropLast())
        var status = stat()
        #expect(stat(aside, &status) == 0 && status.st_size == 8192)
        // And the new store works.
        try store.save(Self.everything, of: Self.table)
    }

    /// A store another process holds locked is healthy: reported, and left where it is.
    @Test func aLockedStoreIsReportedNotSetAside() throws {
        let directory = Self.directory()
        let path = directory + "/registrations.sqlite"
        do {
            let (store, _, _) = try RegistrationStore.open(path: path)
            try store.save(Self.everything, of: Self.table)
        }
        var other: OpaquePointer?
        #expect(sqlite3_open(path, &other) == SQLITE_OK)
        #expect(sqlite3_exec(other, "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;", nil, nil, nil) == SQLITE_OK)
        #expect {
            _ = try RegistrationStore.open(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("nothing was changed")
        }
        sqlite3_exec(other, "COMMIT", nil, nil, nil)
        sqlite3_close(other)  // an exclusive locking mode holds the lock until then
        #expect(access(path, F_OK) == 0)
        let (_, reread, setAside) = try RegistrationStore.open(path: path)
        #expect(setAside == nil && reread == Self.table)
    }

    @Test func aStoreThatCannotBeOpenedNamesItsPath() {
        let path = "/nonexistent-directory/registrations.sqlite"
        #expect {
            _ = try RegistrationStore.open(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("writable")
        }
    }

    @Test func bodiesRoundTrip() throws {
        let service = try #require(Self.table.services[Self.instance])
        var body = Body(Body.service(service))
        #expect(try body.service(Self.instance, expiry: service.expiry) == service)
        var truncated = Body(Array(Body.service(service).dropLast(3)))
        #expect(throws: StoreError.self) { try truncated.service(Self.instance, expiry: 0) }
    }
}
