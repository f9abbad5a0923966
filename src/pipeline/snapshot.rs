//! The initial snapshot: every row of every published table as an `op: "r"`
//! event, consistent with the stream that follows.
//!
//! 1. A working slot `<slot>_snapshot` is created on a replication connection
//!    with `SNAPSHOT 'export'`; its consistent point is where streaming will
//!    start, and the exported snapshot sees exactly what committed before it.
//! 2. N worker connections import the snapshot, then the exporting session is
//!    closed (imported snapshots stay valid in their transactions).
//! 3. Workers read chunks with COPY — a table with a key in key order,
//!    `--snapshot-fetch-size` rows a chunk; one without, by ctid page ranges
//!    — and hand the rows, over a bounded channel, to the emitter, which
//!    decodes, encodes and produces them like streamed changes, so the
//!    in-flight bound applies ([`emission`]).
//! 4. Once Kafka acknowledged every snapshot record, the working slot is
//!    copied to the real slot name (same consistent point) and dropped.
//!
//! With a signal table or `--read-only` (and a run that goes on streaming,
//! [`records_progress`]) the emitter takes a checkpoint after every chunk:
//! everything sent so far is made durable in Kafka together with a progress
//! record in the progress topic saying, per table, up to which key (under
//! exactly-once: committed in the same Kafka transaction, so the snapshot is
//! many transactions and `transaction.timeout.ms` no longer bounds it). A
//! crash before step 4 leaves the working slot, still at the consistent
//! point; the next start promotes it and reads what the record says is
//! missing as an incremental snapshot against the stream from the consistent
//! point ([`resume`]; docs/SNAPSHOTS.md says why that is consistent).
//! Without a record for the working slot's consistent point (or without
//! either) the next start takes the snapshot again from scratch:
//! records already sent are sent again, nothing is missed. A crash between
//! the copy and the drop leaves a working slot next to the real one; it is
//! dropped at the next start.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stream::Stream;
use super::{fault, PipelineError, StopReason};
use crate::config::{RunConfig, SnapshotMode};
use crate::lsn::Lsn;
use crate::notification::{Kind, Notification, INITIAL_SNAPSHOT};
use crate::progress::SnapshotProgress;
use crate::sink::transactional::{
    ensure_progress_topic, now_ms, InitialSnapshotProgress, ProgressRecord,
};
use crate::sink::{InKafka, SinkError};
use crate::source::pgoutput::Relation;
use crate::source::replication::{ReplicationError, Session, SlotSnapshot};
use crate::source::setup::{self, quote_ident, SetupError};
use crate::source::snapshot::{self as reader, SnapshotReadError};
use crate::source::snapshot_select::SnapshotSelect;

mod emission;
mod resume;
mod writing;

use emission::{spawn_readers, Emission, Job, TableProgress, Work};
pub(super) use resume::{interrupted, resume, Interrupted};
use writing::{RowSource, RowWriter};

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
    #[error("a snapshot row's record had to be written again with another marker, but the row was not kept; this is a bug in pgcdc-kafka")]
    RowNotKept,
    #[error("an interrupted initial snapshot can be resumed only as an incremental snapshot, which needs --signal-data-collection or --read-only; run with the signal table (or --read-only) it was started with until it completes")]
    ResumeWithoutSignalTable,
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
            | SnapshotError::UnexpectedReply { .. }
            | SnapshotError::ResumeWithoutSignalTable
            | SnapshotError::RowNotKept => false,
            SnapshotError::WorkerGone => true,
        }
    }
}

