import Logging

/// The last problem logged per interface, so that a publisher retrying (or sending) again and
/// failing alike logs at debug, not an error a second: the first of each kind is an error.
struct InterfaceProblems {
    private var last: [String: String] = [:]

    /// Logs `problem` on `interface` ("" for none): at error when it is new there, at debug
    /// while it repeats.
    mutating func log(_ problem: String, on interface: String, to logger: Logger) {
        let metadata: Logger.Metadata = interface.isEmpty ? [:] : ["mdns.interface": "\(interface)"]
        if last[interface] == problem {
            logger.debug("\(problem)", metadata: metadata)
        } else {
            last[interface] = problem
            logger.error("\(problem)", metadata: metadata)
        }
    }

    /// `interface` works again: its next problem is new.
    mutating func clear(_ interface: String) { last[interface] = nil }
}
