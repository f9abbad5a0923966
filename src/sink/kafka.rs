//! The Kafka producer and its delivery tracking.
//!
//! Records are handed to librdkafka without blocking the async runtime
//! (`BaseProducer::send` only enqueues). librdkafka calls
//! [`DeliveryContext::delivery`] on the polling thread (`sink::poller`)
//! once the broker has acknowledged a message (`acks=all`, idempotent
//! producer, so retries keep per-partition order and never duplicate) or it
//! has given up on it. That callback is the only place that feeds
//! acknowledgements into the [`AckTracker`]; the pipeline reads the
//! resulting position from a watch channel and is the only place that
//! confirms it to Postgres.
//!
//! This producer is at-least-once by itself ([`super::AtLeastOnce`]);
//! [`super::Transactional`] drives it inside Kafka transactions
//! (`--delivery exactly-once`), and its tracker's position then also waits
//! for the Kafka commit.
//!
//! In-flight work is bounded by a semaphore of message permits and one of
//! byte permits, released by the callback. A single record larger than the
//! byte bound takes the whole bound, so it still flows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, NoCustomPartitioner, Producer, ProducerContext,
    PurgeConfig,
};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use tokio::sync::{watch, Semaphore};

use super::client_log::KafkaLog;
use super::error::{delivery_error, SinkError};
use super::login::LoginRefused;
use super::poller::PolledProducer;
use super::record::{EncodedRecord, Progress};
use super::topic_handles::TopicHandles;
use super::transactional;
use crate::checkpoint::{AckTracker, TxnId};
use crate::event::now_micros;
use crate::lsn::Lsn;
use crate::metrics::Metrics;

/// How often librdkafka reports its statistics (read for the retry count).
const STATISTICS_INTERVAL_MS: &str = "5000";

/// Shared between the producer's polling thread and the pipeline.
struct Shared {
    tracker: Mutex<AckTracker>,
    progress: watch::Sender<Progress>,
    messages: Semaphore,
    bytes: Semaphore,
    metrics: Arc<Metrics>,
    /// The producer's retried requests at its last statistics report.
    retries_seen: AtomicU64,
    /// How often, and for how long in all (µs), a send waited for the
    /// in-flight bound: where a drain's wall time goes when Kafka, not the
    /// connector, sets the pace (logged when the sink is dropped).
    bound_waits: AtomicU64,
    bound_waited_us: AtomicU64,
    /// Exactly-once: the producer's transactional.id, named when it is fenced.
    transactional_id: Option<String>,
}

impl Shared {
    fn tracker(&self) -> MutexGuard<'_, AckTracker> {
        // The tracker's state stays consistent under a panic elsewhere (every
        // method is a few counter updates), so a poisoned lock is still usable.
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish_acked(&self, acked: Lsn) {
        self.metrics.acknowledged(acked);
        // Published from two threads (the delivery callback, the pipeline's
        // commits): a late, older value must not move the position back.
        self.progress.send_modify(|p| p.acked = p.acked.max(acked));
    }

    /// The refused login, when that is the failure published.
    fn refused_login(&self) -> Option<LoginRefused> {
        match self.progress.borrow().failure.as_deref() {
            Some(SinkError::Authentication(refused)) => Some(refused.clone()),
            _ => None,
        }
    }

    /// Resolves once the broker refuses the producer's login.
    async fn refusal(&self) -> LoginRefused {
        let mut progress = self.progress.subscribe();
        let refused =
            |p: &Progress| matches!(p.failure.as_deref(), Some(SinkError::Authentication(_)));
        if progress.wait_for(refused).await.is_err() {
            // The sender lives in `self`: it cannot be gone while we wait.
            std::future::pending::<()>().await;
        }
        self.refused_login()
            .unwrap_or_else(|| unreachable!("waited for a refusal"))
    }

    fn publish_failure(&self, error: SinkError) {
        self.progress.send_modify(|p| {
            if p.failure.is_none() {
                p.failure = Some(Arc::new(error));
            }
        });
    }
}

/// The librdkafka context: receives delivery reports.
pub struct DeliveryContext {
    shared: Arc<Shared>,
    log: KafkaLog,
}

