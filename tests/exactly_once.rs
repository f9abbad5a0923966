//! `--delivery exactly-once` end to end, against real Postgres and Kafka,
//! read back with `isolation.level=read_committed`: the connector binary is
//! `kill -9`ed under load, crashes between the Kafka commit and the slot
//! confirm, is fenced by another producer with its transactional.id, meets a
//! second instance, and is killed in the middle of its snapshot. After each,
//! every source change must be in Kafka exactly once, per key in commit
//! order, and every Postgres transaction whole.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::process::{ConnectorProcess, LogDir};
use common::workload::{self, write_continuously, Workload, XorShift};
use common::{record_count, wait_until, Scenario, TIMEOUT};
use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::sink::kafka::InFlightLimits;
use pgcdc_kafka::sink::{Delivery, Transactional};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value as Json;

/// Repeats a run's randomness: its kill timings and workloads.
const SEED_ENV: &str = "EXACTLY_ONCE_SEED";
const TABLES: [&str; 3] = ["accounts", "orders", "items"];
/// One row per workload transaction: its xid and how many changes it made.
const TXN_LOG: &str = "txn_log";

// ---------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------

fn create_tables(s: &Scenario) {
    workload::create_tables(s, &TABLES);
    s.sql(&format!(
        "CREATE TABLE {TXN_LOG} (xid bigint PRIMARY KEY, changes int NOT NULL)"
    ));
}

/// The workload of these tests: transactions of 3 to 6 inserts and
/// `version + 1` updates across the three tables, each also logging
/// `(xid, changes)` into `txn_log`.
fn eos_workload(seed: u64) -> Workload {
    Workload::new(&TABLES, seed).with_txn_log(TXN_LOG)
}

// ---------------------------------------------------------------------------
// Reading back with read_committed, and the exactly-once check
// ---------------------------------------------------------------------------

/// One record read back.
#[derive(Debug, Clone)]
struct Record {
    partition: i32,
    offset: i64,
    key: Option<Json>,
    value: Option<Json>,
}

/// Reads each topic to its end as a `read_committed` consumer sees it (up to
/// the last stable offset, reported as partition EOF).
async fn read_committed(bootstrap: &str, topics: &[String]) -> BTreeMap<String, Vec<Record>> {
    let bootstrap = bootstrap.to_owned();
    let topics = topics.to_vec();
    tokio::task::spawn_blocking(move || read_committed_blocking(&bootstrap, &topics))
        .await
        .expect("reader thread")
}

fn read_committed_blocking(bootstrap: &str, topics: &[String]) -> BTreeMap<String, Vec<Record>> {
    topics
        .iter()
        .map(|topic| (topic.clone(), read_topic_committed(bootstrap, topic)))
        .collect()
}

/// One consumer per topic, since a partition EOF names only the partition.
fn read_topic_committed(bootstrap: &str, topic: &str) -> Vec<Record> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("exactly_once_reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let partitions = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .ok()
        .and_then(|m| {
            m.topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none())
                .map(|t| t.partitions().len())
        })
        .unwrap_or(0);
    let mut records = Vec::new();
    if partitions == 0 {
        return records;
    }
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&assignment).expect("assign");
    let mut open: BTreeSet<i32> = (0..partitions as i32).collect();
    let deadline = Instant::now() + TIMEOUT;
    while !open.is_empty() {
        assert!(
            Instant::now() < deadline,
            "timed out reading {topic} to its last stable offset; partitions left: {open:?}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("consume {topic}: {e}"),
            Some(Ok(message)) => {
                let parse = |bytes: Option<&[u8]>| {
                    bytes.map(|b| serde_json::from_slice::<Json>(b).expect("record is JSON"))
                };
                // The progress topic's key is the connector name, not JSON.
                let key = message.key().map(|b| {
                    serde_json::from_slice::<Json>(b)
                        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(b).into_owned()))
                });
                records.push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key,
                    value: parse(message.payload()),
                });
            }
        }
    }
    records
}

