//! How far Kafka already has a topic: the last record of each partition,
//! read when an at-least-once attempt first sends to the topic, so that a
//! restart does not send again what an earlier run delivered (issue 27).
//!
//! # Why the least of the partitions' tails
//!
//! Kafka keeps each partition in the order records were produced, and the
//! idempotent producer leaves no gap in a partition within a session. So
//! when a partition's last record has position P, every record the earlier
//! run sent to that partition before P is there too. A replayed record
//! whose position is at or below the *least* tail of all the topic's
//! partitions is therefore in Kafka, whichever partition it went to (the
//! partitioner, or the partition count, may have differed then). A
//! partition that is empty, or whose last record carries no position (a
//! snapshot record, another producer's) or one written under other
//! settings, proves nothing, and nothing of that topic is skipped.
//!
//! The one gap an idempotent producer can leave is a record that failed
//! (its `message.timeout.ms` passed) while a later one of its partition
//! succeeded. Such a failure ends the attempt; the next attempt of the same
//! process skips nothing below what the failed one had read (see
//! [`super::at_least_once::Dedupe`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::position::{Position, POSITION_HEADER};
use super::transactional::client_config;

/// What Kafka proves about a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Every record at or below this position is in the topic.
    Through(Position),
    /// Nothing is proven: the topic is new or empty, or a partition's last
    /// record carries no position.
    Unknown,
}

/// Reads the last record of every partition of `topic` within `timeout`
/// (blocking: call it off the async runtime); a position written under
/// another settings `fingerprint` proves nothing. An error says why the
/// tails could not be read.
pub fn read(
    producer: &ClientConfig,
    topic: &str,
    fingerprint: u64,
    timeout: Duration,
) -> Result<Tail, String> {
    let deadline = Instant::now() + timeout;
    let consumer: BaseConsumer = client_config(producer)
        .set("group.id", "pgcdc-kafka-tails")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| format!("cannot create a consumer: {e}"))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| format!("cannot read its metadata: {e}"))?;
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(Tail::Unknown);
    };
    if found.error().is_some() || found.partitions().is_empty() {
        // Unknown topic (a first run), or not usable: nothing was delivered to it.
        return Ok(Tail::Unknown);
    }
    let mut open: BTreeSet<i32> = found.partitions().iter().map(|p| p.id()).collect();
    let mut assignment = TopicPartitionList::new();
    for &partition in &open {
        assignment
            .add_partition_offset(topic, partition, Offset::OffsetTail(1))
            .map_err(|e| format!("cannot assign partition {partition}: {e}"))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|e| format!("cannot assign its partitions: {e}"))?;
    let mut least: Option<Position> = None;
    while !open.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "partitions {open:?} did not answer within {timeout:?}"
            ));
        }
        match consumer.poll(left.min(Duration::from_millis(200))) {
            None => {}
            // The end before a record: empty, or its last entry is a transaction marker.
            Some(Err(KafkaError::PartitionEOF(partition))) if open.contains(&partition) => {
                return Ok(Tail::Unknown);
            }
            // The end after the partition's last record.
            Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Err(e)) => return Err(format!("cannot read it: {e}")),
            Some(Ok(message)) => {
                if !open.remove(&message.partition()) {
                    continue;
                }
                let position = message.headers().and_then(|headers| {
                    headers
                        .iter()
                        .filter(|h| h.key == POSITION_HEADER)
                        .find_map(|h| h.value.and_then(Position::parse))
                });
                match position {
                    Some((position, written_under)) if written_under == fingerprint => {
                        least = Some(least.map_or(position, |l| l.min(position)));
                    }
                    _ => return Ok(Tail::Unknown),
                }
            }
        }
    }
    Ok(least.map_or(Tail::Unknown, Tail::Through))
}
