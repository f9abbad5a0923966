//! The delivery seam: what the pipeline asks of Kafka, whatever the
//! delivery guarantee. Two implementations own what is specific to each:
//! [`AtLeastOnce`](super::AtLeastOnce) (an idempotent producer; a restart
//! may repeat what Kafka had but the slot had not confirmed) and
//! [`Transactional`](super::Transactional) (`--delivery exactly-once`:
//! Kafka transactions with a progress record, and the skipping of what
//! Kafka already holds on restart).
//!
//! # Invariants every implementation keeps
//! - [`Delivery::acked`] only moves forward, and only past a Postgres
//!   transaction once Kafka acknowledged every record of it and of every
//!   transaction registered before it (and, transactional, committed the
//!   Kafka transaction holding it). It is the only position the pipeline
//!   confirms to the slot.
//! - Transactions are registered ([`Delivery::begin`]) in the order the
//!   stream reads them, and committed ([`Delivery::commit`]) in that order.
//! - After one failed delivery the position never moves again in this
//!   attempt; [`Delivery::drain`] then drops what is still queued, so that
//!   nothing later overtakes the failed record in its partition.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::TopicPartitionList;

use super::error::SinkError;
use super::login::LoginRefused;
use super::record::EncodedRecord;
use super::transactional::{IncrementalProgress, ProgressRecord};
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;

/// What Kafka holds of this connector's output, read when an attempt starts.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per attempt, matched at once: boxing would only add a deref"
)]
pub enum InKafka {
    /// At-least-once: Kafka keeps no record of it; the slot's position is
    /// the only one.
    Untracked,
    /// Exactly-once: the latest progress record (`None`: there is none yet).
    Recorded(Option<ProgressRecord>),
}

/// Why [`Delivery::acked_changed`] ended the wait for progress.
#[derive(Debug)]
pub enum DeliveryFailure {
    /// A record failed for good (the first such failure).
    Failed(Arc<SinkError>),
    /// The producer itself failed (fenced, or a fatal transactional error):
    /// the cause, which the purged records' own reports do not name.
    Fatal(SinkError),
    /// The producer's side of the progress channel is gone.
    Closed,
}

/// The Kafka side of the pipeline. See the module docs for its invariants.
#[async_trait]
pub trait Delivery: Send + Sync {
    /// Prepares to send: registers with Kafka what the guarantee needs (the
    /// transactional producer, fencing an earlier instance) and reads what
    /// Kafka already holds. Called once per attempt, before any record.
    async fn init(&mut self) -> Result<InKafka, SinkError>;

    /// Exactly-once: transactions whose commit record starts before `lsn`
    /// are already in Kafka; see [`Delivery::already_delivered`].
    fn skip_before(&mut self, lsn: Lsn);

    /// Whether the transaction whose commit record starts at `final_lsn` (or
    /// a message outside a transaction at that position) is already in
    /// Kafka, so its records must not be sent again. Always false for
    /// at-least-once.
    fn already_delivered(&self, final_lsn: Lsn) -> bool;

    /// Registers a Postgres transaction whose Begin was read, even one
    /// whose records are skipped: the position moves past it only in turn.
    fn begin(&mut self) -> TxnId;

    /// Says that the records of `txn` (registered last) belong to the
    /// transaction committing at `commit` (a message outside a transaction:
    /// its own position), so that each record's place in the WAL is known
    /// (see [`super::position`]). Records of unanchored transactions
    /// (snapshots, heartbeats) have no place.
    fn anchor(&mut self, _txn: TxnId, _commit: Lsn) {}

    /// The rest of the anchored transaction would not be the same on a
    /// replay (an incremental snapshot chunk reads the table as it is
    /// then): its records have no place.
    fn unanchor(&mut self) {}

    /// `--takeover-debezium`: the records sent next are of the change at
    /// `.1` of the transaction at `.0` (`None`: of no replayed change), so
    /// that those Debezium's last record of their partition holds are not
    /// sent again (see [`crate::takeover::tails`]).
    fn debezium_change(&mut self, _at: Option<(crate::takeover::tails::TxnPlace, Lsn)>) {}

    /// Hands a record to the producer, waiting while the in-flight bound is
    /// reached. Delivery is reported through [`Delivery::acked_changed`].
    async fn send(&mut self, record: EncodedRecord) -> Result<(), SinkError>;

