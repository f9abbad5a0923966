//! The server's version in `check`: whether the connector supports it, and
//! one line per version-dependent feature saying what it needs, whether
//! this server has it and whether this run uses it, from the one table in
//! [`crate::source::version`]. A feature the run asks for and the server
//! lacks FAILs (`run` would refuse it); the others are INFO.

use super::Report;
use crate::config::RunConfig;
use crate::source::catalog;
use crate::source::replication::PgoutputBinary;
use crate::source::version::{Feature, ServerVersion, MIN_SUPPORTED};

/// The newest major version the test matrix runs.
const NEWEST_TESTED: u32 = 18;

/// The features `check` lists, in this order.
const LISTED: [Feature; 7] = [
    Feature::LogicalMessages,
    Feature::Binary,
    Feature::Streaming,
    Feature::Origin,
    Feature::StandbyDecoding,
    Feature::FailoverSlots,
    Feature::GeneratedColumns,
];

const GENERATED_OFF: &str =
    "stored generated columns are left out, as before 18; --publish-generated-columns streams them";

/// Whether this run uses `feature`, and why (or why not).
fn usage(feature: Feature, server: &catalog::Server, config: &RunConfig) -> (bool, &'static str) {
    match feature {
        Feature::LogicalMessages => (true, "pg_logical_emit_message messages are streamed"),
        Feature::Binary => match config.pgoutput_binary {
            PgoutputBinary::On => (true, "--pgoutput-binary on"),
            // Auto asks for binary only where the server has it.
            PgoutputBinary::Auto => (
                ServerVersion::from_num(server.version_num).has(Feature::Binary),
                "--pgoutput-binary auto: binary when every published column's type has a binary \
                 decoder",
            ),
            PgoutputBinary::Off => (false, "values are read in text form"),
        },
        Feature::Streaming if config.streaming.stream_in_progress => {
            (true, "large transactions stream into the spool as they run")
        }
        Feature::Streaming => (false, "large transactions are sent whole at commit"),
        Feature::Origin if config.origin_filter.is_some() => (true, "--origin-filter"),
        Feature::Origin => (
            false,
            "changes of every origin are streamed, as Debezium does",
        ),
        Feature::StandbyDecoding if server.in_recovery => (true, "--pg-url reaches a standby"),
        Feature::StandbyDecoding => (false, "the server is a primary"),
        Feature::FailoverSlots if config.slot_failover => (true, "--slot-failover"),
        Feature::FailoverSlots => (false, "--slot-failover is off"),
        Feature::GeneratedColumns if config.publication.publish_generated_columns => {
            (true, "--publish-generated-columns")
        }
        Feature::GeneratedColumns => (false, GENERATED_OFF),
        Feature::TwoPhase | Feature::ParallelStreaming | Feature::SlotOptionList => (false, ""),
    }
}

