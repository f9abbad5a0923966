//! The initial snapshot's readers and emitter, and what of it Kafka holds.
//!
//! Readers (one per worker connection, all in the exported snapshot) take
//! jobs off a shared queue. In a resumable snapshot a table with a primary
//! key is one job, read by one worker in key order, `--snapshot-fetch-size`
//! rows a chunk (`key > last key ORDER BY key LIMIT n`, the incremental
//! snapshot's query); any other table (every table of a snapshot that is
//! not resumable) is split into page ranges (`--snapshot-chunk-pages`) that
//! any worker reads. Jobs are taken from the end of the list: page ranges
//! are put there, so that those tables are done early (until they are, no
//! progress is recorded, see below), the last range of a table first.
//!
//! The emitter sends the rows in the order it receives them. A table's rows
//! arrive in key order (one reader, chunks one after another, a FIFO
//! channel), so "every row of the table up to key k was sent" describes
//! exactly what of a keyed table went out: that, per table, is the progress
//! ([`InitialSnapshotProgress`]). At a checkpoint, after a chunk, everything
//! sent is made durable in Kafka together with that progress
//! ([`crate::sink::Delivery::checkpoint`]), so the record never claims a row
//! Kafka does not have. A table without a key has no such position: while
//! one is unfinished no checkpoint is taken (an interruption then starts
//! the snapshot over, as before).

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use tokio::sync::mpsc;

use super::super::incremental::{chunk_query, key_of};
use super::super::stream::{now_micros, Stream};
use super::writing::{Batch, ReadRow, RowSource, RowWriter};
use super::{PipelineError, SnapshotError};
use crate::checkpoint::TxnId;
use crate::event::{Op, SnapshotMarker, SnapshotPosition, SourceInfo};
use crate::notification::{Kind, Notification, INITIAL_SNAPSHOT};
use crate::progress::SnapshotProgress;
use crate::sink::transactional::InitialSnapshotProgress;
use crate::source::pgoutput::{Form, Relation, Tuple};
use crate::source::setup::SetupError;
use crate::source::signal::KeyText;
use crate::source::snapshot::{self as reader, PageRange, SnapshotReadError};

/// Rows a worker sends the emitter at once.
const ROW_BATCH: usize = 256;
/// Batches waiting for the emitter (all workers together): the readers
/// stay at most this far ahead.
const ROW_BATCHES_QUEUED: usize = 8;

/// What workers send the emitter.
pub(super) enum Work {
    /// Rows in the order read, up to [`ROW_BATCH`] (one channel send per
    /// batch, not per row: the per-row wake-ups cost more than the rows),
    /// most of them written already ([`super::writing`]).
    Rows { table: usize, rows: Vec<ReadRow> },
    /// A chunk of `table` was read; `last`: it was the table's last (known
    /// to the reader of a keyed table; a page range says `false` and the
    /// emitter counts them).
    ChunkDone { table: usize, last: bool },
}

/// A unit of reading.
#[derive(Debug, Clone)]
pub(super) enum Job {
    /// A whole table with a key, in key order, after `after` if set.
    Keyed {
        table: usize,
        key_positions: Vec<usize>,
        after: Option<KeyText>,
        fetch_size: u32,
    },
    /// A page range of a table without a key, its values read in `form`.
    Pages {
        table: usize,
        range: PageRange,
        form: Form,
    },
    /// A whole table read with its `--snapshot-select-statement-override`
    /// (a COPY of it, see [`crate::source::snapshot_select`]).
    Statement { table: usize, copy: String },
}

impl Job {
    /// Whether the job reads its rows' values in binary.
    pub fn reads_binary(&self) -> bool {
        matches!(
            self,
            Job::Pages {
                form: Form::Binary,
                ..
            }
        )
    }
}

