//! Fault tolerance end to end, against real Postgres and Kafka: the connector
//! is killed, its database restarted and its connection cut, Kafka refuses a
//! message, and a transaction outgrows the in-flight bound. After each, what
//! reached the topics is read back and checked against the source tables row
//! by row: every committed change is there, per key in commit order, and the
//! only duplicates are re-sent tails (at least once, never lost).
//!
//! The scenarios of the Kafka broker, the schema registry and the window
//! between a Kafka ack and the LSN confirm live in the submodules; they share
//! the workload, the topic reader and the verifier defined here.

mod ack_window;
mod broker;
#[path = "../common/mod.rs"]
mod common;
mod failover;
mod registry;
mod skip_delivered;
mod soak;
mod standby_decoding;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::process::{ConnectorProcess, LogDir};
use common::workload::{create_tables, write_continuously, Workload, XorShift};
use common::{consume, hold_for, poll_blocking, wait_until, Record, Running, Scenario, TIMEOUT};
use pgcdc_kafka::error_chain;
use pgcdc_kafka::lsn::Lsn;
use pgcdc_testcontainers::{unique_name, FaultProxy, Kafka, Postgres, StopMode};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value as Json;

/// Repeats a run's randomness: its kill timings and workloads.
const SEED_ENV: &str = "CRASH_RECOVERY_SEED";

/// The header with a record's WAL position (`src/sink/position.rs`), kept
/// by the topic reader so that a duplicate can be traced to the runs that
/// sent it.
const POSITION_HEADER: &str = "pgcdc.position";

// ---------------------------------------------------------------------------
// Randomness, workload and the row-by-row check
// ---------------------------------------------------------------------------

