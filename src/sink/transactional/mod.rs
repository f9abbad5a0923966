//! Exactly-once delivery (`--delivery exactly-once`): the producer settings,
//! the progress topic and the classification of transaction errors.
//!
//! # How it holds
//!
//! Every Postgres transaction (or a group of consecutive ones, see
//! [`BatchLimits`]) is written as one Kafka transaction, which also writes a
//! [`ProgressRecord`] to a compacted progress topic: "every Postgres
//! transaction whose commit record starts before `lsn` is in Kafka". A
//! `read_committed` consumer therefore sees a Postgres transaction's changes
//! and the matching progress record together, or none of them.
//!
//! The slot is confirmed only after the Kafka commit (the ack tracker's
//! transactional cap, see [`crate::checkpoint`]). After a crash between the
//! Kafka commit and the slot confirm, the slot replays transactions that are
//! already in Kafka; on start the connector reads the progress topic to its
//! end (`read_committed`) and the stream drops every transaction whose commit
//! LSN is below the recorded position: the same rule the walsender applies
//! to the slot's `confirmed_flush_lsn`.
//!
//! The transactional.id is stable (`pgcdc-kafka-<connector name>`), so
//! `init_transactions` of a new instance aborts whatever a crashed one left
//! open and fences a still-running one: its next transaction operation fails
//! with a fatal "fenced" error and it stops ([`SinkError::Fenced`]).
//!
//! A Postgres transaction is never split across Kafka transactions, so its
//! changes appear atomically across all its tables. It must therefore be
//! written within `transaction.timeout.ms`, which is raised to
//! [`DEFAULT_TRANSACTION_TIMEOUT`] (the broker's default
//! `transaction.max.timeout.ms`); a Kafka transaction the coordinator aborted
//! after being open that long stops the connector with a definite error
//! ([`SinkError::TransactionTooLong`]) instead of retrying forever.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::client_log::LoggingContext;
use super::error::SinkError;
mod producer;
use super::options::EosOptions;
use super::reader::Reader;
use super::record::EncodedRecord;
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;
use crate::naming::Names;
use crate::source::signal::KeyText;
pub use crate::source::signal::Progress as IncrementalProgress;
pub use producer::Transactional;

/// `transaction.timeout.ms` unless `--kafka-property` sets it: 15 minutes,
/// the broker's default `transaction.max.timeout.ms`.
pub const DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// How long reading the progress topic to its end may take.
const PROGRESS_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Bounds of one Kafka transaction grouping several Postgres transactions.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub transactions: usize,
    pub bytes: usize,
    pub time: Duration,
}

/// What exactly-once delivery needs beyond the producer settings.
#[derive(Debug, Clone)]
pub struct EosSettings {
    pub transactional_id: String,
    pub connector_name: String,
    pub progress_topic: String,
    pub limits: BatchLimits,
    /// `transaction.timeout.ms` in force.
    pub transaction_timeout: Duration,
}

impl EosSettings {
    /// The settings for the transactional `producer` (its
    /// [`producer_config`]), named by `names`, batching as `options` say.
    pub fn new(names: &Names, options: &EosOptions, producer: &ClientConfig) -> Self {
        EosSettings {
            transactional_id: names.transactional_id(),
            connector_name: names.connector_name(),
            progress_topic: names.progress_topic(),
            limits: BatchLimits {
                transactions: options.eos_max_batch_transactions,
                bytes: options.eos_max_batch_bytes,
                time: options.eos_max_batch_time,
            },
            transaction_timeout: producer
                .get("transaction.timeout.ms")
                .and_then(|ms| ms.parse().ok())
                .map_or(DEFAULT_TRANSACTION_TIMEOUT, Duration::from_millis),
        }
    }
}

/// The producer settings of `--delivery exactly-once`: the idempotent
/// `producer`'s, plus the transactional.id and the transaction timeout.
pub fn producer_config(producer: &ClientConfig, names: &Names) -> ClientConfig {
    let mut client = producer.clone();
    client.set("transactional.id", names.transactional_id());
    if client.get("transaction.timeout.ms").is_none() {
        client.set(
            "transaction.timeout.ms",
            DEFAULT_TRANSACTION_TIMEOUT.as_millis().to_string(),
        );
    }
    client
}

