//! Several tables' chunks in flight at once
//! (`--incremental-snapshot-tables-in-flight 3`), read-write watermarks,
//! exactly-once: four tables of different sizes are snapshotted while a
//! writer updates, deletes and inserts in all of them, and the connector
//! is stopped and restarted halfway. Checked against the tables:
//!
//! - every topic ends equal to its table, no key's events go back to an
//!   older version, every row the writer never touched is in the snapshot,
//!   and no snapshot row reached Kafka twice (the restart resumed every
//!   table from its own acknowledged key);
//! - the progress row the stop left holds a key for a table other than the
//!   first (each table in flight resumes after its own key);
//! - the tables really were read together: the notifications show the
//!   second and third tables' chunks before the first table completed, and
//!   the fourth table (which took the first one's place) completing before
//!   the third, which fails if the tables were read one after another.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::common::compacted::{latest_by_key, table_state};
use super::common::{
    consume_all, consume_until_idle, wait_for, wait_until, Record, Scenario, TIMEOUT,
};
use super::read_only::{assert_never_older, assert_untouched_rows_read};
use super::{signal, wait_for_notification, SIGNALS};

/// The tables and their sizes: small, medium, large, and one that waits
/// for a free place.
pub(super) const TABLES: [(&str, i64); 4] = [("a", 400), ("b", 1200), ("c", 2400), ("d", 1200)];

/// The incremental notifications of signal `id`, in topic order, as
/// (type, scanned or in-progress table).
pub(super) async fn progress_notes(kafka: &Kafka, topic: &str, id: &str) -> Vec<(String, String)> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .into_iter()
        .filter_map(|r| {
            let p = r.value?["payload"].clone();
            if p["aggregate_type"] != "Incremental Snapshot" || p["id"] != id {
                return None;
            }
            let data = &p["additional_data"];
            let table = match p["type"].as_str()? {
                "IN_PROGRESS" => data["current_collection_in_progress"].as_str(),
                "TABLE_SCAN_COMPLETED" => data["scanned_collection"].as_str(),
                _ => Some(""),
            }?;
            Some((p["type"].as_str()?.to_owned(), table.to_owned()))
        })
        .collect()
}

/// Where the first note of `kind` about `table` is.
pub(super) fn first(notes: &[(String, String)], kind: &str, table: &str) -> usize {
    notes
        .iter()
        .position(|(k, t)| k == kind && t == &format!("public.{table}"))
        .unwrap_or_else(|| panic!("no {kind} of {table} in {notes:?}"))
}

/// A data topic as a read_committed consumer sees it (the topic is
/// transactional: its offsets count commit markers too).
pub(super) async fn committed(kafka: &Kafka, s: &Scenario, table: &str) -> Vec<Record> {
    consume_until_idle(
        &kafka.bootstrap_servers(),
        &s.topic(table),
        Duration::from_secs(1),
        TIMEOUT,
    )
    .await
}

/// The tables' rows, and their topics as a read_committed consumer sees
/// them once they caught up: every writer transaction touched every table,
/// so once d's topic holds its last one, so do the others' (one Kafka
/// transaction each).
pub(super) async fn committed_tables(
    kafka: &Kafka,
    s: &Scenario,
) -> (Vec<BTreeMap<i64, Json>>, Vec<Vec<Record>>) {
    let expected: Vec<_> = TABLES.map(|(table, _)| table_state(s, table)).to_vec();
    let d = wait_for(TIMEOUT, "topic of d to equal the table", || async {
        let records = committed(kafka, s, "d").await;
        match latest_by_key(&records) == expected[3] {
            true => Ok(records),
            false => Err(format!("{} records", records.len())),
        }
    })
    .await;
    let mut topics =
        futures::future::join_all(["a", "b", "c"].map(|table| committed(kafka, s, table))).await;
    topics.push(d);
    (expected, topics)
}

pub(super) fn snapshot_reads(records: &[Record]) -> Vec<(i64, i64)> {
    records
        .iter()
        .filter_map(|r| {
            let p = &r.value.as_ref()?["payload"];
            (p["op"] == "r" && p["source"]["snapshot"] == "incremental")
                .then(|| Some((p["after"]["id"].as_i64()?, p["after"]["v"].as_i64()?)))?
        })
        .collect()
}

/// Creates the tables of [`TABLES`], `(id int, v bigint)`, every row at
/// `v = 0`; deletes carry the version they deleted (the staleness check).
pub(super) fn create_tables(s: &Scenario) {
    for (table, rows) in TABLES {
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v bigint NOT NULL)"
        ));
        s.sql(&format!("ALTER TABLE {table} REPLICA IDENTITY FULL"));
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, 0 FROM generate_series(1, {rows}) g"
        ));
    }
}

/// A writer on [`TABLES`]: each round updates, deletes and upserts rows of
/// every table in one transaction ([`writer_round`]), stamping `v` with
/// the round, so versions only grow (a writer started again goes on from
/// the last round). It touches the ids that are multiples of 4 and new ids
/// past the table's end; the others keep `v = 0`, so only the snapshot can
/// bring them.
pub(super) struct Writer {
    stop: watch::Sender<bool>,
    task: JoinHandle<i64>,
}

