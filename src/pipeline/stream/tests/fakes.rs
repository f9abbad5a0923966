//! The fake Kafka the read-loop tests deliver to: what was sent, and the
//! acknowledgements and failures a test hands out.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::super::*;
use crate::checkpoint::AckTracker;
use crate::sink::login::LoginRefused;
use crate::sink::transactional::ProgressRecord;
use crate::sink::{DeliveryFailure, EncodedRecord, InKafka, Progress};

/// The Kafka a [`FakeDelivery`] writes to: what was sent, and the
/// acknowledgements a test hands out.
#[derive(Clone)]
pub(super) struct FakeKafka {
    state: Arc<Mutex<State>>,
    progress: watch::Sender<Progress>,
}

pub(super) struct State {
    pub(super) tracker: AckTracker,
    /// Every record sent, with whether Kafka settled it (acked or failed).
    pub(super) sent: Vec<(EncodedRecord, bool)>,
    pub(super) skip_before: Option<Lsn>,
    /// Whether the last drain dropped what was in flight (after a failure).
    pub(super) purged: bool,
}

impl FakeKafka {
    pub(super) fn new(start: Lsn) -> Self {
        let (progress, _) = watch::channel(Progress {
            acked: start,
            failure: None,
        });
        FakeKafka {
            state: Arc::new(Mutex::new(State {
                tracker: AckTracker::new(start),
                sent: Vec::new(),
                skip_before: None,
                purged: false,
            })),
            progress,
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn delivery(&self) -> Box<dyn Delivery> {
        Box::new(FakeDelivery {
            kafka: self.clone(),
            progress: self.progress.subscribe(),
        })
    }

    pub(super) fn publish(&self, advanced: Option<Lsn>) {
        if let Some(acked) = advanced {
            self.progress.send_modify(|p| p.acked = p.acked.max(acked));
        }
    }

    /// Kafka acknowledges the `n`-th record sent (from 0).
    pub(super) fn ack(&self, n: usize) {
        let mut state = self.state();
        let (record, settled) = &mut state.sent[n];
        assert!(!*settled, "record {n} was settled already");
        *settled = true;
        let txn = record.txn;
        let advanced = state.tracker.delivered(txn);
        drop(state);
        self.publish(advanced);
    }

    /// Kafka gives up on the `n`-th record sent.
    pub(super) fn fail(&self, n: usize) {
        let mut state = self.state();
        let (record, settled) = &mut state.sent[n];
        *settled = true;
        let txn = record.txn;
        state.tracker.failed(txn);
        drop(state);
        self.progress.send_modify(|p| {
            p.failure
                .get_or_insert_with(|| Arc::new(SinkError::FlushTimeout(Duration::from_secs(1))));
        });
    }

    /// The JSON values sent, in order.
    pub(super) fn values(&self) -> Vec<serde_json::Value> {
        self.state()
            .sent
            .iter()
            .map(|(record, _)| {
                serde_json::from_slice(record.value.as_deref().unwrap_or_default())
                    .expect("a JSON value")
            })
            .collect()
    }

    /// The message contents sent, in order.
    pub(super) fn contents(&self) -> Vec<String> {
        self.values()
            .iter()
            .map(|value| {
                let content = value["payload"]["message"]["content"]
                    .as_str()
                    .expect("a message's content");
                String::from_utf8(
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, content)
                        .expect("base64"),
                )
                .expect("UTF-8")
            })
            .collect()
    }

    /// The `source` block of each record sent, in order.
    pub(super) fn sources(&self) -> Vec<serde_json::Value> {
        self.values()
            .iter()
            .map(|value| value["payload"]["source"].clone())
            .collect()
    }

    pub(super) fn sent(&self) -> usize {
        self.state().sent.len()
    }

    pub(super) fn acked(&self) -> Lsn {
        self.state().tracker.acked()
    }
}

/// [`Delivery`] into a [`FakeKafka`].
pub(super) struct FakeDelivery {
    kafka: FakeKafka,
    progress: watch::Receiver<Progress>,
}

impl FakeDelivery {
    /// What a flush does when the broker is up: everything outstanding is acknowledged.
    pub(super) fn deliver_outstanding(&self) {
        let outstanding: Vec<usize> = (self.kafka.state().sent.iter().enumerate())
            .filter(|(_, (_, settled))| !settled)
            .map(|(n, _)| n)
            .collect();
        for n in outstanding {
            self.kafka.ack(n);
        }
    }
}

#[async_trait]
impl Delivery for FakeDelivery {
    async fn init(&mut self) -> Result<InKafka, SinkError> {
        Ok(InKafka::Untracked)
    }

    fn skip_before(&mut self, lsn: Lsn) {
        self.kafka.state().skip_before = Some(lsn);
    }

    fn already_delivered(&self, final_lsn: Lsn) -> bool {
        self.kafka
            .state()
            .skip_before
            .is_some_and(|recorded| final_lsn < recorded)
    }

    fn begin(&mut self) -> TxnId {
        self.kafka.state().tracker.begin()
    }

    async fn send(&mut self, record: EncodedRecord) -> Result<(), SinkError> {
        let mut state = self.kafka.state();
        state.tracker.sent(record.txn);
        state.sent.push((record, false));
        Ok(())
    }

    fn commit(&mut self, txn: TxnId, end_lsn: Lsn) {
        let advanced = self.kafka.state().tracker.commit(txn, end_lsn);
        self.kafka.publish(advanced);
    }

    fn advance_idle(&mut self, wal_end: Lsn) {
        let advanced = self.kafka.state().tracker.advance_idle(wal_end);
        self.kafka.publish(advanced);
    }

    fn acked(&self) -> Lsn {
        self.kafka.acked()
    }

    fn is_drained(&self) -> bool {
        self.kafka.state().tracker.is_drained()
    }

    async fn acked_changed(&mut self) -> Result<Lsn, DeliveryFailure> {
        if self.progress.changed().await.is_err() {
            return Err(DeliveryFailure::Closed);
        }
        let now = self.progress.borrow_and_update();
        match &now.failure {
            Some(failure) => Err(DeliveryFailure::Failed(Arc::clone(failure))),
            None => Ok(now.acked),
        }
    }

    fn failure(&self) -> Option<Arc<SinkError>> {
        self.progress.borrow().failure.clone()
    }

    async fn flush(&mut self, _timeout: Duration) -> Result<(), SinkError> {
        self.deliver_outstanding();
        Ok(())
    }

    async fn checkpoint(
        &mut self,
        _topic: &str,
        _key: &str,
        _record: ProgressRecord,
        _timeout: Duration,
    ) -> Result<(), SinkError> {
        unreachable!("the stream tests take no initial snapshot")
    }

    async fn drain(&mut self, _timeout: Duration) -> Result<(), SinkError> {
        let failed = self.failure().is_some();
        self.kafka.state().purged = failed;
        if !failed {
            self.deliver_outstanding();
        }
        Ok(())
    }

    async fn login_refused(&self) -> LoginRefused {
        std::future::pending().await
    }
}
