//! The SQL and stream side of read-only incremental snapshots: reading a
//! chunk with its marks, and emitting it once the stream passed its high
//! mark. The reasoning is in [`super::read_only`].

use std::time::Instant;

use tokio_postgres::SimpleQueryMessage;

use super::read_only::{high_mark, Marks, PgSnapshot};
use super::window::Window;
use super::{Incremental, IncrementalError};
use crate::lsn::Lsn;
use crate::pipeline::stream::Stream;
use crate::pipeline::PipelineError;
use crate::source::setup::SetupError;

/// The chunk's snapshot and the server's insert position, taken by the
/// first statement of the chunk's transaction (so after its snapshot).
const MARKS: &str = "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text";

fn query_error(
    action: impl Into<String>,
) -> impl FnOnce(tokio_postgres::Error) -> IncrementalError {
    let action = action.into();
    move |error| IncrementalError::from(SetupError::Query { action, error })
}

impl Incremental {
    /// Reads a chunk with `query` in a REPEATABLE READ, READ ONLY
    /// transaction whose snapshot is recorded with the chunk's marks.
    /// `None` when that snapshot misses a transaction the stream already
    /// carried: the chunk may be older than what was emitted, and is read
    /// again shortly ([`super::read_only`]).
    pub(super) async fn read_chunk_read_only(
        &mut self,
        query: &str,
        table: &str,
    ) -> Result<Option<Vec<SimpleQueryMessage>>, IncrementalError> {
        if let Some(streamed) = self.read_only.as_mut() {
            streamed.marks = None;
        }
        self.sql
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(query_error("starting a read-only chunk's transaction"))?;
        let read = self.marks_and_rows(query, table).await;
        let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.sql.batch_execute(end).await;
        let (marks, messages) = read?;
        ended.map_err(query_error("ending a read-only chunk's transaction"))?;
        let Some(streamed) = self.read_only.as_mut() else {
            return Ok(None);
        };
        let unseen = streamed.snapshot_taken(&marks.snapshot, Instant::now());
        if unseen > 0 {
            tracing::debug!(%table, unseen, "a streamed transaction is not visible to the chunk's snapshot yet; reading the chunk again");
            return Ok(None);
        }
        tracing::trace!(%table, high_mark = %marks.high, "read-only chunk read");
        streamed.marks = Some(marks);
        Ok(Some(messages))
    }

    async fn marks_and_rows(
        &self,
        query: &str,
        table: &str,
    ) -> Result<(Marks, Vec<SimpleQueryMessage>), IncrementalError> {
        let marks = self.marks().await?;
        let messages = self
            .sql
            .simple_query(query)
            .await
            .map_err(query_error(format!("reading a chunk of {table}")))?;
        Ok((marks, messages))
    }

    /// The current snapshot and high mark (inside the chunk's transaction:
    /// the transaction's snapshot).
    async fn marks(&self) -> Result<Marks, IncrementalError> {
        let row = self
            .sql
            .query_one(MARKS, &[])
            .await
            .map_err(query_error("reading pg_current_snapshot()"))?;
        let text: String = row.get(0);
        let snapshot = PgSnapshot::parse(&text)
            .ok_or_else(|| IncrementalError::UnreadableSnapshot(text.clone()))?;
        let insert: String = row.get(1);
        let insert: Lsn = insert
            .parse()
            .map_err(|_| IncrementalError::UnreadableSnapshot(insert.clone()))?;
        let (block, segment) = self.wal_sizes;
        Ok(Marks {
            snapshot,
            high: high_mark(insert, block, segment),
        })
    }

    /// A snapshot taken only so the streamed xids it sees are forgotten
    /// (many transactions streamed while no chunk was read).
    pub(super) async fn read_snapshot(&mut self) -> Result<(), IncrementalError> {
        let marks = self.marks().await?;
        if let Some(streamed) = self.read_only.as_mut() {
            streamed.snapshot_taken(&marks.snapshot, Instant::now());
        }
        Ok(())
    }
}

impl Stream<'_> {
    /// The stream passed the read-only chunk's high mark: its rows go now,
    /// in a transaction of their own at the position read (as the kafka
    /// channel's blocking snapshot's do), so the slot is not confirmed past
    /// it before Kafka has them.
    pub(super) async fn emit_read_only_chunk(
        &mut self,
        inc: &mut Incremental,
    ) -> Result<(), PipelineError> {
        let passed = (inc.read_only.as_ref()).is_some_and(|r| r.passed_high_mark(self.received));
        if !passed {
            return Ok(());
        }
        let position = self.received;
        let Some((relation_id, rows)) = inc.window.close_at(position) else {
            return Ok(());
        };
        if let Some(streamed) = inc.read_only.as_mut() {
            streamed.marks = None;
        }
        inc.chunk_emitted(rows.len(), &self.metrics, &self.notifier);
        let txn = self.delivery.begin();
        self.delivery.open_batch()?;
        let source = (position, txn, 0, crate::event::now_micros());
        self.emit_chunk(relation_id, &rows, source).await?;
        self.delivery.commit(txn, position);
        debug_assert!(matches!(
            inc.window,
            Window::Emitted {
                commit: Some(_),
                ..
            }
        ));
        Ok(())
    }
}
