//! A paused incremental snapshot across a graceful restart, read-write
//! watermarks (signal table), at-least-once: the connector binary reads the
//! four tables of [`TABLES`] in chunks of 100 under a writer, a
//! `pause-snapshot` signal holds it a few chunks in, and SIGTERM stops it
//! while paused. The restart must stay paused (Debezium keeps the pause in
//! its offsets; here it is in the progress row): for a few seconds the
//! stream goes on and no watermark window opens, no chunk is emitted, no
//! notification comes. `resume-snapshot` then finishes it: every topic ends
//! equal to its table, no key's events go back to an older version, every
//! row the writer never touched is read, and none twice (a graceful stop
//! leaves nothing unacknowledged behind).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

use super::common::compacted::{latest_by_key, table_state};
use super::common::process::{ConnectorProcess, LogDir};
use super::common::{
    consume_all, hold_for, record_count, wait_for, wait_until, Record, Scenario, TIMEOUT,
};
use super::in_flight::{create_tables, progress_notes, snapshot_reads, Writer, TABLES};
use super::read_only::{assert_never_older, assert_untouched_rows_read, notification};
use super::{signal, SIGNALS};

/// Rows per chunk: small, so the pause comes with most chunks to go.
const CHUNK: usize = 100;

/// The connector's progress row on `s`: its `type` and its parsed `data`.
fn progress_row(s: &Scenario) -> Option<(String, Json)> {
    let rows =
        s.pg.query(
            &s.db,
            &format!(
                "SELECT type, data FROM signals WHERE id = 'pgcdc-{}'",
                s.slot
            ),
        )
        .expect("the progress row query");
    let row = rows.into_iter().next()?;
    let kind = row[0].clone().expect("a type");
    let data = serde_json::from_str(row[1].as_deref().expect("data")).expect("progress JSON");
    Some((kind, data))
}

