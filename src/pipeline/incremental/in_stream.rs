//! The incremental snapshot inside the read loop: acting on a signal-table
//! change, emitting a window's chunks at its high watermark in the
//! transaction that closes it, and between transactions recording an
//! acknowledged window and opening the next one. The state it drives is [`super::Incremental`];
//! what it emits goes through the stream's delivery like any change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::SimpleQueryMessage;

use super::blocking::SignalSource;
use super::table_info::TableInfo;
use super::window::{key_of, Chunk, Window};
use super::{chunk_query, Action, Incremental, IncrementalError};
use crate::checkpoint::TxnId;
use crate::event::{SnapshotMarker, SourceInfo};
use crate::lsn::Lsn;
use crate::notification::Kind;
use crate::pipeline::stream::Stream;
use crate::pipeline::PipelineError;
use crate::source::pgoutput::{Datum, Relation, Tuple};
use crate::source::setup::{self, SetupError};
use crate::source::signal::{self, Signal, SignalTable, PROGRESS, WINDOW_CLOSE, WINDOW_OPEN};
use crate::source::snapshot as reader;

impl Stream<'_> {
    /// A change of the signal table: acts on it (the row itself is emitted
    /// afterwards like any other). At a high watermark, emits the chunk in
    /// transaction `txn`.
    pub(in crate::pipeline) async fn handle_signal(
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
            Signal::ExecuteSnapshot { .. }
                | Signal::StopSnapshot { .. }
                | Signal::PauseSnapshot
                | Signal::ResumeSnapshot
        );
        let action = incremental
            .on_signal(signal, &self.notifier)
            .await
            .map_err(IncrementalError::from)?;
        if changes_progress || matches!(action, Action::Emit(..)) {
            // Exactly-once: this transaction goes into a Kafka transaction
            // whose progress record carries what it changed (module docs).
            self.delivery.open_batch()?;
        }
        let source = (lsn, txn, xid, commit_time_micros);
        match action {
            Action::Nothing => Ok(()),
            Action::Emit(closed) => {
                // A replay reads the chunks again as the tables are then.
                self.delivery.unanchor();
                for chunk in &closed {
                    self.emit_chunk(chunk.relation_id, &chunk.rows, source)
                        .await?;
                }
                Ok(())
            }
            Action::Blocking {
                id,
                tables,
                conditions,
            } => {
                self.blocking_snapshot(&id, &tables, &conditions, source)
                    .await
            }
        }
    }

    /// Emits a chunk's `rows` of `relation_id` as `op: "r"` events in the
    /// transaction `source` names.
    pub(super) async fn emit_chunk(
        &mut self,
        relation_id: u32,
        rows: &[Tuple],
        (lsn, txn, xid, commit_time_micros): SignalSource,
    ) -> Result<(), PipelineError> {
        let schema = Arc::clone(self.relations.get(relation_id, lsn)?);
        for tuple in rows {
            let source = SourceInfo {
                origin: None,
                commit_time_micros,
                xid,
                lsn,
                last_commit_lsn: self.last_commit_lsn,
                snapshot: SnapshotMarker::Incremental,
            };
            let event = self.relations.read_event(&schema, tuple, source)?;
            self.send_event(&event, Vec::new(), false, txn).await?;
        }
        tracing::debug!(table = %format!("{}.{}", schema.schema, schema.table), rows = rows.len(), %lsn, "incremental snapshot chunk emitted");
        Ok(())
    }

    /// Between transactions: records an acknowledged chunk and starts the
    /// next one (low watermark, select, high watermark).
    pub(in crate::pipeline) async fn incremental_step(&mut self) -> Result<(), PipelineError> {
        let Some(mut incremental) = self.incremental.take() else {
            return Ok(());
        };
        let result = match self.step(&mut incremental).await {
            Ok(()) => self.record_read_only_progress(&mut incremental).await,
            failed => failed,
        };
        self.incremental = Some(incremental);
        result
    }

    /// Moves the emitted window's chunks into the recorded progress once
    /// Kafka acknowledged them (in memory; the next write of the progress
    /// row carries it); a table whose last chunk it was is done. Returns
    /// whether it did.
    fn record_acked_chunk(&self, inc: &mut Incremental) -> bool {
        let Window::Emitted { ends, commit } = &inc.window else {
            return false;
        };
        let acked = self.delivery.acked();
        if commit.is_none_or(|lsn| acked < lsn) {
            return false;
        }
        // A read-only chunk's transaction sits at a position the slot may
        // already be acknowledged at (a keepalive's): only past it, or with
        // nothing in flight, are its rows surely in Kafka.
        let read_only_in_flight =
            inc.read_only.is_some() && *commit == Some(acked) && !self.delivery.is_drained();
        if read_only_in_flight {
            return false;
        }
        let tables = inc.progress.tables.clone();
        for chunk in ends.clone() {
            if !inc.progress.table_chunk_done(&chunk.table, chunk.end) {
                continue;
            }
            let rows = inc.table_rows(&chunk.table);
            inc.table_infos.remove(&chunk.table);
            self.metrics.incremental_table_done();
            inc.count_tables_remaining();
            tracing::info!(table = %chunk.table, rows, remaining = inc.progress.tables.len(), "incremental snapshot of table done");
            self.notifier.notify(
                inc.about_tables(Kind::TableScanCompleted, &tables)
                    .with("scanned_collection", chunk.table)
                    .with("total_rows_scanned", rows.to_string())
                    .with("status", "SUCCEEDED"),
            );
        }
        inc.window = Window::Idle;
        true
    }

    /// On a graceful stop, once everything sent is acknowledged: writes the
    /// last acknowledged chunk into the progress row, so the next start does
    /// not read it again. Needed under exactly-once too: a caught-up stop may
    /// confirm the slot past the last progress record, and then the row is
    /// what the next start trusts (see [`committed`]).
    pub(in crate::pipeline) async fn record_progress_on_stop(&mut self) -> Result<(), SetupError> {
        let Some(mut inc) = self.incremental.take() else {
            return Ok(());
        };
        let result = match self.record_acked_chunk(&mut inc) {
            false => Ok(()),
            true if inc.progress.tables.is_empty() => {
                inc.tally.end();
                inc.forget_progress().await
            }
            true => inc.persist(PROGRESS, None).await,
        };
        self.incremental = Some(inc);
        result
    }

    async fn step(&mut self, inc: &mut Incremental) -> Result<(), PipelineError> {
        if matches!(inc.window, Window::Emitted { .. }) {
            if !self.record_acked_chunk(inc) {
                return Ok(());
            }
            if inc.progress.paused && !inc.progress.tables.is_empty() {
                // The next low watermark, which would carry the chunk just
                // recorded, waits for the resume: written now, or a stop
                // or crash while paused reads that chunk again.
                inc.persist(PROGRESS, None).await?;
            }
        }
        if matches!(inc.window, Window::Pending { .. }) {
            return self.emit_read_only_chunk(inc).await;
        }
        if !matches!(inc.window, Window::Idle) {
            return Ok(());
        }
        if inc.visibility.wants_pruning() {
            inc.read_snapshot().await?;
        }
        log_progress(inc);
        if inc.progress.paused && !inc.progress.tables.is_empty() {
            return Ok(());
        }
        // The first tables of the list, as many as a window holds; one that
        // cannot be read is skipped and the next takes its place.
        let mut targets = Vec::new();
        let mut next = 0;
        while targets.len() < inc.tables_in_flight && next < inc.progress.tables.len() {
            let table = inc.progress.tables[next].clone();
            let target = match self.snapshot_target(inc, &table).await? {
                Ok((relation, Some(key_positions))) => Ok((relation, key_positions)),
                Ok((_, None)) => {
                    skipped(&table, "it has no primary key (nor --message-key-columns): chunks are read in key order, and streamed changes are matched by key");
                    Err("NO_PRIMARY_KEY")
                }
                Err(status) => Err(status),
            };
            match target {
                Ok((relation, key_positions)) => {
                    targets.push(Target {
                        table,
                        relation,
                        key_positions,
                    });
                    next += 1;
                }
                Err(status) => {
                    self.notifier.notify(
                        inc.about_tables(Kind::TableScanCompleted, &inc.progress.tables)
                            .with("scanned_collection", table.as_str())
                            .with("total_rows_scanned", "0")
                            .with("status", status),
                    );
                    inc.progress.table_chunk_done(&table, None);
                    inc.table_infos.remove(&table);
                    inc.count_tables_remaining();
                    inc.persist(PROGRESS, None)
                        .await
                        .map_err(IncrementalError::from)?;
                }
            }
        }
        if !targets.is_empty() {
            return select_window(inc, targets).await;
        }
        if let Some(ended) = inc.tally.end() {
            inc.forget_progress()
                .await
                .map_err(IncrementalError::from)?;
            tracing::info!(
                rows = ended.rows,
                chunks = ended.chunks,
                secs = ended.elapsed.as_secs_f64(),
                "incremental snapshot completed"
            );
            self.metrics.incremental_tables_remaining(0);
            self.notifier.notify(inc.notification(Kind::Completed));
            inc.progress = Default::default();
        }
        Ok(())
    }

    /// The relation and key positions of `table` (`None`: it has no key),
    /// after making sure the stream's relation cache knows it; `Err` (with
    /// a warning) with Debezium's status when it cannot be snapshotted.
    pub(super) async fn snapshot_target(
        &mut self,
        inc: &Incremental,
        table: &str,
    ) -> Result<Result<(Relation, Option<Vec<usize>>), &'static str>, PipelineError> {
        let skip = |reason: &str| {
            skipped(table, reason);
            Err(if reason == "no such table" {
                "UNKNOWN_SCHEMA"
            } else {
                "SKIPPED"
            })
        };
        let Some(name) = SignalTable::parse(table) else {
            return Ok(skip("not a schema.table name"));
        };
        if inc.signal.as_ref() == Some(&name) {
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
            let relation = reader::relation_from_catalog(&self.sql, oid, &inc.publication).await?;
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
        let positions = self
            .relations
            .key_positions(&schema)
            .filter(|p| !p.is_empty());
        Ok(Ok((relation, positions)))
    }
}