/// The value of a progress record (its key is the connector name).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgressRecord {
    /// Every Postgres transaction whose commit record starts before this
    /// position is in Kafka (the end of the last included commit record).
    #[serde(with = "as_text")]
    pub lsn: Lsn,
    /// Whether this Kafka transaction was the initial snapshot (then `lsn`
    /// is the snapshot's consistent point).
    #[serde(default)]
    pub snapshot: bool,
    /// Postgres transactions in the Kafka transaction that wrote it.
    #[serde(default)]
    pub transactions: u64,
    /// Unix milliseconds when it was written.
    #[serde(default)]
    pub written_at_ms: i64,
    /// With `--signal-data-collection`: the incremental snapshot's progress
    /// after every Postgres transaction before `lsn`, chunks included
    /// (`tables` empty: none running, or the last one finished). Committed
    /// with the chunks' rows, so on start it wins over the signal table's
    /// progress row, which is written after the Kafka commit. Absent in
    /// records of earlier versions and of runs without a signal table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental_snapshot: Option<IncrementalProgress>,
    /// While an initial snapshot is committed chunk by chunk: what of it is
    /// in Kafka (then `lsn` is the snapshot's consistent point). The one
    /// record at-least-once writes too, as the resume point of an
    /// interrupted snapshot (docs/SNAPSHOTS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_snapshot: Option<InitialSnapshotProgress>,
    /// The PostgreSQL server whose WAL `lsn` is a position in, so that a
    /// restart on another cluster or a diverged history stops instead of
    /// skipping by a position of other WAL (see
    /// [`crate::source::identity`]). Absent in records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<RecordedServer>,
}

impl ProgressRecord {
    /// The record as it is sent: keyed `key` (the connector name) in the
    /// progress `topic`. It belongs to no Postgres transaction (sent
    /// untracked, so its `txn` is never read).
    pub fn encoded(&self, topic: &str, key: &str) -> EncodedRecord {
        EncodedRecord {
            topic: topic.into(),
            key: Some(key.as_bytes().to_vec()),
            value: Some(serde_json::to_vec(self).unwrap_or_default()),
            headers: Vec::new(),
            txn: TxnId::from_u64(u64::MAX),
            partition: None,
            created_micros: None,
        }
    }
}

/// How much of an initial snapshot Kafka holds. Each table is sent in key
/// order, so "every row up to this key" describes a table partly sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InitialSnapshotProgress {
    /// Tables not entirely in Kafka, `schema.table`, in reading order.
    pub remaining: Vec<String>,
    /// For tables of `remaining` partly in Kafka: the key of the last row
    /// Kafka has (the one after which to go on).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub after: BTreeMap<String, KeyText>,
}

impl InitialSnapshotProgress {
    /// The incremental snapshot that reads what is left: the remaining
    /// tables, each from its recorded key on.
    pub fn as_incremental(&self) -> IncrementalProgress {
        let mut progress = IncrementalProgress {
            tables: self.remaining.clone(),
            resume_after: self.after.clone(),
            ..IncrementalProgress::default()
        };
        progress.current_changed();
        progress
    }
}

/// Unix milliseconds now, for [`ProgressRecord::written_at_ms`].
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Which PostgreSQL cluster and timeline a progress record's position
/// belongs to (`IDENTIFY_SYSTEM`'s `systemid` and `timeline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedServer {
    /// As text: a 64-bit number that not every JSON reader holds exactly.
    #[serde(with = "as_text")]
    pub system_identifier: u64,
    pub timeline: u32,
}

/// A value as its text form in JSON: LSNs as `X/Y`, and 64-bit numbers
/// that not every JSON reader holds exactly.
mod as_text {
    use std::fmt::Display;
    use std::str::FromStr;

