//! The rule that decides, per streamed transaction and change, whether
//! Debezium already produced it (see the parent module). Sans-IO: the read
//! loop asks, this answers from the offset alone.

use crate::lsn::Lsn;

use super::DebeziumOffset;

/// Debezium's resume point, for one attempt that streams from `start`.
#[derive(Debug, Clone)]
pub struct Resume {
    /// `lsn_commit`: transactions committed before it are Debezium's.
    commit: Lsn,
    /// Of the transaction that follows `commit`, what Debezium produced:
    /// `None` when none of it (its last message was a Commit, a Begin or a
    /// non-transactional message).
    inside: Option<Inside>,
    /// Where this attempt's stream starts: the predecessor of the first
    /// transaction streamed ended at or before it.
    start: Lsn,
}

#[derive(Debug, Clone, Copy)]
struct Inside {
    /// `lsn_proc`.
    through: Lsn,
    /// How many changes at `through` Debezium processed.
    at_through: u64,
    /// `txId`, to check the transaction is the one the offset names.
    xid: Option<u64>,
}

/// What Debezium produced of one streamed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnVerdict {
    /// All of it: it is not sent.
    Produced,
    /// Its changes up to a point ([`Through`]).
    Partly(Through),
    /// None of it.
    New,
}

/// Debezium produced the changes of the open transaction before `lsn`, and
/// `count` of those at `lsn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Through {
    lsn: Lsn,
    count: u64,
    seen_at_lsn: u64,
}

impl Through {
    /// Whether Debezium produced the change at `lsn` (asked once per
    /// change, in stream order).
    pub fn produced(&mut self, lsn: Lsn) -> bool {
        if lsn < self.lsn {
            return true;
        }
        if lsn == self.lsn && self.seen_at_lsn < self.count {
            self.seen_at_lsn += 1;
            return true;
        }
        false
    }
}

impl Resume {
    /// The rule for `offset`, for a stream that starts at `start`.
    pub fn new(offset: &DebeziumOffset, start: Lsn) -> Self {
        let commit = offset.commit();
        let message_type = offset.message_type.as_deref();
        let inside = match (offset.lsn_proc.map(Lsn::new), message_type) {
            (None, _) | (_, Some("COMMIT" | "BEGIN")) => None,
            // A non-transactional message is its own commit.
            (Some(proc), Some("MESSAGE")) if proc == commit => None,
            // An offset from before Debezium stored the message type: a
            // Commit's leaves `lsn_proc` at `lsn_commit`.
            (Some(proc), None) if proc == commit => None,
            (Some(proc), _) => Some(Inside {
                through: proc,
                at_through: offset.lsn_events_processed.unwrap_or(1).max(1),
                xid: offset.tx_id,
            }),
        };
        Resume {
            commit,
            inside,
            start,
        }
    }

    /// Where this attempt's stream starts.
    pub fn start(&self) -> Lsn {
        self.start
    }

    /// `lsn_commit`: where Debezium's last whole transaction ended.
    pub fn commit(&self) -> Lsn {
        self.commit
    }

    /// What Debezium produced of the transaction with commit position
    /// `final_lsn` (its Begin's) and `xid`; `previous_end` is where the
    /// previous transaction of the stream ended (`None` for the first one).
    pub fn transaction(&self, previous_end: Option<Lsn>, final_lsn: Lsn, xid: u32) -> TxnVerdict {
        if final_lsn < self.commit {
            return TxnVerdict::Produced;
        }
        let follows_commit = previous_end.unwrap_or(self.start) <= self.commit;
        match self.inside {
            Some(inside) if follows_commit => {
                if inside.xid.is_some_and(|x| x != u64::from(xid)) {
                    // Not the transaction the offset names: send it all
                    // (duplicates, never a loss).
                    tracing::warn!(
                        offset_xid = inside.xid,
                        xid,
                        %final_lsn,
                        "the transaction after Debezium's last commit is not the one its offset names; it is sent whole"
                    );
                    return TxnVerdict::New;
                }
                TxnVerdict::Partly(Through {
                    lsn: inside.through,
                    count: inside.at_through,
                    seen_at_lsn: 0,
                })
            }
            _ => TxnVerdict::New,
        }
    }

