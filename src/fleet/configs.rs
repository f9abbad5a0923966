//! The fleet's topics: reading the configs topic to its end and following
//! it, writing records and tombstones, and creating or growing the
//! topics. Blocking rdkafka calls only, meant for their own threads (or
//! `spawn_blocking`), never on the async runtime.
//!
//! The configs topic has one partition, so every instance sees the
//! records in one order and the last one per key wins, as compaction
//! keeps it. A record that cannot be decoded is logged and treated as a
//! removal of that pipeline: an instance never runs a config it cannot
//! read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::record::{ConfigRecord, Configs};
use super::{FleetError, FleetKafka, FleetName, REQUEST_TIMEOUT};
use crate::config::pipelines::PipelineName;

/// One change of the configs topic, as an instance follows it.
#[derive(Debug, Clone)]
pub enum ConfigEvent {
    /// The topic as read to its end at start.
    Loaded(Configs),
    /// A record after that: `None` removes the pipeline.
    Changed(PipelineName, Option<ConfigRecord>),
}

/// A reader of one single-partition compacted topic from its beginning.
fn reader(kafka: &FleetKafka, topic: &str, client_id: &str) -> Result<BaseConsumer, FleetError> {
    let mut config = kafka.client(client_id);
    // No group is joined (the partition is assigned); the id is required
    // by librdkafka's consumer and nothing is committed under it.
    config
        .set("group.id", format!("{client_id}.reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false");
    let consumer: BaseConsumer = config.create().map_err(FleetError::Client)?;
    let mut partitions = TopicPartitionList::new();
    partitions
        .add_partition_offset(topic, 0, Offset::Beginning)
        .map_err(FleetError::Client)?;
    consumer.assign(&partitions).map_err(FleetError::Client)?;
    Ok(consumer)
}

/// Applies one record of the configs topic to `configs`.
fn apply(configs: &mut Configs, key: Option<&[u8]>, value: Option<&[u8]>) {
    let Some(name) = key
        .and_then(|k| std::str::from_utf8(k).ok())
        .and_then(|k| k.parse::<PipelineName>().ok())
    else {
        tracing::warn!(
            "a record of the fleet's configs topic has no valid pipeline name as key; ignored"
        );
        return;
    };
    match value.map(ConfigRecord::decode) {
        None => {
            configs.remove(&name);
        }
        Some(Ok(record)) => {
            configs.insert(name, record);
        }
        Some(Err(error)) => {
            tracing::error!(pipeline = %name, %error, "the fleet's record of this pipeline cannot be read; it is not run until `fleet apply` writes a valid one");
            configs.remove(&name);
        }
    }
}

/// Whether the fleet's configs topic exists.
pub fn exists(kafka: &FleetKafka, fleet: &FleetName) -> Result<bool, FleetError> {
    let topic = fleet.configs_topic();
    let probe: BaseConsumer = kafka
        .client("pgcdc-fleet-probe")
        .create()
        .map_err(FleetError::Client)?;
    let metadata = probe
        .fetch_metadata(Some(&topic), REQUEST_TIMEOUT)
        .map_err(|error| FleetError::Read {
            topic: topic.clone(),
            error,
        })?;
    Ok(metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty()))
}

/// The configs topic read to its end: the fleet's pipelines now.
pub fn read_to_end(kafka: &FleetKafka, fleet: &FleetName) -> Result<Configs, FleetError> {
    let topic = fleet.configs_topic();
    if !exists(kafka, fleet)? {
        return Err(FleetError::NoSuchFleet {
            fleet: fleet.to_string(),
            topic,
        });
    }
    let consumer = reader(kafka, &topic, "pgcdc-fleet-admin")?;
    let mut configs = Configs::new();
    read_until_high(&consumer, &topic, &mut configs)?;
    Ok(configs)
}

/// Reads `consumer` (assigned the topic's partition 0) up to the high
/// watermark of when it started.
fn read_until_high(
    consumer: &BaseConsumer,
    topic: &str,
    configs: &mut Configs,
) -> Result<(), FleetError> {
    let read_error = |error| FleetError::Read {
        topic: topic.to_owned(),
        error,
    };
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, REQUEST_TIMEOUT)
        .map_err(read_error)?;
    let complete = scan_to(consumer, topic, high, REQUEST_TIMEOUT * 4, |message| {
        apply(configs, message.key(), message.payload());
    })
    .map_err(read_error)?;
    if !complete {
        return Err(read_error(rdkafka::error::KafkaError::MessageConsumption(
            rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
        )));
    }
    Ok(())
}

