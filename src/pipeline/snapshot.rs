//! The initial snapshot: every row of every published table as an `op: "r"`
//! event, consistent with the stream that follows.
//!
//! 1. A working slot `<slot>_snapshot` is created on a replication connection
//!    with `SNAPSHOT 'export'`; its consistent point is where streaming will
//!    start, and the exported snapshot sees exactly what committed before it.
//! 2. N worker connections import the snapshot, then the exporting session is
//!    closed (imported snapshots stay valid in their transactions).
//! 3. Workers read chunks (ctid page ranges) with COPY and hand the rows, over
//!    a bounded channel, to the emitter, which decodes, encodes and produces
//!    them like streamed changes, so the in-flight bound applies.
//! 4. Once Kafka acknowledged every snapshot record, the working slot is
//!    copied to the real slot name (same consistent point) and dropped.
//!
//! A crash before step 4 leaves no real slot, so the next start takes the
//! snapshot again from scratch (dropping the leftover working slot): records
//! already sent are sent again, nothing is missed. A crash between the copy
//! and the drop leaves a working slot next to the real one; it is dropped at
//! the next start.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use super::stream::{now_micros, Stream};
use super::{PipelineError, StopReason};
use crate::checkpoint::TxnId;
use crate::config::{RunConfig, SnapshotMode};
use crate::event::{ChangeEvent, Op, SnapshotMarker, SnapshotPosition, SourceInfo};
use crate::lsn::Lsn;
use crate::progress::SnapshotProgress;
use crate::sink::{InKafka, SinkError};
use crate::source::pgoutput::{Datum, Relation, Tuple};
use crate::source::replication::{ReplicationError, Session, SlotSnapshot};
use crate::source::setup::{self, quote_ident, SetupError};
use crate::source::snapshot::{self as reader, PageRange, SnapshotReadError};

/// A slot created with an exported snapshot, and the session that exports it.
pub(super) struct ExportedSlot {
    pub consistent_point: Lsn,
    pub snapshot_name: String,
    session: Session,
}

/// Errors specific to taking a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("creating replication slot {slot:?} with an exported snapshot failed")]
    CreateSlot {
        slot: String,
        #[source]
        error: ReplicationError,
    },
    #[error("CREATE_REPLICATION_SLOT for {slot:?} returned an unexpected reply; expected slot_name, consistent_point, snapshot_name, output_plugin")]
    UnexpectedReply { slot: String },
    #[error(transparent)]
    Read(#[from] SnapshotReadError),
    #[error("a snapshot worker stopped unexpectedly")]
    WorkerGone,
}

impl SnapshotError {
    /// Whether trying again from scratch may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            SnapshotError::CreateSlot { error, .. } => error.is_retryable(),
            SnapshotError::Read(SnapshotReadError::Copy { error, .. }) => {
                error.as_db_error().is_none()
            }
            SnapshotError::Read(SnapshotReadError::Format(_))
            | SnapshotError::UnexpectedReply { .. } => false,
            SnapshotError::WorkerGone => true,
        }
    }
}

/// Takes the snapshot of a new slot (`exported`, consistent at `start`):
/// emits it, waits until Kafka acknowledged all of it (exactly-once: in one
/// Kafka transaction), then promotes the working slot. Returns whether the
/// attempt goes on to stream (not after `initial_only`, a failure or a stop).
pub(super) async fn take(
    stream: &mut Stream<'_>,
    exported: ExportedSlot,
    start: Lsn,
    mut stop: Pin<&mut impl Future<Output = StopReason>>,
) -> Result<bool, PipelineError> {
    // Exactly-once: the whole snapshot is one Kafka transaction.
    let in_kafka = stream.delivery.init().await?;
    if let InKafka::Recorded(recorded) = &in_kafka {
        stream.resume_incremental_from_kafka(recorded.as_ref(), start);
    }
    stream.metrics.snapshot_started();
    let emitted = emit_snapshot(stream, exported, stop.as_mut()).await;
    stream.metrics.snapshot_finished();
    let emitted = match emitted {
        Ok(emitted) => emitted,
        Err(error) => {
            stream.delivery.abort_batch().await;
            return Err(error);
        }
    };
    let Some(_rows) = emitted else {
        // `emit_snapshot` recorded why it stopped (a request, --max-run).
        stream.delivery.abort_batch().await;
        return Ok(false);
    };
    commit_snapshot(stream, &in_kafka).await?;
    // Everything before the consistent point is the snapshot's.
    stream.delivery.skip_before(start);
    stream
        .delivery
        .flush(stream.config.shutdown_timeout)
        .await?;
    if let Some(failure) = stream.delivery.failure() {
        return Err(PipelineError::Delivery(failure));
    }
    promote_slot(stream.config, &stream.sql).await?;
    if stream.config.snapshot_mode == SnapshotMode::InitialOnly {
        stream.summary.stopped = StopReason::SnapshotCompleted;
        stream.summary.confirmed_lsn = Some(start);
        return Ok(false);
    }
    Ok(true)
}