fn data_topics(s: &Scenario) -> Vec<String> {
    TABLES.iter().map(|t| s.topic(t)).collect()
}

fn all_topics(s: &Scenario) -> Vec<String> {
    let mut topics = data_topics(s);
    topics.push(s.topic(TXN_LOG));
    topics
}

fn payload_i64(record: &Record, path: &[&str], at: &str) -> i64 {
    let mut v = &record
        .value
        .as_ref()
        .unwrap_or_else(|| panic!("{at}: unexpected tombstone"))["payload"];
    for p in path {
        v = &v[*p];
    }
    v.as_i64()
        .unwrap_or_else(|| panic!("{at}: payload.{} is not an integer: {v}", path.join(".")))
}

/// One data record read back: partition, offset, version, op.
type Seen = (i32, i64, i64, String);

/// What [`verify_exactly_once`] counted.
#[derive(Debug)]
struct Verified {
    rows: usize,
    changes: u64,
    transactions: usize,
}

/// Checks what a read_committed consumer sees against the source tables,
/// panicking with every problem:
///
/// * per row, its versions in topic order are exactly `1, 2, ..., latest`:
///   nothing lost, nothing twice, commit order kept; one partition per key;
/// * per workload transaction (a `txn_log` row), exactly as many data
///   records carry its `source.txId` as it made changes, and its log row
///   arrived once: the transaction is there whole, once;
/// * no data record belongs to a transaction that is not logged.
fn verify_exactly_once(
    s: &Scenario,
    consumed: &BTreeMap<String, Vec<Record>>,
    snapshot_ops: bool,
) -> Verified {
    let mut problems: Vec<String> = Vec::new();
    // Source rows.
    let mut source: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for table in TABLES {
        for row in
            s.pg.query(&s.db, &format!("SELECT id, version FROM {table}"))
                .expect("read table")
        {
            let n =
                |i: usize| -> i64 { row[i].as_deref().and_then(|v| v.parse().ok()).expect("int") };
            source.insert((s.topic(table), n(0)), n(1));
        }
    }
    let mut logged: BTreeMap<i64, i64> = BTreeMap::new();
    for row in
        s.pg.query(&s.db, &format!("SELECT xid, changes FROM {TXN_LOG}"))
            .expect("read txn_log")
    {
        let n = |i: usize| -> i64 { row[i].as_deref().and_then(|v| v.parse().ok()).expect("int") };
        logged.insert(n(0), n(1));
    }

    let mut per_key: BTreeMap<(String, i64), Vec<Seen>> = BTreeMap::new();
    let mut per_xid: BTreeMap<i64, i64> = BTreeMap::new();
    for topic in data_topics(s) {
        let mut records = consumed.get(&topic).cloned().unwrap_or_default();
        records.sort_by_key(|r| (r.partition, r.offset));
        for r in &records {
            let at = format!("{topic} partition {} offset {}", r.partition, r.offset);
            let id = payload_i64(r, &["after", "id"], &at);
            let version = payload_i64(r, &["after", "version"], &at);
            let op = r.value.as_ref().expect("value")["payload"]["op"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let key_id = r.key.as_ref().and_then(|k| k["payload"]["id"].as_i64());
            if key_id != Some(id) {
                problems.push(format!("{at}: key {key_id:?} is not the row's id {id}"));
            }
            if op != "r" {
                *per_xid
                    .entry(payload_i64(r, &["source", "txId"], &at))
                    .or_default() += 1;
            } else if !snapshot_ops {
                problems.push(format!("{at}: unexpected snapshot record"));
            }
            per_key.entry((topic.clone(), id)).or_default().push((
                r.partition,
                r.offset,
                version,
                op,
            ));
        }
    }
    for key in per_key.keys().filter(|k| !source.contains_key(*k)) {
        problems.push(format!("{key:?} is in Kafka but not in the table"));
    }
    let mut changes = 0u64;
    for (key, &latest) in &source {
        changes += latest as u64;
        let Some(seen) = per_key.get(key) else {
            problems.push(format!("{key:?}: no record (latest version {latest})"));
            continue;
        };
        let partitions: BTreeSet<i32> = seen.iter().map(|c| c.0).collect();
        if partitions.len() > 1 {
            problems.push(format!("{key:?}: in several partitions {partitions:?}"));
        }
        let versions: Vec<i64> = seen.iter().map(|c| c.2).collect();
        let expected: Vec<i64> = (1..=latest).collect();
        if versions != expected {
            problems.push(format!(
                "{key:?}: versions in topic order {versions:?}, expected exactly {expected:?}"
            ));
        }
        for (_, offset, version, op) in seen {
            let ok = match *version {
                1 => op == "c" || (snapshot_ops && op == "r"),
                _ => op == "u",
            };
            if !ok {
                problems.push(format!(
                    "{key:?} version {version} at offset {offset}: op {op:?}"
                ));
            }
        }
    }
    // Whole transactions, once.
    let log_topic = s.topic(TXN_LOG);
    let mut log_seen: BTreeMap<i64, usize> = BTreeMap::new();
    for r in consumed.get(&log_topic).into_iter().flatten() {
        let at = format!("{log_topic} partition {} offset {}", r.partition, r.offset);
        *log_seen
            .entry(payload_i64(r, &["after", "xid"], &at))
            .or_default() += 1;
    }
    for (xid, &n) in &logged {
        if log_seen.get(xid) != Some(&1) {
            problems.push(format!(
                "transaction {xid}: its txn_log row arrived {:?} times",
                log_seen.get(xid)
            ));
        }
        // The data changes of the transaction (the log row is on its own topic).
        let got = per_xid.get(xid).copied().unwrap_or(0);
        if got != n {
            problems.push(format!(
                "transaction {xid}: {got} data records in Kafka, it made {n} changes"
            ));
        }
    }
    for xid in per_xid.keys().filter(|x| !logged.contains_key(*x)) {
        problems.push(format!(
            "records of transaction {xid}, which is not in txn_log"
        ));
    }
    let verified = Verified {
        rows: source.len(),
        changes,
        transactions: logged.len(),
    };
    println!("verified exactly once: {verified:?}");
    assert!(
        problems.is_empty(),
        "{} problems in what read_committed consumers see (first 40):\n{}",
        problems.len(),
        problems
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    verified
}

fn eos_args(s: &Scenario, bootstrap: &str, extra: &[&str]) -> Vec<String> {
    let mut flags = vec!["--delivery", "exactly-once", "--status-interval", "250ms"];
    flags.extend_from_slice(extra);
    s.args(bootstrap, &flags)
}

/// Creates the data topics with several partitions, so a Kafka
/// transaction spans many partitions.
fn setup(name: &str) -> (Scenario, String) {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), name);
    create_tables(&s);
    for topic in data_topics(&s) {
        kafka.create_topic(&topic, 3).expect("create topic");
    }
    (s, kafka.bootstrap_servers())
}