pub(super) struct TableProgress {
    pub relation: Relation,
    /// `schema.table`.
    pub name: String,
    /// The key's columns in the rows read; `None` for a table without one.
    pub key_positions: Option<Vec<usize>>,
    /// Page ranges still to read (tables without a key).
    pub chunks_left: usize,
    pub chunks_done: u64,
    /// For the progress log: the page ranges, or the planner's rows over
    /// the fetch size.
    pub chunks_estimated: u64,
    /// Every chunk was read.
    pub finished: bool,
    pub rows: u64,
    /// The key of the last row handed to Kafka: every row up to it was.
    pub sent_key: Option<KeyText>,
    /// The newest row, held back until we know whether it is the table's
    /// last; whether it is the table's first.
    pub pending: Option<(ReadRow, bool)>,
}

impl TableProgress {
    pub fn new(relation: Relation, key_positions: Option<Vec<usize>>, chunks_left: usize) -> Self {
        TableProgress {
            name: format!("{}.{}", relation.namespace, relation.name),
            relation,
            key_positions,
            chunks_left,
            chunks_done: 0,
            chunks_estimated: 0,
            finished: false,
            rows: 0,
            sent_key: None,
            pending: None,
        }
    }
}

/// What workers send, or why one stopped.
type Sent = Result<Work, PipelineError>;

/// One reader task per client (each with its writer), each taking jobs off
/// the end of the shared queue until it is empty and sending their rows
/// (and a `ChunkDone` per chunk) to the channel returned.
pub(super) fn spawn_readers(
    clients: Vec<tokio_postgres::Client>,
    writers: Vec<RowWriter>,
    jobs: Vec<Job>,
    relations: &Arc<Vec<Relation>>,
) -> (mpsc::Receiver<Sent>, Vec<tokio::task::JoinHandle<()>>) {
    let queue = Arc::new(Mutex::new(jobs));
    let (tx, rx) = mpsc::channel::<Sent>(ROW_BATCHES_QUEUED);
    let mut handles = Vec::new();
    for (client, mut writer) in clients.into_iter().zip(writers) {
        let queue = Arc::clone(&queue);
        let relations = Arc::clone(relations);
        let tx = tx.clone();
        handles.push(tokio::spawn(async move {
            loop {
                let job = queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
                let Some(job) = job else { break };
                let reader = Reader {
                    client: &client,
                    writer: &mut writer,
                    tx: &tx,
                };
                if let Err(error) = reader.read_job(&relations, job).await {
                    let _ = tx.send(Err(error)).await;
                    break;
                }
            }
            let _ = client.batch_execute("COMMIT").await;
        }));
    }
    (rx, handles)
}

/// One worker at a job: its connection, its writer, the emitter's channel.
struct Reader<'a> {
    client: &'a tokio_postgres::Client,
    writer: &'a mut RowWriter,
    tx: &'a mpsc::Sender<Sent>,
}

