import Logging
import Synchronization
import Testing

@testable import ProxyApp

@Suite("log-level: one switch for every logger, changed by a reload")
struct LogLevelSwitchTests {
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    struct Recorder: LogHandler {
        let lines: Lines
        var logLevel: Logger.Level = .critical  // the switch overrides it
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.lines.withLock { $0.append("\(event.level) \(event.message)") } }
    }

    @Test("a logger made before the change follows it")
    func loggersFollowTheSwitch() {
        let lines = Lines()
        let level = LogLevelSwitch(.info)
        let logger = Logger(label: "test") { _ in SwitchedLogHandler(Recorder(lines: lines), level: level) }
        logger.debug("hidden")
        logger.info("shown")
        level.set(.debug)
        logger.debug("now shown")
        level.set(.warning)
        logger.info("hidden again")
        #expect(lines.lines.withLock { $0 } == ["info shown", "debug now shown"])
        #expect(logger.logLevel == .warning)
    }
}
