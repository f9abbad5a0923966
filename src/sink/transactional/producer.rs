//! [`Transactional`]: the [`Delivery`] of `--delivery exactly-once` (the
//! scheme is in [`super`]). It owns what only exactly-once has: the Kafka
//! transaction being written (several whole Postgres transactions, see
//! [`super::BatchLimits`]), the progress record committed with it, and the
//! position below which Kafka already holds every transaction, so a
//! restart drops them instead of writing them twice.
//!
//! Only the pipeline task calls it; the producer's polling thread sees only
//! the [`KafkaSink`] underneath.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use rdkafka::TopicPartitionList;
use tokio::sync::watch;

use super::{EosSettings, IncrementalProgress, ProgressRecord, RecordedServer};
use crate::checkpoint::{AckTracker, TxnId};
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::naming::Names;
use crate::sink::delivery::{next_progress, Delivery, DeliveryFailure, InKafka};
use crate::sink::error::SinkError;
use crate::sink::kafka::{InFlightLimits, KafkaSink};
use crate::sink::login::{self, Interrupted, LoginRefused};
use crate::sink::options::EosOptions;
use crate::sink::record::{EncodedRecord, Progress};

/// The open Kafka transaction.
#[derive(Debug, Default)]
struct Batch {
    opened: Option<Instant>,
    /// Postgres transactions whose Commit was read since it opened.
    transactions: u64,
    bytes: usize,
    /// The end LSN of the last of them.
    last_end: Option<Lsn>,
    /// It holds a consumer's offsets (a kafka-channel signal's), which
    /// commit with it: it commits even without a Postgres transaction.
    offsets: bool,
}

/// How long handing a consumer's offsets to the open transaction may take
/// (a round trip to the transaction coordinator and one to the group's).
const OFFSETS_TIMEOUT: Duration = Duration::from_secs(60);

/// [`Delivery`] in Kafka transactions, each with a progress record.
pub struct Transactional {
    sink: Arc<KafkaSink>,
    progress: watch::Receiver<Progress>,
    settings: EosSettings,
    /// Connection settings, for the progress topic's admin client and consumer.
    client: ClientConfig,
    batch: Batch,
    /// Transactions whose commit starts before this position are in Kafka.
    already_in_kafka: Option<Lsn>,
    /// Written into every progress record ([`ProgressRecord::server`]).
    server: Option<RecordedServer>,
    /// The position of the last progress record committed (or read on
    /// start): what a record of a Kafka transaction without a Postgres
    /// transaction repeats.
    recorded: Lsn,
}

