//! One attempt of the pipeline: the replication connection, the read loop,
//! and the translation of each pgoutput message into Kafka records.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::incremental::Incremental;
use super::kafka_signals::next_signal;
use super::{sleep_until_some, PipelineError, RunSummary, Shutdown, StopReason};
use crate::checkpoint::TxnId;
use crate::config::{CaughtUp, RunConfig};
use crate::encode::Encoder;
use crate::event::envelope::ConnectorInfo;
use crate::event::record::Record;
use crate::event::SourceOrigin;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::sink::topics::TopicCreator;
use crate::sink::{Delivery, SinkError};
use crate::source::pgoutput::{self, Begin, Commit, Form, LogicalMessage};
use crate::source::relation::RelationCache;
use crate::source::replication::{CopyData, ReplicationStream};
use crate::source::setup;
use crate::source::types::TypeRegistry;
use crate::takeover::tails::TxnPlace;
use crate::takeover::{Resume, Through, TxnVerdict};
use crate::transform::regex_router::TopicRenames;
use crate::transform::Transforms;

mod events;
mod metadata;
mod spool;
mod streamed;
#[cfg(test)]
mod tests;
mod writer;

pub use metadata::HeartbeatError;
pub use spool::SpoolError;
pub use streamed::StreamedError;
pub(super) use writer::ChangeWriter;

/// The transaction being read (between Begin and Commit).
struct OpenTxn {
    id: TxnId,
    xid: u32,
    commit_time_micros: i64,
    /// Kafka already holds it (exactly-once restarts): its changes are dropped.
    delivered: bool,
    /// Where a subscriber applied it from (pgoutput's Origin message, sent
    /// after Begin), for `source.origin`.
    origin: Option<SourceOrigin>,
    /// `--takeover-debezium`: the changes Debezium produced of it.
    debezium_through: Option<Through>,
    /// `--takeover-debezium`: its place in the stream, to compare with
    /// Debezium's last records in Kafka.
    debezium_place: Option<TxnPlace>,
}

pub(super) use crate::event::now_micros;

pub(super) struct Stream<'a> {
    pub(super) config: &'a RunConfig,
    pub(super) sql: tokio_postgres::Client,
    pub(super) relations: RelationCache,
    encoder: Encoder,
    transforms: Transforms,
    /// `--topic-rename` (RegexRouter), applied to every record as it is encoded.
    renames: TopicRenames,
    /// Where records go, and what Kafka acknowledged.
    pub(super) delivery: Box<dyn Delivery>,
    pub(super) metrics: Arc<Metrics>,
    /// Creates topics on first use (`--topic-partitions` and friends).
    topics: Option<TopicCreator>,
    txn: Option<OpenTxn>,
    /// Streamed in-progress transactions (`--stream-in-progress`); `None`
    /// with protocol 1.
    streamed: Option<streamed::Streamed>,
    message_topic: Arc<str>,
    /// Where the last transaction (or non-transactional message) ended:
    /// `source.sequence`'s first element, Debezium's `lsn_commit`.
    pub(super) last_commit_lsn: Option<Lsn>,
    /// The commit time of the last transaction read, which Debezium repeats
    /// as the `source.ts_*` of a non-transactional message (it has none).
    last_commit_time_micros: Option<i64>,
    pub(super) summary: &'a mut RunSummary,
    /// `--stop-when-caught-up`: the server's WAL position when the run
    /// began. `start-lsn` stops there; `idle` may stop only past it, so
    /// neither calls itself caught up before reading what was committed
    /// before it started.
    pub(super) target: Option<Lsn>,
    /// Everything before this position has been read: the end of the last
    /// commit, or the WAL end of a keepalive that arrived between transactions.
    pub(super) received: Lsn,
    /// The WAL end of the last keepalive that arrived between transactions:
    /// where a caught-up, drained stop may confirm to.
    idle_wal_end: Lsn,
    last_activity: Instant,
    /// Transaction metadata and heartbeats.
    metadata: metadata::Metadata,
    /// Incremental snapshots, with `--signal-data-collection`.
    pub(super) incremental: Option<Incremental>,
    /// Snapshot notifications (`--notification-enabled-channels`).
    pub(super) notifier: crate::notification::Notifier,
    /// Debezium's kafka signal channel (`--signal-enabled-channels kafka`),
    /// from the start of [`Stream::stream`].
    pub(super) kafka_signals: Option<super::kafka_signals::KafkaSignals>,
    /// Ends the wait for Kafka's acknowledgements at the end of the attempt
    /// when forced (the binary's second SIGINT/SIGTERM).
    pub(super) shutdown: Option<Shutdown>,
    /// `--takeover-debezium`: what Debezium produced, left out.
    pub(super) takeover: Option<Resume>,
    /// The form values are read in: binary when the stream reads them so
    /// ([`crate::source::binary_mode::choose`]), and then the initial
    /// snapshot's page ranges too (`COPY ... (FORMAT binary)`).
    pub(super) values_form: Form,
}

