//! Incremental snapshots under `--delivery exactly-once`: the progress
//! committed to Kafka with the chunks, and the resume from it.
//!
//! The chunk's rows travel in the Kafka
//! transaction of the high watermark's Postgres transaction, and the
//! acknowledged position waits for that Kafka transaction to commit. The
//! progress row alone would then fall short: a crash between that commit and
//! the next low watermark would read the chunk again, and read_committed
//! consumers would see its rows twice. So every Kafka transaction's progress
//! record also carries the snapshot's progress as of its last Postgres
//! transaction ([`Incremental::progress_in_kafka`]: signals applied, emitted
//! chunks counted), committed atomically with the rows. Stream position and
//! chunk progress agree by construction: the record says "every transaction
//! before `lsn` is in Kafka, and this is the progress after them".
//!
//! On start the record wins over the progress row
//! ([`Incremental::resume_from_kafka`]): the stream resumes at the record's
//! position, so the chunks before it are not read again, the chunks of an
//! aborted Kafka transaction are (they are not in the record), and signals
//! after it are replayed from the slot and applied again. A signal that
//! changes the progress always opens a Kafka transaction
//! ([`Delivery::open_batch`](crate::sink::Delivery::open_batch)), even
//! when nothing of its transaction is sent (the signal table excluded), so
//! the slot is never confirmed past a signal that no record reflects.
//! A record older than the slot's confirmed position is not trusted: runs
//! without exactly-once came since, and only the row knows what they did.

use super::{Incremental, Window};
use crate::lsn::Lsn;
use crate::pipeline::stream::Stream;
use crate::sink::transactional::ProgressRecord;
use crate::source::signal::Progress;

/// The incremental snapshot progress of the progress record
/// `recorded`, when it is the one to resume from. A record without one
/// (an earlier version, or a run without a signal table) leaves the progress
/// row in charge; so does a record older than `slot_start`, the slot's
/// position: runs without exactly-once confirmed the slot past it since, and
/// only the row knows what they did. (In an exactly-once run the slot is
/// never confirmed past the last Kafka commit while a chunk or a signal is
/// uncommitted, and passing it idle runs the step that brings the row up to
/// date first.)
///
/// `read_only`: there is no row, and the record always wins. The slot
/// passes the last record whenever the stream idles with nothing in flight
/// (a keepalive's WAL end, other databases' WAL), a paused snapshot on a
/// quiet source for one; nothing changed the progress there (a change opens
/// a Kafka transaction, with a record), and a read-only run without
/// exactly-once since would have written a newer record to the same topic.
/// Rejecting it forgot the snapshot after such a restart.
fn committed_progress(
    recorded: Option<&ProgressRecord>,
    slot_start: Lsn,
    read_only: bool,
) -> Option<&Progress> {
    let record = recorded?;
    let committed = record.incremental_snapshot.as_ref()?;
    if record.lsn < slot_start && !read_only {
        tracing::info!(recorded = %record.lsn, slot_confirmed = %slot_start, "the progress record predates the slot's position; the incremental snapshot resumes from the progress row");
        return None;
    }
    Some(committed)
}

impl Incremental {
    /// The progress a read_committed consumer has once everything sent so
    /// far is committed: the recorded progress plus the chunks emitted and
    /// not yet acknowledged. Exactly-once writes it into each Kafka
    /// transaction's progress record (see the module docs).
    pub(in crate::pipeline) fn progress_in_kafka(&self) -> Progress {
        let mut progress = Progress {
            chunk: None,
            ..self.progress.clone()
        };
        if let Window::Emitted { ends, .. } = &self.window {
            for chunk in ends {
                progress.table_chunk_done(&chunk.table, chunk.end.clone());
            }
        }
        progress
    }

    /// The end of the high watermark's transaction of the chunk emitted and
    /// not yet recorded, once its Commit was read.
    pub(in crate::pipeline) fn emitted_chunk_commit(&self) -> Option<Lsn> {
        match &self.window {
            Window::Emitted { commit, .. } => *commit,
            _ => None,
        }
    }

    /// Adopts the progress committed to Kafka with the last
    /// chunks (see the module docs) when it differs from the progress row,
    /// which is written only after the Kafka commit and may lag it by a chunk
    /// (or still list tables whose last chunk was committed). `slot_start`
    /// is where the slot resumes; a record older than that is not trusted.
    pub(in crate::pipeline) fn resume_from_kafka(
        &mut self,
        recorded: Option<&ProgressRecord>,
        slot_start: Lsn,
    ) {
        let read_only = self.read_only.is_some();
        let Some(committed) = committed_progress(recorded, slot_start, read_only) else {
            return;
        };
        if committed.same_position(&self.progress) {
            return;
        }
        tracing::info!(
            row_tables = ?self.progress.tables,
            row_last_key = ?self.progress.last_key,
            tables = ?committed.tables,
            last_key = ?committed.last_key,
            "kafka committed incremental snapshot progress the progress row does not have yet; resuming from kafka's"
        );
        self.progress = Progress {
            chunk: None,
            ..committed.clone()
        };
        if self.progress.signal_id.is_some() {
            self.correlation_id.clone_from(&self.progress.signal_id);
        }
        self.window = Window::Idle;
        if !self.progress.tables.is_empty() {
            self.tally.begin();
        }
        // With no table left and a progress row still there (the tally runs), the
        // next step deletes the row and reports the snapshot complete.
        self.count_tables_remaining();
    }
}

impl Stream<'_> {
    /// Once the progress record was read: see
    /// [`Incremental::resume_from_kafka`].
    pub(in crate::pipeline) fn resume_incremental_from_kafka(
        &mut self,
        recorded: Option<&ProgressRecord>,
        slot_start: Lsn,
    ) {
        if let Some(incremental) = &mut self.incremental {
            incremental.resume_from_kafka(recorded, slot_start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lsn: u64, incremental_snapshot: Option<Progress>) -> ProgressRecord {
        ProgressRecord {
            lsn: Lsn::new(lsn),
            snapshot: false,
            transactions: 1,
            written_at_ms: 0,
            incremental_snapshot,
            initial_snapshot: None,
            server: None,
        }
    }

    #[test]
    fn kafka_progress_wins_unless_absent_or_older_than_the_slot() {
        let progress = Progress {
            tables: vec!["public.t".into()],
            last_key: Some(vec![Some("500".into())]),
            ..Progress::default()
        };
        let current = record(100, Some(progress.clone()));
        assert_eq!(
            committed_progress(Some(&current), Lsn::new(100), false),
            Some(&progress),
            "the slot at the record's position: kafka's progress"
        );
        assert_eq!(
            committed_progress(Some(&current), Lsn::new(40), false),
            Some(&progress),
            "the slot behind the record (confirm not sent yet): kafka's progress"
        );
        assert_eq!(
            committed_progress(Some(&current), Lsn::new(101), false),
            None,
            "the slot past the record: the progress row"
        );
        assert_eq!(
            committed_progress(Some(&current), Lsn::new(101), true),
            Some(&progress),
            "read-only, the slot past the record (idle): no row, kafka's progress"
        );
        assert_eq!(
            committed_progress(Some(&record(100, None)), Lsn::new(10), true),
            None,
            "a record of an earlier version: the progress row"
        );
        assert_eq!(committed_progress(None, Lsn::new(10), false), None);
    }
}
