//! Reading a window's chunks (one per table in flight), in both modes: one
//! REPEATABLE READ, READ ONLY transaction whose first statement returns its
//! snapshot (and, read-only, the server's insert position: the high mark),
//! so the stream can tell which transactions the rows hold
//! ([`super::visibility`]).

use std::time::Instant;

use tokio_postgres::SimpleQueryMessage;

use super::read_only::high_mark;
use super::visibility::PgSnapshot;
use super::{Incremental, IncrementalError};
use crate::lsn::Lsn;
use crate::source::setup::SetupError;

/// The chunk's snapshot and the server's insert position, taken by the
/// first statement of the chunk's transaction (so after its snapshot).
const MARKS: &str = "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text";

/// The snapshot alone, for the read-write mode: the insert position is a
/// WAL control function, an error on a standby, where a run that decodes
/// may still read signals and prune its streamed xids.
const SNAPSHOT: &str = "SELECT pg_current_snapshot()::text";

/// What a window's read knows about its chunks.
#[derive(Debug, Clone)]
struct Marks {
    /// The snapshot the chunks were read with.
    snapshot: PgSnapshot,
    /// Read-only: once the stream has read this far, every transaction
    /// the snapshot sees has been streamed ([`super::read_only`]).
    high: Option<Lsn>,
}

fn query_error(
    action: impl Into<String>,
) -> impl FnOnce(tokio_postgres::Error) -> IncrementalError {
    let action = action.into();
    move |error| IncrementalError::from(SetupError::Query { action, error })
}

impl Incremental {
    /// Reads a window's chunks with `queries` (of `tables`) under one
    /// snapshot, which the stream then places its transactions against;
    /// returns the rows and the high mark. `None` when that snapshot misses
    /// a transaction the stream already carried: the chunks may be older
    /// than what was emitted, and are read again shortly.
    pub(super) async fn read_chunks(
        &mut self,
        queries: &[String],
        tables: &[&str],
    ) -> Result<Option<(Option<Lsn>, Vec<Vec<SimpleQueryMessage>>)>, IncrementalError> {
        self.visibility.chunk_read_with(None);
        self.sql
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(query_error("starting a chunk's transaction"))?;
        let read = self.marks_and_rows(queries, tables).await;
        let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.sql.batch_execute(end).await;
        let (marks, messages) = read?;
        ended.map_err(query_error("ending a chunk's transaction"))?;
        let unseen = (self.visibility).snapshot_taken(&marks.snapshot, Instant::now());
        if unseen > 0 {
            tracing::debug!(?tables, unseen, "a streamed transaction is not visible to the window's snapshot yet; reading its chunks again");
            return Ok(None);
        }
        tracing::trace!(?tables, high_mark = ?marks.high, "chunks read");
        self.visibility.chunk_read_with(Some(marks.snapshot));
        Ok(Some((marks.high, messages)))
    }

    /// Begins a REPEATABLE READ, READ ONLY transaction whose snapshot sees
    /// every transaction the stream carried, waiting (and the stream with
    /// it) while one is not visible yet: the blocking snapshot reads its
    /// tables in it, and emits them after what the stream emitted.
    pub(super) async fn begin_seeing_the_stream(&mut self) -> Result<(), IncrementalError> {
        loop {
            self.sql
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await
                .map_err(query_error("starting the blocking snapshot's transaction"))?;
            let unseen = match self.marks().await {
                Ok(marks) => (self.visibility).snapshot_taken(&marks.snapshot, Instant::now()),
                Err(error) => {
                    let _ = self.sql.batch_execute("ROLLBACK").await;
                    return Err(error);
                }
            };
            if unseen == 0 {
                return Ok(());
            }
            tracing::debug!(unseen, "a streamed transaction is not visible to the blocking snapshot's snapshot yet; waiting");
            self.sql
                .batch_execute("ROLLBACK")
                .await
                .map_err(query_error(
                    "ending a snapshot that misses a streamed transaction",
                ))?;
            if let Some(at) = self.visibility.retry_at() {
                tokio::time::sleep_until(at.into()).await;
            }
        }
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

    /// The current snapshot, and read-only its high mark (inside the chunk's
    /// transaction: the transaction's snapshot).
    async fn marks(&self) -> Result<Marks, IncrementalError> {
        let read_only = self.read_only.is_some();
        let query = if read_only { MARKS } else { SNAPSHOT };
        let row = (self.sql.query_one(query, &[]).await)
            .map_err(query_error("reading pg_current_snapshot()"))?;
        let text: String = row.get(0);
        let snapshot = PgSnapshot::parse(&text)
            .ok_or_else(|| IncrementalError::UnreadableSnapshot(text.clone()))?;
        if !read_only {
            return Ok(Marks {
                snapshot,
                high: None,
            });
        }
        let insert: String = row.get(1);
        let insert: Lsn = insert
            .parse()
            .map_err(|_| IncrementalError::UnreadableSnapshot(insert.clone()))?;
        let (block, segment) = self.wal_sizes;
        Ok(Marks {
            snapshot,
            high: Some(high_mark(insert, block, segment)),
        })
    }

    /// A snapshot taken only so the streamed xids it sees are forgotten
    /// (many transactions streamed while no chunk was read).
    pub(super) async fn read_snapshot(&mut self) -> Result<(), IncrementalError> {
        let marks = self.marks().await?;
        (self.visibility).snapshot_taken(&marks.snapshot, Instant::now());
        Ok(())
    }
}
