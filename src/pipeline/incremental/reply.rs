//! Asking the server for a keepalive while a read-only chunk waits for its
//! high mark ([`super::read_only`]), so that an idle server closes the
//! chunk's window at once instead of at its next keepalive.
//!
//! The window closes once the stream has read up to the high mark: a
//! Commit ending there or later, or a keepalive between transactions whose
//! WAL end is there. On a busy server a Commit comes within milliseconds.
//! On an idle one nothing comes until the walsender sends a keepalive of
//! its own: when its sent position moves past the position the connector
//! confirmed, or after half of `wal_sender_timeout` without a reply. A
//! standby status update with "reply requested" set makes it answer at
//! once (`ProcessStandbyReplyMessage` calls `WalSndKeepalive`) with its
//! sent position, the end of the last WAL record it decoded
//! ([PostgreSQL: streaming replication protocol](https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-STANDBY-STATUS-UPDATE)).
//!
//! # Why the answer reaches the high mark, and when it does not
//!
//! The high mark is the server's insert position when the chunk was read
//! (`pg_current_wal_insert_lsn()`). The walsender decodes WAL only once it
//! is flushed, so its sent position reaches the high mark once the WAL up
//! to it is flushed and read. On an idle server that is at once or within
//! `wal_writer_delay`: a commit is flushed before its transaction becomes
//! visible (or, `synchronous_commit = off`, by the WAL writer within
//! `wal_writer_delay`), and the standby snapshots the background writer
//! logs are flushed the same way. What can stay unflushed is the tail of a
//! partly filled WAL page that no commit followed (an open transaction's
//! changes, page pruning by a query): then the answer stops short, and the
//! chunk waits for the next flush, asked again every [`ASK_AGAIN`].
//!
//! A lower mark, `pg_current_wal_flush_lsn()` (or `pg_current_wal_lsn()`,
//! the write position), would not wait for that tail but is not sound: a
//! transaction committed with `synchronous_commit = off` is visible to the
//! chunk's snapshot before its commit record is flushed, so its commit may
//! lie past the flushed position read after the snapshot. The chunk would
//! then be emitted before that transaction's changes, which hold versions
//! the chunk already has or older ones: a consumer would see a row go back
//! in time. The insert position is past every commit record a snapshot can
//! see, flushed or not; it stays the mark.
//!
//! # No chatter on a busy stream
//!
//! The first request goes [`GRACE`] after the chunk began to wait: on a
//! busy stream a Commit past the mark has closed the window by then, and
//! nothing is asked. While the window waits, requests go at most every
//! [`ASK_AGAIN`]; none while a transaction is being read (messages flow).

use std::time::{Duration, Instant};

use super::window::Window;
use super::Incremental;
use crate::lsn::Lsn;

/// How long a chunk waits for the stream before the server is asked.
pub(super) const GRACE: Duration = Duration::from_millis(20);
/// How long after an answer that stopped short the server is asked again
/// (the default `wal_writer_delay`, the WAL writer's flush cadence).
pub(super) const ASK_AGAIN: Duration = Duration::from_millis(200);

/// When the next request for a keepalive is due, for one high mark.
#[derive(Debug, Default)]
pub(super) struct Pacing {
    /// The high mark waited for, and when the next request is due.
    due: Option<(Lsn, Instant)>,
}

impl Pacing {
    /// When to ask next while the stream waits for `high` (`None`: it
    /// does not wait), starting the pacing for a new mark.
    fn next(&mut self, high: Option<Lsn>, now: Instant) -> Option<Instant> {
        let Some(high) = high else {
            self.due = None;
            return None;
        };
        match self.due {
            Some((waited, at)) if waited == high => Some(at),
            _ => {
                let at = now + GRACE;
                self.due = Some((high, at));
                Some(at)
            }
        }
    }

    /// A request went out at `now`.
    fn asked(&mut self, now: Instant) {
        if let Some((_, at)) = &mut self.due {
            *at = now + ASK_AGAIN;
        }
    }
}

impl Incremental {
    /// The high mark a read-only chunk waits for, when the stream (having
    /// read up to `received`) has not reached it yet.
    fn waited_high_mark(&self, received: Lsn) -> Option<Lsn> {
        let streamed = self.read_only.as_ref()?;
        let high = streamed.high?;
        (matches!(self.window, Window::Pending { .. }) && received < high).then_some(high)
    }

    /// When the stream, between transactions at `received`, should ask
    /// the server for a keepalive (see the module docs); `None` when no
    /// read-only chunk waits for its high mark.
    pub(in crate::pipeline) fn reply_due(&mut self, received: Lsn) -> Option<Instant> {
        let high = self.waited_high_mark(received);
        let streamed = self.read_only.as_mut()?;
        streamed.reply.next(high, Instant::now())
    }

    /// The stream asked the server for a keepalive.
    pub(in crate::pipeline) fn reply_requested(&mut self) {
        if let Some(streamed) = self.read_only.as_mut() {
            streamed.reply.asked(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_after_a_grace_then_paced_and_afresh_for_a_new_mark() {
        let now = Instant::now();
        let mut pacing = Pacing::default();
        let (first, second) = (Lsn::new(100), Lsn::new(200));
        assert_eq!(pacing.next(Some(first), now), Some(now + GRACE));
        let later = now + Duration::from_millis(5);
        assert_eq!(
            pacing.next(Some(first), later),
            Some(now + GRACE),
            "the same mark: the same due time"
        );
        pacing.asked(now + GRACE);
        assert_eq!(
            pacing.next(Some(first), now + GRACE),
            Some(now + GRACE + ASK_AGAIN),
            "asked: again only after a pause"
        );
        assert_eq!(
            pacing.next(Some(second), later),
            Some(later + GRACE),
            "a new chunk's mark starts over"
        );
        assert_eq!(pacing.next(None, later), None, "nothing waits");
        assert_eq!(pacing.next(Some(second), later), Some(later + GRACE));
    }
}
