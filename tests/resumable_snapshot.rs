//! The resumable initial snapshot against real Postgres and Kafka: the
//! connector binary is killed (`kill -9`) at several points of a
//! multi-table, multi-chunk snapshot while a load updates, inserts and
//! deletes rows, and restarted each time. The first restart resumes the
//! snapshot from the progress recorded in Kafka as an incremental snapshot
//! against the stream; later kills land in that. At the end every topic
//! equals its table key by key, and the snapshot rows (`op: "r"`) sent more
//! than once are counted, printed and bounded by what was unacknowledged at
//! the kills (at-least-once), or are none among committed records
//! (exactly-once).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::compacted::{latest_by_key, reads_per_key, records_in, table_state};
use common::process::{ConnectorProcess, LogDir};
use common::{
    committed_progress, consume_all, consume_until_idle, wait_until, Record, Scenario, TIMEOUT,
};
use pgcdc_testcontainers::{Kafka, Postgres};

const TABLES: [&str; 3] = ["orders", "lines", "parts"];
/// Rows per table before the snapshot.
const ROWS: i64 = 6_000;
const FETCH_SIZE: usize = 250;
const WORKERS: usize = 2;
const INCREMENTAL_CHUNK: usize = 1000;
const KILLS: usize = 3;
const SIGNALS: &str =
    "CREATE TABLE signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))";

/// Everything in `topic`: read_committed, so under exactly-once only what
/// committed (whose watermarks also count commit markers: read until idle).
async fn read_topic(kafka: &Kafka, topic: &str, exactly_once: bool) -> Vec<Record> {
    let bootstrap = kafka.bootstrap_servers();
    if exactly_once {
        consume_until_idle(&bootstrap, topic, Duration::from_secs(3), TIMEOUT).await
    } else {
        consume_all(&bootstrap, topic, TIMEOUT).await
    }
}

