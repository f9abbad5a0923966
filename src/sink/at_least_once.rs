//! At-least-once delivery (the default): the idempotent producer alone.
//! Every record is retried until Kafka acknowledges it or its timeout
//! passes, so nothing is lost; a restart sends again what Kafka had but the
//! slot had not confirmed, so a consumer may see a record twice.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::config::ClientConfig;
use tokio::sync::watch;

use super::delivery::{next_progress, Delivery, DeliveryFailure, InKafka};
use super::error::SinkError;
use super::kafka::{InFlightLimits, KafkaSink};
use super::login::LoginRefused;
use super::record::{EncodedRecord, Progress};
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;
use crate::metrics::Metrics;

/// [`Delivery`] without Kafka transactions.
pub struct AtLeastOnce {
    sink: Arc<KafkaSink>,
    progress: watch::Receiver<Progress>,
}

impl AtLeastOnce {
    /// The producer; `acked` is the position the slot is confirmed at.
    pub fn new(
        config: &ClientConfig,
        limits: InFlightLimits,
        acked: Lsn,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SinkError> {
        let (sink, progress) = KafkaSink::with_metrics(config, limits, acked, metrics)?;
        Ok(AtLeastOnce {
            sink: Arc::new(sink),
            progress,
        })
    }

    /// The producer underneath (for its queue gauge).
    pub fn producer(&self) -> &Arc<KafkaSink> {
        &self.sink
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

    async fn send(&mut self, record: EncodedRecord) -> Result<(), SinkError> {
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

    async fn drain(&mut self, timeout: Duration) -> Result<(), SinkError> {
        self.sink.drain(timeout).await
    }

    async fn login_refused(&self) -> LoginRefused {
        self.sink.login_refused().await
    }
}
