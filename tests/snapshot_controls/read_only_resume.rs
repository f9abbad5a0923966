//! `--read-only` across crashes, on a role that may only SELECT and
//! replicate (docs/SNAPSHOTS.md, "Read-only incremental snapshots"):
//!
//! 1. an initial snapshot of three tables in many chunks, under a writer,
//!    is killed (`kill -9`) a quarter of the way; the restart resumes it
//!    as a read-only incremental snapshot from what the progress topic
//!    says Kafka has, writing nothing to the source: every topic ends
//!    equal to its table, and only rows of chunks Kafka had not
//!    acknowledged are sent again (counted and printed);
//! 2. then, under exactly-once, a kafka-channel `execute-snapshot` is read
//!    and the connector is stopped dead (a debug-build fault hook) just
//!    before the Kafka transaction holding the signal's effect commits, and
//!    killed: the signal's offset must not have been committed, and after
//!    the restart the snapshot happens, every row of the table once.

use std::collections::BTreeSet;
use std::time::Duration;

use pgcdc_kafka::pipeline::fault::PAUSE_BEFORE_SIGNAL_COMMIT;
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

use super::common::compacted::{
    latest_by_key, reads_per_key, records_in, table_state, wait_for_topic_to_equal_table,
};
use super::common::process::{ConnectorProcess, LogDir};
use super::common::{consume_all, consume_until_idle, wait_until, Record, Scenario, TIMEOUT};
use super::read_only::{kafka_signal, select_only_role, with_flag};

const TABLES: [&str; 3] = ["a", "b", "c"];
/// Rows per table before the snapshot.
const ROWS: i64 = 3_000;
const FETCH_SIZE: usize = 100;
const WORKERS: usize = 2;
const INCREMENTAL_CHUNK: usize = 200;

/// Waits until no walsender holds the slot or the snapshot's working slot.
async fn slots_released(s: &Scenario) {
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
}

