//! At-least-once delivery (the default): the idempotent producer alone.
//! Every record is retried until Kafka acknowledges it, so nothing is lost.
//! A restart replays what the slot had not confirmed; with
//! `--skip-delivered` the replayed records Kafka already has are not sent
//! again (see [`super::tails`]), otherwise a consumer may see them twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::config::ClientConfig;
use tokio::sync::watch;

use super::delivery::{next_progress, Delivery, DeliveryFailure, InKafka};
use super::error::SinkError;
use super::kafka::{InFlightLimits, KafkaSink};
use super::login::LoginRefused;
use super::position::{Position, POSITION_HEADER};
use super::record::{EncodedRecord, Progress};
use super::tails::{self, Tail};
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;
use crate::metrics::Metrics;

/// How long reading a topic's partition tails may take before the
/// attempt gives up on skipping for that topic (and sends everything).
const TAIL_READ_TIMEOUT: Duration = Duration::from_secs(10);

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
    client: ClientConfig,
    metrics: Arc<Metrics>,
    /// The transaction whose records are being sent: its commit position
    /// and the ordinal of its next record.
    current: Option<(TxnId, Lsn, u32)>,
    /// What Kafka proves per topic, read at the first record sent to it.
    tails: HashMap<Arc<str>, Tail>,
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
                metrics,
                current: None,
                tails: HashMap::new(),
            }),
        })
    }

    /// The producer underneath (for its queue gauge).
    pub fn producer(&self) -> &Arc<KafkaSink> {
        &self.sink
    }
}

impl Positions {
    /// Adds `record`'s position header if it belongs to the transaction
    /// being streamed, and returns the position.
    fn stamp(&mut self, record: &mut EncodedRecord) -> Option<Position> {
        let (txn, lsn, next) = self.current.as_mut()?;
        if *txn != record.txn {
            return None;
        }
        let position = Position {
            lsn: *lsn,
            ordinal: *next,
        };
        *next += 1;
        record.headers.push((
            POSITION_HEADER,
            position.header_value(self.dedupe.fingerprint),
        ));
        Some(position)
    }

    /// Whether Kafka already holds the record at `position` in `topic`.
    async fn delivered(&mut self, topic: &Arc<str>, position: Position) -> bool {
        let Dedupe {
            horizon,
            resend_through,
            ..
        } = self.dedupe;
        if position.lsn > horizon || position.lsn <= resend_through {
            return false;
        }
        let tail = match self.tails.get(topic) {
            Some(tail) => *tail,
            None => {
                let tail = self.read_tail(topic).await;
                self.tails.insert(Arc::clone(topic), tail);
                tail
            }
        };
        matches!(tail, Tail::Through(through) if position <= through)
    }

    async fn read_tail(&self, topic: &Arc<str>) -> Tail {
        let client = self.client.clone();
        let name = Arc::clone(topic);
        let fingerprint = self.dedupe.fingerprint;
        let read = tokio::task::spawn_blocking(move || {
            tails::read(&client, &name, fingerprint, TAIL_READ_TIMEOUT)
        })
        .await
        .unwrap_or_else(|e| Err(format!("the reader failed: {e}")));
        match read {
            Ok(Tail::Through(through)) => {
                tracing::info!(topic = %topic, %through, "Kafka already has this topic's records through {through}: replayed records up to it are not sent again");
                Tail::Through(through)
            }
            Ok(Tail::Unknown) => {
                tracing::debug!(topic = %topic, "the topic's partition tails prove nothing delivered: every replayed record is sent");
                Tail::Unknown
            }
            Err(reason) => {
                self.metrics.tail_read_failed();
                tracing::warn!(topic = %topic, %reason, "cannot tell what Kafka already has of this topic; its replayed records are sent again (duplicates, never a loss)");
                Tail::Unknown
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
        }
    }

    fn unanchor(&mut self) {
        if let Some(positions) = &mut self.positions {
            positions.current = None;
        }
    }

    async fn send(&mut self, mut record: EncodedRecord) -> Result<(), SinkError> {
        if let Some(positions) = &mut self.positions {
            if let Some(position) = positions.stamp(&mut record) {
                if positions.delivered(&record.topic, position).await {
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

    fn positions(tail: Tail) -> Positions {
        Positions {
            dedupe: Dedupe {
                horizon: Lsn::new(1000),
                resend_through: Lsn::new(100),
                fingerprint: 7,
            },
            client: ClientConfig::new(),
            metrics: Arc::new(Metrics::new()),
            current: None,
            tails: HashMap::from([(Arc::from("t"), tail)]),
        }
    }

    fn record(txn: TxnId) -> EncodedRecord {
        EncodedRecord {
            topic: Arc::from("t"),
            key: None,
            value: None,
            headers: Vec::new(),
            txn,
        }
    }

    fn at(lsn: u64, ordinal: u32) -> Position {
        Position {
            lsn: Lsn::new(lsn),
            ordinal,
        }
    }

    #[test]
    fn records_of_the_anchored_transaction_are_numbered_in_order() {
        let mut p = positions(Tail::Unknown);
        let (streamed, other) = (TxnId::from_u64(1), TxnId::from_u64(2));
        assert_eq!(p.stamp(&mut record(streamed)), None, "nothing anchored yet");
        p.current = Some((streamed, Lsn::new(500), 0));
        let mut first = record(streamed);
        assert_eq!(p.stamp(&mut first), Some(at(500, 0)));
        assert_eq!(
            first.headers,
            vec![(POSITION_HEADER, b"0/1F4:0@0000000000000007".to_vec())]
        );
        assert_eq!(
            p.stamp(&mut record(other)),
            None,
            "a snapshot record has no place"
        );
        assert_eq!(p.stamp(&mut record(streamed)), Some(at(500, 1)));
    }

    #[tokio::test]
    async fn only_what_the_tails_prove_and_no_earlier_failure_taints_is_skipped() {
        let topic: Arc<str> = Arc::from("t");
        let mut p = positions(Tail::Through(at(500, 3)));
        assert!(p.delivered(&topic, at(500, 3)).await);
        assert!(p.delivered(&topic, at(400, 9)).await);
        assert!(!p.delivered(&topic, at(500, 4)).await, "past the tail");
        assert!(
            !p.delivered(&topic, at(100, 0)).await,
            "at or below a failed attempt's reach: sent again"
        );
        let mut unknown = positions(Tail::Unknown);
        assert!(!unknown.delivered(&topic, at(400, 0)).await);
        let mut far = positions(Tail::Through(at(5000, 0)));
        assert!(
            !far.delivered(&topic, at(1001, 0)).await,
            "past the horizon nothing is looked up"
        );
    }
}
