//! Large transactions streamed while they run (pgoutput protocol 2,
//! `--stream-in-progress`), against real PostgreSQL and Kafka.
//!
//! The test database sets `logical_decoding_work_mem` to its minimum
//! (64 kB), so that every transaction of a few thousand rows is streamed to
//! the streaming connector (a child process, so that it can be killed) and
//! spilled by the server for a second, unstreamed connector (in-process,
//! protocol 1) reading the same database through its own slot. The spool's
//! memory bound is 64 kB too, so the streamed transactions go to the spool's
//! files. Then, one phase after the other:
//!
//! 1. a committed transaction with a rolled-back savepoint in it, while a
//!    small transaction commits in the middle: every row arrives, none of
//!    the savepoint's, the small one first (commit order);
//! 2. an aborted transaction: none of its rows arrives, its spool file goes;
//! 3. the two connectors' records up to here are the same, record by record;
//! 4. `kill -9` of the streaming connector in the middle of a streamed
//!    transaction, after the slot was confirmed past its first change; the
//!    transaction goes on, commits, and a restarted connector delivers all
//!    of it (the server streams it again from its start).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::process::{ConnectorProcess, LogDir};
use common::{read_raw, wait_for, wait_until, RawRecord, ReadUntil, Scenario, TIMEOUT};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use serde_json::Value as Json;

/// Rows of each large transaction: with 200-byte payloads, about 1 MB of
/// changes, sixteen times the server's and the spool's memory.
const ROWS: i64 = 5_000;
/// First ids of each phase's rows.
const COMMITTED: i64 = 100_000;
const SAVEPOINT: i64 = 150_000;
const AFTER_SAVEPOINT: i64 = 160_000;
const SMALL: i64 = 190_000;
const ABORTED: i64 = 200_000;
const MARKER: i64 = 300_000;
const KILLED: i64 = 400_000;
const BETWEEN: i64 = 490_000;

fn insert_rows(first: i64, count: i64) -> String {
    format!(
        "INSERT INTO big SELECT g, repeat(md5(g::text), 6) || g FROM generate_series({first}, {}) g",
        first + count - 1
    )
}

/// A session that holds a transaction open across statements.
struct Session(tokio_postgres::Client);

impl Session {
    async fn open(s: &Scenario) -> Self {
        let (client, connection) = tokio_postgres::connect(&s.pg.url(&s.db), tokio_postgres::NoTls)
            .await
            .expect("a session");
        tokio::spawn(connection);
        Session(client)
    }

