//! Helpers shared by the integration tests: a connector running in-process,
//! a plain rdkafka consumer reading topics back ([`consume_raw`] and the
//! readers built on it), polling with deadlines ([`wait`]) and a randomized
//! write load ([`workload`]).

#![allow(dead_code)] // each test binary uses a different subset

pub mod avro_reader;
pub mod compacted;
pub mod debezium;
pub mod process;
pub mod wait;
pub mod workload;

use std::time::{Duration, Instant};

use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::lsn::Lsn;
use pgcdc_kafka::pipeline::{self, PipelineError, RunSummary, Shutdown};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value as Json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[allow(unused_imports)] // each test binary uses a different subset
pub use wait::{hold_for, poll_blocking, wait_for, wait_until, TIMEOUT};

/// A private broker reached through a fault proxy
/// ([`Kafka::launch_behind_proxy`]), launched off the async runtime.
pub async fn kafka_behind_proxy() -> Kafka {
    tokio::task::spawn_blocking(|| {
        Kafka::launch_behind_proxy()
            .unwrap_or_else(|e| panic!("private kafka behind a proxy: {}", e.report()))
    })
    .await
    .expect("launch thread")
}

/// The server's current WAL insert position, as text.
const CURRENT_LSN: &str = "SELECT pg_current_wal_insert_lsn()::text";

/// One database with its own slot, publication and topic prefix.
#[derive(Clone)]
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
        self.try_query_one(sql)
            .unwrap_or_else(|e| panic!("SQL failed: {sql}: {e}"))
    }

    /// [`Self::query_one`], or the error when the server does not answer
    /// (for tests that stop it).
    pub fn try_query_one(&self, sql: &str) -> Result<Option<String>, pgcdc_testcontainers::Error> {
        let rows = self.pg.query(&self.db, sql)?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next().flatten()))
    }

    /// The server's current WAL insert position.
    pub fn current_lsn(&self) -> Lsn {
        self.query_one(CURRENT_LSN)
            .expect("lsn")
            .parse()
            .expect("lsn parses")
    }

    /// The slot's confirmed_flush_lsn, `None` until the slot exists.
    pub fn confirmed_flush_lsn(&self) -> Option<Lsn> {
        self.query_one(&self.confirmed_flush_sql())
            .map(|s| s.parse().expect("lsn parses"))
    }

    /// The server's WAL position and the slot's confirmed position, as
    /// [`Self::current_lsn`] and [`Self::confirmed_flush_lsn`] read them, or
    /// `None` when the server does not answer.
    pub fn positions_if_up(&self) -> Option<(Lsn, Option<Lsn>)> {
        let lsn = |text: String| text.parse::<Lsn>().expect("lsn parses");
        let wal = self.try_query_one(CURRENT_LSN).ok()??;
        let slot = self.try_query_one(&self.confirmed_flush_sql()).ok()?;
        Some((lsn(wal), slot.map(lsn)))
    }

    fn confirmed_flush_sql(&self) -> String {
        format!(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot
        )
    }

    /// Whether a walsender holds the slot (`None` until the slot exists).
    pub fn slot_active(&self) -> Option<bool> {
        self.query_one(&format!(
            "SELECT active::text FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot
        ))
        .map(|active| active == "true")
    }

    /// Waits until the slot exists, i.e. the connector has set up.
    pub async fn await_slot(&self) {
        wait_until(TIMEOUT, "the replication slot", || async {
            self.confirmed_flush_lsn().is_some()
        })
        .await;
    }

    /// Waits until the slot is confirmed past the WAL position of now: a
    /// running connector has streamed (and Kafka acknowledged) everything
    /// written so far, under whatever load is running.
    pub async fn await_confirmed_past_now(&self, what: &str) {
        let now = self.current_lsn();
        wait_until(TIMEOUT, what, || async {
            self.confirmed_flush_lsn().is_some_and(|c| c > now)
        })
        .await;
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
        self.start_args(self.args(bootstrap_servers, extra))
    }

    /// Starts the connector in-process and waits for its slot.
    pub async fn started(&self, bootstrap_servers: &str, extra: &[&str]) -> Running {
        let running = self.start(bootstrap_servers, extra);
        self.await_slot().await;
        running
    }

    /// Starts the connector in-process with exactly `args` (for flags that
    /// [`Scenario::args`] sets differently, e.g. a proxied `--pg-url`).
    pub fn start_args(&self, args: Vec<String>) -> Running {
        self.start_with_metrics(args, std::sync::Arc::default())
    }

    /// Starts the connector in-process, counting into `metrics`.
    pub fn start_with_metrics(
        &self,
        args: Vec<String>,
        metrics: std::sync::Arc<pgcdc_kafka::metrics::Metrics>,
    ) -> Running {
        let config = RunConfig::from_args(args).expect("valid flags");
        config.validate().expect("valid config");
        let (stop, shutdown) = Shutdown::new();
        let task = tokio::spawn(pipeline::run_with_metrics(config, shutdown, metrics));
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
        let result = tokio::time::timeout(TIMEOUT, self.task)
            .await
            .unwrap_or_else(|_| panic!("connector stops within {TIMEOUT:?}"))
            .expect("connector task did not panic");
        result.unwrap_or_else(|e| panic!("connector failed: {}", pgcdc_kafka::error_chain(&e)))
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Ends the connector as a crash would: its task is dropped wherever
    /// it is, nothing is drained, recorded or confirmed on the way out.
    pub async fn abort(self) {
        let Running { stop, task } = self;
        task.abort();
        let _ = task.await;
        drop(stop);
    }

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

    /// Waits up to [`TIMEOUT`] for the connector to stop on its own with an
    /// error, and returns the error.
    ///
    /// # Panics
    /// When it is still running, or it stopped without an error.
    pub async fn wait_for_error(self) -> PipelineError {
        match self.wait_for_exit(TIMEOUT).await {
            Ok(summary) => panic!("connector stopped without an error: {summary:?}"),
            Err(e) => e,
        }
    }
}

