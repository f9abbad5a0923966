//! `pgcdc-kafka check`: a preflight that connects to PostgreSQL, Kafka and
//! (with `--format avro`) the schema registry with the flags `run` would
//! get, and reports what would stop the connector or surprise its
//! consumers, each as one line with the exact fix.
//!
//! Each finding is PASS, INFO, WARN or FAIL. INFO is a fact that needs
//! nothing done (what the server's version has and the run does not use).
//! FAIL means `run` would stop, or the source database would misbehave (an `UPDATE` on a published table without
//! a replica identity fails in PostgreSQL itself); WARN means it works, with
//! a consequence worth knowing (unbounded WAL retention, null Kafka keys,
//! key-only before-images). The exit code is 0 when nothing FAILs: warnings
//! alone do not fail the check.
//!
//! Everything here only reads: no slot, publication or topic is created
//! (topic creation is validated with a `validate_only` CreateTopics request).

mod failover;
mod kafka;
mod postgres;
mod publication_shape;
mod read_only;
mod registry;
mod takeover;
mod version;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::config::{Format, RunConfig};
use crate::http::HealthPolicy;

/// `pgcdc-kafka check`: the flags of `run`, and how long each probe may take.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// `--config` and `--debezium-config`, layered under the flags.
    #[command(flatten)]
    pub sources: crate::config::ConfigSources,

    #[command(flatten)]
    pub run: RunConfig,

    /// The readiness policy `run` will use, to compare with wal_sender_timeout.
    #[command(flatten)]
    pub health: HealthPolicy,

    /// How long connecting to each service and each request may take.
    #[arg(long = "check-timeout", env = "PGCDC_CHECK_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// How a finding turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    /// A fact worth knowing that needs nothing done (what the server has).
    Info,
    Warn,
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "PASS",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        })
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What was checked, e.g. `wal_level`.
    pub check: &'static str,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (for WARN and FAIL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.check, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "; fix: {fix}")?;
        }
        Ok(())
    }
}

/// Every finding, in the order checked.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether nothing failed (warnings allowed).
    pub fn passed(&self) -> bool {
        self.findings.iter().all(|f| f.status != Status::Fail)
    }

    fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }

    fn pass(&mut self, check: &'static str, detail: impl Into<String>) {
        self.push(check, Status::Pass, detail, None::<String>);
    }

    fn info(&mut self, check: &'static str, detail: impl Into<String>) {
        self.push(check, Status::Info, detail, None::<String>);
    }

    fn warn(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(check, Status::Warn, detail, Some(fix));
    }

    fn fail(&mut self, check: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(check, Status::Fail, detail, Some(fix));
    }

    fn push(
        &mut self,
        check: &'static str,
        status: Status,
        detail: impl Into<String>,
        fix: Option<impl Into<String>>,
    ) {
        self.findings.push(Finding {
            check,
            status,
            detail: detail.into(),
            fix: fix.map(Into::into),
        });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        let (failed, warned) = (self.count(Status::Fail), self.count(Status::Warn));
        if failed == 0 {
            write!(f, "check passed ({warned} warnings)")
        } else {
            write!(f, "check failed: {failed} problems, {warned} warnings")
        }
    }
}

/// Runs every check and returns the report; never fails itself (a service
/// that cannot be reached is a finding).
pub async fn run(args: &CheckArgs) -> Report {
    let mut report = Report::default();
    let config = &args.run;
    let tables = postgres::check_postgres(config, &args.health, args.timeout, &mut report).await;
    failover::check_failover(config, args.timeout, &mut report).await;
    kafka::check_kafka(config, tables.as_deref(), args.timeout, &mut report).await;
    read_only::check_read_only(config, tables.as_deref(), args.timeout, &mut report).await;
    publication_shape::check_publication_shape(config, args.timeout, &mut report).await;
    if config.encode.format == Format::Avro {
        registry::check_registry(config, args.timeout, &mut report).await;
    }
    if config.takeover.takeover_debezium.is_some() {
        takeover::check_takeover(config, args.timeout, &mut report).await;
    }
    report
}

/// Up to ten names, then how many more.
pub(super) fn list(names: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut text = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// Runs `pgcdc-kafka check`: prints the report; 0 when it passed, 1 otherwise.
pub async fn execute(args: &CheckArgs, format: crate::config::LogFormat) -> std::process::ExitCode {
    let report = run(args).await;
    super::print_report(format, &report);
    if report.passed() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::postgres::{check_tables, TableInfo};
    use super::*;

    fn table(name: &str, replica_identity: char, has_primary_key: bool) -> TableInfo {
        TableInfo {
            name: name.into(),
            replica_identity,
            has_primary_key,
            owned: true,
        }
    }

    fn config() -> RunConfig {
        RunConfig::from_args(["--pg-url", "postgres://u@h/d", "--topic-prefix", "app"])
            .expect("flags parse")
    }

    #[test]
    fn tables_are_classified_by_key_and_replica_identity() {
        let mut report = Report::default();
        check_tables(
            &config(),
            &[
                table("public.ok", 'd', true),
                table("public.heap", 'd', false),
                table("public.nothing", 'n', true),
                table("public.full", 'f', false),
                table("public.fullpk", 'f', true),
            ],
            &mut report,
        );
        let line = |check: &str| {
            report
                .findings
                .iter()
                .find(|f| f.check == check)
                .unwrap_or_else(|| panic!("{check} reported: {report}"))
                .clone()
        };
        let identity = line("replica identity");
        assert_eq!(identity.status, Status::Fail);
        assert!(identity.detail.contains("public.heap, public.nothing"));
        assert!(identity
            .fix
            .unwrap()
            .contains("ALTER TABLE public.heap ADD PRIMARY KEY"));
        let null_keys = line("null keys");
        assert_eq!(null_keys.status, Status::Warn);
        assert!(null_keys.detail.starts_with("public.full have"));
        let before = line("before-images");
        assert!(before.detail.starts_with("public.ok under"));
        assert!(!report.passed());
    }

    #[test]
    fn report_lines_and_verdict() {
        let mut report = Report::default();
        report.pass("wal_level", "logical");
        report.warn("max_slot_wal_keep_size", "-1", "set it");
        assert!(report.passed(), "warnings do not fail");
        assert_eq!(
            report.to_string(),
            "PASS wal_level: logical\nWARN max_slot_wal_keep_size: -1; fix: set it\n\
             check passed (1 warnings)"
        );
        report.fail("role", "no REPLICATION", "ALTER ROLE u REPLICATION");
        assert!(!report.passed());
        assert!(report
            .to_string()
            .ends_with("check failed: 1 problems, 1 warnings"));
    }

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..13).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        assert!(list(&refs).ends_with("t9 and 3 more"));
    }
}