    /// Registers the Commit of `txn`: no more records come for it, and once
    /// they are acknowledged the position may move to `end_lsn`.
    fn commit(&mut self, txn: TxnId, end_lsn: Lsn);

    /// Between transactions, with nothing in flight: treats the server's WAL
    /// end as acknowledged (see [`crate::checkpoint::AckTracker::advance_idle`]).
    fn advance_idle(&mut self, wal_end: Lsn);

    /// Everything below this LSN is in Kafka.
    fn acked(&self) -> Lsn;

    /// Whether every registered transaction is committed and acknowledged,
    /// and no delivery failed.
    fn is_drained(&self) -> bool;

    /// Resolves when the acknowledged position changed (with the new one),
    /// or with the failure that ends the attempt.
    async fn acked_changed(&mut self) -> Result<Lsn, DeliveryFailure>;

    /// The first failed delivery of this attempt, if any.
    fn failure(&self) -> Option<Arc<SinkError>>;

    /// Exactly-once: opens a Kafka transaction if none is, so that the
    /// Postgres transaction being read ends up in one with a progress
    /// record even if it sends nothing.
    fn open_batch(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Exactly-once: whether the open Kafka transaction reached its
    /// transaction or byte bound. Only meaningful between Postgres transactions.
    fn batch_due(&self) -> bool {
        false
    }

    /// Exactly-once: when the open Kafka transaction is due by time.
    fn batch_deadline(&self) -> Option<Instant> {
        None
    }

    /// Exactly-once: commits the open Kafka transaction with its progress
    /// record (`snapshot`: it holds the initial snapshot; `incremental`: the
    /// incremental snapshot's progress as of now). Call only between
    /// Postgres transactions. Returns whether a Kafka transaction committed.
    async fn commit_batch(
        &mut self,
        _snapshot: bool,
        _incremental: Option<IncrementalProgress>,
    ) -> Result<bool, SinkError> {
        Ok(false)
    }

    /// Makes everything sent so far durable in Kafka together with
    /// `record` (an initial snapshot's progress), keyed `key` in `topic`:
    /// exactly-once writes it into the open Kafka transaction (its own
    /// progress topic and key) and commits that; at-least-once waits until
    /// every record sent is acknowledged, then writes it and waits for its
    /// acknowledgement. After a failed delivery nothing is written: the
    /// caller finds the failure in [`Delivery::failure`].
    async fn checkpoint(
        &mut self,
        topic: &str,
        key: &str,
        record: ProgressRecord,
        timeout: Duration,
    ) -> Result<(), SinkError>;

    /// Exactly-once: makes `offsets` consumer `group`'s committed position
    /// when the open Kafka transaction (opened if none is) commits, and
    /// never before; an abort drops them with the rest of it. Returns
    /// whether it did: `false` without Kafka transactions, when the caller
    /// commits the offsets itself once Kafka has what they stand for.
    async fn commit_offsets_with_batch(
        &mut self,
        _offsets: TopicPartitionList,
        _group: ConsumerGroupMetadata,
    ) -> Result<bool, SinkError> {
        Ok(false)
    }

    /// Exactly-once: aborts the open Kafka transaction, if any, so
    /// read_committed consumers never see it.
    async fn abort_batch(&mut self) {}

    /// Waits for every queued record to be delivered or to fail.
    async fn flush(&mut self, timeout: Duration) -> Result<(), SinkError>;

    /// Ends the attempt's sending: aborts an open Kafka transaction, then
    /// waits for what is in flight, or after a failed delivery drops it
    /// (the next attempt sends it again from the slot, in order).
    async fn drain(&mut self, timeout: Duration) -> Result<(), SinkError>;

    /// Resolves once the broker refuses the producer's login (never, if it
    /// does not): for waits on other Kafka clients, which would only see
    /// the refusal as a timeout.
    async fn login_refused(&self) -> LoginRefused;
}

/// Waits for the progress channel to change: the new acknowledged position,
/// or the first failure.
pub(super) async fn next_progress(
    progress: &mut tokio::sync::watch::Receiver<super::Progress>,
) -> Result<Lsn, DeliveryFailure> {
    if progress.changed().await.is_err() {
        return Err(DeliveryFailure::Closed);
    }
    let now = progress.borrow_and_update();
    match &now.failure {
        Some(failure) => Err(DeliveryFailure::Failed(Arc::clone(failure))),
        None => Ok(now.acked),
    }
}
