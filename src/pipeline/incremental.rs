//! Incremental snapshots while streaming: DBLog's watermark algorithm, as
//! Debezium's incremental snapshots use it, driven by the signal table
//! ([`crate::source::signal`]).
//!
//! A table is read in chunks of `--incremental-snapshot-chunk-size` rows in
//! key order, one chunk at a time, between transactions of the stream:
//!
//! 1. the low watermark: the progress row is upserted with type
//!    `snapshot-window-open` and the chunk's id (its own transaction);
//! 2. the chunk is selected on a plain SQL connection (`key > last key ORDER
//!    BY key LIMIT n`, READ COMMITTED, so it sees at least everything
//!    committed before the low watermark) and buffered;
//! 3. the high watermark: the progress row is upserted with type
//!    `snapshot-window-close`.
//!
//! The stream then reaches the watermarks in commit order. Between them,
//! every change to a key of the chunk's table removes that key from the
//! buffer: the streamed change is at least as new as the selected row and is
//! emitted in its place. At the high watermark the remaining rows are emitted
//! as `op: "r"` events with `source.snapshot = "incremental"`, inside the
//! high watermark's transaction, so the ack tracker does not confirm past it
//! before Kafka has them. Changes after the high watermark are newer than the
//! selected rows and follow them. So for every key the stream's later change
//! wins, and a key deleted during the window is not brought back.
//!
//! # Progress across restarts
//!
//! The progress (tables left, last key of the current table) lives in the
//! progress row's `data`. A chunk's end becomes the recorded last key only
//! once Kafka acknowledged the chunk (the ack tracker passed the high
//! watermark's commit), and only the next low watermark, or a signal,
//! writes it. So the recorded position never runs ahead of what Kafka has:
//! a restart re-reads at most the chunk that was in flight (sent again, never
//! lost). Signals update the row as soon as they are read, before their
//! transaction can be confirmed, so a confirmed signal is never forgotten.
//! The slot may replay a signal after a restart; a table it names again is
//! snapshotted again (duplicates, not loss).
//!
//! Under `--delivery exactly-once` the chunk's rows travel in the Kafka
//! transaction of the high watermark's Postgres transaction, and the
//! acknowledged position waits for that Kafka transaction to commit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::stream::Stream;
use super::PipelineError;
use crate::checkpoint::TxnId;
use crate::config::RunConfig;
use crate::event::{ChangeEvent, Op, SourceInfo};
use crate::lsn::Lsn;
use crate::source::pgoutput::{Datum, Relation, Tuple};
use crate::source::setup::{self, quote_ident, SetupError};
use crate::source::signal::{
    self, KeyText, Progress, Signal, SignalTable, PROGRESS, WINDOW_CLOSE, WINDOW_OPEN,
};
use crate::source::snapshot::{self as reader, SESSION_SETTINGS};

/// Why incremental snapshots cannot run.
#[derive(Debug, thiserror::Error)]
pub enum IncrementalError {
    #[error("signal table {table} is not in publication {publication:?}, so the connector cannot read signals or watermarks; run ALTER PUBLICATION {publication} ADD TABLE {table}")]
    SignalTableNotPublished { table: String, publication: String },
    #[error(transparent)]
    Sql(#[from] SetupError),
}

impl IncrementalError {
    /// Whether restarting may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            IncrementalError::SignalTableNotPublished { .. } => false,
            IncrementalError::Sql(e) => e.is_retryable(),
        }
    }
}

/// Where the signal table's columns are in its tuples.
struct SignalColumns {
    relation_id: u32,
    id: usize,
    kind: usize,
    data: usize,
}

/// A chunk between its watermarks.
struct Chunk {
    id: String,
    relation_id: u32,
    key_positions: Vec<usize>,
    /// The selected rows in key order; `None` once a streamed change replaced it.
    rows: Vec<Option<Tuple>>,
    index: HashMap<KeyText, usize>,
    /// The stream passed the low watermark.
    open: bool,
    /// The largest key selected, where the next chunk starts.
    end: Option<KeyText>,
}