// ---------------------------------------------------------------------------
// Reading topics back
// ---------------------------------------------------------------------------

/// A record read back from Kafka, key and value as bytes.
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub partition: i32,
    pub offset: i64,
    /// The record's CreateTime (ms), if it has one.
    pub timestamp: Option<i64>,
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

    /// The value of the first header called `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        header(&self.headers, name)
    }

    /// The key as UTF-8 text.
    ///
    /// # Panics
    /// When there is no key or it is not UTF-8.
    pub fn key_text(&self) -> &str {
        std::str::from_utf8(self.key.as_deref().expect("a key")).expect("UTF-8 key")
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

impl Record {
    /// The value of the first header called `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        header(&self.headers, name)
    }

    /// The payload of the first header called `name`, written by a
    /// JsonConverter with schemas (`{"schema":…,"payload":…}`).
    ///
    /// # Panics
    /// When the header is not such JSON.
    pub fn header_payload(&self, name: &str) -> Option<Json> {
        let bytes = self.header(name)?;
        let mut json: Json = serde_json::from_slice(bytes).expect("a JSON header");
        assert!(
            json["schema"].is_object(),
            "{name} carries its schema: {json}"
        );
        Some(json["payload"].take())
    }

    /// The names of the record's headers, in order.
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }
}

fn header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_slice())
}

/// When a read of a topic ends: at `count` records or after `timeout`,
/// whichever comes first, and sooner when `idle` passes without a record;
/// with `linger`, it reads on for that long after reaching `count`, so a
/// record too many is seen rather than missed.
#[derive(Debug, Clone, Copy)]
pub struct ReadUntil {
    pub count: usize,
    pub timeout: Duration,
    pub idle: Option<Duration>,
    pub linger: Option<Duration>,
}

impl ReadUntil {
    pub fn count(count: usize, timeout: Duration) -> Self {
        ReadUntil {
            count,
            timeout,
            idle: None,
            linger: None,
        }
    }
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
    read_raw(bootstrap_servers, topic, ReadUntil::count(count, timeout)).await
}

/// The committed records of the progress topic of connector `prefix`, in
/// order: read_committed, until no record came for `idle` (the topic is
/// transactional under exactly-once: its offsets count commit markers).
pub async fn committed_progress(kafka: &Kafka, prefix: &str, idle: Duration) -> Vec<Json> {
    let until = ReadUntil {
        idle: Some(idle),
        ..ReadUntil::count(usize::MAX, TIMEOUT)
    };
    read_raw(
        &kafka.bootstrap_servers(),
        &format!("{prefix}.progress"),
        until,
    )
    .await
    .into_iter()
    .filter(|r| r.key.as_deref() == Some(prefix.as_bytes()))
    .filter_map(|r| serde_json::from_slice(r.value.as_deref()?).ok())
    .collect()
}

/// Reads `topic` from the beginning (all partitions) as `until` says, as
/// bytes, in the order the records arrived (per partition, offset order).
/// Empty if the topic does not appear before the timeout.
pub async fn read_raw(bootstrap_servers: &str, topic: &str, until: ReadUntil) -> Vec<RawRecord> {
    read_raw_from(bootstrap_servers, topic, Vec::new(), until).await
}

/// [`read_raw`] from the offsets `from` (one per partition, by partition
/// number; a partition past its end reads from the beginning): what was
/// written after a [`high_watermarks`] reading.
pub async fn read_raw_from(
    bootstrap_servers: &str,
    topic: &str,
    from: Vec<i64>,
    until: ReadUntil,
) -> Vec<RawRecord> {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || read_blocking(&bootstrap, &topic, until, &from))
        .await
        .expect("consumer thread")
}