/// Waits until the slot is confirmed at or past the server's position now.
async fn await_caught_up(s: &Scenario, connector: &ConnectorProcess) {
    let end = s.current_lsn();
    wait_until(
        TIMEOUT,
        "the connector to confirm past the last write",
        || async {
            connector.assert_running("while catching up");
            s.confirmed_flush_lsn().is_some_and(|c| c >= end)
        },
    )
    .await;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// kill -9 at random moments, 20 rounds, while a writer commits multi-table
/// transactions; each time a new instance starts at once. A read_committed
/// consumer then sees every change exactly once, in order, every
/// transaction whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_9_under_load_delivers_exactly_once() {
    const ROUNDS: usize = 20;
    let started = Instant::now();
    let (s, bootstrap) = setup("eos_kill9");
    let (mut rng, seed) = XorShift::seeded(SEED_ENV);
    let logs = LogDir::new("exactly_once_kill9");
    println!(
        "[eos kill -9] seed {seed} (EXACTLY_ONCE_SEED={seed} repeats it); logs in {}",
        logs.dir().display()
    );
    let args = eos_args(&s, &bootstrap, &[]);
    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "slot created", || async {
        connector.assert_running("before creating the slot");
        s.confirmed_flush_lsn().is_some()
    })
    .await;

    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        s.pg,
        s.db.clone(),
        eos_workload(rng.next()),
        Arc::clone(&stop_writer),
    ));
    let mut streaming_kills = 0;
    for round in 1..=ROUNDS {
        // A random moment from the seed is the point: the kills are to land
        // anywhere in startup, transactions and commits.
        tokio::time::sleep(Duration::from_millis(300 + rng.below(1200) as u64)).await;
        connector.assert_running(&format!("before kill round {round}"));
        let log = connector.log_text();
        let streaming = log.contains("starting replication");
        streaming_kills += usize::from(streaming);
        let status = connector.kill_9();
        println!(
            "[eos kill -9] round {round}: {} ({status}), slot at {:?}",
            if streaming { "streaming" } else { "starting" },
            s.confirmed_flush_lsn().map(|l| l.to_string())
        );
        connector = ConnectorProcess::spawn(&args, logs.path(round));
    }
    connector.await_streaming(&s).await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer");
    await_caught_up(&s, &connector).await;
    connector.terminate_cleanly(TIMEOUT).await;

    let consumed = read_committed(&bootstrap, &all_topics(&s)).await;
    let verified = verify_exactly_once(&s, &consumed, true);
    assert_eq!(
        verified.changes, stats.changes,
        "the writer's count matches the tables"
    );
    assert_eq!(verified.transactions as u64, stats.transactions);
    assert!(
        streaming_kills > 0,
        "at least one kill hit a streaming connector"
    );
    assert!(verified.rows > 0, "rows were written");
    println!(
        "[eos kill -9] {ROUNDS} kills ({streaming_kills} while streaming), {} transactions, {:?}",
        stats.transactions,
        started.elapsed()
    );
}