impl Reader<'_> {
    async fn read_job(mut self, relations: &[Relation], job: Job) -> Result<(), PipelineError> {
        match job {
            Job::Pages { table, range, form } => {
                let relation = &relations[table];
                let statement = reader::copy_statement(relation, range, form);
                self.read_chunk(relation, table, statement, form, None)
                    .await?;
                self.send(Work::ChunkDone { table, last: false }).await
            }
            Job::Statement { table, copy } => {
                self.read_chunk(&relations[table], table, copy, Form::Text, None)
                    .await?;
                self.send(Work::ChunkDone { table, last: false }).await
            }
            Job::Keyed {
                table,
                key_positions,
                mut after,
                fetch_size,
            } => {
                let relation = &relations[table];
                let key_names: Vec<&str> = key_positions
                    .iter()
                    .map(|&p| relation.columns[p].name.as_str())
                    .collect();
                loop {
                    let select =
                        chunk_query(relation, &key_names, after.as_ref(), fetch_size, None);
                    let statement = format!("COPY ({select}) TO STDOUT");
                    let (rows, last_key) = self
                        .read_chunk(relation, table, statement, Form::Text, Some(&key_positions))
                        .await?;
                    let last = rows < u64::from(fetch_size) || last_key.is_none();
                    self.send(Work::ChunkDone { table, last }).await?;
                    if last {
                        return Ok(());
                    }
                    after = last_key;
                }
            }
        }
    }

    async fn send(&self, work: Work) -> Result<(), PipelineError> {
        self.tx
            .send(Ok(work))
            .await
            .map_err(|_| SnapshotError::WorkerGone.into())
    }

    /// Reads one chunk with `statement` (a COPY of `relation`'s columns, its
    /// values in `form`) and sends its rows, written; returns how many, and
    /// the key of the last one when `key_positions` are given (text rows:
    /// the key is read as text).
    async fn read_chunk(
        &mut self,
        relation: &Relation,
        table: usize,
        statement: String,
        form: Form,
        key_positions: Option<&[usize]>,
    ) -> Result<(u64, Option<KeyText>), PipelineError> {
        let rows = reader::copy_select(self.client, relation, statement, form)
            .await
            .map_err(|e| match e {
                SetupError::Query { action, error } => {
                    SnapshotError::Read(SnapshotReadError::Copy {
                        table: action,
                        error,
                    })
                }
                _ => SnapshotError::WorkerGone,
            })?;
        futures::pin_mut!(rows);
        let mut batch = Batch::with_capacity(ROW_BATCH);
        let mut count = 0u64;
        while let Some(row) = rows.next().await {
            let row = row.map_err(SnapshotError::from)?;
            count += 1;
            if batch.len() == ROW_BATCH {
                let rows = batch.take(key_positions);
                self.send(Work::Rows { table, rows }).await?;
            }
            match self.writer.write(table, &row).await? {
                Some(record) => batch.push_written(record, row),
                None => batch.push_read(row),
            }
        }
        // A batch is sent before a row is added, so the chunk's last row is
        // in it.
        let last_key = key_positions
            .zip(batch.last())
            .and_then(|(positions, row)| key_of(row, positions));
        if batch.len() > 0 {
            let rows = batch.take(key_positions);
            self.send(Work::Rows { table, rows }).await?;
        }
        Ok((count, last_key))
    }
}

/// The snapshot's rows on their way out, with what their markers need: a
/// table's newest row is held until the next one shows it is not the
/// table's last, and the last row of a finished table until another table
/// finishes or the snapshot ends (it may be the snapshot's last). All of
/// it is one Postgres "transaction", at the slot's consistent point.
pub(super) struct Emission {
    pub tables: Vec<TableProgress>,
    pub relation_ids: Vec<u32>,
    pub source: RowSource,
    pub rows: u64,
    pub held_last: Option<(usize, ReadRow)>,
    pub first_overall: bool,
    pub progress: SnapshotProgress,
}

impl Emission {
    /// Hands `row` of `table` to Kafka as a row at `marker`: the record a
    /// worker wrote when that is a row in the middle, else a record written
    /// here from the row as read.
    async fn emit(
        &mut self,
        stream: &mut Stream<'_>,
        table: usize,
        row: ReadRow,
        marker: SnapshotMarker,
    ) -> Result<(), PipelineError> {
        let t = &mut self.tables[table];
        let key = match row {
            ReadRow::Written { record, tuple, key } if marker == SnapshotMarker::True => {
                stream
                    .send_written(&t.name, Op::Read, record, false)
                    .await?;
                key.or_else(|| {
                    tuple
                        .zip(t.key_positions.as_ref())
                        .and_then(|(r, p)| key_of(&r, p))
                })
            }
            row => {
                let tuple = row.tuple().ok_or(SnapshotError::RowNotKept)?;
                let source = self.source.at(now_micros(), marker);
                let txn = self.source.txn;
                emit_row(stream, self.relation_ids[table], tuple, source, txn).await?;
                t.key_positions.as_ref().and_then(|p| key_of(tuple, p))
            }
        };
        // A row written in the middle of a batch keeps no key: the batch's
        // row before its last, emitted before the next checkpoint, does.
        if key.is_some() {
            t.sent_key = key;
        }
        Ok(())
    }

