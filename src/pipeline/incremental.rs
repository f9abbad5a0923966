//! Incremental snapshots while streaming: DBLog's watermark algorithm, as
//! Debezium's incremental snapshots use it, driven by the signal table
//! ([`crate::source::signal`]).
//!
//! A table is read in chunks of `--incremental-snapshot-chunk-size` rows in
//! key order, one window at a time, between transactions of the stream:
//!
//! 1. the low watermark: the progress row is upserted with type
//!    `snapshot-window-open` and the window's id (its own transaction);
//! 2. a chunk of each table in flight (the first
//!    `--incremental-snapshot-tables-in-flight` tables of the list, 1 by
//!    default) is selected on a plain SQL connection (`key > last key ORDER
//!    BY key LIMIT n`), all in one REPEATABLE READ transaction whose
//!    snapshot is kept ([`visibility`]), and buffered;
//! 3. the high watermark: the progress row is upserted with type
//!    `snapshot-window-close`.
//!
//! The stream then reaches the watermarks in commit order. Between them,
//! every change to a key of a table in the window removes that key from its
//! table's buffer: the streamed change is at least as new as the selected
//! row (every select ran before the high watermark committed) and is
//! emitted in its place. So does a change streamed before the low
//! watermark by a transaction the selects' snapshot does not see: its
//! commit is in the WAL before the low watermark's, but it was not visible
//! yet when the chunk was read ([`visibility`] tells those apart, and drops
//! a chunk whose snapshot misses a transaction already emitted). At the
//! high watermark the remaining rows are emitted as `op: "r"` events with
//! `source.snapshot = "incremental"`, inside the high watermark's
//! transaction, so the ack tracker does not confirm past it before Kafka
//! has them. Changes after the high watermark are newer than the selected
//! rows and follow them. So for every key the stream's later change
//! wins, and a key deleted during the window is not brought back. Nothing
//! in that argument is about one table: the chunks of several tables share
//! one window, and a table that finishes leaves its slot to the next one.
//!
//! # Progress across restarts
//!
//! The progress (tables left, last key of each table in flight) lives in the
//! progress row's `data`. A chunk's end becomes its table's recorded last key
//! only once Kafka acknowledged the window (the ack tracker passed the high
//! watermark's commit), and only the next low watermark, a signal, or a
//! graceful stop writes it. So the recorded position never runs ahead of what Kafka has:
//! a restart re-reads at most the chunk that was in flight (sent again, never
//! lost). Signals update the row as soon as they are read, before their
//! transaction can be confirmed, so a confirmed signal is never forgotten.
//! The slot may replay a signal after a restart; a table it names again is
//! snapshotted again (duplicates, not loss), except that the
//! `execute-snapshot` that started the running snapshot (its id is in the
//! progress) is not applied twice.
//!
//! Under `--delivery exactly-once` the progress also rides in the progress
//! record of every Kafka transaction and wins on start ([`committed`]).
//!
//! With `--read-only` nothing is written: no watermark, no progress row.
//! The window is the chunk's MVCC snapshot and the WAL position it was
//! read at ([`read_only`]); the progress lives in the progress topic
//! ([`read_only_progress`], at-least-once) or in every Kafka transaction's
//! progress record (exactly-once).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tokio_postgres::Client;

mod blocking;
mod chunk_read;
mod committed;
mod in_stream;
mod read_only;
mod read_only_io;
mod read_only_progress;
mod reply;
mod table_info;
mod tally;
mod visibility;
mod window;

pub(super) use window::key_of;
use window::{Closed, Reach, Window};

use crate::config::RunConfig;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::notification::{Kind, Notification, Notifier, INCREMENTAL_SNAPSHOT};
use crate::source::pgoutput::{Datum, Relation, Tuple};
use crate::source::setup::{self, quote_ident, SetupError};
use crate::source::signal::{self, KeyText, Progress, Signal, SignalTable, SnapshotKind, PROGRESS};
use crate::source::snapshot::SESSION_SETTINGS;

