//! At-least-once delivery (the default): the idempotent producer alone.
//! Every record is retried until Kafka acknowledges it, so nothing is lost.
//! A restart replays what the slot had not confirmed; with
//! `--skip-delivered` the replayed records Kafka already has are not sent
//! again (see [`super::tails`]), otherwise a consumer may see them twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::config::ClientConfig;
use tokio::sync::{oneshot, watch};

use super::delivery::{next_progress, Delivery, DeliveryFailure, InKafka};
use super::error::SinkError;
use super::kafka::{InFlightLimits, KafkaSink};
use super::login::LoginRefused;
use super::position::{Position, StampSuffix, POSITION_HEADER};
use super::record::{EncodedRecord, Progress};
use super::tails::{TailReader, Tails, TopicTails};
use super::transactional::ProgressRecord;
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::takeover::tails::{DebeziumTail, TxnPlace};

/// How long reading a topic's partition tails may take before the
/// attempt gives up on skipping for that topic (and sends everything).
const TAIL_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How often, and how many times, a topic that did not exist at an
/// attempt's first record is looked up for the partition count the broker
/// created it with.
const CREATION_POLL: Duration = Duration::from_millis(200);
const CREATION_POLLS: u32 = 150;

/// What reading one topic's tails gave (or why it could not), and how long
/// it took.
type TailRead = (TopicTails, Duration);

/// One topic's tails, read ahead.
struct Ahead {
    /// Set when the background reader starts (on all the topics it reads
    /// together): until then the topic's first record reads them itself
    /// rather than wait for the reader's thread.
    started: Arc<AtomicBool>,
    read: oneshot::Receiver<TailRead>,
}

/// What an attempt may skip (`--skip-delivered`).
#[derive(Debug, Clone, Copy)]
pub struct Dedupe {
    /// The server's WAL position when the attempt began: no earlier run
    /// can have sent a transaction committed after it, so records past it
    /// are never looked up.
    pub horizon: Lsn,
    /// A delivery failed in an earlier attempt of this process, which may
    /// have left a record out of a partition that holds later ones:
    /// records of transactions at or below this position are all sent again.
    pub resend_through: Lsn,
    /// The build's and the output settings' fingerprint
    /// ([`crate::config::RunConfig::output_fingerprint`]).
    pub fingerprint: u64,
    /// Whether keyed records are partitioned here with Kafka's murmur2 (the
    /// partitioner librdkafka would use, `murmur2_random`), so that their
    /// partition is known before they are sent. Not when
    /// `--kafka-property partitioner` chose another.
    pub partition_keys: bool,
}

/// [`Delivery`] without Kafka transactions.
pub struct AtLeastOnce {
    sink: Arc<KafkaSink>,
    progress: watch::Receiver<Progress>,
    /// Stamps positions and skips what Kafka has; `None` without `--skip-delivered`.
    positions: Option<Positions>,
}

/// The position stamping and skipping of one attempt.
struct Positions {
    dedupe: Dedupe,
    /// Each read makes its own consumer and closes it after answering
    /// (`sink::reader`: a close takes about 0.1 s), so the closes overlap
    /// the stream instead of adding to a bounded run's exit.
    client: ClientConfig,
    /// Tails being read ahead (see [`AtLeastOnce::read_tails_ahead`]), per
    /// topic, until the topic's first record takes them.
    ahead: HashMap<Arc<str>, Ahead>,
    metrics: Arc<Metrics>,
    /// The transaction whose records are being sent: its commit position
    /// and the ordinal of its next record.
    current: Option<(TxnId, Lsn, u32)>,
    /// Per topic (an index into `states`), read at the first record of
    /// this attempt sent to it.
    topics: HashMap<Arc<str>, usize>,
    states: Vec<TopicState>,
    /// The last record's topic and its index: the records of one table
    /// come in runs, and hashing the topic's name twice for every record
    /// was a fifth of the stamp's instructions (BENCHMARKS.md).
    last: Option<(Arc<str>, usize)>,
    /// `--takeover-debezium`: the replayed change the next records are of.
    debezium_change: Option<(TxnPlace, Lsn)>,
}