async fn kill_9_during_a_snapshot_under_load(name: &str, delivery: &str) {
    let exactly_once = delivery == "exactly-once";
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), name);
    for table in TABLES {
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL)"
        ));
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, 0, repeat('x', 100) FROM generate_series(1, {ROWS}) g"
        ));
    }
    s.sql(SIGNALS);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE {}, signals",
        s.publication,
        TABLES.join(", ")
    ));
    let logs = LogDir::new(name);
    println!("[{name}] connector logs in {}", logs.dir().display());
    let args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--delivery",
            delivery,
            "--signal-data-collection",
            "public.signals",
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

    // Updates, deletes and inserts in every table, from before the
    // snapshot's consistent point until after the last restart.
    let pg = s.pg;
    let db = s.db.clone();
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
                     INSERT INTO {table} VALUES ({}, {round}, 'new') ON CONFLICT (id) DO UPDATE SET v = {round};",
                    (round * 7919 * i) % ROWS + 1,
                    (round * 104_729 * i + 3) % ROWS + 1,
                    ROWS + 1 + (round * i) % 500,
                ));
            }
            sql.push_str("COMMIT");
            client.batch_execute(&sql).await.expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        round
    });

    let total = TABLES.len() * ROWS as usize;
    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    let mut reached = 0;
    for kill in 1..=KILLS {
        // Kill once Kafka holds another ~20% of the snapshot's size.
        let target = reached + total / 5;
        wait_until(
            TIMEOUT,
            &format!("{target} records before kill {kill}"),
            || async {
                connector.assert_running(&format!("before kill {kill}"));
                records_in(kafka, &s, &TABLES).await >= target
            },
        )
        .await;
        connector.kill_9();
        reached = records_in(kafka, &s, &TABLES).await;
        println!("[{name}] kill {kill}: {reached} records in the topics");
        // This scenario's slots only (the snapshot's working slot is
        // `<slot>_snapshot`): the other test of this file runs beside it on
        // the same server, with slots of its own.
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
        connector = ConnectorProcess::spawn(&args, logs.path(kill));
    }
    connector.await_streaming(&s).await;
    let resumed = std::fs::read_to_string(logs.path(1)).unwrap_or_default();
    assert!(
        resumed.contains("resuming the interrupted initial snapshot"),
        "the first restart resumes the snapshot rather than starting over; its log:\n{resumed}"
    );
    stop_tx.send(true).expect("writer listens");
    let rounds = writer.await.expect("writer");
    println!("[{name}] writer committed {rounds} transactions");

    let mut resent = 0;
    let mut incremental = 0;
    for table in TABLES {
        let topic = s.topic(table);
        let expected = table_state(&s, table);
        wait_until(
            TIMEOUT,
            &format!("topic of {table} to equal the table"),
            || {
                let topic = topic.clone();
                let expected = &expected;
                async move {
                    let records = read_topic(kafka, &topic, exactly_once).await;
                    latest_by_key(&records) == *expected
                }
            },
        )
        .await;
        let records = read_topic(kafka, &topic, exactly_once).await;
        let reads = reads_per_key(&records);
        for (initial, resumed) in reads.values() {
            resent += (initial + resumed).saturating_sub(1);
            incremental += resumed;
        }
        let in_topic: BTreeSet<i64> = records
            .iter()
            .filter_map(|r| r.key.as_ref().and_then(|k| k["payload"]["id"].as_i64()))
            .collect();
        for id in expected.keys().filter(|&&id| id <= ROWS) {
            assert!(
                in_topic.contains(id),
                "{table} id {id} is in the table but not in its topic"
            );
        }
    }
    let bound = KILLS * (WORKERS * FETCH_SIZE + INCREMENTAL_CHUNK);
    println!(
        "[{name}] snapshot rows sent more than once: {resent} (bound {bound}); rows read by the resumed (incremental) snapshot: {incremental}"
    );
    assert!(
        incremental > 0,
        "the resumed snapshot read the rest incrementally"
    );
    if exactly_once {
        assert_eq!(
            resent, 0,
            "a read_committed consumer sees every snapshot row once"
        );
    } else {
        assert!(
            resent <= bound,
            "only unacknowledged chunks are read again: {resent} rows re-sent, at most {bound}"
        );
    }
    connector.terminate_cleanly(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_kill_9_resends_only_unacknowledged_chunks() {
    kill_9_during_a_snapshot_under_load("resumealo", "at-least-once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_kill_9_commits_every_snapshot_row_once() {
    kill_9_during_a_snapshot_under_load("resumeeos", "exactly-once").await;
}

/// `--snapshot-checkpoint-interval`: at 0 a checkpoint follows every chunk
/// that sent rows; at an interval longer than the snapshot none is taken
/// before it ends (the snapshot is then one Kafka wait, and a crash would
/// start it over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_taken_at_most_once_per_interval() {
    const ROWS: usize = 200;
    const FETCH: usize = 10;
    let kafka = Kafka::shared();
    for (interval, name) in [("0", "ckptevery"), ("1h", "ckpthour")] {
        let s = Scenario::new(Postgres::shared(), name);
        s.sql(&format!(
            "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL); \
             INSERT INTO t SELECT g, 0 FROM generate_series(1, {ROWS}) g; \
             {SIGNALS}; CREATE PUBLICATION {} FOR TABLE t, signals",
            s.publication
        ));
        let mut args = vec!["run".to_owned()];
        args.extend(s.args(
            &kafka.bootstrap_servers(),
            &[
                "--signal-data-collection",
                "public.signals",
                "--snapshot-fetch-size",
                &FETCH.to_string(),
                "--snapshot-workers",
                "1",
                "--snapshot-checkpoint-interval",
                interval,
                "--stop-when-caught-up",
            ],
        ));
        let (code, _, stderr) = common::process::run_binary(args).await;
        assert_eq!(code, Some(0), "[{name}] the bounded run succeeds: {stderr}");
        let topic = s.topic("t");
        assert_eq!(
            consume_all(&kafka.bootstrap_servers(), &topic, TIMEOUT)
                .await
                .len(),
            ROWS,
            "[{name}] every row in its topic"
        );
        let checkpoints = committed_progress(kafka, &s.prefix, Duration::from_secs(1))
            .await
            .iter()
            .filter(|progress| !progress["initial_snapshot"].is_null())
            .count();
        println!(
            "[{name}] {checkpoints} checkpoints for {} chunks",
            ROWS / FETCH
        );
        match interval {
            // Each of the 20 full chunks sent rows; the last, empty one
            // only finishes the table, which changes the progress too.
            "0" => assert!(
                (ROWS / FETCH..=ROWS / FETCH + 1).contains(&checkpoints),
                "[{name}] one checkpoint per chunk: {checkpoints}"
            ),
            _ => assert_eq!(checkpoints, 0, "[{name}] none within the hour"),
        }
    }
}