/// Rounds of a scenario: `short` in the CI form; under a soak
/// (`PGCDC_FAULT_ROUNDS`, 200 in `scripts/fault-suite.sh --soak`) that
/// count divided by `per_soak_round`, if more.
fn fault_rounds(short: usize, per_soak_round: usize) -> usize {
    std::env::var("PGCDC_FAULT_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .map_or(short, |r| short.max(r / per_soak_round.max(1)))
}

/// `(topic, id)` of a source row: its table's topic and primary key.
type RowKey = (String, i64);

/// Every row of `tables` with its latest version: what must have reached
/// Kafka, keyed by the table's topic.
fn source_rows(s: &Scenario, tables: &[&str]) -> BTreeMap<RowKey, i64> {
    let mut rows = BTreeMap::new();
    for table in tables {
        let result =
            s.pg.query(&s.db, &format!("SELECT id, version FROM {table}"))
                .unwrap_or_else(|e| panic!("reading {table}: {}", e.report()));
        for row in result {
            let number = |i: usize| -> i64 {
                row[i]
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .expect("id and version are non-null integers")
            };
            rows.insert((s.topic(table), number(0)), number(1));
        }
    }
    rows
}

/// One change read back: `payload.after.{id,version}` and `payload.op`.
#[derive(Debug)]
struct Change {
    partition: i32,
    offset: i64,
    id: i64,
    version: i64,
    op: String,
    /// The record's `pgcdc.position` header, if it has one.
    position: Option<String>,
}

fn change_of(topic: &str, record: &Record) -> Change {
    let at = format!(
        "{topic} partition {} offset {}",
        record.partition, record.offset
    );
    let value = record
        .value
        .as_ref()
        .unwrap_or_else(|| panic!("{at}: unexpected tombstone (the workload never deletes)"));
    let payload = &value["payload"];
    let after = &payload["after"];
    let field = |name: &str| {
        after[name]
            .as_i64()
            .unwrap_or_else(|| panic!("{at}: payload.after.{name} is not an integer: {value}"))
    };
    let id = field("id");
    let key_id = record
        .key
        .as_ref()
        .and_then(|k| k["payload"]["id"].as_i64());
    assert_eq!(key_id, Some(id), "{at}: the key is the row's primary key");
    Change {
        partition: record.partition,
        offset: record.offset,
        id,
        version: field("version"),
        op: payload["op"].as_str().unwrap_or_default().to_owned(),
        position: record.header(POSITION_HEADER).map(stamp_text),
    }
}

/// What [`verify`] counted.
#[derive(Debug, Clone, Copy)]
struct Verified {
    rows: usize,
    changes: u64,
    records: usize,
    duplicates: usize,
}

/// Whether every source row's latest version has arrived (the order and
/// completeness of everything before it is [`verify`]'s job).
fn covers(source: &BTreeMap<RowKey, i64>, consumed: &BTreeMap<String, Vec<Record>>) -> bool {
    let mut latest: BTreeSet<(String, i64, i64)> = BTreeSet::new();
    for (topic, records) in consumed {
        for record in records {
            let change = change_of(topic, record);
            latest.insert((topic.clone(), change.id, change.version));
        }
    }
    source
        .iter()
        .all(|((topic, id), version)| latest.contains(&(topic.clone(), *id, *version)))
}

/// Checks the records consumed from each table's topic against the source
/// rows, row by row, panicking with every problem found:
///
/// * every row is in its topic and nothing else is;
/// * per key, the *first occurrences* of versions are exactly `1, 2, ...,
///   latest`, in that order: every committed version arrived, in commit order;
/// * every other record is a re-send, and re-sends are contiguous tails: each
///   step along a key's records is either to the next version or back to an
///   earlier one (where a restart resumed from the slot);
/// * a key stays in one partition; version 1 is a create, the rest updates.
///
/// Prints one summary line and returns the counts.
fn verify(
    scenario: &str,
    rows_written: u64,
    source: &BTreeMap<RowKey, i64>,
    consumed: &BTreeMap<String, Vec<Record>>,
) -> Verified {
    let mut problems: Vec<String> = Vec::new();
    let mut per_key: BTreeMap<RowKey, Vec<Change>> = BTreeMap::new();
    let mut records = 0;
    for (topic, topic_records) in consumed {
        let mut changes: Vec<Change> = topic_records.iter().map(|r| change_of(topic, r)).collect();
        changes.sort_by_key(|c| (c.partition, c.offset));
        records += changes.len();
        for change in changes {
            per_key
                .entry((topic.clone(), change.id))
                .or_default()
                .push(change);
        }
    }
    for key in per_key.keys().filter(|k| !source.contains_key(*k)) {
        problems.push(format!("{key:?} is in the topic but not in the table"));
    }
    let mut duplicates = 0;
    // The first few duplicates with where each copy sits and the position
    // header of each, printed to explain them.
    let mut examples: Vec<String> = Vec::new();
    let mut changes = 0;
    for (key, &latest) in source {
        changes += latest as u64;
        let Some(seen) = per_key.get(key) else {
            problems.push(format!(
                "{key:?}: no record at all (latest version {latest})"
            ));
            continue;
        };
        let partitions: BTreeSet<i32> = seen.iter().map(|c| c.partition).collect();
        if partitions.len() > 1 {
            problems.push(format!(
                "{key:?}: records in several partitions {partitions:?}"
            ));
        }
        let versions: Vec<i64> = seen.iter().map(|c| c.version).collect();
        let mut first_seen: BTreeSet<i64> = BTreeSet::new();
        let mut highest = 0;
        let mut previous: Option<i64> = None;
        for change in seen {
            let v = change.version;
            let expected_op = if v == 1 { "c" } else { "u" };
            if change.op != expected_op {
                problems.push(format!(
                    "{key:?} version {v} at offset {}: op {:?}, expected {expected_op:?}",
                    change.offset, change.op
                ));
            }
            if first_seen.insert(v) {
                if v != highest + 1 {
                    problems.push(format!(
                        "{key:?}: version {v} arrived first after {highest} (lost or out of order); versions in topic order: {versions:?}"
                    ));
                }
                highest = highest.max(v);
            } else {
                duplicates += 1;
                if examples.len() < 10 {
                    let first = seen.iter().find(|c| c.version == v).expect("seen before");
                    examples.push(format!(
                        "{key:?} v{v}: offset {} [{}], again at offset {} [{}]",
                        first.offset,
                        first.position.as_deref().unwrap_or("-"),
                        change.offset,
                        change.position.as_deref().unwrap_or("-"),
                    ));
                }
            }
            if let Some(p) = previous {
                if v > p + 1 {
                    problems.push(format!(
                        "{key:?}: jumps from version {p} to {v} (a re-send that skips, or a loss); versions in topic order: {versions:?}"
                    ));
                }
            }
            previous = Some(v);
        }
        if highest != latest {
            problems.push(format!(
                "{key:?}: latest version in the table is {latest}, highest in the topic {highest}; versions in topic order: {versions:?}"
            ));
        }
    }
    let verified = Verified {
        rows: source.len(),
        changes,
        records,
        duplicates,
    };
    println!(
        "[{scenario}] rows written: {rows_written} changes; rows verified: {} rows / {} changes; records consumed: {}; duplicates: {}",
        verified.rows, verified.changes, verified.records, verified.duplicates
    );
    for example in &examples {
        println!("[{scenario}] duplicate {example}");
    }
    // One machine-readable line per scenario, for scripts/fault-suite.sh's table.
    println!(
        "FAULT-SUITE\t{scenario}\t{rows_written}\t{}\t{}\t{}",
        verified.changes,
        verified.duplicates,
        if problems.is_empty() { "pass" } else { "FAIL" }
    );
    assert!(
        problems.is_empty(),
        "[{scenario}] {} problems in what reached Kafka (first 40):\n{}",
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

// ---------------------------------------------------------------------------
// Reading topics to their end
// ---------------------------------------------------------------------------

/// Reads each topic from the beginning up to its high watermarks at the
/// time of the call, so the result is everything the topics hold. With
/// `wait_for_topics`, waits that long for missing topics (else skips them).
async fn read_topics(
    bootstrap: &str,
    topics: &[String],
    wait_for_topics: Option<Duration>,
) -> BTreeMap<String, Vec<Record>> {
    read_topics_decoded(bootstrap, topics, wait_for_topics, json_decoder()).await
}

/// Turns the bytes of a key or value into the JSON [`verify`] reads:
/// `{"payload": {...}}` as the JSON converter writes it.
type Decode = Arc<dyn Fn(&[u8]) -> Json + Send + Sync>;

fn json_decoder() -> Decode {
    Arc::new(|bytes| serde_json::from_slice::<Json>(bytes).expect("record is JSON"))
}

/// [`read_topics`] for records in another format, made JSON by `decode`.
async fn read_topics_decoded(
    bootstrap: &str,
    topics: &[String],
    wait_for_topics: Option<Duration>,
    decode: Decode,
) -> BTreeMap<String, Vec<Record>> {
    let bootstrap = bootstrap.to_owned();
    let topics = topics.to_vec();
    tokio::task::spawn_blocking(move || {
        read_topics_blocking(&bootstrap, &topics, wait_for_topics, &*decode)
    })
    .await
    .expect("topic reader thread")
}

fn read_topics_blocking(
    bootstrap: &str,
    topics: &[String],
    wait_for_topics: Option<Duration>,
    decode: &(dyn Fn(&[u8]) -> Json + Send + Sync),
) -> BTreeMap<String, Vec<Record>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("crash_recovery_reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let deadline = Instant::now() + wait_for_topics.unwrap_or_default();
    let mut assignment = TopicPartitionList::new();
    // (topic, partition) -> high watermark still to reach
    let mut remaining: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut consumed: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for topic in topics {
        let partitions = poll_blocking(deadline, || {
            consumer
                .fetch_metadata(Some(topic), Duration::from_secs(5))
                .ok()
                .and_then(|m| {
                    m.topics()
                        .iter()
                        .find(|t| t.name() == topic && t.error().is_none())
                        .map(|t| t.partitions().len())
                })
                .filter(|&found| found > 0)
        })
        .unwrap_or(0);
        if partitions == 0 {
            assert!(
                wait_for_topics.is_none(),
                "topic {topic} did not appear within {wait_for_topics:?}"
            );
            continue;
        }
        consumed.insert(topic.clone(), Vec::new());
        for p in 0..partitions as i32 {
            let (low, high) = common::watermarks(&consumer, topic, p);
            if high > low {
                remaining.insert((topic.clone(), p), high);
                assignment
                    .add_partition_offset(topic, p, Offset::Beginning)
                    .expect("partition");
            }
        }
    }
    if remaining.is_empty() {
        return consumed;
    }
    consumer.assign(&assignment).expect("assign");
    // A bound on a stall, not on the whole read: a soak's topics hold
    // hundreds of thousands of records, which a debug build on a loaded
    // machine reads for minutes.
    let mut deadline = Instant::now() + TIMEOUT;
    while !remaining.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no record for {TIMEOUT:?} reading topics to their high watermarks; left: {remaining:?}"
        );
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            // A transactional topic ends in a commit marker, which no poll
            // returns: the consumer's position moves past it all the same.
            if let Ok(position) = consumer.position() {
                for element in position.elements() {
                    let key = (element.topic().to_owned(), element.partition());
                    let at = match element.offset() {
                        Offset::Offset(at) => at,
                        _ => continue,
                    };
                    if remaining.get(&key).is_some_and(|&high| at >= high) {
                        remaining.remove(&key);
                    }
                }
            }
            continue;
        };
        let message = message.expect("consume");
        deadline = Instant::now() + TIMEOUT;
        let topic = message.topic().to_owned();
        let (partition, offset) = (message.partition(), message.offset());
        let parse = |bytes: Option<&[u8]>| bytes.map(decode);
        let key = (topic.clone(), partition);
        match remaining.get(&key) {
            Some(&high) if offset < high => {
                consumed.entry(topic).or_default().push(Record {
                    partition,
                    offset,
                    key: parse(message.key()),
                    value: parse(message.payload()),
                    headers: position_header(&message),
                });
                if offset + 1 >= high {
                    remaining.remove(&key);
                }
            }
            _ => {} // past the watermark taken at the start: left for the next read
        }
    }
    consumed
}

