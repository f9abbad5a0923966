//! The `pgcdc-kafka` binary as operators run it: flags, streaming, and a
//! graceful stop on SIGTERM.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{consume, metric_sample, wait_until, Scenario};
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

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Issue 26 items 4 and 5: Kafka down at start. librdkafka's refused
/// connections are WARN (nothing is at risk), said once rather than at
/// every retry, each with the brokers of --bootstrap-servers; the start-up
/// deadline then stops the run with exit 1, naming what never answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_kafka_is_named_logged_once_and_ends_the_start_up() {
    let s = Scenario::new(Postgres::shared(), "nokafka");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let bootstrap = format!("127.0.0.1:{}", closed_port());
    let started = std::time::Instant::now();
    let mut args = vec!["run".to_owned()];
    args.extend(s.args(&bootstrap, &["--startup-timeout", "6s"]));
    let (code, _, stderr) = common::process::run_binary(args).await;
    eprintln!("{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "gave up soon after the deadline: {:?}",
        started.elapsed()
    );
    let last = stderr.lines().last().unwrap_or_default();
    for needle in [
        "--startup-timeout 6s",
        "Kafka never did",
        &format!("--bootstrap-servers ({bootstrap})"),
    ] {
        assert!(last.contains(needle), "{needle} in the last line: {last}");
    }
    let librdkafka: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("librdkafka"))
        .collect();
    assert!(
        librdkafka.iter().all(|l| !l.contains("ERROR")),
        "an unreachable broker puts nothing at risk: {librdkafka:#?}"
    );
    let refused: Vec<&&str> = librdkafka
        .iter()
        .filter(|l| l.contains("Connection refused"))
        .collect();
    assert_eq!(refused.len(), 1, "said once: {librdkafka:#?}");
    assert!(
        refused[0].contains(&format!("--bootstrap-servers ({bootstrap})")),
        "{}",
        refused[0]
    );
    // No line twice, whatever its level (timestamps aside).
    let mut seen = std::collections::HashSet::new();
    for line in stderr.lines().filter(|l| l.contains(" WARN ")) {
        let text = line.split_once(" WARN ").map_or(line, |(_, t)| t);
        assert!(seen.insert(text), "logged twice: {text}");
    }
}

/// `pgcdc-kafka run` against a PostgreSQL nothing listens on, plus `extra`.
fn run_without_postgres(extra: &[&str]) -> Command {
    let mut run = Command::new(BIN);
    run.args(["run", "--pg-url"])
        .arg(format!("postgres://cdc@127.0.0.1:{}/shop", closed_port()))
        .args(["--topic-prefix", "app"])
        .args(extra)
        .env_remove("PGCDC_LOG_FORMAT")
        .env("NO_COLOR", "1");
    run
}

/// Issue 26 item 5: PostgreSQL down at start, with a start-up deadline.
#[test]
fn unreachable_postgres_ends_the_start_up_at_the_deadline() {
    let started = std::time::Instant::now();
    let output = run_without_postgres(&["--startup-timeout", "2s"])
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(15), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    for needle in [
        "stopped on error",
        "--startup-timeout 2s",
        "(--pg-url) never answered",
        "last error",
    ] {
        assert!(last.contains(needle), "{needle} in the last line: {last}");
    }
}

/// `GET /metrics` of a connector on `addr`; `None` while it does not answer.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(addr).ok()?;
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    socket.read_to_string(&mut response).ok()?;
    Some(response.split_once("\r\n\r\n")?.1.to_owned())
}

/// The value of a series without labels of its own in a metrics page: the
/// binary labels every series with its pipeline, `default` for a
/// configuration without pipelines.
fn sample(page: &str, name: &str) -> Option<f64> {
    metric_sample(page, &format!("{name}{{pipeline=\"default\"}}"))
}

/// Issue 26 item 6: a stop while Kafka is frozen says how long it waits
/// and for how many records; a second SIGTERM ends the wait at once; the
/// slot is confirmed only to what Kafka acknowledged, and the summary
/// counts as acknowledged only what was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_the_wait_for_a_frozen_kafka() {
    stop_with_a_frozen_kafka(false).await;
}

/// Item 6 again, with the connector blocked mid-transaction at its
/// in-flight bound, where the first stop cannot finish the transaction:
/// the second signal abandons the attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_a_stop_blocked_at_the_in_flight_bound() {
    stop_with_a_frozen_kafka(true).await;
}