impl Transactional {
    /// The transactional producer: the idempotent `producer`'s settings
    /// plus the transactional.id `names` gives it ([`super::producer_config`]),
    /// batching as `options` say; `acked` is where the slot is confirmed.
    /// [`Delivery::init`] registers it with the coordinator.
    pub fn new(
        producer: &ClientConfig,
        names: &Names,
        options: &EosOptions,
        limits: InFlightLimits,
        acked: Lsn,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SinkError> {
        let config = super::producer_config(producer, names);
        let settings = EosSettings::new(names, options, &config);
        let tracker = AckTracker::transactional(acked, acked);
        let (sink, progress) = KafkaSink::with_tracker(&config, limits, tracker, metrics)?;
        Ok(Transactional {
            sink: Arc::new(sink),
            progress,
            settings,
            client: config,
            batch: Batch::default(),
            already_in_kafka: None,
            server: None,
            recorded: acked,
        })
    }

    /// Records `server` (the PostgreSQL server the stream reads) in every
    /// progress record from now on.
    pub fn with_server(mut self, server: RecordedServer) -> Self {
        self.server = Some(server);
        self
    }

    /// The producer underneath (for its queue gauge).
    pub fn producer(&self) -> &Arc<KafkaSink> {
        &self.sink
    }

    /// The producer's fatal error, as the error the pipeline should stop
    /// with. A fenced producer purges what it had queued, so its delivery
    /// reports only say "purged"; this names the cause.
    fn fatal_error(&self) -> Option<SinkError> {
        let (code, reason) = self.sink.producer().client().fatal_error()?;
        let open_for = self.batch.opened.map(|opened| opened.elapsed());
        let timeout = self.settings.transaction_timeout;
        let error = match code {
            RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced => SinkError::Fenced {
                transactional_id: self.settings.transactional_id.clone(),
            },
            _ => SinkError::Transaction {
                action: "continue after a fatal error",
                transactional_id: self.settings.transactional_id.clone(),
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

    /// Registers the transactional.id with the coordinator, aborting what an
    /// earlier instance left open and fencing it.
    async fn init_transactions(&self) -> Result<(), SinkError> {
        let sink = Arc::clone(&self.sink);
        let timeout = Duration::from_secs(60);
        // librdkafka's init_transactions may be called again after it timed
        // out, and resumes: slices let a refused login stop it early.
        let initialized = tokio::task::spawn_blocking(move || {
            login::in_slices(
                timeout,
                |limit| sink.producer().init_transactions(limit),
                |e| matches!(e, KafkaError::Transaction(e) if e.is_retriable()),
                || sink.refused_login(),
            )
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(timeout))?;
        match initialized {
            Ok(()) => Ok(()),
            Err(Interrupted::Refused(refused)) => Err(refused.into()),
            Err(Interrupted::Failed(e)) => Err(super::transaction_error(
                &self.settings.transactional_id,
                "initialize",
                e,
            )),
        }
    }

    /// The commit of the open Kafka transaction failed with `error`: the
    /// tracker stops, an abortable transaction is aborted, and the error
    /// says why (naming a coordinator's timeout abort as such).
    async fn commit_failed(&mut self, error: KafkaError, opened: Instant) -> SinkError {
        let requires_abort = matches!(&error, KafkaError::Transaction(e) if e.txn_requires_abort());
        let failure = self.fatal_error().unwrap_or_else(|| {
            super::transaction_error(&self.settings.transactional_id, "commit", error)
        });
        self.sink.transaction_failed();
        if requires_abort {
            self.abort_blocking().await;
        }
        let open_for = opened.elapsed();
        let timeout = self.settings.transaction_timeout;
        // The coordinator aborts a transaction open past its timeout and
        // bumps the producer epoch, which librdkafka reports as fenced: the
        // duration tells the two apart.
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
        failure
    }

    async fn abort_blocking(&self) {
        let sink = Arc::clone(&self.sink);
        let aborted = tokio::task::spawn_blocking(move || {
            sink.producer().abort_transaction(Duration::from_secs(30))
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
}

#[async_trait]
impl Delivery for Transactional {
    /// Initializes the transactional producer, then creates the progress
    /// topic if missing and reads this connector's latest progress record;
    /// the tracker treats everything before it as committed.
    async fn init(&mut self) -> Result<InKafka, SinkError> {
        self.init_transactions().await?;
        tracing::info!(transactional_id = %self.settings.transactional_id, "transactional producer initialized");
        super::ensure_progress_topic(&self.client, &self.settings.progress_topic).await?;
        let client = self.client.clone();
        let topic = self.settings.progress_topic.clone();
        let connector = self.settings.connector_name.clone();
        let recorded =
            tokio::task::spawn_blocking(move || super::read_progress(&client, &topic, &connector))
                .await
                .map_err(|_| SinkError::FlushTimeout(Duration::from_secs(60)))??;
        if let Some(record) = &recorded {
            tracing::info!(topic = %self.settings.progress_topic, lsn = %record.lsn, "progress recorded in kafka");
            self.sink.kafka_committed(record.lsn);
            self.recorded = self.recorded.max(record.lsn);
        }
        Ok(InKafka::Recorded(recorded))
    }

    fn skip_before(&mut self, lsn: Lsn) {
        self.already_in_kafka = Some(lsn);
    }

    fn already_delivered(&self, final_lsn: Lsn) -> bool {
        self.already_in_kafka
            .is_some_and(|recorded| final_lsn < recorded)
    }

    fn begin(&mut self) -> TxnId {
        self.sink.begin()
    }

    async fn send(&mut self, record: EncodedRecord) -> Result<(), SinkError> {
        self.open_batch()?;
        self.batch.bytes += record.size();
        match self.sink.send(record).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.fatal_error().unwrap_or(error)),
        }
    }

    fn commit(&mut self, txn: TxnId, end_lsn: Lsn) {
        let in_batch = self.batch.opened.is_some();
        if in_batch {
            self.batch.transactions += 1;
            self.batch.last_end = Some(end_lsn);
        }
        // Nothing of it went to Kafka (skipped, or no published change): no
        // Kafka commit to wait for.
        self.sink.commit_and(txn, end_lsn, !in_batch);
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
        match next_progress(&mut self.progress).await {
            Err(DeliveryFailure::Failed(failure)) => Err(match self.fatal_error() {
                Some(fatal) => DeliveryFailure::Fatal(fatal),
                None => DeliveryFailure::Failed(failure),
            }),
            other => other,
        }
    }

    fn failure(&self) -> Option<Arc<SinkError>> {
        self.progress.borrow().failure.clone()
    }

    fn open_batch(&mut self) -> Result<(), SinkError> {
        if self.batch.opened.is_none() {
            // A local state change in librdkafka: it does not block.
            if let Err(e) = self.sink.producer().begin_transaction() {
                return Err(self.fatal_error().unwrap_or_else(|| {
                    super::transaction_error(&self.settings.transactional_id, "begin", e)
                }));
            }
            self.batch.opened = Some(Instant::now());
        }
        Ok(())
    }

    fn batch_due(&self) -> bool {
        let limits = self.settings.limits;
        self.batch.transactions > 0
            && (self.batch.transactions >= limits.transactions as u64
                || self.batch.bytes >= limits.bytes)
    }

    fn batch_deadline(&self) -> Option<Instant> {
        let opened =
            (self.batch.opened).filter(|_| self.batch.transactions > 0 || self.batch.offsets)?;
        Some(opened + self.settings.limits.time)
    }

    /// Blocks on a worker thread until the broker committed (every record
    /// is delivered first), then lets the tracker confirm up to the end of
    /// the batch's last Postgres transaction. On an abortable error the
    /// transaction is aborted and a retryable error returned: the pipeline
    /// restarts from the slot and the progress record, so nothing is lost
    /// or duplicated.
    async fn commit_batch(
        &mut self,
        snapshot: bool,
        incremental_snapshot: Option<IncrementalProgress>,
    ) -> Result<bool, SinkError> {
        let (opened, transactions, last_end) = match (self.batch.opened, self.batch.last_end) {
            (Some(opened), Some(end)) if self.batch.transactions > 0 => {
                (opened, self.batch.transactions, end)
            }
            // Only a signal's offsets (and its effect on the snapshot's
            // progress): every transaction before is in Kafka already.
            (Some(opened), _) if self.batch.offsets => {
                (opened, 0, self.recorded.max(self.sink.acked()))
            }
            _ => return Ok(false),
        };
        let record = ProgressRecord {
            lsn: last_end,
            snapshot,
            transactions,
            written_at_ms: super::now_ms(),
            incremental_snapshot,
            initial_snapshot: None,
            server: self.server,
        };
        self.commit_with(record, opened).await?;
        self.sink.kafka_committed(last_end);
        self.recorded = self.recorded.max(last_end);
        tracing::trace!(lsn = %last_end, transactions, "kafka transaction committed");
        Ok(true)
    }

    /// Hands `offsets` to the open Kafka transaction
    /// (`send_offsets_to_transaction`, on a worker thread: it waits for
    /// the coordinators): they commit with it.
    async fn commit_offsets_with_batch(
        &mut self,
        offsets: TopicPartitionList,
        group: ConsumerGroupMetadata,
    ) -> Result<bool, SinkError> {
        self.open_batch()?;
        let sink = Arc::clone(&self.sink);
        let sent = tokio::task::spawn_blocking(move || {
            (sink.producer()).send_offsets_to_transaction(&offsets, &group, OFFSETS_TIMEOUT)
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(OFFSETS_TIMEOUT))?;
        if let Err(error) = sent {
            return Err(self.fatal_error().unwrap_or_else(|| {
                super::transaction_error(
                    &self.settings.transactional_id,
                    "take in the signal topic's consumed offset",
                    error,
                )
            }));
        }
        self.batch.offsets = true;
        Ok(true)
    }

    /// Writes the initial snapshot's progress `record` into the open Kafka
    /// transaction (opened if need be) and commits it: the chunks sent so
    /// far and the record that says so, or neither. The snapshot's Postgres
    /// "transaction" stays open in the tracker, so nothing is confirmed.
    async fn checkpoint(
        &mut self,
        _topic: &str,
        _key: &str,
        mut record: ProgressRecord,
        _timeout: Duration,
    ) -> Result<(), SinkError> {
        self.open_batch()?;
        let opened = self.batch.opened.unwrap_or_else(Instant::now);
        record.server = self.server;
        self.commit_with(record, opened).await
    }

    /// Best effort: a new instance's `init_transactions` aborts it as well.
    async fn abort_batch(&mut self) {
        if self.batch.opened.is_some() {
            self.abort_blocking().await;
            self.batch = Batch::default();
        }
    }

    async fn flush(&mut self, timeout: Duration) -> Result<(), SinkError> {
        self.sink.flush(timeout).await
    }

    async fn drain(&mut self, timeout: Duration) -> Result<(), SinkError> {
        self.abort_batch().await;
        self.sink.drain(timeout).await
    }

    async fn login_refused(&self) -> LoginRefused {
        self.sink.login_refused().await
    }
}

impl Transactional {
    /// Sends `record` to the progress topic in the open Kafka transaction
    /// (opened at `opened`) and commits that transaction.
    async fn commit_with(
        &mut self,
        record: ProgressRecord,
        opened: Instant,
    ) -> Result<(), SinkError> {
        let sent = self
            .sink
            .send_untracked(
                record.encoded(&self.settings.progress_topic, &self.settings.connector_name),
            )
            .await;
        if let Err(error) = sent {
            return Err(self.fatal_error().unwrap_or(error));
        }
        let timeout = self.settings.transaction_timeout;
        // rust-rdkafka's commit_transaction first flushes by polling the
        // producer's queue in 100 ms steps, which the sink's polling thread
        // (`sink::poller`) drains first: every commit would take 100 ms more.
        // Waiting here until everything is delivered makes that flush return
        // at once.
        let deadline = Instant::now() + timeout;
        while self.sink.in_flight() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let sink = Arc::clone(&self.sink);
        let committed =
            tokio::task::spawn_blocking(move || sink.producer().commit_transaction(timeout))
                .await
                .map_err(|_| SinkError::FlushTimeout(timeout))?;
        self.batch = Batch::default();
        match committed {
            Ok(()) => Ok(()),
            Err(error) => Err(self.commit_failed(error, opened).await),
        }
    }
}
