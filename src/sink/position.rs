//! Where a record comes from in the WAL, carried in a header so that a
//! restart can tell what Kafka already has (see [`super::tails`]).
//!
//! A streamed record's position is its transaction's commit position (the
//! `final_lsn` of its Begin; a message outside a transaction: its own LSN)
//! and its ordinal among the records sent for that transaction. Replaying
//! the same WAL with the same settings makes the same records in the same
//! order, so the pair names one record across runs, tombstones and logical
//! messages included. Positions order records the way the stream sends them.
//!
//! "With the same settings": the header also carries a fingerprint of the
//! build and of the settings that decide which records a transaction makes
//! ([`crate::config::RunConfig::output_fingerprint`]). A tail written under
//! another fingerprint proves nothing about this run's positions.

use std::fmt;

use crate::lsn::Lsn;

/// The header that carries a record's [`Position`] and the settings
/// fingerprint, as text: `<lsn>:<ordinal>@<fingerprint>`
/// (`0/16B3748:3@9f86d081884c7d65`), so that an operator can read it too.
pub const POSITION_HEADER: &str = "pgcdc.position";

/// A streamed record's place in the WAL; ordered as the stream sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The commit position of the record's transaction.
    pub lsn: Lsn,
    /// The record's place among its transaction's records, from 0.
    pub ordinal: u32,
}

impl Position {
    /// The header value, with the settings fingerprint.
    pub fn header_value(self, fingerprint: u64) -> Vec<u8> {
        format!("{self}@{fingerprint:016x}").into_bytes()
    }

    /// Reads a header value: the position and the fingerprint it was
    /// written under; `None` if it is not one.
    pub fn parse(value: &[u8]) -> Option<(Position, u64)> {
        let text = std::str::from_utf8(value).ok()?;
        let (position, fingerprint) = text.split_once('@')?;
        let (lsn, ordinal) = position.rsplit_once(':')?;
        let position = Position {
            lsn: lsn.parse().ok()?,
            ordinal: ordinal.parse().ok()?,
        };
        Some((position, u64::from_str_radix(fingerprint, 16).ok()?))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.lsn, self.ordinal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_from_its_header() {
        let position = Position {
            lsn: Lsn::new(0x016B_3748),
            ordinal: 3,
        };
        let value = position.header_value(0x9f86_d081_884c_7d65);
        assert_eq!(value, b"0/16B3748:3@9f86d081884c7d65");
        assert_eq!(
            Position::parse(&value),
            Some((position, 0x9f86_d081_884c_7d65))
        );
    }

    #[test]
    fn other_header_values_are_not_positions() {
        for value in [
            &b""[..],
            b"0/16B3748:3",
            b"0/16B3748@1",
            b"0/16B3748:@1",
            b"x:1@1",
            b"0/1:-1@1",
            b"0/1:1@zz",
            b"\xff",
        ] {
            assert_eq!(Position::parse(value), None, "{value:?}");
        }
    }

    #[test]
    fn positions_order_by_transaction_then_ordinal() {
        let at = |lsn, ordinal| Position {
            lsn: Lsn::new(lsn),
            ordinal,
        };
        assert!(at(10, 5) < at(11, 0));
        assert!(at(10, 1) < at(10, 2));
    }
}