/// Every topic whose name matches `filter`, with its high watermarks (one
/// per partition, by partition number).
pub async fn topics_matching(
    bootstrap_servers: &str,
    filter: impl Fn(&str) -> bool + Send + 'static,
) -> std::collections::BTreeMap<String, Vec<i64>> {
    let bootstrap = bootstrap_servers.to_owned();
    tokio::task::spawn_blocking(move || {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("consumer");
        let metadata = probe
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("metadata");
        metadata
            .topics()
            .iter()
            .filter(|t| t.error().is_none() && filter(t.name()))
            .map(|t| {
                let highs = (0..t.partitions().len())
                    .map(|p| watermarks(&probe, t.name(), p as i32).1)
                    .collect();
                (t.name().to_owned(), highs)
            })
            .collect()
    })
    .await
    .expect("consumer thread")
}

/// Reads `topic` from the beginning up to the high watermarks it has now:
/// everything written to it so far (empty if it does not exist yet).
pub async fn consume_all(bootstrap_servers: &str, topic: &str, timeout: Duration) -> Vec<Record> {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let total = record_count_blocking(&bootstrap, &topic);
        if total == 0 {
            return Vec::new();
        }
        let records: Vec<Record> =
            read_blocking(&bootstrap, &topic, ReadUntil::count(total, timeout), &[])
                .into_iter()
                .map(RawRecord::into_json)
                .collect();
        assert_eq!(
            records.len(),
            total,
            "read the whole topic {topic} within {timeout:?}"
        );
        records
    })
    .await
    .expect("consumer thread")
}

/// How many records `topic` holds now, summed over its partitions (high
/// minus low watermark, so a transactional topic's commit markers and
/// records of open transactions count too); 0 if it does not exist.
pub async fn record_count(bootstrap_servers: &str, topic: &str) -> usize {
    let bootstrap = bootstrap_servers.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || record_count_blocking(&bootstrap, &topic))
        .await
        .expect("consumer thread")
}

fn record_count_blocking(bootstrap: &str, topic: &str) -> usize {
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    let metadata = probe
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map_or(0, |t| t.partitions().len());
    (0..partitions)
        .map(|p| {
            let (low, high) = watermarks(&probe, topic, p as i32);
            usize::try_from(high - low).expect("high watermark >= low")
        })
        .sum()
}

/// A partition's low and high watermarks. Just after a topic is created its
/// partitions may have no leader yet (NotLeaderForPartition,
/// LeaderNotAvailable): asked again until [`TIMEOUT`].
pub fn watermarks(probe: &BaseConsumer, topic: &str, partition: i32) -> (i64, i64) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        match probe.fetch_watermarks(topic, partition, Duration::from_secs(10)) {
            Ok(marks) => return marks,
            Err(error)
                if std::time::Instant::now() < deadline
                    && matches!(
                        error.rdkafka_error_code(),
                        Some(
                            rdkafka::types::RDKafkaErrorCode::NotLeaderForPartition
                                | rdkafka::types::RDKafkaErrorCode::LeaderNotAvailable
                                | rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition
                        )
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("watermarks of {topic}[{partition}]: {error}"),
        }
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
    let until = ReadUntil {
        idle: Some(idle),
        ..ReadUntil::count(usize::MAX, timeout)
    };
    read_raw(bootstrap_servers, topic, until)
        .await
        .into_iter()
        .map(RawRecord::into_json)
        .collect()
}

fn read_blocking(bootstrap: &str, topic: &str, until: ReadUntil, from: &[i64]) -> Vec<RawRecord> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("test_consumer"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let deadline = Instant::now() + until.timeout;
    // Wait for the topic to exist, then read every partition from the start.
    let partitions = poll_blocking(deadline, || {
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .expect("metadata");
        metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len())
            .filter(|&found| found > 0)
    });
    let Some(partitions) = partitions else {
        return Vec::new();
    };
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        let start = from
            .get(p)
            .map_or(Offset::Beginning, |&o| Offset::Offset(o));
        assignment
            .add_partition_offset(topic, p as i32, start)
            .expect("partition");
    }
    consumer.assign(&assignment).expect("assign");
    let mut records = Vec::new();
    let mut last_record = Instant::now();
    let mut linger_until: Option<Instant> = None;
    while Instant::now() < deadline {
        if records.len() >= until.count {
            let Some(linger) = until.linger else { break };
            let end = *linger_until.get_or_insert_with(|| Instant::now() + linger);
            if Instant::now() >= end {
                break;
            }
        }
        if until.idle.is_some_and(|idle| last_record.elapsed() >= idle) {
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
            timestamp: match message.timestamp() {
                rdkafka::Timestamp::CreateTime(ms) => Some(ms),
                _ => None,
            },
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
        });
    }
    records
}

/// The value of one series of a metrics page, `series` written as the
/// page writes it (`name{label="value",...}`).
pub fn metric_sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