/// What an attempt knows of one topic.
struct TopicState {
    /// What Kafka held when the attempt first sent to it.
    tails: Tails,
    /// Per partition, its last record if Debezium wrote it.
    debezium: Vec<Option<DebeziumTail>>,
    /// The first record of the topic this attempt handled.
    since: Position,
    /// The partition count of a topic that did not exist at its first
    /// record, once the broker has created it (see [`Positions::learn_partitions`]).
    created: Option<oneshot::Receiver<Tails>>,
    /// The stamps' common part for keyed records (with the partition count)
    /// and for the others (without).
    keyed: StampSuffix,
    unkeyed: StampSuffix,
}

impl TopicState {
    fn new(tails: Tails, since: Position, fingerprint: u64) -> Self {
        let partitions = i32::try_from(tails.partitions()).unwrap_or(0);
        TopicState {
            keyed: StampSuffix::new(fingerprint, partitions, since),
            unkeyed: StampSuffix::new(fingerprint, 0, since),
            tails,
            debezium: Vec::new(),
            since,
            created: None,
        }
    }

    /// Takes the partition count of a topic created since its first record,
    /// if the broker has it now.
    fn catch_up(&mut self, fingerprint: u64) {
        let Some(created) = &mut self.created else {
            return;
        };
        match created.try_recv() {
            Ok(tails) => *self = TopicState::new(tails, self.since, fingerprint),
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => self.created = None,
        }
    }
}

impl AtLeastOnce {
    /// The producer; `acked` is the position the slot is confirmed at.
    /// With `dedupe`, streamed records carry their position and replayed
    /// ones that Kafka already has are skipped.
    pub fn new(
        config: &ClientConfig,
        limits: InFlightLimits,
        acked: Lsn,
        dedupe: Option<Dedupe>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SinkError> {
        let (sink, progress) =
            KafkaSink::with_metrics(config, limits, acked, Arc::clone(&metrics))?;
        Ok(AtLeastOnce {
            sink: Arc::new(sink),
            progress,
            positions: dedupe.map(|dedupe| Positions {
                dedupe,
                client: config.clone(),
                ahead: HashMap::new(),
                metrics,
                current: None,
                topics: HashMap::new(),
                states: Vec::new(),
                last: None,
                debezium_change: None,
            }),
        })
    }

    /// Starts reading the partition tails of `topics` (those the attempt's
    /// tables write to) in the background, so that the first record of
    /// each does not wait for them: the reads overlap the replication
    /// connection's start. A topic read ahead is read with its last records
    /// whatever its first record's position. Without `--skip-delivered`,
    /// nothing.
    pub fn read_tails_ahead(&mut self, topics: impl IntoIterator<Item = Arc<str>>) {
        if let Some(positions) = &mut self.positions {
            positions.read_ahead(topics);
        }
    }

    /// The producer underneath (for its queue gauge).
    pub fn producer(&self) -> &Arc<KafkaSink> {
        &self.sink
    }
}

/// The partition Kafka's murmur2 partitioner (Java's default, librdkafka's
/// `murmur2_random` for keyed records) gives `key` among `partitions`.
pub fn murmur2_partition(key: &[u8], partitions: usize) -> usize {
    if partitions <= 1 {
        // The usual topic: no hash to compute (a JSON key with its schema
        // is a few hundred bytes).
        return 0;
    }
    let hash = murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff;
    usize::try_from(hash).unwrap_or(0) % partitions
}

/// The read of `topic`'s tails started ahead, once it is done.
async fn take_ahead(topic: &str, ahead: oneshot::Receiver<TailRead>) -> TailRead {
    let waiting = Instant::now();
    let read = ahead
        .await
        .unwrap_or_else(|_| (Err("the read ahead stopped".to_owned()), Duration::ZERO));
    tracing::debug!(topic, waited = ?waiting.elapsed(), took = ?read.1, "the topic's first record took its tails, read ahead");
    read
}

/// Reads the tails of `reads`' topics together (blocking: on a blocking
/// thread) and answers each with what its read gave and how long the read
/// took. The reader closes after answering (`Positions::client`'s
/// comment): its close takes about 0.1 s.
fn read_and_answer(
    client: &ClientConfig,
    reads: Vec<(Arc<str>, oneshot::Sender<TailRead>)>,
    last_records: bool,
) {
    let began = Instant::now();
    let names: Vec<&str> = reads.iter().map(|(topic, _)| &**topic).collect();
    let reader = TailReader::new(client);
    let read = match &reader {
        Ok(reader) => reader.read_many(&names, last_records, TAIL_READ_TIMEOUT),
        Err(e) => vec![Err(e.clone()); names.len()],
    };
    let took = began.elapsed();
    tracing::debug!(topics = names.len(), ?took, "read the tails of topics");
    for ((_, done), read) in reads.into_iter().zip(read) {
        let _ = done.send((read, took));
    }
    drop(reader);
}

/// Whether Debezium's last records hold the change at `lsn` of `txn`: its
/// partition's (a keyed record), or every partition's (one without a key).
fn debezium_holds(
    tails: &[Option<DebeziumTail>],
    partition: Option<usize>,
    txn: TxnPlace,
    lsn: Lsn,
    key: Option<&[u8]>,
) -> bool {
    let holds = |tail: &Option<DebeziumTail>| tail.as_ref().is_some_and(|t| t.holds(txn, lsn, key));
    match partition {
        Some(p) => tails.get(p).is_some_and(holds),
        None => !tails.is_empty() && tails.iter().all(holds),
    }
}

impl Positions {
    /// The position of `record` if it belongs to the transaction being
    /// streamed (counting it).
    fn next_position(&mut self, record: &EncodedRecord) -> Option<Position> {
        let (txn, lsn, next) = self.current.as_mut()?;
        if *txn != record.txn {
            return None;
        }
        let position = Position {
            lsn: *lsn,
            ordinal: *next,
        };
        *next += 1;
        Some(position)
    }

