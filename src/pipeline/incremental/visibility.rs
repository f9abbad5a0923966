//! Which streamed transactions a chunk's rows already hold, sans-IO: the
//! chunk is read in a REPEATABLE READ transaction whose first statement
//! returns `pg_current_snapshot()` (`xmin:xmax:xip,...`), the MVCC snapshot
//! the rows are read with, in both modes.
//!
//! - a transaction the snapshot **sees** committed before the chunk was
//!   read ([PostgreSQL: pg_current_snapshot](https://www.postgresql.org/docs/current/functions-info.html#FUNCTIONS-PG-SNAPSHOT-PARTS)):
//!   the chunk holds its changes, or newer ones, so its streamed changes
//!   leave the chunk alone;
//! - a transaction the snapshot **does not see** (xid at or past `xmax`, or
//!   listed in `xip`) committed after the read: its changes are newer than
//!   the chunk's rows, so a change of it streamed before the chunk is
//!   emitted removes its key from the chunk, wherever it sits in the
//!   stream, before the low watermark too.
//!
//! # The transaction streamed before the read, and still invisible
//!
//! A transaction's commit record is flushed (and may be streamed) before
//! the transaction leaves the server's proc array: for a moment, or for a
//! synchronous standby's round trip, a snapshot does not see a transaction
//! whose commit the WAL already holds. So the WAL order of commits is not
//! the order in which they become visible:
//!
//! - such a transaction may commit in the WAL *before* the low watermark
//!   and still be invisible to the chunk's select, which starts after the
//!   low watermark committed. The read-write window alone (changes between
//!   the watermarks) would let it through, and the chunk would hold an
//!   older row of its key, emitted after it: a compacted topic keeps the
//!   older version. The snapshot says the transaction is unseen, and its
//!   changes leave the chunk, wherever they are streamed.
//! - it may even have been streamed (and emitted) before the chunk was read
//!   at all. So the xids of streamed transactions are remembered until a
//!   snapshot sees them ([`Visibility`]); a chunk whose snapshot misses one
//!   of them is dropped and read again a little later.
//!
//! The blocking snapshot ([`super::blocking`]) reads whole tables with the
//! stream waiting at the signal: its snapshot must see every transaction
//! streamed before the signal, so one that does not is taken again after
//! the same pause.

use std::time::{Duration, Instant};

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

/// How long a chunk dropped for a transaction streamed before its read but
/// not visible to it waits before it is read again; doubled for each
/// snapshot in a row that misses one, up to [`RETRY_AT_MOST`] (a
/// transaction waiting for a synchronous standby may stay invisible long).
const RETRY_AFTER: Duration = Duration::from_millis(50);
const RETRY_AT_MOST: Duration = Duration::from_secs(2);

/// Snapshots in a row that miss a streamed transaction before a warning.
const WARN_AFTER_MISSES: u32 = 8;

/// More unseen xids than this and a snapshot is taken just to forget the
/// ones it sees, so the list stays short when no chunk is read for a while.
pub(super) const UNSEEN_LIMIT: usize = 4096;

/// Streamed transactions that no snapshot has seen yet, the transaction
/// being read, and the snapshot of the chunks in flight.
#[derive(Debug, Default)]
pub(super) struct Visibility {
    /// The open transaction's xid.
    current: Option<u32>,
    /// Committed and streamed, not yet seen by a snapshot.
    unseen: Vec<u32>,
    /// The snapshot the window's chunks were read with, until they are
    /// emitted.
    chunk: Option<PgSnapshot>,
    /// No chunk is read before this (after a dropped one).
    not_before: Option<Instant>,
    /// Snapshots in a row that missed a streamed transaction.
    misses: u32,
}

impl Visibility {
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

    /// Whether the chunk in flight holds the open transaction's changes
    /// (its snapshot saw the transaction); `None` without a chunk or an
    /// open transaction.
    pub(super) fn chunk_sees_current(&self) -> Option<bool> {
        Some(self.chunk.as_ref()?.sees(self.current?))
    }

    /// A snapshot was taken: forgets the streamed transactions it sees;
    /// returns how many it does not (then a chunk read with it may be
    /// older than what was emitted, and is read again after a pause).
    pub(super) fn snapshot_taken(&mut self, snapshot: &PgSnapshot, now: Instant) -> usize {
        self.unseen.retain(|&xid| !snapshot.sees(xid));
        if self.unseen.is_empty() {
            self.misses = 0;
            return 0;
        }
        let pause = RETRY_AFTER.saturating_mul(1 << self.misses.min(16));
        self.not_before = Some(now + pause.min(RETRY_AT_MOST));
        self.misses += 1;
        if self.misses == WARN_AFTER_MISSES {
            tracing::warn!(xids = ?self.unseen, "the stream carried these transactions, but the server does not show them committed yet (waiting for a synchronous standby?); the incremental snapshot reads its next chunk once they are visible");
        }
        self.unseen.len()
    }

    /// The window's chunks were read with `snapshot` (`None`: they were
    /// emitted, or dropped).
    pub(super) fn chunk_read_with(&mut self, snapshot: Option<PgSnapshot>) {
        self.chunk = snapshot;
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

    /// When the pause after a snapshot that missed a streamed transaction
    /// ends, if one was missed.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.not_before
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
    fn streamed_transactions_are_remembered_until_a_snapshot_sees_them() {
        let now = Instant::now();
        let mut visibility = Visibility::default();
        for xid in [100, 104, 120] {
            visibility.began(xid);
            visibility.committed();
        }
        let snapshot = PgSnapshot::parse("104:110:104").expect("parses");
        assert_eq!(
            visibility.snapshot_taken(&snapshot, now),
            2,
            "104 is in progress for it and 120 past xmax, though streamed"
        );
        assert!(!visibility.may_read(now), "a pause before reading again");
        assert!(visibility.may_read(now + RETRY_AFTER));
        assert_eq!(visibility.snapshot_taken(&snapshot, now), 2);
        assert!(
            !visibility.may_read(now + RETRY_AFTER),
            "a longer pause after a second miss"
        );
        assert!(visibility.may_read(now + RETRY_AFTER * 2));
        for _ in 0..20 {
            visibility.snapshot_taken(&snapshot, now);
        }
        assert!(visibility.may_read(now + RETRY_AT_MOST), "at most");
        let later = PgSnapshot::parse("121:121:").expect("parses");
        assert_eq!(visibility.snapshot_taken(&later, now), 0);
        assert!(visibility.unseen.is_empty());

        visibility.began(131);
        assert_eq!(visibility.chunk_sees_current(), None, "no chunk in flight");
        visibility.chunk_read_with(PgSnapshot::parse("130:140:133"));
        assert_eq!(
            visibility.chunk_sees_current(),
            Some(true),
            "131 committed before the read"
        );
        visibility.began(133);
        assert_eq!(
            visibility.chunk_sees_current(),
            Some(false),
            "133 committed after it"
        );
        visibility.committed();
        assert_eq!(
            visibility.chunk_sees_current(),
            None,
            "between transactions"
        );
    }
}