/// Why incremental snapshots cannot run.
#[derive(Debug, thiserror::Error)]
pub enum IncrementalError {
    #[error("signal table {table} is not in publication {publication:?}, so the connector cannot read signals or watermarks; run ALTER PUBLICATION {publication} ADD TABLE {table}")]
    SignalTableNotPublished { table: String, publication: String },
    #[error("--read-only incremental snapshots need a primary server: on a standby pg_current_snapshot() does not list the transactions in progress, so a chunk cannot be placed in the stream; point --pg-url at the primary, or run without --read-only")]
    ReadOnlyOnStandby,
    #[error("the server answered {0:?} for pg_current_snapshot() or pg_current_wal_insert_lsn(), which is not their text form; incremental and blocking snapshots need PostgreSQL's own")]
    UnreadableSnapshot(String),
    #[error(transparent)]
    Sql(#[from] SetupError),
}

impl IncrementalError {
    /// Whether restarting may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            IncrementalError::SignalTableNotPublished { .. }
            | IncrementalError::ReadOnlyOnStandby
            | IncrementalError::UnreadableSnapshot(_) => false,
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
    /// The signal table, when there is one (`--read-only` may go without).
    signal: Option<SignalTable>,
    /// `--read-only`: the chunk's high mark and the recorded progress;
    /// `None` when the chunk's window is watermarks in the signal table.
    read_only: Option<read_only::Streamed>,
    /// The streamed xids no snapshot saw yet, and the chunk's snapshot.
    visibility: visibility::Visibility,
    /// The run's metrics (the stream's): chunks, tables remaining, reads
    /// put off for a transaction not visible yet.
    metrics: Arc<Metrics>,
    /// `--read-only`: the server's WAL page and segment sizes (see
    /// [`read_only::high_mark`]).
    wal_sizes: (u64, u64),
    progress_id: String,
    /// Watermarks and chunk reads, with the replication session's text settings.
    sql: Client,
    chunk_size: u32,
    /// How many tables' chunks one window holds.
    tables_in_flight: usize,
    publication: String,
    signal_columns: Option<SignalColumns>,
    /// What Kafka has acknowledged: the durable resume point.
    progress: Progress,
    window: Window,
    /// Makes window ids unique per attempt, so replayed watermarks of an
    /// earlier attempt never match a window of this one.
    nonce: String,
    /// Windows opened by this attempt (the window ids).
    windows: u64,
    /// Per table in flight: its largest key, row estimate, and rows and
    /// chunks emitted by this attempt (notifications).
    table_infos: BTreeMap<String, table_info::TableInfo>,
    /// The id of the signal that started the running snapshot, the id of
    /// its notifications (kept past the progress, which forgets it when
    /// the last table is done).
    correlation_id: Option<String>,
    /// The running snapshot's start and counts (its own, not the process's).
    tally: tally::Tally,
    last_log: Instant,
}

/// What the stream does about a signal.
pub(super) enum Action {
    Nothing,
    /// The high watermark of a window: emit these chunks' rows now.
    Emit(Vec<Closed>),
    /// `execute-snapshot` with `"type": "blocking"`: read these tables now,
    /// with the stream paused ([`blocking`]).
    Blocking {
        id: String,
        tables: Vec<String>,
        conditions: BTreeMap<String, String>,
    },
}

fn text_at(tuple: &Tuple, position: usize) -> Option<String> {
    match tuple.get(position)? {
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
/// as a row, with untyped literals that take the columns' types), of the
/// rows matching `filter` (an `additional-conditions` expression). The
/// initial snapshot reads its key-ordered chunks with it too.
pub(super) fn chunk_query(
    relation: &Relation,
    key_names: &[&str],
    after: Option<&KeyText>,
    limit: u32,
    filter: Option<&str>,
) -> String {
    let columns: Vec<String> = relation
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let keys: Vec<String> = key_names.iter().map(|k| quote_ident(k)).collect();
    let keys = keys.join(", ");
    let mut conditions: Vec<String> = filter.map(|f| format!("({f})")).into_iter().collect();
    if let Some(after) = after {
        let values: Vec<String> = after.iter().map(literal).collect();
        conditions.push(format!("({keys}) > ({})", values.join(", ")));
    }
    let filter = match conditions.is_empty() {
        true => String::new(),
        false => format!(" WHERE {}", conditions.join(" AND ")),
    };
    format!(
        "SELECT {} FROM {}.{}{filter} ORDER BY {keys} LIMIT {limit}",
        columns.join(", "),
        quote_ident(&relation.namespace),
        quote_ident(&relation.name),
    )
}

impl Incremental {
    /// The incremental snapshot machinery when `--signal-data-collection`
    /// or `--read-only` is set: checks the signal table is published and
    /// loads recorded progress (read-only: checks the server is a primary;
    /// its progress starts empty, or from the progress record under
    /// exactly-once).
    pub(super) async fn start(
        config: &RunConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Self>, IncrementalError> {
        let signal = config
            .signal_data_collection
            .as_deref()
            .and_then(SignalTable::parse);
        let writes_nothing = config.signal_channels.read_only;
        if signal.is_none() && !writes_nothing {
            return Ok(None);
        }
        let sql = setup::connect(&config.pg_url).await?;
        sql.batch_execute(SESSION_SETTINGS)
            .await
            .map_err(|error| SetupError::Query {
                action: "setting up the incremental snapshot connection".into(),
                error,
            })?;
        if let Some(signal) = &signal {
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
        }
        let progress_id = signal::progress_row_id(&config.slot_name);
        let wal_sizes = match writes_nothing {
            true => read_only_server(&sql).await?,
            false => (0, 0),
        };
        let progress = match (&signal, writes_nothing) {
            (Some(signal), false) => signal::read_progress(&sql, signal, &progress_id)
                .await?
                .unwrap_or_default(),
            _ => Progress::default(),
        };
        let resuming = !progress.tables.is_empty();
        if resuming {
            tracing::info!(tables = ?progress.tables, last_key = ?progress.last_key, "resuming the incremental snapshot");
        }
        let correlation_id = progress.signal_id.clone();
        Ok(Some(Incremental {
            signal,
            read_only: writes_nothing.then(read_only::Streamed::default),
            visibility: visibility::Visibility::default(),
            metrics: Arc::clone(metrics),
            wal_sizes,
            progress_id,
            sql,
            chunk_size: config.incremental_snapshot_chunk_size,
            tables_in_flight: config.incremental_snapshot_tables_in_flight.max(1) as usize,
            publication: config.publication_name.clone(),
            signal_columns: None,
            progress,
            window: Window::Idle,
            nonce: format!("{:x}", crate::event::now_micros()),
            windows: 0,
            tally: {
                let mut tally = tally::Tally::default();
                if resuming {
                    tally.begin();
                }
                tally
            },
            table_infos: BTreeMap::new(),
            correlation_id,
            last_log: Instant::now(),
        }))
    }

    /// Puts `resumed`, the rest of an interrupted initial snapshot, ahead
    /// of what this snapshot has queued (which goes on after it, from where
    /// it was), and records that in the progress row before returning.
    pub(super) async fn adopt(&mut self, resumed: Progress) -> Result<(), IncrementalError> {
        let mut queued = std::mem::take(&mut self.progress);
        let mut progress = resumed;
        if let (Some(current), Some(key)) = (queued.tables.first(), queued.last_key.take()) {
            queued.resume_after.insert(current.clone(), key);
        }
        for table in queued.tables {
            if !progress.tables.contains(&table) {
                if let Some(key) = queued.resume_after.remove(&table) {
                    progress.resume_after.insert(table.clone(), key);
                }
                progress.tables.push(table);
            }
        }
        self.progress = progress;
        self.window = Window::Idle;
        self.tally.begin();
        self.count_tables_remaining();
        self.persist(PROGRESS, None).await?;
        Ok(())
    }

    /// Whether `relation` is the signal table; remembers where its columns are.
    pub(super) fn is_signal_relation(&mut self, relation: &Relation) -> bool {
        let is_signal =
            (self.signal.as_ref()).is_some_and(|s| s.is(&relation.namespace, &relation.name));
        if !is_signal {
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
                tracing::warn!(table = %relation.name, "the signal table lacks an id, type or data column; its rows are ignored")
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

    /// A transaction `xid` begins in the stream.
    pub(super) fn began(&mut self, xid: u32) {
        self.visibility.began(xid);
    }

    /// Where the open transaction's changes touch the window's chunks
    /// ([`visibility`]): not at all when the chunks' snapshot saw the
    /// transaction; anywhere before the chunks are emitted when it did not;
    /// without a snapshot to tell, between the watermarks.
    fn reach(&self) -> Option<Reach> {
        match self.visibility.chunk_sees_current() {
            Some(true) => None,
            Some(false) => Some(Reach::Unseen),
            None => Some(Reach::Open),
        }
    }

    /// A streamed change (see [`Window::observe`]).
    pub(super) fn observe(&mut self, relation_id: u32, tuples: &[&Tuple]) {
        if let Some(reach) = self.reach() {
            self.window.observe(reach, relation_id, tuples);
        }
    }

    /// A streamed TRUNCATE of `relation_id`.
    pub(super) fn truncated(&mut self, relation_id: u32) {
        if let Some(reach) = self.reach() {
            self.window.truncated(reach, relation_id);
        }
    }

    /// The Commit of a transaction ending at `end_lsn` was read.
    pub(super) fn committed(&mut self, end_lsn: Lsn) {
        self.visibility.committed();
        self.window.committed(end_lsn);
    }

    /// Whether a chunk can be started (or the acknowledged one recorded,
    /// or a read-only chunk emitted: the stream has read up to `received`).
    pub(super) fn wants_step(&self, acked: Lsn, received: Lsn) -> bool {
        let streamed = self.read_only.as_ref();
        match &self.window {
            Window::Idle => {
                (!self.progress.tables.is_empty()
                    && !self.progress.paused
                    && self.visibility.may_read(Instant::now()))
                    || (self.progress.tables.is_empty() && self.tally.running())
                    || self.visibility.wants_pruning()
            }
            Window::Pending { .. } => streamed.is_some_and(|r| r.passed_high_mark(received)),
            Window::Emitted {
                commit: Some(lsn), ..
            } => acked >= *lsn,
            Window::Emitted { commit: None, .. } => false,
        }
    }

    /// Writes the progress row, unless read-only (or without a signal table).
    async fn persist(&self, kind: &str, chunk: Option<&str>) -> Result<(), SetupError> {
        let Some(table) = self.signal.as_ref().filter(|_| self.read_only.is_none()) else {
            return Ok(());
        };
        let mut progress = self.progress.clone();
        progress.chunk = chunk.map(str::to_owned);
        let data = serde_json::to_string(&progress).unwrap_or_default();
        signal::upsert(&self.sql, table, &self.progress_id, kind, &data).await
    }

    /// Deletes the progress row, unless read-only (or without a signal table).
    async fn forget_progress(&self) -> Result<(), SetupError> {
        match self.signal.as_ref().filter(|_| self.read_only.is_none()) {
            Some(table) => signal::delete(&self.sql, table, &self.progress_id).await,
            None => Ok(()),
        }
    }

    /// Whether this snapshot writes nothing to the source (`--read-only`).
    pub(in crate::pipeline) fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    /// Sets the tables-remaining gauge from the queue.
    fn count_tables_remaining(&self) {
        (self.metrics).incremental_tables_remaining(self.progress.tables.len() as u64);
    }

    /// The chunks of a window were emitted: counts them and notifies, one
    /// `IN_PROGRESS` per table.
    fn chunks_emitted(&mut self, closed: &[Closed], notifier: &Notifier) {
        self.visibility.chunk_read_with(None);
        for chunk in closed {
            let rows = chunk.rows.len() as u64;
            self.tally.chunk(rows);
            if let Some(info) = self.table_infos.get_mut(&chunk.table) {
                info.chunks += 1;
                info.rows += rows;
            }
            self.metrics.incremental_chunk(rows);
            notifier.notify(self.in_progress(&chunk.table, chunk.end.as_ref()));
        }
    }

    /// Rows of `table` emitted by this attempt.
    fn table_rows(&self, table: &str) -> u64 {
        self.table_infos.get(table).map_or(0, |i| i.rows)
    }

    /// A notification of this snapshot (id: the signal that started it).
    pub(super) fn notification(&self, kind: Kind) -> Notification {
        Notification::new(INCREMENTAL_SNAPSHOT, kind, self.correlation_id.as_deref())
    }

    /// A notification with the tables of the snapshot as `data_collections`.
    fn about_tables(&self, kind: Kind, tables: &[String]) -> Notification {
        self.notification(kind)
            .with("data_collections", tables.join(","))
    }

    /// Interprets a signal sent as `id`, `kind`, `data` (a signal-table row
    /// or a record of the kafka channel).
    pub(super) fn parse_signal(&self, id: &str, kind: &str, data: Option<&str>) -> Signal {
        signal::parse(id, kind, data, &self.progress_id)
    }

    /// Acts on a signal; says what the stream does about it.
    pub(super) async fn on_signal(
        &mut self,
        signal: Signal,
        notifier: &Notifier,
    ) -> Result<Action, SetupError> {
        match signal {
            Signal::ExecuteSnapshot {
                id,
                tables,
                kind: SnapshotKind::Blocking,
                conditions,
            } => {
                return Ok(Action::Blocking {
                    id,
                    tables,
                    conditions,
                })
            }
            Signal::ExecuteSnapshot {
                id,
                kind: SnapshotKind::Incremental,
                ..
            } if self.progress.signal_id.as_deref() == Some(id.as_str()) => {
                // The signal that started the running snapshot, read again:
                // a restart replays what the slot had not confirmed. Its
                // tables are in the progress since it was first read;
                // applied again it would queue the tables finished since
                // for a whole second read.
                tracing::info!(%id, "execute-snapshot of the running snapshot read again (replayed after a restart); already applied");
            }
            Signal::ExecuteSnapshot {
                id,
                tables,
                kind: SnapshotKind::Incremental,
                mut conditions,
            } => {
                let mut added = Vec::new();
                for table in tables {
                    if !self.progress.tables.contains(&table) {
                        if let Some(filter) = conditions.remove(&table) {
                            self.progress.conditions.insert(table.clone(), filter);
                        }
                        self.progress.tables.push(table.clone());
                        added.push(table);
                    }
                }
                tracing::info!(?added, tables = ?self.progress.tables, "incremental snapshot requested");
                if !self.tally.running() || self.progress.signal_id.is_none() {
                    self.progress.signal_id = Some(id.clone());
                    self.correlation_id = Some(id);
                }
                self.tally.begin();
                self.count_tables_remaining();
                self.persist(PROGRESS, None).await?;
                if !added.is_empty() {
                    notifier.notify(self.about_tables(Kind::Started, &self.progress.tables));
                }
            }
            Signal::StopSnapshot { tables } if self.progress.tables.is_empty() => {
                // As Debezium: nothing running, nothing aborted (a stop the
                // slot replays after the snapshot finished notifies nothing).
                tracing::warn!(
                    ?tables,
                    "no incremental snapshot is running; stop-snapshot signal ignored"
                );
            }
            Signal::StopSnapshot { tables } => {
                let current = self.progress.tables.first().cloned();
                let stopped = match tables.is_empty() {
                    true => self.progress.tables.clone(),
                    false => tables.clone(),
                };
                // Debezium's ABORTED names the tables a stop named, and
                // none when the stop named none (the whole snapshot).
                notifier.notify(match tables.is_empty() {
                    true => self.notification(Kind::Aborted),
                    false => self.about_tables(Kind::Aborted, &stopped),
                });
                self.progress.tables.retain(|t| !stopped.contains(t));
                self.progress
                    .resume_after
                    .retain(|t, _| !stopped.contains(t));
                self.progress.conditions.retain(|t, _| !stopped.contains(t));
                if self.progress.tables.first() != current.as_ref() {
                    // The current table is gone: the next one starts where
                    // its own key says.
                    self.progress.current_changed();
                }
                // Their chunks in flight go too; the other tables' stay.
                self.window.forget(&stopped);
                self.table_infos.retain(|t, _| !stopped.contains(t));
                tracing::info!(stopped = ?tables, remaining = ?self.progress.tables, "incremental snapshot stop requested");
                self.count_tables_remaining();
                if self.progress.tables.is_empty() {
                    if let Some(ended) = self.tally.end() {
                        tracing::info!(
                            rows = ended.rows,
                            chunks = ended.chunks,
                            secs = ended.elapsed.as_secs_f64(),
                            "incremental snapshot stopped"
                        );
                    }
                    self.progress = Progress::default();
                    self.forget_progress().await?;
                } else {
                    self.persist(PROGRESS, None).await?;
                }
            }
            Signal::PauseSnapshot | Signal::ResumeSnapshot => {
                let pause = matches!(signal, Signal::PauseSnapshot);
                if self.progress.tables.is_empty() {
                    tracing::warn!(
                        pause,
                        "no incremental snapshot is running; pause/resume signal ignored"
                    );
                } else if self.progress.paused != pause {
                    self.progress.paused = pause;
                    tracing::info!(tables = ?self.progress.tables, "incremental snapshot {}", if pause { "paused" } else { "resumed" });
                    self.persist(PROGRESS, None).await?;
                    let kind = if pause { Kind::Paused } else { Kind::Resumed };
                    notifier.notify(self.about_tables(kind, &self.progress.tables));
                }
            }
            Signal::Window { kind, progress } => {
                if self.read_only.is_some() {
                    // Watermark rows of a read-write run: not this chunk's.
                    return Ok(Action::Nothing);
                }
                let emitted = self.window.watermark(&kind, progress.chunk.as_deref());
                if let Some(closed) = &emitted {
                    self.chunks_emitted(closed, notifier);
                }
                return Ok(emitted.map_or(Action::Nothing, Action::Emit));
            }
            Signal::Ignored { kind, reason } => {
                tracing::warn!(%kind, %reason, "signal ignored");
            }
            Signal::Foreign => {}
        }
        Ok(Action::Nothing)
    }

    /// `IN_PROGRESS`, at a chunk's high watermark: its table and the key
    /// the chunk ends at (Debezium's `last_processed_key`; `<none>` for the
    /// table's last chunk).
    fn in_progress(&self, table: &str, end: Option<&KeyText>) -> Notification {
        let last_key = match end {
            Some(end) => end
                .iter()
                .map(|k| k.as_deref().unwrap_or("<null>"))
                .collect::<Vec<_>>()
                .join(","),
            None => "<none>".to_owned(),
        };
        let mut notification = self
            .about_tables(Kind::InProgress, &self.progress.tables)
            .with("last_processed_key", last_key)
            .with("total_rows_scanned", self.table_rows(table).to_string());
        if let Some(info) = self.table_infos.get(table) {
            for (key, value) in info.fields(self.chunk_size) {
                notification = notification.with(key, value);
            }
        }
        notification.with("current_collection_in_progress", table)
    }
}

/// `--read-only`: the server must be a primary ([`read_only`]); returns its
/// WAL page and segment sizes in bytes.
async fn read_only_server(sql: &Client) -> Result<(u64, u64), IncrementalError> {
    let row = sql
        .query_one(
            "SELECT pg_is_in_recovery(), current_setting('wal_block_size')::bigint, \
             pg_size_bytes(current_setting('wal_segment_size'))",
            &[],
        )
        .await
        .map_err(|error| SetupError::Query {
            action: "checking the server for read-only incremental snapshots".into(),
            error,
        })?;
    if row.get::<_, bool>(0) {
        return Err(IncrementalError::ReadOnlyOnStandby);
    }
    let size = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
    Ok((size(1), size(2)))
}