    /// Stamps `record` (at `position`), choosing its partition if it has a
    /// key, and says whether Kafka already holds it.
    async fn stamp(&mut self, record: &mut EncodedRecord, position: Position) -> bool {
        let Dedupe {
            horizon,
            resend_through,
            fingerprint,
            partition_keys,
        } = self.dedupe;
        let index = match &self.last {
            Some((last, index)) if Arc::ptr_eq(last, &record.topic) => *index,
            _ => {
                let index = match self.topics.get(&record.topic) {
                    Some(&index) => index,
                    None => self.first_record(&record.topic, position).await,
                };
                self.last = Some((Arc::clone(&record.topic), index));
                index
            }
        };
        let Some(state) = self.states.get_mut(index) else {
            return false;
        };
        state.catch_up(fingerprint);
        let partitions = state.tails.partitions();
        let partition = match &record.key {
            Some(key) if partition_keys && partitions > 0 => {
                Some(murmur2_partition(key, partitions))
            }
            _ => None,
        };
        let suffix = if partition.is_some() {
            &state.keyed
        } else {
            &state.unkeyed
        };
        let by_debezium = self.debezium_change.is_some_and(|(txn, lsn)| {
            debezium_holds(&state.debezium, partition, txn, lsn, record.key.as_deref())
        });
        let delivered = position.lsn <= horizon
            && position.lsn > resend_through
            && (by_debezium || state.tails.prove(fingerprint, partition, position));
        record.partition = partition.and_then(|p| i32::try_from(p).ok());
        record
            .headers
            .push((POSITION_HEADER, suffix.value(position).into()));
        delivered
    }

    /// Reads what Kafka holds of `topic`, whose first record of this
    /// attempt is at `position`; returns the topic's index in `states`.
    async fn first_record(&mut self, topic: &Arc<str>, position: Position) -> usize {
        let Dedupe {
            horizon,
            fingerprint,
            partition_keys,
            ..
        } = self.dedupe;
        let ahead = match self.ahead.remove(topic) {
            Some(ahead) if ahead.started.load(Ordering::Acquire) => {
                Some(take_ahead(topic, ahead.read).await)
            }
            // Not started: dropping it tells the reader to pass it by.
            _ => None,
        };
        // A failed read gets a second chance. A topic missing when it was
        // read ahead is not read again: no earlier run delivered to it, and
        // a topic created since (auto-creation, `--topic-partitions` at its
        // table's first Relation message) holds nothing an earlier run sent.
        // Its partition count is learnt in the background, as for a topic
        // created by its first records: read here it held up the stream,
        // 60 ms a topic on this machine (BENCHMARKS.md). Only a record an
        // earlier run can have sent needs the tails.
        let (tails, debezium) = match ahead {
            Some((Ok(read), took)) => self.settle(topic, (Ok(read), took), true),
            _ => self.read_tails(topic, position.lsn <= horizon).await,
        };
        let created = (partition_keys && tails.partitions() == 0)
            .then(|| self.learn_partitions(topic))
            .flatten();
        self.states.push(TopicState {
            created,
            debezium,
            ..TopicState::new(tails, position, fingerprint)
        });
        let index = self.states.len() - 1;
        self.topics.insert(Arc::clone(topic), index);
        index
    }