/// The record's position header alone (see [`POSITION_HEADER`]).
/// A `pgcdc.position` value as people read it.
fn stamp_text(value: &[u8]) -> String {
    pgcdc_kafka::sink::position::Stamp::parse(value).map_or_else(
        || format!("not a stamp: {:?}", String::from_utf8_lossy(value)),
        |stamp| stamp.to_string(),
    )
}

fn position_header(message: &rdkafka::message::BorrowedMessage<'_>) -> Vec<(String, Vec<u8>)> {
    use rdkafka::message::Headers;
    message
        .headers()
        .and_then(|headers| {
            headers
                .iter()
                .find(|h| h.key == POSITION_HEADER)
                .and_then(|h| h.value)
        })
        .map(|value| vec![(POSITION_HEADER.to_owned(), value.to_vec())])
        .unwrap_or_default()
}

fn topics_of(s: &Scenario, tables: &[&str]) -> Vec<String> {
    tables.iter().map(|t| s.topic(t)).collect()
}

/// Waits until the slot is confirmed at or past `end`, the last write;
/// with `connector`, panics if that process exits meanwhile.
async fn await_confirmed_past(s: &Scenario, end: Lsn, connector: Option<&ConnectorProcess>) {
    wait_until(
        TIMEOUT,
        "the slot confirmed past the last write",
        || async {
            if let Some(connector) = connector {
                connector.assert_running("while catching up");
            }
            s.confirmed_flush_lsn().is_some_and(|c| c >= end)
        },
    )
    .await;
}

/// Every row of `tables` against its topic (read back from `bootstrap`
/// with `decode`) through [`verify`]; asserts that the `written` changes
/// are exactly the ones the tables account for.
async fn verify_tables(
    scenario: &str,
    s: &Scenario,
    bootstrap: &str,
    tables: &[&str],
    written: u64,
    decode: Decode,
) -> Verified {
    let source = source_rows(s, tables);
    let consumed =
        read_topics_decoded(bootstrap, &topics_of(s, tables), Some(TIMEOUT), decode).await;
    let verified = verify(scenario, written, &source, &consumed);
    assert_eq!(
        verified.changes, written,
        "the count of committed changes matches the tables"
    );
    verified
}

/// Logs of the in-process connectors, shown with a failing test's output.
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PGCDC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

// ---------------------------------------------------------------------------
// 1. kill -9 under load
// ---------------------------------------------------------------------------