/// Commits the snapshot's Kafka transaction, unless another instance
/// finished a snapshot for the slot meanwhile (then it is aborted, so
/// read_committed consumers do not see the rows twice). `in_kafka` is what
/// the delivery's start found: only a transactional one has a transaction.
pub(super) async fn commit_snapshot(
    stream: &mut Stream<'_>,
    in_kafka: &InKafka,
) -> Result<(), PipelineError> {
    if *in_kafka == InKafka::Untracked {
        return Ok(());
    }
    if setup::confirmed_flush_lsn(&stream.sql, &stream.config.slot_name)
        .await?
        .is_some()
    {
        stream.delivery.abort_batch().await;
        return Err(SinkError::SnapshotRace {
            slot: stream.config.slot_name.clone(),
        }
        .into());
    }
    stream.commit_kafka_batch(true).await?;
    Ok(())
}

/// Creates the working slot with an exported snapshot, dropping a leftover
/// one from an interrupted snapshot first.
pub(super) async fn export_slot(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
) -> Result<ExportedSlot, PipelineError> {
    let working = config.names().snapshot_slot();
    setup::drop_slot(sql, &working).await?;
    let repl = config
        .pg()
        .replication_config()
        .with_application_name(config.names().snapshot_application_name());
    let create_error = |error| SnapshotError::CreateSlot {
        slot: working.clone(),
        error,
    };
    let mut session = Session::connect(&repl).await.map_err(create_error)?;
    let rows = session
        .simple_query(&session.create_slot_command(
            &quote_ident(&working),
            false,
            SlotSnapshot::Export,
        ))
        .await
        .map_err(create_error)?;
    let text = |i: usize| {
        rows.first()
            .and_then(|r| r.get(i))
            .and_then(Option::as_ref)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let (Some(point), Some(snapshot_name)) = (text(1), text(2)) else {
        return Err(SnapshotError::UnexpectedReply { slot: working }.into());
    };
    let consistent_point = point.parse().map_err(|_| SnapshotError::UnexpectedReply {
        slot: working.clone(),
    })?;
    tracing::info!(slot = %working, lsn = %consistent_point, snapshot = %snapshot_name, "created slot with exported snapshot");
    Ok(ExportedSlot {
        consistent_point,
        snapshot_name,
        session,
    })
}

/// Makes the working slot the real one, after the snapshot is fully acknowledged.
pub(super) async fn promote_slot(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
) -> Result<(), SetupError> {
    let working = config.names().snapshot_slot();
    setup::copy_slot(sql, &working, &config.slot_name).await?;
    setup::drop_slot(sql, &working).await?;
    tracing::info!(slot = %config.slot_name, "snapshot complete; slot ready for streaming");
    Ok(())
}

/// The oldest transaction the snapshot does not see, as `source.txId` of its records.
async fn snapshot_xid(client: &tokio_postgres::Client) -> Result<u32, SetupError> {
    let xmin: String = client
        .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])
        .await
        .map_err(|error| SetupError::Query {
            action: "reading the snapshot's xmin".into(),
            error,
        })?
        .get(0);
    // xid8 carries the epoch in its high bits; the stream's xids are 32-bit.
    Ok(xmin.parse::<u64>().map_or(0, |x| x as u32))
}