    /// The partition count of `topic`, which does not exist yet, once the
    /// broker has created it at this attempt's first records (auto-creation):
    /// until then records are stamped without a count, which proves nothing
    /// on a restart. Those first keyed records are partitioned by librdkafka
    /// with the same murmur2 once it knows the count, so they count as
    /// partitioned with it (`since` stays the attempt's first record).
    fn learn_partitions(&self, topic: &Arc<str>) -> Option<oneshot::Receiver<Tails>> {
        let client = self.client.clone();
        let (found, created) = oneshot::channel();
        let name = Arc::clone(topic);
        tokio::task::spawn_blocking(move || {
            let Ok(reader) = TailReader::new(&client) else {
                return;
            };
            for _ in 0..CREATION_POLLS {
                std::thread::sleep(CREATION_POLL);
                if found.is_closed() {
                    return;
                }
                if let Ok(tails) = reader.read(&name, false, TAIL_READ_TIMEOUT) {
                    if tails.partitions() > 0 {
                        tracing::debug!(topic = %name, partitions = tails.partitions(), "the topic was created");
                        let _ = found.send(tails);
                        return;
                    }
                }
            }
        });
        Some(created)
    }

    /// See [`AtLeastOnce::read_tails_ahead`]: one background reader reads
    /// the topics together ([`TailReader::read_many`]); a topic's first
    /// record that comes before the reader started reads the topic itself.
    fn read_ahead(&mut self, topics: impl IntoIterator<Item = Arc<str>>) {
        // One flag for all: the reader starts on them together.
        let started = Arc::new(AtomicBool::new(false));
        let mut reads = Vec::new();
        for topic in topics {
            if self.topics.contains_key(&topic) || self.ahead.contains_key(&topic) {
                continue;
            }
            let (done, read) = oneshot::channel();
            let ahead = Ahead {
                started: Arc::clone(&started),
                read,
            };
            self.ahead.insert(Arc::clone(&topic), ahead);
            reads.push((topic, done));
        }
        if reads.is_empty() {
            return;
        }
        let client = self.client.clone();
        tokio::task::spawn_blocking(move || {
            started.store(true, Ordering::Release);
            // A topic whose first record came first is read there (or the
            // attempt is over).
            reads.retain(|(_, done)| !done.is_closed());
            read_and_answer(&client, reads, true);
        });
    }

    async fn read_tails(
        &mut self,
        topic: &Arc<str>,
        last_records: bool,
    ) -> (Tails, Vec<Option<DebeziumTail>>) {
        let (client, name) = (self.client.clone(), Arc::clone(topic));
        let (answer, answered) = oneshot::channel();
        tokio::task::spawn_blocking(move || {
            read_and_answer(&client, vec![(name, answer)], last_records);
        });
        let read = answered.await.unwrap_or_else(|_| {
            let failed = Err("the reader stopped without an answer".to_owned());
            (failed, Duration::ZERO)
        });
        self.settle(topic, read, false)
    }

