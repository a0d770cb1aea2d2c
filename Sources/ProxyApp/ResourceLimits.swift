import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Raises the soft limit on open files towards what the TCP limits need: every admitted
/// connection is a descriptor, and so is every connection accepted only to be closed (RFC 7766
/// §6.2.2). The common soft default of 1024 would make accept(2) fail with EMFILE before
/// `tcp.max-connections` (1024) is reached.
enum ResourceLimits {
    /// Descriptors beyond the TCP connections: listeners, avahi/D-Bus, admin, logs.
    static let reserve: rlim_t = 256

    static func raiseOpenFiles(forConnections connections: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(connections) + reserve
        guard limit.rlim_cur < wanted else { return }
        let before = limit.rlim_cur
        limit.rlim_cur = min(wanted, limit.rlim_max)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 { limit.rlim_cur = before }
        if limit.rlim_cur < wanted {
            logger.warning(
                "open-file limit is below what tcp.max-connections needs; raise LimitNOFILE / ulimit -n",
                metadata: ["limit.nofile": "\(limit.rlim_cur)", "limit.wanted": "\(wanted)"])
        } else {
            logger.debug("open-file limit raised", metadata: ["limit.nofile": "\(before) -> \(limit.rlim_cur)"])
        }
    }
}