impl Writer {
    /// A writer whose first round comes after round `after`.
    pub(super) fn start(s: &Scenario, after: i64) -> Self {
        let (pg, db) = (s.pg, s.db.clone());
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let client = pg.connect(&db).await.expect("writer connects");
            let mut round = after;
            while !*stopped.borrow_and_update() {
                round += 1;
                let mut sql = String::from("BEGIN;");
                for (table, rows) in TABLES {
                    sql += &writer_round(table, rows, round);
                }
                client
                    .batch_execute(&(sql + "COMMIT"))
                    .await
                    .expect("write");
                // Pacing the load, not waiting for anything.
                tokio::time::sleep(Duration::from_millis(4)).await;
            }
            round
        });
        Writer { stop, task }
    }

    /// Stops the writer; returns its last round.
    pub(super) async fn stop(self) -> i64 {
        let _ = self.stop.send(true);
        self.task.await.expect("writer")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_tables_in_flight_under_load_with_a_restart() {
    let started = Instant::now();
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "inflight");
    create_tables(&s);
    s.sql(SIGNALS);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE a, b, c, d, signals",
        s.publication
    ));
    let notifications = format!("{}.notifications", s.prefix);
    let args = [
        "--snapshot-mode",
        "no_data",
        "--delivery",
        "exactly-once",
        "--signal-data-collection",
        "public.signals",
        "--incremental-snapshot-chunk-size",
        "200",
        "--incremental-snapshot-tables-in-flight",
        "3",
        "--notification-enabled-channels",
        "sink",
        "--notification-sink-topic-name",
        notifications.as_str(),
    ];
    let running = s.start(&kafka.bootstrap_servers(), &args);
    s.await_slot().await;

    let writer = Writer::start(&s, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(
        &s,
        "many",
        "execute-snapshot",
        json!({"data-collections": ["public.a", "public.b", "public.c", "public.d"], "type": "incremental"}),
    );

    let signalled = started.elapsed().as_secs_f64();

    // Halfway, once d took a's place: a graceful stop, and a restart.
    wait_until(TIMEOUT, "a chunk of d", || async {
        progress_notes(kafka, &notifications, "many")
            .await
            .iter()
            .any(|(k, t)| k == "IN_PROGRESS" && t == "public.d")
    })
    .await;
    running.stop().await;
    let row = s
        .query_one(&format!(
            "SELECT data FROM signals WHERE id = 'pgcdc-{}'",
            s.slot
        ))
        .expect("the stop recorded the snapshot's progress");
    let recorded: Json = serde_json::from_str(&row).expect("progress JSON");
    let tables = recorded["tables"].as_array().expect("tables");
    assert!(
        tables.len() >= 2
            && recorded["resume_after"]
                .as_object()
                .is_some_and(|k| !k.is_empty()),
        "a table other than the first resumes after its own key: {recorded}"
    );
    let running = s.start(&kafka.bootstrap_servers(), &args);
    wait_for_notification(
        kafka,
        &notifications,
        "Incremental Snapshot",
        "COMPLETED",
        "many",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rounds = writer.stop().await;
    assert!(
        rounds > 50,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );

    let snapshot_secs = started.elapsed().as_secs_f64();

    let (expected, topics) = committed_tables(kafka, &s).await;
    let mut summary = Vec::new();
    for (((table, _), expected), records) in TABLES.iter().zip(expected).zip(topics) {
        assert!(
            latest_by_key(&records) == expected,
            "{table}: the topic ends equal to the table"
        );
        assert_never_older(&records, table);
        let reads = snapshot_reads(&records);
        let read: BTreeMap<i64, i64> = reads.iter().copied().collect();
        assert_eq!(
            read.len(),
            reads.len(),
            "{table}: no snapshot row reached Kafka twice, across the restart"
        );
        let untouched = assert_untouched_rows_read(table, &expected, &read);
        assert!(
            untouched * 2 > expected.len(),
            "{table}: the untouched rows, three in four, are most of the table ({untouched} of {})",
            expected.len()
        );
        summary.push(format!("{table}: {} read", reads.len()));
    }

    let notes = progress_notes(kafka, &notifications, "many").await;
    let done_a = first(&notes, "TABLE_SCAN_COMPLETED", "a");
    assert!(
        first(&notes, "IN_PROGRESS", "b") < done_a && first(&notes, "IN_PROGRESS", "c") < done_a,
        "b and c were read alongside a: {notes:?}"
    );
    assert!(
        first(&notes, "IN_PROGRESS", "d") > done_a,
        "d waited for a free place: {notes:?}"
    );
    assert!(
        first(&notes, "TABLE_SCAN_COMPLETED", "d") < first(&notes, "TABLE_SCAN_COMPLETED", "c"),
        "d, read alongside c, completed first: {notes:?}"
    );
    running.stop().await;
    println!(
        "tables in flight: {}, {rounds} writer rounds; signalled at {signalled:.1}s, snapshot done at {snapshot_secs:.1}s, {:.1}s in all",
        summary.join(", "),
        started.elapsed().as_secs_f64()
    );
}

/// One writer round's statements for `table` of `rows` rows: an update, a
/// delete and an upsert stamped `v = round`, on ids that are multiples of
/// 4 and on new ids past the table's end, so the other rows keep `v = 0`
/// and only a snapshot can bring them.
pub(super) fn writer_round(table: &str, rows: i64, round: i64) -> String {
    let hot = |n: i64| n % (rows / 4) * 4 + 4;
    let upserted = match round % 2 {
        0 => hot(round * 13),
        _ => rows + round % 100 + 1,
    };
    format!(
        "UPDATE {table} SET v = {round} WHERE id = {}; \
         DELETE FROM {table} WHERE id = {}; \
         INSERT INTO {table} VALUES ({upserted}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round};",
        hot(round * 7919),
        hot(round * 31 + 7),
    )
}