    async fn run(&self, sql: &str) {
        self.0
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// The ids in the `after` of the records read, in topic order.
fn ids(records: &[RawRecord]) -> Vec<i64> {
    records
        .iter()
        .map(|r| {
            let value: Json = serde_json::from_slice(r.value.as_deref().expect("no tombstones"))
                .expect("JSON value");
            value["payload"]["after"]["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("an insert: {value}"))
        })
        .collect()
}

/// Reads `topic` until `done` holds for its ids (or [`TIMEOUT`]).
async fn read_until(
    bootstrap: &str,
    topic: &str,
    what: &str,
    done: impl Fn(&[i64]) -> bool,
) -> Vec<RawRecord> {
    wait_for(TIMEOUT, what, || async {
        let until = ReadUntil {
            count: usize::MAX,
            timeout: Duration::from_secs(20),
            idle: Some(Duration::from_millis(500)),
            linger: None,
        };
        let records = read_raw(bootstrap, topic, until).await;
        if done(&ids(&records)) {
            Ok(records)
        } else {
            Err(format!("{} records so far", records.len()))
        }
    })
    .await
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default()
}

/// The slot's streaming or spilling counters: (stream_txns, spill_txns).
fn slot_stats(s: &Scenario, slot: &str) -> (i64, i64) {
    let rows =
        s.pg.query(
            &s.db,
            &format!(
                "SELECT stream_txns::text, spill_txns::text FROM pg_stat_replication_slots \
                 WHERE slot_name = '{slot}'"
            ),
        )
        .expect("slot stats");
    let number = |v: &Option<String>| v.as_deref().unwrap_or("0").parse().expect("a count");
    rows.first()
        .map(|row| (number(&row[0]), number(&row[1])))
        .unwrap_or_default()
}

/// A record as the other connector would have written it: its own topic
/// prefix and the processing time (`ts_*` of the envelope) left out.
fn comparable(record: &RawRecord, prefix: &str) -> (String, String) {
    let text = |bytes: Option<&[u8]>| {
        String::from_utf8_lossy(bytes.unwrap_or_default()).replace(prefix, "PREFIX")
    };
    let mut value: Json =
        serde_json::from_slice(record.value.as_deref().expect("a value")).expect("JSON");
    for field in ["ts_ms", "ts_us", "ts_ns"] {
        value["payload"]
            .as_object_mut()
            .expect("payload")
            .remove(field);
    }
    (
        text(record.key.as_deref()),
        text(Some(value.to_string().as_bytes())),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transactions_stream_into_the_spool_and_reach_kafka_at_commit() {
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "streamed");
    // Set before any walsender connects: both slots' sessions take it.
    s.sql(&format!(
        "ALTER DATABASE {} SET logical_decoding_work_mem = '64kB'",
        s.db
    ));
    s.sql("CREATE TABLE big (id bigint PRIMARY KEY, payload text NOT NULL)");
    // Made here, so the two connectors starting together do not race to.
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        s.publication
    ));
    let topic = s.topic("big");
    kafka.create_topic(&topic, 1).expect("create topic");
    let plain = Scenario {
        slot: unique_name("plainslot"),
        prefix: unique_name("plain"),
        ..s.clone()
    };
    kafka
        .create_topic(&plain.topic("big"), 1)
        .expect("create topic");

    let logs = LogDir::new("streamed_transactions");
    let spool_base = logs.dir().join("spool");
    let spool = spool_base.join(format!("{}.{}", s.db, s.slot));
    let args = s.args(
        &bootstrap,
        &[
            "--stream-in-progress",
            "true",
            "--spool-memory-bytes",
            "65536",
            "--spool-dir",
            spool_base.to_str().expect("UTF-8 path"),
            "--status-interval",
            "100ms",
        ],
    );
    let streaming = ConnectorProcess::spawn(&args, logs.path(0));
    let unstreamed = plain.start(&bootstrap, &["--stream-in-progress", "false"]);
    s.await_slot().await;
    plain.await_slot().await;
    streaming.await_streaming(&s).await;

    // 1. Committed, with a rolled-back savepoint, a small commit meanwhile.
    let big = Session::open(&s).await;
    big.run(&format!("BEGIN; {}", insert_rows(COMMITTED, ROWS)))
        .await;
    big.run(&format!(
        "SAVEPOINT s; {}; ROLLBACK TO SAVEPOINT s",
        insert_rows(SAVEPOINT, 1_000)
    ))
    .await;
    wait_until(TIMEOUT, "the open transaction in a spool file", || async {
        !spool_files(&spool).is_empty()
    })
    .await;
    s.sql(&insert_rows(SMALL, 1));
    big.run(&format!("{}; COMMIT", insert_rows(AFTER_SAVEPOINT, 100)))
        .await;
    let expected: Vec<i64> = std::iter::once(SMALL)
        .chain(COMMITTED..COMMITTED + ROWS)
        .chain(AFTER_SAVEPOINT..AFTER_SAVEPOINT + 100)
        .collect();
    let records = read_until(&bootstrap, &topic, "the committed transaction", |ids| {
        ids.len() >= expected.len()
    })
    .await;
    assert_eq!(
        ids(&records),
        expected,
        "every row, none of the savepoint, in commit order"
    );
    assert!(
        spool_files(&spool).is_empty(),
        "the spool file goes at the commit"
    );

    // 2. Aborted, then a marker that closes the phases compared below.
    big.run(&format!("BEGIN; {}", insert_rows(ABORTED, ROWS)))
        .await;
    wait_until(
        TIMEOUT,
        "the aborted transaction in a spool file",
        || async { !spool_files(&spool).is_empty() },
    )
    .await;
    big.run("ROLLBACK").await;
    s.sql(&insert_rows(MARKER, 1));
    let records = read_until(&bootstrap, &topic, "the marker", |ids| {
        ids.contains(&MARKER)
    })
    .await;
    assert_eq!(
        ids(&records).len(),
        expected.len() + 1,
        "nothing of the aborted transaction"
    );
    wait_until(
        TIMEOUT,
        "the aborted transaction's spool file to go",
        || async { spool_files(&spool).is_empty() },
    )
    .await;

    // 3. The unstreamed connector wrote the same records.
    let unstreamed_records = read_until(
        &bootstrap,
        &plain.topic("big"),
        "the unstreamed connector",
        |ids| ids.contains(&MARKER),
    )
    .await;
    assert_eq!(unstreamed_records.len(), records.len());
    for (n, (streamed, whole)) in records.iter().zip(&unstreamed_records).enumerate() {
        assert_eq!(
            comparable(streamed, &s.prefix),
            comparable(whole, &plain.prefix),
            "record {n}: streamed and unstreamed differ"
        );
    }
    let (streamed_txns, _) = slot_stats(&s, &s.slot);
    let (_, spilled_txns) = slot_stats(&s, &plain.slot);
    assert!(
        streamed_txns >= 2,
        "the server streamed to the streaming slot: {streamed_txns}"
    );
    assert!(
        spilled_txns >= 2,
        "and spilled for the unstreamed one: {spilled_txns}"
    );
    unstreamed.stop().await;

    // 4. kill -9 in the middle of a streamed transaction whose start the
    // slot was already confirmed past, then a restart.
    big.run(&format!("BEGIN; {}", insert_rows(KILLED, ROWS)))
        .await;
    wait_until(TIMEOUT, "the transaction in a spool file", || async {
        !spool_files(&spool).is_empty()
    })
    .await;
    s.sql(&insert_rows(BETWEEN, 1));
    streaming.await_streaming(&s).await;
    let left_behind = spool_files(&spool);
    streaming.kill_9();
    assert!(
        left_behind.iter().all(|f| f.exists()),
        "a kill leaves the spool files behind"
    );
    big.run(&format!("{}; COMMIT", insert_rows(KILLED + ROWS, ROWS)))
        .await;
    let restarted = ConnectorProcess::spawn(&args, logs.path(1));
    let expected: BTreeSet<i64> = (KILLED..KILLED + 2 * ROWS).chain([BETWEEN]).collect();
    let records = read_until(&bootstrap, &topic, "the killed transaction, whole", |ids| {
        expected.iter().all(|id| ids.contains(id))
    })
    .await;
    let ids = ids(&records);
    let killed: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| *id >= KILLED && *id < BETWEEN)
        .collect();
    assert_eq!(
        killed.iter().collect::<BTreeSet<_>>().len(),
        2 * ROWS as usize,
        "every row of the killed transaction"
    );
    assert_eq!(
        killed.len(),
        2 * ROWS as usize,
        "once: it was never confirmed, nor half sent"
    );
    assert!(!ids.iter().any(|id| (ABORTED..MARKER).contains(id)));
    assert!(
        left_behind.iter().all(|f| !f.exists()),
        "the restart removed the killed process's spool files"
    );
    restarted.assert_running("after the streamed transaction");
    restarted.terminate_cleanly(TIMEOUT).await;
}
