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
//! watermark's commit), and only the next low watermark, a signal, or a
//! graceful stop writes it. So the recorded position never runs ahead of what Kafka has:
//! a restart re-reads at most the chunk that was in flight (sent again, never
//! lost). Signals update the row as soon as they are read, before their
//! transaction can be confirmed, so a confirmed signal is never forgotten.
//! The slot may replay a signal after a restart; a table it names again is
//! snapshotted again (duplicates, not loss).
//!
//! Under `--delivery exactly-once` the progress also rides in the progress
//! record of every Kafka transaction and wins on start ([`committed`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_postgres::{Client, SimpleQueryMessage};

mod committed;
mod window;

use window::{key_of, Chunk, Window};

use super::stream::Stream;
use super::PipelineError;
use crate::checkpoint::TxnId;
use crate::config::RunConfig;
use crate::event::{ChangeEvent, Op, SnapshotMarker, SourceInfo};
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
            Signal::Foreign => {}
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
        let changes_progress = matches!(
            signal,
            Signal::ExecuteSnapshot { .. } | Signal::StopSnapshot { .. }
        );
        let emitted = incremental
            .on_signal(signal, &self.metrics)
            .await
            .map_err(IncrementalError::from)?;
        if changes_progress || emitted.is_some() {
            // Exactly-once: this transaction goes into a Kafka transaction
            // whose progress record carries what it changed (module docs).
            self.sink.open_batch()?;
        }
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
                    snapshot: SnapshotMarker::Incremental,
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

    /// Moves the emitted chunk into the recorded progress once Kafka
    /// acknowledged it (in memory; the next write of the progress row
    /// carries it). Returns whether it did.
    fn record_acked_chunk(&self, inc: &mut Incremental) -> bool {
        let Window::Emitted { end, commit } = &inc.window else {
            return false;
        };
        if commit.is_none_or(|lsn| self.sink.acked() < lsn) {
            return false;
        }
        let finished = end.is_none();
        let done = inc.progress.chunk_done(end.clone());
        if finished {
            let done = done.unwrap_or_default();
            self.metrics.incremental_table_done();
            self.metrics
                .incremental_tables_remaining(inc.progress.tables.len() as u64);
            tracing::info!(table = %done, remaining = inc.progress.tables.len(), "incremental snapshot of table done");
        }
        inc.window = Window::Idle;
        true
    }

    /// On a graceful stop, once everything sent is acknowledged: writes the
    /// last acknowledged chunk into the progress row, so the next start does
    /// not read it again. Needed under exactly-once too: a caught-up stop may
    /// confirm the slot past the last progress record, and then the row is
    /// what the next start trusts (see [`committed`]).
    pub(super) async fn record_progress_on_stop(&mut self) -> Result<(), SetupError> {
        let Some(mut inc) = self.incremental.take() else {
            return Ok(());
        };
        let result = match self.record_acked_chunk(&mut inc) {
            false => Ok(()),
            true if inc.progress.tables.is_empty() => {
                inc.started = None;
                signal::delete(&inc.sql, &inc.signal, &inc.progress_id).await
            }
            true => inc.persist(PROGRESS, None).await,
        };
        self.incremental = Some(inc);
        result
    }

    async fn step(&mut self, inc: &mut Incremental) -> Result<(), PipelineError> {
        if matches!(inc.window, Window::Emitted { .. }) && !self.record_acked_chunk(inc) {
            return Ok(());
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
}