/// The connector binary is `kill -9`ed at random moments while a writer
/// keeps committing multi-row transactions into three tables, and restarted
/// at once each time. After the last instance caught up and stopped on
/// SIGTERM, every committed version of every row is in Kafka, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_9_under_load_loses_nothing() {
    const TABLES: [&str; 3] = ["accounts", "orders", "items"];
    // 20 by default; PGCDC_FAULT_ROUNDS raises it for a soak.
    let rounds: usize = std::env::var("PGCDC_FAULT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let started = Instant::now();
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "kill9");
    create_tables(&s, &TABLES);
    // Several partitions, so acknowledgements arrive out of order across
    // them and the ack tracker's ordering is exercised.
    for topic in topics_of(&s, &TABLES) {
        kafka.create_topic(&topic, 3).expect("create topic");
    }
    let (mut rng, seed) = XorShift::seeded(SEED_ENV);
    let logs = LogDir::new("crash_recovery_kill9");
    println!(
        "[kill -9] seed {seed} (CRASH_RECOVERY_SEED={seed} repeats the timings); connector logs in {}",
        logs.dir().display()
    );
    let args = s.args(&bootstrap, &["--status-interval", "250ms"]);

    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "slot created", || async {
        connector.assert_running("before creating the slot");
        s.confirmed_flush_lsn().is_some()
    })
    .await;

    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.next()),
        Arc::clone(&stop_writer),
    ));

    let mut streaming_kills = 0;
    for round in 1..=rounds {
        // A random moment is the point: the kills are to land anywhere in
        // startup, snapshot and streaming, reproducibly from the seed.
        let delay = Duration::from_millis(200 + rng.below(1800) as u64);
        tokio::time::sleep(delay).await;
        connector.assert_running(&format!("before kill round {round}"));
        let streaming = connector.log_text().contains("starting replication");
        streaming_kills += usize::from(streaming);
        let confirmed = s.confirmed_flush_lsn();
        let status = connector.kill_9();
        println!(
            "[kill -9] round {round}: killed after {:?} ({}), slot confirmed at {}, {status}",
            connector.started.elapsed(),
            if streaming {
                "streaming"
            } else {
                "still starting"
            },
            confirmed.map_or("-".to_owned(), |l| l.to_string()),
        );
        connector = ConnectorProcess::spawn(&args, logs.path(round));
    }

    // The last instance streams under load, then the writer stops and the
    // connector must catch up with everything.
    connector.await_streaming(&s).await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    let end = s.current_lsn();
    let catch_up = Instant::now();
    await_confirmed_past(&s, end, Some(&connector)).await;
    println!(
        "[kill -9] {} transactions written; last instance caught up {:?} after the writer stopped",
        stats.transactions,
        catch_up.elapsed()
    );
    let status = connector.terminate(TIMEOUT).await;
    let log = connector.log_text();
    assert_eq!(
        status.code(),
        Some(0),
        "graceful exit on SIGTERM; log:\n{log}"
    );
    assert!(log.contains("stopped"), "reports the stop: {log}");

    let verified = verify_tables(
        "kill -9",
        &s,
        &bootstrap,
        &TABLES,
        stats.changes,
        json_decoder(),
    )
    .await;
    assert!(
        streaming_kills > 0,
        "at least one kill hit a streaming connector"
    );
    println!(
        "[kill -9] {rounds} kills ({streaming_kills} while streaming), {:.1} duplicates per kill, {:?} in all",
        verified.duplicates as f64 / rounds as f64,
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// 2. Postgres restarts and a cut replication connection
// ---------------------------------------------------------------------------

/// Waits until every row of `tables` has arrived with its latest version;
/// panics with the connector's error if it stopped instead of recovering.
/// Returns the connector and how long it took.
async fn await_all_arrived(
    what: &str,
    s: &Scenario,
    bootstrap: &str,
    tables: &[&str],
    running: Running,
) -> (Running, Duration) {
    await_all_arrived_decoded(what, s, bootstrap, tables, running, json_decoder()).await
}

/// [`await_all_arrived`] for records in another format, made JSON by `decode`.
async fn await_all_arrived_decoded(
    what: &str,
    s: &Scenario,
    bootstrap: &str,
    tables: &[&str],
    running: Running,
    decode: Decode,
) -> (Running, Duration) {
    let started = Instant::now();
    let source = source_rows(s, tables);
    let topics = topics_of(s, tables);
    wait_until(TIMEOUT, what, || async {
        running.is_finished()
            || covers(
                &source,
                &read_topics_decoded(bootstrap, &topics, None, Arc::clone(&decode)).await,
            )
    })
    .await;
    if running.is_finished() {
        let outcome = running.wait_for_exit(Duration::from_secs(5)).await;
        panic!(
            "the connector stopped by itself instead of recovering, waiting for {what}: {}",
            match outcome {
                Ok(summary) => format!("stopped cleanly: {summary:?}"),
                Err(e) => error_chain(&e),
            }
        );
    }
    (running, started.elapsed())
}

/// Against a private server: a fast restart, a terminated walsender and an
/// immediate (crash) stop, each with transactions written around it. The
/// in-process connector recovers from each by itself, restarting from the
/// slot, and every change arrives in order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_and_connection_cut_are_survived() {
    const TABLES: [&str; 2] = ["customers", "invoices"];
    init_logs();
    let pg: &'static Postgres = Box::leak(Box::new(
        Postgres::launch().unwrap_or_else(|e| panic!("private postgres: {}", e.report())),
    ));
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "pgfaults");
    create_tables(&s, &TABLES);
    for topic in topics_of(&s, &TABLES) {
        kafka.create_topic(&topic, 2).expect("create topic");
    }
    let (rng, seed) = XorShift::seeded(SEED_ENV);
    println!("[postgres faults] seed {seed}");
    let mut workload = Workload::new(&TABLES, rng.0);
    let mut written = 0;

    let running = s.start(&bootstrap, &["--status-interval", "200ms"]);
    s.await_slot().await;
    written += workload.run_blocking(&s, 20);
    let (running, took) =
        await_all_arrived("the first batch", &s, &bootstrap, &TABLES, running).await;
    println!("[postgres faults] first batch arrived in {took:?}");

    // Fast restart, with transactions just written and possibly in flight.
    written += workload.run_blocking(&s, 20);
    let fault = Instant::now();
    pg.restart()
        .unwrap_or_else(|e| panic!("postgres restarts: {}", e.report()));
    written += workload.run_blocking(&s, 20);
    let (running, took) = await_all_arrived(
        "the batches around a fast restart",
        &s,
        &bootstrap,
        &TABLES,
        running,
    )
    .await;
    println!(
        "[postgres faults] recovered from a fast restart: all rows {:?} after the restart began (waited {took:?})",
        fault.elapsed()
    );

    // The walsender terminated under the connector.
    wait_until(TIMEOUT, "the connector streaming again", || async {
        running.is_finished()
            || s.query_one(&format!(
                "SELECT active_pid::text FROM pg_replication_slots WHERE slot_name = '{}'",
                s.slot
            ))
            .is_some()
    })
    .await;
    written += workload.run_blocking(&s, 10);
    let fault = Instant::now();
    assert_eq!(
        s.query_one(&format!(
            "SELECT pg_terminate_backend(active_pid)::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref(),
        Some("true"),
        "the walsender is terminated"
    );
    written += workload.run_blocking(&s, 20);
    let (running, took) = await_all_arrived(
        "the batches around a terminated walsender",
        &s,
        &bootstrap,
        &TABLES,
        running,
    )
    .await;
    println!(
        "[postgres faults] recovered from a terminated walsender: all rows {:?} after it (waited {took:?})",
        fault.elapsed()
    );

    // A crash of the server: immediate stop, crash recovery on start.
    written += workload.run_blocking(&s, 20);
    let fault = Instant::now();
    pg.stop(StopMode::Immediate)
        .unwrap_or_else(|e| panic!("postgres stops: {}", e.report()));
    pg.start()
        .unwrap_or_else(|e| panic!("postgres starts: {}", e.report()));
    written += workload.run_blocking(&s, 20);
    let (running, took) = await_all_arrived(
        "the batches around an immediate stop",
        &s,
        &bootstrap,
        &TABLES,
        running,
    )
    .await;
    println!(
        "[postgres faults] recovered from an immediate stop: all rows {:?} after it (waited {took:?})",
        fault.elapsed()
    );

    await_confirmed_past(&s, s.current_lsn(), None).await;
    running.stop().await;
    verify_tables(
        "postgres faults",
        &s,
        &bootstrap,
        &TABLES,
        written,
        json_decoder(),
    )
    .await;
    pg.stop(StopMode::Fast)
        .unwrap_or_else(|e| panic!("postgres stops: {}", e.report()));
}

// ---------------------------------------------------------------------------
// 3. A message Kafka will never accept
// ---------------------------------------------------------------------------

fn lsn_of(record: &Record) -> Lsn {
    Lsn::new(
        record.value.as_ref().expect("value")["payload"]["source"]["lsn"]
            .as_u64()
            .expect("source.lsn is a number"),
    )
}

/// A row too large for the producer's `message.max.bytes` (librdkafka
/// refuses it at produce time) stops the connector with an error that names
/// the fix, instead of retrying forever or skipping it; the slot stays before
/// that transaction, so a restart with the limit raised delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_kafka_rejection_stops_without_confirming() {
    init_logs();
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "toolarge");
    s.sql("CREATE TABLE docs (id int PRIMARY KEY, body text NOT NULL)");
    let topic = s.topic("docs");

    let running = s.start(
        &bootstrap,
        &[
            "--status-interval",
            "200ms",
            // A one-column row is ~2.6 kB as JSON with schemas (key 170 B,
            // value ~2.5 kB), so 2000 would reject it too; the 10 kB row
            // becomes ~12.5 kB.
            "--kafka-property",
            "message.max.bytes=5000",
        ],
    );
    s.await_slot().await;
    s.sql("INSERT INTO docs VALUES (1, 'small')");
    let small = consume(&bootstrap, &topic, 1, TIMEOUT).await;
    assert_eq!(small.len(), 1, "the small row arrives under the limit");
    let small_lsn = lsn_of(&small[0]);
    wait_until(TIMEOUT, "slot confirmed past the small row", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c > small_lsn)
    })
    .await;

    let mut rng = XorShift(0x5eed);
    let body: String = (0..10_000)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect();
    s.sql(&format!("INSERT INTO docs VALUES (2, '{body}')"));
    let rejected = Instant::now();
    let outcome = running.wait_for_exit(TIMEOUT).await;
    let error = match outcome {
        Ok(summary) => panic!("the connector stopped without an error: {summary:?}"),
        Err(error) => error,
    };
    let message = error_chain(&error);
    println!(
        "[too large] stopped {:?} after the insert: {message}",
        rejected.elapsed()
    );
    assert!(
        !error.is_retryable(),
        "a message Kafka will never accept is a definite failure: {message}"
    );
    assert!(
        message.contains("larger than") && message.contains("message.max.bytes"),
        "the error says the message is too large and what to raise: {message}"
    );
    let confirmed = s.confirmed_flush_lsn().expect("slot exists");

    // The row is not lost: without the limit, a restart delivers it.
    let running = s.start(&bootstrap, &["--status-interval", "200ms"]);
    let all = consume(&bootstrap, &topic, 2, TIMEOUT).await;
    let ids: Vec<i64> = all
        .iter()
        .map(|r| {
            r.value.as_ref().expect("value")["payload"]["after"]["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    assert_eq!(
        ids,
        [1, 2],
        "after the restart the big row arrives, and the confirmed small one is not repeated"
    );
    assert_eq!(
        all[1].value.as_ref().expect("value")["payload"]["after"]["body"].as_str(),
        Some(body.as_str())
    );
    let big_lsn = lsn_of(&all[1]);
    assert!(
        confirmed <= big_lsn,
        "after the rejection the slot stayed before the big row's transaction (confirmed {confirmed}, big row at {big_lsn})"
    );
    wait_until(TIMEOUT, "slot confirmed past the big row", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c > big_lsn)
    })
    .await;
    running.stop().await;
}

