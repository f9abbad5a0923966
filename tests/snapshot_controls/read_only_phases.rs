//! The parts of the read-only test that need no writer, on the same role,
//! table and connector setup ([`super::read_only`]):
//!
//! - `check --read-only` reports what the role lacks, and passes when it
//!   lacks nothing;
//! - on an idle server a snapshot of many chunks finishes long before the
//!   walsender's own keepalives could have closed most of its windows;
//! - a read-only snapshot interrupted by a crash resumes from the progress
//!   topic, sending again at most the chunk that was not acknowledged.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::Kafka;
use serde_json::{json, Value as Json};

use super::common::process::run_binary;
use super::common::{
    consume_all, read_raw, record_count, wait_for, wait_until, ReadUntil, Scenario, TIMEOUT,
};
use super::read_only::{kafka_signal, notification};

/// Whether `check` passed, and its findings named `read-only`, as
/// `status detail | fix` lines (on a failed check, all its findings).
async fn read_only_findings(args: &[String]) -> (bool, Vec<String>) {
    let mut all = vec![
        "--log-format".to_owned(),
        "json".to_owned(),
        "check".to_owned(),
    ];
    all.extend(args.iter().cloned());
    let (code, stdout, stderr) = run_binary(all).await;
    let report: Json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout} {stderr}"));
    let passed = code == Some(0);
    let lines = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == "read-only" || !passed)
        .map(|f| format!("{} {} | {}", f["status"], f["detail"], f["fix"]))
        .collect();
    (passed, lines)
}

/// `check --read-only` against the SELECT-only role `role` (its `args` are
/// the run's): everything it needs is there; then a publication with a
/// table it may not read, and one that does not exist.
pub(super) async fn check_reports_what_the_role_lacks(s: &Scenario, role: &str, args: &[String]) {
    let (passed, lines) = read_only_findings(args).await;
    let has = |lines: &[String], status: &str, text: &str| {
        lines
            .iter()
            .any(|l| l.starts_with(&format!("\"{status}\"")) && l.contains(text))
    };
    assert!(passed, "check passes: {lines:#?}");
    for text in [
        "pg_current_snapshot()",
        &format!("{role} may replicate and SELECT from all 3 captured tables"),
        "no signal table needed",
        "signal topic",
    ] {
        assert!(
            has(&lines, "pass", text),
            "a pass naming {text:?}: {lines:#?}"
        );
    }
    assert!(
        has(
            &lines,
            "info",
            "run creates it over the replication connection"
        ),
        "{lines:#?}"
    );

    // A publication an admin made with a table the role may not read.
    s.sql("CREATE TABLE secret (id int PRIMARY KEY)");
    let more = format!("{}_more", s.publication);
    s.sql(&format!("CREATE PUBLICATION {more} FOR TABLE t, secret"));
    let with = |publication: &str| {
        let mut args = args.to_vec();
        let at = args
            .iter()
            .position(|a| a == "--publication")
            .expect("--publication")
            + 1;
        args[at] = publication.to_owned();
        args
    };
    let (passed, lines) = read_only_findings(&with(&more)).await;
    assert!(!passed, "check fails: {lines:#?}");
    assert!(
        has(
            &lines,
            "fail",
            &format!("{role} may not SELECT from public.secret")
        ) && lines
            .iter()
            .any(|l| l.contains("GRANT SELECT ON public.secret TO") && l.contains(role)),
        "the missing SELECT, with the GRANT to run: {lines:#?}"
    );
    // A missing publication, with the statement an admin runs (every table
    // of the database, as no selection narrows them).
    let statement = "CREATE PUBLICATION \"nowhere\" FOR TABLE \"public\".\"secret\", \
                     \"public\".\"t\", \"public\".\"u\", \"public\".\"w\";";
    let in_json = serde_json::to_string(statement).expect("a JSON string");
    let in_json = in_json.trim_matches('"');
    let missing = "publication \\\"nowhere\\\" does not exist, and --read-only never creates it";
    let (passed, lines) = read_only_findings(&with("nowhere")).await;
    assert!(!passed, "check fails: {lines:#?}");
    assert!(
        has(&lines, "fail", missing)
            && (lines.iter()).any(|l| l.contains(&format!("as an admin: {in_json}"))),
        "the missing publication, with what an admin runs: {lines:#?}"
    );
    // A role that could create it (the tests' superuser): `check` fails
    // the same way, and `run --read-only` stops with the same statement
    // rather than create it.
    let admin = super::read_only::with_flag(with("nowhere"), "--pg-url", &s.pg.url(&s.db));
    let (passed, lines) = read_only_findings(&admin).await;
    assert!(
        !passed && has(&lines, "fail", missing),
        "a superuser is told the same: {lines:#?}"
    );
    let error = s.start_args(admin).wait_for_error().await;
    let error = pgcdc_kafka::error_chain(&error);
    println!("run --read-only without its publication: {error}");
    assert!(
        error.contains("--read-only never creates it") && error.contains(statement),
        "run names the publication and the statement: {error}"
    );
    let created = "SELECT count(*) FROM pg_publication WHERE pubname = 'nowhere'";
    assert_eq!(
        s.query_one(created).as_deref(),
        Some("0"),
        "nothing created"
    );
    s.sql(&format!("DROP PUBLICATION {more}"));
    s.sql("DROP TABLE secret");
}