    pub fn serialize<T: Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: serde::Deserializer<'de>,
    {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A consumer / admin client configuration with the connection and security
/// settings of the producer's, and none of its producer-only ones.
pub(crate) fn client_config(producer: &ClientConfig) -> ClientConfig {
    const PRODUCER_ONLY: &[&str] = &[
        // The producer's statistics feed the metrics; another client's
        // would only be logged, in full at INFO, by rdkafka's default
        // context (a `--kafka-property statistics.interval.ms` is meant
        // for the producer).
        "statistics.interval.ms",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "acks",
        "partitioner",
        "compression.type",
        "linger.ms",
        "transactional.id",
        "transaction.timeout.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "batch.size",
        "batch.num.messages",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.ms",
        "retries",
        "message.send.max.retries",
        "retry.backoff.ms",
        "max.in.flight",
        "max.in.flight.requests.per.connection",
        "request.required.acks",
        "compression.codec",
        "sticky.partitioning.linger.ms",
    ];
    // Cloned and pruned, not rebuilt from `config_map()`: that one shows
    // secrets (sasl.password, ssl.key.password) as a placeholder.
    let mut client = producer.clone();
    for key in PRODUCER_ONLY {
        client.remove(key);
    }
    client
}

fn progress_error(topic: &str, action: &str, error: KafkaError) -> SinkError {
    SinkError::Progress {
        topic: topic.to_owned(),
        action: action.to_owned(),
        error: Some(Box::new(error)),
    }
}

/// Creates the progress topic (one partition, compacted) if it is missing.
pub async fn ensure_progress_topic(producer: &ClientConfig, topic: &str) -> Result<(), SinkError> {
    let config = client_config(producer);
    let admin: AdminClient<LoggingContext> = config
        .create_with_context(LoggingContext::for_config(&config))
        .map_err(|e| progress_error(topic, "create an admin client for", e))?;
    let metadata = admin
        .inner()
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .map_err(|e| progress_error(topic, "read the metadata of", e))?;
    let exists = metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty());
    if exists {
        return Ok(());
    }
    let new_topic =
        NewTopic::new(topic, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics([&new_topic], &options)
        .await
        .map_err(|e| progress_error(topic, "create", e))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(progress_error(topic, "create", KafkaError::AdminOp(code)))
            }
        }
    }
    tracing::info!(topic, "created the compacted progress topic");
    Ok(())
}

/// Reads the progress topic to its end with `read_committed` (blocking; run
/// it off the async runtime) and returns this connector's latest record.
/// Call it after `init_transactions`, which aborts what a crashed instance
/// left open: an open transaction holds the last stable offset back.
pub fn read_progress(
    producer: &ClientConfig,
    topic: &str,
    connector: &str,
) -> Result<Option<ProgressRecord>, SinkError> {
    let config = client_config(producer)
        .set("group.id", format!("pgcdc-kafka-{connector}-progress"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .clone();
    let consumer = config
        .create_with_context::<_, Reader>(LoggingContext::for_config(&config))
        .map_err(|e| progress_error(topic, "create a consumer for", e))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .map_err(|e| progress_error(topic, "read the metadata of", e))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Ok(None);
    }
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| progress_error(topic, "assign", e))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|e| progress_error(topic, "assign", e))?;
    let mut open: BTreeMap<i32, ()> = partitions.iter().map(|&p| (p, ())).collect();
    let mut latest: Option<ProgressRecord> = None;
    let deadline = Instant::now() + PROGRESS_READ_TIMEOUT;
    while !open.is_empty() {
        if Instant::now() >= deadline {
            return Err(SinkError::Progress {
                topic: topic.to_owned(),
                action: format!(
                    "read to its end within {PROGRESS_READ_TIMEOUT:?} (an open transaction of \
                     another producer holds it back?)"
                ),
                error: None,
            });
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => return Err(progress_error(topic, "read", e)),
            Some(Ok(message)) => {
                if message.key() != Some(connector.as_bytes()) {
                    continue;
                }
                // A tombstone resets the record (an operator starting over).
                latest =
                    match message.payload() {
                        None => None,
                        Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|_| {
                            SinkError::Progress {
                                topic: topic.to_owned(),
                                action: format!(
                                    "parse the record at partition {} offset {} (not a progress \
                                 record written by pgcdc-kafka; is --progress-topic shared?)",
                                    message.partition(),
                                    message.offset()
                                ),
                                error: None,
                            }
                        })?),
                    };
            }
        }
    }
    Ok(latest)
}

