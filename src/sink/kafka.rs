//! The Kafka producer and its delivery tracking.
//!
//! Records are handed to librdkafka without blocking the async runtime
//! (`ThreadedProducer::send` only enqueues). librdkafka calls
//! [`DeliveryContext::delivery`] on its polling thread once the broker has
//! acknowledged a message (`acks=all`, idempotent producer, so retries keep
//! per-partition order and never duplicate) or it has given up on it. That
//! callback is the only place that feeds acknowledgements into the
//! [`AckTracker`]; the pipeline reads the resulting position from a watch
//! channel and is the only place that confirms it to Postgres.
//!
//! In-flight work is bounded by a semaphore of message permits and one of
//! byte permits, released by the callback. A single record larger than the
//! byte bound takes the whole bound, so it still flows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DeliveryResult, NoCustomPartitioner, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use tokio::sync::{watch, Semaphore};

use crate::checkpoint::{AckTracker, TxnId};
use crate::lsn::Lsn;
use crate::metrics::Metrics;

/// One message ready for Kafka, tagged with the transaction it belongs to.
#[derive(Debug, Clone)]
pub struct EncodedRecord {
    pub topic: Arc<str>,
    /// `None` for a null key (tables without a primary key or replica identity).
    pub key: Option<Vec<u8>>,
    /// `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(&'static str, Vec<u8>)>,
    pub txn: TxnId,
}

impl EncodedRecord {
    fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }
}

/// What the delivery side reports to the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Everything below this LSN is acknowledged by Kafka.
    pub acked: Lsn,
    /// The first delivery that failed for good, if any.
    pub failure: Option<Arc<SinkError>>,
}

/// Errors producing to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("invalid Kafka producer configuration; check --bootstrap-servers and --kafka-property values")]
    Config(#[source] Box<KafkaError>),
    #[error("Kafka did not accept a message for topic {topic:?}: {reason}")]
    Delivery {
        topic: String,
        reason: String,
        #[source]
        error: Box<KafkaError>,
        retryable: bool,
    },
    #[error("timed out after {0:?} waiting for Kafka to acknowledge in-flight messages")]
    FlushTimeout(Duration),
}

impl SinkError {
    /// Whether restarting from the slot may succeed (the broker was away or
    /// slow) rather than failing the same way again (the message is invalid
    /// for the topic).
    pub fn is_retryable(&self) -> bool {
        match self {
            SinkError::Config(_) => false,
            SinkError::Delivery { retryable, .. } => *retryable,
            SinkError::FlushTimeout(_) => true,
        }
    }
}

fn delivery_error(topic: &str, error: KafkaError) -> SinkError {
    let code = error.rdkafka_error_code();
    let (retryable, reason) = match code {
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => (
            false,
            "the message is larger than the topic or producer allows; raise the topic's \
             max.message.bytes and --kafka-property message.max.bytes, or exclude the column"
                .to_owned(),
        ),
        Some(
            RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed,
        ) => (
            false,
            "the producer is not authorized to write this topic; grant WRITE (and CREATE, for \
             auto-created topics) on it"
                .to_owned(),
        ),
        Some(RDKafkaErrorCode::InvalidTopic | RDKafkaErrorCode::UnknownTopic) => (
            false,
            "the topic does not exist and cannot be created; create it or enable \
             auto.create.topics.enable on the broker"
                .to_owned(),
        ),
        _ => (true, error.to_string()),
    };
    SinkError::Delivery {
        topic: topic.to_owned(),
        reason,
        error: Box::new(error),
        retryable,
    }
}

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
}