/// The incremental snapshot reads of `records` (the `op: "r"` records with
/// `source.snapshot = "incremental"`): their ids.
fn read_ids(records: &[super::common::Record]) -> Vec<i64> {
    records
        .iter()
        .filter_map(|r| {
            let p = &r.value.as_ref()?["payload"];
            (p["op"] == "r" && p["source"]["snapshot"] == "incremental")
                .then(|| p["after"]["id"].as_i64())?
        })
        .collect()
}

/// The records of `topic` not in `before` (by partition and offset).
async fn records_since(
    kafka: &Kafka,
    topic: &str,
    before: &BTreeSet<(i32, i64)>,
) -> Vec<super::common::Record> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .into_iter()
        .filter(|r| !before.contains(&(r.partition, r.offset)))
        .collect()
}

async fn positions(kafka: &Kafka, topic: &str) -> BTreeSet<(i32, i64)> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect()
}

/// Asks, through the kafka channel, for an incremental snapshot of `t`
/// under signal `id`.
async fn snapshot_t(kafka: &Kafka, s: &Scenario, signal_topic: &str, id: &str) {
    kafka_signal(
        kafka,
        signal_topic,
        &s.prefix,
        json!({"id": id, "type": "execute-snapshot",
               "data": {"data-collections": ["public.t"], "type": "incremental"}}),
    )
    .await;
}

/// The rows `t` has now.
fn rows_of_t(s: &Scenario) -> usize {
    s.query_one("SELECT count(*) FROM t")
        .expect("a count")
        .parse()
        .expect("a number")
}

/// With no writer, a second snapshot of the table (`chunks` windows): each
/// window closes as soon as the stream learns it passed the chunk's high
/// mark, which on an idle server only a keepalive says. The role's
/// walsender sends its own every 30 s at most (wal_sender_timeout 60 s), so
/// a snapshot that waited for those would take minutes; asking for one
/// (and waking on Kafka's acknowledgement) takes a fraction of a second per
/// chunk. The bound, 30 s for all of them, is one such period: most
/// windows cannot have waited for the walsender, however loaded the machine.
pub(super) async fn idle_snapshot_does_not_wait_for_keepalives(
    kafka: &Kafka,
    s: &Scenario,
    signal_topic: &str,
    notifications: &str,
    chunks: u64,
) {
    // Idle for real: the writer's dead rows vacuumed (a chunk's read would
    // otherwise prune their pages, WAL no commit flushes, which a window
    // then waits for: docs/SNAPSHOTS.md), and the WAL flushed.
    s.sql("VACUUM t");
    s.sql("CHECKPOINT");
    let before = positions(kafka, &s.topic("t")).await;
    let rows = rows_of_t(s);
    let started = Instant::now();
    snapshot_t(kafka, s, signal_topic, "ro-idle").await;
    notification(kafka, notifications, "COMPLETED", "ro-idle", "").await;
    let took = started.elapsed();
    println!(
        "read-only snapshot on an idle server: {chunks} chunks in {:.2}s",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(30),
        "{chunks} windows on an idle server closed without the walsender's own keepalives: \
         took {took:?}"
    );
    let reads = read_ids(&records_since(kafka, &s.topic("t"), &before).await);
    assert_eq!(reads.len(), rows, "every row once");
    assert_eq!(reads.iter().collect::<BTreeSet<_>>().len(), rows);
}