/// Reports the server's version, then the feature lines.
pub(super) fn check_version(server: &catalog::Server, config: &RunConfig, report: &mut Report) {
    let version = ServerVersion::from_num(server.version_num);
    let major = version.0 / 10_000;
    if !version.is_supported() {
        report.fail(
            "postgres",
            format!(
                "PostgreSQL {} is older than {}, the oldest supported",
                server.version,
                MIN_SUPPORTED / 10_000
            ),
            format!(
                "upgrade the server to PostgreSQL {} or later",
                MIN_SUPPORTED / 10_000
            ),
        );
    } else if major > NEWEST_TESTED {
        report.warn(
            "server version",
            format!(
                "PostgreSQL {version} is newer than {NEWEST_TESTED}, the newest tested; the \
                 replication protocol is compatible, but nothing here has run against it"
            ),
            "run the connector against a staging copy first, and report what differs",
        );
    } else {
        report.pass(
            "server version",
            format!(
                "PostgreSQL {version} (server_version_num {}), supported ({} to {NEWEST_TESTED} are)",
                version.0,
                MIN_SUPPORTED / 10_000
            ),
        );
    }
    for feature in LISTED {
        let has = version.has(feature);
        let needs = feature.min_version() / 10_000;
        let (used, why) = usage(feature, server, config);
        let detail = format!(
            "needs PostgreSQL {needs}+; this server: {}; this run: {} ({why})",
            if has { "yes" } else { "no" },
            if used { "uses it" } else { "not used" },
        );
        match (used, has) {
            (true, true) => report.pass(feature.name(), detail),
            (true, false) => report.fail(
                feature.name(),
                detail,
                match feature {
                    Feature::StandbyDecoding => format!(
                        "upgrade the server to PostgreSQL {needs} or later, or point --pg-url at \
                         the primary"
                    ),
                    _ => format!(
                        "upgrade the server to PostgreSQL {needs} or later, or run without {why}"
                    ),
                },
            ),
            (false, _) => report.info(feature.name(), detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;

    fn server(version_num: i32, in_recovery: bool) -> catalog::Server {
        catalog::Server {
            version: format!("{}.{}", version_num / 10_000, version_num % 10_000),
            version_num,
            wal_level: "logical".into(),
            max_replication_slots: 10,
            used_slots: 0,
            max_wal_senders: 10,
            used_wal_senders: 0,
            max_slot_wal_keep_size: None,
            wal_sender_timeout_ms: 60_000,
            in_recovery,
        }
    }

    fn config(extra: &[&str]) -> RunConfig {
        let mut args = vec!["--pg-url", "postgres://u@h/d", "--topic-prefix", "app"];
        args.extend_from_slice(extra);
        RunConfig::from_args(args).expect("flags parse")
    }

    fn lines(version_num: i32, in_recovery: bool, extra: &[&str]) -> Vec<String> {
        let mut report = Report::default();
        check_version(
            &server(version_num, in_recovery),
            &config(extra),
            &mut report,
        );
        report.findings.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_feature_the_run_asks_for_fails_on_an_older_server() {
        let out = lines(
            160_004,
            false,
            &["--slot-failover", "--publish-generated-columns", "true"],
        );
        assert_eq!(
            out[0],
            "PASS server version: PostgreSQL 16.4 (server_version_num 160004), supported (14 to 18 are)"
        );
        let failover = "FAIL failover slots: needs PostgreSQL 17+; this server: no; this run: \
                        uses it (--slot-failover); fix: upgrade the server to PostgreSQL 17 or \
                        later, or run without --slot-failover";
        assert!(out.iter().any(|l| l == failover), "{out:#?}");
        assert!(
            out.iter()
                .any(|l| l.starts_with("FAIL generated columns: needs PostgreSQL 18+")),
            "{out:#?}"
        );
        let standby = "INFO decoding on a standby: needs PostgreSQL 16+; this server: yes; \
                       this run: not used (the server is a primary)";
        assert!(out.iter().any(|l| l == standby), "{out:#?}");
        assert_eq!(out.len(), 1 + LISTED.len());
    }

    #[test]
    fn what_the_server_has_and_the_run_uses_passes() {
        let mut report = Report::default();
        check_version(&server(180_001, true), &config(&[]), &mut report);
        let status = |name: &str| {
            report
                .findings
                .iter()
                .find(|f| f.check == name)
                .map(|f| f.status)
        };
        assert_eq!(status("logical decoding messages"), Some(Status::Pass));
        assert_eq!(status("decoding on a standby"), Some(Status::Pass));
        assert_eq!(
            status("streaming of large transactions"),
            Some(Status::Pass)
        );
        assert_eq!(status("failover slots"), Some(Status::Info));
        assert_eq!(status("generated columns"), Some(Status::Info));
        assert!(report.passed());
    }

    #[test]
    fn pgoutput_binary_is_reported_as_used() {
        let out = lines(140_000, false, &["--pgoutput-binary"]);
        assert!(
            out.iter()
                .any(|l| l.starts_with("PASS binary column values")
                    && l.contains("uses it (--pgoutput-binary on)")),
            "{out:#?}"
        );
        let auto = lines(140_000, false, &[]);
        assert!(
            auto.iter()
                .any(|l| l.starts_with("PASS binary column values")
                    && l.contains("--pgoutput-binary auto")),
            "{auto:#?}"
        );
        let text = lines(140_000, false, &["--pgoutput-binary", "off"]);
        assert!(
            text.iter()
                .any(|l| l.contains("binary column values") && l.contains("read in text form")),
            "{text:#?}"
        );
    }

    #[test]
    fn too_old_and_too_new() {
        let old = lines(130_016, false, &[]);
        assert!(
            old[0].starts_with(
                "FAIL postgres: PostgreSQL 13.16 is older than 14, the oldest supported"
            ),
            "{old:#?}"
        );
        let new = lines(190_000, false, &[]);
        assert!(
            new[0].starts_with("WARN server version: PostgreSQL 19.0 is newer than 18"),
            "{new:#?}"
        );
    }
}