/// Classifies a failed transaction call.
pub(super) fn transaction_error(
    transactional_id: &str,
    action: &'static str,
    error: KafkaError,
) -> SinkError {
    if is_fenced(&error) {
        return SinkError::Fenced {
            transactional_id: transactional_id.to_owned(),
        };
    }
    let retryable = match &error {
        KafkaError::Transaction(e) => {
            !matches!(e.code(), RDKafkaErrorCode::InvalidTransactionTimeout)
                && !matches!(
                    e.code(),
                    RDKafkaErrorCode::TransactionalIdAuthorizationFailed
                        | RDKafkaErrorCode::ClusterAuthorizationFailed
                        | RDKafkaErrorCode::GroupAuthorizationFailed
                )
        }
        _ => true,
    };
    SinkError::Transaction {
        action,
        transactional_id: transactional_id.to_owned(),
        error: Box::new(error),
        retryable,
    }
}

/// Whether `error` says another producer with the same transactional.id
/// took over.
pub(super) fn is_fenced(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;

    #[test]
    fn client_config_keeps_the_secrets_and_drops_producer_settings() {
        let mut producer = ClientConfig::new();
        producer
            .set("bootstrap.servers", "b:9092")
            .set("sasl.password", "pw")
            .set("ssl.key.password", "kpw")
            .set("enable.idempotence", "true")
            .set("statistics.interval.ms", "1000")
            .set("transactional.id", "t");
        let client = client_config(&producer);
        assert_eq!(client.get("sasl.password"), Some("pw"));
        assert_eq!(client.get("ssl.key.password"), Some("kpw"));
        assert_eq!(client.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(client.get("enable.idempotence"), None);
        assert_eq!(client.get("transactional.id"), None);
        assert_eq!(client.get("statistics.interval.ms"), None);
    }

    #[test]
    fn exactly_once_flags_are_validated() {
        let config = RunConfig::from_args([
            "--pg-url",
            "postgres://u@h/db",
            "--topic-prefix",
            "app",
            "--delivery",
            "exactly-once",
            "--connector-name",
            "has space",
            "--progress-topic",
            "bad/topic",
            "--eos-max-batch-transactions",
            "0",
            "--kafka-property",
            "transactional.id=mine",
        ])
        .expect("parses");
        let error = config.validate().expect_err("invalid");
        let fields: Vec<_> = error.0.iter().map(|i| i.field).collect();
        assert_eq!(
            fields,
            [
                "connector-name",
                "progress-topic",
                "eos-max-batch-transactions",
                "kafka-property"
            ]
        );
        let at_least_once = RunConfig::from_args([
            "--pg-url",
            "postgres://u@h/db",
            "--topic-prefix",
            "app",
            "--connector-name",
            "has space",
        ])
        .expect("parses");
        at_least_once
            .validate()
            .expect("the exactly-once flags are not checked without --delivery exactly-once");
    }

    #[test]
    fn progress_record_round_trips_as_json() {
        let mut record = ProgressRecord {
            lsn: "16/B374D848".parse().expect("lsn"),
            snapshot: false,
            transactions: 3,
            written_at_ms: 1,
            incremental_snapshot: None,
            initial_snapshot: None,
            server: None,
        };
        let json = serde_json::to_string(&record).expect("serializes");
        assert!(json.contains(r#""lsn":"16/B374D848""#), "{json}");
        assert!(!json.contains("incremental_snapshot"), "{json}");
        assert!(!json.contains("server"), "{json}");
        let back: ProgressRecord = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, record);
        let minimal: ProgressRecord = serde_json::from_str(r#"{"lsn":"0/10"}"#).expect("parses");
        assert_eq!(minimal.lsn, Lsn::new(16));
        assert_eq!(
            minimal.incremental_snapshot, None,
            "records of earlier versions carry no incremental snapshot progress"
        );
        assert_eq!(minimal.server, None, "nor the server");
        let with_server = ProgressRecord {
            server: Some(RecordedServer {
                system_identifier: u64::MAX,
                timeline: 2,
            }),
            ..record.clone()
        };
        let json = serde_json::to_string(&with_server).expect("serializes");
        assert!(
            json.contains(r#""server":{"system_identifier":"18446744073709551615","timeline":2}"#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<ProgressRecord>(&json).expect("parses"),
            with_server
        );

        record.incremental_snapshot = Some(IncrementalProgress {
            tables: vec!["public.t".into()],
            last_key: Some(vec![Some("1200".into())]),
            ..IncrementalProgress::default()
        });
        let json = serde_json::to_string(&record).expect("serializes");
        assert!(
            json.contains(r#""incremental_snapshot":{"tables":["public.t"],"last_key":["1200"]}"#),
            "{json}"
        );
        let back: ProgressRecord = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, record);
        let finished: ProgressRecord =
            serde_json::from_str(r#"{"lsn":"0/10","incremental_snapshot":{"tables":[]}}"#)
                .expect("parses");
        assert_eq!(
            finished.incremental_snapshot,
            Some(IncrementalProgress::default()),
            "an empty table list says no snapshot is left to read"
        );
    }

    #[test]
    fn an_interrupted_initial_snapshot_resumes_as_an_incremental_one() {
        let initial = InitialSnapshotProgress {
            remaining: vec!["public.a".into(), "public.b".into(), "public.c".into()],
            after: BTreeMap::from([
                ("public.a".into(), vec![Some("10".into())]),
                ("public.c".into(), vec![Some("7".into())]),
            ]),
        };
        let json = serde_json::to_string(&initial).expect("serializes");
        assert_eq!(
            json,
            r#"{"remaining":["public.a","public.b","public.c"],"after":{"public.a":["10"],"public.c":["7"]}}"#
        );
        let mut incremental = initial.as_incremental();
        assert_eq!(incremental.tables, initial.remaining);
        assert_eq!(incremental.last_key, Some(vec![Some("10".into())]));
        assert_eq!(incremental.chunk_done(None), Some("public.a".into()));
        assert_eq!(incremental.last_key, None, "public.b from its beginning");
        assert_eq!(incremental.chunk_done(None), Some("public.b".into()));
        assert_eq!(incremental.last_key, Some(vec![Some("7".into())]));
    }

    #[test]
    fn producer_config_sets_the_transactional_id_and_timeout() {
        let config = RunConfig::from_args([
            "--pg-url",
            "postgres://u@h/db",
            "--topic-prefix",
            "app",
            "--delivery",
            "exactly-once",
        ])
        .expect("parses");
        let client = producer_config(&config.producer_config(), &config.names());
        assert_eq!(client.get("transactional.id"), Some("pgcdc-kafka-app"));
        assert_eq!(client.get("transaction.timeout.ms"), Some("900000"));
        assert_eq!(client.get("enable.idempotence"), Some("true"));
        let consumer = client_config(&client);
        assert_eq!(consumer.get("transactional.id"), None);
        assert_eq!(consumer.get("bootstrap.servers"), Some("127.0.0.1:9092"));
        assert_eq!(config.names().progress_topic(), "app.progress");

        let named = RunConfig::from_args([
            "--pg-url",
            "postgres://u@h/db",
            "--topic-prefix",
            "app",
            "--connector-name",
            "orders",
            "--kafka-property",
            "transaction.timeout.ms=60000",
        ])
        .expect("parses");
        assert_eq!(named.names().transactional_id(), "pgcdc-kafka-orders");
        assert_eq!(
            EosSettings::new(
                &named.names(),
                &named.eos,
                &producer_config(&named.producer_config(), &named.names())
            )
            .transaction_timeout,
            Duration::from_secs(60)
        );
    }
}
