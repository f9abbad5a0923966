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
