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
//! The header ([`Stamp`]) also says under what the record was written:
//! - a fingerprint of the build and of the settings that decide which
//!   records a transaction makes
//!   ([`crate::config::RunConfig::output_fingerprint`]); a tail written
//!   under another one proves nothing about this run's positions;
//! - the topic's partition count the record's partition was chosen with,
//!   and the position of the first record of the topic that its attempt
//!   handled: every record of the topic between that one and this one was
//!   partitioned with the same count, so a keyed record among them went to
//!   the partition its key gives under that count.

use std::fmt;

use crate::lsn::Lsn;

/// The header that carries a record's [`Stamp`], as text:
/// `<lsn>:<ordinal>@<fingerprint>#<partitions>~<since lsn>:<since ordinal>`
/// (`0/16B3748:3@9f86d081884c7d65#3~0/16B0000:0`), so that an operator can
/// read it too.
pub const POSITION_HEADER: &str = "pgcdc.position";

/// A streamed record's place in the WAL; ordered as the stream sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The commit position of the record's transaction.
    pub lsn: Lsn,
    /// The record's place among its transaction's records, from 0.
    pub ordinal: u32,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.lsn, self.ordinal)
    }
}

impl std::str::FromStr for Position {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (lsn, ordinal) = text.rsplit_once(':').ok_or(())?;
        Ok(Position {
            lsn: lsn.parse().map_err(|_| ())?,
            ordinal: ordinal.parse().map_err(|_| ())?,
        })
    }
}

/// A position from a raw LSN, for tests.
#[cfg(test)]
pub(crate) fn at(lsn: u64, ordinal: u32) -> Position {
    Position {
        lsn: Lsn::new(lsn),
        ordinal,
    }
}

/// What the position header of one record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub position: Position,
    /// The build's and the output settings' fingerprint.
    pub fingerprint: u64,
    /// The topic's partition count the record was partitioned with; 0
    /// when its partition was not chosen by its key here (a record without
    /// a key, or one sent before the topic existed): the record then proves
    /// only what every partition's tail proves together.
    pub partitions: i32,
    /// The first record of the topic that the writing attempt handled.
    pub since: Position,
}

impl Stamp {
    /// The header value.
    pub fn header_value(&self) -> Vec<u8> {
        let suffix = StampSuffix::new(self.fingerprint, self.partitions, self.since);
        suffix.value(self.position)
    }

    /// Reads a header value; `None` if it is not one.
    pub fn parse(value: &[u8]) -> Option<Stamp> {
        let text = std::str::from_utf8(value).ok()?;
        let (position, rest) = text.split_once('@')?;
        let (fingerprint, rest) = rest.split_once('#')?;
        let (partitions, since) = rest.split_once('~')?;
        Some(Stamp {
            position: position.parse().ok()?,
            fingerprint: u64::from_str_radix(fingerprint, 16).ok()?,
            partitions: partitions.parse().ok().filter(|n| *n >= 0)?,
            since: since.parse().ok()?,
        })
    }
}

/// What follows the position in the header value of every record an
/// attempt stamps alike (same fingerprint, partition count and `since`),
/// written once: a stamp then costs the position's few digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StampSuffix(Vec<u8>);

impl StampSuffix {
    /// `@<fingerprint>#<partitions>~<since>`.
    pub fn new(fingerprint: u64, partitions: i32, since: Position) -> Self {
        StampSuffix(format!("@{fingerprint:016x}#{partitions}~{since}").into_bytes())
    }

    /// The header value of the record at `position`.
    pub fn value(&self, position: Position) -> Vec<u8> {
        // "FFFFFFFF/FFFFFFFF:4294967295" is 28 bytes at most.
        let mut out = Vec::with_capacity(28 + self.0.len());
        let lsn = position.lsn.as_u64();
        push_hex(&mut out, lsn >> 32);
        out.push(b'/');
        push_hex(&mut out, lsn & 0xFFFF_FFFF);
        out.push(b':');
        push_decimal(&mut out, position.ordinal);
        out.extend_from_slice(&self.0);
        out
    }
}

/// `n` in upper-case hexadecimal without leading zeros, as
/// [`Lsn`]'s `Display` writes each half.
fn push_hex(out: &mut Vec<u8>, n: u64) {
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        let nibble = (n >> (i * 4)) & 0xF;
        out.push(b"0123456789ABCDEF"[nibble as usize]);
    }
}

fn push_decimal(out: &mut Vec<u8>, n: u32) {
    let mut digits = [0u8; 10];
    let mut rest = n;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_from_its_header() {
        let stamp = Stamp {
            position: at(0x016B_3748, 3),
            fingerprint: 0x9f86_d081_884c_7d65,
            partitions: 3,
            since: at(0x016B_0000, 0),
        };
        let value = stamp.header_value();
        assert_eq!(value, b"0/16B3748:3@9f86d081884c7d65#3~0/16B0000:0");
        assert_eq!(Stamp::parse(&value), Some(stamp));
    }

    /// A record without a key is stamped with no partition count; its
    /// stamp still reads back, so that a tail of such records counts for
    /// the every-partition proof (before, it read as no stamp at all, and
    /// a keyless table's replay was always sent again).
    #[test]
    fn a_stamp_without_a_partition_count_reads_back() {
        let stamp = Stamp {
            position: at(0x016B_3748, 3),
            fingerprint: 1,
            partitions: 0,
            since: at(0x016B_0000, 0),
        };
        assert_eq!(Stamp::parse(&stamp.header_value()), Some(stamp));
    }

    #[test]
    fn positions_are_written_as_display_writes_them() {
        let suffix = StampSuffix::new(1, 2, at(0, 0));
        for (lsn, ordinal) in [
            (0, 0),
            (0x0F, 9),
            (0x10, 10),
            (0x016B_3748, 3),
            (0x1_0000_0000, 4_294_967_295),
            (u64::MAX, 123_456),
        ] {
            let position = at(lsn, ordinal);
            let expected = format!("{position}@0000000000000001#2~0/0:0");
            assert_eq!(String::from_utf8(suffix.value(position)).unwrap(), expected);
        }
    }

    #[test]
    fn other_header_values_are_not_stamps() {
        for value in [
            &b""[..],
            b"0/16B3748:3",
            b"0/16B3748:3@1",
            b"0/16B3748:3@1#3",
            b"0/16B3748:3@1#-1~0/1:0",
            b"0/16B3748:@1#3~0/1:0",
            b"x:1@1#3~0/1:0",
            b"0/1:-1@1#3~0/1:0",
            b"0/1:1@zz#3~0/1:0",
            b"0/1:1@1#3~0/1",
            b"\xff",
        ] {
            assert_eq!(Stamp::parse(value), None, "{value:?}");
        }
    }

    #[test]
    fn positions_order_by_transaction_then_ordinal() {
        assert!(at(10, 5) < at(11, 0));
        assert!(at(10, 1) < at(10, 2));
    }
}
