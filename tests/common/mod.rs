//! Helpers shared by the integration tests: a connector running in-process,
//! a plain rdkafka consumer reading topics back, and polling with deadlines.

#![allow(dead_code)] // each test binary uses a different subset

pub mod avro_reader;
pub mod compacted;
pub mod process;

use std::time::{Duration, Instant};

use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::lsn::Lsn;
use pgcdc_kafka::pipeline::{self, PipelineError, RunSummary, Shutdown};
use pgcdc_testcontainers::{unique_name, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value as Json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One database with its own slot, publication and topic prefix.
pub struct Scenario {
    pub pg: &'static Postgres,
    pub db: String,
    pub slot: String,
    pub publication: String,
    pub prefix: String,
}

impl Scenario {
    pub fn new(pg: &'static Postgres, name: &str) -> Self {
        Scenario {
            pg,
            db: pg.create_database(name).expect("create database"),
            slot: unique_name("slot"),
            publication: unique_name("pub"),
            prefix: unique_name(name),
        }
    }

    pub fn sql(&self, sql: &str) {
        self.pg
            .execute(&self.db, sql)
            .unwrap_or_else(|e| panic!("SQL failed: {sql}: {e}"));
    }

    pub fn query_one(&self, sql: &str) -> Option<String> {
        self.pg
            .query(&self.db, sql)
            .unwrap_or_else(|e| panic!("SQL failed: {sql}: {e}"))
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next().flatten())
    }

    /// The server's current WAL insert position.
    pub fn current_lsn(&self) -> Lsn {
        self.query_one("SELECT pg_current_wal_insert_lsn()::text")
            .expect("lsn")
            .parse()
            .expect("lsn parses")
    }

    /// The slot's confirmed_flush_lsn, `None` until the slot exists.
    pub fn confirmed_flush_lsn(&self) -> Option<Lsn> {
        self.query_one(&format!(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot
        ))
        .map(|s| s.parse().expect("lsn parses"))
    }

    pub fn topic(&self, table: &str) -> String {
        format!("{}.public.{table}", self.prefix)
    }

    /// `run`'s flags for this scenario, plus `extra`.
    pub fn args(&self, bootstrap_servers: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--pg-url",
            &self.pg.url(&self.db),
            "--bootstrap-servers",
            bootstrap_servers,
            "--topic-prefix",
            &self.prefix,
            "--slot",
            &self.slot,
            "--publication",
            &self.publication,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// Starts the connector in-process.
    pub fn start(&self, bootstrap_servers: &str, extra: &[&str]) -> Running {
        let config =
            RunConfig::from_args(self.args(bootstrap_servers, extra)).expect("valid flags");
        config.validate().expect("valid config");
        let (stop, shutdown) = Shutdown::new();
        let task = tokio::spawn(pipeline::run(config, shutdown));
        Running { stop, task }
    }
}

/// A connector running in-process.
pub struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<RunSummary, PipelineError>>,
}

