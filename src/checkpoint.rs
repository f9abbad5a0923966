//! The ack tracker: the one place that decides which LSN may be confirmed to
//! the replication slot.
//!
//! # The promise
//!
//! A logical replication slot remembers `confirmed_flush_lsn`: the position up
//! to which the client says it has durably processed the stream. When a client
//! (re)starts streaming, the walsender skips every transaction whose commit
//! record starts before that position
//! ([logical decoding: replication progress](https://www.postgresql.org/docs/current/logicaldecoding-explanation.html#LOGICALDECODING-REPLICATION-SLOTS),
//! `SnapBuildXactNeedsSkip` in `snapbuild.c`). So confirming an LSN is a
//! promise that every transaction committed before it is safely in Kafka; a
//! premature confirm loses data that no restart can bring back.
//!
//! # The rule
//!
//! Transactions are registered here in commit order, as the stream delivers
//! them. Each counts its outstanding Kafka deliveries. Kafka acknowledges
//! messages out of order across partitions (and a retried batch can complete
//! after a later one), so the confirmable position is the `end_lsn` of the
//! newest transaction such that it *and every earlier one* have no outstanding
//! delivery and have seen their Commit. It never moves past a transaction
//! with a failed delivery: a failure freezes the tracker, and the pipeline
//! stops and resumes from the slot.
//!
//! We confirm a transaction's `end_lsn` (the end of its commit record), not
//! its `commit_lsn` (the start): the walsender replays a transaction whose
//! commit record starts at or after the confirmed position, so confirming
//! `commit_lsn` would deliver the same transaction again after every restart.
//!
//! When nothing is outstanding and the stream sits between transactions, the
//! pipeline may confirm the server's reported WAL end instead (see
//! [`AckTracker::is_drained`]), so a slot on an idle database, or one whose
//! traffic is all on unpublished tables, does not retain WAL forever.
//!
//! # Exactly-once (`--delivery exactly-once`)
//!
//! With a transactional producer a delivered message is not yet visible to
//! `read_committed` consumers: it becomes so when its Kafka transaction
//! commits, and vanishes if that transaction aborts. So a transactional
//! tracker ([`AckTracker::transactional`]) also caps the acknowledged
//! position at the end of the last *committed* Kafka transaction
//! ([`AckTracker::kafka_committed`]); the slot never moves past data a
//! Kafka abort could still take back. Between Kafka transactions (none is
//! open) the cap may follow the delivered position, since nothing delivered
//! is uncommitted then.
//!
//! The tracker is sans-IO: it does arithmetic on counters, and the pipeline
//! and the Kafka delivery callback drive it under a mutex.

use std::collections::VecDeque;

use crate::lsn::Lsn;

/// A transaction's place in the tracker, handed out by [`AckTracker::begin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnId(u64);

impl TxnId {
    /// The id's sequence number (ids are handed out from 0 upwards).
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Rebuilds an id from [`TxnId::as_u64`], e.g. after a round trip
    /// through a Kafka delivery opaque.
    pub const fn from_u64(raw: u64) -> Self {
        TxnId(raw)
    }
}

#[derive(Debug)]
struct PendingTxn {
    id: TxnId,
    /// Set when the transaction's Commit has been seen.
    end_lsn: Option<Lsn>,
    outstanding: u64,
}

/// Counts outstanding deliveries per transaction and yields the highest LSN
/// below which everything is acknowledged. See the module docs.
#[derive(Debug)]
pub struct AckTracker {
    pending: VecDeque<PendingTxn>,
    next_id: u64,
    acked: Lsn,
    failed: bool,
    /// Exactly-once: the end of the last committed Kafka transaction; the
    /// reported position never passes it.
    committed: Option<Lsn>,
}

impl AckTracker {
    /// A tracker whose acknowledged position starts at `acked`, the slot's
    /// confirmed position when streaming starts.
    pub fn new(acked: Lsn) -> Self {
        AckTracker {
            pending: VecDeque::new(),
            next_id: 0,
            acked,
            failed: false,
            committed: None,
        }
    }

    /// A tracker for a transactional producer: its position also waits for
    /// [`AckTracker::kafka_committed`]. `committed` is where Kafka already
    /// holds everything (at least `acked`; higher when the progress topic
    /// records transactions the slot has not confirmed yet).
    pub fn transactional(acked: Lsn, committed: Lsn) -> Self {
        AckTracker {
            committed: Some(committed.max(acked)),
            ..AckTracker::new(acked)
        }
    }

    /// Exactly-once: every transaction ending at or before `through` is in a
    /// committed Kafka transaction. Returns the new acknowledged position if
    /// it advanced.
    pub fn kafka_committed(&mut self, through: Lsn) -> Option<Lsn> {
        let before = self.acked();
        if let Some(committed) = &mut self.committed {
            *committed = (*committed).max(through);
        }
        (self.acked() > before).then(|| self.acked())
    }