/// Where each table's topic ends now (the topics are not transactional:
/// the record count is the next offset).
async fn record_counts(kafka: &Kafka, s: &Scenario) -> Vec<i64> {
    let mut ends = Vec::new();
    for (table, _) in TABLES {
        let count = record_count(&kafka.bootstrap_servers(), &s.topic(table)).await;
        ends.push(count as i64);
    }
    ends
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_snapshot_stays_paused_across_a_graceful_restart() {
    let started = Instant::now();
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "pausestop");
    create_tables(&s);
    s.sql(SIGNALS);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE a, b, c, d, signals",
        s.publication
    ));
    let notifications = format!("{}.notifications", s.prefix);
    let args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--signal-data-collection",
            "public.signals",
            "--snapshot-mode",
            "no_data",
            "--incremental-snapshot-chunk-size",
            &CHUNK.to_string(),
            "--notification-enabled-channels",
            "sink",
            "--notification-sink-topic-name",
            &notifications,
        ],
    );
    let logs = LogDir::new("pausestop");
    let connector = ConnectorProcess::spawn(&args, logs.path(0));
    s.await_slot().await;
    let writer = Writer::start(&s, 0);
    connector.await_streaming(&s).await;
    signal(
        &s,
        "held",
        "execute-snapshot",
        json!({"data-collections": ["public.a", "public.b", "public.c", "public.d"], "type": "incremental"}),
    );

    // A few chunks in, paused; once the progress row holds the pause, a
    // graceful stop.
    wait_until(TIMEOUT, "three chunks", || async {
        let notes = progress_notes(kafka, &notifications, "held").await;
        notes.iter().filter(|(k, _)| k == "IN_PROGRESS").count() >= 3
    })
    .await;
    signal(
        &s,
        "pause-1",
        "pause-snapshot",
        json!({"type": "incremental"}),
    );
    notification(kafka, &notifications, "PAUSED", "held", "").await;
    wait_until(TIMEOUT, "the pause in the progress row", || async {
        progress_row(&s).is_some_and(|(_, p)| p["paused"] == true)
    })
    .await;
    connector.terminate_cleanly(TIMEOUT).await;
    let (_, stopped) = progress_row(&s).expect("the stop kept the progress row");
    let current = stopped["tables"][0].as_str().map(str::to_owned);
    assert!(
        stopped["paused"] == true && current.is_some(),
        "the stop left a paused snapshot with tables to read: {stopped}"
    );
    let notes_at_stop = progress_notes(kafka, &notifications, "held").await;
    assert!(
        !notes_at_stop.iter().any(|(k, _)| k == "COMPLETED"),
        "stopped mid-snapshot: {notes_at_stop:?}"
    );
    // The row covers every chunk Kafka has: the current table's key is its
    // largest row read (the chunk emitted before the pause included).
    let current = current.expect("a current table");
    let table = current.trim_start_matches("public.");
    let records = consume_all(&kafka.bootstrap_servers(), &s.topic(table), TIMEOUT).await;
    let largest_read = snapshot_reads(&records).iter().map(|(id, _)| *id).max();
    let recorded = stopped["last_key"][0]
        .as_str()
        .map(|k| k.parse::<i64>().expect("an integer key"));
    assert_eq!(
        recorded, largest_read,
        "the paused progress row records the last chunk Kafka acknowledged ({table}): {stopped}"
    );
    let ends_at_stop = record_counts(kafka, &s).await;

    // The restart streams, and stays paused.
    let connector = ConnectorProcess::spawn(&args, logs.path(1));
    connector.await_streaming(&s).await;
    assert!(
        connector
            .log_text()
            .contains("resuming the incremental snapshot"),
        "the restart read the progress row"
    );
    let row_at_restart = progress_row(&s).expect("the progress row");
    let held_from = Instant::now();
    hold_for(Duration::from_secs(4), || async {
        connector.assert_running("while paused");
        assert_eq!(
            progress_row(&s).as_ref(),
            Some(&row_at_restart),
            "no watermark window opens while paused, across the restart"
        );
        let notes = progress_notes(kafka, &notifications, "held").await;
        assert_eq!(
            notes, notes_at_stop,
            "no chunk notified while paused, across the restart"
        );
    })
    .await;
    let held_secs = held_from.elapsed().as_secs_f64();
    s.await_confirmed_past_now("streaming goes on while paused")
        .await;
    let ends_at_resume = record_counts(kafka, &s).await;
    let d_streamed = ends_at_resume[3] - ends_at_stop[3];
    assert!(d_streamed > 0, "the writer's changes streamed while paused");

    signal(
        &s,
        "resume-1",
        "resume-snapshot",
        json!({"type": "incremental"}),
    );
    notification(kafka, &notifications, "RESUMED", "held", "").await;
    notification(kafka, &notifications, "COMPLETED", "held", "").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rounds = writer.stop().await;
    let snapshot_secs = started.elapsed().as_secs_f64();

    let mut summary = Vec::new();
    for (i, (table, _)) in TABLES.into_iter().enumerate() {
        let expected = table_state(&s, table);
        let records = wait_for(
            TIMEOUT,
            &format!("topic of {table} to equal the table"),
            || async {
                let records =
                    consume_all(&kafka.bootstrap_servers(), &s.topic(table), TIMEOUT).await;
                match latest_by_key(&records) == expected {
                    true => Ok(records),
                    false => Err(format!("{} records", records.len())),
                }
            },
        )
        .await;
        assert_never_older(&records, &format!("{table}, across the graceful restart"));
        assert!(
            records.iter().all(|r| r.partition == 0),
            "{table}: one partition, so its record count is its next offset"
        );
        let while_paused: Vec<Record> = (records.iter())
            .filter(|r| (ends_at_stop[i]..ends_at_resume[i]).contains(&r.offset))
            .cloned()
            .collect();
        assert!(
            snapshot_reads(&while_paused).is_empty(),
            "{table}: no snapshot row between the stop and the resume"
        );
        let reads = snapshot_reads(&records);
        let read: BTreeMap<i64, i64> = reads.iter().copied().collect();
        let untouched = assert_untouched_rows_read(table, &expected, &read);
        assert!(
            untouched * 2 > expected.len(),
            "{table}: the untouched rows, three in four, are most of the table ({untouched} of {})",
            expected.len()
        );
        assert_eq!(
            reads.len(),
            read.len(),
            "{table}: no snapshot row twice (the stop left nothing unacknowledged)"
        );
        summary.push(format!("{table}: {} read", reads.len()));
    }
    connector.terminate_cleanly(TIMEOUT).await;
    println!(
        "pause across a graceful restart: held {held_secs:.1}s paused after the restart ({d_streamed} records of d streamed meanwhile, no chunk); {}; {rounds} writer rounds, snapshot done at {snapshot_secs:.1}s, {:.1}s in all",
        summary.join(", "),
        started.elapsed().as_secs_f64()
    );
}
