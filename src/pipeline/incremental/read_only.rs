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
//! # The transaction streamed before the read, and still invisible
//!
//! A transaction's commit record is flushed (and may be streamed) before
//! the transaction leaves the server's proc array: for a moment, or for a
//! synchronous standby's round trip, a snapshot does not see a transaction
//! the stream already carried. Its changes were emitted before the chunk
//! was read, and the chunk would hold older rows of its keys. So the xids
//! of streamed transactions are remembered until a snapshot sees them
//! ([`Streamed`]); a chunk whose snapshot misses one of them is dropped and
//! read again a little later.
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

use std::time::{Duration, Instant};

use crate::lsn::Lsn;

/// A `pg_current_snapshot()` value: 64-bit transaction ids (epoch and xid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PgSnapshot {
    xmin: u64,
    xmax: u64,
    /// In progress when the snapshot was taken, sorted.
    xip: Vec<u64>,
}

impl PgSnapshot {
    /// Parses the text form `xmin:xmax:xip1,xip2,...`.
    pub(super) fn parse(text: &str) -> Option<PgSnapshot> {
        let mut parts = text.trim().splitn(3, ':');
        let xmin = parts.next()?.parse().ok()?;
        let xmax = parts.next()?.parse().ok()?;
        let xip = match parts.next()? {
            "" => Vec::new(),
            list => list
                .split(',')
                .map(|x| x.parse().ok())
                .collect::<Option<Vec<u64>>>()?,
        };
        let mut snapshot = PgSnapshot { xmin, xmax, xip };
        snapshot.xip.sort_unstable();
        (xmin <= xmax).then_some(snapshot)
    }

    /// The 64-bit id of `xid` (a 32-bit id from the stream), taken as the
    /// one within 2^31 of `xmax`, as the server widens them.
    fn widen(&self, xid: u32) -> u64 {
        let delta = i64::from(xid.wrapping_sub(self.xmax as u32) as i32);
        (self.xmax as i64).saturating_add(delta).max(0) as u64
    }

    /// Whether a committed transaction `xid` had committed for this
    /// snapshot (its changes are in what the snapshot reads).
    pub(super) fn sees(&self, xid: u32) -> bool {
        let xid = self.widen(xid);
        xid < self.xmin || (xid < self.xmax && self.xip.binary_search(&xid).is_err())
    }
}

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

/// What the read-only window knows about the chunk in flight.
#[derive(Debug, Clone)]
pub(super) struct Marks {
    /// The snapshot the chunk was read with.
    pub(super) snapshot: PgSnapshot,
    /// Once the stream has read this far, every transaction the snapshot
    /// sees has been streamed: the chunk's rows may go.
    pub(super) high: Lsn,
}

/// How long a chunk dropped for a transaction streamed before its read but
/// not visible to it waits before it is read again.
const RETRY_AFTER: Duration = Duration::from_millis(50);

/// Streamed transactions that no snapshot has seen yet: their xids, and
/// the transaction being read.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// The open transaction's xid.
    current: Option<u32>,
    /// Committed and streamed, not yet seen by a snapshot.
    unseen: Vec<u32>,
    /// The marks of the chunk in flight.
    pub(super) marks: Option<Marks>,
    /// No chunk is read before this (after a dropped one).
    not_before: Option<Instant>,
    /// When to ask the server for a keepalive while the chunk waits for
    /// its high mark ([`super::reply`]).
    pub(super) reply: super::reply::Pacing,
    /// The progress last written to the progress topic, under
    /// at-least-once ([`super::read_only_progress`]).
    pub(super) recorded: Option<crate::source::signal::Progress>,
}

/// More unseen xids than this and a snapshot is taken just to forget the
/// ones it sees, so the list stays short when no chunk is read for a while.
pub(super) const UNSEEN_LIMIT: usize = 4096;

impl Streamed {
    /// A transaction `xid` begins.
    pub(super) fn began(&mut self, xid: u32) {
        self.current = Some(xid);
    }

    /// The open transaction committed: it is streamed.
    pub(super) fn committed(&mut self) {
        if let Some(xid) = self.current.take() {
            self.unseen.push(xid);
        }
    }