impl<'a> Stream<'a> {
    /// The attempt's state before its first message: everything read
    /// before `start` is acknowledged.
    pub(super) async fn new(
        config: &'a RunConfig,
        sql: tokio_postgres::Client,
        types: TypeRegistry,
        delivery: Box<dyn Delivery>,
        summary: &'a mut RunSummary,
        start: Lsn,
        metrics: &Arc<Metrics>,
    ) -> Result<Self, PipelineError> {
        let (selection, router) = config.selection()?;
        let info = ConnectorInfo {
            name: config.topic_prefix.as_str().into(),
            db: config.pg_url.dbname().into(),
            run_id: crate::event::context::new_run_id(),
        };
        let mut topics = TopicCreator::new(&config.producer_config(), &config.topics)?;
        if let (Some(creator), Some(topic)) = (topics.as_mut(), config.notifications.sink_topic()) {
            // Created with the data topics' layout, not left to the broker.
            creator.ensure(&Arc::from(topic)).await?;
        }
        Ok(Stream {
            relations: RelationCache::new(&config.topic_prefix, config.value_options(), types)
                .with_selection(Arc::new(selection), Arc::new(router.clone()))
                .with_mappers(Arc::new(config.column_mappers()?))
                .with_schema_names(config.schema_name_adjustment_mode),
            topics,
            transforms: Transforms::new(&config.transform, info.clone()),
            renames: config.topic_renames()?,
            encoder: Encoder::new(&config.encode, info)
                .await?
                .with_metrics(Arc::clone(metrics)),
            delivery,
            metrics: Arc::clone(metrics),
            txn: None,
            streamed: streamed::Streamed::for_config(config, metrics)?,
            message_topic: router.message_topic().into(),
            last_commit_lsn: None,
            last_commit_time_micros: None,
            summary,
            target: None,
            received: start,
            idle_wal_end: start,
            last_activity: Instant::now(),
            metadata: metadata::Metadata::new(&config.metadata, &config.names()),
            incremental: Incremental::start(config, metrics).await?,
            notifier: crate::notification::Notifier::new(config, metrics)?,
            kafka_signals: None,
            shutdown: None,
            takeover: None,
            values_form: Form::Text,
            sql,
            config,
        })
    }
}

/// `record` on the topic `--topic-rename` (RegexRouter) gives it.
pub(super) fn renamed<'e>(renames: &TopicRenames, mut record: Record<'e>) -> Record<'e> {
    record.topic = renames.apply(record.topic);
    record
}

/// The replication client's status cadence: at most [`FEEDBACK_TICK`]. The
/// confirmed position itself is handed to the client only every
/// `--status-interval` ([`Stream::stream`]); the short cadence lets a
/// position handed over reach the server soon after, which is what a
/// stopping run waits for before it ends the stream.
pub(super) fn client_status_interval(config: &RunConfig) -> Duration {
    config.status_interval.min(FEEDBACK_TICK)
}

/// See [`client_status_interval`].
const FEEDBACK_TICK: Duration = Duration::from_millis(100);

/// How long the end of an attempt waits for the slot to show the position
/// it confirmed last (see [`Stream::slot_confirmed`]).
const SLOT_CONFIRM_WAIT: Duration = Duration::from_secs(5);

/// Events handled back to back inside a transaction before the stream loop
/// looks at its other branches again (see [`Stream::handle_burst`]).
const RECV_BURST: usize = 256;