impl Shared {
    fn tracker(&self) -> MutexGuard<'_, AckTracker> {
        // The tracker's state stays consistent under a panic elsewhere (every
        // method is a few counter updates), so a poisoned lock is still usable.
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish_acked(&self, acked: Lsn) {
        self.metrics.acknowledged(acked);
        self.progress.send_modify(|p| p.acked = acked);
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
}

impl ClientContext for DeliveryContext {
    /// librdkafka's statistics (every [`STATISTICS_INTERVAL_MS`]): counts the
    /// produce requests retried since the previous report.
    fn stats(&self, statistics: Statistics) {
        let total: u64 = statistics.brokers.values().map(|b| b.txretries).sum();
        let before = self.shared.retries_seen.swap(total, Ordering::Relaxed);
        self.shared
            .metrics
            .producer_retried(total.saturating_sub(before));
    }
}

/// What the delivery callback needs back for each message.
#[derive(Debug)]
pub struct Delivery {
    txn: TxnId,
    byte_permits: u32,
    enqueued: Instant,
}

impl ProducerContext<NoCustomPartitioner> for DeliveryContext {
    type DeliveryOpaque = Box<Delivery>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<Delivery>) {
        let Delivery {
            txn,
            byte_permits,
            enqueued,
        } = *opaque;
        let outcome = match result {
            Ok(_) => {
                self.shared
                    .metrics
                    .record_delivered(u64::from(byte_permits), enqueued.elapsed());
                self.shared.tracker().delivered(txn).map(Ok)
            }
            Err((error, message)) => {
                self.shared.metrics.record_failed(u64::from(byte_permits));
                self.shared.tracker().failed(txn);
                let topic = rdkafka::Message::topic(message).to_owned();
                // One failure stops the attempt; the rest of what was in flight
                // usually fails the same way (a timeout, a purge), so only the
                // first is worth an error line.
                if self.shared.progress.borrow().failure.is_none() {
                    tracing::error!(topic, %error, "kafka delivery failed; the slot will not be confirmed past this transaction");
                } else {
                    tracing::debug!(topic, %error, "kafka delivery failed");
                }
                Some(Err(delivery_error(&topic, error.clone())))
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

/// Limits on unacknowledged work.
#[derive(Debug, Clone, Copy)]
pub struct InFlightLimits {
    pub messages: usize,
    pub bytes: usize,
}

/// The producer plus the tracker of what it has not yet delivered.
pub struct KafkaSink {
    producer: ThreadedProducer<DeliveryContext>,
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
        let max_bytes =
            u32::try_from(limits.bytes.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        let (progress, progress_rx) = watch::channel(Progress {
            acked,
            failure: None,
        });
        let shared = Arc::new(Shared {
            tracker: Mutex::new(AckTracker::new(acked)),
            progress,
            messages: Semaphore::new(limits.messages.clamp(1, Semaphore::MAX_PERMITS)),
            bytes: Semaphore::new(max_bytes as usize),
            metrics,
            retries_seen: AtomicU64::new(0),
        });
        shared.metrics.acknowledged(acked);
        let mut config = config.clone();
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", STATISTICS_INTERVAL_MS);
        }
        let producer = config
            .create_with_context(DeliveryContext {
                shared: Arc::clone(&shared),
            })
            .map_err(|e| SinkError::Config(Box::new(e)))?;
        Ok((
            KafkaSink {
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
        let advanced = self.shared.tracker().commit(txn, end_lsn);
        if let Some(acked) = advanced {
            self.shared.publish_acked(acked);
        }
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
        let byte_permits = u32::try_from(record.size())
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_bytes);
        // Permits are given back by the delivery callback, not on drop.
        if let Ok(p) = self.shared.messages.acquire().await {
            p.forget();
        }
        if let Ok(p) = self.shared.bytes.acquire_many(byte_permits).await {
            p.forget();
        }
        self.shared.tracker().sent(record.txn);
        self.shared.metrics.record_enqueued(u64::from(byte_permits));

        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value.as_slice()),
            });
        }
        let opaque = Box::new(Delivery {
            txn: record.txn,
            byte_permits,
            enqueued: Instant::now(),
        });
        let mut base: BaseRecord<'_, [u8], [u8], Box<Delivery>> =
            BaseRecord::with_opaque_to(&record.topic, opaque).headers(headers);
        if let Some(key) = &record.key {
            base = base.key(key.as_slice());
        }
        if let Some(value) = &record.value {
            base = base.payload(value.as_slice());
        }
        loop {
            match self.producer.send(base) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) => {
                    // librdkafka's own queue is full: wait for deliveries to drain it.
                    base = returned;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((error, _)) => {
                    // Rejected before it was queued, so no callback will come for it.
                    self.shared.tracker().failed(record.txn);
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

    /// Waits, off the async runtime, for every queued message to be delivered
    /// or to fail.
    pub async fn flush(self: &Arc<Self>, timeout: Duration) -> Result<(), SinkError> {
        let sink = Arc::clone(self);
        tokio::task::spawn_blocking(move || sink.producer.flush(timeout))
            .await
            .map_err(|_| SinkError::FlushTimeout(timeout))?
            .map_err(|_| SinkError::FlushTimeout(timeout))
    }
}