    /// Registers a transaction whose Begin was just read. Transactions must be
    /// registered in the order the stream delivers them (commit order).
    pub fn begin(&mut self) -> TxnId {
        let id = TxnId(self.next_id);
        self.next_id += 1;
        self.pending.push_back(PendingTxn {
            id,
            end_lsn: None,
            outstanding: 0,
        });
        id
    }

    /// Records one more message of `txn` handed to the producer.
    pub fn sent(&mut self, txn: TxnId) {
        if let Some(t) = self.find(txn) {
            t.outstanding += 1;
        } else {
            debug_assert!(false, "sent() for unknown or finished transaction {txn:?}");
        }
    }

    /// Records that `txn`'s Commit was read: no more messages will come for it.
    /// Returns the new acknowledged position if it advanced.
    pub fn commit(&mut self, txn: TxnId, end_lsn: Lsn) -> Option<Lsn> {
        match self.find(txn) {
            Some(t) => t.end_lsn = Some(end_lsn),
            None => debug_assert!(false, "commit() for unknown transaction {txn:?}"),
        }
        self.advance()
    }

    /// Records a successful delivery of one message of `txn`. Returns the new
    /// acknowledged position if it advanced.
    pub fn delivered(&mut self, txn: TxnId) -> Option<Lsn> {
        match self.find(txn) {
            Some(t) if t.outstanding > 0 => t.outstanding -= 1,
            _ => debug_assert!(false, "delivery for {txn:?} that was not outstanding"),
        }
        self.advance()
    }

    /// Records a delivery that failed for good. The acknowledged position
    /// never moves again: nothing at or after the failed transaction may be
    /// confirmed, and the pipeline must restart from the slot.
    pub fn failed(&mut self, txn: TxnId) {
        if let Some(t) = self.find(txn) {
            t.outstanding = t.outstanding.saturating_sub(1);
        }
        self.failed = true;
    }

    /// Whether a delivery has failed since this tracker was created.
    pub fn has_failed(&self) -> bool {
        self.failed
    }

    /// The highest LSN below which every transaction is fully acknowledged
    /// (and, for a transactional tracker, in a committed Kafka transaction).
    pub fn acked(&self) -> Lsn {
        match self.committed {
            Some(committed) => self.acked.min(committed),
            None => self.acked,
        }
    }

    /// The highest LSN below which every transaction is delivered, whether
    /// or not its Kafka transaction committed yet.
    pub fn delivered_through(&self) -> Lsn {
        self.acked
    }

    /// Whether nothing is outstanding and no transaction is open: the only
    /// state in which confirming the server's WAL end is safe.
    pub fn is_drained(&self) -> bool {
        self.pending.is_empty() && !self.failed
    }

    /// Raises the acknowledged position to `lsn` (the server's WAL end) when
    /// the tracker is drained. Returns the new position if it advanced.
    ///
    /// A transactional tracker advances only when nothing delivered waits
    /// for a Kafka commit (the cap is at the delivered position).
    pub fn advance_idle(&mut self, lsn: Lsn) -> Option<Lsn> {
        let uncommitted = self.committed.is_some_and(|c| c < self.acked);
        if self.is_drained() && !uncommitted && lsn > self.acked {
            self.acked = lsn;
            if let Some(committed) = &mut self.committed {
                *committed = lsn;
            }
            Some(lsn)
        } else {
            None
        }
    }

    /// Number of transactions registered and not yet fully acknowledged.
    pub fn pending_transactions(&self) -> usize {
        self.pending.len()
    }

    fn find(&mut self, txn: TxnId) -> Option<&mut PendingTxn> {
        // Ids are handed out in order, so the index is the offset from the front.
        let front = self.pending.front()?.id.0;
        let index = usize::try_from(txn.0.checked_sub(front)?).ok()?;
        self.pending.get_mut(index).filter(|t| t.id == txn)
    }