/// One row delivered, Kafka frozen, five more rows (one transaction each,
/// or, `blocked`, one transaction against an in-flight bound of 2), then
/// SIGTERM twice.
async fn stop_with_a_frozen_kafka(blocked: bool) {
    let kafka = common::kafka_behind_proxy().await;
    let proxy = kafka.proxy().expect("the broker's proxy");
    let proxied = kafka.proxied_bootstrap_servers().expect("proxied listener");
    let s = Scenario::new(Postgres::shared(), "frozen");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let logs = common::process::LogDir::new("frozen");
    let (stdout_path, stderr_path) = (logs.path(0), logs.path(1));
    let metrics = format!("127.0.0.1:{}", closed_port());
    let mut extra = vec![
        "--shutdown-timeout",
        "120s",
        "--metrics-addr",
        &metrics,
        "--status-interval",
        "100ms",
    ];
    if blocked {
        extra.extend(["--max-in-flight-messages", "2"]);
    }
    let mut child = Command::new(BIN)
        .arg("run")
        .args(s.args(&proxied, &extra))
        .env("PGCDC_LOG", "info")
        .env_remove("PGCDC_LOG_FORMAT")
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("binary starts");
    let log = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let value = |name: &'static str| {
        let metrics = metrics.clone();
        async move { scrape(&metrics).and_then(|page| sample(&page, name)) }
    };
    s.sql("INSERT INTO t VALUES (1)");
    wait_until(
        Duration::from_secs(90),
        "the first row acknowledged",
        || {
            let acked = value("pgcdc_kafka_records_acknowledged_total");
            async move { acked.await == Some(1.0) }
        },
    )
    .await;
    s.await_confirmed_past_now("the first row confirmed").await;

    proxy.stall();
    let in_flight = if blocked {
        s.sql("INSERT INTO t SELECT generate_series(2, 6)");
        2
    } else {
        for id in 2..=6 {
            s.sql(&format!("INSERT INTO t VALUES ({id})"));
        }
        5
    };
    wait_until(Duration::from_secs(60), "records in flight", || {
        let now = value("pgcdc_in_flight_records");
        async move { now.await == Some(f64::from(in_flight)) }
    })
    .await;
    let signal = |child: &std::process::Child| {
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    };
    signal(&child);
    let announced = if blocked {
        "a second SIGINT/SIGTERM stops without waiting".to_owned()
    } else {
        format!("waiting up to 120 s for Kafka to acknowledge {in_flight} records")
    };
    wait_until(Duration::from_secs(30), "the wait announced", || {
        let text = log();
        let announced = announced.clone();
        async move { text.contains(&announced) }
    })
    .await;
    common::hold_for(Duration::from_secs(1), || {
        let exited = child.try_wait().expect("try_wait");
        async move { assert!(exited.is_none(), "the stop waits for Kafka") }
    })
    .await;
    let forced_at = std::time::Instant::now();
    signal(&child);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    proxy.resume();
    let stderr = log();
    assert!(
        forced_at.elapsed() < Duration::from_secs(15),
        "the second signal ends the wait: {:?}\n{stderr}",
        forced_at.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stop forced"), "{stderr}");
    let summary = std::fs::read_to_string(&stdout_path).expect("stdout");
    for needle in [
        "stopped (on request, forced)".to_owned(),
        format!("1 records acknowledged by Kafka ({in_flight} not acknowledged"),
    ] {
        assert!(summary.contains(&needle), "{needle} in {summary}");
    }
    // Nothing was confirmed past what Kafka acknowledged: the slot still
    // holds the stalled rows, so the next run delivers them.
    let (code, _, stderr) = common::process::run_binary(
        std::iter::once("run".to_owned())
            .chain(s.args(&proxied, &["--stop-when-caught-up"]))
            .collect(),
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    // Everything: records the frozen connection still held may have
    // reached the broker after the proxy resumed, besides the re-sent ones.
    let mut ids: Vec<i64> = common::consume_all(
        &kafka.bootstrap_servers(),
        &s.topic("t"),
        Duration::from_secs(60),
    )
    .await
    .iter()
    .filter_map(|r| r.value.as_ref()?["payload"]["after"]["id"].as_i64())
    .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, (1..=6).collect::<Vec<_>>(), "every row in Kafka");
}

/// Every `expr` (and variable query) of a Grafana dashboard, wherever it is.
fn queries(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "definition", serde_json::Value::String(q)) => out.push(q.clone()),
                    _ => queries(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

/// Issue 26 item 11: every metric the Grafana dashboard in docs/ queries is
/// exported by the binary: scraped from a real run's /metrics (one that
/// has reached nothing yet, so it shows every family, with or without
/// samples).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_queries_only_exported_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana/pgcdc-kafka.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    let mut exprs = Vec::new();
    queries(&dashboard, &mut exprs);
    assert!(exprs.len() > 20, "the dashboard's queries: {exprs:#?}");

    let addr = format!("127.0.0.1:{}", closed_port());
    let mut child = run_without_postgres(&["--metrics-addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let page = common::wait_for(Duration::from_secs(30), "/metrics answers", || {
        let page = scrape(&addr);
        async move { page.ok_or_else(|| "no answer yet".to_owned()) }
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();

    let families: std::collections::BTreeMap<&str, &str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let name = regex::Regex::new(r"\b(?:pgcdc|process)_[a-z0-9_]+\b").expect("regex");
    let mut queried = std::collections::BTreeSet::new();
    for expr in &exprs {
        for m in name.find_iter(expr) {
            let series = m.as_str();
            // A histogram is queried through its series' suffixes.
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    let base = series.strip_suffix(suffix)?;
                    (families.get(base) == Some(&"histogram")).then_some(base)
                })
                .unwrap_or(series);
            queried.insert(family);
        }
    }
    let missing: Vec<_> = queried
        .iter()
        .filter(|n| !families.contains_key(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:?}\n{page}"
    );
    for name in &queried {
        assert!(
            pgcdc_kafka::metrics::names::ALL.contains(name),
            "{name} is exported but not in metrics::names"
        );
    }
    // The panels the issue asks for, by the metric that carries each.
    for needed in [
        "pgcdc_lag_bytes",
        "pgcdc_lag_seconds",
        "pgcdc_events_total",
        "pgcdc_in_flight_records",
        "pgcdc_kafka_records_acknowledged_total",
        "pgcdc_restarts_total",
        "pgcdc_snapshot_tables_done",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(queried.contains(needed), "the dashboard shows {needed}");
    }
}
