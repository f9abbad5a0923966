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

/// The header that carries a record's [`Stamp`]. Its value is binary, the
/// byte `0x01` then, as unsigned LEB128 varints unless said otherwise:
/// the commit LSN, the ordinal, the fingerprint (8 bytes, big-endian), the
/// partition count, the `since` LSN and the `since` ordinal: 20-30 bytes
/// where the text written before (`<lsn>:<ordinal>@<fingerprint hex>#
/// <partitions>~<since lsn>:<since ordinal>`) took 40-50, on every record
/// (see BENCHMARKS.md, "The cost of skipping what Kafka has"). Stamps in
/// that text are still read, so tails written by an earlier version keep
/// proving what they hold; [`Stamp`]'s `Display` writes that text, for
/// people.
pub const POSITION_HEADER: &str = "pgcdc.position";

/// The first byte of a binary stamp; a text stamp starts with a hex digit.
const BINARY: u8 = 0x01;

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

impl fmt::Display for Stamp {
    /// The text stamps were written in before they were binary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{:016x}#{}~{}",
            self.position, self.fingerprint, self.partitions, self.since
        )
    }
}

impl Stamp {
    /// The header value.
    pub fn header_value(&self) -> Vec<u8> {
        let suffix = StampSuffix::new(self.fingerprint, self.partitions, self.since);
        suffix.value(self.position)
    }

    /// Reads a header value, binary or text; `None` if it is not one.
    pub fn parse(value: &[u8]) -> Option<Stamp> {
        match value.split_first() {
            Some((&BINARY, rest)) => Self::parse_binary(rest),
            _ => Self::parse_text(value),
        }
    }

    fn parse_binary(mut rest: &[u8]) -> Option<Stamp> {
        let lsn = read_varint(&mut rest)?;
        let ordinal = u32::try_from(read_varint(&mut rest)?).ok()?;
        let (fingerprint, tail) = rest.split_first_chunk::<8>()?;
        rest = tail;
        let partitions = i32::try_from(read_varint(&mut rest)?).ok()?;
        let since_lsn = read_varint(&mut rest)?;
        let since_ordinal = u32::try_from(read_varint(&mut rest)?).ok()?;
        rest.is_empty().then_some(Stamp {
            position: Position {
                lsn: Lsn::new(lsn),
                ordinal,
            },
            fingerprint: u64::from_be_bytes(*fingerprint),
            partitions,
            since: Position {
                lsn: Lsn::new(since_lsn),
                ordinal: since_ordinal,
            },
        })
    }

