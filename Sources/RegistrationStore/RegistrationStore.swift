import CSQLite
import DNSWire
import DiscoveryProxy

#if canImport(Glibc)
import Glibc
#endif

/// The SRP registrar's registrations on disk, in SQLite (Debian's libsqlite3): a real embedded
/// store rather than a journal of our own, for its atomic commits and its recovery after a
/// crash. Every change is one transaction, committed with `synchronous=FULL` in WAL mode, so
/// `save` returns only once the change is on disk: the registrar answers NOERROR after it
/// (RFC 9665 asks registrations to survive; issue 44: nothing acknowledged is lost). Expiry
/// times are on the wall clock, so leases keep counting while the daemon is down.
///
/// A store that SQLite finds corrupt, or whose rows cannot be read, is renamed aside
/// (`<path>.corrupt-<unix time>`) and reported, never emptied in place; a store that cannot be
/// opened at all (permissions, a directory missing) is an error naming the path.
public final class RegistrationStore {
    private var database: OpaquePointer?
    public let path: String

    /// Opens (or creates) the store at `path` and reads it. `setAside` says what was moved
    /// away because it could not be read, for the log.
    public static func open(path: String) throws(StoreError) -> (
        store: RegistrationStore, table: RegistrationTable, setAside: String?
    ) {
        let store = try RegistrationStore(path: path)
        do {
            return (store, try store.load(), nil)
        } catch let problem {
            store.close()
            // Only a store that is itself damaged is moved aside: a lock, a full disk or an I/O
            // error says nothing about its contents, and the next start may read them.
            guard problem.isCorruption else {
                throw StoreError(
                    "cannot read the registration store \(problem) (nothing was changed; fix the cause and start again)"
                )
            }
            let aside = "\(path).corrupt-\(time(nil))"
            for suffix in ["", "-wal", "-shm"] where access(path + suffix, F_OK) == 0 {
                guard rename(path + suffix, aside + suffix) == 0 else {
                    throw StoreError("\(path) is unreadable (\(problem)) and could not be moved aside to \(aside)")
                }
            }
            let fresh = try RegistrationStore(path: path)
            let empty = try fresh.load()
            return (fresh, empty, "\(path): \(problem); moved aside to \(aside), starting empty")
        }
    }