impl Running {
    /// Requests a graceful shutdown and waits for it.
    pub async fn stop(self) -> RunSummary {
        let _ = self.stop.send(true);
        let result = tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("connector stops within 60 s")
            .expect("connector task did not panic");
        result.unwrap_or_else(|e| panic!("connector failed: {}", pgcdc_kafka::error_chain(&e)))
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// A record read back from Kafka, key and value as bytes.
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl RawRecord {
    /// The record with key and value parsed as JSON.
    ///
    /// # Panics
    /// When the key or value is not JSON.
    pub fn into_json(self) -> Record {
        let parse = |bytes: Option<Vec<u8>>| {
            bytes.map(|b| serde_json::from_slice::<Json>(&b).expect("record is JSON"))
        };
        Record {
            partition: self.partition,
            offset: self.offset,
            key: parse(self.key),
            value: parse(self.value),
            headers: self.headers,
        }
    }
}

/// A record read back from Kafka, key and value parsed as JSON.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Json>,
    pub value: Option<Json>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Reads `topic` from the beginning (all partitions) until `count` records
/// arrived or `timeout` passed, and returns what arrived.
pub async fn consume(
    bootstrap_servers: &str,
    topic: &str,
    count: usize,
    timeout: Duration,
) -> Vec<Record> {
    consume_raw(bootstrap_servers, topic, count, timeout)
        .await
        .into_iter()
        .map(RawRecord::into_json)
        .collect()
}

/// [`consume`] without parsing: keys and values as bytes (Avro, tombstones).
pub async fn consume_raw(
    bootstrap_servers: &str,
    topic: &str,
    count: usize,
    timeout: Duration,
) -> Vec<RawRecord> {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || consume_blocking(&bootstrap, &topic, count, timeout, None))
        .await
        .expect("consumer thread")
}

/// Reads `topic` from the beginning up to the high watermarks it has now:
/// everything written to it so far (empty if it does not exist yet).
pub async fn consume_all(bootstrap_servers: &str, topic: &str, timeout: Duration) -> Vec<Record> {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("consumer");
        let metadata = probe
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .expect("metadata");
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        let total: i64 = (0..partitions)
            .map(|p| {
                let (low, high) = probe
                    .fetch_watermarks(&topic, p as i32, Duration::from_secs(10))
                    .expect("watermarks");
                high - low
            })
            .sum();
        if total == 0 {
            return Vec::new();
        }
        let records: Vec<Record> =
            consume_blocking(&bootstrap, &topic, total as usize, timeout, None)
                .into_iter()
                .map(RawRecord::into_json)
                .collect();
        assert_eq!(
            records.len(),
            total as usize,
            "read the whole topic {topic} within {timeout:?}"
        );
        records
    })
    .await
    .expect("consumer thread")
}

fn consume_blocking(
    bootstrap: &str,
    topic: &str,
    count: usize,
    timeout: Duration,
    idle: Option<Duration>,
) -> Vec<RawRecord> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("test_consumer"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let deadline = Instant::now() + timeout;
    // Wait for the topic to exist, then read every partition from the start.
    let partitions = loop {
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .expect("metadata");
        let found = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        if found > 0 {
            break found;
        }
        if Instant::now() > deadline {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p as i32, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&assignment).expect("assign");
    let mut records = Vec::new();
    let mut last_record = Instant::now();
    while records.len() < count && Instant::now() < deadline {
        if idle.is_some_and(|idle| last_record.elapsed() >= idle) {
            break;
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        last_record = Instant::now();
        let message = message.expect("consume");
        let headers = message
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                    .collect()
            })
            .unwrap_or_default();
        records.push(RawRecord {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
        });
    }
    records
}

impl Running {
    /// Waits up to `timeout` for the connector to end by itself (without a
    /// shutdown request) and returns how it ended.
    ///
    /// # Panics
    /// When it is still running after `timeout`, or its task panicked.
    pub async fn wait_for_exit(self, timeout: Duration) -> Result<RunSummary, PipelineError> {
        let Running { stop, task } = self;
        let outcome = tokio::time::timeout(timeout, task)
            .await
            .unwrap_or_else(|_| panic!("connector still running after {timeout:?}"))
            .expect("connector task did not panic");
        // Held until now: dropping the sender would request a shutdown.
        drop(stop);
        outcome
    }
}

impl Scenario {
    /// Starts the connector in-process with exactly `args` (for flags that
    /// [`Scenario::args`] sets differently, e.g. a proxied `--pg-url`).
    pub fn start_args(&self, args: Vec<String>) -> Running {
        let config = RunConfig::from_args(args).expect("valid flags");
        config.validate().expect("valid config");
        let (stop, shutdown) = Shutdown::new();
        let task = tokio::spawn(pipeline::run(config, shutdown));
        Running { stop, task }
    }
}

/// Reads `topic` from the beginning until no record arrived for `idle` (or
/// `timeout` passed). For transactional topics, whose watermarks count
/// commit markers too, so [`consume_all`]'s count does not apply.
pub async fn consume_until_idle(
    bootstrap_servers: &str,
    topic: &str,
    idle: Duration,
    timeout: Duration,
) -> Vec<Record> {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        consume_blocking(&bootstrap, &topic, usize::MAX, timeout, Some(idle))
            .into_iter()
            .map(RawRecord::into_json)
            .collect()
    })
    .await
    .expect("consumer thread")
}
