//! What one incremental snapshot has emitted so far, and since when: the
//! counts its progress lines and its completion report.
//!
//! A process runs many snapshots one after another (each `execute-snapshot`
//! after the previous one completed or was stopped), so the counts belong
//! to a snapshot, not to the process: they start from zero when a snapshot
//! starts ([`Tally::begin`] while none runs), and a snapshot that ends
//! ([`Tally::end`]) leaves nothing to the next. The process-wide totals are
//! the metrics' counters, which only grow.

use std::time::{Duration, Instant};

/// The running snapshot's clock and counts.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// When the running snapshot started; `None` while none runs.
    started: Option<Instant>,
    rows: u64,
    chunks: u64,
}

/// A snapshot's counts when it ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ended {
    pub rows: u64,
    pub chunks: u64,
    pub elapsed: Duration,
}

impl Tally {
    /// A snapshot runs (it started, or one is resumed): a new one counts
    /// from zero, a running one goes on.
    pub(super) fn begin(&mut self) {
        if self.started.is_none() {
            *self = Tally {
                started: Some(Instant::now()),
                rows: 0,
                chunks: 0,
            };
        }
    }

    /// Whether a snapshot runs.
    pub(super) fn running(&self) -> bool {
        self.started.is_some()
    }

    /// One chunk of `rows` rows was emitted.
    pub(super) fn chunk(&mut self, rows: u64) {
        self.chunks += 1;
        self.rows += rows;
    }

    /// The running snapshot ended (completed or stopped): its counts, if
    /// one ran. The next [`Tally::begin`] starts from zero.
    pub(super) fn end(&mut self) -> Option<Ended> {
        let started = self.started.take()?;
        let ended = Ended {
            rows: self.rows,
            chunks: self.chunks,
            elapsed: started.elapsed(),
        };
        (self.rows, self.chunks) = (0, 0);
        Some(ended)
    }

    /// Rows and chunks of the running snapshot, and its rows per second.
    pub(super) fn progress(&self) -> (u64, u64, u64) {
        let secs = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        let rate = (self.rows as f64 / secs.max(0.001)) as u64;
        (self.rows, self.chunks, rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_snapshot_counts_its_own_rows_and_chunks() {
        let mut tally = Tally::default();
        assert!(!tally.running());
        assert_eq!(tally.end(), None, "nothing ran, nothing ended");
        tally.begin();
        tally.chunk(1024);
        tally.chunk(976);
        // A resume or another execute-snapshot while it runs goes on.
        tally.begin();
        tally.chunk(10);
        let first = tally.end().expect("the first snapshot ended");
        assert_eq!((first.rows, first.chunks), (2010, 3));
        assert!(!tally.running());

        tally.begin();
        tally.chunk(7);
        let (rows, chunks, _) = tally.progress();
        assert_eq!((rows, chunks), (7, 1), "the second counts from zero");
        let second = tally.end().expect("the second snapshot ended");
        assert_eq!((second.rows, second.chunks), (7, 1));
    }

    #[test]
    fn a_stopped_snapshot_leaves_nothing_to_the_next() {
        let mut tally = Tally::default();
        tally.begin();
        tally.chunk(500);
        tally.end();
        tally.begin();
        assert_eq!(tally.progress().0, 0, "rows of the stopped snapshot gone");
        assert_eq!(tally.progress().1, 0, "chunks of the stopped snapshot gone");
    }
}
