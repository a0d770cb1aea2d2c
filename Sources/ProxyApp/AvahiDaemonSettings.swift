#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What avahi-daemon.conf says about publishing, for `--check-config`'s gateway warnings: the
/// gateway announces through the system's avahi-daemon, which refuses when publishing is
/// disabled and serves only the interfaces its allow/deny lists leave it.
struct AvahiDaemonSettings: Equatable {
    var disablePublishing = false
    var allowInterfaces: [String]?
    var denyInterfaces: [String] = []
    /// Where it was read; nil when the file could not be read (then nothing is warned about).
    var path: String?

    static let defaultPath = "/etc/avahi/avahi-daemon.conf"

    static func read(path: String = defaultPath) -> AvahiDaemonSettings {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return AvahiDaemonSettings() }
        return parse(text, path: path)
    }

    /// avahi's ini format: `[section]`, `key=value`, `#` and `;` comments.
    static func parse(_ text: String, path: String? = nil) -> AvahiDaemonSettings {
        var settings = AvahiDaemonSettings(path: path)
        var section = ""
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmed()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                section = line.filter { $0 != "[" && $0 != "]" }.trimmed().lowercased()
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmed() }
            guard parts.count == 2 else { continue }
            let list = parts[1].split(separator: ",").map { $0.trimmed() }.filter { !$0.isEmpty }
            switch (section, parts[0].lowercased()) {
            case ("publish", "disable-publishing"): settings.disablePublishing = parts[1].lowercased() == "yes"
            case ("server", "allow-interfaces"): settings.allowInterfaces = list
            case ("server", "deny-interfaces"): settings.denyInterfaces = list
            default: break
            }
        }
        return settings
    }

    func gatewayWarnings(for clientInterfaces: [String]) -> [String] {
        guard let path else { return [] }
        if disablePublishing {
            return [
                "links[].announce: avahi-daemon does not publish (disable-publishing=yes in \(path)): nothing can be "
                    + "announced; set it to no and restart avahi-daemon"
            ]
        }
        return clientInterfaces.compactMap { interface in
            let served = (allowInterfaces.map { $0.contains(interface) } ?? true) && !denyInterfaces.contains(interface)
            return served
                ? nil
                : "links[].announce: avahi-daemon does not serve \(interface) (allow-interfaces/deny-interfaces in "
                    + "\(path)): nothing can be announced there; add it to allow-interfaces and restart avahi-daemon"
        }
    }
}
