/// Errors thrown by `DNSServer.run()`. `description` is one line meant for the operator, for
/// example "cannot listen on 0.0.0.0:53/udp: Address already in use".
public struct DNSServerError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// A socket could not be created or bound.
        case cannotListen
        /// The listen host is not a numeric IP address.
        case invalidListenAddress
        /// `run()` was called twice.
        case alreadyRunning
    }

    public var code: Code
    /// "0.0.0.0:53/udp", or the address as configured.
    public var address: String
    /// The system's text for the errno, or another cause.
    public var reason: String

    public init(code: Code, address: String, reason: String) {
        self.code = code
        self.address = address
        self.reason = reason
    }

    public var description: String {
        switch self.code {
        case .cannotListen, .invalidListenAddress:
            return "cannot listen on \(self.address): \(self.reason)"
        case .alreadyRunning:
            return "DNS server already running (\(self.address))"
        }
    }
}
