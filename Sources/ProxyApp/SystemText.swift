#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The few text helpers full Foundation would give. The proxy links FoundationEssentials only,
// which leaves ICU (37 MB of a static binary) out: docs/BENCHMARKS.md, "Footprint".

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and line breaks.
    func trimmed() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}

enum SystemText {
    /// The C library's text for an errno value: "Address already in use".
    static func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// Why a file could not be read or written, as `localizedDescription` said it with full
    /// Foundation: the errno's text ("No such file or directory") when there is one.
    static func reason(_ error: any Error) -> String {
        if let posix = error as? POSIXError { return errnoText(posix.code.rawValue) }
        if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
            return errnoText(posix.code.rawValue)
        }
        return "\(error)"
    }

    /// Upper-case hexadecimal, two digits: `0A`.
    static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return byte < 16 ? "0" + digits : digits
    }
}
