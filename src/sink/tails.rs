//! How far Kafka already has a topic: the last record of each partition,
//! read ahead at an at-least-once attempt's start for its tables' topics
//! (or when it first sends to another topic), so that a restart does not
//! send again what an earlier run delivered (issue 27).
//!
//! # What proves a replayed record delivered
//!
//! Kafka keeps each partition in the order records were produced, and the
//! producer leaves no gap in a partition (no delivery timeout, and
//! `enable.gapless.guarantee`; see `RunConfig::skips_delivered`). So when a
//! partition's last record has position P, every record sent to that
//! partition before P is there too. A replayed record `r` is therefore in
//! Kafka when
//! - **its partition's tail** is at or past it, and that tail's
//!   [`Stamp`] says the record was partitioned with today's partition
//!   count since a position at or before `r` (so `r` went to the partition
//!   its key gives now), or
//! - **every partition's tail** is at or past it (whichever partition it
//!   went to): the only proof for a record without a key.
//!
//! Tails written under other settings or another build (the fingerprint),
//! or without a stamp (a snapshot record, another producer's), and empty
//! partitions, prove nothing.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::client_log::LoggingContext;
use super::position::{Position, Stamp, POSITION_HEADER};
use super::reader::Reader;
use super::transactional::client_config;
use crate::takeover::tails::DebeziumTail;

/// The last record's stamp of each partition of a topic, by partition id
/// (`None`: empty, or no stamp on its last record). Empty for a topic that
/// does not exist yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tails(pub Vec<Option<Stamp>>);

impl Tails {
    /// The topic's partition count when the tails were read.
    pub fn partitions(&self) -> usize {
        self.0.len()
    }

    /// Whether the record at `position`, sent to `partition` (`None`: no
    /// key, so any), is in Kafka already, for a run whose settings have
    /// `fingerprint`. See the module docs.
    pub fn prove(&self, fingerprint: u64, partition: Option<usize>, position: Position) -> bool {
        let ours = |stamp: &&Stamp| stamp.fingerprint == fingerprint;
        let own_partition = partition
            .and_then(|p| self.0.get(p))
            .and_then(Option::as_ref)
            .filter(ours)
            .is_some_and(|tail| {
                usize::try_from(tail.partitions).ok() == Some(self.partitions())
                    && tail.since <= position
                    && position <= tail.position
            });
        own_partition
            || (!self.0.is_empty()
                && self.0.iter().all(|tail| {
                    tail.as_ref()
                        .filter(ours)
                        .is_some_and(|tail| position <= tail.position)
                }))
    }
}

/// Reads the last records of topics: one consumer for an attempt, used
/// one topic at a time (blocking: call it off the async runtime).
pub struct TailReader {
    consumer: Reader,
    /// Held from a read's assignment to its unassignment: reads ahead and
    /// a topic's read at its first record may overlap.
    assigned: Mutex<()>,
}

impl TailReader {
    /// A consumer with the producer's connection settings.
    pub fn new(producer: &ClientConfig) -> Result<Self, String> {
        let config = client_config(producer)
            .set("group.id", "pgcdc-kafka-tails")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            // One record per partition is wanted, at once: a fetch that
            // waits for more only delays the answer.
            .set("fetch.wait.max.ms", "10")
            .clone();
        let consumer = config
            .create_with_context::<_, Reader>(LoggingContext::for_config(&config))
            .map_err(|e| format!("cannot create a consumer: {e}"))?;
        Ok(TailReader {
            consumer,
            assigned: Mutex::new(()),
        })
    }

    /// The partitions of `topic` and, with `last_records`, the stamp of
    /// each one's last record, within `timeout`: one metadata request, one
    /// offsets request per partition, then one fetch of the partitions that
    /// hold records, in parallel. Without `last_records` every tail is
    /// `None` (only the partition count is wanted). An error says why they
    /// could not be read.
    pub fn read(
        &self,
        topic: &str,
        last_records: bool,
        timeout: Duration,
    ) -> Result<Tails, String> {
        self.read_with_debezium(topic, last_records, timeout)
            .map(|(tails, _)| tails)
    }