    /// Whether Debezium produced the non-transactional logical message at `lsn`.
    pub fn message(&self, lsn: Lsn) -> bool {
        lsn <= self.commit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(commit: u64, proc: u64, kind: &str, xid: u64) -> DebeziumOffset {
        DebeziumOffset {
            lsn: Some(proc),
            lsn_proc: Some(proc),
            lsn_commit: Some(commit),
            message_type: Some(kind.to_owned()),
            tx_id: Some(xid),
            ..DebeziumOffset::default()
        }
    }

    fn lsn(n: u64) -> Lsn {
        Lsn::new(n)
    }

    #[test]
    fn transactions_committed_before_lsn_commit_are_debeziums() {
        // Transactions end at 200 and 300; Debezium's offset is inside the
        // one after 300, at its change 350.
        let resume = Resume::new(&offset(300, 350, "UPDATE", 9), lsn(100));
        assert_eq!(resume.transaction(None, lsn(190), 7), TxnVerdict::Produced);
        assert_eq!(
            resume.transaction(Some(lsn(200)), lsn(290), 8),
            TxnVerdict::Produced
        );
        let TxnVerdict::Partly(mut through) = resume.transaction(Some(lsn(300)), lsn(390), 9)
        else {
            panic!("the transaction after lsn_commit is partly Debezium's");
        };
        // Its changes may lie below lsn_commit (it ran alongside the last one).
        assert!(through.produced(lsn(250)));
        assert!(through.produced(lsn(350)));
        assert!(!through.produced(lsn(350)), "a second change at lsn_proc");
        assert!(!through.produced(lsn(360)));
        assert_eq!(
            resume.transaction(Some(lsn(400)), lsn(450), 10),
            TxnVerdict::New
        );
    }

    #[test]
    fn the_first_streamed_transaction_follows_the_slot_position() {
        let resume = Resume::new(&offset(300, 350, "INSERT", 9), lsn(300));
        assert!(matches!(
            resume.transaction(None, lsn(390), 9),
            TxnVerdict::Partly(_)
        ));
        // The slot is past Debezium's stored offset (it confirmed a later
        // acknowledged record than the offset flush held): all is new.
        let behind = Resume::new(&offset(300, 350, "INSERT", 9), lsn(400));
        assert_eq!(behind.transaction(None, lsn(450), 10), TxnVerdict::New);
    }

    #[test]
    fn a_commit_begin_or_message_offset_leaves_the_next_transaction_whole() {
        for kind in ["COMMIT", "BEGIN"] {
            let resume = Resume::new(&offset(300, 300, kind, 9), lsn(100));
            assert_eq!(
                resume.transaction(Some(lsn(300)), lsn(390), 9),
                TxnVerdict::New,
                "{kind}"
            );
        }
        let message = Resume::new(&offset(300, 300, "MESSAGE", 0), lsn(100));
        assert!(message.message(lsn(300)));
        assert!(!message.message(lsn(301)));
        assert_eq!(
            message.transaction(Some(lsn(300)), lsn(390), 9),
            TxnVerdict::New
        );
    }

    #[test]
    fn another_transaction_id_is_sent_whole() {
        let resume = Resume::new(&offset(300, 350, "INSERT", 9), lsn(100));
        assert_eq!(
            resume.transaction(Some(lsn(300)), lsn(390), 12),
            TxnVerdict::New
        );
    }

    #[test]
    fn changes_sharing_lsn_proc_are_counted() {
        let mut copy = offset(300, 350, "INSERT", 9);
        copy.lsn_events_processed = Some(2);
        let resume = Resume::new(&copy, lsn(100));
        let TxnVerdict::Partly(mut through) = resume.transaction(None, lsn(390), 9) else {
            panic!("partly");
        };
        assert!(through.produced(lsn(350)));
        assert!(through.produced(lsn(350)));
        assert!(!through.produced(lsn(350)), "the third row of the COPY");
    }
}