// ---------------------------------------------------------------------------
// 4. A transaction larger than the in-flight bound
// ---------------------------------------------------------------------------

/// With at most 16 messages and 4 KiB unacknowledged, a 5,000-row
/// transaction still flows: the bound paces reading, it does not need the
/// whole transaction in flight. Everything arrives in order, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_larger_than_in_flight_bound_flows() {
    const ROWS: i64 = 5_000;
    init_logs();
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "bigtxn");
    create_tables(&s, &["bulk"]);

    let running = s.start(
        &bootstrap,
        &[
            "--max-in-flight-messages",
            "16",
            "--max-in-flight-bytes",
            "4096",
            "--status-interval",
            "200ms",
        ],
    );
    s.await_slot().await;
    let started = Instant::now();
    s.sql(&format!(
        "INSERT INTO bulk SELECT g, 1, 'row ' || g FROM generate_series(1, {ROWS}) g"
    ));
    let end = s.current_lsn();
    let records = consume(
        &bootstrap,
        &s.topic("bulk"),
        ROWS as usize,
        Duration::from_secs(120),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        records.len(),
        ROWS as usize,
        "every row of the transaction arrives"
    );
    let ids: Vec<i64> = records.iter().map(|r| change_of("bulk", r).id).collect();
    assert!(
        ids.iter().copied().eq(1..=ROWS),
        "rows arrive in WAL order (first ids: {:?})",
        &ids[..10.min(ids.len())]
    );
    let txids: BTreeSet<String> = records
        .iter()
        .map(|r| r.value.as_ref().expect("value")["payload"]["source"]["txId"].to_string())
        .collect();
    assert_eq!(txids.len(), 1, "all from one transaction: {txids:?}");
    wait_until(TIMEOUT, "slot confirmed past the transaction", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c >= end)
    })
    .await;
    let summary = running.stop().await;
    assert_eq!(summary.transactions, 1);
    assert_eq!(summary.events, ROWS as u64);

    let consumed = read_topics(&bootstrap, &[s.topic("bulk")], Some(TIMEOUT)).await;
    let verified = verify(
        "in-flight bound",
        ROWS as u64,
        &source_rows(&s, &["bulk"]),
        &consumed,
    );
    assert_eq!(verified.duplicates, 0, "no fault, so no re-sends");
    println!("[in-flight bound] {ROWS} rows in one transaction arrived in {took:?}");
}

