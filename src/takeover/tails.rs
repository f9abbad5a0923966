//! Debezium's last record of a partition, read back at a takeover, so that
//! the records Debezium produced after its last stored offset (its
//! unflushed window) are not sent again either.
//!
//! Debezium's records carry `source.sequence` = `["<lsn_commit>","<lsn>"]`:
//! where the transaction before theirs ended, and the change's own
//! position. Kafka keeps a partition in the order Debezium produced it (one
//! request in flight, the task failing at the first produce error), so
//! when a partition's last record is Debezium's record `d`, every record
//! Debezium produced to that partition before `d` is there. A replayed
//! change `e` of transaction `T` came before `d` when
//! - `T` committed before `d`'s transaction: `final_lsn(T) < d.lsn_commit`;
//! - or `T` is `d`'s transaction (the one that follows `d.lsn_commit`: its
//!   predecessor in the stream ended at or before it) and `e` is an earlier
//!   change (`e.lsn < d.lsn`), or `d` itself (the same position and key).
//!
//! Only JSON values are read (with or without schemas); an Avro record
//! proves nothing, and its window is sent again.

use crate::lsn::Lsn;

/// The place of a replayed transaction in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnPlace {
    /// Where the transaction before it in the stream ended (the attempt's
    /// start position for the first one).
    pub previous_end: Lsn,
    /// Its Begin's `final_lsn`: where its commit record starts.
    pub final_lsn: Lsn,
}

/// What a Debezium record at the end of a partition says of its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebeziumTail {
    /// `source.sequence[0]`: where the transaction before it ended.
    pub last_commit: Lsn,
    /// `source.lsn`, `source.sequence[1]`.
    pub lsn: Lsn,
    /// The record's key bytes.
    pub key: Option<Vec<u8>>,
}

impl DebeziumTail {
    /// Reads a Debezium change record (JsonConverter, with or without
    /// schemas); `None` for anything else.
    pub fn parse(key: Option<&[u8]>, value: &[u8]) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_slice(value).ok()?;
        let envelope = value.get("payload").unwrap_or(&value);
        let sequence = envelope.get("source")?.get("sequence")?.as_str()?;
        let sequence: Vec<Option<String>> = serde_json::from_str(sequence).ok()?;
        let lsn = |i: usize| -> Option<Lsn> {
            match sequence.get(i)? {
                Some(n) => n.parse().ok().map(Lsn::new),
                None => Some(Lsn::ZERO),
            }
        };
        Some(DebeziumTail {
            last_commit: lsn(0)?,
            lsn: lsn(1).filter(|l| !l.is_zero())?,
            key: key.map(<[u8]>::to_vec),
        })
    }

    /// Whether the change at `lsn` of the transaction at `txn`, written as
    /// a record with `key`, came before this record (or is it).
    pub fn holds(&self, txn: TxnPlace, lsn: Lsn, key: Option<&[u8]>) -> bool {
        if txn.final_lsn < self.last_commit {
            return true;
        }
        let same_transaction = txn.previous_end <= self.last_commit;
        same_transaction && (lsn < self.lsn || (lsn == self.lsn && key == self.key.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(last_commit: u64, lsn: u64, key: &[u8]) -> DebeziumTail {
        DebeziumTail {
            last_commit: Lsn::new(last_commit),
            lsn: Lsn::new(lsn),
            key: Some(key.to_vec()),
        }
    }

    fn place(previous_end: u64, final_lsn: u64) -> TxnPlace {
        TxnPlace {
            previous_end: Lsn::new(previous_end),
            final_lsn: Lsn::new(final_lsn),
        }
    }

    #[test]
    fn reads_the_sequence_of_a_json_record_with_or_without_schemas() {
        let plain = br#"{"before":null,"after":{"id":1},"source":{"lsn":350,"sequence":"[\"300\",\"350\"]"},"op":"c"}"#;
        let tail = DebeziumTail::parse(Some(b"k"), plain).expect("a Debezium record");
        assert_eq!(tail.last_commit, Lsn::new(300));
        assert_eq!(tail.lsn, Lsn::new(350));
        let wrapped = br#"{"schema":{},"payload":{"source":{"sequence":"[null,\"350\"]"}}}"#;
        let first = DebeziumTail::parse(None, wrapped).expect("the first transaction's");
        assert_eq!(first.last_commit, Lsn::ZERO);
        assert_eq!(DebeziumTail::parse(None, b"\x00\x00\x00\x00\x01avro"), None);
        assert_eq!(DebeziumTail::parse(None, br#"{"source":{}}"#), None);
    }

    #[test]
    fn a_tail_holds_what_came_before_it_in_the_stream() {
        // d: change 350 of the transaction after the commit that ended at 300.
        let d = tail(300, 350, b"k");
        assert!(
            d.holds(place(100, 250), Lsn::new(900), Some(b"x")),
            "an earlier transaction"
        );
        assert!(
            d.holds(place(300, 390), Lsn::new(340), Some(b"x")),
            "an earlier change"
        );
        assert!(
            d.holds(place(300, 390), Lsn::new(350), Some(b"k")),
            "d itself"
        );
        assert!(
            !d.holds(place(300, 390), Lsn::new(350), Some(b"j")),
            "another row at the same position (a COPY): maybe not produced"
        );
        assert!(
            !d.holds(place(300, 390), Lsn::new(360), Some(b"k")),
            "a later change"
        );
        assert!(
            !d.holds(place(390, 450), Lsn::new(200), Some(b"k")),
            "a later transaction, whatever its change positions"
        );
    }
}