fn skipped(table: &str, reason: &str) {
    tracing::warn!(%table, %reason, "table skipped by the snapshot");
}

/// Every 5 s while a snapshot runs: where it is and how fast.
fn log_progress(inc: &mut Incremental) {
    // Read-only steps run without a snapshot too (to prune the streamed
    // xids): after a stop-snapshot there is nothing to report.
    if inc.progress.tables.is_empty() {
        return;
    }
    if inc.last_log.elapsed() > Duration::from_secs(5) {
        inc.last_log = Instant::now();
        let (rows, chunks, rows_per_sec) = inc.tally.progress();
        let in_flight = inc.progress.tables.len().min(inc.tables_in_flight);
        tracing::info!(
            tables = ?inc.progress.tables.get(..in_flight).unwrap_or_default(),
            tables_remaining = inc.progress.tables.len(),
            rows,
            chunks,
            rows_per_sec,
            "incremental snapshot progress"
        );
    }
}

/// A table a window reads a chunk of: its relation and key positions.
struct Target {
    table: String,
    relation: Relation,
    key_positions: Vec<usize>,
}

/// Opens a window with a chunk of each target after its last key: the low
/// watermark, the selects, the high watermark (read-only: the selects in one
/// snapshot, with its marks). The rows wait in the window until the stream
/// passes the high watermark ([`Window::Pending`]).
async fn select_window(inc: &mut Incremental, targets: Vec<Target>) -> Result<(), PipelineError> {
    let mut queries = Vec::with_capacity(targets.len());
    for target in &targets {
        let key_names: Vec<&str> = target
            .key_positions
            .iter()
            .map(|&p| target.relation.columns[p].name.as_str())
            .collect();
        let filter = inc
            .progress
            .conditions
            .get(&target.table)
            .map(String::as_str);
        if !inc.table_infos.contains_key(&target.table) {
            let info = TableInfo::read(
                &inc.sql,
                &target.table,
                &target.relation,
                &key_names,
                filter,
            )
            .await
            .map_err(IncrementalError::from)?;
            inc.table_infos.insert(target.table.clone(), info);
        }
        queries.push(chunk_query(
            &target.relation,
            &key_names,
            inc.progress.after(&target.table),
            inc.chunk_size,
            filter,
        ));
    }
    let names: Vec<&str> = targets.iter().map(|t| t.table.as_str()).collect();
    let window_id = format!("{}-{}", inc.nonce, inc.windows);
    inc.windows += 1;
    let read_only = inc.read_only.is_some();
    if !read_only {
        inc.persist(WINDOW_OPEN, Some(&window_id))
            .await
            .map_err(IncrementalError::from)?;
    }
    let Some((high, results)) = inc.read_chunks(&queries, &names).await? else {
        // Read with a snapshot that misses a streamed transaction; this
        // window's watermark, if written, matches no window.
        return Ok(());
    };
    match inc.read_only.as_mut() {
        Some(streamed) => streamed.high = high,
        None => inc
            .persist(WINDOW_CLOSE, Some(&window_id))
            .await
            .map_err(IncrementalError::from)?,
    }
    let chunks = targets
        .into_iter()
        .zip(results)
        .map(|(target, messages)| buffer_chunk(target, messages, inc.chunk_size))
        .collect();
    inc.window = Window::Pending {
        id: window_id,
        // Read-only: no low watermark to wait for; the window is open
        // from the read on ([`super::read_only`]).
        open: read_only,
        chunks,
    };
    Ok(())
}