/// The slot is never confirmed (a status interval longer than the test)
/// while Kafka commits everything; kill -9; the next instance replays the
/// slot from the start and must drop every transaction the progress topic
/// records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_between_kafka_commit_and_slot_confirm_duplicates_nothing() {
    let (s, bootstrap) = setup("eos_confirm_gap");
    let logs = LogDir::new("exactly_once_gap");
    let first = ConnectorProcess::spawn(
        &s.args(
            &bootstrap,
            &["--delivery", "exactly-once", "--status-interval", "1h"],
        ),
        logs.path(0),
    );
    wait_until(TIMEOUT, "streaming", || async {
        first.assert_running("before streaming");
        first.log_text().contains("starting replication")
    })
    .await;
    let slot_start = s.confirmed_flush_lsn().expect("slot exists");
    let mut workload = eos_workload(7);
    let changes = workload.run_blocking(&s, 60);
    let log_topic = s.topic(TXN_LOG);
    wait_until(
        TIMEOUT,
        "all 60 transactions committed in Kafka",
        || async {
            read_committed(&bootstrap, std::slice::from_ref(&log_topic))
                .await
                .get(&log_topic)
                .map_or(0, Vec::len)
                >= 60
        },
    )
    .await;
    assert_eq!(
        s.confirmed_flush_lsn(),
        Some(slot_start),
        "the slot was not confirmed (status interval 1h), so a restart replays everything"
    );
    first.kill_9();

    let second = ConnectorProcess::spawn(&eos_args(&s, &bootstrap, &[]), logs.path(1));
    await_caught_up(&s, &second).await;
    let changes = changes + workload.run_blocking(&s, 10);
    await_caught_up(&s, &second).await;
    second.terminate_cleanly(TIMEOUT).await;
    let log = second.log_text();
    assert!(
        log.contains("kafka already holds transactions the slot did not confirm"),
        "the restart skipped by the progress record; log:\n{log}"
    );
    let consumed = read_committed(&bootstrap, &all_topics(&s)).await;
    let verified = verify_exactly_once(&s, &consumed, true);
    assert_eq!(verified.changes, changes);
    assert_eq!(verified.transactions, 70);
}