// ---------------------------------------------------------------------------
// The checker itself
// ---------------------------------------------------------------------------

/// [`verify`] accepts re-sent tails and rejects everything else: a lost
/// version, a reordering, a re-send that skips a version, a missing latest
/// version, a row that is not in the table.
#[test]
fn verify_accepts_resent_tails_and_rejects_loss_or_reordering() {
    let topic = "app.public.t".to_owned();
    let consumed = |versions: &[i64]| {
        let records = versions
            .iter()
            .enumerate()
            .map(|(offset, &v)| Record {
                partition: 0,
                offset: offset as i64,
                key: Some(serde_json::json!({"payload": {"id": 1}})),
                value: Some(serde_json::json!({"payload": {
                    "after": {"id": 1, "version": v},
                    "op": if v == 1 { "c" } else { "u" },
                }})),
                headers: Vec::new(),
            })
            .collect();
        BTreeMap::from([(topic.clone(), records)])
    };
    let source = |latest: i64| BTreeMap::from([((topic.clone(), 1), latest)]);
    let rejects = |versions: &[i64], latest: i64| {
        let (source, consumed) = (source(latest), consumed(versions));
        std::panic::catch_unwind(|| verify("checker", 0, &source, &consumed)).is_err()
    };

    let verified = verify(
        "checker",
        4,
        &source(4),
        &consumed(&[1, 2, 3, 2, 3, 4, 3, 4]),
    );
    assert_eq!(verified.duplicates, 4);
    assert_eq!(verified.changes, 4);
    assert!(rejects(&[1, 3], 3), "version 2 lost");
    assert!(rejects(&[2, 1], 2), "out of order");
    assert!(rejects(&[1, 2, 3, 1, 3], 3), "a re-send that skips 2");
    assert!(rejects(&[1, 2], 3), "the latest version missing");
    assert!(rejects(&[1, 2, 3, 4], 3), "a version the table never had");
    let (empty, consumed) = (BTreeMap::new(), consumed(&[1]));
    assert!(
        std::panic::catch_unwind(|| verify("checker", 0, &empty, &consumed)).is_err(),
        "a row that is not in the table"
    );
}

// ---------------------------------------------------------------------------
// 5. Network faults through a TCP proxy
// ---------------------------------------------------------------------------

/// `args` with `--pg-url` pointing at `port` instead of the server's own.
fn through_port(args: Vec<String>, pg: &Postgres, port: u16) -> Vec<String> {
    let direct = format!("127.0.0.1:{}/", pg.port());
    let proxied = format!("127.0.0.1:{port}/");
    args.into_iter()
        .map(|a| match a.contains(&direct) {
            true => a.replace(&direct, &proxied),
            false => a,
        })
        .collect()
}

