//! The long soak (issue 27), run by `scripts/fault-suite.sh --soak`, not by
//! `cargo test` (it is `#[ignore]`d): one connector binary, with the
//! default delivery settings (`--skip-delivered`), streams a continuous
//! write load through rounds of mixed faults:
//!
//! - **kill -9** of the connector at a random moment, restarted at once;
//! - **broker kill**: the Kafka broker `SIGKILL`ed, down for 2-6 s, restarted;
//! - **postgres immediate**: PostgreSQL stopped in immediate mode (a crash,
//!   crash recovery on start) between two of the writer's transactions;
//! - **network stall**: both the Postgres and the Kafka path stalled for
//!   1-4 s by the TCP proxies, then every connection on both reset.
//!
//! After each round, once the slot is confirmed past the WAL position of the
//! moment the connector came back (everything written before is then in
//! Kafka, duplicates included), the records that arrived since the previous
//! round are read, and the ones whose key and version Kafka already held are
//! counted as that round's duplicates. The bounds per fault kind
//! ([`Fault::bound`]) are asserted after the summary table is printed, and at
//! the end every source row is checked against its topic ([`verify`]).
//!
//! `PGCDC_SOAK_ROUNDS` (default 60) sets the rounds; `CRASH_RECOVERY_SEED`
//! repeats a run's choices and timings.

use std::collections::HashSet;
use std::io::{Read, Write};

use super::common::metric_sample;
use super::*;

/// How many records a connector may have handed to Kafka unacknowledged
/// (`--max-in-flight-messages`): the most a kill -9 may re-send.
const IN_FLIGHT: usize = 1000;

const TABLES: [&str; 3] = ["soak_accounts", "soak_orders", "soak_items"];

/// One kind of fault, in the order rounds take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Kill9,
    BrokerKill,
    PostgresImmediate,
    NetworkStall,
}

impl Fault {
    const ALL: [Fault; 4] = [
        Fault::Kill9,
        Fault::BrokerKill,
        Fault::PostgresImmediate,
        Fault::NetworkStall,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::Kill9 => "kill -9",
            Fault::BrokerKill => "broker kill",
            Fault::PostgresImmediate => "postgres immediate restart",
            Fault::NetworkStall => "network stall + reset",
        }
    }

    /// The most duplicates one round of this fault may leave, and why.
    ///
    /// - kill -9: the records whose produce request was in flight when the
    ///   process died may reach the log after the restart read the tails
    ///   (at most the in-flight bound);
    /// - the others leave the process alive: its next attempt starts from
    ///   what Kafka acknowledged, and the producer's retries are idempotent,
    ///   so none.
    fn bound(self) -> usize {
        match self {
            Fault::Kill9 => IN_FLIGHT,
            Fault::BrokerKill | Fault::PostgresImmediate | Fault::NetworkStall => 0,
        }
    }
}

/// What the rounds of one fault kind added up to.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    rounds: usize,
    records: usize,
    duplicates: usize,
    worst: usize,
    skipped: u64,
    tail_failures: u64,
    over_bound: usize,
}

/// Reads what arrived in the soak's topics since the last read and counts
/// the records whose `(topic, id, version)` Kafka already held.
struct Arrivals {
    consumer: BaseConsumer,
    partitions: Vec<(String, i32)>,
    next: BTreeMap<(String, i32), i64>,
    seen: HashSet<(String, i64, i64)>,
}

/// What one read found: records, duplicates, and the position headers of
/// the first few duplicates (to tell which run sent them).
struct Arrived {
    records: usize,
    duplicates: usize,
    examples: Vec<String>,
}