/// Takes the snapshot of a new slot (`exported`, consistent at `start`):
/// emits it, waits until Kafka acknowledged all of it (exactly-once: the
/// last of its Kafka transactions, one per checkpoint, or the only one),
/// then promotes the working slot. Returns whether the
/// attempt goes on to stream (not after `initial_only`, a failure or a stop).
pub(super) async fn take(
    stream: &mut Stream<'_>,
    exported: ExportedSlot,
    start: Lsn,
    mut stop: Pin<&mut impl Future<Output = StopReason>>,
) -> Result<bool, PipelineError> {
    // Exactly-once: one Kafka transaction, or one per checkpoint.
    let in_kafka = stream.delivery.init().await?;
    if let InKafka::Recorded(recorded) = &in_kafka {
        stream.resume_incremental_from_kafka(recorded.as_ref(), start);
    }
    stream.metrics.snapshot_started();
    let notification = |kind| Notification::new(INITIAL_SNAPSHOT, kind, None);
    stream.notifier.notify(notification(Kind::Started));
    let emitted = emit_snapshot(stream, exported, stop.as_mut()).await;
    stream.metrics.snapshot_finished();
    let emitted = match emitted {
        Ok(emitted) => emitted,
        Err(error) => {
            stream.notifier.notify(notification(Kind::Aborted));
            stream.delivery.abort_batch().await;
            return Err(error);
        }
    };
    let Some(_rows) = emitted else {
        // `emit_snapshot` recorded why it stopped (a request, --max-run).
        stream.notifier.notify(notification(Kind::Aborted));
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
    stream.notifier.notify(notification(Kind::Completed));
    if stream.config.snapshot_mode == SnapshotMode::InitialOnly {
        stream.notifier.flush(stream.config.shutdown_timeout).await;
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

/// Whether this run records the initial snapshot's progress, so that an
/// interruption resumes it instead of starting over: only when it can be
/// resumed, which takes an incremental snapshot (a signal table, or
/// `--read-only`'s, whose progress Kafka keeps) and a run that goes on
/// streaming. Without that, exactly-once keeps the whole snapshot in one
/// Kafka transaction, as a start from scratch would otherwise duplicate
/// the chunks committed already.
pub(super) fn records_progress(config: &RunConfig) -> bool {
    config.takes_incremental_snapshots() && config.snapshot_mode != SnapshotMode::InitialOnly
}

/// How long a checkpoint may wait for Kafka's acknowledgements.
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(300);

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
    let checkpoints = records_progress(config);
    if checkpoints {
        let topic = config.names().progress_topic();
        ensure_progress_topic(&config.producer_config(), &topic).await?;
    }
    stream.metrics.snapshot_tables(total_tables as u64);
    tracing::info!(
        tables = total_tables,
        keyed = tables.iter().filter(|t| t.key_positions.is_some()).count(),
        estimated_rows,
        workers,
        resumable = checkpoints,
        binary_chunks = jobs.iter().filter(|job| job.reads_binary()).count(),
        "snapshot started"
    );
    let source = RowSource {
        point: exported.consistent_point,
        xid: snapshot_xid(&clients[0]).await?,
        txn: stream.delivery.begin(),
    };
    let relations: Arc<Vec<Relation>> =
        Arc::new(tables.iter().map(|t| t.relation.clone()).collect());
    let relation_ids: Vec<u32> = relations.iter().map(|r| r.id).collect();
    let writers = RowWriter::for_workers(stream, &relation_ids, source, clients.len())?;
    let (mut rx, handles) = spawn_readers(clients, writers, jobs, &relations);

    let mut emission = Emission {
        relation_ids,
        tables,
        source,
        rows: 0,
        held_last: None,
        first_overall: true,
        progress: SnapshotProgress::new(total_tables as u64, estimated_rows),
    };
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut checkpointed = Checkpointed {
        progress: None,
        at: Instant::now(),
    };
    loop {
        let work = tokio::select! {
            biased;
            reason = &mut stop => {
                emission.progress.finish();
                tracing::info!(?reason, rows = emission.rows, resumable = checkpoints, "snapshot interrupted; the next run resumes it after its last checkpoint (resumable) or starts over");
                for h in &handles { h.abort(); }
                stream.summary.stopped = reason;
                return Ok(None);
            }
            work = rx.recv() => work,
        };
        let Some(work) = work else { break };
        match work? {
            Work::Rows { table, rows } => {
                for row in rows {
                    emission.row(stream, table, row).await?;
                }
            }
            Work::ChunkDone { table, last } => {
                emission.chunk_done(stream, table, last).await?;
                if checkpoints {
                    checkpoint(stream, &emission, &mut checkpointed, &mut last_log).await?;
                }
            }
        }
    }
    emission.last(stream).await?;
    for h in handles {
        let _ = h.await;
    }
    emission.progress.finish();
    // The snapshot's own Kafka transaction (exactly-once) holds at least
    // its commit, even when a checkpoint just committed every row.
    stream.delivery.open_batch()?;
    stream
        .delivery
        .commit(emission.source.txn, emission.source.point);
    tracing::info!(
        rows = emission.rows,
        tables = total_tables,
        secs = started.elapsed().as_secs_f64(),
        "snapshot read; waiting for Kafka to acknowledge it"
    );
    Ok(Some(emission.rows))
}

/// The last checkpoint taken: what it recorded, and when.
struct Checkpointed {
    progress: Option<InitialSnapshotProgress>,
    at: Instant,
}

/// Makes every row sent so far durable in Kafka with the progress record
/// that says which (see [`emission`]), at most once per
/// `--snapshot-checkpoint-interval`: each waits for Kafka (at-least-once:
/// for every acknowledgement; exactly-once: a transaction's commit), which
/// after every chunk made a 1M-row snapshot about a third slower
/// (BENCHMARKS.md, "The resumable snapshot's checkpoints"). Skipped while
/// a table without a key is unfinished, and when nothing was sent since
/// the `last` checkpoint (two workers' chunks often end back to back, the
/// second with no row left to send: an empty Kafka transaction would only
/// cost a commit). Logs the progress every 5 s.
async fn checkpoint(
    stream: &mut Stream<'_>,
    emission: &Emission,
    last: &mut Checkpointed,
    last_log: &mut Instant,
) -> Result<(), PipelineError> {
    if last.at.elapsed() < stream.config.snapshot_checkpoint_interval {
        return Ok(());
    }
    let Some(sent) = emission.sent() else {
        return Ok(());
    };
    if last.progress.as_ref() == Some(&sent) {
        return Ok(());
    }
    last.progress = Some(sent.clone());
    fault::snapshot_checkpoint_due().await;
    let names = stream.config.names();
    let record = ProgressRecord {
        lsn: emission.source.point,
        snapshot: false,
        transactions: 0,
        written_at_ms: now_ms(),
        incremental_snapshot: None,
        initial_snapshot: Some(sent),
        server: None,
    };
    stream
        .delivery
        .checkpoint(
            &names.progress_topic(),
            &names.connector_name(),
            record,
            CHECKPOINT_TIMEOUT,
        )
        .await?;
    last.at = Instant::now();
    if let Some(failure) = stream.delivery.failure() {
        return Err(PipelineError::Delivery(failure));
    }
    if last_log.elapsed() >= Duration::from_secs(5) {
        *last_log = Instant::now();
        for t in emission.tables.iter().filter(|t| !t.finished) {
            tracing::info!(table = %t.name, chunks_done = t.chunks_done, chunks_estimated = t.chunks_estimated, rows = t.rows, "snapshot progress in kafka");
        }
    }
    Ok(())
}

/// The published tables the selection admits, registered in the stream's
/// relation cache (only the captured columns are read) and their topics
/// made; the jobs that read them, taken from the end (page ranges there);
/// and the
/// planner's estimate of their rows.
async fn plan_tables(
    stream: &mut Stream<'_>,
    catalog_client: &tokio_postgres::Client,
) -> Result<(Vec<TableProgress>, Vec<Job>, u64), PipelineError> {
    let config = stream.config;
    let mut tables = Vec::new();
    let mut keyless_jobs = Vec::new();
    let mut keyed_jobs = Vec::new();
    let mut estimated_rows = 0u64;
    let select = config.snapshot_select.parse().unwrap_or_default();
    for oid in reader::publication_tables(catalog_client, &config.publication_name).await? {
        let mut relation =
            reader::relation_from_catalog(catalog_client, oid, &config.publication_name).await?;
        if !stream.relations.admits(&relation)
            || !select.includes(&relation.namespace, &relation.name)
        {
            continue;
        }
        let catalog = setup::catalog_columns(catalog_client, oid).await?;
        let table = stream.relations.update(&relation, &catalog)?;
        // Read only the captured columns: the schema was built from all of them.
        relation
            .columns
            .retain(|c| table.columns.iter().any(|t| t.name == c.name));
        let schema = stream.relations.update(&relation, &catalog)?;
        stream.ensure_topic(&table.topic).await?;
        let rows = reader::relation_row_estimate(catalog_client, oid).await?;
        estimated_rows += rows;
        let index = tables.len();
        // Chunks by key, for a resume point, when progress is recorded;
        // otherwise page ranges, which spread a big table over every worker
        // and read the heap in order. They need the primary key: unique (a
        // `key > last` after a duplicate would skip its twins) and without
        // NULLs (which compare as unknown); a --message-key-columns key
        // reads by pages.
        let primary_key: Vec<&str> = catalog
            .iter()
            .filter(|c| c.primary_key_position.is_some())
            .map(|c| c.name.as_str())
            .collect();
        let key_positions = stream
            .relations
            .key_positions(&schema)
            .filter(|_| records_progress(config))
            .filter(|positions| !positions.is_empty() && positions.len() == primary_key.len())
            .filter(|positions| {
                positions.iter().all(|&p| {
                    relation
                        .columns
                        .get(p)
                        .is_some_and(|column| primary_key.contains(&column.name.as_str()))
                })
            });
        let statement = select.statement(&relation.namespace, &relation.name);
        let copy = statement.map(|select| SnapshotSelect::copy_of(&relation, select));
        // An override is read in one piece: it has no key order to resume from.
        let key_positions = key_positions.filter(|_| copy.is_none());
        let mut progress = TableProgress::new(relation, key_positions.clone(), 0);
        match (copy, key_positions) {
            (Some(copy), _) => {
                progress.chunks_left = 1;
                progress.chunks_estimated = 1;
                keyless_jobs.push(Job::Statement { table: index, copy });
            }
            (None, Some(key_positions)) => {
                let fetch_size = config.snapshot_fetch_size;
                progress.chunks_estimated = rows.div_ceil(u64::from(fetch_size)).max(1);
                keyed_jobs.push(Job::Keyed {
                    table: index,
                    key_positions,
                    after: None,
                    fetch_size,
                });
            }
            (None, None) => {
                let pages = reader::relation_pages(catalog_client, oid).await?;
                let chunks = reader::plan_chunks(pages, config.snapshot_chunk_pages);
                progress.chunks_left = chunks.len();
                progress.chunks_estimated = chunks.len() as u64;
                keyless_jobs.extend(chunks.iter().map(|&range| Job::Pages {
                    table: index,
                    range,
                    form: stream.values_form,
                }));
            }
        }
        tables.push(progress);
    }
    // Taken from the end: page ranges first (see `emission`).
    keyed_jobs.reverse();
    keyed_jobs.extend(keyless_jobs);
    Ok((tables, keyed_jobs, estimated_rows))
}