/// Hands every record of partition 0 of `topic` before offset `high` to
/// `each`, in order, for at most `budget`; whether it got to `high`.
/// Compaction may have removed the last offsets before `high`: the
/// consumer's position says when nothing is left to read.
fn scan_to(
    consumer: &BaseConsumer,
    topic: &str,
    high: i64,
    budget: Duration,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>),
) -> Result<bool, rdkafka::error::KafkaError> {
    let deadline = Instant::now() + budget;
    let mut next = 0;
    while next < high {
        if Instant::now() > deadline {
            return Ok(false);
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                each(&message);
                next = message.offset() + 1;
            }
            Some(Err(error)) => return Err(error),
            None => {
                if let Ok(Some(position)) = consumer
                    .position()
                    .map(|p| p.find_partition(topic, 0).and_then(|e| e.offset().to_raw()))
                {
                    next = next.max(position);
                }
            }
        }
    }
    Ok(true)
}

/// Follows the configs topic on a thread of its own: first the whole topic
/// ([`ConfigEvent::Loaded`]), then each record as it comes, until `events`
/// is closed. Errors while following are logged and retried (librdkafka
/// reconnects); an error before the first load ends the thread with it.
pub fn follow(
    kafka: FleetKafka,
    fleet: FleetName,
    client_id: String,
    events: mpsc::Sender<ConfigEvent>,
) -> std::thread::JoinHandle<Result<(), FleetError>> {
    std::thread::Builder::new()
        .name("fleet-configs".to_owned())
        .spawn(move || {
            let topic = fleet.configs_topic();
            let consumer = reader(&kafka, &topic, &client_id)?;
            let mut configs = Configs::new();
            read_until_high(&consumer, &topic, &mut configs)?;
            if events.blocking_send(ConfigEvent::Loaded(configs.clone())).is_err() {
                return Ok(());
            }
            while !events.is_closed() {
                match consumer.poll(Duration::from_millis(250)) {
                    Some(Ok(message)) => {
                        let before = configs.clone();
                        apply(&mut configs, message.key(), message.payload());
                        let Some(name) = message
                            .key()
                            .and_then(|k| std::str::from_utf8(k).ok())
                            .and_then(|k| k.parse::<PipelineName>().ok())
                        else {
                            continue;
                        };
                        let now = configs.get(&name).cloned();
                        if before.get(&name) != now.as_ref()
                            && events.blocking_send(ConfigEvent::Changed(name, now)).is_err()
                        {
                            return Ok(());
                        }
                    }
                    Some(Err(error)) => {
                        tracing::warn!(topic = %topic, error = %error, "reading the fleet's configs topic failed; retrying");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    None => {}
                }
            }
            Ok(())
        })
        .expect("spawn the configs thread")
}

/// Writes `records` (a `None` is a tombstone) to the configs topic and
/// waits until Kafka has them all.
pub fn write(
    kafka: &FleetKafka,
    fleet: &FleetName,
    records: &[(PipelineName, Option<ConfigRecord>)],
) -> Result<(), FleetError> {
    write_keyed(
        kafka,
        &fleet.configs_topic(),
        records.iter().map(|(name, record)| {
            (
                name.as_str().to_owned(),
                record.as_ref().map(ConfigRecord::encode),
            )
        }),
    )
}

/// Writes keyed values (a `None` is a tombstone) to `topic`, idempotently,
/// and waits until Kafka acknowledged them.
pub fn write_keyed(
    kafka: &FleetKafka,
    topic: &str,
    records: impl IntoIterator<Item = (String, Option<Vec<u8>>)>,
) -> Result<(), FleetError> {
    let write_error = |error| FleetError::Write {
        topic: topic.to_owned(),
        error,
    };
    let mut config = kafka.client("pgcdc-fleet-writer");
    config.set("enable.idempotence", "true").set("acks", "all");
    let producer: ThreadedProducer<DefaultProducerContext> =
        config.create().map_err(FleetError::Client)?;
    for (key, value) in records {
        let mut record: BaseRecord<'_, str, [u8]> =
            BaseRecord::to(topic).key(key.as_str()).partition(0);
        if let Some(value) = value.as_deref() {
            record = record.payload(value);
        }
        producer
            .send(record)
            .map_err(|(error, _)| write_error(error))?;
    }
    producer.flush(REQUEST_TIMEOUT).map_err(write_error)?;
    Ok(())
}

/// Creates the fleet's topics if missing (configs and status compacted,
/// one partition; assignment with `partitions`), and grows the assignment
/// topic to `partitions` if it has fewer.
pub async fn ensure_topics(
    kafka: &FleetKafka,
    fleet: &FleetName,
    partitions: i32,
) -> Result<(), FleetError> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client("pgcdc-fleet-admin")
        .create()
        .map_err(FleetError::Client)?;
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let compacted = [("cleanup.policy", "compact")];
    let configs = fleet.configs_topic();
    let status = fleet.status_topic();
    let assignment = fleet.assignment_topic();
    let wanted = [
        NewTopic::new(&configs, 1, TopicReplication::Fixed(-1)).set(compacted[0].0, compacted[0].1),
        NewTopic::new(&status, 1, TopicReplication::Fixed(-1)).set(compacted[0].0, compacted[0].1),
        NewTopic::new(&assignment, partitions, TopicReplication::Fixed(-1)),
    ];
    let results = admin
        .create_topics(&wanted, &options)
        .await
        .map_err(|e| FleetError::Topic {
            topic: configs.clone(),
            reason: e.to_string(),
        })?;
    admin_results(
        results,
        Some(rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists),
    )?;
    let current = {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(&assignment), REQUEST_TIMEOUT)
            .map_err(|error| FleetError::Read {
                topic: assignment.clone(),
                error,
            })?;
        metadata
            .topics()
            .iter()
            .find(|t| t.name() == assignment)
            .map_or(0, |t| t.partitions().len())
    };
    let current = i32::try_from(current).unwrap_or(i32::MAX);
    if current < partitions {
        let grow = [NewPartitions::new(
            &assignment,
            usize::try_from(partitions).unwrap_or(0),
        )];
        let results = admin
            .create_partitions(&grow, &options)
            .await
            .map_err(|e| FleetError::Topic {
                topic: assignment.clone(),
                reason: e.to_string(),
            })?;
        admin_results(results, None)?;
        tracing::info!(topic = %assignment, from = current, to = partitions, "added partitions to the fleet's assignment topic");
    }
    Ok(())
}