/// Rows a worker sends the emitter at once.
const ROW_BATCH: usize = 256;
/// Batches waiting for the emitter (all workers together): the readers
/// stay at most this far ahead.
const ROW_BATCHES_QUEUED: usize = 8;

/// What workers send the emitter.
enum Work {
    /// Rows in the order read, up to [`ROW_BATCH`] (one channel send per
    /// batch, not per row: the per-row wake-ups cost more than the rows).
    Rows {
        table: usize,
        rows: Vec<Vec<Option<Bytes>>>,
    },
    ChunkDone {
        table: usize,
    },
}

struct TableProgress {
    relation: Relation,
    chunks_left: usize,
    rows: u64,
    /// The newest row, held back until we know whether it is the table's last.
    pending: Option<(Tuple, bool)>,
}

/// Reads every published table in the exported snapshot and produces its
/// rows. Returns the number of rows, or `None` if `stop` resolved first.
pub(super) async fn emit_snapshot(
    stream: &mut Stream<'_>,
    exported: ExportedSlot,
    mut stop: Pin<&mut impl Future<Output = StopReason>>,
) -> Result<Option<u64>, PipelineError> {
    let config = stream.config;
    let workers = config.snapshot_workers();
    let mut clients = Vec::with_capacity(workers);
    for _ in 0..workers {
        let client = setup::connect(&config.pg()).await?;
        reader::import_snapshot(&client, &exported.snapshot_name).await?;
        clients.push(client);
    }
    // Every worker holds the snapshot now; the exporting session can go.
    drop(exported.session);

    let (tables, jobs, estimated_rows) = plan_tables(stream, &clients[0]).await?;
    let total_tables = tables.len();
    stream.metrics.snapshot_tables(total_tables as u64);
    tracing::info!(
        tables = total_tables,
        chunks = jobs.len(),
        estimated_rows,
        workers,
        "snapshot started"
    );
    let xid = snapshot_xid(&clients[0]).await?;
    let relations: Arc<Vec<Relation>> =
        Arc::new(tables.iter().map(|t| t.relation.clone()).collect());
    let (mut rx, handles) = spawn_readers(clients, jobs, &relations);

    let mut emission = Emission {
        relation_ids: relations.iter().map(|r| r.id).collect(),
        tables,
        txn: stream.delivery.begin(),
        point: exported.consistent_point,
        xid,
        rows: 0,
        held_last: None,
        first_overall: true,
        progress: SnapshotProgress::new(total_tables as u64, estimated_rows),
    };
    let started = Instant::now();
    loop {
        let work = tokio::select! {
            biased;
            reason = &mut stop => {
                emission.progress.finish();
                tracing::info!(?reason, rows = emission.rows, "snapshot interrupted; it starts over on the next run");
                for h in &handles { h.abort(); }
                stream.summary.stopped = reason;
                return Ok(None);
            }
            work = rx.recv() => work,
        };
        let Some(work) = work else { break };
        match work? {
            Work::Rows { table, rows } => {
                for fields in rows {
                    emission.row(stream, table, fields).await?;
                }
            }
            Work::ChunkDone { table } => emission.chunk_done(stream, table).await?,
        }
    }
    emission.last(stream).await?;
    for h in handles {
        let _ = h.await;
    }
    emission.progress.finish();
    stream.delivery.commit(emission.txn, emission.point);
    tracing::info!(
        rows = emission.rows,
        tables = total_tables,
        secs = started.elapsed().as_secs_f64(),
        "snapshot read; waiting for Kafka to acknowledge it"
    );
    Ok(Some(emission.rows))
}

/// The chunks to read, by table: what `Work` names a table by.
type Jobs = Vec<(usize, PageRange)>;