impl Stream<'_> {
    /// Reads until `stop` resolves, the stream catches up (bounded runs), or
    /// an error; returns why it stopped.
    pub(super) async fn stream(
        &mut self,
        client: &mut ReplicationStream,
        mut stop: std::pin::Pin<&mut impl Future<Output = StopReason>>,
    ) -> Result<StopReason, PipelineError> {
        let idle_mode = self.config.stop_when_caught_up == Some(CaughtUp::Idle);
        // A stop requested mid-transaction waits for its Commit (up to the
        // shutdown timeout), so a graceful stop leaves nothing half sent to
        // be repeated by the next run.
        let mut stopping: Option<(StopReason, Instant)> = None;
        // The acknowledged position goes to the client at most once per
        // `--status-interval` (the client reports every FEEDBACK_TICK).
        let mut reported = Instant::now();
        let mut unreported: Option<Lsn> = None;
        // Only once the delivery is initialized: under exactly-once a
        // crashed instance's offsets pending in its open transaction read
        // only once `init_transactions` aborted it (kafka_signals.rs).
        if self.kafka_signals.is_none() {
            self.kafka_signals = super::kafka_signals::KafkaSignals::start(self.config).await?;
        }
        // Idle is measured from here: start-up (a snapshot, exactly-once's
        // progress read) is not time the stream was idle.
        self.last_activity = Instant::now();
        loop {
            if let Some((reason, deadline)) = stopping {
                if self.txn.is_none() || Instant::now() >= deadline {
                    tracing::info!(?reason, "stopping; draining in-flight messages");
                    return Ok(reason);
                }
            }
            self.commit_acknowledged_signals();
            // A step may leave another due at once (a read-only chunk read
            // where the stream already is goes now): a few in a row, rather
            // than waiting for the next message.
            for _ in 0..3 {
                let due = stopping.is_none()
                    && self.txn.is_none()
                    && (self.incremental.as_ref())
                        .is_some_and(|i| i.wants_step(self.delivery.acked(), self.received));
                if !due {
                    break;
                }
                self.incremental_step().await?;
            }
            if self.is_caught_up() {
                tracing::info!(lsn = %self.received, "caught up; draining in-flight messages");
                return Ok(StopReason::CaughtUp);
            }
            let idle_deadline =
                tokio::time::Instant::from_std(self.last_activity + self.config.idle_timeout);
            let heartbeat = self.metadata.heartbeat_deadline();
            let batch_deadline = self
                .delivery
                .batch_deadline()
                .filter(|_| self.txn.is_none())
                .map(tokio::time::Instant::from_std);
            let report_due = unreported
                .map(|_| tokio::time::Instant::from_std(reported + self.config.status_interval));
            // A read-only chunk waiting for its high mark asks the server
            // for a keepalive (incremental/reply.rs).
            let reply_due = (self.incremental.as_mut())
                .filter(|_| self.txn.is_none() && stopping.is_none())
                .and_then(|i| i.reply_due(self.received))
                .map(tokio::time::Instant::from_std);
            tokio::select! {
                biased;
                reason = &mut stop, if stopping.is_none() => {
                    if self.txn.is_some() {
                        tracing::info!(?reason, "stop requested; finishing the current transaction first");
                    }
                    stopping = Some((reason, Instant::now() + self.config.shutdown_timeout));
                }
                () = sleep_until_some(batch_deadline), if batch_deadline.is_some() => {
                    self.commit_kafka_batch(false).await?;
                }
                () = tokio::time::sleep_until(idle_deadline), if idle_mode && self.txn.is_none() && self.passed_target() => {
                    tracing::info!(idle_for = ?self.config.idle_timeout, "stream idle; draining in-flight messages");
                    return Ok(StopReason::CaughtUp);
                }
                () = sleep_until_some(heartbeat), if heartbeat.is_some() && self.txn.is_none() && stopping.is_none() => {
                    self.send_heartbeat().await?;
                }
                signal = next_signal(self.kafka_signals.as_ref()), if self.txn.is_none() && stopping.is_none() => {
                    self.kafka_signal(signal).await?;
                }
                acked = self.delivery.acked_changed() => {
                    let acked = acked?;
                    if reported.elapsed() >= self.config.status_interval {
                        client.update_applied_lsn(acked);
                        tracing::trace!(lsn = %acked, "confirming");
                        (reported, unreported) = (Instant::now(), None);
                    } else {
                        unreported = Some(acked);
                    }
                }
                () = sleep_until_some(report_due), if report_due.is_some() => {
                    if let Some(lsn) = unreported.take() {
                        client.update_applied_lsn(lsn);
                        tracing::trace!(%lsn, "confirming");
                        reported = Instant::now();
                    }
                }
                () = sleep_until_some(reply_due), if reply_due.is_some() => {
                    client.request_reply();
                    if let Some(incremental) = self.incremental.as_mut() {
                        incremental.reply_requested();
                    }
                }
                event = client.recv() => {
                    match event.map_err(PipelineError::Stream)? {
                        Some(event) => self.handle_burst(client, event).await?,
                        None => return Err(PipelineError::StreamEnded),
                    }
                }
            }
        }
    }

    /// `--stop-when-caught-up start-lsn`: everything up to the target was read.
    fn is_caught_up(&self) -> bool {
        self.config.stop_when_caught_up == Some(CaughtUp::StartLsn)
            && self.txn.is_none()
            && self.passed_target()
    }

    /// Everything committed before the run began was read (no target: no
    /// bounded run, nothing to wait for).
    fn passed_target(&self) -> bool {
        self.target.is_none_or(|target| self.received >= target)
    }

    /// Handles `first`, then, while a transaction is open, the events the
    /// client already holds (up to [`RECV_BURST`]) without a trip through the
    /// `select!` in [`Self::stream`] for each: inside a transaction its other
    /// branches wait for the Commit anyway, except a stop request and a
    /// delivery failure, which now wait at most one burst.
    async fn handle_burst(
        &mut self,
        client: &mut ReplicationStream,
        first: CopyData,
    ) -> Result<(), PipelineError> {
        let mut event = first;
        let mut started = Instant::now();
        let mut handled = 0;
        loop {
            self.handle(event, started).await?;
            handled += 1;
            // One clock read per event: it ends this one and starts the next.
            let now = Instant::now();
            self.metrics.handled(now - started);
            started = now;
            // Take the next event only to handle it: one taken and dropped
            // here would be a change lost. A stream block bursts like a
            // transaction: it only goes to the spool.
            if (self.txn.is_none() && self.stream_block().is_none()) || handled == RECV_BURST {
                return Ok(());
            }
            match client.try_recv() {
                Some(next) => event = next,
                None => return Ok(()),
            }
        }
    }

    /// Handles one message of the stream, received at `now`. Every
    /// XLogData payload goes through the one pgoutput decoder.
    async fn handle(&mut self, event: CopyData, now: Instant) -> Result<(), PipelineError> {
        let xlog = match event {
            CopyData::Keepalive(keepalive) => {
                self.metrics.server_message(now, true);
                self.keepalive(keepalive.wal_end);
                return Ok(());
            }
            CopyData::XLogData(xlog) => xlog,
        };
        self.metrics.server_message(now, false);
        self.last_activity = now;
        let lsn = xlog.wal_start;
        if let Some(xid) = self.stream_block() {
            let entry = pgoutput::stream_block_entry(&xlog.data, lsn)?;
            return Ok(self.block_message(xid, entry, &xlog.data, lsn)?);
        }
        match pgoutput::decode(&xlog.data, lsn)? {
            LogicalMessage::Begin(begin) => self.begin(begin).await,
            LogicalMessage::Commit(commit) => self.commit(commit).await,
            LogicalMessage::StreamStart(start) => Ok(self.stream_start(start)?),
            LogicalMessage::StreamStop => Ok(self.stray_stream_stop()?),
            LogicalMessage::StreamCommit(commit) => self.stream_commit(commit).await,
            LogicalMessage::StreamAbort(abort) => Ok(self.stream_abort(abort)?),
            message => self.handle_message(message, lsn).await,
        }
    }

    /// A transaction starts: it is tracked until its Commit.
    async fn begin(&mut self, begin: Begin) -> Result<(), PipelineError> {
        debug_assert!(self.txn.is_none(), "Begin inside a transaction");
        let mut delivered = self.delivery.already_delivered(begin.final_lsn);
        let mut debezium_through = None;
        let debezium_place = self.takeover.as_ref().map(|resume| TxnPlace {
            previous_end: self.last_commit_lsn.unwrap_or(resume.start()),
            final_lsn: begin.final_lsn,
        });
        if let Some(resume) = &self.takeover {
            match resume.transaction(self.last_commit_lsn, begin.final_lsn, begin.xid) {
                TxnVerdict::Produced => delivered = true,
                TxnVerdict::Partly(through) => debezium_through = Some(through),
                TxnVerdict::New => {}
            }
        }
        let commit_time_micros = begin.commit_time_unix_micros();
        if let Some(incremental) = &mut self.incremental {
            incremental.began(begin.xid);
        }
        let id = self.delivery.begin();
        self.delivery.anchor(id, begin.final_lsn);
        self.txn = Some(OpenTxn {
            id,
            xid: begin.xid,
            commit_time_micros,
            delivered,
            origin: None,
            debezium_through,
            debezium_place,
        });
        self.metrics.transaction_begun(commit_time_micros);
        self.last_commit_time_micros = Some(commit_time_micros);
        if !delivered {
            self.transaction_began(id, begin.xid, begin.final_lsn, commit_time_micros)
                .await?;
        }
        Ok(())
    }

    /// The open transaction committed: once its records are acknowledged
    /// the slot may move to its `end_lsn` (see [`crate::checkpoint`]);
    /// `end_lsn` is what the next events report as `lsn_commit`: Debezium
    /// takes the position of the Commit message, which the server sends at
    /// the end of the commit record (`logical.c`, `commit_cb_wrapper`).
    async fn commit(&mut self, commit: Commit) -> Result<(), PipelineError> {
        let Commit { end_lsn, .. } = commit;
        if let Some(txn) = self.txn.take() {
            if !txn.delivered {
                self.transaction_ending(txn.id).await?;
            }
            self.delivery.commit(txn.id, end_lsn);
            if let Some(incremental) = &mut self.incremental {
                incremental.committed(end_lsn);
            }
            if !txn.delivered {
                self.summary.transactions += 1;
            }
            self.metrics
                .transaction_committed(end_lsn, txn.commit_time_micros);
            if self.delivery.batch_due() {
                self.commit_kafka_batch(false).await?;
            }
        }
        self.received = self.received.max(end_lsn);
        self.metrics.received(self.received);
        self.last_commit_lsn = Some(end_lsn);
        Ok(())
    }

    /// The server's heartbeat: between transactions everything up to its
    /// WAL end was read.
    fn keepalive(&mut self, wal_end: Lsn) {
        self.metrics.server_wal_end(wal_end);
        if self.txn.is_none() {
            self.received = self.received.max(wal_end);
            self.metrics.received(self.received);
            self.idle_wal_end = self.idle_wal_end.max(wal_end);
            self.delivery.advance_idle(wal_end);
        }
    }

    /// Drains what is in flight and confirms it; records the outcome in the
    /// summary. `reason` is `None` when the attempt failed.
    pub(super) async fn finish(
        &mut self,
        client: &mut ReplicationStream,
        reason: Option<StopReason>,
    ) {
        if reason.is_some() && self.txn.is_none() {
            if let Err(error) = self.commit_kafka_batch(false).await {
                tracing::warn!(error = %crate::error_chain(&error), "the last kafka transaction did not commit; it is sent again on restart");
            }
        }
        // After a failed delivery nothing more may reach Kafka from this
        // attempt: a later change could land ahead of the failed one.
        self.drain(reason.is_some()).await;
        // Counted now: dropping the producer at the attempt's end purges
        // what is left in flight, which counts it as failed.
        self.summary.unacknowledged_records = self.metrics.in_flight_records();
        self.commit_acknowledged_signals();
        self.notifier.flush(self.config.shutdown_timeout).await;
        if reason.is_some() {
            if let Err(error) = self.record_progress_on_stop().await {
                tracing::warn!(error = %crate::error_chain(&error), "the incremental snapshot's last chunk is not recorded; it is read again on restart");
            }
            self.record_read_only_progress_on_stop().await;
        }
        let caught_up = reason == Some(StopReason::CaughtUp) && self.delivery.is_drained();
        if caught_up {
            // Only a caught-up, fully acknowledged stop may move past the last
            // delivered transaction, to the WAL end the server reported.
            self.delivery.advance_idle(self.idle_wal_end);
        }
        let acked = self.delivery.acked();
        client.update_applied_lsn(acked);
        // The stop reports `acked` before its CopyDone, and waits for the
        // server to end the copy: no need to wait for the status cadence.
        client.stop();
        while let Ok(Some(_)) = client.recv().await {}
        // After a failure the last update may never have reached the
        // server: no wait then, the next attempt reads the slot anyway.
        let confirmed = self.slot_confirmed(acked, reason.is_some()).await;
        let wal = setup::current_wal_lsn(&self.sql).await.ok();
        self.summary.confirmed_lsn = Some(confirmed);
        self.summary.acked_lsn = self.summary.acked_lsn.max(acked);
        if self.delivery.failure().is_some() {
            self.summary.resend_through = self.summary.resend_through.max(self.received);
        }
        self.summary.caught_up = caught_up;
        self.summary.remaining_lag_bytes = wal.map(|w| w.bytes_since(confirmed));
        tracing::info!(lsn = %confirmed, "replication stopped");
    }

    /// Waits up to `--shutdown-timeout` for what is in flight (see
    /// [`Delivery::drain`]), saying so on a requested stop with records in
    /// flight: a frozen Kafka makes that wait the whole timeout. A forced
    /// stop ends the wait; what is not acknowledged then is not confirmed,
    /// and the next start sends it again.
    async fn drain(&mut self, stopping: bool) {
        let timeout = self.config.shutdown_timeout;
        let in_flight = self.metrics.in_flight_records();
        let forced = self.shutdown.clone();
        if stopping && in_flight > 0 && self.delivery.failure().is_none() {
            tracing::info!(
                records = in_flight,
                timeout = ?timeout,
                "waiting up to {} s for Kafka to acknowledge {in_flight} records \
                 (--shutdown-timeout); a second SIGINT/SIGTERM stops without waiting",
                timeout.as_secs_f64()
            );
        }
        let forced = async move {
            match forced {
                Some(shutdown) => shutdown.forced().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            drained = self.delivery.drain(timeout) => {
                if let Err(error) = drained {
                    tracing::warn!(%error, "in-flight messages not all acknowledged; they will be sent again on restart");
                }
            }
            () = forced => {
                let left = self.metrics.in_flight_records();
                self.summary.forced = true;
                tracing::warn!(
                    records = left,
                    "stop forced: not waiting for Kafka; the slot is confirmed only up to \
                     what Kafka acknowledged, and the {left} records not acknowledged are \
                     sent again at the next start"
                );
            }
        }
    }

    /// The slot's confirmed position once the server applied `acked`: the
    /// walsender takes the last status update in as the stream ends, a
    /// moment after it was sent, so a summary read at once could report the
    /// position before it. After [`SLOT_CONFIRM_WAIT`] (at once without
    /// `wait`) it is what the slot says then; `acked` if the slot cannot be read.
    async fn slot_confirmed(&self, acked: Lsn, wait: bool) -> Lsn {
        let deadline = Instant::now()
            + if wait {
                SLOT_CONFIRM_WAIT
            } else {
                Duration::ZERO
            };
        loop {
            match setup::confirmed_flush_lsn(&self.sql, &self.config.slot_name).await {
                Ok(Some(confirmed)) if confirmed >= acked || Instant::now() >= deadline => {
                    return confirmed
                }
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                Ok(None) | Err(_) => return acked,
            }
        }
    }

    /// Creates `topic` if topic creation is configured and it is new.
    pub(super) async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<(), PipelineError> {
        let Some(topics) = &mut self.topics else {
            return Ok(());
        };
        let topic = &self.renames.apply(Arc::clone(topic));
        // The admin client reports a refused login only as a timeout; the
        // producer, connected by now, tells it at once.
        tokio::select! {
            created = topics.ensure(topic) => Ok(created?),
            refused = self.delivery.login_refused() => Err(SinkError::from(refused).into()),
        }
    }
}