/// Every connection of the connector goes through a fault proxy: to
/// Postgres (SQL and replication) and to a broker that advertises its proxy.
/// Latency, a Kafka stall, a Kafka stall longer than the delivery timeout,
/// a Postgres stall longer than wal_sender_timeout, connection resets on
/// both sides and refused reconnects are injected while transactions are
/// written; after each the connector recovers by itself, and at the end
/// every change is in Kafka, per key in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_faults_through_a_proxy_lose_nothing() {
    const TABLES: [&str; 2] = ["payments", "refunds"];
    init_logs();
    let pg = Postgres::shared();
    let kafka = common::kafka_behind_proxy().await;
    let kafka_proxy = kafka.proxy().expect("the broker's proxy");
    let direct = kafka.bootstrap_servers();
    let proxied = kafka.proxied_bootstrap_servers().expect("proxied listener");
    let pg_proxy = FaultProxy::start(([127, 0, 0, 1], pg.port()).into()).expect("postgres proxy");

    let s = Scenario::new(pg, "netfaults");
    create_tables(&s, &TABLES);
    let (rng, seed) = XorShift::seeded(SEED_ENV);
    println!("[network faults] seed {seed}");
    let mut workload = Workload::new(&TABLES, rng.0);
    let mut written = 0;
    let args = through_port(
        s.args(
            &proxied,
            &[
                "--status-interval",
                "200ms",
                // Short enough that a long Kafka stall makes deliveries fail.
                "--kafka-property",
                "message.timeout.ms=4000",
                "--kafka-property",
                "socket.timeout.ms=2000",
            ],
        ),
        pg,
        pg_proxy.port(),
    );
    let running = s.start_args(args);
    s.await_slot().await;
    let phase = |name: &'static str| {
        let started = Instant::now();
        move |took: Duration| {
            println!(
                "[network faults] {name}: recovered, all rows in Kafka {:?} after the fault began (waited {took:?})",
                started.elapsed()
            );
        }
    };

    // 1. 40 ms each way on both paths.
    pg_proxy.set_latency(Duration::from_millis(40));
    kafka_proxy.set_latency(Duration::from_millis(40));
    let done = phase("latency");
    written += workload.run_blocking(&s, 20);
    let (running, took) =
        await_all_arrived("rows under latency", &s, &direct, &TABLES, running).await;
    done(took);
    pg_proxy.set_latency(Duration::ZERO);
    kafka_proxy.set_latency(Duration::ZERO);

    // 2. Kafka stalls for less than the delivery timeout: nothing is
    //    confirmed past what is stuck, and it flows on when bytes do.
    let done = phase("kafka stall (2 s)");
    kafka_proxy.stall();
    written += workload.run_blocking(&s, 10);
    let stuck = s.current_lsn();
    // The stall's length is the fault; throughout it, the slot stays put.
    hold_for(Duration::from_secs(2), || async {
        assert!(
            s.confirmed_flush_lsn().is_some_and(|c| c < stuck),
            "nothing confirmed past changes Kafka has not acknowledged"
        );
    })
    .await;
    kafka_proxy.resume();
    let (running, took) =
        await_all_arrived("rows after a kafka stall", &s, &direct, &TABLES, running).await;
    done(took);

    // 3. Kafka unreachable for longer than message.timeout.ms: deliveries
    //    fail, the slot stays before them, and the retried attempt sends
    //    them once the broker is back.
    let done = phase("kafka stall past the delivery timeout (8 s)");
    kafka_proxy.stall();
    written += workload.run_blocking(&s, 10);
    let stuck = s.current_lsn();
    // Longer than message.timeout.ms, so the deliveries fail; throughout,
    // the slot stays before them.
    hold_for(Duration::from_secs(8), || async {
        assert!(
            s.confirmed_flush_lsn().is_some_and(|c| c < stuck),
            "failed deliveries are not confirmed"
        );
    })
    .await;
    kafka_proxy.resume();
    let (running, took) = await_all_arrived(
        "rows after deliveries timed out",
        &s,
        &direct,
        &TABLES,
        running,
    )
    .await;
    done(took);

    // 4. Postgres stalls past wal_sender_timeout (10 s): the server drops
    //    the walsender; the connector reconnects when the path is back.
    let done = phase("postgres stall past wal_sender_timeout");
    pg_proxy.stall();
    written += workload.run_blocking(&s, 10);
    wait_until(
        TIMEOUT,
        "the server to drop the stalled walsender (the slot inactive)",
        || async { s.slot_active() == Some(false) },
    )
    .await;
    pg_proxy.resume();
    written += workload.run_blocking(&s, 10);
    let (running, took) =
        await_all_arrived("rows after a postgres stall", &s, &direct, &TABLES, running).await;
    done(took);

    // 5. Every connection reset on both paths, and Postgres refusing new
    //    connections for a while: the connector retries until it gets in.
    let done = phase("resets, then refused reconnects (3 s)");
    written += workload.run_blocking(&s, 10);
    pg_proxy.refuse(true);
    pg_proxy.reset();
    kafka_proxy.reset();
    written += workload.run_blocking(&s, 10);
    wait_until(
        TIMEOUT,
        "the reset to end the walsender (the slot inactive)",
        || async { s.slot_active() == Some(false) },
    )
    .await;
    // How long reconnects are refused is the fault itself; throughout, the
    // connector keeps retrying and nothing holds the slot.
    hold_for(Duration::from_secs(3), || async {
        assert!(
            !running.is_finished(),
            "the connector retries refused reconnects rather than stopping"
        );
        assert_eq!(
            s.slot_active(),
            Some(false),
            "no walsender while Postgres is unreachable"
        );
    })
    .await;
    pg_proxy.refuse(false);
    let (running, took) = await_all_arrived(
        "rows after resets and refused reconnects",
        &s,
        &direct,
        &TABLES,
        running,
    )
    .await;
    done(took);
    assert!(
        pg_proxy.accepted_connections() >= 3,
        "the connector reconnected to Postgres through the proxy"
    );

    await_confirmed_past(&s, s.current_lsn(), None).await;
    running.stop().await;
    verify_tables(
        "network faults",
        &s,
        &direct,
        &TABLES,
        written,
        json_decoder(),
    )
    .await;
}

