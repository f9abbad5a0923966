//! Reading Kafka Connect's offsets topic: every `(key, value)` entry of
//! every partition, from the start to the end it had when the read began,
//! in order (the last entry of a key is its offset, as Connect reads it).

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::{Entry, TakeoverError};
use crate::sink::client_log::LoggingContext;
use crate::sink::transactional::client_config;

/// The entries of `topic`, within `timeout`. A topic that does not exist
/// has none.
pub(super) fn read(
    producer: &ClientConfig,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<Entry>, TakeoverError> {
    let fail = |reason: String| TakeoverError::Kafka {
        topic: topic.to_owned(),
        reason,
    };
    let config = client_config(producer)
        .set("group.id", "pgcdc-kafka-takeover")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        // Connect writes offsets outside transactions; read what is there.
        .set("isolation.level", "read_uncommitted")
        .clone();
    let consumer: BaseConsumer<LoggingContext> = config
        .create_with_context(LoggingContext::for_config(&config))
        .map_err(|e| fail(format!("cannot create a consumer: {e}")))?;
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let metadata = consumer
        .fetch_metadata(Some(topic), left())
        .map_err(|e| fail(format!("cannot read its metadata: {e}")))?;
    let Some(found) = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
    else {
        return Ok(Vec::new());
    };
    let mut assignment = TopicPartitionList::new();
    // Per partition: the offset of its last entry when the read began.
    let mut ends = Vec::new();
    for partition in found.partitions() {
        let id = partition.id();
        let (low, high) = consumer
            .fetch_watermarks(topic, id, left())
            .map_err(|e| fail(format!("cannot read the offsets of partition {id}: {e}")))?;
        if high > low {
            assignment
                .add_partition_offset(topic, id, Offset::Offset(low))
                .map_err(|e| fail(format!("cannot assign partition {id}: {e}")))?;
            ends.push((id, high - 1));
        }
    }
    if ends.is_empty() {
        return Ok(Vec::new());
    }
    consumer
        .assign(&assignment)
        .map_err(|e| fail(format!("cannot assign its partitions: {e}")))?;
    let mut entries = Vec::new();
    while !ends.is_empty() {
        if left().is_zero() {
            return Err(fail(format!("not read to its end within {timeout:?}")));
        }
        match consumer.poll(left().min(Duration::from_millis(200))) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                ends.retain(|(id, _)| *id != partition);
            }
            Some(Err(e)) => return Err(fail(format!("cannot read it: {e}"))),
            Some(Ok(message)) => {
                if let Some(key) = message.key() {
                    entries.push((key.to_vec(), message.payload().map(<[u8]>::to_vec)));
                }
                let (id, at) = (message.partition(), message.offset());
                ends.retain(|&(p, end)| p != id || at < end);
            }
        }
    }
    Ok(entries)
}
