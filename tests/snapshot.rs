//! Initial snapshots against real Postgres and Kafka: existing rows arrive as
//! `op: "r"` events, joined to the stream without loss or resurrection, in
//! parallel chunks, surviving a crash mid-snapshot.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::compacted::{latest_by_key, table_state};
use common::{consume, consume_all, wait_for, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_then_stream_equals_the_final_table_under_concurrent_writes() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "snap");
    s.sql("CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, pad text)");
    s.sql("CREATE TABLE nokey (note text)");
    s.sql("CREATE TABLE empty (id int PRIMARY KEY)");
    s.sql("INSERT INTO big SELECT g, 0, repeat('x', 200) FROM generate_series(1, 20000) g");
    s.sql("INSERT INTO nokey VALUES ('a'), ('b'), (NULL)");
    let pages: i64 = s
        .query_one("SELECT pg_relation_size('big') / 8192")
        .unwrap()
        .parse()
        .unwrap();
    assert!(pages > 100, "big spans many pages ({pages})");

    // A writer that keeps updating, deleting and inserting while the snapshot runs.
    let pg = s.pg;
    let db = s.db.clone();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let committed = Arc::new(AtomicI64::new(0));
    let writer_committed = Arc::clone(&committed);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let id = (round * 7919) % 20000 + 1;
            client
                .batch_execute(&format!(
                    "BEGIN; UPDATE big SET v = v + 1 WHERE id = {id}; \
                     DELETE FROM big WHERE id = {}; \
                     INSERT INTO big VALUES ({}, {round}, 'new') ON CONFLICT (id) DO UPDATE SET v = {round}; COMMIT",
                    (id * 31) % 20000 + 1,
                    20000 + round % 500,
                ))
                .await
                .expect("write");
            writer_committed.store(round, Ordering::Relaxed);
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        round
    });

    let running = s.start(
        &kafka.bootstrap_servers(),
        &["--snapshot-workers", "3", "--snapshot-chunk-pages", "40"],
    );
    // Let writes overlap the snapshot and the stream after it.
    let topic = s.topic("big");
    wait_until(
        TIMEOUT,
        "the snapshot to complete (slot promoted)",
        || async {
            s.query_one(&format!(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}'",
                s.slot
            ))
            .as_deref()
                == Some("1")
        },
    )
    .await;
    // The writer goes on after the snapshot, so its changes stream after it
    // too.
    let at_promotion = committed.load(Ordering::Relaxed);
    wait_until(
        TIMEOUT,
        "100 writer transactions after the snapshot",
        || async { committed.load(Ordering::Relaxed) >= at_promotion + 100 },
    )
    .await;
    let _ = stop_tx.send(true);
    let rounds = writer.await.expect("writer");
    assert!(
        rounds > 10,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );
    let expected = table_state(&s, "big");

    // Everything the final table holds, read back through snapshot + stream.
    let records = wait_for(TIMEOUT, "the topic content to equal the table", || async {
        let records = consume_all(&kafka.bootstrap_servers(), &topic, TIMEOUT).await;
        let state = latest_by_key(&records);
        match state == expected {
            true => Ok(records),
            false => Err(format!(
                "{} keys in the topic state, {} in the table",
                state.len(),
                expected.len()
            )),
        }
    })
    .await;
    let snapshot_rows: Vec<&Record> = records
        .iter()
        .filter(|r| r.value.as_ref().is_some_and(|v| v["payload"]["op"] == "r"))
        .collect();
    assert!(
        snapshot_rows.len() >= 19_000,
        "existing rows arrive as reads ({})",
        snapshot_rows.len()
    );
    // Each key is read at most once, and reads come before any streamed
    // change of that key (tombstones included): a read is its key's first
    // record in the topic.
    let mut read_at: BTreeMap<i64, usize> = BTreeMap::new();
    let mut keys_seen: BTreeSet<i64> = BTreeSet::new();
    for (i, r) in records.iter().enumerate() {
        let key = r.key.as_ref().and_then(|k| k["payload"]["id"].as_i64());
        let first_of_its_key = key.is_some_and(|id| keys_seen.insert(id));
        let Some(p) = r.value.as_ref().map(|v| &v["payload"]) else {
            continue;
        };
        let id = key.expect("a keyed table's records have a key");
        if p["op"] == "r" {
            assert!(read_at.insert(id, i).is_none(), "key {id} read twice");
            assert!(
                first_of_its_key,
                "key {id}: a streamed change precedes its snapshot read"
            );
        }
    }
    let markers: Vec<&str> = snapshot_rows
        .iter()
        .map(|r| {
            r.value.as_ref().unwrap()["payload"]["source"]["snapshot"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        markers.iter().all(|m| *m != "false"),
        "read events carry a snapshot marker"
    );
    // In the topic's order (one partition): the table's first read says so,
    // its last too, and every read between them is "true", whichever worker
    // wrote it and wherever its batch ended.
    let (first, rest) = markers.split_first().expect("reads");
    let (last, middle) = rest.split_last().expect("more than one read");
    assert!(
        matches!(*first, "first" | "first_in_data_collection"),
        "the table's first read: {first}"
    );
    assert!(
        matches!(*last, "last" | "last_in_data_collection"),
        "the table's last read: {last}"
    );
    let odd: Vec<(usize, &&str)> = middle
        .iter()
        .enumerate()
        .filter(|(_, m)| **m != "true")
        .collect();
    assert!(odd.is_empty(), "reads between first and last: {odd:?}");
    let streamed = records
        .iter()
        .filter(|r| r.value.as_ref().is_some_and(|v| v["payload"]["op"] != "r"))
        .all(|r| r.value.as_ref().unwrap()["payload"]["source"]["snapshot"] == "false");
    assert!(streamed, "streamed changes say snapshot=false");

    let nokey = consume(&kafka.bootstrap_servers(), &s.topic("nokey"), 3, TIMEOUT).await;
    let mut notes: Vec<Json> = nokey
        .iter()
        .map(|r| r.value.as_ref().unwrap()["payload"]["after"]["note"].clone())
        .collect();
    notes.sort_by_key(|n| n.to_string());
    assert_eq!(notes, [json!("a"), json!("b"), json!(null)]);
    assert!(
        nokey.iter().all(|r| r.key.is_none()),
        "a table without key: null keys"
    );
    let all_markers: Vec<String> = records
        .iter()
        .chain(&nokey)
        .filter_map(|r| r.value.as_ref())
        .filter(|v| v["payload"]["op"] == "r")
        .map(|v| {
            v["payload"]["source"]["snapshot"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        all_markers.iter().filter(|m| *m == "first").count(),
        1,
        "one first record"
    );
    assert_eq!(
        all_markers.iter().filter(|m| *m == "last").count(),
        1,
        "one last record"
    );

    let summary = running.stop().await;
    assert!(summary.events >= 20_000);
    assert_eq!(
        s.query_one(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}_snapshot'",
            s.slot
        ))
        .as_deref(),
        Some("0"),
        "the working slot is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_snapshot_restarts_it_and_ends_correct() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "snapcrash");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("INSERT INTO t SELECT g, g FROM generate_series(1, 30000) g");
    let throttled = [
        "--snapshot-chunk-pages",
        "10",
        "--snapshot-workers",
        "2",
        "--max-in-flight-messages",
        "50",
        "--kafka-property",
        "linger.ms=50",
    ];
    let mut child = Command::new(BIN)
        .arg("run")
        .args(s.args(&kafka.bootstrap_servers(), &throttled))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let topic = s.topic("t");
    wait_until(TIMEOUT, "the snapshot to be under way", || async {
        !consume(
            &kafka.bootstrap_servers(),
            &topic,
            100,
            Duration::from_secs(1),
        )
        .await
        .is_empty()
    })
    .await;
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .expect("kill");
    let _ = child.wait();
    assert_eq!(
        s.query_one(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref(),
        Some("0"),
        "no real slot exists until the snapshot completes"
    );

    s.sql("UPDATE t SET v = -1 WHERE id <= 10");
    s.sql("DELETE FROM t WHERE id BETWEEN 11 AND 20");
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    let expected = table_state(&s, "t");
    wait_until(
        TIMEOUT,
        "topic content to equal the table after the restart",
        || {
            let bootstrap = kafka.bootstrap_servers();
            let topic = topic.clone();
            let expected = &expected;
            async move {
                latest_by_key(
                    &consume_all(&bootstrap, &topic, TIMEOUT).await,
                ) == *expected
            }
        },
    )
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_modes_initial_only_and_never() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "snapmodes");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("INSERT INTO t VALUES (1, 1), (2, 2)");

    let output = Command::new(BIN)
        .arg("run")
        .args(s.args(
            &kafka.bootstrap_servers(),
            &["--snapshot-mode", "initial_only"],
        ))
        .output()
        .expect("binary runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("snapshot completed"));
    let records = consume(&kafka.bootstrap_servers(), &s.topic("t"), 2, TIMEOUT).await;
    assert_eq!(records.len(), 2);
    assert!(records
        .iter()
        .all(|r| r.value.as_ref().unwrap()["payload"]["op"] == "r"));

    // A second scenario with mode never: existing rows are not read, new ones stream.
    let n = Scenario::new(Postgres::shared(), "snapnever");
    n.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    n.sql("INSERT INTO t VALUES (1, 1)");
    let running = n.start(&kafka.bootstrap_servers(), &["--snapshot-mode", "never"]);
    wait_until(TIMEOUT, "slot", || async {
        n.confirmed_flush_lsn().is_some()
    })
    .await;
    n.sql("INSERT INTO t VALUES (2, 2)");
    let records = consume(
        &kafka.bootstrap_servers(),
        &n.topic("t"),
        2,
        Duration::from_secs(10),
    )
    .await;
    let ops: Vec<(&Json, &Json)> = records
        .iter()
        .map(|r| {
            (
                &r.value.as_ref().unwrap()["payload"]["op"],
                &r.value.as_ref().unwrap()["payload"]["after"]["id"],
            )
        })
        .collect();
    assert_eq!(
        ops,
        [(&json!("c"), &json!(2))],
        "mode never streams only new changes"
    );
    running.stop().await;
}