/// The committed offset of consumer group `group` in partition 0 of
/// `topic`, as a plain (read_uncommitted) consumer sees it: offsets pending
/// in an open Kafka transaction do not count.
async fn committed_offset(kafka: &Kafka, group: &str, topic: &str) -> Option<i64> {
    let (servers, group, topic) = (
        kafka.bootstrap_servers(),
        group.to_owned(),
        topic.to_owned(),
    );
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", servers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .create()
            .expect("a consumer");
        let mut partition = TopicPartitionList::new();
        partition.add_partition(&topic, 0);
        let committed = consumer
            .committed_offsets(partition, Duration::from_secs(30))
            .expect("the group's committed offsets");
        match committed.find_partition(&topic, 0).map(|p| p.offset()) {
            Some(Offset::Offset(offset)) => Some(offset),
            _ => None,
        }
    })
    .await
    .expect("consumer thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_resumes_its_initial_snapshot_and_keeps_a_kafka_signal_across_crashes() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "roresume");
    for table in TABLES {
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v bigint NOT NULL)"
        ));
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, 0 FROM generate_series(1, {ROWS}) g"
        ));
    }
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE {}",
        s.publication,
        TABLES.join(", ")
    ));
    let (role, url) = select_only_role(&s, &TABLES.join(", ")).await;
    let signal_topic = format!("{}-signal", s.prefix);
    // The signal topic exists before the connector reads it.
    kafka_signal(kafka, &signal_topic, "someone-else", json!({"type": "log"})).await;
    let logs = LogDir::new("roresume");
    let args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--read-only",
            "--signal-enabled-channels",
            "kafka",
            "--snapshot-fetch-size",
            &FETCH_SIZE.to_string(),
            // A checkpoint after every chunk: what the kill lands between.
            "--snapshot-checkpoint-interval",
            "0",
            "--snapshot-workers",
            &WORKERS.to_string(),
            "--incremental-snapshot-chunk-size",
            &INCREMENTAL_CHUNK.to_string(),
        ],
    );
    let args = with_flag(args, "--pg-url", &url);

    // Updates, deletes and inserts in every table, from before the
    // snapshot's consistent point until after the resumed part.
    let (pg, db) = (s.pg, s.db.clone());
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let mut sql = String::from("BEGIN;");
            for (i, table) in TABLES.iter().enumerate() {
                let i = i as i64 + 1;
                sql.push_str(&format!(
                    "UPDATE {table} SET v = {round} WHERE id = {}; \
                     DELETE FROM {table} WHERE id = {}; \
                     INSERT INTO {table} VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round};",
                    (round * 7919 * i) % ROWS + 1,
                    (round * 104_729 * i + 3) % ROWS + 1,
                    ROWS + 1 + (round * i) % 300,
                ));
            }
            client
                .batch_execute(&(sql + "COMMIT"))
                .await
                .expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        round
    });

    // 1. Killed mid-snapshot, then resumed read-only.
    let total = TABLES.len() * ROWS as usize;
    let first = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "a quarter of the snapshot in kafka", || async {
        first.assert_running("during the initial snapshot");
        records_in(kafka, &s, &TABLES).await >= total / 4
    })
    .await;
    first.kill_9();
    let reached = records_in(kafka, &s, &TABLES).await;
    assert!(reached < total, "killed mid-snapshot: {reached} records");
    slots_released(&s).await;
    let resumed = ConnectorProcess::spawn(&args, logs.path(1));
    resumed.await_streaming(&s).await;
    let log = resumed.log_text();
    assert!(
        log.contains("resuming the interrupted initial snapshot"),
        "the restart resumes the snapshot rather than starting over; its log:\n{log}"
    );
    stop_tx.send(true).expect("writer listens");
    let rounds = writer.await.expect("writer");
    let (mut resent, mut incremental) = (0, 0);
    for table in TABLES {
        wait_for_topic_to_equal_table(kafka, &s, table).await;
        let records = consume_all(&kafka.bootstrap_servers(), &s.topic(table), TIMEOUT).await;
        for (initial, again) in reads_per_key(&records).values() {
            resent += (initial + again).saturating_sub(1);
            incremental += again;
        }
    }
    let bound = WORKERS * FETCH_SIZE + INCREMENTAL_CHUNK;
    println!(
        "read-only initial snapshot killed at {reached} of {total} records: {resent} rows sent \
         again (bound {bound}), {incremental} read by the resumed snapshot; {rounds} writer rounds"
    );
    assert!(incremental > 0, "the resumed snapshot read the rest");
    assert!(
        resent <= bound,
        "only unacknowledged chunks are read again: {resent} rows, at most {bound}"
    );
    // Nothing written to the source: the role only reads and its
    // transactions are read-only (a write would have failed the
    // connector), and no object appeared.
    let tables = "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class c \
                  JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = 'public' AND c.relkind = 'r'";
    assert_eq!(s.query_one(tables).as_deref(), Some("a,b,c"));
    let grants = format!(
        "SELECT string_agg(DISTINCT privilege_type, ',') FROM information_schema.role_table_grants \
         WHERE grantee = '{role}'"
    );
    assert_eq!(s.query_one(&grants).as_deref(), Some("SELECT"));
    resumed.terminate_cleanly(TIMEOUT).await;

    // 2. Exactly-once: stopped dead before the Kafka transaction holding
    // the signal's effect commits, then killed.
    let mut eos = args.clone();
    eos.extend(["--delivery".to_owned(), "exactly-once".to_owned()]);
    let marker = std::env::temp_dir().join(unique_name("signal-commit"));
    let paused = ConnectorProcess::spawn_with_env(
        &eos,
        logs.path(2),
        &[(
            PAUSE_BEFORE_SIGNAL_COMMIT,
            format!("1:{}", marker.display()),
        )],
    );
    wait_until(TIMEOUT, "the exactly-once connector to stream", || async {
        paused.assert_running("before streaming");
        paused.log_text().contains("reading signals from kafka")
    })
    .await;
    let (servers, topic_a) = (kafka.bootstrap_servers(), s.topic("a"));
    // Read_committed, until idle: the topic holds commit markers now.
    let read_a = || consume_until_idle(&servers, &topic_a, Duration::from_secs(2), TIMEOUT);
    let before: BTreeSet<(i32, i64)> = (read_a().await.iter())
        .map(|r| (r.partition, r.offset))
        .collect();
    let offset = kafka_signal(
        kafka,
        &signal_topic,
        &s.prefix,
        json!({"id": "ro-eos", "type": "execute-snapshot",
               "data": {"data-collections": ["public.a"], "type": "incremental"}}),
    )
    .await;
    wait_until(
        TIMEOUT,
        "the pause before the signal's kafka commit",
        || async {
            paused.assert_running("before the pause");
            marker.exists()
        },
    )
    .await;
    let group = "kafka-signal";
    let committed = committed_offset(kafka, group, &signal_topic).await;
    assert!(
        committed.is_none_or(|next| next <= offset),
        "the signal's offset ({offset}) is not committed before the Kafka transaction holding \
         its effect: the group's committed position is {committed:?}"
    );
    paused.kill_9();
    let _ = std::fs::remove_file(&marker);
    slots_released(&s).await;
    let restarted = ConnectorProcess::spawn(&eos, logs.path(3));
    let rows: BTreeSet<i64> = table_state(&s, "a").keys().copied().collect();
    let reads = wait_for_reads(&read_a, &before, &rows, &restarted).await;
    let once: BTreeSet<i64> = reads.iter().copied().collect();
    assert_eq!(once, rows, "every row of a read after the restart");
    assert_eq!(reads.len(), rows.len(), "each once (read_committed)");
    wait_until(TIMEOUT, "the signal's offset committed", || async {
        committed_offset(kafka, group, &signal_topic)
            .await
            .is_some_and(|next| next > offset)
    })
    .await;
    println!(
        "exactly-once: killed before the signal's kafka commit (group position {committed:?}, \
         signal at {offset}); after the restart {} rows of a read once",
        reads.len()
    );
    assert_eq!(
        latest_by_key(&read_a().await),
        table_state(&s, "a"),
        "the topic equals the table"
    );
    restarted.terminate_cleanly(TIMEOUT).await;
}

/// Waits until the incremental reads among the records `read` returns that
/// are not in `before` cover `rows`; returns their ids, in order.
async fn wait_for_reads<F, Fut>(
    read: &F,
    before: &BTreeSet<(i32, i64)>,
    rows: &BTreeSet<i64>,
    connector: &ConnectorProcess,
) -> Vec<i64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Vec<Record>>,
{
    let ids = |records: Vec<Record>| -> Vec<i64> {
        records
            .iter()
            .filter(|r| !before.contains(&(r.partition, r.offset)))
            .filter_map(|r| {
                let p = &r.value.as_ref()?["payload"];
                (p["op"] == "r" && p["source"]["snapshot"] == "incremental")
                    .then(|| p["after"]["id"].as_i64())?
            })
            .collect()
    };
    wait_until(TIMEOUT, "the snapshot after the restart", || async {
        connector.assert_running("during the snapshot");
        let seen: BTreeSet<i64> = ids(read().await).into_iter().collect();
        rows.is_subset(&seen)
    })
    .await;
    ids(read().await)
}