/// A second instance with the same flags stops at the busy slot without
/// fencing the first; a producer that takes the transactional.id fences the
/// running instance, which stops with a clear error naming it; the next
/// instance delivers the rest, and nothing is duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_instance_is_refused_and_a_fenced_instance_stops() {
    let (s, bootstrap) = setup("eos_fence");
    let logs = LogDir::new("exactly_once_fence");
    let args = eos_args(&s, &bootstrap, &[]);
    let first = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "streaming", || async {
        first.assert_running("before streaming");
        first.log_text().contains("starting replication")
    })
    .await;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        s.pg,
        s.db.clone(),
        eos_workload(11),
        Arc::clone(&stop_writer),
    ));
    first.await_streaming(&s).await;

    // 1. Same name, same slot: refused at the slot, the first keeps running.
    let second = ConnectorProcess::spawn(&args, logs.path(1));
    let status = second.wait_exit(TIMEOUT).await;
    let second_log = second.log_text();
    assert!(
        !status.success(),
        "the second instance fails; log:\n{second_log}"
    );
    assert!(
        second_log.contains("is active"),
        "the second instance names the busy slot; log:\n{second_log}"
    );
    // The first keeps streaming: the slot moves on past the refusal.
    first.await_streaming(&s).await;

    // 2. Another producer initializes the same transactional.id: the
    //    running instance is fenced and stops.
    let config = RunConfig::from_args(&args).expect("flags");
    let transactional_id = config.names().transactional_id();
    let mut usurper = Transactional::new(
        &config.producer_config(),
        &config.names(),
        &config.eos,
        InFlightLimits {
            messages: 10,
            bytes: 1 << 20,
        },
        s.current_lsn(),
        Arc::default(),
    )
    .expect("producer");
    usurper.init().await.expect("init_transactions");
    let status = first.wait_exit(TIMEOUT).await;
    let first_log = first.log_text();
    assert!(
        !status.success(),
        "the fenced instance fails; log:\n{first_log}"
    );
    assert!(
        first_log.contains("fenced") && first_log.contains(&transactional_id),
        "the error says it was fenced and names {transactional_id}; log:\n{first_log}"
    );
    drop(usurper);

    // 3. A new instance takes over (fencing the usurper) and delivers the rest.
    let third = ConnectorProcess::spawn(&args, logs.path(2));
    wait_until(TIMEOUT, "the third instance streaming", || async {
        third.assert_running("before streaming");
        third.log_text().contains("starting replication")
    })
    .await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer");
    await_caught_up(&s, &third).await;
    third.terminate_cleanly(TIMEOUT).await;
    let consumed = read_committed(&bootstrap, &all_topics(&s)).await;
    let verified = verify_exactly_once(&s, &consumed, true);
    assert_eq!(verified.changes, stats.changes);
}