    /// Whether a change of the open transaction leaves the chunk alone: the
    /// chunk's snapshot saw its transaction. Without a chunk or an xid,
    /// `false`, so the caller removes keys (the safe side).
    pub(super) fn chunk_has_current(&self) -> bool {
        match (&self.marks, self.current) {
            (Some(marks), Some(xid)) => marks.snapshot.sees(xid),
            _ => false,
        }
    }

    /// A snapshot was taken: forgets the streamed transactions it sees;
    /// returns how many it does not (then a chunk read with it may be
    /// older than what was emitted, and is read again after a pause).
    pub(super) fn snapshot_taken(&mut self, snapshot: &PgSnapshot, now: Instant) -> usize {
        self.unseen.retain(|&xid| !snapshot.sees(xid));
        if !self.unseen.is_empty() {
            self.not_before = Some(now + RETRY_AFTER);
        }
        self.unseen.len()
    }

    /// Whether enough unseen xids piled up to take a snapshot for them
    /// (not in the pause after a snapshot that missed some).
    pub(super) fn wants_pruning(&self) -> bool {
        self.unseen.len() > UNSEEN_LIMIT && self.may_read(Instant::now())
    }

    /// Whether a chunk may be read now (not in the pause after a dropped one).
    pub(super) fn may_read(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|t| now >= t)
    }

    /// Whether the stream, having read up to `received` between
    /// transactions, has passed the chunk's high mark.
    pub(super) fn passed_high_mark(&self, received: Lsn) -> bool {
        self.marks.as_ref().is_some_and(|m| received >= m.high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_parse_and_see_what_committed_before_them() {
        let s = PgSnapshot::parse("100:110:104,102").expect("parses");
        assert_eq!(s.xip, [102, 104]);
        assert!(s.sees(99), "below xmin: committed before");
        assert!(s.sees(100) && s.sees(103) && s.sees(109));
        assert!(!s.sees(102) && !s.sees(104), "in progress");
        assert!(!s.sees(110) && !s.sees(500), "at or past xmax");
        assert_eq!(
            PgSnapshot::parse("7:7:").expect("no xip").xip,
            Vec::<u64>::new()
        );
        assert!(PgSnapshot::parse("7:5:").is_none(), "xmin past xmax");
        assert!(PgSnapshot::parse("7:x:").is_none());
        assert!(PgSnapshot::parse("7").is_none());
    }

    #[test]
    fn stream_xids_are_widened_across_the_epoch() {
        // xmax in epoch 1, just past the wrap: 2^32 + 5.
        let epoch = 1u64 << 32;
        let s = PgSnapshot {
            xmin: epoch - 10,
            xmax: epoch + 5,
            xip: vec![epoch - 3],
        };
        assert!(s.sees(u32::MAX - 1), "epoch 0's 2^32-2 is committed");
        assert!(!s.sees(u32::MAX - 2), "2^32-3 is in progress");
        assert!(s.sees(2), "epoch 1's 2 is committed");
        assert!(!s.sees(5) && !s.sees(6), "at and past xmax");
        assert!(s.sees(u32::MAX - 20), "below xmin");
    }

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
    fn streamed_transactions_are_remembered_until_a_snapshot_sees_them() {
        let now = Instant::now();
        let mut streamed = Streamed::default();
        for xid in [100, 104, 120] {
            streamed.began(xid);
            streamed.committed();
        }
        let snapshot = PgSnapshot::parse("104:110:104").expect("parses");
        assert_eq!(
            streamed.snapshot_taken(&snapshot, now),
            2,
            "104 is in progress for it and 120 past xmax, though streamed"
        );
        assert!(!streamed.may_read(now), "a pause before reading again");
        assert!(streamed.may_read(now + RETRY_AFTER));
        let later = PgSnapshot::parse("121:121:").expect("parses");
        assert_eq!(streamed.snapshot_taken(&later, now), 0);
        assert!(streamed.unseen.is_empty());

        streamed.marks = Some(Marks {
            snapshot: PgSnapshot::parse("130:140:133").expect("parses"),
            high: Lsn::new(1000),
        });
        streamed.began(131);
        assert!(
            streamed.chunk_has_current(),
            "131 committed before the read"
        );
        streamed.began(133);
        assert!(!streamed.chunk_has_current(), "133 committed after it");
        assert!(!streamed.passed_high_mark(Lsn::new(999)));
        assert!(streamed.passed_high_mark(Lsn::new(1000)));
    }
}
