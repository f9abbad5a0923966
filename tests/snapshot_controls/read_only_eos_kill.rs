//! `kill -9` during an exactly-once `--read-only` initial snapshot, then a
//! restart with the same flags: a role that may only SELECT and replicate,
//! signals through the kafka channel, the four tables of [`TABLES`] read by
//! two workers in chunks of [`FETCH_SIZE`] rows (a checkpoint, one Kafka
//! transaction with its progress record, after each chunk that sent rows)
//! while a writer updates, deletes and inserts in all of them. A
//! debug-build hook stops the connector before its eighth checkpoint: seven
//! checkpoints' Kafka transactions committed (the progress topic says so),
//! the eighth open with rows in it; there it is killed. The restart
//! resumes the rest as a read-only incremental snapshot. For a
//! read_committed consumer:
//!
//! - every topic ends equal to its table (the snapshot rows and the
//!   streamed changes reconstruct it), no key's events go back to an older
//!   version, every row the writer never touched was read;
//! - no row the killed run committed is read again: the rows read a second
//!   time are only those of the transaction the kill left open (aborted by
//!   the restart), counted, printed and bounded;
//! - the working slot is gone once promoted, no publication appeared, and
//!   nothing was written to the source (the role cannot write, its
//!   sessions are read-only, and neither run failed or complained).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use pgcdc_kafka::pipeline::fault::PAUSE_BEFORE_SNAPSHOT_CHECKPOINT;
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::{json, Value as Json};

use super::common::compacted::latest_by_key;
use super::common::process::{ConnectorProcess, LogDir};
use super::common::{
    committed_progress, record_count, wait_for, wait_until, Record, Scenario, TIMEOUT,
};
use super::in_flight::{committed, committed_tables, create_tables, Writer, TABLES};
use super::read_only::{
    assert_untouched_rows_read, kafka_signal, select_only_role, stale_keys, with_flag,
};
use super::wait_for_notification;

/// Rows per chunk of the initial snapshot: small, so that the snapshot is
/// many Kafka transactions and most of it is still to come at the kill.
const FETCH_SIZE: usize = 25;
const WORKERS: usize = 2;
/// The checkpoint the first run is stopped (then killed) before: the
/// ones before it committed.
const KILL_AT: usize = 8;

/// The snapshot reads in `records` as `(id, v, incremental)`.
fn reads(records: &[Record]) -> Vec<(i64, i64, bool)> {
    records
        .iter()
        .filter_map(|r| {
            let p = &r.value.as_ref()?["payload"];
            (p["op"] == "r").then(|| {
                Some((
                    p["after"]["id"].as_i64()?,
                    p["after"]["v"].as_i64()?,
                    p["source"]["snapshot"] == "incremental",
                ))
            })?
        })
        .collect()
}

/// The ids of the initial snapshot's reads in `records`.
fn initial_ids(records: &[Record]) -> BTreeSet<i64> {
    reads(records)
        .into_iter()
        .filter(|(_, _, incremental)| !incremental)
        .map(|(id, _, _)| id)
        .collect()
}