    /// A row read from `table`; emits the row it held back, which another
    /// row of its table now follows.
    pub async fn row(
        &mut self,
        stream: &mut Stream<'_>,
        table: usize,
        row: ReadRow,
    ) -> Result<(), PipelineError> {
        let t = &mut self.tables[table];
        t.rows += 1;
        if t.rows == 1 {
            let name = t.name.clone();
            stream.notifier.notify(
                self.notification(Kind::InProgress)
                    .with("current_collection_in_progress", name),
            );
        }
        let t = &mut self.tables[table];
        let previous = t.pending.replace((row, t.rows == 1));
        self.rows += 1;
        self.progress.row();
        if let Some((row, first_in_table)) = previous {
            // Another row of its table follows: it is not last of anything.
            let marker = SnapshotMarker::of_row(SnapshotPosition {
                first: std::mem::take(&mut self.first_overall),
                first_in_table,
                ..SnapshotPosition::default()
            });
            self.emit(stream, table, row, marker).await?;
        }
        Ok(())
    }

    /// A chunk of `table` was read (`last`: the last of a keyed table);
    /// after its last one the table is done, and its held row is the last
    /// of its table.
    pub async fn chunk_done(
        &mut self,
        stream: &mut Stream<'_>,
        table: usize,
        last: bool,
    ) -> Result<(), PipelineError> {
        let t = &mut self.tables[table];
        t.chunks_done += 1;
        let finished = if t.key_positions.is_some() {
            last
        } else {
            t.chunks_left -= 1;
            t.chunks_left == 0
        };
        tracing::debug!(table = %t.name, chunks = t.chunks_done, rows = t.rows, "snapshot chunk read");
        if !finished {
            return Ok(());
        }
        t.finished = true;
        let first_in_table = t.pending.as_ref().is_some_and(|(_, first)| *first);
        let pending = t.pending.take();
        self.progress.table_done();
        stream.metrics.snapshot_table_done();
        if let Some((row, _)) = pending {
            // The previously completed table's last row is no longer the snapshot's last.
            if let Some((held_table, held_row)) = self.held_last.take() {
                let marker = SnapshotMarker::LastInDataCollection;
                self.emit(stream, held_table, held_row, marker).await?;
            }
            if first_in_table && std::mem::take(&mut self.first_overall) {
                // A one-row table that is also the first: emit now, as "first".
                self.emit(stream, table, row, SnapshotMarker::First).await?;
            } else {
                self.held_last = Some((table, row));
            }
        }
        let t = &self.tables[table];
        tracing::info!(table = %t.name, rows = t.rows, chunks = t.chunks_done, "snapshot of table done");
        stream.notifier.notify(
            self.notification(Kind::TableScanCompleted)
                .with("scanned_collection", t.name.as_str())
                .with("total_rows_scanned", t.rows.to_string())
                .with("status", "SUCCEEDED"),
        );
        Ok(())
    }

    /// An `Initial Snapshot` notification naming the snapshot's tables.
    pub fn notification(&self, kind: Kind) -> Notification {
        let tables: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
        Notification::new(INITIAL_SNAPSHOT, kind, None).with("data_collections", tables.join(","))
    }

    /// Every table was read: the row held last is the snapshot's last.
    pub async fn last(&mut self, stream: &mut Stream<'_>) -> Result<(), PipelineError> {
        if let Some((table, row)) = self.held_last.take() {
            self.emit(stream, table, row, SnapshotMarker::Last).await?;
        }
        Ok(())
    }