impl ClientContext for DeliveryContext {
    /// librdkafka's client-level errors. A refused login fails every
    /// attempt the same way, so it stops the connector with the fix rather
    /// than being retried like an unreachable broker (see [`super::login`]);
    /// the rest are logged and surface through delivery reports.
    fn error(&self, error: KafkaError, reason: &str) {
        match LoginRefused::from_client_error(&error, reason) {
            Some(refused) => self.shared.publish_failure(refused.into()),
            None => self.log.client_error(&error, reason),
        }
    }

    /// librdkafka's own log, through [`KafkaLog`].
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.log.log(level, fac, log_message);
    }

    /// librdkafka's statistics (every [`STATISTICS_INTERVAL_MS`]): counts the
    /// produce requests retried since the previous report, and notes a
    /// broker connection that is up (`--startup-timeout`: Kafka answered).
    fn stats(&self, statistics: Statistics) {
        if statistics.brokers.values().any(|b| b.state == "UP") {
            self.shared.metrics.kafka_answered();
        }
        let total: u64 = statistics.brokers.values().map(|b| b.txretries).sum();
        let before = self.shared.retries_seen.swap(total, Ordering::Relaxed);
        self.shared
            .metrics
            .producer_retried(total.saturating_sub(before));
        log_batching(&statistics);
    }
}

/// What the delivery callback needs back for each message.
#[derive(Debug)]
pub struct InFlight {
    /// `None` for the progress record, which belongs to no Postgres transaction.
    txn: Option<TxnId>,
    byte_permits: u32,
    /// Where the acknowledgement latency is counted from (Unix µs): the
    /// record's own time ([`EncodedRecord::created_micros`]) plus its wait
    /// for the in-flight bound, so that the pipeline's thread reads no
    /// clock for it.
    created_micros: i64,
}

impl ProducerContext<NoCustomPartitioner> for DeliveryContext {
    type DeliveryOpaque = Box<InFlight>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<InFlight>) {
        let InFlight {
            txn,
            byte_permits,
            created_micros,
        } = *opaque;
        let outcome = match result {
            Ok(_) => {
                self.shared.metrics.kafka_answered();
                let now = Instant::now();
                let waited = now_micros().saturating_sub(created_micros);
                let latency = Duration::from_micros(u64::try_from(waited).unwrap_or(0));
                (self.shared.metrics).record_delivered(u64::from(byte_permits), latency, now);
                txn.and_then(|txn| {
                    let mut tracker = self.shared.tracker();
                    // The last record of a transaction at an already
                    // acknowledged position (a read-only snapshot chunk or
                    // a kafka-channel blocking snapshot, at a keepalive's
                    // position) leaves the position where it was: publish
                    // it anyway, so the stream loop wakes to see everything
                    // delivered instead of waiting for the server's next
                    // message.
                    tracker
                        .delivered(txn)
                        .or_else(|| tracker.is_drained().then(|| tracker.acked()))
                })
                .map(Ok)
            }
            Err((error, message)) => {
                self.shared.metrics.record_failed(u64::from(byte_permits));
                match txn {
                    Some(txn) => self.shared.tracker().failed(txn),
                    // A lost progress record fails the commit; no Postgres
                    // transaction of this Kafka transaction may be confirmed.
                    None => self.shared.tracker().failed(TxnId::from_u64(u64::MAX)),
                }
                let topic = rdkafka::Message::topic(message).to_owned();
                let purged = matches!(
                    error.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
                );
                // One failure stops the attempt; the rest of what was in flight
                // usually fails the same way (a timeout, a purge), so only the
                // first is worth an error line.
                if purged || self.shared.progress.borrow().failure.is_some() {
                    tracing::debug!(topic, %error, "kafka delivery failed (purged, or after the first failure)");
                } else {
                    tracing::error!(topic, %error, "kafka delivery failed; the slot will not be confirmed past this transaction");
                }
                match &self.shared.transactional_id {
                    Some(id) if transactional::is_fenced(error) => Some(Err(SinkError::Fenced {
                        transactional_id: id.clone(),
                    })),
                    _ => Some(Err(delivery_error(&topic, error.clone()))),
                }
            }
        };
        match outcome {
            Some(Ok(acked)) => self.shared.publish_acked(acked),
            Some(Err(error)) => self.shared.publish_failure(error),
            None => {}
        }
        self.shared.messages.add_permits(1);
        self.shared.bytes.add_permits(byte_permits as usize);
    }
}

