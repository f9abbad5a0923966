//! The pipeline: replication stream -> pgoutput decoding -> change events ->
//! encoding -> Kafka producer -> delivery acks -> slot confirmation.
//!
//! One task reads the stream in order and hands records to the producer;
//! librdkafka's thread reports deliveries to the ack tracker; the same task
//! that reads also confirms, so confirmation and reading never race. Reading
//! pauses when the in-flight bound is reached (the replication client keeps
//! answering keepalives meanwhile, so `wal_sender_timeout` never fires).
//!
//! Rooms: [`attempt`] decides where an attempt starts (the slot, or a new
//! slot and its snapshot) and picks the [`crate::sink::Delivery`];
//! `stream` is the read loop (positions and the `select!`) with the
//! translation of pgoutput messages into records (`stream/events.rs`) and
//! the metadata topics (`stream/metadata.rs`); `snapshot`, `incremental`
//! and `exactly_once` are what the loop runs besides, all sending through
//! the delivery. Nothing below imports `attempt`, and `stream` imports none
//! of its neighbours but the incremental snapshot's state.
//!
//! [`run`] supervises attempts: it restarts from the slot after transient
//! failures and ends a bounded run (`--stop-when-caught-up`, `--max-run`).
//! A bounded run that stops while behind confirms only what Kafka
//! acknowledged; only a caught-up, drained stop may confirm the WAL end the
//! server reported, so a scheduled job never skips unread changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::RunConfig;
use crate::encode::EncodeError;
use crate::lsn::Lsn;
use crate::metrics::{Metrics, Phase};
use crate::sink::{DeliveryFailure, SinkError};
use crate::source::pgoutput::DecodeError;
use crate::source::relation::RowError;
use crate::source::replication::ReplicationError;
use crate::source::setup::SetupError;

mod attempt;
mod previous_run;
pub use previous_run::SlotLost;
mod exactly_once;
pub mod fault;
mod incremental;
mod kafka_signals;
mod snapshot;
mod stream;

pub use incremental::IncrementalError;
pub use snapshot::SnapshotError;

pub use attempt::run_once;
pub use stream::{HeartbeatError, SpoolError, StreamedError};

/// Session settings pinned on the replication connection so that pgoutput's
/// text values render in the one format the value decoder parses.
pub const SESSION_OPTIONS: &str = "-c datestyle=ISO -c intervalstyle=postgres -c timezone=UTC \
                                   -c extra_float_digits=3 -c bytea_output=hex \
                                   -c client_encoding=UTF8 -c lc_monetary=C";

/// Header on the delete half of a key-changing update: the new key.
pub const NEW_KEY_HEADER: &str = "__debezium.newkey";
/// Header on the create half of a key-changing update: the old key.
pub const OLD_KEY_HEADER: &str = "__debezium.oldkey";
/// Header listing (as a JSON array) the columns whose value was TOASTed and
/// unchanged, so carries the placeholder (or null) instead of the value.
pub const UNCHANGED_COLUMNS_HEADER: &str = "pgcdc.unchanged.columns";

