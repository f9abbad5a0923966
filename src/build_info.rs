//! What this binary is: its version, the git commit it was built from
//! (recorded by `build.rs`, "unknown" outside a git checkout) and the
//! librdkafka it links. Shown by `--version`, logged at start-up and
//! exported as the `pgcdc_build_info` metric, so a fleet's dashboards and
//! logs say which build runs where.

use std::sync::LazyLock;

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit (12 hex digits), or "unknown".
pub const COMMIT: &str = env!("PGCDC_GIT_COMMIT");

/// The version of the librdkafka linked in, as it reports itself.
pub fn librdkafka_version() -> &'static str {
    static VERSION: LazyLock<String> = LazyLock::new(|| rdkafka::util::get_rdkafka_version().1);
    &VERSION
}

/// `--version`'s text: `0.1.0 (commit abc123def456, librdkafka 2.10.0)`.
pub fn version_line() -> &'static str {
    static LINE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "{VERSION} (commit {COMMIT}, librdkafka {})",
            librdkafka_version()
        )
    });
    &LINE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_line_names_version_commit_and_librdkafka() {
        let line = version_line();
        assert!(line.starts_with(VERSION), "{line}");
        assert!(line.contains(&format!("commit {COMMIT}")), "{line}");
        assert!(
            librdkafka_version().starts_with(|c: char| c.is_ascii_digit()),
            "{}",
            librdkafka_version()
        );
        assert!(!COMMIT.is_empty());
    }
}
