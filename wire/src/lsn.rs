//! Log sequence numbers: positions in the PostgreSQL write-ahead log.
//!
//! An [`Lsn`] is a 64-bit byte offset into the WAL, written by Postgres as two
//! hexadecimal halves `X/Y`. It is the one currency in which the connector
//! talks about progress: the LSN a change was *received* at, the commit LSN
//! whose messages Kafka *acknowledged*, and the LSN *confirmed* to the slot.
//! Those three are kept under distinct names everywhere; this type only makes
//! sure none of them travels as a bare `u64`.

use std::fmt;
use std::str::FromStr;

/// A position in the write-ahead log.
///
/// ```
/// use pgcdc_wire::lsn::Lsn;
///
/// let lsn: Lsn = "16/B374D848".parse().unwrap();
/// assert_eq!(lsn.as_u64(), 0x16_B374_D848);
/// assert_eq!(lsn.to_string(), "16/B374D848");
/// assert!(Lsn::ZERO < lsn);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(u64);

impl Lsn {
    /// The invalid LSN, `0/0`: "no position yet".
    pub const ZERO: Lsn = Lsn(0);

    /// Wraps a raw WAL byte offset.
    pub const fn new(raw: u64) -> Self {
        Lsn(raw)
    }

    /// The raw WAL byte offset.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Whether this is the invalid LSN `0/0`.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Bytes of WAL from `earlier` to `self`, zero when `earlier` is ahead.
    pub const fn bytes_since(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl fmt::Debug for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lsn({self})")
    }
}

/// An LSN string that is not of the form `X/Y` with hexadecimal halves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid LSN {0:?}: expected two hexadecimal numbers separated by '/', like 16/B374D848")]
pub struct ParseLsnError(String);

impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseLsnError(s.to_owned());
        let (hi, lo) = s.split_once('/').ok_or_else(err)?;
        let hi = u32::from_str_radix(hi, 16).map_err(|_| err())?;
        let lo = u32::from_str_radix(lo, 16).map_err(|_| err())?;
        Ok(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for raw in [0u64, 1, 0xFFFF_FFFF, 0x1_0000_0000, u64::MAX] {
            let lsn = Lsn::new(raw);
            assert_eq!(lsn.to_string().parse::<Lsn>(), Ok(lsn));
        }
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in ["", "0", "0/", "/0", "G/0", "0/0/0", "100000000/0", " 0/0"] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn bytes_since_saturates() {
        assert_eq!(Lsn::new(10).bytes_since(Lsn::new(4)), 6);
        assert_eq!(Lsn::new(4).bytes_since(Lsn::new(10)), 0);
    }
}
