//! The SQL and stream side of read-only incremental snapshots: reading a
//! window's chunks (one per table in flight) under one snapshot with its
//! marks, and emitting them once the stream passed its high mark. The
//! reasoning is in [`super::read_only`]; it holds for any number of tables
//! read under the snapshot, since a streamed change is placed against the
//! snapshot, whatever its table.

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
    /// Reads a window's chunks with `queries` (of `tables`) in one
    /// REPEATABLE READ, READ ONLY transaction whose snapshot is recorded
    /// with the window's marks. `None` when that snapshot misses a
    /// transaction the stream already carried: the chunks may be older than
    /// what was emitted, and are read again shortly ([`super::read_only`]).
    pub(super) async fn read_chunks_read_only(
        &mut self,
        queries: &[String],
        tables: &[&str],
    ) -> Result<Option<Vec<Vec<SimpleQueryMessage>>>, IncrementalError> {
        if let Some(streamed) = self.read_only.as_mut() {
            streamed.marks = None;
        }
        self.sql
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(query_error("starting a read-only chunk's transaction"))?;
        let read = self.marks_and_rows(queries, tables).await;
        let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.sql.batch_execute(end).await;
        let (marks, messages) = read?;
        ended.map_err(query_error("ending a read-only chunk's transaction"))?;
        let Some(streamed) = self.read_only.as_mut() else {
            return Ok(None);
        };
        let unseen = streamed.snapshot_taken(&marks.snapshot, Instant::now());
        if unseen > 0 {
            tracing::debug!(?tables, unseen, "a streamed transaction is not visible to the window's snapshot yet; reading its chunks again");
            return Ok(None);
        }
        tracing::trace!(?tables, high_mark = %marks.high, "read-only chunks read");
        streamed.marks = Some(marks);
        Ok(Some(messages))
    }

    async fn marks_and_rows(
        &self,
        queries: &[String],
        tables: &[&str],
    ) -> Result<(Marks, Vec<Vec<SimpleQueryMessage>>), IncrementalError> {
        let marks = self.marks().await?;
        let mut results = Vec::with_capacity(queries.len());
        for (query, table) in queries.iter().zip(tables) {
            let messages = self
                .sql
                .simple_query(query)
                .await
                .map_err(query_error(format!("reading a chunk of {table}")))?;
            results.push(messages);
        }
        Ok((marks, results))
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
    /// The stream passed the read-only window's high mark: its chunks' rows
    /// go now, in a transaction of their own at the position read (as the
    /// kafka channel's blocking snapshot's do), so the slot is not confirmed
    /// past it before Kafka has them.
    pub(super) async fn emit_read_only_chunk(
        &mut self,
        inc: &mut Incremental,
    ) -> Result<(), PipelineError> {
        let passed = (inc.read_only.as_ref()).is_some_and(|r| r.passed_high_mark(self.received));
        if !passed {
            return Ok(());
        }
        let position = self.received;
        let Some(closed) = inc.window.close_at(position) else {
            return Ok(());
        };
        if let Some(streamed) = inc.read_only.as_mut() {
            streamed.marks = None;
        }
        inc.chunks_emitted(&closed, &self.metrics, &self.notifier);
        let txn = self.delivery.begin();
        self.delivery.open_batch()?;
        let source = (position, txn, 0, crate::event::now_micros());
        for chunk in &closed {
            self.emit_chunk(chunk.relation_id, &chunk.rows, source)
                .await?;
        }
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