/// The published tables the selection admits, registered in the stream's
/// relation cache (only the captured columns are read) and their topics
/// made; the chunks to read; and the planner's estimate of their rows.
async fn plan_tables(
    stream: &mut Stream<'_>,
    catalog_client: &tokio_postgres::Client,
) -> Result<(Vec<TableProgress>, Jobs, u64), PipelineError> {
    let config = stream.config;
    let mut tables = Vec::new();
    let mut jobs = Vec::new();
    let mut estimated_rows = 0u64;
    for oid in reader::publication_tables(catalog_client, &config.publication_name).await? {
        let mut relation =
            reader::relation_from_catalog(catalog_client, oid, &config.publication_name).await?;
        if !stream.relations.admits(&relation) {
            continue;
        }
        let catalog = setup::catalog_columns(catalog_client, oid).await?;
        let table = stream.relations.update(&relation, &catalog)?;
        // Read only the captured columns: the schema was built from all of them.
        relation
            .columns
            .retain(|c| table.columns.iter().any(|t| t.name == c.name));
        stream.relations.update(&relation, &catalog)?;
        stream.ensure_topic(&table.topic).await?;
        let pages = reader::relation_pages(catalog_client, oid).await?;
        estimated_rows += reader::relation_row_estimate(catalog_client, oid).await?;
        let chunks = reader::plan_chunks(pages, config.snapshot_chunk_pages);
        let index = tables.len();
        jobs.extend(chunks.iter().map(|&range| (index, range)));
        tables.push(TableProgress {
            relation,
            chunks_left: chunks.len(),
            rows: 0,
            pending: None,
        });
    }
    Ok((tables, jobs, estimated_rows))
}

/// One reader task per client, each taking chunks off the shared queue
/// until it is empty and sending their rows (then a `ChunkDone`) to the
/// channel returned.
fn spawn_readers(
    clients: Vec<tokio_postgres::Client>,
    jobs: Jobs,
    relations: &Arc<Vec<Relation>>,
) -> (
    mpsc::Receiver<Result<Work, SnapshotError>>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let queue = Arc::new(Mutex::new(jobs));
    let (tx, rx) = mpsc::channel::<Result<Work, SnapshotError>>(ROW_BATCHES_QUEUED);
    let mut handles = Vec::new();
    for client in clients {
        let queue = Arc::clone(&queue);
        let relations = Arc::clone(relations);
        let tx = tx.clone();
        handles.push(tokio::spawn(async move {
            loop {
                let job = queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
                let Some((table, range)) = job else { break };
                if let Err(error) = read_chunk(&client, &relations[table], table, range, &tx).await
                {
                    let _ = tx.send(Err(error)).await;
                    break;
                }
            }
            let _ = client.batch_execute("COMMIT").await;
        }));
    }
    (rx, handles)
}

/// The snapshot's rows on their way out, with what their markers need: a
/// table's newest row is held until the next one shows it is not the
/// table's last, and the last row of a finished table until another table
/// finishes or the snapshot ends (it may be the snapshot's last). All of
/// it is one transaction, at the slot's consistent point.
struct Emission {
    tables: Vec<TableProgress>,
    relation_ids: Vec<u32>,
    txn: TxnId,
    point: Lsn,
    /// `source.txId` of every row: the oldest transaction the snapshot does not see.
    xid: u32,
    rows: u64,
    held_last: Option<(usize, Tuple)>,
    first_overall: bool,
    progress: SnapshotProgress,
}

impl Emission {
    async fn emit(
        &self,
        stream: &mut Stream<'_>,
        table: usize,
        row: &Tuple,
        marker: SnapshotMarker,
    ) -> Result<(), PipelineError> {
        let source = SourceInfo {
            origin: None,
            commit_time_micros: now_micros(),
            xid: self.xid,
            lsn: self.point,
            last_commit_lsn: None,
            snapshot: marker,
        };
        emit_row(stream, self.relation_ids[table], row, source, self.txn).await
    }

