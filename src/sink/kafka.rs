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
//! With `--delivery exactly-once` the producer is transactional (see
//! [`super::transactional`]): records are written inside Kafka transactions
//! that group whole Postgres transactions, each committed together with a
//! progress record, and the tracker's position waits for the Kafka commit.
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
    BaseRecord, DeliveryResult, NoCustomPartitioner, Producer, ProducerContext, PurgeConfig,
    ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use tokio::sync::{watch, Semaphore};

use super::error::{delivery_error, SinkError};
use super::login::{self, Interrupted, LoginRefused};
use super::record::{EncodedRecord, Progress};
use super::transactional::{self, EosSettings, IncrementalProgress, ProgressRecord};
use crate::checkpoint::{AckTracker, TxnId};
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
        self.progress.send_modify(|p| p.acked = acked);
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
}

impl ClientContext for DeliveryContext {
    /// librdkafka's client-level errors. A refused login fails every
    /// attempt the same way, so it stops the connector with the fix rather
    /// than being retried like an unreachable broker (see [`super::login`]);
    /// the rest are logged and surface through delivery reports.
    fn error(&self, error: KafkaError, reason: &str) {
        match LoginRefused::from_client_error(&error, reason) {
            Some(refused) => self.shared.publish_failure(refused.into()),
            None => tracing::warn!(%error, reason, "kafka client error"),
        }
    }

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
    /// `None` for the progress record, which belongs to no Postgres transaction.
    txn: Option<TxnId>,
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
                txn.and_then(|txn| self.shared.tracker().delivered(txn))
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

impl Eos {
    fn batch(&self) -> MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
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
    /// Set with `--delivery exactly-once`.
    eos: Option<Eos>,
}

/// The transactional side of the sink.
struct Eos {
    settings: EosSettings,
    /// Connection settings, for the progress topic's admin client and consumer.
    client: ClientConfig,
    /// The Kafka transaction being written. Only the pipeline task touches
    /// it, never across an await.
    batch: Mutex<Batch>,
}

/// The open Kafka transaction.
#[derive(Debug, Default)]
struct Batch {
    opened: Option<Instant>,
    /// Postgres transactions whose Commit was read since it opened.
    transactions: u64,
    bytes: usize,
    /// The end LSN of the last of them.
    last_end: Option<Lsn>,
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