    /// What a read of `topic`'s tails (`read_ahead`: at the attempt's
    /// start) says, logged; a failed read proves nothing (everything
    /// replayed is sent).
    fn settle(
        &self,
        topic: &Arc<str>,
        (read, took): TailRead,
        read_ahead: bool,
    ) -> (Tails, Vec<Option<DebeziumTail>>) {
        match read {
            Ok((tails, debezium)) => {
                tracing::debug!(topic = %topic, ?took, read_ahead, ?tails, "read the topic's partition tails");
                if debezium.iter().any(Option::is_some) {
                    tracing::info!(topic = %topic, "Debezium wrote the last records of this topic: replayed changes they hold are not sent again");
                }
                let fingerprint = self.dedupe.fingerprint;
                let latest = tails
                    .0
                    .iter()
                    .flatten()
                    .filter(|stamp| stamp.fingerprint == fingerprint)
                    .map(|stamp| stamp.position)
                    .max();
                match latest {
                    Some(latest) => {
                        tracing::info!(topic = %topic, %latest, read_ahead, "Kafka holds this topic's records up to {latest} from a run with the same settings: replayed records it holds are not sent again")
                    }
                    None => {
                        tracing::debug!(topic = %topic, "no record of this topic from a run with the same settings")
                    }
                }
                (tails, debezium)
            }
            Err(reason) => {
                self.metrics.tail_read_failed();
                tracing::warn!(topic = %topic, %reason, "cannot tell what Kafka already has of this topic; its replayed records are sent again (duplicates, never a loss)");
                (Tails::default(), Vec::new())
            }
        }
    }
}

#[async_trait]
impl Delivery for AtLeastOnce {
    async fn init(&mut self) -> Result<InKafka, SinkError> {
        Ok(InKafka::Untracked)
    }

    fn skip_before(&mut self, _lsn: Lsn) {}

    fn already_delivered(&self, _final_lsn: Lsn) -> bool {
        false
    }

    fn begin(&mut self) -> TxnId {
        self.sink.begin()
    }

    fn anchor(&mut self, txn: TxnId, commit: Lsn) {
        if let Some(positions) = &mut self.positions {
            positions.current = Some((txn, commit, 0));
            positions.debezium_change = None;
        }
    }

    fn debezium_change(&mut self, at: Option<(TxnPlace, Lsn)>) {
        if let Some(positions) = &mut self.positions {
            positions.debezium_change = at;
        }
    }

    fn unanchor(&mut self) {
        if let Some(positions) = &mut self.positions {
            positions.current = None;
        }
    }

    async fn send(&mut self, mut record: EncodedRecord) -> Result<(), SinkError> {
        if let Some(positions) = &mut self.positions {
            if let Some(position) = positions.next_position(&record) {
                if positions.stamp(&mut record, position).await {
                    positions.metrics.record_already_delivered();
                    return Ok(());
                }
            }
        }
        self.sink.send(record).await
    }

    fn commit(&mut self, txn: TxnId, end_lsn: Lsn) {
        self.sink.commit(txn, end_lsn);
    }

    fn advance_idle(&mut self, wal_end: Lsn) {
        self.sink.advance_idle(wal_end);
    }

    fn acked(&self) -> Lsn {
        self.sink.acked()
    }

    fn is_drained(&self) -> bool {
        self.sink.is_drained()
    }

    async fn acked_changed(&mut self) -> Result<Lsn, DeliveryFailure> {
        next_progress(&mut self.progress).await
    }

    fn failure(&self) -> Option<Arc<SinkError>> {
        self.progress.borrow().failure.clone()
    }

    async fn flush(&mut self, timeout: Duration) -> Result<(), SinkError> {
        self.sink.flush(timeout).await
    }

    async fn checkpoint(
        &mut self,
        topic: &str,
        key: &str,
        record: ProgressRecord,
        timeout: Duration,
    ) -> Result<(), SinkError> {
        self.sink.settled(timeout).await?;
        if self.failure().is_some() {
            return Ok(());
        }
        self.sink.send_untracked(record.encoded(topic, key)).await?;
        self.sink.settled(timeout).await
    }

    async fn drain(&mut self, timeout: Duration) -> Result<(), SinkError> {
        self.sink.drain(timeout).await
    }

