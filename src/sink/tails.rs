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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::metadata::MetadataTopic;
use rdkafka::types::RDKafkaErrorCode;
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

/// How many times, and how long apart, a read asks again for the topics
/// it could not read: the partitions of a topic created moments before
/// have no leader yet (the broker's NotLeaderForPartition), for about a
/// second on this machine after 200 topics were created together.
const RETRIES: u32 = 5;
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What reading one topic's tails gave: its [`Tails`] and, per partition,
/// the last record if Debezium wrote it; or why they could not be read.
pub type TopicTails = Result<(Tails, Vec<Option<DebeziumTail>>), String>;

/// Reads the last records of topics: one consumer for an attempt
/// (blocking: call it off the async runtime).
pub struct TailReader {
    consumer: Reader,
    /// Held from a read's assignment to its unassignment: reads ahead and
    /// a topic's read at its first record may overlap.
    assigned: Mutex<()>,
}

/// One topic of a read, while it is read.
struct Reading<'a> {
    name: &'a str,
    tails: Vec<Option<Stamp>>,
    debezium: Vec<Option<DebeziumTail>>,
    /// The partitions whose last record (or end) has not come yet.
    open: Vec<bool>,
    /// Why this topic cannot be read; nothing more is asked of it.
    failed: Option<String>,
}