/// The initial snapshot is one Kafka transaction: kill -9 in its middle
/// leaves nothing visible to read_committed consumers, and the retaken
/// snapshot appears once. A crash after Kafka committed the snapshot but
/// before the slot was promoted promotes the working slot instead of
/// taking (and duplicating) the snapshot again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_is_transactional() {
    const ROWS: i64 = 10_000;
    let (s, bootstrap) = setup("eos_snapshot");
    for table in TABLES {
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, 1, 'row ' || g FROM generate_series(1, {ROWS}) g"
        ));
    }
    let logs = LogDir::new("exactly_once_snapshot");
    let args = eos_args(&s, &bootstrap, &["--snapshot-workers", "2"]);

    // 1. kill -9 in the middle of the snapshot.
    let first = ConnectorProcess::spawn(&args, logs.path(0));
    let data = data_topics(&s);
    wait_until(TIMEOUT, "the snapshot to start producing", || async {
        first.assert_running("before the snapshot");
        // Records of the open snapshot transaction count in the high
        // watermarks, though read_committed consumers cannot see them.
        let mut produced = 0;
        for topic in &data {
            produced += record_count(&bootstrap, topic).await;
        }
        first.log_text().contains("snapshot started") && produced > 0
    })
    .await;
    first.kill_9();
    // The snapshot may have committed between the wait and the kill: what
    // read_committed consumers see says which, all of it or none.
    let seen = read_committed(&bootstrap, &data_topics(&s)).await;
    let visible: usize = seen.values().map(Vec::len).sum();
    let mid_snapshot = visible == 0;
    println!(
        "[eos snapshot] killed {}",
        if mid_snapshot {
            "mid-snapshot"
        } else {
            "after the snapshot"
        }
    );
    if mid_snapshot {
        assert_eq!(s.confirmed_flush_lsn(), None, "no slot yet");
    } else {
        assert_eq!(
            visible,
            TABLES.len() * ROWS as usize,
            "a snapshot's transaction is all or nothing to read_committed consumers"
        );
    }

    // 2. The snapshot again, alone (initial_only): committed and promoted.
    let second = ConnectorProcess::spawn(
        &eos_args(
            &s,
            &bootstrap,
            &["--snapshot-workers", "2", "--snapshot-mode", "initial_only"],
        ),
        logs.path(1),
    );
    let second_started = Instant::now();
    let status = second.wait_exit(TIMEOUT).await;
    assert!(
        status.success(),
        "initial_only run; log:\n{}",
        second.log_text()
    );
    println!(
        "[eos snapshot] the initial_only run took {:?}",
        second_started.elapsed()
    );
    let point = s.confirmed_flush_lsn().expect("slot promoted");
    let progress_topic = format!("{}.progress", s.prefix);
    let progress = read_committed(&bootstrap, std::slice::from_ref(&progress_topic)).await;
    let last = progress[&progress_topic]
        .last()
        .and_then(|r| r.value.clone())
        .expect("a progress record");
    assert_eq!(last["snapshot"], Json::Bool(true), "{last}");
    assert_eq!(
        last["lsn"].as_str(),
        Some(point.to_string().as_str()),
        "{last}"
    );

    // 3. The state a crash between the Kafka commit and the promotion leaves:
    //    the working slot at the consistent point, no real slot.
    let working = format!("{}_snapshot", s.slot);
    s.sql(&format!(
        "SELECT pg_copy_logical_replication_slot('{}', '{working}')",
        s.slot
    ));
    s.sql(&format!("SELECT pg_drop_replication_slot('{}')", s.slot));
    let third = ConnectorProcess::spawn(&args, logs.path(2));
    wait_until(TIMEOUT, "streaming", || async {
        third.assert_running("before streaming");
        third.log_text().contains("starting replication")
    })
    .await;
    let log = third.log_text();
    assert!(
        log.contains("kafka committed the snapshot before the slot was promoted")
            && !log.contains("snapshot started"),
        "the working slot is promoted, no snapshot is taken again; log:\n{log}"
    );
    let mut workload = eos_workload(5).with_existing_rows(ROWS);
    let changes = workload.run_blocking(&s, 20);
    await_caught_up(&s, &third).await;
    third.terminate_cleanly(TIMEOUT).await;

    let consumed = read_committed(&bootstrap, &all_topics(&s)).await;
    let verified = verify_exactly_once(&s, &consumed, true);
    assert_eq!(verified.changes, 3 * ROWS as u64 + changes);
}