/// librdkafka's batching at a statistics report, at DEBUG: messages and
/// bytes per produce batch of each topic, and per broker the produce
/// requests so far and their round trip (average over the report's window,
/// µs). A drain that Kafka paces shows it here. (librdkafka's queue latency
/// is left out: it is reckoned from the message timeout, which
/// `--skip-delivered` turns off.)
fn log_batching(statistics: &Statistics) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    for topic in statistics.topics.values() {
        tracing::debug!(
            topic = %topic.topic,
            batches = topic.batchcnt.cnt,
            messages_per_batch = topic.batchcnt.avg,
            bytes_per_batch = topic.batchsize.avg,
            "kafka producer batches"
        );
    }
    for broker in statistics.brokers.values().filter(|b| b.nodeid >= 0) {
        tracing::debug!(
            broker = %broker.nodename,
            produce_requests = broker.req.get("Produce").copied().unwrap_or(0),
            round_trip_us = broker.rtt.as_ref().map_or(0, |w| w.avg),
            "kafka producer latency"
        );
    }
}

/// Limits on unacknowledged work.
#[derive(Debug, Clone, Copy)]
pub struct InFlightLimits {
    pub messages: usize,
    pub bytes: usize,
}

/// The producer plus the tracker of what it has not yet delivered.
pub struct KafkaSink {
    /// Dropped before `producer`, which they keep alive.
    topics: TopicHandles<DeliveryContext>,
    producer: PolledProducer<DeliveryContext>,
    shared: Arc<Shared>,
    max_bytes: u32,
}

impl KafkaSink {
    /// Creates the producer. `acked` is the position the slot is confirmed at.
    pub fn new(
        config: &ClientConfig,
        limits: InFlightLimits,
        acked: Lsn,
    ) -> Result<(Self, watch::Receiver<Progress>), SinkError> {
        Self::with_metrics(config, limits, acked, Arc::default())
    }

    /// [`KafkaSink::new`], recording sends and deliveries into `metrics`.
    pub fn with_metrics(
        config: &ClientConfig,
        limits: InFlightLimits,
        acked: Lsn,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, watch::Receiver<Progress>), SinkError> {
        Self::with_tracker(config, limits, AckTracker::new(acked), metrics)
    }

    /// The producer, its position kept by `tracker` (a transactional one
    /// for [`super::Transactional`]).
    pub(super) fn with_tracker(
        config: &ClientConfig,
        limits: InFlightLimits,
        tracker: AckTracker,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, watch::Receiver<Progress>), SinkError> {
        let max_bytes =
            u32::try_from(limits.bytes.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        let acked = tracker.acked();
        let (progress, progress_rx) = watch::channel(Progress {
            acked,
            failure: None,
        });
        let shared = Arc::new(Shared {
            tracker: Mutex::new(tracker),
            progress,
            messages: Semaphore::new(limits.messages.clamp(1, Semaphore::MAX_PERMITS)),
            bytes: Semaphore::new(max_bytes as usize),
            metrics,
            retries_seen: AtomicU64::new(0),
            bound_waits: AtomicU64::new(0),
            bound_waited_us: AtomicU64::new(0),
            transactional_id: config.get("transactional.id").map(str::to_owned),
        });
        shared.metrics.acknowledged(acked);
        let mut config = config.clone();
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", STATISTICS_INTERVAL_MS);
        }
        let producer = config
            .create_with_context(DeliveryContext {
                shared: Arc::clone(&shared),
                log: KafkaLog::for_config(&config),
            })
            .map_err(|e| SinkError::Config(Box::new(e)))?;
        let producer = PolledProducer::start(producer).map_err(SinkError::Poller)?;
        Ok((
            KafkaSink {
                topics: TopicHandles::new(Arc::clone(producer.shared())),
                producer,
                shared,
                max_bytes,
            },
            progress_rx,
        ))
    }