/// The chunk in flight, DBLog's window; sans-IO.
enum Window {
    /// No chunk in flight.
    Idle,
    /// Watermarks written, the stream has not passed the high one yet.
    Pending(Chunk),
    /// Emitted at the high watermark; waiting for Kafka to acknowledge its
    /// transaction (`commit` is its end, once the Commit was read).
    Emitted {
        end: Option<KeyText>,
        commit: Option<Lsn>,
    },
}

impl Window {
    /// A new Relation message for `relation_id`: a pending chunk of it was
    /// selected with the old definition, so it is dropped and read again.
    fn relation_changed(&mut self, relation_id: u32) {
        if matches!(self, Window::Pending(c) if c.relation_id == relation_id) {
            tracing::info!(
                relation_id,
                "table definition changed during a chunk window; reading the chunk again"
            );
            *self = Window::Idle;
        }
    }

    /// A streamed change of `relation_id` with these tuples (before and
    /// after images): inside a window, their keys leave the chunk.
    fn observe(&mut self, relation_id: u32, tuples: &[&Tuple]) {
        let Window::Pending(chunk) = self else {
            return;
        };
        if !chunk.open || chunk.relation_id != relation_id {
            return;
        }
        for tuple in tuples {
            match key_of(tuple, &chunk.key_positions) {
                Some(key) if key.iter().all(Option::is_some) => {
                    if let Some(&i) = chunk.index.get(&key) {
                        chunk.rows[i] = None;
                    }
                }
                // A key we cannot read (a key column outside the replica
                // identity is null in a delete): any row of the chunk may be
                // the one changed, so the chunk is read again later rather
                // than risk emitting a row older than this change.
                _ => {
                    tracing::debug!(
                        relation_id,
                        "a change without a readable key during a chunk window; reading the chunk again"
                    );
                    *self = Window::Idle;
                    return;
                }
            }
        }
    }

    /// A streamed TRUNCATE of `relation_id`: inside a window, the chunk empties.
    fn truncated(&mut self, relation_id: u32) {
        if let Window::Pending(chunk) = self {
            if chunk.open && chunk.relation_id == relation_id {
                chunk.rows.iter_mut().for_each(|r| *r = None);
            }
        }
    }

    /// The Commit of a transaction ending at `end_lsn` was read: the first
    /// after an emitted chunk is its high watermark's.
    fn committed(&mut self, end_lsn: Lsn) {
        if let Window::Emitted { commit, .. } = self {
            commit.get_or_insert(end_lsn);
        }
    }

    /// The stream reached the progress row with `kind` for chunk `chunk_id`:
    /// the low watermark opens the window; the high one closes it and
    /// returns the rows no streamed change replaced, to emit now.
    fn watermark(&mut self, kind: &str, chunk_id: Option<&str>) -> Option<(u32, Vec<Tuple>)> {
        let Window::Pending(chunk) = self else {
            return None;
        };
        if chunk_id != Some(chunk.id.as_str()) {
            return None;
        }
        if kind == WINDOW_OPEN {
            chunk.open = true;
        } else if kind == WINDOW_CLOSE && chunk.open {
            let relation_id = chunk.relation_id;
            let rows: Vec<Tuple> = std::mem::take(&mut chunk.rows)
                .into_iter()
                .flatten()
                .collect();
            let end = chunk.end.take();
            *self = Window::Emitted { end, commit: None };
            return Some((relation_id, rows));
        }
        None
    }
}

/// The incremental snapshot state of one attempt.
pub(super) struct Incremental {
    signal: SignalTable,
    progress_id: String,
    /// Watermarks and chunk reads, with the replication session's text settings.
    sql: Client,
    chunk_size: u32,
    publication: String,
    signal_columns: Option<SignalColumns>,
    /// What Kafka has acknowledged: the durable resume point.
    progress: Progress,
    window: Window,
    /// Makes chunk ids unique per attempt, so replayed watermarks of an
    /// earlier attempt never match a chunk of this one.
    nonce: String,
    chunks: u64,
    rows: u64,
    started: Option<Instant>,
    last_log: Instant,
}

fn key_of(tuple: &Tuple, positions: &[usize]) -> Option<KeyText> {
    positions
        .iter()
        .map(|&p| match tuple.0.get(p)? {
            Datum::Text(b) => Some(Some(String::from_utf8_lossy(b).into_owned())),
            Datum::Null => Some(None),
            Datum::UnchangedToast | Datum::Binary(_) => None,
        })
        .collect()
}