/// The rows a chunk's select returned, buffered and indexed by key.
fn buffer_chunk(target: Target, messages: Vec<SimpleQueryMessage>, chunk_size: u32) -> Chunk {
    let mut rows = Vec::new();
    let mut index = HashMap::new();
    for message in messages {
        let SimpleQueryMessage::Row(row) = message else {
            continue;
        };
        let tuple = Tuple::new((0..row.len()).map(|i| {
            row.get(i)
                .map_or(Datum::Null, |v| Datum::Text(v.as_bytes()))
        }));
        if let Some(key) = key_of(&tuple, &target.key_positions) {
            index.insert(key, rows.len());
        }
        rows.push(Some(tuple));
    }
    let full = rows.len() >= chunk_size as usize;
    let end = rows
        .last()
        .and_then(|r| r.as_ref())
        .and_then(|t| key_of(t, &target.key_positions))
        .filter(|_| full);
    tracing::trace!(table = %target.table, rows = rows.len(), "chunk selected");
    Chunk {
        table: target.table,
        relation_id: target.relation.id,
        key_positions: target.key_positions,
        rows,
        index,
        end,
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
            chunk_query(&relation, &["a", "b"], None, 10, None),
            "SELECT \"a\", \"b\", \"v\" FROM \"public\".\"t\" ORDER BY \"a\", \"b\" LIMIT 10"
        );
        assert_eq!(
            chunk_query(
                &relation,
                &["a", "b"],
                Some(&vec![Some("it's".into()), Some("2".into())]),
                5,
                None
            ),
            "SELECT \"a\", \"b\", \"v\" FROM \"public\".\"t\" WHERE (\"a\", \"b\") > ('it''s', '2') ORDER BY \"a\", \"b\" LIMIT 5"
        );
        assert_eq!(
            chunk_query(&relation, &["a"], Some(&vec![Some("7".into())]), 5, Some("v = 'x' OR v IS NULL")),
            "SELECT \"a\", \"b\", \"v\" FROM \"public\".\"t\" WHERE (v = 'x' OR v IS NULL) AND (\"a\") > ('7') ORDER BY \"a\" LIMIT 5",
            "the filter is parenthesized, so its OR cannot escape"
        );
    }
}