    async fn login_refused(&self) -> LoginRefused {
        self.sink.login_refused().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::position::{at, Stamp};

    fn positions(tails: Tails) -> Positions {
        Positions {
            dedupe: Dedupe {
                horizon: Lsn::new(1000),
                resend_through: Lsn::new(100),
                fingerprint: 7,
                partition_keys: true,
            },
            client: ClientConfig::new(),
            ahead: HashMap::new(),
            metrics: Arc::new(Metrics::new()),
            current: None,
            topics: HashMap::from([(Arc::from("t"), 0)]),
            states: vec![TopicState::new(tails, at(200, 0), 7)],
            last: None,
            debezium_change: None,
        }
    }

    fn record(txn: TxnId, key: Option<&[u8]>) -> EncodedRecord {
        EncodedRecord {
            topic: Arc::from("t"),
            key: key.map(<[u8]>::to_vec),
            value: None,
            headers: Vec::new(),
            txn,
            partition: None,
            created_micros: None,
        }
    }

    fn every_partition_through(position: Position) -> Tails {
        let stamp = Stamp {
            position,
            fingerprint: 7,
            partitions: 2,
            since: at(0, 0),
        };
        Tails(vec![Some(stamp), Some(stamp)])
    }

    #[test]
    fn records_of_the_anchored_transaction_are_numbered_in_order() {
        let mut p = positions(Tails::default());
        let (streamed, other) = (TxnId::from_u64(1), TxnId::from_u64(2));
        assert_eq!(
            p.next_position(&record(streamed, None)),
            None,
            "nothing anchored"
        );
        p.current = Some((streamed, Lsn::new(500), 0));
        assert_eq!(p.next_position(&record(streamed, None)), Some(at(500, 0)));
        assert_eq!(
            p.next_position(&record(other, None)),
            None,
            "a snapshot record has no place"
        );
        assert_eq!(p.next_position(&record(streamed, None)), Some(at(500, 1)));
    }

    #[tokio::test]
    async fn a_stamp_says_where_and_under_what_a_record_was_written() {
        let mut p = positions(every_partition_through(at(500, 3)));
        let mut keyed = record(TxnId::from_u64(1), Some(b"k"));
        p.stamp(&mut keyed, at(600, 1)).await;
        let partition = murmur2_partition(b"k", 2);
        assert_eq!(keyed.partition, Some(i32::try_from(partition).unwrap()));
        let written = |r: &EncodedRecord| {
            assert_eq!(r.headers.len(), 1);
            assert_eq!(r.headers[0].0, POSITION_HEADER);
            Stamp::parse(&r.headers[0].1).map(|stamp| stamp.to_string())
        };
        assert_eq!(
            written(&keyed).as_deref(),
            Some("0/258:1@0000000000000007#2~0/C8:0")
        );
        let mut unkeyed = record(TxnId::from_u64(1), None);
        p.stamp(&mut unkeyed, at(600, 2)).await;
        assert_eq!(unkeyed.partition, None, "librdkafka spreads them");
        assert_eq!(
            written(&unkeyed).as_deref(),
            Some("0/258:2@0000000000000007#0~0/C8:0")
        );
    }

    #[tokio::test]
    async fn only_what_the_tails_prove_and_no_earlier_failure_taints_is_skipped() {
        let mut p = positions(every_partition_through(at(500, 3)));
        for (position, skipped, why) in [
            (at(500, 3), true, "the tails' position"),
            (at(400, 9), true, "below the tails"),
            (at(500, 4), false, "past the tails"),
            (at(100, 0), false, "at or below a failed attempt's reach"),
        ] {
            let mut r = record(TxnId::from_u64(1), None);
            assert_eq!(p.stamp(&mut r, position).await, skipped, "{why}");
        }
        let mut far = positions(every_partition_through(at(5000, 0)));
        let mut r = record(TxnId::from_u64(1), None);
        assert!(
            !far.stamp(&mut r, at(1001, 0)).await,
            "past the horizon nothing is skipped"
        );
    }

    /// Kafka's own murmur2 test vectors (`UtilsTest.testMurmur2` of the
    /// Java client), and a partition a key lands on among several.
    #[test]
    fn keys_hash_as_kafka_hashes_them() {
        for (key, hash) in [
            (&b"21"[..], -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ] {
            let ours = murmur2::murmur2(key, murmur2::KAFKA_SEED);
            assert_eq!(ours.cast_signed(), hash, "{key:?}");
            let positive = usize::try_from(hash & 0x7fff_ffff).unwrap();
            assert_eq!(murmur2_partition(key, 7), positive % 7);
        }
    }
}
