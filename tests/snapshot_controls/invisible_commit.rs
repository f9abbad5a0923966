//! A transaction the stream carries before it is visible: its commit record
//! is flushed (so streamed and emitted), but it then waits for a synchronous
//! standby that never answers, and every snapshot, a chunk's too, still sees
//! the row it changed as it was. A snapshot read meanwhile must not follow
//! the streamed change with that older row: in a compacted topic the older
//! version would win. Both incremental windows are checked, the signal
//! table's watermarks and `--read-only`'s snapshot marks, and a blocking
//! snapshot; each time the topic must end equal to the table, no key going
//! back to an older version, every other row read by the snapshot.
//!
//! Each snapshot read put off for the invisible commit is counted
//! (`pgcdc_snapshot_reads_deferred_total`).
//!
//! The server is this test's own, with `synchronous_standby_names` naming a
//! standby that never connects and `synchronous_commit = local` for every
//! session but the writer's, which sets it `on` and so waits at its commit
//! until it is cancelled (the commit then stands, and becomes visible).

use std::sync::Arc;
use std::time::Duration;

use pgcdc_kafka::metrics::Metrics;

use pgcdc_testcontainers::{Kafka, Postgres, PostgresOptions};
use serde_json::json;

use super::common::compacted::wait_for_topic_to_equal_table;
use super::common::{consume_all, metric_sample, wait_for, wait_until, Record, Scenario, TIMEOUT};
use super::read_only::{assert_never_older, kafka_signal, notification};
use super::{signal, wait_for_notification, SIGNALS};

const ROWS: i64 = 20;

/// How the snapshot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Incremental, the signal table's watermarks.
    Watermarks,
    /// Incremental, `--read-only` (signals through Kafka).
    ReadOnly,
    /// Blocking (`"type": "blocking"`), through the signal table.
    Blocking,
}
/// The row the held transaction updates.
const HELD: i64 = 7;

/// The blocking snapshot's notifications' `aggregate_type`.
const INITIAL: &str = "Initial Snapshot";

