//! `stop-snapshot` under `--delivery exactly-once`, once per signal
//! channel: an incremental snapshot of a 2400-row table in chunks of 100,
//! under a writer updating, deleting and inserting, is stopped a few chunks
//! in, then the connector (a child process) is killed with `kill -9` under
//! the writer and started again.
//!
//! - through the signal table, read-write watermarks;
//! - through Debezium's kafka signal topic with `--read-only` (a
//!   SELECT-only role): there the snapshot's progress lives only in Kafka
//!   (the progress record of each Kafka transaction) and the signal's
//!   offset is committed in the same Kafka transaction, so this is the path
//!   where a stop could be lost or half-applied; with watermarks, the kafka
//!   channel differs from the table only in where the signal is read, and
//!   the progress row is written as in the first test.
//!
//! The writer pauses before the stop, so no transaction written after it
//! can carry the stop into Kafka. Both assert, for a read_committed consumer: Debezium's
//! `ABORTED` naming the table, no chunk after it (no `IN_PROGRESS` note, no row past the
//! last chunk notified before it), no partial chunk (every untouched row up
//! to that chunk's end read, none after), the committed progress record no
//! longer listing the snapshot (and the progress row gone, read-write), the
//! restart after `kill -9` resuming nothing, and the stream complete before
//! and after it: the topic ends equal to the table except for the rows the
//! stopped snapshot never reached, with no version going back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

use super::common::compacted::{latest_by_key, table_state};
use super::common::process::{ConnectorProcess, LogDir};
use super::common::{
    consume_all, hold_for, read_raw, wait_for, wait_until, ReadUntil, Scenario, TIMEOUT,
};
use super::in_flight::{committed, create_tables, snapshot_reads, Writer};
use super::read_only::{assert_never_older, kafka_signal, select_only_role, with_flag};
use super::{signal, SIGNALS};

/// Rows per chunk.
const CHUNK: usize = 100;

/// The snapshotted table (2400 rows in [`super::in_flight::TABLES`]).
const TABLE: &str = "public.c";

/// Where the stop-snapshot signal is sent.
#[derive(Clone, Copy, Debug)]
enum Channel {
    /// A row of the signal table; read-write watermarks.
    SignalTable,
    /// A record of the kafka signal topic; `--read-only`.
    KafkaReadOnly,
}

/// The incremental notifications of signal `id`, in topic order, as
/// (type, payload).
async fn notes(kafka: &Kafka, topic: &str, id: &str) -> Vec<(String, Json)> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .into_iter()
        .filter_map(|r| {
            let p = r.value?["payload"].clone();
            let wanted = p["aggregate_type"] == "Incremental Snapshot" && p["id"] == id;
            wanted.then(|| (p["type"].as_str().unwrap_or("").to_owned(), p))
        })
        .collect()
}

fn chunks_notified(notes: &[(String, Json)]) -> usize {
    notes.iter().filter(|(k, _)| k == "IN_PROGRESS").count()
}

/// The newest progress record of connector `prefix` a read_committed
/// consumer sees.
async fn newest_progress(kafka: &Kafka, prefix: &str) -> Option<Json> {
    let until = ReadUntil {
        idle: Some(Duration::from_millis(500)),
        ..ReadUntil::count(usize::MAX, TIMEOUT)
    };
    let topic = format!("{prefix}.progress");
    read_raw(&kafka.bootstrap_servers(), &topic, until)
        .await
        .into_iter()
        .filter(|r| r.key.as_deref() == Some(prefix.as_bytes()))
        .filter_map(|r| serde_json::from_slice(r.value.as_deref()?).ok())
        .next_back()
}