    /// Registers a transaction whose Begin was read.
    pub fn begin(&self) -> TxnId {
        self.shared.tracker().begin()
    }

    /// Registers the Commit of `txn`: its messages are all handed over.
    pub fn commit(&self, txn: TxnId, end_lsn: Lsn) {
        self.commit_and(txn, end_lsn, false);
    }

    /// [`Self::commit`]; with `in_kafka`, under the same lock, also records
    /// that Kafka committed everything through `end_lsn` (a transaction of
    /// which nothing went into a Kafka transaction).
    pub(super) fn commit_and(&self, txn: TxnId, end_lsn: Lsn, in_kafka: bool) {
        let mut tracker = self.shared.tracker();
        let mut advanced = tracker.commit(txn, end_lsn);
        if in_kafka {
            advanced = tracker.kafka_committed(end_lsn).or(advanced);
        }
        drop(tracker);
        if let Some(acked) = advanced {
            self.shared.publish_acked(acked);
        }
    }

    /// Exactly-once: everything through `lsn` is in a committed Kafka transaction.
    pub(super) fn kafka_committed(&self, lsn: Lsn) {
        let advanced = self.shared.tracker().kafka_committed(lsn);
        if let Some(acked) = advanced {
            self.shared.publish_acked(acked);
        }
    }

    /// Exactly-once: a Kafka transaction failed; nothing of it may be confirmed.
    pub(super) fn transaction_failed(&self) {
        self.shared.tracker().failed(TxnId::from_u64(u64::MAX));
    }

    /// When nothing is in flight and no transaction is open, treats the
    /// server's WAL end as acknowledged (see [`AckTracker::advance_idle`]).
    pub fn advance_idle(&self, wal_end: Lsn) {
        let advanced = self.shared.tracker().advance_idle(wal_end);
        if let Some(acked) = advanced {
            self.shared.publish_acked(acked);
        }
    }

    /// Hands a record to the producer, waiting while the in-flight bound is
    /// reached. Returns once librdkafka has queued it; delivery is reported
    /// through the progress channel.
    pub async fn send(&self, record: EncodedRecord) -> Result<(), SinkError> {
        self.produce(record, true).await
    }

    /// Hands over a record that belongs to no Postgres transaction (the
    /// progress record): its failure fails every transaction in flight.
    pub(super) async fn send_untracked(&self, record: EncodedRecord) -> Result<(), SinkError> {
        self.produce(record, false).await
    }

    async fn produce(&self, record: EncodedRecord, tracked: bool) -> Result<(), SinkError> {
        let byte_permits = u32::try_from(record.size())
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_bytes);
        let waited = self.take_permits(byte_permits).await?;
        let txn = tracked.then_some(record.txn);
        if let Some(txn) = txn {
            self.shared.tracker().sent(txn);
        }
        self.shared.metrics.record_enqueued(u64::from(byte_permits));

