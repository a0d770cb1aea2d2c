import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The user the daemon runs as after binding its sockets (`user:` / `--user`).
public struct UnprivilegedUser: Sendable, Equatable {
    public var name: String
    public var uid: UInt32
    public var gid: UInt32

    /// Looks the user up in the password database; nil if there is no such user.
    public static func lookup(_ name: String) -> UnprivilegedUser? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        let status = getpwnam_r(name, &entry, &buffer, buffer.count, &result)
        guard status == 0, result != nil else { return nil }
        return UnprivilegedUser(name: name, uid: entry.pw_uid, gid: entry.pw_gid)
    }

    /// Switches the whole process (glibc applies set*id to every thread) to this user: its
    /// supplementary groups, then its group, then its user, and checks that root cannot be
    /// regained. Sockets already bound (port 53) stay open. Call it after every bind.
    public func become() throws(StartupError) {
        if getuid() == uid, geteuid() == uid, getgid() == gid { return }
        guard geteuid() == 0 else {
            throw StartupError("--user \(name): only root can switch user (running as uid \(geteuid()))")
        }
        guard initgroups(name, gid) == 0 else { throw failure("initgroups") }
        guard setgid(gid) == 0 else { throw failure("setgid(\(gid))") }
        guard setuid(uid) == 0 else { throw failure("setuid(\(uid))") }
        // setuid as root sets real, effective and saved IDs: going back must fail now.
        if uid != 0, setuid(0) == 0 || seteuid(0) == 0 {
            throw StartupError("--user \(name): root could be regained after setuid; refusing to run")
        }
        // glibc switches every thread it knows of; check them all, the kernel's view.
        if let stray = Self.threadsNotRunning(as: uid) {
            throw StartupError("--user \(name): thread \(stray) still has another uid after setuid; refusing to run")
        }
    }

    /// A thread of this process whose real/effective/saved/fs uids are not all `uid`, if any.
    static func threadsNotRunning(as uid: UInt32) -> String? {
        guard let tasks = opendir("/proc/self/task") else { return nil }
        defer { closedir(tasks) }
        while let entry = readdir(tasks) {
            let tid = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard tid.first?.isNumber == true, let file = fopen("/proc/self/task/\(tid)/status", "r") else { continue }
            defer { fclose(file) }
            var line = [CChar](repeating: 0, count: 256)
            var name = "?"
            while fgets(&line, Int32(line.count), file) != nil {
                let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if text.hasPrefix("Name:") { name = String(text.dropFirst(5).filter { $0 != "\t" && $0 != "\n" }) }
                guard text.hasPrefix("Uid:") else { continue }
                let ids = text.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
                if ids.contains(where: { UInt32($0) != uid }) { return "\(tid) \(name) (\(text.dropLast()))" }
            }
        }
        return nil
    }

    private func failure(_ call: String) -> StartupError {
        StartupError("--user \(name): \(call) failed: \(SystemText.errnoText(errno))")
    }
}

/// Switches user once the last listener is bound (DNS, then admin, in either order). A
/// failure to switch is fatal: the daemon must not go on serving as root when told not to.
final class PrivilegeDrop: Sendable {
    private let user: UnprivilegedUser?
    private let pending: Mutex<Int>
    private let logger: Logger

    init(user: UnprivilegedUser?, pendingBinds: Int, logger: Logger) {
        self.user = user
        self.pending = Mutex(pendingBinds)
        self.logger = logger
    }

    func bound() {
        let last = pending.withLock { count -> Bool in
            count -= 1
            return count == 0
        }
        guard last, let user else { return }
        do {
            try user.become()
            logger.info("running as \(user.name)", metadata: ["proc.uid": "\(user.uid)", "proc.gid": "\(user.gid)"])
        } catch {
            // One line, as for every start-up error, then out: serving as root was not asked for.
            let line = Array("discovery-proxy: error: \(error)\n".utf8)
            _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            exit(1)
        }
    }
}