/// The newest progress record of the connector `prefix` (the progress
/// topic's key), as JSON.
async fn newest_progress(kafka: &Kafka, prefix: &str) -> Option<Json> {
    let (servers, topic) = (kafka.bootstrap_servers(), format!("{prefix}.progress"));
    let count = record_count(&servers, &topic).await;
    read_raw(&servers, &topic, ReadUntil::count(count, TIMEOUT))
        .await
        .into_iter()
        .filter(|r| r.key.as_deref() == Some(prefix.as_bytes()))
        .filter_map(|r| serde_json::from_slice(r.value.as_deref()?).ok())
        .next_back()
}

/// A connector started with `args` (chunks of `chunk` rows) takes a
/// snapshot, paused at once, and crashes (its task dropped: nothing
/// drained, nothing recorded on the way out); a new one starts with the
/// same `args`: the snapshot resumes from the progress topic (paused
/// still), and once resumed every row is read, again at most those of the
/// one chunk that was not acknowledged.
pub(super) async fn crash_resumes_from_the_progress_topic(
    kafka: &Kafka,
    s: &Scenario,
    signal_topic: &str,
    notifications: &str,
    chunk: usize,
    args: Vec<String>,
) {
    let released = || async { s.slot_active() == Some(false) };
    wait_until(TIMEOUT, "the slot released", released).await;
    let run = s.start_args(args.clone());
    let before = positions(kafka, &s.topic("t")).await;
    let rows = rows_of_t(s);
    snapshot_t(kafka, s, signal_topic, "ro-crash").await;
    // Paused right away (after a chunk or two: the pause is read between
    // steps); the crash comes once Kafka has a record of the pause, maybe
    // with a chunk still in flight.
    kafka_signal(
        kafka,
        signal_topic,
        &s.prefix,
        json!({"id": "ro-pause", "type": "pause-snapshot", "data": {}}),
    )
    .await;
    let recorded = wait_for(
        TIMEOUT,
        "the pause recorded in the progress topic",
        || async {
            newest_progress(kafka, &s.prefix)
                .await
                .filter(|p| p["incremental_snapshot"]["paused"] == true)
                .ok_or_else(|| "not yet".to_owned())
        },
    )
    .await;
    run.abort().await;
    wait_until(TIMEOUT, "the crashed connector's slot released", released).await;
    let completed_before = consume_all(&kafka.bootstrap_servers(), notifications, TIMEOUT)
        .await
        .iter()
        .filter_map(|r| r.value.as_ref().map(|v| v["payload"].clone()))
        .any(|p| p["id"] == "ro-crash" && p["type"] == "COMPLETED");
    assert!(!completed_before, "the crash came mid-snapshot: {recorded}");
    let sent_before = read_ids(&records_since(kafka, &s.topic("t"), &before).await).len();

    let running = s.start_args(args);
    kafka_signal(
        kafka,
        signal_topic,
        &s.prefix,
        json!({"id": "ro-resume", "type": "resume-snapshot", "data": {}}),
    )
    .await;
    notification(kafka, notifications, "COMPLETED", "ro-crash", "").await;
    let reads = read_ids(&records_since(kafka, &s.topic("t"), &before).await);
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for id in &reads {
        *counts.entry(*id).or_default() += 1;
    }
    let again = reads.len() - counts.len();
    println!(
        "read-only snapshot across a crash: {} rows sent before it, {again} sent again after it \
         (chunks of {chunk}), {} in all",
        sent_before,
        reads.len()
    );
    assert_eq!(counts.len(), rows, "every row read");
    assert!(sent_before < rows, "the crash came before the last chunk");
    assert!(
        again <= chunk,
        "only the chunk Kafka had not acknowledged when the pause was recorded is sent again: \
         {again} rows again"
    );
    running.stop().await;
}
