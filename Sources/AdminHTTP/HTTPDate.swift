#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `Date` header's value (RFC 9110 §5.6.7, IMF-fixdate), made per response: admin
/// requests are rare, and Hummingbird's once-a-second cache would wake a task every second
/// for nobody.
enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `seconds` since the Unix epoch, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
    static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "Thu, 01 Jan 1970 00:00:00 GMT" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return days[Int(parts.tm_wday)] + ", " + two(parts.tm_mday) + " " + months[Int(parts.tm_mon)] + " "
            + "\(1900 + Int(parts.tm_year)) " + two(parts.tm_hour) + ":" + two(parts.tm_min) + ":"
            + two(parts.tm_sec) + " GMT"
    }

    static func now() -> String { format(Int(time(nil))) }
}