    fn advance(&mut self) -> Option<Lsn> {
        if self.failed {
            return None;
        }
        let before = self.acked();
        while let Some(front) = self.pending.front() {
            match front.end_lsn {
                Some(end) if front.outstanding == 0 => {
                    debug_assert!(
                        end >= self.acked,
                        "commit order violated: {end} < {}",
                        self.acked
                    );
                    self.acked = self.acked.max(end);
                    self.pending.pop_front();
                }
                _ => break,
            }
        }
        (self.acked() > before).then(|| self.acked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u64) -> Lsn {
        Lsn::new(n)
    }

    #[test]
    fn confirms_only_after_commit_and_all_deliveries() {
        let mut t = AckTracker::new(lsn(10));
        let a = t.begin();
        t.sent(a);
        t.sent(a);
        assert_eq!(t.delivered(a), None, "one message still outstanding");
        assert_eq!(t.delivered(a), None, "commit not seen yet");
        assert_eq!(t.commit(a, lsn(20)), Some(lsn(20)));
        assert!(t.is_drained());
    }

    #[test]
    fn later_transaction_acked_first_waits_for_earlier() {
        let mut t = AckTracker::new(lsn(0));
        let a = t.begin();
        t.sent(a);
        assert_eq!(t.commit(a, lsn(100)), None);
        let b = t.begin();
        t.sent(b);
        assert_eq!(t.commit(b, lsn(200)), None);
        assert_eq!(t.delivered(b), None, "a is still outstanding");
        assert_eq!(t.acked(), lsn(0));
        assert_eq!(t.delivered(a), Some(lsn(200)), "both complete at once");
    }

    #[test]
    fn empty_transaction_confirms_at_commit() {
        let mut t = AckTracker::new(lsn(5));
        let a = t.begin();
        assert_eq!(t.commit(a, lsn(9)), Some(lsn(9)));
    }

    #[test]
    fn failure_freezes_progress() {
        let mut t = AckTracker::new(lsn(0));
        let a = t.begin();
        t.sent(a);
        t.sent(a);
        t.commit(a, lsn(50));
        t.failed(a);
        assert_eq!(t.delivered(a), None);
        assert_eq!(t.acked(), lsn(0));
        assert!(!t.is_drained());
        assert_eq!(t.advance_idle(lsn(99)), None);
    }

    #[test]
    fn idle_advance_only_when_drained() {
        let mut t = AckTracker::new(lsn(0));
        let a = t.begin();
        assert_eq!(t.advance_idle(lsn(30)), None, "a transaction is open");
        t.commit(a, lsn(10));
        assert_eq!(t.advance_idle(lsn(30)), Some(lsn(30)));
        assert_eq!(t.advance_idle(lsn(20)), None, "never moves backwards");
    }

    #[test]
    fn transactional_waits_for_the_kafka_commit() {
        let mut t = AckTracker::transactional(lsn(10), lsn(10));
        let a = t.begin();
        t.sent(a);
        t.commit(a, lsn(20));
        assert_eq!(t.delivered(a), None, "delivered but not committed in Kafka");
        assert_eq!(t.acked(), lsn(10));
        assert_eq!(t.delivered_through(), lsn(20));
        assert_eq!(
            t.advance_idle(lsn(30)),
            None,
            "uncommitted data holds the slot"
        );
        assert_eq!(t.kafka_committed(lsn(20)), Some(lsn(20)));
        assert_eq!(t.advance_idle(lsn(30)), Some(lsn(30)));
        assert_eq!(t.acked(), lsn(30));
    }

    #[test]
    fn transactional_commit_before_delivery_report_waits_for_it() {
        let mut t = AckTracker::transactional(lsn(0), lsn(0));
        let a = t.begin();
        t.sent(a);
        t.commit(a, lsn(20));
        assert_eq!(
            t.kafka_committed(lsn(20)),
            None,
            "delivery report not seen yet"
        );
        assert_eq!(t.delivered(a), Some(lsn(20)));
    }

    #[test]
    fn transactional_starts_at_the_recorded_progress() {
        // The progress topic holds transactions up to 50 the slot has not confirmed.
        let mut t = AckTracker::transactional(lsn(10), lsn(50));
        assert_eq!(t.acked(), lsn(10));
        // The stream skips them: registered without messages.
        let a = t.begin();
        assert_eq!(t.commit(a, lsn(50)), Some(lsn(50)));
        let b = t.begin();
        t.sent(b);
        t.commit(b, lsn(60));
        assert_eq!(t.delivered(b), None);
        assert_eq!(t.acked(), lsn(50));
    }

    /// Random interleavings of sends, commits and acks: the acknowledged
    /// position is always the end of the longest fully acknowledged prefix.
    #[test]
    fn acked_is_longest_complete_prefix_under_random_order() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _round in 0..200 {
            let mut t = AckTracker::new(lsn(0));
            let txns: Vec<(TxnId, u64)> = (0..8)
                .map(|i| {
                    let id = t.begin();
                    let messages = rand(4) as u64;
                    for _ in 0..messages {
                        t.sent(id);
                    }
                    t.commit(id, lsn((i + 1) * 10));
                    (id, messages)
                })
                .collect();
            let mut remaining: Vec<u64> = txns.iter().map(|(_, m)| *m).collect();
            let mut order: Vec<usize> = txns
                .iter()
                .enumerate()
                .flat_map(|(i, (_, m))| std::iter::repeat_n(i, *m as usize))
                .collect();
            while !order.is_empty() {
                let i = order.swap_remove(rand(order.len()));
                t.delivered(txns[i].0);
                remaining[i] -= 1;
                let complete = remaining.iter().take_while(|r| **r == 0).count() as u64;
                assert_eq!(t.acked(), lsn(complete * 10));
            }
            assert_eq!(t.acked(), lsn(80));
            assert!(t.is_drained());
        }
    }
}
