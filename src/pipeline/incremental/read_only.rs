//! Read-only incremental snapshots (`--read-only`, Debezium's `read.only`):
//! the chunk's window without writing watermarks, sans-IO.
//!
//! The read-write mode learns where a chunk sits in the stream from two
//! rows it writes to the signal table. Here nothing is written: the chunk
//! is read in a REPEATABLE READ transaction whose first statement also
//! returns `pg_current_snapshot()` (the MVCC snapshot the chunk is read
//! with: `xmin:xmax:xip,...`) and `pg_current_wal_insert_lsn()`, the
//! *high mark*. That pair says, for every streamed transaction, whether the
//! chunk already contains its changes, and where in the stream the chunk's
//! rows can go:
//!
//! - a transaction the snapshot **sees** committed before the chunk was
//!   read ([PostgreSQL: pg_current_snapshot](https://www.postgresql.org/docs/current/functions-info.html#FUNCTIONS-PG-SNAPSHOT-PARTS)):
//!   the chunk holds its changes, or newer ones;
//! - a transaction the snapshot **does not see** (xid at or past `xmax`, or
//!   listed in `xip`) committed after the read: its changes are newer than
//!   the chunk's rows.
//!
//! Every transaction the snapshot sees had inserted its commit record
//! before the snapshot was taken, so before the high mark: once the stream
//! has read up to the high mark (a Commit ending there or later, or a
//! keepalive between transactions saying so), every one of them has been
//! streamed. That is where the chunk is emitted (in a transaction of its
//! own at the position read, as the kafka channel's blocking snapshot
//! does). Until then, a change of the chunk's table by a transaction the
//! snapshot does not see removes its key from the buffer, exactly as a
//! change between the watermarks does in the read-write mode: the newer
//! streamed version is emitted instead, and nothing newer can have been
//! emitted before a row that is emitted. Changes by transactions the
//! snapshot sees leave the buffer alone (the row read is at least as new).
//!
//! Which streamed transactions the snapshot sees, and what happens to a
//! chunk whose snapshot misses one the stream already carried, is the same
//! in both modes ([`super::visibility`]).
//!
//! Debezium's PostgreSQL connector (`PostgresReadOnlyIncrementalSnapshotChangeEventSource`)
//! takes `pg_current_snapshot()` before and after the select and closes
//! the window when a streamed transaction's xid reaches the second
//! snapshot's `xmax`. Transaction ids are assigned at first write, not in
//! commit order, so an xid says little about where a transaction's commit
//! is in the stream: a long transaction that committed late carries a
//! small xid. The WAL position says exactly that, which is why the high
//! mark is one. Debezium also calls `pg_current_xact_id()`, which assigns
//! a transaction id (a commit record in the WAL; an error on a standby);
//! nothing here does.
//!
//! On a hot standby `pg_current_snapshot()` lists no `xip` (a snapshot
//! taken during recovery keeps its running xids elsewhere), so read-only
//! snapshots are refused there.

use crate::lsn::Lsn;

/// The end of the WAL record before `insert`, the server's insert position
/// (`pg_current_wal_insert_lsn()`): the same position, unless it sits just
/// past a page header (of `block` bytes pages, `segment` bytes segments),
/// where the record before it ended at the page's start. The stream reports
/// record ends, so that is the position it reaches.
pub(super) fn high_mark(insert: Lsn, block: u64, segment: u64) -> Lsn {
    /// `SizeOfXLogShortPHD` and `SizeOfXLogLongPHD` on 64-bit servers.
    const SHORT_HEADER: u64 = 24;
    const LONG_HEADER: u64 = 40;
    let at = insert.as_u64();
    if block == 0 || segment == 0 {
        return insert;
    }
    // A segment's first page has the long header, the others the short one.
    let header = match at % segment < block {
        true => LONG_HEADER,
        false => SHORT_HEADER,
    };
    match at % block == header {
        true => Lsn::new(at - header),
        false => insert,
    }
}

/// What a read-only snapshot keeps besides the window: the chunk's high
/// mark, keepalive pacing, and the progress last recorded.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// Once the stream has read this far, every transaction the chunk's
    /// snapshot sees has been streamed: the chunk's rows may go.
    pub(super) high: Option<Lsn>,
    /// When to ask the server for a keepalive while the chunk waits for
    /// its high mark ([`super::reply`]).
    pub(super) reply: super::reply::Pacing,
    /// The progress last written to the progress topic, under
    /// at-least-once ([`super::read_only_progress`]).
    pub(super) recorded: Option<crate::source::signal::Progress>,
}

impl Streamed {
    /// Whether the stream, having read up to `received` between
    /// transactions, has passed the chunk's high mark.
    pub(super) fn passed_high_mark(&self, received: Lsn) -> bool {
        self.high.is_some_and(|high| received >= high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_mark_steps_back_over_a_page_header() {
        let (block, segment) = (8192, 16 << 20);
        let lsn = |raw: u64| Lsn::new(raw);
        assert_eq!(high_mark(lsn(8192 * 3 + 24), block, segment), lsn(8192 * 3));
        assert_eq!(
            high_mark(lsn(segment * 2 + 40), block, segment),
            lsn(segment * 2)
        );
        assert_eq!(
            high_mark(lsn(8192 * 3 + 64), block, segment),
            lsn(8192 * 3 + 64)
        );
        assert_eq!(
            high_mark(lsn(segment + 24), block, segment),
            lsn(segment + 24),
            "a segment's first page has the long header"
        );
    }

    #[test]
    fn a_chunk_waits_for_its_high_mark() {
        let mut streamed = Streamed::default();
        assert!(!streamed.passed_high_mark(Lsn::new(5000)), "no chunk");
        streamed.high = Some(Lsn::new(1000));
        assert!(!streamed.passed_high_mark(Lsn::new(999)));
        assert!(streamed.passed_high_mark(Lsn::new(1000)));
    }
}