        let opaque = Box::new(InFlight {
            txn,
            byte_permits,
            // Handed over after its wait for the bound, if any.
            created_micros: (record.created_micros)
                .map_or_else(now_micros, |created| created.saturating_add(waited)),
        });
        let mut base: BaseRecord<'_, [u8], [u8], Box<InFlight>> =
            BaseRecord::with_opaque_to(&record.topic, opaque);
        // The record's own time, so that librdkafka reads no clock for it.
        if let Some(created) = record.created_micros {
            base = base.timestamp(created.div_euclid(1000));
        }
        // A record without headers gets no list (an empty one would still
        // be a librdkafka allocation); the others' headers all fit in the
        // list's own allocation (vendor/README.md, "Why headers in one
        // block").
        if !record.headers.is_empty() {
            let mut headers = OwnedHeaders::new_sized(record.headers.len(), record.headers_size());
            for (key, value) in &record.headers {
                headers = headers.insert(Header {
                    key,
                    value: Some(&value[..]),
                });
            }
            base = base.headers(headers);
        }
        if let Some(key) = &record.key {
            base = base.key(key.as_slice());
        }
        if let Some(partition) = record.partition {
            base = base.partition(partition);
        }
        if let Some(value) = &record.value {
            base = base.payload(value.as_slice());
        }
        loop {
            match self.topics.send(base) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) => {
                    // librdkafka's own queue is full: wait for deliveries to drain it.
                    base = returned;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((error, _)) => {
                    // Rejected before it was queued, so no callback will come for it.
                    self.shared
                        .tracker()
                        .failed(txn.unwrap_or(TxnId::from_u64(u64::MAX)));
                    self.shared.metrics.record_failed(u64::from(byte_permits));
                    self.shared.messages.add_permits(1);
                    self.shared.bytes.add_permits(byte_permits as usize);
                    let error = delivery_error(&record.topic, error);
                    tracing::error!(topic = %record.topic, %error, "kafka rejected a message");
                    return Err(error);
                }
            }
        }
    }

    /// Takes one message permit and `byte_permits` byte permits, waiting
    /// while the in-flight bound is reached. They are given back by the
    /// delivery callback, not on drop. After a refused login no delivery
    /// report frees a permit before message.timeout.ms, so a wait ends at
    /// the refusal instead (a permit already taken is not given back: the
    /// attempt ends, and the next one makes a new sink). Returns how long
    /// it waited (µs).
    async fn take_permits(&self, byte_permits: u32) -> Result<i64, LoginRefused> {
        let waited = self.take(&self.shared.messages, 1).await?;
        Ok(waited.saturating_add(self.take(&self.shared.bytes, byte_permits).await?))
    }

    /// Takes `n` permits of `semaphore` for good (see [`Self::take_permits`]).
    async fn take(&self, semaphore: &Semaphore, n: u32) -> Result<i64, LoginRefused> {
        // The usual case, without the refusal's watch (or a clock read) on
        // the hot path.
        match semaphore.try_acquire_many(n) {
            Ok(permit) => {
                permit.forget();
                Ok(0)
            }
            Err(_) => {
                let waiting = Instant::now();
                tokio::select! {
                    permit = semaphore.acquire_many(n) => permit.map(|p| p.forget()).unwrap_or(()),
                    refused = self.shared.refusal() => return Err(refused),
                }
                let waited = u64::try_from(waiting.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.shared.bound_waits.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .bound_waited_us
                    .fetch_add(waited, Ordering::Relaxed);
                Ok(i64::try_from(waited).unwrap_or(i64::MAX))
            }
        }
    }

    /// How often a send waited for the in-flight bound, and for how long in all.
    pub fn bound_waits(&self) -> (u64, Duration) {
        (
            self.shared.bound_waits.load(Ordering::Relaxed),
            Duration::from_micros(self.shared.bound_waited_us.load(Ordering::Relaxed)),
        )
    }

    /// The librdkafka producer, for the transactional calls.
    pub(super) fn producer(&self) -> &BaseProducer<DeliveryContext> {
        &self.producer
    }

    /// The refused login, when that is the failure published.
    pub(super) fn refused_login(&self) -> Option<LoginRefused> {
        self.shared.refused_login()
    }

    /// Messages handed to the producer and not yet acknowledged or failed.
    pub fn in_flight(&self) -> usize {
        usize::try_from(self.producer.in_flight_count()).unwrap_or(0)
    }

    /// Everything below this LSN is acknowledged by Kafka.
    pub fn acked(&self) -> Lsn {
        self.shared.tracker().acked()
    }

    /// Whether every registered transaction is committed and acknowledged.
    pub fn is_drained(&self) -> bool {
        self.shared.tracker().is_drained()
    }

    /// Resolves once the broker refuses the producer's login (never, if it
    /// does not): for waits on other Kafka clients, which the refusal would
    /// only reach as a timeout.
    pub async fn login_refused(&self) -> LoginRefused {
        self.shared.refusal().await
    }

    /// Whether a delivery of this attempt has failed.
    pub fn delivery_failed(&self) -> bool {
        self.shared.progress.borrow().failure.is_some()
    }

    /// After a failed delivery: drops every message not yet acknowledged,
    /// queued or in flight, and waits for their (purged) reports. The next
    /// attempt sends them again from the slot, in order. Letting them go out
    /// instead could put a later change ahead of the failed one in its
    /// partition: librdkafka goes on sending a partition's queue after a
    /// message in it timed out, so a broker back within the later messages'
    /// timeout would take them, and the failed one would only follow on the
    /// re-send, out of order.
    pub async fn purge(self: &Arc<Self>, timeout: Duration) -> Result<(), SinkError> {
        let sink = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            sink.producer
                .purge(PurgeConfig::default().queue().inflight());
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(timeout))?;
        self.flush(timeout).await
    }

    /// The end of an attempt's sending: waits for what is in flight, or
    /// after a failed delivery drops it ([`Self::purge`]).
    pub async fn drain(self: &Arc<Self>, timeout: Duration) -> Result<(), SinkError> {
        match self.delivery_failed() {
            true => self.purge(timeout).await,
            false => self.flush(timeout).await,
        }
    }

    /// Waits until nothing is in flight (every message delivered or
    /// failed), polling the count: unlike a librdkafka flush through the
    /// polling thread, no 100 ms step is added to every wait. Ends early
    /// when the broker refuses the producer's login (no message would be
    /// delivered before `message.timeout.ms`).
    pub async fn settled(&self, timeout: Duration) -> Result<(), SinkError> {
        let deadline = Instant::now() + timeout;
        while self.in_flight() > 0 {
            if let Some(refused) = self.shared.refused_login() {
                return Err(refused.into());
            }
            if Instant::now() >= deadline {
                return Err(SinkError::FlushTimeout(timeout));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// Waits for every queued message to be delivered or to fail: what
    /// waits for `linger.ms` is sent at once, then [`Self::settled`]
    /// watches the count. rdkafka's own flush, whose reports the polling
    /// thread serves, returned only in steps of 100 ms: each run's end
    /// took one (BENCHMARKS.md, "The end of a bounded run").
    pub async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        // With no time to wait, librdkafka's flush only wakes the broker
        // threads to send without lingering (the producer takes its reports
        // as events, which this flush does not serve) and returns at once:
        // no blocking thread needed.
        let _ = self.producer.flush(Duration::ZERO);
        self.settled(timeout).await
    }
}

impl Drop for KafkaSink {
    fn drop(&mut self) {
        let (waits, waited) = self.bound_waits();
        tracing::debug!(
            waits,
            waited = ?waited,
            "sends that waited for the in-flight bound in this attempt"
        );
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::message::Headers;

    use super::*;

    fn read(headers: &impl Headers) -> Vec<(String, Option<Vec<u8>>)> {
        headers
            .iter()
            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
            .collect()
    }

    /// librdkafka's headers in one block (vendor/README.md): the headers
    /// the room was sized for, those past its count and one too big for
    /// what is left all read back as inserted, in a copy too, and free.
    #[test]
    fn headers_sized_ahead_read_back_as_inserted_past_their_room_too() {
        let sized: [(&str, Option<&[u8]>); 3] = [
            ("__debezium.context.connectorLogicalName", Some(b"\"app\"")),
            ("empty", Some(b"")),
            ("null", None),
        ];
        let size = sized
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
            .sum();
        let big = vec![7u8; 4096];
        let past: [(&str, Option<&[u8]>); 2] = [("big", Some(&big)), ("last", Some(b"x"))];
        let mut headers = OwnedHeaders::new_sized(sized.len(), size);
        for (key, value) in sized.iter().chain(&past) {
            headers = headers.insert(Header { key, value: *value });
        }
        let expected: Vec<_> = sized
            .iter()
            .chain(&past)
            .map(|(k, v)| (k.to_string(), v.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(read(&headers), expected);
        let copy = headers.clone();
        drop(headers);
        assert_eq!(read(&copy), expected);
        // Too small a room: every header is allocated on its own.
        let mut small = OwnedHeaders::new_sized(1, 0);
        for (key, value) in &sized {
            small = small.insert(Header { key, value: *value });
        }
        assert_eq!(read(&small), expected[..3]);
    }
}