    /// A row read from `table`; emits the row it held back, which another
    /// row of its table now follows.
    async fn row(
        &mut self,
        stream: &mut Stream<'_>,
        table: usize,
        fields: Vec<Option<Bytes>>,
    ) -> Result<(), PipelineError> {
        let tuple = Tuple(
            fields
                .into_iter()
                .map(|f| f.map_or(Datum::Null, Datum::Text))
                .collect(),
        );
        let t = &mut self.tables[table];
        t.rows += 1;
        let previous = t.pending.replace((tuple, t.rows == 1));
        self.rows += 1;
        self.progress.row();
        if let Some((row, first_in_table)) = previous {
            // Another row of its table follows: it is not last of anything.
            let marker = SnapshotMarker::of_row(SnapshotPosition {
                first: std::mem::take(&mut self.first_overall),
                first_in_table,
                ..SnapshotPosition::default()
            });
            self.emit(stream, table, &row, marker).await?;
        }
        Ok(())
    }

    /// A chunk of `table` was read; after its last one the table is done,
    /// and its held row is the last of its table.
    async fn chunk_done(
        &mut self,
        stream: &mut Stream<'_>,
        table: usize,
    ) -> Result<(), PipelineError> {
        let t = &mut self.tables[table];
        t.chunks_left -= 1;
        if t.chunks_left > 0 {
            return Ok(());
        }
        let first_in_table = t.pending.as_ref().is_some_and(|(_, first)| *first);
        let pending = t.pending.take();
        self.progress.table_done();
        stream.metrics.snapshot_table_done();
        if let Some((row, _)) = pending {
            // The previously completed table's last row is no longer the snapshot's last.
            if let Some((held_table, held_row)) = self.held_last.take() {
                let marker = SnapshotMarker::LastInDataCollection;
                self.emit(stream, held_table, &held_row, marker).await?;
            }
            if first_in_table && std::mem::take(&mut self.first_overall) {
                // A one-row table that is also the first: emit now, as "first".
                self.emit(stream, table, &row, SnapshotMarker::First)
                    .await?;
            } else {
                self.held_last = Some((table, row));
            }
        }
        let t = &self.tables[table];
        tracing::info!(table = %format!("{}.{}", t.relation.namespace, t.relation.name), rows = t.rows, "snapshot of table done");
        Ok(())
    }

    /// Every table was read: the row held last is the snapshot's last.
    async fn last(&mut self, stream: &mut Stream<'_>) -> Result<(), PipelineError> {
        if let Some((table, row)) = self.held_last.take() {
            self.emit(stream, table, &row, SnapshotMarker::Last).await?;
        }
        Ok(())
    }
}

async fn read_chunk(
    client: &tokio_postgres::Client,
    relation: &Relation,
    table: usize,
    range: PageRange,
    tx: &mpsc::Sender<Result<Work, SnapshotError>>,
) -> Result<(), SnapshotError> {
    let rows = reader::copy_rows(client, relation, range)
        .await
        .map_err(|e| match e {
            SetupError::Query { action, error } => SnapshotError::Read(SnapshotReadError::Copy {
                table: action,
                error,
            }),
            _ => SnapshotError::WorkerGone,
        })?;
    futures::pin_mut!(rows);
    let mut batch = Vec::with_capacity(ROW_BATCH);
    while let Some(row) = rows.next().await {
        batch.push(row?);
        if batch.len() == ROW_BATCH {
            let rows = std::mem::replace(&mut batch, Vec::with_capacity(ROW_BATCH));
            tx.send(Ok(Work::Rows { table, rows }))
                .await
                .map_err(|_| SnapshotError::WorkerGone)?;
        }
    }
    if !batch.is_empty() {
        tx.send(Ok(Work::Rows { table, rows: batch }))
            .await
            .map_err(|_| SnapshotError::WorkerGone)?;
    }
    tx.send(Ok(Work::ChunkDone { table }))
        .await
        .map_err(|_| SnapshotError::WorkerGone)
}

async fn emit_row(
    stream: &mut Stream<'_>,
    relation_id: u32,
    tuple: &Tuple,
    source: SourceInfo,
    txn: TxnId,
) -> Result<(), PipelineError> {
    let schema = Arc::clone(stream.relations.get(relation_id, source.lsn)?);
    let row = stream
        .relations
        .decode_read_row(&schema, tuple, source.lsn)?;
    let event = ChangeEvent {
        table: schema,
        op: Op::Read,
        before: None,
        after: Some(row),
        source,
    };
    stream.send_event(&event, Vec::new(), false, txn).await
}