    /// A stamp as versions before the binary one wrote it.
    fn parse_text(value: &[u8]) -> Option<Stamp> {
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
/// written once: a stamp then costs the position's few bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StampSuffix(Vec<u8>);

/// A `u64` as an unsigned LEB128 varint is 10 bytes at most.
const VARINT_MAX: usize = 10;

impl StampSuffix {
    /// The fingerprint, the partition count and `since`, as
    /// [`POSITION_HEADER`] lays them out.
    pub fn new(fingerprint: u64, partitions: i32, since: Position) -> Self {
        let mut out = Vec::with_capacity(8 + 3 * VARINT_MAX);
        out.extend_from_slice(&fingerprint.to_be_bytes());
        // Never negative (a partition count); 0 if it were.
        push_varint(&mut out, u64::try_from(partitions).unwrap_or(0));
        push_varint(&mut out, since.lsn.as_u64());
        push_varint(&mut out, u64::from(since.ordinal));
        StampSuffix(out)
    }

    /// The header value of the record at `position`.
    pub fn value(&self, position: Position) -> Vec<u8> {
        let (lsn, ordinal) = (position.lsn.as_u64(), u64::from(position.ordinal));
        // Exactly as long as it is: a `Bytes` made of it takes the buffer
        // as it is, without a second allocation.
        let mut out = Vec::with_capacity(1 + varint_len(lsn) + varint_len(ordinal) + self.0.len());
        out.push(BINARY);
        push_varint(&mut out, lsn);
        push_varint(&mut out, ordinal);
        out.extend_from_slice(&self.0);
        debug_assert_eq!(out.len(), out.capacity(), "varint_len is exact");
        out
    }
}

/// How many bytes [`push_varint`] writes for `n`.
fn varint_len(n: u64) -> usize {
    let bits = 64 - n.leading_zeros();
    usize::try_from(bits.div_ceil(7).max(1)).unwrap_or(VARINT_MAX)
}

/// Appends `n` as an unsigned LEB128 varint.
fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Takes an unsigned LEB128 varint off the front of `rest`; `None` if it
/// is cut short or longer than a `u64`.
fn read_varint(rest: &mut &[u8]) -> Option<u64> {
    let bytes = *rest;
    let mut n: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(VARINT_MAX) {
        let bits = u64::from(byte & 0x7F);
        let shift = 7 * u32::try_from(i).ok()?;
        // The tenth byte holds the top bit only.
        if shift == 63 && bits > 1 {
            return None;
        }
        n |= bits << shift;
        if byte & 0x80 == 0 {
            *rest = bytes.get(i + 1..)?;
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Stamp {
        Stamp {
            position: at(0x016B_3748, 3),
            fingerprint: 0x9f86_d081_884c_7d65,
            partitions: 3,
            since: at(0x016B_0000, 0),
        }
    }

    #[test]
    fn a_stamp_reads_back_from_its_header() {
        let stamp = example();
        let value = stamp.header_value();
        let mut expected = vec![BINARY, 0xC8, 0xEE, 0xAC, 0x0B, 3];
        expected.extend_from_slice(&[0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x7d, 0x65]);
        expected.extend_from_slice(&[3, 0x80, 0x80, 0xAC, 0x0B, 0]);
        assert_eq!(value, expected);
        assert_eq!(value.len(), 20, "less than half the text's 42 bytes");
        assert_eq!(Stamp::parse(&value), Some(stamp));
    }

    /// Tails written before stamps were binary still prove what they hold;
    /// `Display` writes that text.
    #[test]
    fn a_text_stamp_of_earlier_versions_still_reads() {
        let text = "0/16B3748:3@9f86d081884c7d65#3~0/16B0000:0";
        assert_eq!(Stamp::parse(text.as_bytes()), Some(example()));
        assert_eq!(example().to_string(), text);
    }

    #[test]
    fn extreme_positions_read_back() {
        for (lsn, ordinal, partitions) in [
            (0, 0, 0),
            (0x7F, 127, 1),
            (0x80, 128, 128),
            (u64::MAX, u32::MAX, i32::MAX),
        ] {
            let stamp = Stamp {
                position: at(lsn, ordinal),
                fingerprint: u64::MAX,
                partitions,
                since: at(lsn, ordinal),
            };
            assert_eq!(Stamp::parse(&stamp.header_value()), Some(stamp), "{stamp}");
        }
    }

    #[test]
    fn broken_binary_stamps_are_not_stamps() {
        let value = example().header_value();
        for cut in 1..value.len() {
            assert_eq!(Stamp::parse(&value[..cut]), None, "cut at {cut}");
        }
        let mut longer = value.clone();
        longer.push(0);
        assert_eq!(Stamp::parse(&longer), None, "a byte too many");
        let mut too_big = vec![BINARY];
        too_big.extend_from_slice(&[0xFF; 9]);
        too_big.push(0x02);
        assert_eq!(Stamp::parse(&too_big), None, "an LSN past 64 bits");
        let mut negative = vec![BINARY, 1, 1];
        negative.extend_from_slice(&[0; 8]);
        negative.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08, 0, 0]);
        assert_eq!(Stamp::parse(&negative), None, "a partition count past i32");
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
    fn a_suffix_stamps_each_position_as_a_whole_stamp_would() {
        let since = at(0x10, 1);
        let suffix = StampSuffix::new(1, 2, since);
        for (lsn, ordinal) in [
            (0, 0),
            (0x0F, 9),
            (0x016B_3748, 3),
            (0x1_0000_0000, 4_294_967_295),
            (u64::MAX, 123_456),
        ] {
            let stamp = Stamp {
                position: at(lsn, ordinal),
                fingerprint: 1,
                partitions: 2,
                since,
            };
            let value = suffix.value(stamp.position);
            assert_eq!(value, stamp.header_value());
            assert_eq!(value.len(), value.capacity(), "made to its exact size");
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