/// The ids the snapshot read (`op: "r"`, any marker).
fn reads(records: &[Record]) -> Vec<i64> {
    (records.iter())
        .filter_map(|r| {
            let p = &r.value.as_ref()?["payload"];
            (p["op"] == "r").then(|| p["after"]["id"].as_i64())?
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_streamed_before_it_is_visible_is_never_followed_by_an_older_snapshot_row() {
    let kafka = Kafka::shared();
    let options = PostgresOptions {
        settings: vec![
            ("synchronous_standby_names".into(), "nobody".into()),
            ("synchronous_commit".into(), "local".into()),
        ],
        ..Default::default()
    };
    let pg: &'static Postgres = Box::leak(Box::new(
        Postgres::launch_with(&options).expect("a private postgres"),
    ));
    for mode in [Mode::Watermarks, Mode::ReadOnly, Mode::Blocking] {
        held_commit_under_a_snapshot(kafka, pg, mode).await;
    }
}

async fn held_commit_under_a_snapshot(kafka: &Kafka, pg: &'static Postgres, mode: Mode) {
    let read_only = mode == Mode::ReadOnly;
    let s = Scenario::new(pg, &format!("held{mode:?}").to_lowercase());
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v bigint NOT NULL)");
    s.sql("ALTER TABLE t REPLICA IDENTITY FULL");
    s.sql(&format!(
        "INSERT INTO t SELECT g, 0 FROM generate_series(1, {ROWS}) g"
    ));
    let notifications = format!("{}.notifications", s.prefix);
    let signal_topic = format!("{}-signal", s.prefix);
    let mut extra = vec![
        "--snapshot-mode",
        "no_data",
        "--notification-enabled-channels",
        "sink",
        "--notification-sink-topic-name",
        &notifications,
    ];
    if read_only {
        s.sql(&format!("CREATE PUBLICATION {} FOR TABLE t", s.publication));
        // The signal topic exists before the connector reads it.
        kafka_signal(kafka, &signal_topic, "someone-else", json!({"type": "log"})).await;
        extra.extend(["--read-only", "--signal-enabled-channels", "kafka"]);
    } else {
        s.sql(SIGNALS);
        s.sql(&format!(
            "CREATE PUBLICATION {} FOR TABLE t, signals",
            s.publication
        ));
        extra.extend(["--signal-data-collection", "public.signals"]);
    }
    let metrics = Arc::new(Metrics::new());
    let running = s.start_with_metrics(
        s.args(&kafka.bootstrap_servers(), &extra),
        Arc::clone(&metrics),
    );
    s.await_slot().await;

    // The writer's commit waits for the standby: streamed, not visible.
    let writer = pg.connect(&s.db).await.expect("the writer connects");
    writer
        .batch_execute("SET synchronous_commit = on")
        .await
        .expect("synchronous commit for the writer");
    let pid: i32 = (writer.query_one("SELECT pg_backend_pid()", &[]).await)
        .expect("the writer's pid")
        .get(0);
    let held = tokio::spawn(async move {
        writer
            .batch_execute(&format!("UPDATE t SET v = 1 WHERE id = {HELD}"))
            .await
    });
    let topic = s.topic("t");
    wait_until(TIMEOUT, "the held update in the topic", || async {
        consume_all(&kafka.bootstrap_servers(), &topic, TIMEOUT)
            .await
            .iter()
            .any(|r| {
                r.value.as_ref().is_some_and(|v| {
                    v["payload"]["op"] == "u" && v["payload"]["after"]["id"] == HELD
                })
            })
    })
    .await;
    assert_eq!(
        s.query_one(&format!("SELECT v::text FROM t WHERE id = {HELD}")),
        Some("0".to_owned()),
        "{mode:?}: the update is streamed but not visible yet"
    );
    assert!(
        !held.is_finished(),
        "{mode:?}: the writer waits for the standby"
    );

    let kind = match mode {
        Mode::Blocking => "blocking",
        _ => "incremental",
    };
    let data = json!({"data-collections": ["public.t"], "type": kind});
    match read_only {
        true => {
            let value = json!({"id": "held-1", "type": "execute-snapshot", "data": data});
            kafka_signal(kafka, &signal_topic, &s.prefix, value).await;
        }
        false => signal(&s, "held-1", "execute-snapshot", data),
    }
    // Snapshots are taken while the update stays invisible.
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.sql(&format!("SELECT pg_cancel_backend({pid})"));
    held.await
        .expect("the writer's task")
        .expect("a cancelled wait for the standby leaves the commit standing");
    assert_eq!(
        s.query_one(&format!("SELECT v::text FROM t WHERE id = {HELD}")),
        Some("1".to_owned()),
        "{mode:?}: visible once the wait is cancelled"
    );

    match mode {
        Mode::Blocking => {
            wait_for_notification(kafka, &notifications, INITIAL, "COMPLETED", "held-1").await;
        }
        _ => {
            notification(kafka, &notifications, "COMPLETED", "held-1", "").await;
        }
    }
    let records = wait_for(TIMEOUT, "the snapshot's rows", || async {
        let records = consume_all(&kafka.bootstrap_servers(), &topic, TIMEOUT).await;
        match reads(&records).len() >= ROWS as usize - 1 {
            true => Ok(records),
            false => Err(format!("{} records", records.len())),
        }
    })
    .await;
    assert_never_older(&records, &format!("{mode:?}"));
    let deferred =
        metric_sample(&metrics.render(true), "pgcdc_snapshot_reads_deferred_total").unwrap_or(0.0);
    assert!(
        deferred >= 1.0,
        "{mode:?}: the reads put off for the held commit are counted ({deferred})"
    );
    wait_for_topic_to_equal_table(kafka, &s, "t").await;
    let mut read = reads(&records);
    read.sort_unstable();
    read.dedup();
    read.retain(|&id| id != HELD);
    assert_eq!(
        read,
        (1..=ROWS).filter(|&id| id != HELD).collect::<Vec<_>>(),
        "{mode:?}: every row the writer did not touch is read"
    );
    running.stop().await;
}
