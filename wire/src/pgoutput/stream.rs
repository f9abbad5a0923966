//! Protocol version 2's streamed transactions: the Stream Start, Commit and
//! Abort messages, and the messages inside a stream block, which carry the
//! xid of the (sub)transaction that made them after their tag (see the
//! table in [`super`]). Same rules as the rest of the decoder: no panics,
//! no indexing, bounds-checked reads.

#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

use bytes::Bytes;

use super::{decode_body, Begin, Commit, DecodeError, DecodeErrorKind, LogicalMessage, Reader};
use crate::lsn::Lsn;

/// Start of a stream block: changes of transaction `xid` (or its
/// subtransactions) follow until [`LogicalMessage::StreamStop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStart {
    /// The top-level transaction's id.
    pub xid: u32,
    /// Whether this is the transaction's first block (after a reconnect the
    /// server streams a transaction again from its first block).
    pub first_segment: bool,
}

/// A streamed transaction committed: its blocks, minus aborted
/// subtransactions, are the transaction, as if sent between a [`Begin`]
/// and a [`Commit`] with these positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCommit {
    /// The top-level transaction's id.
    pub xid: u32,
    /// Currently unused by PostgreSQL (always 0).
    pub flags: u8,
    /// LSN of the commit record ([`Begin::final_lsn`] of the same
    /// transaction sent whole).
    pub commit_lsn: Lsn,
    /// LSN just past the commit record.
    pub end_lsn: Lsn,
    /// Commit time in microseconds since 2000-01-01 UTC.
    pub commit_time_micros: i64,
}

impl StreamCommit {
    /// The [`Begin`] the same transaction would have started with unstreamed.
    pub const fn begin(&self) -> Begin {
        Begin {
            final_lsn: self.commit_lsn,
            commit_time_micros: self.commit_time_micros,
            xid: self.xid,
        }
    }

    /// The [`Commit`] the same transaction would have ended with unstreamed.
    pub const fn commit(&self) -> Commit {
        Commit {
            flags: self.flags,
            commit_lsn: self.commit_lsn,
            end_lsn: self.end_lsn,
            commit_time_micros: self.commit_time_micros,
        }
    }
}

/// A streamed transaction aborted (`subxid == xid`), or one of its
/// subtransactions did (`ROLLBACK TO SAVEPOINT`): only that
/// subtransaction's changes are void.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamAbort {
    /// The top-level transaction's id.
    pub xid: u32,
    /// The aborted (sub)transaction's id.
    pub subxid: u32,
    /// With `streaming 'parallel'` (protocol 4): the abort record's LSN and
    /// time (microseconds since 2000-01-01 UTC).
    pub abort: Option<(Lsn, i64)>,
}

impl StreamAbort {
    /// Whether the whole transaction aborted, not just a subtransaction.
    pub const fn is_top_level(&self) -> bool {
        self.xid == self.subxid
    }
}

/// What a message inside a stream block is, from its first bytes
/// ([`stream_block_entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEntry {
    /// `E`: the block ends.
    Stop,
    /// A message of the block's transaction, made by (sub)transaction `xid`
    /// (`None` for Origin, which carries none); [`decode_streamed`] reads it.
    Change {
        /// The (sub)transaction that made it.
        xid: Option<u32>,
    },
}

/// The tags that carry a (sub)transaction xid inside a stream block.
const fn has_stream_xid(tag: u8) -> bool {
    matches!(tag, b'R' | b'Y' | b'I' | b'U' | b'D' | b'T' | b'M')
}

/// Reads what a message inside a stream block is, without decoding it: the
/// block's end, or a message of its transaction and the (sub)transaction
/// that made it. Anything else (a Begin, another Stream Start, ...) is an
/// error: the server never sends it inside a block.
///
/// ```
/// use pgcdc_wire::lsn::Lsn;
/// use pgcdc_wire::pgoutput::{stream_block_entry, BlockEntry};
///
/// // An insert made by subtransaction 743 (0x2e7), then the block's end.
/// let insert = b"I\0\0\x02\xe7\0\0\x40\0N\0\0";
/// assert_eq!(stream_block_entry(insert, Lsn::ZERO), Ok(BlockEntry::Change { xid: Some(743) }));
/// assert_eq!(stream_block_entry(b"E", Lsn::ZERO), Ok(BlockEntry::Stop));
/// ```
pub fn stream_block_entry(data: &[u8], lsn: Lsn) -> Result<BlockEntry, DecodeError> {
    let bytes = Bytes::copy_from_slice(data.get(..5).unwrap_or(data));
    let mut r = Reader::new(&bytes, lsn);
    let tag = r.u8("message tag")?;
    r.tag = Some(tag);
    match tag {
        b'E' if data.len() == 1 => Ok(BlockEntry::Stop),
        b'E' => Err(r.error_at(
            1,
            DecodeErrorKind::TrailingBytes(data.len().saturating_sub(1)),
        )),
        b'O' => Ok(BlockEntry::Change { xid: None }),
        _ if has_stream_xid(tag) => Ok(BlockEntry::Change {
            xid: Some(r.u32("streamed transaction id")?),
        }),
        _ => Err(r.invalid(0, STREAM_BLOCK_TAG, tag)),
    }
}

const STREAM_BLOCK_TAG: &str = "a message allowed inside a stream block";

/// Decodes one message of a stream block (not its Stream Stop): the same
/// message [`decode`](super::decode) would read had the transaction been sent whole, once
/// the (sub)transaction xid after its tag is skipped.
pub fn decode_streamed(data: &Bytes, lsn: Lsn) -> Result<LogicalMessage, DecodeError> {
    let mut r = Reader::new(data, lsn);
    let tag = r.u8("message tag")?;
    r.tag = Some(tag);
    if has_stream_xid(tag) {
        r.u32("streamed transaction id")?;
    } else if tag != b'O' {
        return Err(r.invalid(0, STREAM_BLOCK_TAG, tag));
    }
    let message = decode_body(&mut r, tag)?;
    r.finish()?;
    Ok(message)
}
