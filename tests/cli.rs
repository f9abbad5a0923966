//! The `pgcdc-kafka` binary as operators run it: flags, streaming, and a
//! graceful stop on SIGTERM.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{consume, wait_until, Scenario};
use pgcdc_testcontainers::{Kafka, Postgres};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

#[test]
fn invalid_flags_are_all_reported_with_exit_code_2() {
    let output = Command::new(BIN)
        .args([
            "run",
            "--pg-url",
            "postgres://u@127.0.0.1:1/db",
            "--topic-prefix",
            // Not "1bad": a leading digit is a valid Kafka topic prefix (issue 26).
            "bad/prefix",
            "--slot",
            "Bad-Slot",
            "--kafka-property",
            "enable.idempotence=false",
        ])
        .env_remove("PGCDC_TOPIC_PREFIX")
        .output()
        .expect("binary runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in ["topic-prefix", "slot", "enable.idempotence=true"] {
        assert!(stderr.contains(needle), "stderr names {needle}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_streams_and_stops_gracefully_on_sigterm() {
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "cli");
    s.sql("CREATE TABLE orders (id bigint PRIMARY KEY, total numeric(10,2))");

    let mut child = Command::new(BIN)
        .arg("run")
        .args(s.args(&kafka.bootstrap_servers(), &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    wait_until(Duration::from_secs(60), "slot created", || async {
        s.confirmed_flush_lsn().is_some()
    })
    .await;

    s.sql("INSERT INTO orders VALUES (42, 19.99)");
    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("orders"),
        1,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key.as_ref().unwrap()["payload"]["id"], 42);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || {
        let _ = child.stdin.take();
        child.wait_with_output()
    })
    .await
    .expect("join")
    .expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "graceful exit; stderr:\n{stderr}"
    );
    assert!(stderr.contains("stopped"), "reports the stop: {stderr}");
}

/// `run` against a PostgreSQL nothing listens on, stopped by `--max-run`:
/// enough to log the start-up line and a retry.
const UNREACHABLE_RUN: &[&str] = &[
    "run",
    "--pg-url",
    "postgres://cdc:topsecret@127.0.0.1:1/shop",
    "--topic-prefix",
    "app",
    "--max-run",
    "1s",
    "--kafka-property",
    "sasl.password=hunter2",
];

#[test]
fn version_names_the_commit_and_librdkafka() {
    let output = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("binary runs");
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let expected = format!(
        "pgcdc-kafka {} (commit {}, librdkafka {})",
        pgcdc_kafka::build_info::VERSION,
        pgcdc_kafka::build_info::COMMIT,
        pgcdc_kafka::build_info::librdkafka_version()
    );
    assert_eq!(stdout.trim(), expected);
}

#[test]
fn the_start_up_line_names_the_build_and_the_redacted_settings_without_colour_in_a_pipe() {
    let output = Command::new(BIN)
        .args(UNREACHABLE_RUN)
        .env_remove("NO_COLOR")
        .env_remove("PGCDC_LOG_FORMAT")
        .stderr(Stdio::piped())
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains('\u{1b}'),
        "no escape codes in a pipe:\n{stderr}"
    );
    let start = stderr
        .lines()
        .find(|l| l.contains("starting pgcdc-kafka"))
        .unwrap_or_else(|| panic!("a start-up line:\n{stderr}"));
    for needle in [
        format!("version=\"{}\"", pgcdc_kafka::build_info::VERSION),
        format!("commit=\"{}\"", pgcdc_kafka::build_info::COMMIT),
        "librdkafka=".to_owned(),
        "slot=pgcdc".to_owned(),
        "topic_prefix=\\\"app\\\"".to_owned(),
        "max_run=\\\"1s\\\"".to_owned(),
        "kafka.sasl.password=\\\"<redacted>\\\"".to_owned(),
    ] {
        assert!(start.contains(&needle), "{needle} in {start}");
    }
    assert!(
        !stderr.contains("topsecret") && !stderr.contains("hunter2"),
        "{stderr}"
    );
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    // util-linux's `script` gives the binary a terminal.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to provide a terminal");
        return;
    }
    let on_terminal = |no_color: Option<&str>| {
        let line = std::iter::once(BIN)
            .chain(UNREACHABLE_RUN.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"]);
        match no_color {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        let output = cmd
            .env_remove("PGCDC_LOG_FORMAT")
            .output()
            .expect("script runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let coloured = on_terminal(None);
    assert!(coloured.contains("starting pgcdc-kafka"), "{coloured}");
    assert!(coloured.contains("\u{1b}["), "colour on a terminal");
    // An empty NO_COLOR does not count (no-color.org).
    assert!(on_terminal(Some("")).contains("\u{1b}["));
    let plain = on_terminal(Some("1"));
    assert!(plain.contains("starting pgcdc-kafka"), "{plain}");
    assert!(!plain.contains('\u{1b}'), "NO_COLOR honoured:\n{plain}");
}

fn stdout_of(args: &[&str]) -> String {
    let output = Command::new(BIN).args(args).output().expect("binary runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn run_help_groups_the_flags_under_headings() {
    let help = stdout_of(&["run", "--help"]);
    // Each flag listed under its heading: the last heading line before it.
    let heading_of = |flag: &str| {
        let at = help
            .find(&format!("      {flag} "))
            .unwrap_or_else(|| panic!("{flag} in run --help"));
        help[..at]
            .lines()
            .rev()
            .find(|l| !l.starts_with(' ') && l.ends_with(':'))
            .map(str::to_owned)
    };
    for (flag, heading) in [
        ("--pg-url", "Connection:"),
        ("--bootstrap-servers", "Connection:"),
        ("--table", "Selection and routing:"),
        ("--format", "Format:"),
        ("--snapshot-mode", "Snapshot:"),
        ("--delivery", "Delivery:"),
        ("--kafka-property", "Delivery:"),
        ("--metrics-addr", "Operations:"),
        ("--config", "Configuration files:"),
    ] {
        assert_eq!(heading_of(flag).as_deref(), Some(heading), "{flag}");
    }
}

#[test]
fn completions_and_man_pages_are_generated_from_the_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&["completions", shell]);
        for needle in ["pgcdc-kafka", "topic-prefix", "kafka-property"] {
            assert!(script.contains(needle), "{shell} completes {needle}");
        }
    }
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH pgcdc-kafka 1"), "{page}");
    let run = stdout_of(&["man", "run"]);
    assert!(run.contains(".TH pgcdc-kafka-run 1"), "{run}");
    assert!(run.contains("topic\\-prefix"), "run's page lists its flags");
    let unknown = Command::new(BIN)
        .args(["man", "nope"])
        .output()
        .expect("binary runs");
    assert_eq!(unknown.status.code(), Some(2));
}
