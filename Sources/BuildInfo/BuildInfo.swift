/// What was built: the release version and the git revision it was built from (both
/// executables' `--version`, the `discovery_proxy_build_info` metric).
public enum BuildInfo {
    /// The release, as in CHANGELOG.md.
    public static let version = "0.1.0"
    /// `git describe` of the checkout at build time (`-dirty` with uncommitted changes), or
    /// "unknown" when built outside a git checkout.
    public static let revision = gitRevision
    /// `0.1.0 (git 71fe559a1b2c)`.
    public static var description: String { "\(version) (git \(revision))" }
}