/// A Postgres transaction that takes longer to write than
/// transaction.timeout.ms: the coordinator aborts the Kafka transaction, the
/// connector stops with a definite error saying what to raise, none of the
/// transaction is visible, the slot stays before it, and a run with the
/// default timeout then delivers it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_longer_than_the_kafka_timeout_stops_clearly_and_loses_nothing() {
    let (s, bootstrap) = setup("eos_timeout");
    let logs = LogDir::new("exactly_once_timeout");
    let mut workload = eos_workload(3);
    let first = ConnectorProcess::spawn(
        &eos_args(
            &s,
            &bootstrap,
            &[
                "--kafka-property",
                "transaction.timeout.ms=2000",
                // One message in flight at a time: the transaction takes
                // far longer than 2 s to write.
                "--max-in-flight-messages",
                "1",
            ],
        ),
        logs.path(0),
    );
    wait_until(TIMEOUT, "streaming", || async {
        first.assert_running("before streaming");
        first
            .log_text()
            .contains("transactional producer initialized")
    })
    .await;
    let small = workload.run_blocking(&s, 5);
    s.sql(&format!(
        "BEGIN; INSERT INTO accounts SELECT g, 1, 'big ' || g FROM generate_series(1000001, 1004000) g; \
         INSERT INTO {TXN_LOG} VALUES (txid_current() % 4294967296, 4000); COMMIT;"
    ));
    let before_big = s.current_lsn();
    let status = first.wait_exit(TIMEOUT).await;
    let log = first.log_text();
    assert!(!status.success(), "the connector stops; log:\n{log}");
    assert!(
        log.contains("too large to write within transaction.timeout.ms"),
        "the error names the timeout to raise; log:\n{log}"
    );
    if let Some(line) = log.lines().find(|l| l.contains("stopped on error")) {
        println!("[eos timeout] {line}");
    }
    let confirmed = s.confirmed_flush_lsn().expect("slot");
    assert!(
        confirmed < before_big,
        "the slot stays before the big transaction"
    );
    let seen = read_committed(&bootstrap, &[s.topic(TXN_LOG)]).await;
    assert!(
        seen[&s.topic(TXN_LOG)].len() <= 5,
        "none of the aborted transaction is visible"
    );

    let second = ConnectorProcess::spawn(&eos_args(&s, &bootstrap, &[]), logs.path(1));
    await_caught_up(&s, &second).await;
    second.terminate_cleanly(TIMEOUT).await;
    // The big rows are inserts of version 1 into accounts.
    let consumed = read_committed(&bootstrap, &all_topics(&s)).await;
    let verified = verify_exactly_once(&s, &consumed, true);
    assert_eq!(verified.changes, small + 4000);
}

// ---------------------------------------------------------------------------
// The cost of exactly-once (not a test; numbers in docs/EXACTLY_ONCE.md)
// ---------------------------------------------------------------------------