    /// A transactional sink (`--delivery exactly-once`): `config` carries
    /// the transactional.id ([`transactional::producer_config`]). Call
    /// [`KafkaSink::init_transactions`] before sending.
    pub fn transactional(
        config: &ClientConfig,
        limits: InFlightLimits,
        acked: Lsn,
        metrics: Arc<Metrics>,
        settings: EosSettings,
    ) -> Result<(Self, watch::Receiver<Progress>), SinkError> {
        let (mut sink, progress) = Self::with_metrics(config, limits, acked, metrics)?;
        *sink.shared.tracker() = AckTracker::transactional(acked, acked);
        sink.eos = Some(Eos {
            settings,
            client: config.clone(),
            batch: Mutex::new(Batch::default()),
        });
        Ok((sink, progress))
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
            })
            .map_err(|e| SinkError::Config(Box::new(e)))?;
        Ok((
            KafkaSink {
                producer,
                shared,
                max_bytes,
                eos: None,
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
        let mut tracker = self.shared.tracker();
        let mut advanced = tracker.commit(txn, end_lsn);
        if let Some(eos) = &self.eos {
            let mut batch = eos.batch();
            if batch.opened.is_some() {
                batch.transactions += 1;
                batch.last_end = Some(end_lsn);
            } else {
                // Nothing of it went to Kafka (skipped, or no published
                // change): no Kafka commit to wait for.
                advanced = tracker.kafka_committed(end_lsn).or(advanced);
            }
        }
        drop(tracker);
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
        self.produce(record, true).await
    }

    /// Exactly-once: opens a Kafka transaction if none is, so that the
    /// Postgres transaction being read ends up in one, with a progress
    /// record, even if it sends nothing (a signal that changes the
    /// incremental snapshot's progress). Without it such a transaction would
    /// be confirmed to the slot with no progress record saying what it did.
    pub fn open_batch(&self) -> Result<(), SinkError> {
        let Some(eos) = &self.eos else {
            return Ok(());
        };
        let mut batch = eos.batch();
        if batch.opened.is_none() {
            // A local state change in librdkafka: it does not block.
            if let Err(e) = self.producer.begin_transaction() {
                // fatal_error() looks at the batch too.
                drop(batch);
                return Err(self.fatal_error().unwrap_or_else(|| {
                    transactional::transaction_error(&eos.settings.transactional_id, "begin", e)
                }));
            }
            batch.opened = Some(Instant::now());
        }
        Ok(())
    }

    async fn produce(&self, record: EncodedRecord, tracked: bool) -> Result<(), SinkError> {
        if let Some(eos) = &self.eos {
            self.open_batch()?;
            eos.batch().bytes += record.size();
        }
        let byte_permits = u32::try_from(record.size())
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_bytes);
        self.take_permits(byte_permits).await?;
        let txn = tracked.then_some(record.txn);
        if let Some(txn) = txn {
            self.shared.tracker().sent(txn);
        }
        self.shared.metrics.record_enqueued(u64::from(byte_permits));

        let opaque = Box::new(Delivery {
            txn,
            byte_permits,
            enqueued: Instant::now(),
        });
        let mut base: BaseRecord<'_, [u8], [u8], Box<Delivery>> =
            BaseRecord::with_opaque_to(&record.topic, opaque);
        // Most records have none; an empty header list would still be a
        // librdkafka allocation per message.
        if !record.headers.is_empty() {
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
            for (key, value) in &record.headers {
                headers = headers.insert(Header {
                    key,
                    value: Some(value.as_slice()),
                });
            }
            base = base.headers(headers);
        }
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
                    self.shared
                        .tracker()
                        .failed(txn.unwrap_or(TxnId::from_u64(u64::MAX)));
                    self.shared.metrics.record_failed(u64::from(byte_permits));
                    self.shared.messages.add_permits(1);
                    self.shared.bytes.add_permits(byte_permits as usize);
                    let error = self
                        .fatal_error()
                        .unwrap_or_else(|| delivery_error(&record.topic, error));
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
    /// attempt ends, and the next one makes a new sink).
    async fn take_permits(&self, byte_permits: u32) -> Result<(), LoginRefused> {
        self.take(&self.shared.messages, 1).await?;
        self.take(&self.shared.bytes, byte_permits).await
    }

    /// Takes `n` permits of `semaphore` for good (see [`Self::take_permits`]).
    async fn take(&self, semaphore: &Semaphore, n: u32) -> Result<(), LoginRefused> {
        // The usual case, without the refusal's watch on the hot path.
        match semaphore.try_acquire_many(n) {
            Ok(permit) => permit.forget(),
            Err(_) => tokio::select! {
                permit = semaphore.acquire_many(n) => permit.map(|p| p.forget()).unwrap_or(()),
                refused = self.shared.refusal() => return Err(refused),
            },
        }
        Ok(())
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

    /// Exactly-once: the producer's fatal error, as the error the pipeline
    /// should stop with. A fenced producer purges what it had queued, so its
    /// delivery reports only say "purged"; this names the cause.
    pub fn fatal_error(&self) -> Option<SinkError> {
        let eos = self.eos.as_ref()?;
        let (code, reason) = self.producer.client().fatal_error()?;
        let open_for = eos.batch().opened.map(|opened| opened.elapsed());
        let timeout = eos.settings.transaction_timeout;
        let error = match code {
            RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced => SinkError::Fenced {
                transactional_id: eos.settings.transactional_id.clone(),
            },
            _ => SinkError::Transaction {
                action: "continue after a fatal error",
                transactional_id: eos.settings.transactional_id.clone(),
                error: Box::new(KafkaError::Global(code)),
                retryable: true,
            },
        };
        tracing::debug!(%reason, "fatal producer error");
        // The coordinator aborts a transaction open past its timeout by
        // bumping the epoch, which looks like fencing from here.
        Some(match open_for {
            Some(open_for) if open_for >= timeout => SinkError::TransactionTooLong {
                open_for,
                timeout,
                error: Box::new(error),
            },
            _ => error,
        })
    }

    /// Whether this sink writes Kafka transactions (`--delivery exactly-once`).
    pub fn is_transactional(&self) -> bool {
        self.eos.is_some()
    }

    /// Registers the transactional.id with the coordinator: aborts what an
    /// earlier instance left open and fences it. Then creates the progress
    /// topic if missing and reads this connector's latest progress record;
    /// the tracker treats everything before it as committed. Returns the record.
    pub async fn init_transactions(self: &Arc<Self>) -> Result<Option<ProgressRecord>, SinkError> {
        let Some(eos) = &self.eos else {
            return Ok(None);
        };
        let sink = Arc::clone(self);
        let timeout = Duration::from_secs(60);
        // librdkafka's init_transactions may be called again after it timed
        // out, and resumes: slices let a refused login stop it early.
        let initialized = tokio::task::spawn_blocking(move || {
            login::in_slices(
                timeout,
                |limit| sink.producer.init_transactions(limit),
                |e| matches!(e, KafkaError::Transaction(e) if e.is_retriable()),
                || sink.shared.refused_login(),
            )
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(timeout))?;
        match initialized {
            Ok(()) => {}
            Err(Interrupted::Refused(refused)) => return Err(refused.into()),
            Err(Interrupted::Failed(e)) => {
                return Err(transactional::transaction_error(
                    &eos.settings.transactional_id,
                    "initialize",
                    e,
                ))
            }
        }
        tracing::info!(transactional_id = %eos.settings.transactional_id, "transactional producer initialized");
        transactional::ensure_progress_topic(&eos.client, &eos.settings.progress_topic).await?;
        let client = eos.client.clone();
        let topic = eos.settings.progress_topic.clone();
        let connector = eos.settings.connector_name.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            transactional::read_progress(&client, &topic, &connector)
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(timeout))??;
        if let Some(record) = &recorded {
            tracing::info!(topic = %eos.settings.progress_topic, lsn = %record.lsn, "progress recorded in kafka");
            let advanced = self.shared.tracker().kafka_committed(record.lsn);
            if let Some(acked) = advanced {
                self.shared.publish_acked(acked);
            }
        }
        Ok(recorded)
    }

    /// Whether the open Kafka transaction reached its transaction or byte
    /// bound. Only meaningful between Postgres transactions.
    pub fn batch_due(&self) -> bool {
        self.eos.as_ref().is_some_and(|eos| {
            let batch = eos.batch();
            let limits = eos.settings.limits;
            batch.transactions > 0
                && (batch.transactions >= limits.transactions as u64 || batch.bytes >= limits.bytes)
        })
    }

    /// When the open Kafka transaction, holding at least one whole Postgres
    /// transaction, is due by `--eos-max-batch-time`.
    pub fn batch_deadline(&self) -> Option<Instant> {
        let eos = self.eos.as_ref()?;
        let batch = eos.batch();
        let opened = batch.opened.filter(|_| batch.transactions > 0)?;
        Some(opened + eos.settings.limits.time)
    }

    /// Commits the open Kafka transaction with a progress record at the end
    /// of its last Postgres transaction (`snapshot`: it holds the initial
    /// snapshot; `incremental_snapshot`: the incremental snapshot's progress
    /// after that transaction), then lets the tracker confirm up to there.
    /// Call it only between Postgres transactions. Blocks on a worker thread
    /// until the broker committed (every record is delivered first).
    ///
    /// On an abortable error the transaction is aborted and a retryable
    /// error returned: the pipeline restarts from the slot and the progress
    /// record, so nothing is lost or duplicated.
    pub async fn commit_batch(
        self: &Arc<Self>,
        snapshot: bool,
        incremental_snapshot: Option<IncrementalProgress>,
    ) -> Result<(), SinkError> {
        let Some(eos) = &self.eos else {
            return Ok(());
        };
        let (opened, transactions, last_end) = {
            let batch = eos.batch();
            match (batch.opened, batch.last_end) {
                (Some(opened), Some(end)) if batch.transactions > 0 => {
                    (opened, batch.transactions, end)
                }
                _ => return Ok(()),
            }
        };
        let record = ProgressRecord {
            lsn: last_end,
            snapshot,
            transactions,
            written_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            incremental_snapshot,
        };
        let value = serde_json::to_vec(&record).unwrap_or_default();
        self.produce(
            EncodedRecord {
                topic: eos.settings.progress_topic.as_str().into(),
                key: Some(eos.settings.connector_name.as_bytes().to_vec()),
                value: Some(value),
                headers: Vec::new(),
                txn: TxnId::from_u64(u64::MAX),
            },
            false,
        )
        .await?;
        let timeout = eos.settings.transaction_timeout;
        // rust-rdkafka's commit_transaction first flushes by polling the
        // producer's queue in 100 ms steps, which the polling thread of the
        // ThreadedProducer drains first: every commit would take 100 ms more.
        // Waiting here until everything is delivered makes that flush return
        // at once.
        let deadline = Instant::now() + timeout;
        while self.producer.in_flight_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let sink = Arc::clone(self);
        let committed =
            tokio::task::spawn_blocking(move || sink.producer.commit_transaction(timeout))
                .await
                .map_err(|_| SinkError::FlushTimeout(timeout))?;
        *eos.batch() = Batch::default();
        match committed {
            Ok(()) => {
                let advanced = self.shared.tracker().kafka_committed(last_end);
                if let Some(acked) = advanced {
                    self.shared.publish_acked(acked);
                }
                tracing::trace!(lsn = %last_end, transactions, "kafka transaction committed");
                Ok(())
            }
            Err(error) => {
                let requires_abort =
                    matches!(&error, KafkaError::Transaction(e) if e.txn_requires_abort());
                let failure = self.fatal_error().unwrap_or_else(|| {
                    transactional::transaction_error(
                        &eos.settings.transactional_id,
                        "commit",
                        error,
                    )
                });
                self.shared.tracker().failed(TxnId::from_u64(u64::MAX));
                if requires_abort {
                    self.abort_blocking().await;
                }
                let open_for = opened.elapsed();
                // The coordinator aborts a transaction open past its timeout
                // and bumps the producer epoch, which librdkafka reports as
                // fenced: the duration tells the two apart.
                let failure = if open_for >= timeout {
                    SinkError::TransactionTooLong {
                        open_for,
                        timeout,
                        error: Box::new(failure),
                    }
                } else {
                    failure
                };
                tracing::error!(error = %failure, "kafka transaction not committed; the slot stays at the last committed one");
                Err(failure)
            }
        }
    }

    /// Aborts the open Kafka transaction, if any (a stop in the middle of a
    /// Postgres transaction, or after a failure). Best effort: a new
    /// instance's `init_transactions` aborts it as well.
    pub async fn abort_batch(self: &Arc<Self>) {
        let Some(eos) = &self.eos else { return };
        let open = eos.batch().opened.is_some();
        if open {
            self.abort_blocking().await;
            *eos.batch() = Batch::default();
        }
    }

    async fn abort_blocking(self: &Arc<Self>) {
        let sink = Arc::clone(self);
        let aborted = tokio::task::spawn_blocking(move || {
            sink.producer.abort_transaction(Duration::from_secs(30))
        })
        .await;
        match aborted {
            Ok(Ok(())) => {
                tracing::warn!("kafka transaction aborted; read_committed consumers never see it")
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "aborting the kafka transaction failed; the next instance's start aborts it")
            }
            Err(_) => {}
        }
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

    /// Waits, off the async runtime, for every queued message to be delivered
    /// or to fail; after a refused login, at most a slice of `timeout` (no
    /// message would be delivered before `message.timeout.ms`).
    pub async fn flush(self: &Arc<Self>, timeout: Duration) -> Result<(), SinkError> {
        let sink = Arc::clone(self);
        let flushed = tokio::task::spawn_blocking(move || {
            login::in_slices(
                timeout,
                |limit| sink.producer.flush(limit),
                |_| true,
                || sink.shared.refused_login(),
            )
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(timeout))?;
        match flushed {
            Ok(()) => Ok(()),
            Err(Interrupted::Refused(refused)) => Err(refused.into()),
            Err(Interrupted::Failed(_)) => Err(SinkError::FlushTimeout(timeout)),
        }
    }
}