/// Whether a progress record lists no incremental snapshot table.
fn lists_no_table(record: &Json) -> bool {
    let tables = &record["incremental_snapshot"]["tables"];
    tables.is_null() || tables.as_array().is_some_and(Vec::is_empty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_snapshot_exactly_once_through_the_signal_table() {
    stop_under_exactly_once(Channel::SignalTable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_snapshot_exactly_once_through_kafka_read_only() {
    stop_under_exactly_once(Channel::KafkaReadOnly).await;
}

async fn stop_under_exactly_once(channel: Channel) {
    let started = Instant::now();
    let kafka = Kafka::shared();
    let name = match channel {
        Channel::SignalTable => "eosstop",
        Channel::KafkaReadOnly => "eosstopro",
    };
    let s = Scenario::new(Postgres::shared(), name);
    create_tables(&s);
    let notifications = format!("{}.notifications", s.prefix);
    let signals = format!("{}-signal", s.prefix);
    let common = [
        "--delivery",
        "exactly-once",
        "--snapshot-mode",
        "no_data",
        "--incremental-snapshot-chunk-size",
        &CHUNK.to_string(),
        "--notification-enabled-channels",
        "sink",
        "--notification-sink-topic-name",
        &notifications,
    ]
    .map(str::to_owned);
    let args = match channel {
        Channel::SignalTable => {
            s.sql(SIGNALS);
            s.sql(&format!(
                "CREATE PUBLICATION {} FOR TABLE a, b, c, d, signals",
                s.publication
            ));
            let mut args = s.args(
                &kafka.bootstrap_servers(),
                &["--signal-data-collection", "public.signals"],
            );
            args.extend(common);
            args
        }
        Channel::KafkaReadOnly => {
            s.sql(&format!(
                "CREATE PUBLICATION {} FOR TABLE a, b, c, d",
                s.publication
            ));
            let (_, url) = select_only_role(&s, "a, b, c, d").await;
            // The signal topic exists before the connector reads it.
            kafka_signal(kafka, &signals, "someone-else", json!({"type": "log"})).await;
            let mut args = s.args(
                &kafka.bootstrap_servers(),
                &["--read-only", "--signal-enabled-channels", "kafka"],
            );
            args.extend(common);
            with_flag(args, "--pg-url", &url)
        }
    };
    let send = |id: &'static str, kind: &'static str, data: Json| {
        let (s, signals) = (&s, &signals);
        async move {
            match channel {
                Channel::SignalTable => signal(s, id, kind, data),
                Channel::KafkaReadOnly => {
                    let value = json!({"id": id, "type": kind, "data": data});
                    kafka_signal(kafka, signals, &s.prefix, value).await;
                }
            }
        }
    };

    let logs = LogDir::new(name);
    let connector = ConnectorProcess::spawn(&args, logs.path(0));
    s.await_slot().await;
    let writer = Writer::start(&s, 0);
    connector.await_streaming(&s).await;
    send(
        "eos-c",
        "execute-snapshot",
        json!({"data-collections": [TABLE], "type": "incremental"}),
    )
    .await;
    wait_until(TIMEOUT, "three chunks of c", || async {
        chunks_notified(&notes(kafka, &notifications, "eos-c").await) >= 3
    })
    .await;
    // The source goes quiet before the stop: no transaction written after
    // it can carry it into Kafka.
    let paused_at = writer.stop().await;
    send(
        "eos-stop",
        "stop-snapshot",
        json!({"data-collections": [TABLE], "type": "incremental"}),
    )
    .await;
    let seen = wait_for(TIMEOUT, "ABORTED", || async {
        let seen = notes(kafka, &notifications, "eos-c").await;
        match seen.iter().any(|(k, _)| k == "ABORTED") {
            true => Ok(seen),
            false => Err(format!("{} notes", seen.len())),
        }
    })
    .await;
    let stop = seen
        .iter()
        .position(|(k, _)| k == "ABORTED")
        .expect("ABORTED");
    assert_eq!(
        seen[stop].1["additional_data"]["data_collections"], TABLE,
        "ABORTED names the stopped table, as Debezium's"
    );
    // The end of the last chunk notified before the stop: Kafka has every
    // chunk up to there, and nothing after.
    let reached: i64 = seen[..stop]
        .iter()
        .filter(|(k, _)| k == "IN_PROGRESS")
        .filter_map(|(_, p)| {
            p["additional_data"]["last_processed_key"]
                .as_str()?
                .parse()
                .ok()
        })
        .max()
        .expect("a chunk before the stop");
    let chunks = chunks_notified(&seen[..stop]);

    // A Kafka transaction commits a progress record that lists no snapshot
    // (with the signal's offset, kafka channel);
    // read-write, the progress row is deleted too.
    let record = wait_for(
        TIMEOUT,
        "a progress record without the snapshot",
        || async {
            match newest_progress(kafka, &s.prefix).await {
                Some(record) if lists_no_table(&record) => Ok(record),
                other => Err(format!("the newest is {other:?}")),
            }
        },
    )
    .await;
    if let Channel::SignalTable = channel {
        let row = format!("SELECT data FROM signals WHERE id = 'pgcdc-{}'", s.slot);
        assert_eq!(s.query_one(&row), None, "the progress row is deleted");
    }
    // Streaming goes on past the stop.
    let writer = Writer::start(&s, paused_at);
    s.await_confirmed_past_now("the stream confirmed past the stop")
        .await;
    let after_stop = notes(kafka, &notifications, "eos-c").await;
    assert!(
        after_stop
            .iter()
            .skip(stop)
            .all(|(k, _)| k != "IN_PROGRESS"),
        "no chunk after the stop: {:?}",
        after_stop.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );

    // kill -9, and a restart under the writer that resumes nothing.
    connector.kill_9();
    wait_until(TIMEOUT, "the killed walsender to let go", || async {
        s.slot_active() == Some(false)
    })
    .await;
    let connector = ConnectorProcess::spawn(&args, logs.path(1));
    connector.await_streaming(&s).await;
    hold_for(Duration::from_secs(2), || async {
        let now = notes(kafka, &notifications, "eos-c").await;
        assert_eq!(
            now.len(),
            after_stop.len(),
            "the restart notifies nothing of the stopped snapshot"
        );
    })
    .await;
    assert!(
        !connector.log_text().contains("resuming"),
        "nothing resumed after the stop:\n{}",
        connector.log_text()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rounds = writer.stop().await;
    assert!(
        paused_at > 20 && rounds - paused_at > 20,
        "the writer overlapped the snapshot, and the stream after the stop and the restart ({paused_at}, then {rounds} rounds)"
    );

    // The stream is complete: the topic equals the table, except the rows
    // the stopped snapshot never reached (untouched by the writer, past the
    // last chunk).
    let expected: BTreeMap<i64, Json> = table_state(&s, "c")
        .into_iter()
        .filter(|(id, row)| row["v"] != 0 || *id <= reached)
        .collect();
    let records = wait_for(TIMEOUT, "the topic of c to equal the table", || async {
        let records = committed(kafka, &s, "c").await;
        match latest_by_key(&records) == expected {
            true => Ok(records),
            false => Err(format!("{} records", records.len())),
        }
    })
    .await;
    assert_never_older(&records, "c");
    let reads = snapshot_reads(&records);
    let read: BTreeMap<i64, i64> = reads.iter().copied().collect();
    assert_eq!(read.len(), reads.len(), "no snapshot row twice");
    let past: Vec<i64> = read.keys().copied().filter(|id| *id > reached).collect();
    assert!(
        past.is_empty(),
        "no row past the last chunk before the stop ({reached}): {past:?}"
    );
    let untouched: Vec<i64> = expected
        .iter()
        .filter(|(id, row)| row["v"] == 0 && **id <= reached)
        .map(|(id, _)| *id)
        .collect();
    let missing: Vec<&i64> = untouched
        .iter()
        .filter(|id| read.get(id) != Some(&0))
        .collect();
    assert!(
        missing.is_empty(),
        "every chunk whole: each untouched row up to {reached} read, missing {missing:?}"
    );
    println!(
        "exactly-once stop-snapshot via {channel:?}: {chunks} chunks before the stop (up to key {reached}), {} rows read, {rounds} writer rounds, progress record after the stop {record}; {:.1}s",
        reads.len(),
        started.elapsed().as_secs_f64()
    );
    connector.terminate_cleanly(TIMEOUT).await;
}