impl Reading<'_> {
    fn is_open(&self) -> bool {
        self.failed.is_none() && self.open.contains(&true)
    }

    /// Adds the topic's partitions to `list`, unless it failed.
    fn add_partitions(&self, list: &mut TopicPartitionList) {
        if self.failed.is_none() {
            for id in 0..self.tails.len() {
                list.add_partition(self.name, i32::try_from(id).unwrap_or(i32::MAX));
            }
        }
    }

    fn fail(&mut self, reason: impl Into<String>) {
        self.failed.get_or_insert_with(|| reason.into());
    }

    fn answer(self) -> TopicTails {
        match self.failed {
            Some(reason) => Err(reason),
            None => Ok((Tails(self.tails), self.debezium)),
        }
    }
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
    /// each one's last record, within `timeout` (see [`Self::read_many`]).
    /// Without `last_records` every tail is `None` (only the partition
    /// count is wanted). An error says why they could not be read.
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
    ) -> TopicTails {
        self.read_many(&[topic], last_records, timeout)
            .pop()
            .unwrap_or_else(|| Err("nothing was read".to_owned()))
    }

    /// The tails of `topics`, in their order, read together within
    /// `timeout`: one metadata request (for one topic, of that topic; for
    /// more, of the cluster's), one offsets request per broker for the
    /// first and last offsets of every partition, then one assignment of
    /// every partition that holds records, polled until each gave its last
    /// record or its end; the topics it could not read are asked again
    /// (5 times, 100 ms apart). Read one after the other, the 200 topics of a
    /// pipeline of 200 tables took 1-2 s at every start (BENCHMARKS.md).
    pub fn read_many(
        &self,
        topics: &[&str],
        last_records: bool,
        timeout: Duration,
    ) -> Vec<TopicTails> {
        let deadline = Instant::now() + timeout;
        let mut answers = self.read_once(topics, last_records, deadline, timeout);
        for _ in 0..RETRIES {
            let failed: Vec<usize> = (0..answers.len())
                .filter(|&i| answers[i].is_err())
                .collect();
            if failed.is_empty()
                || deadline.saturating_duration_since(Instant::now()) < RETRY_PAUSE * 2
            {
                break;
            }
            std::thread::sleep(RETRY_PAUSE);
            let names: Vec<&str> = failed.iter().map(|&i| topics[i]).collect();
            let again = self.read_once(&names, last_records, deadline, timeout);
            for (i, answer) in failed.into_iter().zip(again) {
                answers[i] = answer;
            }
        }
        answers
    }

    /// One try of [`Self::read_many`].
    fn read_once(
        &self,
        topics: &[&str],
        last_records: bool,
        deadline: Instant,
        timeout: Duration,
    ) -> Vec<TopicTails> {
        let mut reading: Vec<Reading> = topics
            .iter()
            .map(|&name| Reading {
                name,
                tails: Vec::new(),
                debezium: Vec::new(),
                open: Vec::new(),
                failed: None,
            })
            .collect();
        self.partitions(&mut reading, deadline);
        if last_records {
            self.last_records(&mut reading, deadline, timeout);
        }
        reading.into_iter().map(Reading::answer).collect()
    }

    /// Sizes each topic's tails to its partition count: none for a topic
    /// that does not exist (a first run) or cannot be used.
    fn partitions(&self, reading: &mut [Reading], deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        let only = match reading {
            [one] => Some(one.name),
            _ => None,
        };
        let metadata = match self.consumer.fetch_metadata(only, left) {
            Ok(metadata) => metadata,
            Err(e) => {
                for topic in reading.iter_mut() {
                    topic.fail(format!("cannot read its metadata: {e}"));
                }
                return;
            }
        };
        let found: HashMap<&str, &MetadataTopic> =
            metadata.topics().iter().map(|t| (t.name(), t)).collect();
        for topic in reading.iter_mut() {
            let Some(found) = found.get(topic.name) else {
                continue;
            };
            match found.error().map(RDKafkaErrorCode::from) {
                None => {}
                // Not there: nothing was delivered to it.
                Some(RDKafkaErrorCode::UnknownTopicOrPartition) => continue,
                // There but not answering now (a leader being chosen): asked
                // again, and a topic that had records is not taken for empty.
                Some(e) => {
                    topic.fail(format!("its metadata has an error: {e}"));
                    continue;
                }
            }
            let count = found.partitions().len();
            let ids_fit = found
                .partitions()
                .iter()
                .all(|p| usize::try_from(p.id()).is_ok_and(|id| id < count));
            if !ids_fit {
                topic.fail("its metadata has unexpected partition ids");
                continue;
            }
            topic.tails = vec![None; count];
            topic.debezium = vec![None; count];
            topic.open = vec![false; count];
        }
    }

    /// Reads the last record of every partition that holds records.
    fn last_records(&self, reading: &mut [Reading], deadline: Instant, timeout: Duration) {
        let mut wanted = TopicPartitionList::new();
        for topic in reading.iter() {
            topic.add_partitions(&mut wanted);
        }
        if wanted.count() == 0 {
            return;
        }
        let offsets = match self.offsets(&wanted, deadline) {
            Ok(both) => vec![both],
            // The broker fails the whole request for one partition it cannot
            // answer for (a topic created moments ago, its leader not yet
            // known): then each topic is asked alone, so that only those fail.
            Err(_) if reading.len() > 1 => {
                let mut each = Vec::new();
                for topic in reading.iter_mut() {
                    let mut list = TopicPartitionList::new();
                    topic.add_partitions(&mut list);
                    if list.count() == 0 {
                        continue;
                    }
                    match self.offsets(&list, deadline) {
                        Ok(both) => each.push(both),
                        Err(reason) => topic.fail(reason),
                    }
                }
                each
            }
            Err(reason) => {
                for topic in reading.iter_mut() {
                    topic.fail(reason.clone());
                }
                return;
            }
        };
        let index: HashMap<&str, usize> = reading
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name, i))
            .collect();
        let mut assignment = TopicPartitionList::new();
        let pairs = offsets
            .iter()
            .flat_map(|(first, next)| first.elements().into_iter().zip(next.elements()));
        for (low, high) in pairs {
            let Some(&i) = index.get(low.topic()) else {
                continue;
            };
            let topic = &mut reading[i];
            let id = low.partition();
            if let Some(e) = low.error().err().or(high.error().err()) {
                topic.fail(format!("cannot read the offsets of partition {id}: {e}"));
                continue;
            }
            let (low, high) = (low.offset().to_raw(), high.offset().to_raw());
            let (Some(low), Some(high)) = (low, high) else {
                topic.fail(format!("partition {id} gave no offsets"));
                continue;
            };
            if high > low {
                let added = assignment
                    .add_partition_offset(topic.name, id, Offset::Offset(high - 1))
                    .map_err(|e| format!("cannot assign partition {id}: {e}"));
                let open = usize::try_from(id).ok().and_then(|p| topic.open.get_mut(p));
                match (added, open) {
                    (Ok(()), Some(open)) => *open = true,
                    (Err(reason), _) => topic.fail(reason),
                    (Ok(()), None) => topic.fail(format!("unexpected partition id {id}")),
                }
            }
        }
        if assignment.count() == 0 {
            return;
        }
        // Nothing is left assigned when a read returns, so a poisoned lock
        // (a panic inside one) leaves nothing to clean up.
        let _assigned = self.assigned.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = self.consumer.assign(&assignment) {
            for topic in reading.iter_mut() {
                if topic.is_open() {
                    topic.fail(format!("cannot assign its partitions: {e}"));
                }
            }
            return;
        }
        self.read_assigned(reading, &index, deadline, timeout);
        // The next read starts from no assignment.
        let _ = self.consumer.unassign();
    }

    /// The first offset and the next one of each partition in `wanted`:
    /// one request per broker for each.
    fn offsets(
        &self,
        wanted: &TopicPartitionList,
        deadline: Instant,
    ) -> Result<(TopicPartitionList, TopicPartitionList), String> {
        let at = |offset: Offset| {
            let mut list = wanted.clone();
            list.set_all_offsets(offset)
                .and_then(|()| {
                    let left = deadline.saturating_duration_since(Instant::now());
                    self.consumer.offsets_for_times(list, left)
                })
                .map_err(|e| format!("cannot read its partitions' offsets: {e}"))
        };
        Ok((at(Offset::Beginning)?, at(Offset::End)?))
    }

    /// Polls the assigned partitions until each marked `open` gave its
    /// record (its stamp into its topic's tails) or its end.
    ///
    /// librdkafka's end-of-partition event names the partition but not its
    /// topic (rust-rdkafka drops it), so ends are counted per partition id:
    /// once every assigned partition with that id has ended, those that
    /// gave no record have none (their last entry is a transaction marker).
    /// A partition that ends twice (another producer appended meanwhile)
    /// can close one that has yet to give its record: it then proves
    /// nothing, and its topic's replayed records are sent again.
    fn read_assigned(
        &self,
        reading: &mut [Reading],
        index: &HashMap<&str, usize>,
        deadline: Instant,
        timeout: Duration,
    ) {
        let left = || deadline.saturating_duration_since(Instant::now());
        let mut ends: HashMap<i32, (usize, usize)> = HashMap::new();
        for topic in reading.iter() {
            for (p, _) in topic.open.iter().enumerate().filter(|(_, open)| **open) {
                ends.entry(i32::try_from(p).unwrap_or(i32::MAX))
                    .or_default()
                    .0 += 1;
            }
        }
        while reading.iter().any(Reading::is_open) {
            if left().is_zero() {
                for topic in reading.iter_mut().filter(|t| t.is_open()) {
                    let late: Vec<usize> =
                        (0..topic.open.len()).filter(|&p| topic.open[p]).collect();
                    topic.fail(format!(
                        "partitions {late:?} did not answer within {timeout:?}"
                    ));
                }
                return;
            }
            match self.consumer.poll(left().min(Duration::from_millis(200))) {
                None => {}
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    let Some((assigned, ended)) = ends.get_mut(&partition) else {
                        continue;
                    };
                    *ended += 1;
                    if *ended < *assigned {
                        continue;
                    }
                    let Ok(p) = usize::try_from(partition) else {
                        continue;
                    };
                    for topic in reading.iter_mut() {
                        if let Some(open) = topic.open.get_mut(p) {
                            *open = false;
                        }
                    }
                }
                Some(Err(e)) => {
                    for topic in reading.iter_mut().filter(|t| t.is_open()) {
                        topic.fail(format!("cannot read it: {e}"));
                    }
                    return;
                }
                Some(Ok(message)) => {
                    let Some(topic) = index.get(message.topic()).map(|&i| &mut reading[i]) else {
                        continue;
                    };
                    let Some(p) = usize::try_from(message.partition())
                        .ok()
                        .filter(|&p| topic.open.get(p) == Some(&true))
                    else {
                        continue;
                    };
                    topic.open[p] = false;
                    topic.tails[p] = message.headers().and_then(|headers| {
                        headers
                            .iter()
                            .filter(|h| h.key == POSITION_HEADER)
                            .find_map(|h| h.value.and_then(Stamp::parse))
                    });
                    if topic.tails[p].is_none() {
                        topic.debezium[p] = message
                            .payload()
                            .and_then(|value| DebeziumTail::parse(message.key(), value));
                    }
                }
            }
        }
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