    private init(path: String) throws(StoreError) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &database, flags, nil) == SQLITE_OK else {
            let reason = database.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            close()
            throw StoreError(
                "cannot open the registration store \(path): \(reason) (check that its directory exists and is writable by the daemon's user)"
            )
        }
        sqlite3_busy_timeout(database, 1000)
    }

    deinit { close() }

    private func close() {
        if let database { sqlite3_close_v2(database) }
        database = nil
    }

    /// Writes each name `changes` names as `table` holds it now (or deletes it where the table
    /// no longer holds it), in one transaction: changes of several updates merged in any order
    /// write the table's final state.
    public func save(_ changes: RegistrationTable.Changes, of table: RegistrationTable) throws(StoreError) {
        guard !changes.isEmpty else { return }
        try execute("BEGIN IMMEDIATE")
        do {
            for name in Set(changes.claimed + changes.removedClaims) {
                if let claim = table.claims[name] {
                    try put(.claim, name, Body.claim(claim), expiry: claim.expiry)
                } else {
                    try delete(.claim, name)
                }
            }
            for name in Set(changes.hosts.map(\.name) + changes.removedHosts) {
                if let host = table.hosts[name] {
                    try put(.host, name, Body.host(host), expiry: host.expiry)
                } else {
                    try delete(.host, name)
                }
            }
            for name in Set(changes.services.map(\.instance) + changes.removedServices) {
                if let service = table.services[name] {
                    try put(.service, name, Body.service(service), expiry: service.expiry)
                } else {
                    try delete(.service, name)
                }
            }
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The store's size in octets (pages in use), for the metrics.
    public var size: Int {
        (try? integer("PRAGMA page_count")).map { count in count * ((try? integer("PRAGMA page_size")) ?? 0) } ?? 0
    }

    // MARK: - Reading

    private func load() throws(StoreError) -> RegistrationTable {
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
        let check = try text("PRAGMA quick_check")
        guard check == "ok" else { throw .corrupt("SQLite's quick_check says \(check)") }
        try execute(
            "CREATE TABLE IF NOT EXISTS registration (kind INTEGER NOT NULL, name BLOB NOT NULL, body BLOB NOT NULL, expiry INTEGER NOT NULL, PRIMARY KEY (kind, name)) WITHOUT ROWID"
        )
        var claims: [DNSName: RegistrationTable.Claim] = [:]
        var hosts: [DNSName: RegistrationTable.Host] = [:]
        var services: [DNSName: RegistrationTable.Service] = [:]
        try query("SELECT kind, name, body, expiry FROM registration") { row throws(StoreError) in
            let name = try Body.name(row.blob(1))
            var body = Body(row.blob(2))
            let expiry = row.int64(3)
            switch Kind(rawValue: row.int64(0)) {
            case .claim: claims[name] = try body.claim(expiry: expiry)
            case .host: hosts[name] = try body.host(name, expiry: expiry)
            case .service: services[name] = try body.service(name, expiry: expiry)
            case nil: throw .corrupt("a row of unknown kind \(row.int64(0))")
            }
        }
        return RegistrationTable(claims: claims, hosts: hosts, services: services)
    }

    // MARK: - SQLite

    enum Kind: Int64 {
        case claim = 0
        case host = 1
        case service = 2
    }

    private func put(_ kind: Kind, _ name: DNSName, _ body: [UInt8], expiry: Int64) throws(StoreError) {
        try statement(
            "INSERT OR REPLACE INTO registration (kind, name, body, expiry) VALUES (?, ?, ?, ?)",
            bind: [.integer(kind.rawValue), .blob(name.wireBytes), .blob(body), .integer(expiry)])
    }

    private func delete(_ kind: Kind, _ name: DNSName) throws(StoreError) {
        try statement(
            "DELETE FROM registration WHERE kind = ? AND name = ?",
            bind: [.integer(kind.rawValue), .blob(name.wireBytes)])
    }

    private enum Value {
        case integer(Int64)
        case blob([UInt8])
    }

    struct Row {
        let statement: OpaquePointer

        func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

        func blob(_ column: Int32) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: bytes, count: count))
        }

        func text(_ column: Int32) -> String {
            sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
        }
    }

    private func execute(_ sql: String) throws(StoreError) {
        try query(sql) { _ in }
    }

    private func statement(_ sql: String, bind values: [Value]) throws(StoreError) {
        try query(sql, bind: values) { _ in }
    }

    private func text(_ sql: String) throws(StoreError) -> String {
        var result = ""
        try query(sql) { row in result = row.text(0) }
        return result
    }

    private func integer(_ sql: String) throws(StoreError) -> Int {
        var result = 0
        try query(sql) { row in result = Int(row.int64(0)) }
        return result
    }

    private func query(
        _ sql: String, bind values: [Value] = [], row: (Row) throws(StoreError) -> Void
    ) throws(StoreError) {
        var prepared: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &prepared, nil) == SQLITE_OK, let prepared else {
            throw failure
        }
        defer { sqlite3_finalize(prepared) }
        // SQLITE_TRANSIENT: SQLite copies the bytes before the call returns.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .integer(let number): sqlite3_bind_int64(prepared, position, number)
            case .blob(let bytes):
                _ = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(prepared, position, $0.baseAddress, Int32($0.count), transient)
                }
            }
        }
        while true {
            switch sqlite3_step(prepared) {
            case SQLITE_ROW: try row(Row(statement: prepared))
            case SQLITE_DONE: return
            default: throw failure
            }
        }
    }

    /// SQLite's last error, as a corruption when SQLite says the file is damaged or no database.
    private var failure: StoreError {
        let message = database.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
        let code = database.map { sqlite3_errcode($0) & 0xFF } ?? SQLITE_MISUSE
        return StoreError("\(path): \(message)", isCorruption: code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
    }
}

/// A store problem, with the path and what to do.
public struct StoreError: Error, CustomStringConvertible {
    public let description: String
    /// The file itself is damaged (SQLite says so, or a row does not read): set it aside.
    /// Anything else (a lock, I/O, permissions) is reported and the file left alone.
    public let isCorruption: Bool

    init(_ description: String, isCorruption: Bool = false) {
        self.description = description
        self.isCorruption = isCorruption
    }

    static func corrupt(_ description: String) -> StoreError { StoreError(description, isCorruption: true) }
}

/// The rows' bodies: fields in a fixed order, each list as a 2-octet count of 2-octet-length
/// items; names in wire form.
struct Body {
    private var bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func claim(_ claim: RegistrationTable.Claim) -> [UInt8] { items([claim.key.rdata]) }