/// Throughput of a bounded run over `EOS_BENCH_ROWS` (200k) inserts in
/// transactions of 10 rows, and commit-to-visible latency of single-row
/// transactions for a read_committed consumer, at-least-once vs exactly-once.
/// `cargo test --release --test exactly_once -- --ignored --nocapture bench`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run it explicitly"]
async fn bench_exactly_once_vs_at_least_once() {
    let rows: i64 = std::env::var("EOS_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let logs = LogDir::new("exactly_once_bench");
    let modes: [(&str, &[&str]); 3] = [
        ("at-least-once", &[]),
        ("exactly-once", &["--delivery", "exactly-once"]),
        (
            "exactly-once, --eos-max-batch-time 10ms",
            &["--delivery", "exactly-once", "--eos-max-batch-time", "10ms"],
        ),
    ];
    for (i, (mode, flags)) in modes.iter().enumerate() {
        let s = Scenario::new(Postgres::shared(), "eos_bench");
        s.sql("CREATE TABLE bench (id bigint PRIMARY KEY, note text NOT NULL)");
        kafka.create_topic(&s.topic("bench"), 3).expect("topic");
        let mut args: Vec<&str> = vec!["--snapshot-mode", "never", "--stop-when-caught-up"];
        args.extend_from_slice(flags);
        let args = s.args(&bootstrap, &args);
        let setup = ConnectorProcess::spawn(&args, logs.path(10 * i));
        assert!(
            setup.wait_exit(TIMEOUT).await.success(),
            "{}",
            setup.log_text()
        );
        s.sql(
            "CREATE PROCEDURE fill(n bigint, per bigint) LANGUAGE plpgsql AS $$ \
             BEGIN FOR i IN 0..(n / per - 1) LOOP \
             INSERT INTO bench SELECT g, 'row ' || g FROM generate_series(i * per + 1, (i + 1) * per) g; \
             COMMIT; END LOOP; END $$",
        );
        s.sql(&format!("CALL fill({rows}, 10)"));
        let started = Instant::now();
        let run = ConnectorProcess::spawn(&args, logs.path(10 * i + 1));
        let status = run.wait_exit(Duration::from_secs(600)).await;
        let elapsed = started.elapsed();
        assert!(status.success(), "{}", run.log_text());
        println!(
            "[bench] {mode}: {rows} inserts ({} transactions) in {elapsed:.2?}: {:.0} rows/s",
            rows / 10,
            rows as f64 / elapsed.as_secs_f64()
        );

        // Latency: one row at a time, until a read_committed consumer has it.
        let mut streaming: Vec<&str> = vec!["--snapshot-mode", "never"];
        streaming.extend_from_slice(flags);
        let connector =
            ConnectorProcess::spawn(&s.args(&bootstrap, &streaming), logs.path(10 * i + 2));
        wait_until(TIMEOUT, "streaming", || async {
            connector.assert_running("before streaming");
            connector.log_text().contains("starting replication")
        })
        .await;
        let topic = s.topic("bench");
        let db_url = s.pg.url(&s.db);
        let bootstrap2 = bootstrap.clone();
        let mut latencies = tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap2)
                .set("group.id", unique_name("bench"))
                .set("enable.auto.commit", "false")
                .set("isolation.level", "read_committed")
                .set("fetch.wait.max.ms", "10")
                .create()
                .expect("consumer");
            let mut tpl = TopicPartitionList::new();
            for p in 0..3 {
                tpl.add_partition_offset(&topic, p, Offset::End)
                    .expect("partition");
            }
            consumer.assign(&tpl).expect("assign");
            // Let the assignment settle on the end offsets.
            while consumer.poll(Duration::from_millis(500)).is_some() {}
            let mut pg = postgres_blocking(&db_url);
            let mut latencies = Vec::new();
            for n in 0..50 {
                let id = 10_000_000 + n;
                let t0 = Instant::now();
                pg(&format!("INSERT INTO bench VALUES ({id}, 'latency')"));
                loop {
                    match consumer.poll(Duration::from_millis(100)) {
                        Some(Ok(_)) => break,
                        Some(Err(e)) => panic!("consume: {e}"),
                        None => assert!(t0.elapsed() < TIMEOUT, "row {id} never arrived"),
                    }
                }
                latencies.push(t0.elapsed());
            }
            latencies
        })
        .await
        .expect("latency thread");
        connector.terminate_cleanly(TIMEOUT).await;
        latencies.sort();
        println!(
            "[bench] {mode}: commit-to-visible latency over 50 single-row transactions: \
             median {:.1?}, p90 {:.1?}, max {:.1?}",
            latencies[25], latencies[45], latencies[49]
        );
    }
}

/// A blocking "run this SQL" for the latency loop (psql would add its own
/// start-up time to every sample).
fn postgres_blocking(url: &str) -> impl FnMut(&str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (client, connection) = runtime
        .block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))
        .expect("connect");
    runtime.spawn(connection);
    move |sql: &str| {
        runtime
            .block_on(client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}