impl Arrivals {
    fn new(bootstrap: &str, topics: &[String], partitions: i32) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", unique_name("soak_reader"))
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        Arrivals {
            consumer,
            partitions: topics
                .iter()
                .flat_map(|t| (0..partitions).map(move |p| (t.clone(), p)))
                .collect(),
            next: BTreeMap::new(),
            seen: HashSet::new(),
        }
    }

    /// Every record up to the high watermarks of now (blocking).
    fn read_new(&mut self) -> Arrived {
        let mut assignment = TopicPartitionList::new();
        let mut remaining: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for (topic, p) in &self.partitions {
            let (_, high) = crate::common::watermarks(&self.consumer, topic, *p);
            let from = self.next.get(&(topic.clone(), *p)).copied().unwrap_or(0);
            if high > from {
                remaining.insert((topic.clone(), *p), high);
                assignment
                    .add_partition_offset(topic, *p, Offset::Offset(from))
                    .expect("partition");
            }
        }
        let mut arrived = Arrived {
            records: 0,
            duplicates: 0,
            examples: Vec::new(),
        };
        if remaining.is_empty() {
            return arrived;
        }
        self.consumer.assign(&assignment).expect("assign");
        let deadline = Instant::now() + TIMEOUT;
        while !remaining.is_empty() {
            assert!(
                Instant::now() < deadline,
                "timed out reading the soak's topics; left: {remaining:?}"
            );
            let Some(message) = self.consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            // The reader outlives broker kills: their connection errors
            // come up here once, and the reader reconnects by itself.
            let Ok(message) = message else {
                continue;
            };
            let key = (message.topic().to_owned(), message.partition());
            let Some(&high) = remaining.get(&key) else {
                continue;
            };
            if message.offset() >= high {
                continue;
            }
            self.next.insert(key.clone(), message.offset() + 1);
            if message.offset() + 1 >= high {
                remaining.remove(&key);
            }
            arrived.records += 1;
            let value: Json =
                serde_json::from_slice(message.payload().expect("no tombstones in the soak"))
                    .expect("JSON value");
            let after = &value["payload"]["after"];
            let (id, version) = (
                after["id"].as_i64().expect("id"),
                after["version"].as_i64().expect("version"),
            );
            if !self.seen.insert((key.0.clone(), id, version)) {
                arrived.duplicates += 1;
                if arrived.examples.len() < 5 {
                    let position = position_header(&message)
                        .pop()
                        .map_or("no position".to_owned(), |(_, v)| stamp_text(&v));
                    arrived.examples.push(format!(
                        "{} p{} @{} id {id} v{version} [{position}]",
                        key.0,
                        key.1,
                        message.offset()
                    ));
                }
            }
        }
        let _ = self.consumer.unassign();
        arrived
    }
}

/// `GET /metrics` of the connector on `addr`; `None` while it does not answer.
fn scrape(addr: &str) -> Option<String> {
    let mut socket = std::net::TcpStream::connect(addr).ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    socket.read_to_string(&mut response).ok()?;
    Some(response.split_once("\r\n\r\n")?.1.to_owned())
}

/// A series of the metrics page (labelled with the default pipeline).
fn sample(page: &str, name: &str) -> u64 {
    metric_sample(page, &format!("{name}{{pipeline=\"default\"}}")).map_or(0, |v| v as u64)
}

/// The connector's counters of records skipped as already in Kafka and of
/// tail reads that failed, since the process started.
fn dedupe_counters(addr: &str) -> (u64, u64) {
    scrape(addr).map_or((0, 0), |page| {
        (
            sample(&page, "pgcdc_kafka_records_already_delivered_total"),
            sample(&page, "pgcdc_kafka_tail_read_failures_total"),
        )
    })
}