    static func host(_ host: RegistrationTable.Host) -> [UInt8] {
        items([host.key.rdata, number(host.ttl)]) + items(host.addresses.map(addressBytes)) + items([host.source])
    }

    static func service(_ service: RegistrationTable.Service) -> [UInt8] {
        items([
            service.host.wireBytes,
            [service.srv.priority, service.srv.weight, service.srv.port].flatMap {
                [UInt8($0 >> 8), UInt8($0 & 0xFF)]
            }, number(service.ttl),
        ])
            + items(service.txt) + items(service.serviceNames.map(\.wireBytes))
    }

    static func name(_ wire: [UInt8]) throws(StoreError) -> DNSName {
        var labels: [[UInt8]] = []
        var index = 0
        while index < wire.count, wire[index] != 0 {
            let end = index + 1 + Int(wire[index])
            guard end <= wire.count else { throw .corrupt("a name runs past its row") }
            labels.append(Array(wire[(index + 1)..<end]))
            index = end
        }
        guard index == wire.count - 1 else { throw .corrupt("a name without its root") }
        do {
            return try DNSName(labels: labels)
        } catch {
            throw .corrupt("a bad name: \(error)")
        }
    }

    mutating func claim(expiry: Int64) throws(StoreError) -> RegistrationTable.Claim {
        let fields = try list()
        guard fields.count == 1, let key = SIG0Key(rdata: fields[0]) else { throw .corrupt("a bad claim row") }
        return RegistrationTable.Claim(key: key, expiry: expiry)
    }

    mutating func host(_ name: DNSName, expiry: Int64) throws(StoreError) -> RegistrationTable.Host {
        let fields = try list()
        let addresses = try list()
        let source = try list()
        guard source.count == 1, [0, 4, 16].contains(source[0].count), fields.count == 2,
            let key = SIG0Key(rdata: fields[0]), fields[1].count == 4
        else {
            throw .corrupt("a bad host row for \(name)")
        }
        return RegistrationTable.Host(
            name: name, key: key,
            addresses: try addresses.map { (bytes) throws(StoreError) -> RData in
                switch bytes.count {
                case 4: return .a(bytes)
                case 16: return .aaaa(bytes)
                default: throw .corrupt("a bad address for \(name)")
                }
            }, ttl: Body.uint32(fields[1]), expiry: expiry, source: source[0])
    }

    mutating func service(_ instance: DNSName, expiry: Int64) throws(StoreError) -> RegistrationTable.Service {
        let fields = try list()
        let txt = try list()
        let names = try list()
        guard fields.count == 3, fields[1].count == 6, fields[2].count == 4 else {
            throw .corrupt("a bad service row for \(instance)")
        }
        let field = { (at: Int) in UInt16(fields[1][at]) << 8 | UInt16(fields[1][at + 1]) }
        let srv = SRPUpdate.SRV(priority: field(0), weight: field(2), port: field(4))
        var serviceNames: [DNSName] = []
        for name in names { serviceNames.append(try Body.name(name)) }
        return RegistrationTable.Service(
            instance: instance, host: try Body.name(fields[0]), srv: srv, txt: txt, serviceNames: serviceNames,
            ttl: Body.uint32(fields[2]), expiry: expiry)
    }

    private static func items(_ items: [[UInt8]]) -> [UInt8] {
        var out = [UInt8(items.count >> 8), UInt8(items.count & 0xFF)]
        for item in items { out += [UInt8(item.count >> 8), UInt8(item.count & 0xFF)] + item }
        return out
    }

    private static func number(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }

    private static func uint32(_ bytes: [UInt8]) -> UInt32 { bytes.reduce(0) { $0 << 8 | UInt32($1) } }

    private static func addressBytes(_ rdata: RData) -> [UInt8] {
        switch rdata {
        case .a(let bytes), .aaaa(let bytes): return bytes
        default: return []
        }
    }

    private mutating func uint16() throws(StoreError) -> Int {
        guard offset + 2 <= bytes.count else { throw .corrupt("a row ends early") }
        defer { offset += 2 }
        return Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
    }

    private mutating func list() throws(StoreError) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for _ in 0..<(try uint16()) {
            let length = try uint16()
            guard offset + length <= bytes.count else { throw .corrupt("a row ends early") }
            out.append(Array(bytes[offset..<(offset + length)]))
            offset += length
        }
        return out
    }
}

extension RegistrationStore: RegistrationPersistence {}