    /// What of the snapshot has been handed to Kafka so far, as a resume
    /// point; `None` while a table without a key is unfinished (it has no
    /// position to resume from).
    pub fn sent(&self) -> Option<InitialSnapshotProgress> {
        let mut progress = InitialSnapshotProgress::default();
        for (index, t) in self.tables.iter().enumerate() {
            let held = self.held_last.as_ref().is_some_and(|(h, _)| *h == index);
            if t.finished && t.pending.is_none() && !held {
                continue;
            }
            t.key_positions.as_ref()?;
            progress.remaining.push(t.name.clone());
            if let Some(key) = &t.sent_key {
                progress.after.insert(t.name.clone(), key.clone());
            }
        }
        Some(progress)
    }
}

/// Writes the record of `tuple`, a row of relation `relation_id`, here
/// (with its `source`) and sends it.
async fn emit_row(
    stream: &mut Stream<'_>,
    relation_id: u32,
    tuple: &Tuple,
    source: SourceInfo,
    txn: TxnId,
) -> Result<(), PipelineError> {
    let schema = Arc::clone(stream.relations.get(relation_id, source.lsn)?);
    let event = stream.relations.read_event(&schema, tuple, source)?;
    stream.send_event(&event, Vec::new(), false, txn).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::lsn::Lsn;
    use crate::source::pgoutput::{Datum, ReplicaIdentity};

    fn table(name: &str, keyed: bool) -> TableProgress {
        let relation = Relation {
            id: 1,
            namespace: "public".into(),
            name: name.into(),
            replica_identity: ReplicaIdentity::Default,
            columns: Vec::new(),
        };
        TableProgress::new(relation, keyed.then(|| vec![0]), 0)
    }

    fn row(id: &str) -> ReadRow {
        ReadRow::Read(Tuple::new([Datum::Text(id.as_bytes())]))
    }

    fn emission(tables: Vec<TableProgress>) -> Emission {
        Emission {
            relation_ids: tables.iter().map(|t| t.relation.id).collect(),
            tables,
            source: RowSource {
                point: Lsn::new(16),
                xid: 0,
                txn: TxnId::from_u64(1),
            },
            rows: 0,
            held_last: None,
            first_overall: false,
            progress: SnapshotProgress::new(0, 0),
        }
    }

    fn key(id: &str) -> Option<KeyText> {
        Some(vec![Some(id.into())])
    }

    #[test]
    fn the_resume_point_names_only_rows_handed_to_kafka() {
        let mut done = table("done", true);
        done.finished = true;
        done.sent_key = key("9");
        let mut held = table("held", true);
        held.finished = true;
        held.sent_key = key("41");
        let mut reading = table("reading", true);
        reading.sent_key = key("7");
        reading.pending = Some((row("8"), false));
        let mut keyless_done = table("keyless_done", false);
        keyless_done.finished = true;
        let untouched = table("untouched", true);
        let mut e = emission(vec![done, held, reading, keyless_done, untouched]);
        e.held_last = Some((1, row("42")));
        let sent = e.sent().expect("no table without a key is unfinished");
        assert_eq!(
            sent.remaining,
            ["public.held", "public.reading", "public.untouched"],
            "a finished table whose last row is held back is not done yet"
        );
        assert_eq!(
            sent.after,
            BTreeMap::from([
                ("public.held".to_owned(), vec![Some("41".to_owned())]),
                ("public.reading".to_owned(), vec![Some("7".to_owned())]),
            ]),
            "the held-back rows (42, 8) are read again; an untouched table from its start"
        );
    }

    #[test]
    fn no_resume_point_while_a_table_without_a_key_is_unfinished() {
        let mut e = emission(vec![table("keyed", true), table("keyless", false)]);
        assert_eq!(e.sent(), None);
        e.tables[1].finished = true;
        assert_eq!(
            e.sent().map(|s| s.remaining),
            Some(vec!["public.keyed".to_owned()])
        );
    }
}