/// The first failure among an admin request's per-topic results, other
/// than `allowed` (a topic that already exists, when creating).
fn admin_results(
    results: Vec<rdkafka::admin::TopicResult>,
    allowed: Option<rdkafka::types::RDKafkaErrorCode>,
) -> Result<(), FleetError> {
    for result in results {
        if let Err((topic, code)) = result {
            if Some(code) != allowed {
                return Err(FleetError::Topic {
                    topic,
                    reason: code.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The latest value per key of a single-partition compacted topic (the
/// status topic), read to its end; empty when the topic does not exist.
pub fn latest_by_key(
    kafka: &FleetKafka,
    topic: &str,
) -> Result<BTreeMap<String, Vec<u8>>, FleetError> {
    let consumer = reader(kafka, topic, "pgcdc-fleet-admin")?;
    let read_error = |error| FleetError::Read {
        topic: topic.to_owned(),
        error,
    };
    let (_, high) = match consumer.fetch_watermarks(topic, 0, REQUEST_TIMEOUT) {
        Ok(w) => w,
        Err(_) => return Ok(BTreeMap::new()),
    };
    let mut latest = BTreeMap::new();
    // What was read within the time is returned: a status table may lag.
    scan_to(&consumer, topic, high, REQUEST_TIMEOUT, |message| {
        let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) else {
            return;
        };
        match message.payload() {
            Some(value) => latest.insert(key.to_owned(), value.to_vec()),
            None => latest.remove(key),
        };
    })
    .map_err(read_error)?;
    Ok(latest)
}
