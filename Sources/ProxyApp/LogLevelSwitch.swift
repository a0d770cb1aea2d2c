import Logging
import Synchronization

/// `log-level` in force, shared by every logger of the process so that a reload changes it
/// at once (a `Logger` copies its handler, and with it a plain handler's level).
public final class LogLevelSwitch: Sendable {
    private let index: Atomic<Int>

    public init(_ level: Logger.Level) {
        index = Atomic(Logger.Level.allCases.firstIndex(of: level) ?? 2)
    }

    public var level: Logger.Level { Logger.Level.allCases[index.load(ordering: .relaxed)] }

    public func set(_ level: Logger.Level) {
        index.store(Logger.Level.allCases.firstIndex(of: level) ?? 2, ordering: .relaxed)
    }
}

/// A handler whose level is the switch's; what passes is written by `base`.
public struct SwitchedLogHandler<Base: LogHandler>: LogHandler {
    private var base: Base
    private let level: LogLevelSwitch

    public init(_ base: Base, level: LogLevelSwitch) {
        var base = base
        base.logLevel = .trace  // the switch decides
        self.base = base
        self.level = level
    }

    /// Setting it sets the switch: the level is the process's, not one logger's.
    public var logLevel: Logger.Level {
        get { level.level }
        set { level.set(newValue) }
    }

    public var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        base.log(event: event)
    }
}