    /// [`Self::read`], and per partition the position of a last record that
    /// Debezium wrote (see [`crate::takeover::tails`]).
    pub fn read_with_debezium(
        &self,
        topic: &str,
        last_records: bool,
        timeout: Duration,
    ) -> Result<(Tails, Vec<Option<DebeziumTail>>), String> {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        let metadata = self
            .consumer
            .fetch_metadata(Some(topic), left())
            .map_err(|e| format!("cannot read its metadata: {e}"))?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok((Tails::default(), Vec::new()));
        };
        if found.error().is_some() || found.partitions().is_empty() {
            // Unknown topic (a first run), or not usable: nothing was delivered to it.
            return Ok((Tails::default(), Vec::new()));
        }
        let count = found.partitions().len();
        let mut tails = vec![None; count];
        let mut debezium = vec![None; count];
        if !last_records {
            return Ok((Tails(tails), debezium));
        }
        let mut assignment = TopicPartitionList::new();
        let mut open = vec![false; count];
        for partition in found.partitions() {
            let id = partition.id();
            let p = usize::try_from(id)
                .ok()
                .filter(|&p| p < count)
                .ok_or_else(|| format!("unexpected partition id {id}"))?;
            let (low, high) = self
                .consumer
                .fetch_watermarks(topic, id, left())
                .map_err(|e| format!("cannot read the offsets of partition {id}: {e}"))?;
            if high > low {
                assignment
                    .add_partition_offset(topic, id, Offset::Offset(high - 1))
                    .map_err(|e| format!("cannot assign partition {id}: {e}"))?;
                open[p] = true;
            }
        }
        if assignment.count() == 0 {
            return Ok((Tails(tails), debezium));
        }
        // Nothing is left assigned when a read returns, so a poisoned lock
        // (a panic inside one) leaves nothing to clean up.
        let _assigned = self.assigned.lock().unwrap_or_else(PoisonError::into_inner);
        self.consumer
            .assign(&assignment)
            .map_err(|e| format!("cannot assign its partitions: {e}"))?;
        let read = self.read_assigned(&mut tails, &mut debezium, &mut open, deadline, timeout);
        // The next topic's read starts from no assignment.
        let _ = self.consumer.unassign();
        read.map(|()| (Tails(tails), debezium))
    }

    /// Polls the assigned partitions until each marked `open` gave its
    /// record (its stamp into `tails`) or its end.
    fn read_assigned(
        &self,
        tails: &mut [Option<Stamp>],
        debezium: &mut [Option<DebeziumTail>],
        open: &mut [bool],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), String> {
        let count = tails.len();
        let left = || deadline.saturating_duration_since(Instant::now());
        while open.contains(&true) {
            if left().is_zero() {
                let late: Vec<usize> = (0..count).filter(|&p| open[p]).collect();
                return Err(format!(
                    "partitions {late:?} did not answer within {timeout:?}"
                ));
            }
            match self.consumer.poll(left().min(Duration::from_millis(200))) {
                None => {}
                // The end: after the last record, or before any (its last
                // entry is a transaction marker): no stamp.
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    if let Some(open) = usize::try_from(partition)
                        .ok()
                        .and_then(|p| open.get_mut(p))
                    {
                        *open = false;
                    }
                }
                Some(Err(e)) => return Err(format!("cannot read it: {e}")),
                Some(Ok(message)) => {
                    let Some(p) = usize::try_from(message.partition())
                        .ok()
                        .filter(|&p| p < count && open[p])
                    else {
                        continue;
                    };
                    open[p] = false;
                    tails[p] = message.headers().and_then(|headers| {
                        headers
                            .iter()
                            .filter(|h| h.key == POSITION_HEADER)
                            .find_map(|h| h.value.and_then(Stamp::parse))
                    });
                    if tails[p].is_none() {
                        debezium[p] = message
                            .payload()
                            .and_then(|value| DebeziumTail::parse(message.key(), value));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::position::at;

    fn tail(position: Position, partitions: i32, since: Position) -> Option<Stamp> {
        Some(Stamp {
            position,
            fingerprint: 7,
            partitions,
            since,
        })
    }

    #[test]
    fn a_keyed_record_is_proven_by_its_own_partition() {
        let tails = Tails(vec![tail(at(500, 3), 2, at(100, 0)), None]);
        assert!(tails.prove(7, Some(0), at(500, 3)));
        assert!(tails.prove(7, Some(0), at(100, 0)));
        assert!(!tails.prove(7, Some(0), at(500, 4)), "past the tail");
        assert!(
            !tails.prove(7, Some(0), at(99, 0)),
            "before the writing attempt's first record: maybe partitioned otherwise"
        );
        assert!(!tails.prove(8, Some(0), at(200, 0)), "other settings");
        assert!(
            !tails.prove(7, Some(1), at(200, 0)),
            "its partition is empty"
        );
        let resized = Tails(vec![tail(at(500, 3), 1, at(100, 0)), None]);
        assert!(
            !resized.prove(7, Some(0), at(200, 0)),
            "written with another partition count"
        );
    }

    #[test]
    fn any_record_is_proven_by_every_partition() {
        let tails = Tails(vec![
            tail(at(500, 3), 2, at(400, 0)),
            tail(at(300, 0), 2, at(300, 0)),
        ]);
        assert!(tails.prove(7, None, at(300, 0)));
        assert!(
            tails.prove(7, None, at(200, 5)),
            "before either since: any partition"
        );
        assert!(!tails.prove(7, None, at(300, 1)));
        assert!(!Tails(vec![tail(at(500, 3), 2, at(0, 0)), None]).prove(7, None, at(1, 0)));
        assert!(!Tails::default().prove(7, None, at(1, 0)), "no topic yet");
    }

    /// Tails of records without a key (stamped with no partition count)
    /// prove a keyless record together, never a keyed one on their own.
    #[test]
    fn keyless_tails_prove_by_every_partition_only() {
        let tails = Tails(vec![
            tail(at(500, 3), 0, at(100, 0)),
            tail(at(400, 0), 0, at(100, 0)),
        ]);
        assert!(tails.prove(7, None, at(400, 0)));
        assert!(
            !tails.prove(7, None, at(400, 1)),
            "past one partition's tail"
        );
        assert!(
            tails.prove(7, Some(0), at(300, 0)),
            "a keyed record below every tail"
        );
        assert!(
            !tails.prove(7, Some(0), at(450, 0)),
            "a keyed record past one tail: its partition's keyless tail says nothing of how keys were placed"
        );
    }
}
