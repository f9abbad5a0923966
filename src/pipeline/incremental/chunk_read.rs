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
#[derive(Debug)]
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
    /// than what was emitted, and are read again shortly (not read at all
    /// with this snapshot).
    pub(super) async fn read_chunks(
        &mut self,
        queries: &[String],
        tables: &[&str],
    ) -> Result<Option<(Option<Lsn>, Vec<Vec<SimpleQueryMessage>>)>, IncrementalError> {
        self.visibility.chunk_read_with(None);
        let Some(marks) = self.begin_seeing("a chunk's transaction").await? else {
            tracing::debug!(?tables, "a streamed transaction is not visible to the window's snapshot yet; reading its chunks again");
            return Ok(None);
        };
        let read = self.rows(queries, tables).await;
        let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.sql.batch_execute(end).await;
        let messages = read?;
        ended.map_err(query_error("ending a chunk's transaction"))?;
        tracing::trace!(?tables, high_mark = ?marks.high, "chunks read");
        self.visibility.chunk_read_with(Some(marks.snapshot));
        Ok(Some((marks.high, messages)))
    }

    /// Begins a REPEATABLE READ, READ ONLY transaction whose snapshot sees
    /// every transaction the stream carried, waiting (and the stream with
    /// it) while one is not visible yet: the blocking snapshot reads its
    /// tables in it, and emits them after what the stream emitted.
    pub(super) async fn begin_seeing_the_stream(&mut self) -> Result<(), IncrementalError> {
        while self
            .begin_seeing("the blocking snapshot's transaction")
            .await?
            .is_none()
        {
            tracing::debug!("a streamed transaction is not visible to the blocking snapshot's snapshot yet; waiting");
            if let Some(at) = self.visibility.retry_at() {
                tokio::time::sleep_until(at.into()).await;
            }
        }
        Ok(())
    }

    /// Begins `what`, a REPEATABLE READ, READ ONLY transaction, and takes
    /// its marks. `None`, the transaction rolled back, when its snapshot
    /// misses a transaction the stream already carried (the pause before
    /// the next try is set, [`super::visibility`]).
    async fn begin_seeing(&mut self, what: &str) -> Result<Option<Marks>, IncrementalError> {
        self.sql
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(query_error(format!("starting {what}")))?;
        let marks = match self.marks().await {
            Ok(marks) => marks,
            Err(error) => {
                let _ = self.sql.batch_execute("ROLLBACK").await;
                return Err(error);
            }
        };
        let unseen = (self.visibility).snapshot_taken(&marks.snapshot, Instant::now());
        if unseen == 0 {
            return Ok(Some(marks));
        }
        tracing::debug!(
            unseen,
            "streamed transactions not visible to a snapshot yet"
        );
        self.metrics.snapshot_read_deferred();
        self.sql
            .batch_execute("ROLLBACK")
            .await
            .map_err(query_error(format!(
                "ending {what}, whose snapshot misses a streamed transaction"
            )))?;
        Ok(None)
    }

    /// The rows of each chunk query, in the open transaction.
    async fn rows(
        &self,
        queries: &[String],
        tables: &[&str],
    ) -> Result<Vec<Vec<SimpleQueryMessage>>, IncrementalError> {
        let mut results = Vec::with_capacity(queries.len());
        for (query, table) in queries.iter().zip(tables) {
            let messages = self
                .sql
                .simple_query(query)
                .await
                .map_err(query_error(format!("reading a chunk of {table}")))?;
            results.push(messages);
        }
        Ok(results)
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