// ---------------------------------------------------------------------------
// 6. The slot dropped or invalidated while the connector is down
// ---------------------------------------------------------------------------

/// After the slot was lost, `--snapshot-mode when_needed` takes a new
/// snapshot: every source row must then be in its topic at its latest
/// version as a read (`r`) event. Returns the rows checked.
async fn assert_resnapshotted(s: &Scenario, bootstrap: &str, tables: &[&str]) -> usize {
    let source = source_rows(s, tables);
    let topics = topics_of(s, tables);
    wait_until(TIMEOUT, "every row re-snapshotted", || async {
        let read_back: BTreeSet<(String, i64, i64)> = read_topics(bootstrap, &topics, None)
            .await
            .iter()
            .flat_map(|(topic, records)| {
                records
                    .iter()
                    .map(|r| change_of(topic, r))
                    .filter(|c| c.op == "r")
                    .map(|c| (topic.clone(), c.id, c.version))
                    .collect::<Vec<_>>()
            })
            .collect();
        source
            .iter()
            .all(|((topic, id), v)| read_back.contains(&(topic.clone(), *id, *v)))
    })
    .await;
    source.len()
}

/// The slot is dropped while the connector is down, and changes are made
/// meanwhile. `--snapshot-mode initial` must not paper over the gap with a
/// fresh snapshot: it stops with an error naming the slot and the way on,
/// creating nothing. `when_needed` then re-snapshots every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_slot_is_detected_and_resnapshotted_when_needed() {
    const TABLES: [&str; 2] = ["ledger", "wallets"];
    init_logs();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "slotdrop");
    create_tables(&s, &TABLES);
    let mut workload = Workload::new(&TABLES, 7);
    let mut written = workload.run_blocking(&s, 10);
    let running = s.start(&bootstrap, &[]);
    let (running, _) = await_all_arrived("the first rows", &s, &bootstrap, &TABLES, running).await;
    running.stop().await;

    s.sql(&format!("SELECT pg_drop_replication_slot('{}')", s.slot));
    written += workload.run_blocking(&s, 10);

    let error = s
        .start(&bootstrap, &[])
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("a missing slot with an earlier run's topics stops the connector");
    let message = error_chain(&error);
    for part in [
        s.slot.as_str(),
        "does not exist",
        "--snapshot-mode when_needed",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert_eq!(s.confirmed_flush_lsn(), None, "no slot was created");

    let running = s.start(&bootstrap, &["--snapshot-mode", "when_needed"]);
    let rows = assert_resnapshotted(&s, &bootstrap, &TABLES).await;
    // Streaming goes on from the new slot.
    written += workload.run_blocking(&s, 5);
    let (running, _) = await_all_arrived(
        "rows after the new snapshot",
        &s,
        &bootstrap,
        &TABLES,
        running,
    )
    .await;
    running.stop().await;
    println!("[slot dropped] {written} changes written, {rows} rows re-snapshotted");
    println!("FAULT-SUITE\tslot dropped\t{written}\t{rows} rows\t-\tpass");
}

/// The slot is invalidated (`max_slot_wal_keep_size` exceeded) while the
/// connector is down: by default the connector stops with the error that
/// explains it; `when_needed` drops the slot and re-snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_slot_is_detected_and_resnapshotted_when_needed() {
    const TABLES: [&str; 1] = ["balances"];
    init_logs();
    let pg: &'static Postgres = Box::leak(Box::new(
        Postgres::launch().unwrap_or_else(|e| panic!("private postgres: {}", e.report())),
    ));
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "slotlost");
    create_tables(&s, &TABLES);
    s.sql("CREATE TABLE filler (id bigint PRIMARY KEY, pad text)");
    let mut workload = Workload::new(&TABLES, 11);
    let mut written = workload.run_blocking(&s, 10);
    let running = s.start(&bootstrap, &["--table", "public.balances"]);
    let (running, _) = await_all_arrived("the first rows", &s, &bootstrap, &TABLES, running).await;
    running.stop().await;

    // Keep at most 1 MB of WAL for slots, then write and switch several segments.
    pg.execute(
        "postgres",
        "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'",
    )
    .expect("set max_slot_wal_keep_size");
    pg.execute("postgres", "SELECT pg_reload_conf()")
        .expect("reload");
    written += workload.run_blocking(&s, 5);
    for round in 0..4 {
        s.sql(&format!(
            "INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series({}, {}) g",
            round * 5000 + 1,
            round * 5000 + 5000
        ));
        s.sql("SELECT pg_switch_wal()");
    }
    wait_until(TIMEOUT, "the slot invalidated", || async {
        s.sql("CHECKPOINT");
        s.query_one(&format!(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref()
            == Some("lost")
    })
    .await;

    let error = s
        .start(&bootstrap, &["--table", "public.balances"])
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("an invalidated slot stops the connector");
    let message = error_chain(&error);
    for part in [
        s.slot.as_str(),
        "invalidated",
        "max_slot_wal_keep_size",
        "when_needed",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }

    let running = s.start(
        &bootstrap,
        &[
            "--table",
            "public.balances",
            "--snapshot-mode",
            "when_needed",
        ],
    );
    let rows = assert_resnapshotted(&s, &bootstrap, &TABLES).await;
    running.stop().await;
    println!("[slot invalidated] {written} changes written, {rows} rows re-snapshotted");
    println!("FAULT-SUITE\tslot invalidated\t{written}\t{rows} rows\t-\tpass");
    pg.stop(StopMode::Fast)
        .unwrap_or_else(|e| panic!("postgres stops: {}", e.report()));
}