/// Why the pipeline stopped.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("replication stream failed")]
    Stream(#[source] ReplicationError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Row(#[from] RowError),
    /// `--pgoutput-binary auto` read a value of a type without a binary
    /// decoder (a column added while streaming): retried, in text.
    #[error("a column added while streaming has a type without a binary decoder; reconnecting to read values in text form (--pgoutput-binary auto)")]
    BinaryFallback(#[source] RowError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Incremental(#[from] IncrementalError),
    #[error(transparent)]
    Transform(#[from] crate::transform::TransformError),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("kafka delivery failed; the slot stays at the last fully acknowledged transaction")]
    Delivery(#[source] Arc<SinkError>),
    #[error("the replication stream ended unexpectedly")]
    StreamEnded,
    #[error("the temporary replication slot ended with its connection, so changes made from now until a new start are not captured; not retrying (--slot-temporary)")]
    TemporarySlotEnded(#[source] Box<PipelineError>),
    #[error(transparent)]
    SlotLost(#[from] SlotLost),
    #[error("the slot is missing, and Kafka could not be asked whether topics of an earlier run exist (so whether a snapshot may be taken): {0}; retrying")]
    PreviousRun(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Selection(#[from] crate::select::SelectionError),
    #[error(transparent)]
    Topic(#[from] crate::sink::topics::TopicError),
    #[error(transparent)]
    Heartbeat(#[from] HeartbeatError),
    #[error(transparent)]
    Identity(#[from] crate::source::identity::IdentityError),
    #[error("the replication connection reached another server ({now}) than the attempt's checks did ({checked}), as during a failover; retrying")]
    ServerMoved {
        checked: crate::source::identity::ServerIdentity,
        now: crate::source::identity::ServerIdentity,
    },
    #[error(transparent)]
    StartupTimeout(#[from] StartupTimeout),
    #[error(transparent)]
    Takeover(#[from] crate::takeover::TakeoverError),
    #[error(transparent)]
    Streamed(#[from] stream::StreamedError),
}

/// `--startup-timeout` passed before PostgreSQL and Kafka had both answered
/// once: the connector gives up instead of retrying for ever.
#[derive(Debug, thiserror::Error)]
#[error(
    "nothing to stream from: {unanswered} within --startup-timeout {}{}; check the \
     address and that the service is up, or leave --startup-timeout unset to retry for ever",
    humantime::format_duration(*.timeout),
    .last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
)]
pub struct StartupTimeout {
    pub timeout: Duration,
    /// What did not answer, naming the flag that says where it is.
    pub unanswered: String,
    /// The last failure of an attempt, if one ended.
    pub last_error: Option<String>,
}

impl StartupTimeout {
    /// What did not answer of what `metrics` saw.
    fn new(config: &RunConfig, metrics: &Metrics, last_error: Option<String>) -> Self {
        let unanswered = match metrics.answered() {
            (false, _) => format!(
                "PostgreSQL at {}:{} (--pg-url) never answered, so Kafka was not tried either",
                config.pg_url.host(),
                config.pg_url.port()
            ),
            (true, _) => format!(
                "PostgreSQL answered but Kafka never did: no broker of --bootstrap-servers ({}) \
                 could be reached",
                config.bootstrap_servers
            ),
        };
        StartupTimeout {
            timeout: config.startup_timeout.unwrap_or_default(),
            unanswered,
            last_error,
        }
    }
}

impl From<DeliveryFailure> for PipelineError {
    fn from(failure: DeliveryFailure) -> Self {
        match failure {
            DeliveryFailure::Failed(failure) => PipelineError::Delivery(failure),
            DeliveryFailure::Fatal(cause) => PipelineError::Sink(cause),
            DeliveryFailure::Closed => PipelineError::StreamEnded,
        }
    }
}

impl PipelineError {
    /// Whether restarting from the slot may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            PipelineError::Setup(e) => e.is_retryable(),
            PipelineError::Stream(e) => e.is_retryable(),
            PipelineError::Sink(e) => e.is_retryable(),
            PipelineError::Encode(e) => e.is_retryable(),
            PipelineError::Snapshot(e) => e.is_retryable(),
            PipelineError::Incremental(e) => e.is_retryable(),
            PipelineError::Transform(e) => e.is_retryable(),
            PipelineError::Delivery(e) => e.is_retryable(),
            PipelineError::StreamEnded
            | PipelineError::PreviousRun(_)
            | PipelineError::ServerMoved { .. }
            | PipelineError::BinaryFallback(_) => true,
            PipelineError::Topic(e) => e.is_retryable(),
            PipelineError::Heartbeat(e) => e.is_retryable(),
            PipelineError::Takeover(e) => e.is_retryable(),
            PipelineError::Streamed(e) => e.is_retryable(),
            PipelineError::SlotLost(_)
            | PipelineError::Identity(_)
            | PipelineError::TemporarySlotEnded(_)
            | PipelineError::Decode(_)
            | PipelineError::Row(_)
            | PipelineError::Config(_)
            | PipelineError::Selection(_)
            | PipelineError::StartupTimeout(_) => false,
        }
    }
}

impl PipelineError {
    /// Whether the slot is held by another session (SQLSTATE 55006): in a
    /// fleet, the previous owner still stopping; worth waiting for there.
    pub fn is_slot_in_use(&self) -> bool {
        matches!(self, PipelineError::Stream(ReplicationError::Server(e))
            if e.code == tokio_postgres::error::SqlState::OBJECT_IN_USE)
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// SIGINT / SIGTERM (or the embedding program) asked it to stop.
    #[default]
    Requested,
    /// `--stop-when-caught-up`: the stream reached its target.
    CaughtUp,
    /// `--max-run` elapsed.
    TimeLimit,
    /// `--snapshot-mode initial_only`: the snapshot is done.
    SnapshotCompleted,
}

/// What a run did, reported when it ends.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunSummary {
    pub stopped: StopReason,
    /// Whether the stream had caught up (reached its target, or was idle) when it stopped.
    pub caught_up: bool,
    /// Where the run started; `None` while no attempt reached PostgreSQL.
    #[serde(serialize_with = "serialize_optional_lsn")]
    pub start_lsn: Option<Lsn>,
    /// Where the slot was confirmed when it stopped; `None` while no
    /// attempt reached PostgreSQL.
    #[serde(serialize_with = "serialize_optional_lsn")]
    pub confirmed_lsn: Option<Lsn>,
    pub transactions: u64,
    /// Change events read and handed to Kafka (not all acknowledged: see
    /// `acknowledged_records`).
    pub events: u64,
    /// Records Kafka acknowledged during the run (change events, tombstones
    /// and the metadata topics' records).
    pub acknowledged_records: u64,
    /// Records handed to Kafka and neither acknowledged nor failed when the
    /// run stopped: not confirmed, sent again at the next start.
    pub unacknowledged_records: u64,
    /// A second SIGINT/SIGTERM ended the wait for Kafka's acknowledgements.
    pub forced: bool,
    /// Server WAL position minus the confirmed position when it stopped.
    pub remaining_lag_bytes: Option<u64>,
    /// Attempts after the first (restarts after transient failures).
    pub restarts: u64,
    /// `--max-run` ran out while restarting after this failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Everything before this position was acknowledged by Kafka in an
    /// earlier attempt of this run: a retry starts streaming there even when
    /// the slot reports an older position (see `run_once`).
    #[serde(skip)]
    pub acked_lsn: Lsn,
    /// A delivery failed in an earlier attempt of this run, which may have
    /// left a gap in a partition: no later attempt skips a replayed record
    /// of a transaction at or below this position (see `sink::tails`).
    #[serde(skip)]
    pub resend_through: Lsn,
    /// The server the run streams from, as its first attempt found it;
    /// every later attempt compares (see [`crate::source::identity`]).
    #[serde(skip)]
    pub server: Option<crate::source::identity::ServerIdentity>,
}

impl RunSummary {
    /// Whether a `--stop-when-caught-up` run reached its target but stopped
    /// before Kafka acknowledged everything it had read (a delivery failed
    /// while draining, or `--shutdown-timeout` passed). Nothing past the
    /// unacknowledged records was confirmed; the next run sends them again.
    /// The binary exits with a distinct code then, so a scheduler does not
    /// read it as success.
    pub fn is_incomplete(&self) -> bool {
        self.stopped == StopReason::CaughtUp && !self.caught_up
    }
}

fn serialize_optional_lsn<S: serde::Serializer>(
    lsn: &Option<Lsn>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match lsn {
        Some(lsn) => s.collect_str(lsn),
        None => s.serialize_none(),
    }
}

impl std::fmt::Display for RunSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match (self.stopped, &self.interrupted) {
            (StopReason::TimeLimit, Some(error)) => {
                format!("time limit reached while restarting after: {error}")
            }
            (StopReason::Requested, Some(error)) => {
                format!("on request, while restarting after: {error}")
            }
            (StopReason::Requested, _) => "on request".to_owned(),
            (StopReason::CaughtUp, _) => "caught up".to_owned(),
            (StopReason::TimeLimit, _) => "time limit reached".to_owned(),
            (StopReason::SnapshotCompleted, _) => "snapshot completed".to_owned(),
        };
        let forced = if self.forced { ", forced" } else { "" };
        write!(
            f,
            "stopped ({how}{forced}): {} transactions, {} events read, {} records acknowledged by Kafka",
            self.transactions, self.events, self.acknowledged_records,
        )?;
        if self.unacknowledged_records > 0 {
            write!(
                f,
                " ({} not acknowledged: not confirmed, sent again at the next start)",
                self.unacknowledged_records
            )?;
        }
        write!(
            f,
            "; confirmed LSN {} -> {}; ",
            crate::or_unknown(&self.start_lsn),
            crate::or_unknown(&self.confirmed_lsn),
        )?;
        // A stop that was not a caught-up one may still have had nothing
        // left: then the lag says all there is to say.
        match (self.caught_up, self.remaining_lag_bytes) {
            (false, Some(0)) => f.write_str("0 bytes of WAL behind"),
            (caught_up, lag) => {
                f.write_str(if caught_up {
                    "caught up"
                } else {
                    "not caught up"
                })?;
                match lag {
                    Some(lag) => write!(f, ", {lag} bytes of WAL behind"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A shutdown request shared by every attempt of a supervised run, and
/// optionally a second, forcing one: a graceful stop waits up to
/// `--shutdown-timeout` for Kafka's acknowledgements; a forced one stops
/// waiting at once and confirms only what Kafka has acknowledged.
#[derive(Debug, Clone)]
pub struct Shutdown {
    stop: watch::Receiver<bool>,
    force: Option<watch::Receiver<bool>>,
}

impl Shutdown {
    /// A shutdown signal and the handle that triggers it (`send(true)`);
    /// it cannot be forced.
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (
            tx,
            Shutdown {
                stop: rx,
                force: None,
            },
        )
    }

    /// [`Shutdown::new`] with a second handle that forces the stop (the
    /// binary's second SIGINT/SIGTERM): `(stop, force, shutdown)`.
    pub fn forceable() -> (watch::Sender<bool>, watch::Sender<bool>, Shutdown) {
        let (stop, mut shutdown) = Shutdown::new();
        let (force, rx) = watch::channel(false);
        shutdown.force = Some(rx);
        (stop, force, shutdown)
    }

    /// Whether shutdown was requested.
    pub fn is_requested(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once shutdown is requested (or its sender is gone).
    pub async fn requested(mut self) {
        let _ = self.stop.wait_for(|stop| *stop).await;
    }

    /// Resolves once the stop is forced; never for a shutdown that cannot
    /// be forced, or whose force handle is gone unused.
    pub async fn forced(self) {
        if let Some(mut force) = self.force {
            if force.wait_for(|force| *force).await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Runs the connector until `shutdown` is requested, restarting from the slot
/// with exponential backoff after transient failures (Postgres restarted,
/// connection dropped, Kafka unreachable past the delivery timeout). A
/// definite failure (bad configuration, invalidated slot, a message Kafka
/// will never accept) stops it with the error.
pub async fn run(config: RunConfig, shutdown: Shutdown) -> Result<RunSummary, PipelineError> {
    run_with_metrics(config, shutdown, Arc::new(Metrics::new())).await
}

/// [`run`], recording into `metrics` (served by [`crate::http`]) and keeping
/// its [`Phase`] current for readiness.
pub async fn run_with_metrics(
    config: RunConfig,
    shutdown: Shutdown,
    metrics: Arc<Metrics>,
) -> Result<RunSummary, PipelineError> {
    let mut backoff = Duration::from_secs(1);
    let deadline = config.max_run.map(|d| tokio::time::Instant::now() + d);
    let startup = config
        .startup_timeout
        .map(|d| tokio::time::Instant::now() + d);
    let acknowledged_before = metrics.records_acknowledged();
    let mut summary = RunSummary::default();
    let mut target = None;
    let mut last_error: Option<String> = None;
    let finished = |mut summary: RunSummary| {
        summary.acknowledged_records = metrics
            .records_acknowledged()
            .saturating_sub(acknowledged_before);
        // The stream counted them before its producer was dropped.
        summary.unacknowledged_records = summary
            .unacknowledged_records
            .max(metrics.in_flight_records());
        summary
    };
    let gave_up = |last_error: Option<String>| {
        let error = PipelineError::from(StartupTimeout::new(&config, &metrics, last_error));
        metrics.set_phase(Phase::Failed {
            error: crate::error_chain(&error),
        });
        error
    };
    loop {
        let started = Instant::now();
        let stop = {
            let shutdown = shutdown.clone();
            async move {
                match deadline {
                    Some(deadline) => tokio::select! {
                        () = shutdown.requested() => StopReason::Requested,
                        () = tokio::time::sleep_until(deadline) => StopReason::TimeLimit,
                    },
                    None => {
                        shutdown.requested().await;
                        StopReason::Requested
                    }
                }
            }
        };
        metrics.start_attempt();
        metrics.set_phase(Phase::Connecting);
        let attempt = run_once(
            &config,
            stop,
            &shutdown,
            &mut summary,
            &mut target,
            &metrics,
        );
        // An attempt cut short is dropped mid-way, as a crash would end
        // it: the slot was confirmed only to what Kafka acknowledged.
        let attempt = tokio::select! {
            attempt = attempt => Ok(attempt),
            () = startup_expired(startup, &metrics) => {
                metrics.end_attempt();
                return Err(gave_up(last_error));
            }
            in_flight = stuck_after_force(shutdown.clone(), &metrics) => Err(in_flight),
        };
        let mut attempt = match attempt {
            Ok(attempt) => attempt,
            Err(in_flight) => {
                // Forced while blocked where the stop is not seen (a frozen
                // Kafka holding the in-flight bound mid-transaction).
                metrics.end_attempt();
                tracing::warn!(
                    "stop forced while waiting for Kafka mid-transaction: abandoning the \
                     attempt; the slot keeps the position last confirmed, which Kafka \
                     acknowledged"
                );
                summary.stopped = StopReason::Requested;
                summary.caught_up = false;
                summary.forced = true;
                summary.remaining_lag_bytes = None;
                summary.confirmed_lsn = slot_position(&config).await;
                metrics.set_phase(Phase::Stopped);
                // Read before the attempt was dropped: dropping the producer
                // purges its queue, which counts the records as failed.
                return Ok(RunSummary {
                    unacknowledged_records: in_flight,
                    ..finished(summary)
                });
            }
        };
        if config.slot_temporary {
            // Whatever failed, the slot is gone with its session (or was never
            // made): a retry would silently start from a new slot.
            attempt = attempt.map_err(|e| match e.is_retryable() {
                true => PipelineError::TemporarySlotEnded(Box::new(e)),
                false => e,
            });
        }
        metrics.end_attempt();
        let past_deadline = || deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        match attempt {
            Ok(()) => {
                if config.slot_drop_on_stop {
                    drop_slot_on_stop(&config).await?;
                }
                metrics.set_phase(Phase::Stopped);
                return Ok(finished(summary));
            }
            // A stop asked for while an attempt was failing ends the run as
            // asked: exit 0, with what it was recovering from.
            Err(error) if error.is_retryable() && shutdown.is_requested() => {
                return Ok(finished(stopped_while_restarting(
                    summary,
                    StopReason::Requested,
                    &error,
                    &metrics,
                )));
            }
            Err(error) if error.is_retryable() && past_deadline() => {
                return Ok(finished(stopped_while_restarting(
                    summary,
                    StopReason::TimeLimit,
                    &error,
                    &metrics,
                )));
            }
            Err(error) if error.is_retryable() => {
                summary.restarts += 1;
                if started.elapsed() > MAX_BACKOFF {
                    backoff = Duration::from_secs(1);
                }
                tracing::warn!(error = %crate::error_chain(&error), retry_in = ?backoff, "pipeline failed; restarting from the slot");
                metrics.restarted();
                metrics.set_phase(Phase::Restarting {
                    error: crate::error_chain(&error),
                    retry_in: backoff,
                });
                let limit = sleep_until_some(deadline);
                let error_text = crate::error_chain(&error);
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = shutdown.clone().requested() => {
                        return Ok(finished(stopped_while_restarting(summary, StopReason::Requested, &error, &metrics)));
                    }
                    () = limit => {
                        return Ok(finished(stopped_while_restarting(summary, StopReason::TimeLimit, &error, &metrics)));
                    }
                    () = startup_expired(startup, &metrics) => return Err(gave_up(Some(error_text))),
                }
                last_error = Some(error_text);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(error) => {
                metrics.set_phase(Phase::Failed {
                    error: crate::error_chain(&error),
                });
                return Err(error);
            }
        }
    }
}

/// A stop was asked for, or `--max-run` ran out, while the run was
/// recovering from `error` (say PostgreSQL restarting): that ends the run
/// as it would have mid-stream, exit 0. What earlier attempts confirmed
/// stays confirmed; the summary says what it was recovering from.
fn stopped_while_restarting(
    mut summary: RunSummary,
    reason: StopReason,
    error: &PipelineError,
    metrics: &Metrics,
) -> RunSummary {
    let error = crate::error_chain(error);
    tracing::warn!(%error, ?reason, "stopping while restarting after a failure");
    summary.stopped = reason;
    summary.caught_up = false;
    // Not known: the server could not be asked.
    summary.remaining_lag_bytes = None;
    summary.interrupted = Some(error);
    metrics.set_phase(Phase::Stopped);
    summary
}

/// `--startup-timeout`: resolves at `deadline` if PostgreSQL or Kafka has
/// not answered by then; never without a deadline, or once both answered.
/// A producer tells that Kafka answered through its statistics, every 5 s
/// (`sink::kafka`): when PostgreSQL answered, Kafka gets that long more.
async fn startup_expired(deadline: Option<tokio::time::Instant>, metrics: &Metrics) {
    let Some(deadline) = deadline else {
        return std::future::pending().await;
    };
    tokio::time::sleep_until(deadline).await;
    let grace = deadline + KAFKA_ANSWER_GRACE;
    loop {
        match metrics.answered() {
            (true, true) => std::future::pending::<()>().await,
            (true, false) if tokio::time::Instant::now() < grace => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return,
        }
    }
}

/// The slot's confirmed position, read within a second; `None` if unknown.
async fn slot_position(config: &RunConfig) -> Option<Lsn> {
    let read = async {
        let sql = crate::source::setup::connect(&config.pg()).await.ok()?;
        crate::source::setup::confirmed_flush_lsn(&sql, &config.slot_name)
            .await
            .ok()
            .flatten()
    };
    tokio::time::timeout(Duration::from_secs(1), read)
        .await
        .ok()
        .flatten()
}

/// Resolves [`FORCED_ATTEMPT_GRACE`] after the stop was forced, with the
/// records in flight then: an attempt that sees the force ends well within
/// it (its drain stops waiting).
async fn stuck_after_force(shutdown: Shutdown, metrics: &Metrics) -> u64 {
    shutdown.forced().await;
    tokio::time::sleep(FORCED_ATTEMPT_GRACE).await;
    metrics.in_flight_records()
}

/// See [`stuck_after_force`].
const FORCED_ATTEMPT_GRACE: Duration = Duration::from_secs(2);

/// See [`startup_expired`]: a statistics interval and a margin.
const KAFKA_ANSWER_GRACE: Duration = Duration::from_secs(6);

/// Sleeps until `deadline`, or forever without one (a disabled `select!`
/// branch, or no `--max-run`).
pub(crate) async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// `--slot-drop-on-stop`: drops the slot after a graceful stop.
async fn drop_slot_on_stop(config: &RunConfig) -> Result<(), PipelineError> {
    let sql = crate::source::setup::connect(&config.pg()).await?;
    // The working slot too, left behind when a stop interrupted a snapshot.
    for slot in [config.slot_name.clone(), config.names().snapshot_slot()] {
        crate::source::setup::drop_slot_when_inactive(&sql, &slot, config.shutdown_timeout).await?;
    }
    tracing::warn!(
        slot = %config.slot_name,
        "dropped the replication slot (--slot-drop-on-stop): changes from now on are NOT captured, \
         and the next start begins from a new slot (with a new snapshot if --snapshot-mode asks for one)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_caught_up_stop_that_did_not_drain_is_incomplete() {
        let summary = |stopped, caught_up| RunSummary {
            stopped,
            caught_up,
            ..RunSummary::default()
        };
        assert!(summary(StopReason::CaughtUp, false).is_incomplete());
        assert!(!summary(StopReason::CaughtUp, true).is_incomplete());
        // Behind by design: a time limit or a request stops where it is.
        assert!(!summary(StopReason::TimeLimit, false).is_incomplete());
        assert!(!summary(StopReason::Requested, false).is_incomplete());
        assert!(!summary(StopReason::SnapshotCompleted, false).is_incomplete());
    }

    #[test]
    fn the_summary_says_not_caught_up_only_when_something_was_left() {
        let line = |caught_up, lag| {
            RunSummary {
                stopped: StopReason::Requested,
                caught_up,
                remaining_lag_bytes: lag,
                ..RunSummary::default()
            }
            .to_string()
        };
        let tail = |line: String| line.rsplit("; ").next().unwrap_or_default().to_owned();
        assert_eq!(tail(line(false, Some(0))), "0 bytes of WAL behind");
        assert_eq!(
            tail(line(false, Some(4096))),
            "not caught up, 4096 bytes of WAL behind"
        );
        assert_eq!(tail(line(false, None)), "not caught up");
        assert_eq!(
            tail(line(true, Some(0))),
            "caught up, 0 bytes of WAL behind"
        );
        assert_eq!(tail(line(true, None)), "caught up");
    }

    #[test]
    fn server_errors_are_classified_by_sqlstate() {
        use crate::source::replication::ServerError;
        use tokio_postgres::error::SqlState;

        let server = |code: SqlState, message: &str| {
            PipelineError::Stream(ReplicationError::Server(ServerError {
                severity: "FATAL".into(),
                code,
                message: message.into(),
                detail: None,
                hint: None,
            }))
        };
        let terminated = server(
            SqlState::ADMIN_SHUTDOWN,
            "terminating connection due to administrator command",
        );
        assert!(terminated.is_retryable());
        let slot_busy = server(
            SqlState::OBJECT_IN_USE,
            "replication slot \"s\" is active for PID 42",
        );
        assert!(
            !slot_busy.is_retryable(),
            "a second instance must stop and say so"
        );
        assert!(crate::error_chain(&slot_busy).contains("is active for PID 42 (SQLSTATE 55006)"));
        let missing = server(
            SqlState::UNDEFINED_OBJECT,
            "replication slot \"s\" does not exist",
        );
        assert!(!missing.is_retryable());
        let auth = PipelineError::Stream(ReplicationError::Login(ServerError {
            severity: "FATAL".into(),
            code: SqlState::INVALID_PASSWORD,
            message: "password authentication failed".into(),
            detail: None,
            hint: None,
        }));
        assert!(!auth.is_retryable());
    }
}