fn text_at(tuple: &Tuple, position: usize) -> Option<String> {
    match tuple.0.get(position)? {
        Datum::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

fn literal(value: &Option<String>) -> String {
    match value {
        Some(v) => format!("'{}'", v.replace('\'', "''")),
        None => "NULL".to_owned(),
    }
}

/// The statement reading the chunk after `after` (key columns are compared
/// as a row, with untyped literals that take the columns' types).
fn chunk_query(
    relation: &Relation,
    key_names: &[&str],
    after: Option<&KeyText>,
    limit: u32,
) -> String {
    let columns: Vec<String> = relation
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let keys: Vec<String> = key_names.iter().map(|k| quote_ident(k)).collect();
    let keys = keys.join(", ");
    let filter = after.map_or(String::new(), |after| {
        let values: Vec<String> = after.iter().map(literal).collect();
        format!(" WHERE ({keys}) > ({})", values.join(", "))
    });
    format!(
        "SELECT {} FROM {}.{}{filter} ORDER BY {keys} LIMIT {limit}",
        columns.join(", "),
        quote_ident(&relation.namespace),
        quote_ident(&relation.name),
    )
}

impl Incremental {
    /// The incremental snapshot machinery when `--signal-data-collection` is
    /// set: checks the signal table is published and loads recorded progress.
    pub(super) async fn start(config: &RunConfig) -> Result<Option<Self>, IncrementalError> {
        let Some(signal) = config
            .signal_data_collection
            .as_deref()
            .and_then(SignalTable::parse)
        else {
            return Ok(None);
        };
        let sql = setup::connect(&config.pg_url).await?;
        sql.batch_execute(SESSION_SETTINGS)
            .await
            .map_err(|error| SetupError::Query {
                action: "setting up the incremental snapshot connection".into(),
                error,
            })?;
        let published = signal::is_published(
            &sql,
            &config.publication_name,
            &signal.schema,
            &signal.table,
        )
        .await?;
        if !published {
            return Err(IncrementalError::SignalTableNotPublished {
                table: signal.to_string(),
                publication: config.publication_name.clone(),
            });
        }
        let progress_id = signal::progress_row_id(&config.slot_name);
        let progress = signal::read_progress(&sql, &signal, &progress_id)
            .await?
            .unwrap_or_default();
        let resuming = !progress.tables.is_empty();
        if resuming {
            tracing::info!(tables = ?progress.tables, last_key = ?progress.last_key, "resuming the incremental snapshot");
        }
        Ok(Some(Incremental {
            signal,
            progress_id,
            sql,
            chunk_size: config.incremental_snapshot_chunk_size,
            publication: config.publication_name.clone(),
            signal_columns: None,
            started: resuming.then(Instant::now),
            progress,
            window: Window::Idle,
            nonce: format!("{:x}", super::stream::now_micros()),
            chunks: 0,
            rows: 0,
            last_log: Instant::now(),
        }))
    }

    /// Whether `relation` is the signal table; remembers where its columns are.
    pub(super) fn is_signal_relation(&mut self, relation: &Relation) -> bool {
        if !self.signal.is(&relation.namespace, &relation.name) {
            return false;
        }
        let position = |name: &str| relation.columns.iter().position(|c| c.name == name);
        match (position("id"), position("type"), position("data")) {
            (Some(id), Some(kind), Some(data)) => {
                self.signal_columns = Some(SignalColumns {
                    relation_id: relation.id,
                    id,
                    kind,
                    data,
                });
            }
            _ => {
                tracing::warn!(table = %self.signal, "the signal table lacks an id, type or data column; its rows are ignored")
            }
        }
        true
    }

    /// Whether changes of `relation_id` are signals.
    pub(super) fn is_signal(&self, relation_id: u32) -> bool {
        self.signal_columns
            .as_ref()
            .is_some_and(|c| c.relation_id == relation_id)
    }

    /// Reads a signal-table row.
    pub(super) fn signal_of(&self, tuple: &Tuple) -> Option<Signal> {
        let columns = self.signal_columns.as_ref()?;
        let id = text_at(tuple, columns.id)?;
        let kind = text_at(tuple, columns.kind)?;
        let data = text_at(tuple, columns.data);
        Some(signal::parse(
            &id,
            &kind,
            data.as_deref(),
            &self.progress_id,
        ))
    }

    /// A new Relation message for `relation_id` (see [`Window::relation_changed`]).
    pub(super) fn relation_changed(&mut self, relation_id: u32) {
        self.window.relation_changed(relation_id);
    }

    /// A streamed change (see [`Window::observe`]).
    pub(super) fn observe(&mut self, relation_id: u32, tuples: &[&Tuple]) {
        self.window.observe(relation_id, tuples);
    }

    /// A streamed TRUNCATE of `relation_id`.
    pub(super) fn truncated(&mut self, relation_id: u32) {
        self.window.truncated(relation_id);
    }

    /// The Commit of a transaction ending at `end_lsn` was read.
    pub(super) fn committed(&mut self, end_lsn: Lsn) {
        self.window.committed(end_lsn);
    }

    /// Whether a chunk can be started (or the acknowledged one recorded).
    pub(super) fn wants_step(&self, acked: Lsn) -> bool {
        match &self.window {
            Window::Idle => !self.progress.tables.is_empty() || self.started.is_some(),
            Window::Emitted {
                commit: Some(lsn), ..
            } => acked >= *lsn,
            _ => false,
        }
    }

    async fn persist(&self, kind: &str, chunk: Option<&str>) -> Result<(), SetupError> {
        let mut progress = self.progress.clone();
        progress.chunk = chunk.map(str::to_owned);
        let data = serde_json::to_string(&progress).unwrap_or_default();
        signal::upsert(&self.sql, &self.signal, &self.progress_id, kind, &data).await
    }

    /// Acts on a signal; returns the rows to emit now (at a high watermark).
    async fn on_signal(
        &mut self,
        signal: Signal,
        metrics: &crate::metrics::Metrics,
    ) -> Result<Option<(u32, Vec<Tuple>)>, SetupError> {
        match signal {
            Signal::ExecuteSnapshot { tables } => {
                let mut added = Vec::new();
                for table in tables {
                    if !self.progress.tables.contains(&table) {
                        self.progress.tables.push(table.clone());
                        added.push(table);
                    }
                }
                tracing::info!(?added, tables = ?self.progress.tables, "incremental snapshot requested");
                self.started.get_or_insert_with(Instant::now);
                metrics.incremental_tables_remaining(self.progress.tables.len() as u64);
                self.persist(PROGRESS, None).await?;
            }
            Signal::StopSnapshot { tables } => {
                let current = self.progress.tables.first().cloned();
                if tables.is_empty() {
                    self.progress.tables.clear();
                } else {
                    self.progress.tables.retain(|t| !tables.contains(t));
                }
                if self.progress.tables.first() != current.as_ref() {
                    // The current table is gone: so is its chunk in flight.
                    self.progress.last_key = None;
                    self.window = Window::Idle;
                }
                tracing::info!(stopped = ?tables, remaining = ?self.progress.tables, "incremental snapshot stop requested");
                metrics.incremental_tables_remaining(self.progress.tables.len() as u64);
                if self.progress.tables.is_empty() {
                    self.started = None;
                    signal::delete(&self.sql, &self.signal, &self.progress_id).await?;
                } else {
                    self.persist(PROGRESS, None).await?;
                }
            }
            Signal::Window { kind, progress } => {
                let emitted = self.window.watermark(&kind, progress.chunk.as_deref());
                if let Some((_, rows)) = &emitted {
                    self.chunks += 1;
                    self.rows += rows.len() as u64;
                    metrics.incremental_chunk(rows.len() as u64);
                }
                return Ok(emitted);
            }
            Signal::Ignored { kind, reason } => {
                tracing::warn!(table = %self.signal, %kind, %reason, "signal ignored");
            }
        }
        Ok(None)
    }
}

impl Stream<'_> {
    /// A change of the signal table: acts on it (the row itself is emitted
    /// afterwards like any other). At a high watermark, emits the chunk in
    /// transaction `txn`.
    pub(super) async fn handle_signal(
        &mut self,
        tuple: &Tuple,
        lsn: Lsn,
        txn: TxnId,
        xid: u32,
        commit_time_micros: i64,
    ) -> Result<(), PipelineError> {
        let Some(incremental) = self.incremental.as_mut() else {
            return Ok(());
        };
        let Some(signal) = incremental.signal_of(tuple) else {
            return Ok(());
        };
        let emitted = incremental
            .on_signal(signal, &self.metrics)
            .await
            .map_err(IncrementalError::from)?;
        let Some((relation_id, rows)) = emitted else {
            return Ok(());
        };
        let schema = Arc::clone(self.relations.get(relation_id, lsn)?);
        for tuple in &rows {
            let row = self.relations.decode_row(&schema, tuple, lsn)?;
            let event = ChangeEvent {
                table: Arc::clone(&schema),
                op: Op::Read,
                before: None,
                after: Some(row),
                source: SourceInfo {
                    commit_time_micros,
                    xid,
                    lsn,
                    last_commit_lsn: self.last_commit_lsn,
                    snapshot: "incremental",
                },
            };
            self.send_event(&event, Vec::new(), false, txn).await?;
        }
        tracing::debug!(table = %format!("{}.{}", schema.schema, schema.table), rows = rows.len(), %lsn, "incremental snapshot chunk emitted");
        Ok(())
    }

    /// Between transactions: records an acknowledged chunk and starts the
    /// next one (low watermark, select, high watermark).
    pub(super) async fn incremental_step(&mut self) -> Result<(), PipelineError> {
        let Some(mut incremental) = self.incremental.take() else {
            return Ok(());
        };
        let result = self.step(&mut incremental).await;
        self.incremental = Some(incremental);
        result
    }

    async fn step(&mut self, inc: &mut Incremental) -> Result<(), PipelineError> {
        if let Window::Emitted { end, commit } = &inc.window {
            if commit.is_none_or(|lsn| self.sink.acked() < lsn) {
                return Ok(());
            }
            match end {
                Some(end) => inc.progress.last_key = Some(end.clone()),
                None => {
                    let done = if inc.progress.tables.is_empty() {
                        String::new()
                    } else {
                        inc.progress.tables.remove(0)
                    };
                    inc.progress.last_key = None;
                    self.metrics.incremental_table_done();
                    self.metrics
                        .incremental_tables_remaining(inc.progress.tables.len() as u64);
                    tracing::info!(table = %done, remaining = inc.progress.tables.len(), "incremental snapshot of table done");
                }
            }
            inc.window = Window::Idle;
        }
        if !matches!(inc.window, Window::Idle) {
            return Ok(());
        }
        if inc.last_log.elapsed() > Duration::from_secs(5) {
            inc.last_log = Instant::now();
            let secs = inc.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
            tracing::info!(
                table = inc
                    .progress
                    .tables
                    .first()
                    .map(String::as_str)
                    .unwrap_or(""),
                tables_remaining = inc.progress.tables.len(),
                rows = inc.rows,
                chunks = inc.chunks,
                rows_per_sec = (inc.rows as f64 / secs.max(0.001)) as u64,
                "incremental snapshot progress"
            );
        }
        loop {
            let Some(table) = inc.progress.tables.first().cloned() else {
                if let Some(started) = inc.started.take() {
                    signal::delete(&inc.sql, &inc.signal, &inc.progress_id)
                        .await
                        .map_err(IncrementalError::from)?;
                    tracing::info!(
                        rows = inc.rows,
                        chunks = inc.chunks,
                        secs = started.elapsed().as_secs_f64(),
                        "incremental snapshot completed"
                    );
                    self.metrics.incremental_tables_remaining(0);
                }
                return Ok(());
            };
            let Some((relation, key_positions)) = self.snapshot_target(inc, &table).await? else {
                inc.progress.tables.remove(0);
                inc.progress.last_key = None;
                self.metrics
                    .incremental_tables_remaining(inc.progress.tables.len() as u64);
                inc.persist(PROGRESS, None)
                    .await
                    .map_err(IncrementalError::from)?;
                continue;
            };
            let key_names: Vec<&str> = key_positions
                .iter()
                .map(|&p| relation.columns[p].name.as_str())
                .collect();
            let chunk_id = format!("{}-{}", inc.nonce, inc.chunks);
            let sql_error = |action: String| move |error| SetupError::Query { action, error };
            inc.persist(WINDOW_OPEN, Some(&chunk_id))
                .await
                .map_err(IncrementalError::from)?;
            let query = chunk_query(
                &relation,
                &key_names,
                inc.progress.last_key.as_ref(),
                inc.chunk_size,
            );
            let messages = inc
                .sql
                .simple_query(&query)
                .await
                .map_err(sql_error(format!("reading a chunk of {table}")))
                .map_err(IncrementalError::from)?;
            inc.persist(WINDOW_CLOSE, Some(&chunk_id))
                .await
                .map_err(IncrementalError::from)?;
            let mut rows = Vec::new();
            let mut index = HashMap::new();
            for message in messages {
                let SimpleQueryMessage::Row(row) = message else {
                    continue;
                };
                let tuple = Tuple(
                    (0..row.len())
                        .map(|i| {
                            row.get(i).map_or(Datum::Null, |v| {
                                Datum::Text(Bytes::copy_from_slice(v.as_bytes()))
                            })
                        })
                        .collect(),
                );
                if let Some(key) = key_of(&tuple, &key_positions) {
                    index.insert(key, rows.len());
                }
                rows.push(Some(tuple));
            }
            let full = rows.len() >= inc.chunk_size as usize;
            let end = rows
                .last()
                .and_then(|r| r.as_ref())
                .and_then(|t| key_of(t, &key_positions))
                .filter(|_| full);
            tracing::trace!(%table, rows = rows.len(), chunk = %chunk_id, "chunk selected");
            inc.window = Window::Pending(Chunk {
                id: chunk_id,
                relation_id: relation.id,
                key_positions,
                rows,
                index,
                open: false,
                end,
            });
            return Ok(());
        }
    }

    /// The relation and key positions of `table` for a chunk, after making
    /// sure the stream's relation cache knows it; `None` (with a warning)
    /// when it cannot be snapshotted incrementally.
    async fn snapshot_target(
        &mut self,
        inc: &Incremental,
        table: &str,
    ) -> Result<Option<(Relation, Vec<usize>)>, PipelineError> {
        let skip = |reason: &str| {
            tracing::warn!(%table, %reason, "table skipped by the incremental snapshot");
            None
        };
        let Some(name) = SignalTable::parse(table) else {
            return Ok(skip("not a schema.table name"));
        };
        if name == inc.signal {
            return Ok(skip("it is the signal table"));
        }
        let oid: Option<u32> = self
            .sql
            .query_opt(
                "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2",
                &[&name.schema, &name.table],
            )
            .await
            .map_err(|error| SetupError::Query {
                action: format!("looking up table {table}"),
                error,
            })?
            .map(|r| r.get(0));
        let Some(oid) = oid else {
            return Ok(skip("no such table"));
        };
        if !signal::is_published(&self.sql, &inc.publication, &name.schema, &name.table).await? {
            return Ok(skip("not in the publication, so its changes are not streamed; ALTER PUBLICATION ... ADD TABLE it, then signal again"));
        }
        if self.relations.relation(oid).is_none() || self.relations.get(oid, Lsn::ZERO).is_err() {
            let relation = reader::relation_from_catalog(&self.sql, oid).await?;
            if !self.relations.admits(&relation) {
                return Ok(skip("excluded by the table filters"));
            }
            if !self.relations.knows_types_of(&relation) {
                *self.relations.types_mut() = setup::load_types(&self.sql).await?;
            }
            let catalog = setup::catalog_columns(&self.sql, oid).await?;
            let schema = self.relations.update(&relation, &catalog)?;
            self.ensure_topic(&schema.topic).await?;
        }
        let schema = Arc::clone(self.relations.get(oid, Lsn::ZERO)?);
        let Some(relation) = self.relations.relation(oid).cloned() else {
            return Ok(skip("its definition is unknown"));
        };
        match self.relations.key_positions(&schema) {
            Some(positions) if !positions.is_empty() => Ok(Some((relation, positions))),
            _ => Ok(skip("it has no primary key (nor --message-key-columns): chunks are read in key order, and streamed changes are matched by key")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pgoutput::{Column, ReplicaIdentity};

    #[test]
    fn chunk_queries_compare_keys_as_rows_with_quoted_literals() {
        let relation = Relation {
            id: 1,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: ["a", "b", "v"]
                .iter()
                .map(|n| Column {
                    is_key: *n != "v",
                    name: (*n).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        };
        assert_eq!(
            chunk_query(&relation, &["a", "b"], None, 10),
            "SELECT \"a\", \"b\", \"v\" FROM \"public\".\"t\" ORDER BY \"a\", \"b\" LIMIT 10"
        );
        assert_eq!(
            chunk_query(
                &relation,
                &["a", "b"],
                Some(&vec![Some("it's".into()), Some("2".into())]),
                5
            ),
            "SELECT \"a\", \"b\", \"v\" FROM \"public\".\"t\" WHERE (\"a\", \"b\") > ('it''s', '2') ORDER BY \"a\", \"b\" LIMIT 5"
        );
    }

    fn text(values: &[&str]) -> Tuple {
        Tuple(
            values
                .iter()
                .map(|v| Datum::Text(Bytes::copy_from_slice(v.as_bytes())))
                .collect(),
        )
    }

    /// A pending chunk of relation 7 with rows keyed 1..=4 (key in column 0).
    fn pending() -> Window {
        let rows: Vec<Tuple> = (1..=4).map(|k| text(&[&k.to_string(), "v"])).collect();
        let index = rows
            .iter()
            .enumerate()
            .map(|(i, t)| (key_of(t, &[0]).expect("key"), i))
            .collect();
        Window::Pending(Chunk {
            id: "c1".into(),
            relation_id: 7,
            key_positions: vec![0],
            rows: rows.into_iter().map(Some).collect(),
            index,
            open: false,
            end: Some(vec![Some("4".into())]),
        })
    }

    fn keys(rows: &[Tuple]) -> Vec<String> {
        rows.iter()
            .map(|t| key_of(t, &[0]).expect("key")[0].clone().expect("not null"))
            .collect()
    }

    #[test]
    fn changes_inside_the_window_win_over_the_chunk() {
        let mut window = pending();
        // Before the low watermark: the select already saw it.
        window.observe(7, &[&text(&["1", "x"])]);
        assert!(
            window.watermark(WINDOW_CLOSE, Some("c1")).is_none(),
            "closing needs an open window"
        );
        assert!(window.watermark(WINDOW_OPEN, Some("other")).is_none());
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(7, &[&text(&["2", "x"])]);
        window.observe(8, &[&text(&["3", "x"])]);
        let old_key = text(&["4", "v"]);
        window.observe(7, &[&old_key, &text(&["9", "v"])]);
        let (relation, rows) = window
            .watermark(WINDOW_CLOSE, Some("c1"))
            .expect("the high watermark emits");
        assert_eq!(relation, 7);
        assert_eq!(
            keys(&rows),
            ["1", "3"],
            "2 and 4 changed in the window; 3 is another table's"
        );
        assert!(matches!(window, Window::Emitted { commit: None, .. }));
        window.committed(Lsn::new(100));
        window.committed(Lsn::new(200));
        assert!(matches!(window, Window::Emitted { commit: Some(l), .. } if l == Lsn::new(100)));
    }

    #[test]
    fn unreadable_keys_truncates_and_new_definitions_reset_the_window() {
        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(7, &[&Tuple(vec![Datum::Null, Datum::Null])]);
        assert!(
            matches!(window, Window::Idle),
            "a null key may be any row: read again"
        );

        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.truncated(7);
        let (_, rows) = window.watermark(WINDOW_CLOSE, Some("c1")).expect("closes");
        assert!(
            rows.is_empty(),
            "a truncate in the window empties the chunk"
        );

        let mut window = pending();
        window.relation_changed(8);
        assert!(matches!(window, Window::Pending(_)));
        window.relation_changed(7);
        assert!(
            matches!(window, Window::Idle),
            "rows of the old definition are read again"
        );
    }

    #[test]
    fn keys_are_read_from_text_datums() {
        let tuple = Tuple(vec![
            Datum::Text(Bytes::from_static(b"7")),
            Datum::Null,
            Datum::Text(Bytes::from_static(b"x")),
        ]);
        assert_eq!(
            key_of(&tuple, &[0, 1]),
            Some(vec![Some("7".to_owned()), None])
        );
        let toasted = Tuple(vec![Datum::UnchangedToast]);
        assert_eq!(key_of(&toasted, &[0]), None);
    }
}