/// Commits workload transactions until `stop`, each one while holding
/// `gate`: a PostgreSQL restart (which takes the gate) never falls inside a
/// transaction, so a transaction that fails on a closed connection was never
/// sent to a server, and is sent again on a new one.
async fn write_gated(
    pg: &'static Postgres,
    db: String,
    mut workload: Workload,
    stop: Arc<AtomicBool>,
    gate: Arc<tokio::sync::Mutex<()>>,
) -> crate::common::workload::WriterStats {
    let mut stats = crate::common::workload::WriterStats::default();
    let mut client: Option<tokio_postgres::Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let txn = workload.plan();
        loop {
            let _held = gate.lock().await;
            let connection = match client.take().filter(|c| !c.is_closed()) {
                Some(c) => c,
                None => match pg.connect(&db).await {
                    Ok(c) => c,
                    Err(_) => {
                        drop(_held);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            match connection.batch_execute(&txn.sql).await {
                Ok(()) => {
                    client = Some(connection);
                    break;
                }
                Err(e) if e.is_closed() => continue,
                Err(e) => panic!("writer transaction failed: {e}: {}", txn.sql),
            }
        }
        stats.changes += workload.committed(txn);
        stats.transactions += 1;
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    stats
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the long soak: scripts/fault-suite.sh --soak"]
async fn soak_mixed_faults_bounded_duplicates() {
    const SCENARIO: &str = "soak";
    let rounds: usize = std::env::var("PGCDC_SOAK_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(60);
    let started = Instant::now();
    let pg: &'static Postgres = Box::leak(Box::new(
        Postgres::launch().unwrap_or_else(|e| panic!("private postgres: {}", e.report())),
    ));
    let kafka = Arc::new(crate::common::kafka_behind_proxy().await);
    let kafka_proxy = kafka.proxy().expect("the broker's proxy");
    let direct = kafka.bootstrap_servers();
    let proxied = kafka.proxied_bootstrap_servers().expect("proxied listener");
    let pg_proxy = FaultProxy::start(([127, 0, 0, 1], pg.port()).into()).expect("postgres proxy");
    let s = Scenario::new(pg, "soak");
    create_tables(&s, &TABLES);
    let topics = topics_of(&s, &TABLES);
    for topic in &topics {
        kafka.create_topic(topic, 3).expect("create topic");
    }
    let (mut rng, seed) = XorShift::seeded(SEED_ENV);
    let logs = LogDir::new("crash_recovery_soak");
    println!(
        "[{SCENARIO}] {rounds} rounds, seed {seed} (CRASH_RECOVERY_SEED={seed} repeats them); \
         connector logs in {}",
        logs.dir().display()
    );
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let in_flight = IN_FLIGHT.to_string();
    let args = through_port(
        s.args(
            &proxied,
            &[
                "--status-interval",
                "250ms",
                "--max-in-flight-messages",
                &in_flight,
                "--metrics-addr",
                &metrics_addr,
            ],
        ),
        pg,
        pg_proxy.port(),
    );
    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "slot created", || async {
        connector.assert_running("before creating the slot");
        s.confirmed_flush_lsn().is_some()
    })
    .await;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(tokio::sync::Mutex::new(()));
    let writer = tokio::spawn(write_gated(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.next()),
        Arc::clone(&stop_writer),
        Arc::clone(&gate),
    ));
    let mut arrivals = Arrivals::new(&direct, &topics, 3);
    let mut tallies: BTreeMap<Fault, Tally> = BTreeMap::new();
    // The process's counters when the round began (a new process: zero).
    let mut counters_before = (0, 0);

    for round in 1..=rounds {
        connector.await_streaming(&s).await;
        let fault = Fault::ALL[rng.below(Fault::ALL.len())];
        let began = Instant::now();
        let mut new_process = false;
        // Kill rounds: the records the process had in flight just before.
        let mut in_flight_at_kill = None;
        match fault {
            Fault::Kill9 => {
                // A random moment is the point: start-up, replay or streaming.
                tokio::time::sleep(Duration::from_millis(rng.below(1500) as u64)).await;
                connector.assert_running(&format!("before kill round {round}"));
                in_flight_at_kill =
                    scrape(&metrics_addr).map(|page| sample(&page, "pgcdc_in_flight_records"));
                connector.kill_9();
                connector = ConnectorProcess::spawn(&args, logs.path(round));
                new_process = true;
            }
            Fault::BrokerKill => {
                let broker = Arc::clone(&kafka);
                tokio::task::spawn_blocking(move || broker.kill())
                    .await
                    .expect("kill thread")
                    .unwrap_or_else(|e| panic!("broker killed: {}", e.report()));
                let at_kill = s.current_lsn();
                let outage = Duration::from_millis(2000 + rng.below(4000) as u64);
                hold_for(outage, || async {
                    let confirmed = s.confirmed_flush_lsn().expect("slot exists");
                    assert!(
                        confirmed <= at_kill,
                        "round {round}: slot confirmed to {confirmed} while the broker was \
                         down (killed at WAL {at_kill})"
                    );
                })
                .await;
                let broker = Arc::clone(&kafka);
                tokio::task::spawn_blocking(move || broker.start())
                    .await
                    .expect("start thread")
                    .unwrap_or_else(|e| panic!("broker restarts: {}", e.report()));
            }
            Fault::PostgresImmediate => {
                let held = gate.lock().await;
                tokio::task::block_in_place(|| {
                    pg.stop(StopMode::Immediate)
                        .unwrap_or_else(|e| panic!("postgres stops: {}", e.report()));
                    pg.start()
                        .unwrap_or_else(|e| panic!("postgres starts: {}", e.report()));
                });
                drop(held);
            }
            Fault::NetworkStall => {
                pg_proxy.stall();
                kafka_proxy.stall();
                tokio::time::sleep(Duration::from_millis(1000 + rng.below(3000) as u64)).await;
                pg_proxy.reset();
                kafka_proxy.reset();
                pg_proxy.resume();
                kafka_proxy.resume();
            }
        }
        // Back: everything written before now must reach Kafka, the round's
        // re-sends with it (they come before anything newer).
        connector.await_streaming(&s).await;
        let recovered = began.elapsed();
        let arrived = tokio::task::block_in_place(|| arrivals.read_new());
        if new_process {
            counters_before = (0, 0);
        }
        let counters = dedupe_counters(&metrics_addr);
        let skipped = counters.0.saturating_sub(counters_before.0);
        let tail_failures = counters.1.saturating_sub(counters_before.1);
        counters_before = counters;
        let tally = tallies.entry(fault).or_default();
        tally.rounds += 1;
        tally.records += arrived.records;
        tally.duplicates += arrived.duplicates;
        tally.worst = tally.worst.max(arrived.duplicates);
        tally.skipped += skipped;
        tally.tail_failures += tail_failures;
        tally.over_bound += usize::from(arrived.duplicates > fault.bound());
        println!(
            "[{SCENARIO}] round {round}: {}{}, back in {recovered:?}; {} records, {} duplicates, \
             {skipped} skipped as delivered, {tail_failures} tail reads failed{}",
            fault.name(),
            in_flight_at_kill.map_or(String::new(), |n| format!(" ({n} records in flight)")),
            arrived.records,
            arrived.duplicates,
            match arrived.examples.is_empty() {
                true => String::new(),
                false => format!("; e.g. {}", arrived.examples.join(", ")),
            }
        );
    }

    connector.await_streaming(&s).await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    await_confirmed_past(&s, s.current_lsn(), Some(&connector)).await;
    connector.terminate_cleanly(TIMEOUT).await;
    let last = tokio::task::block_in_place(|| arrivals.read_new());
    println!(
        "[{SCENARIO}] {} transactions, {} changes in {:?}; after the last round {} records, {} duplicates",
        stats.transactions,
        stats.changes,
        started.elapsed(),
        last.records,
        last.duplicates
    );
    // One machine-readable line per fault kind, for scripts/fault-suite.sh.
    for (fault, t) in &tallies {
        println!(
            "SOAK\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            fault.name(),
            t.rounds,
            t.records,
            t.duplicates,
            t.worst,
            fault.bound(),
            t.skipped,
            t.tail_failures,
            if t.over_bound == 0 { "pass" } else { "FAIL" }
        );
    }
    let verified = verify_tables(
        SCENARIO,
        &s,
        &direct,
        &TABLES,
        stats.changes,
        json_decoder(),
    )
    .await;
    assert_eq!(
        verified.duplicates,
        tallies.values().map(|t| t.duplicates).sum::<usize>() + last.duplicates,
        "every duplicate was counted against a round"
    );
    for (fault, t) in &tallies {
        assert_eq!(
            t.over_bound,
            0,
            "{}: {} of {} rounds left more than {} duplicates (worst {})",
            fault.name(),
            t.over_bound,
            t.rounds,
            fault.bound(),
            t.worst
        );
    }
    pg.stop(StopMode::Fast)
        .unwrap_or_else(|e| panic!("postgres stops: {}", e.report()));
}