/// Every record of `topic` as a read_uncommitted consumer sees it (records
/// of open and aborted Kafka transactions too), read until `idle` passes
/// without one.
async fn uncommitted(kafka: &Kafka, topic: &str, idle: Duration) -> Vec<Record> {
    let (servers, topic) = (kafka.bootstrap_servers(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", servers)
            .set("group.id", unique_name("uncommitted"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .create()
            .expect("a consumer");
        let metadata = consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .expect("metadata");
        let partitions = metadata
            .topics()
            .first()
            .map_or(0, |t| t.partitions().len());
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            (assignment.add_partition_offset(&topic, p as i32, Offset::Beginning))
                .expect("partition");
        }
        consumer.assign(&assignment).expect("assign");
        let (mut records, mut last) = (Vec::new(), Instant::now());
        while last.elapsed() < idle {
            let Some(message) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let message = message.expect("consume");
            last = Instant::now();
            let json =
                |bytes: Option<&[u8]>| bytes.map(|b| serde_json::from_slice(b).expect("JSON"));
            records.push(Record {
                partition: message.partition(),
                offset: message.offset(),
                key: json(message.key()),
                value: json(message.payload()),
                headers: Vec::new(),
            });
        }
        records
    })
    .await
    .expect("consumer thread")
}

/// Per table, the initial snapshot rows Kafka holds: committed (what a
/// read_committed consumer sees), and only in open or aborted transactions.
async fn sent_by(
    kafka: &Kafka,
    s: &Scenario,
) -> (
    BTreeMap<&'static str, BTreeSet<i64>>,
    BTreeMap<&'static str, BTreeSet<i64>>,
) {
    let (mut done, mut open) = (BTreeMap::new(), BTreeMap::new());
    for (table, _) in TABLES {
        if record_count(&kafka.bootstrap_servers(), &s.topic(table)).await == 0 {
            done.insert(table, BTreeSet::new());
            open.insert(table, BTreeSet::new());
            continue;
        }
        let committed = initial_ids(&committed(kafka, s, table).await);
        let sent = initial_ids(&uncommitted(kafka, &s.topic(table), Duration::from_secs(1)).await);
        assert!(
            committed.is_subset(&sent),
            "{table}: a read_uncommitted consumer sees the committed rows too"
        );
        open.insert(table, &sent - &committed);
        done.insert(table, committed);
    }
    (done, open)
}

/// The names of `query`'s single text column, comma-separated and sorted.
fn names(s: &Scenario, query: &str) -> String {
    s.query_one(&format!(
        "SELECT coalesce(string_agg(n, ',' ORDER BY n), '') FROM ({query}) AS names(n)"
    ))
    .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_read_only_exactly_once_initial_snapshot_then_resume() {
    let started = Instant::now();
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "roeoskill");
    create_tables(&s);
    let tables = TABLES.map(|(t, _)| t).join(", ");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE {tables}",
        s.publication
    ));
    let (role, url) = select_only_role(&s, &tables).await;
    // The suite's walsender timeout: the resumed part ends on a quiet
    // source, whose windows then need no keepalive 30 s away.
    s.sql(&format!("ALTER ROLE {role} RESET wal_sender_timeout"));
    let signals = format!("{}-signal", s.prefix);
    // The signal topic exists before the connector reads it.
    kafka_signal(kafka, &signals, "someone-else", json!({"type": "log"})).await;
    let notifications = format!("{}.notifications", s.prefix);
    let args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--read-only",
            "--signal-enabled-channels",
            "kafka",
            "--delivery",
            "exactly-once",
            "--snapshot-fetch-size",
            &FETCH_SIZE.to_string(),
            // A checkpoint after every chunk: what the kill lands between.
            "--snapshot-checkpoint-interval",
            "0",
            "--snapshot-workers",
            &WORKERS.to_string(),
            "--incremental-snapshot-chunk-size",
            "100",
            "--notification-enabled-channels",
            "sink",
            "--notification-sink-topic-name",
            &notifications,
        ],
    );
    let args = with_flag(args, "--pg-url", &url);
    let logs = LogDir::new("roeoskill");

    // The writer runs from before the snapshot's consistent point until the
    // resumed part is done.
    let writer = Writer::start(&s, 0);
    let marker = std::env::temp_dir().join(unique_name("snapshot-checkpoint"));
    let first = ConnectorProcess::spawn_with_env(
        &args,
        logs.path(0),
        &[(
            PAUSE_BEFORE_SNAPSHOT_CHECKPOINT,
            format!("{KILL_AT}:{}", marker.display()),
        )],
    );
    wait_until(
        TIMEOUT,
        "the pause before a snapshot checkpoint",
        || async {
            first.assert_running("during the initial snapshot");
            marker.exists()
        },
    )
    .await;

    // What Kafka has of the killed run: the checkpoints before the pause
    // committed, and a transaction left open with the rows sent since.
    let checkpoints: Vec<Json> = committed_progress(kafka, &s.prefix, Duration::from_secs(1)).await;
    assert_eq!(
        checkpoints.len(),
        KILL_AT - 1,
        "every checkpoint before the pause committed, each with its progress: {checkpoints:?}"
    );
    // Two workers' chunks often end back to back, the second with nothing
    // left to send: such a checkpoint is skipped, not committed empty (an
    // empty one before the pause would leave no open rows to find below).
    assert!(
        (checkpoints.windows(2)).all(|w| w[0]["initial_snapshot"] != w[1]["initial_snapshot"]),
        "every checkpoint records rows the one before it did not: {checkpoints:?}"
    );
    let last = checkpoints.last().expect("a checkpoint");
    assert!(
        last["snapshot"] == false
            && last["initial_snapshot"]["remaining"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
        "paused mid-snapshot: {last}"
    );
    let (committed_at_kill, open_at_kill) =
        wait_for(TIMEOUT, "the open transaction's rows in kafka", || async {
            let (done, open) = sent_by(kafka, &s).await;
            match open.values().any(|rows| !rows.is_empty()) {
                true => Ok((done, open)),
                false => Err("no row in an open transaction yet".to_owned()),
            }
        })
        .await;
    first.kill_9();
    let _ = std::fs::remove_file(&marker);
    let killed_at = started.elapsed().as_secs_f64();
    wait_until(TIMEOUT, "the killed walsender to let go", || async {
        s.query_one(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE active \
             AND slot_name IN ('{0}', '{0}_snapshot')",
            s.slot
        ))
        .as_deref()
            == Some("0")
    })
    .await;

    let resumed = ConnectorProcess::spawn(&args, logs.path(1));
    wait_for_notification(
        kafka,
        &notifications,
        "Incremental Snapshot",
        "COMPLETED",
        "",
    )
    .await;
    resumed.assert_running("after the resumed snapshot");
    let log = resumed.log_text();
    assert!(
        log.contains("resuming the interrupted initial snapshot"),
        "the restart resumed the snapshot rather than starting over; its log:\n{log}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rounds = writer.stop().await;
    assert!(
        rounds > 50,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );
    let snapshot_secs = started.elapsed().as_secs_f64();

    let (expected, topics) = committed_tables(kafka, &s).await;

    let (mut open_total, mut again_total) = (0, 0);
    let mut summary = Vec::new();
    for (((table, _), expected), records) in TABLES.iter().zip(&expected).zip(&topics) {
        assert!(
            latest_by_key(records) == *expected,
            "{table}: the topic ends equal to the table"
        );
        let stale = stale_keys(records);
        assert!(
            stale.is_empty(),
            "{table}: no older version after a newer one: {stale:?}"
        );
        let all = reads(records);
        let read: BTreeMap<i64, i64> = all.iter().map(|(id, v, _)| (*id, *v)).collect();
        assert_eq!(
            all.len(),
            read.len(),
            "{table}: no snapshot row twice for a read_committed consumer"
        );
        let untouched = assert_untouched_rows_read(table, expected, &read);
        assert!(
            untouched * 2 > expected.len(),
            "{table}: the untouched rows, three in four, are most of the table ({untouched} of {})",
            expected.len()
        );
        let done = &committed_at_kill[table];
        assert_eq!(
            &initial_ids(records),
            done,
            "{table}: the killed run's committed chunks are all there, and the restart added none"
        );
        let incremental: BTreeSet<i64> = (all.iter())
            .filter(|(_, _, incremental)| *incremental)
            .map(|(id, _, _)| *id)
            .collect();
        // Read again: rows the killed run had sent, which the restart read.
        let sent: BTreeSet<i64> = done | &open_at_kill[table];
        let again: BTreeSet<i64> = &incremental & &sent;
        assert!(
            again.is_subset(&open_at_kill[table]),
            "{table}: only rows of the transaction the kill left open are read again, \
             never a committed one: {:?}",
            &again - &open_at_kill[table]
        );
        open_total += open_at_kill[table].len();
        again_total += again.len();
        summary.push(format!(
            "{table}: {} committed before the kill, {} in the open transaction, {} read again, {} read after the restart",
            done.len(),
            open_at_kill[table].len(),
            again.len(),
            incremental.len()
        ));
    }
    // The open transaction held what the emitter sent after the last
    // commit: at most a chunk per worker.
    let bound = WORKERS * FETCH_SIZE;
    println!(
        "read-only exactly-once initial snapshot killed at {killed_at:.1}s: {}; {again_total} rows read again of {open_total} left uncommitted (bound {bound}); {rounds} writer rounds, snapshot done at {snapshot_secs:.1}s",
        summary.join("; ")
    );
    assert!(
        again_total <= bound,
        "only the uncommitted chunks are read again: {again_total} rows, at most {bound}"
    );

    // Nothing left that the run should have cleaned, nothing written.
    assert_eq!(
        names(
            &s,
            "SELECT slot_name::text FROM pg_replication_slots WHERE database = current_database()"
        ),
        s.slot,
        "only the real slot: the working slot was promoted and dropped"
    );
    assert_eq!(
        names(&s, "SELECT pubname::text FROM pg_publication"),
        s.publication,
        "no publication created by the read-only run"
    );
    assert_eq!(
        names(
            &s,
            "SELECT relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ),
        "a,b,c,d",
        "no table created"
    );
    assert_eq!(
        names(
            &s,
            &format!(
                "SELECT DISTINCT privilege_type::text FROM information_schema.role_table_grants \
                 WHERE grantee = '{role}'"
            )
        ),
        "SELECT",
        "the role may still only read"
    );
    resumed.terminate_cleanly(TIMEOUT).await;
    for (i, log) in [first.log_text(), resumed.log_text()].iter().enumerate() {
        for refusal in ["read-only transaction", "permission denied"] {
            assert!(
                !log.contains(refusal),
                "run {i} never tried to write (a write would have been refused: {refusal:?}); its log:\n{log}"
            );
        }
    }
    println!(
        "read-only exactly-once kill -9 and resume: {:.1}s in all",
        started.elapsed().as_secs_f64()
    );
}
