//! Snapshot rows written as records by the workers that read them.
//!
//! Decoding a row and encoding its record are most of what a snapshot costs
//! beside Kafka's own work. Done by the one emitter, they took a core for
//! every worker's rows; so each worker writes the records of the rows it
//! reads ([`RowWriter`], on its own task, in parallel), and the emitter
//! only orders and produces them.
//!
//! A worker writes every row as a row in the middle of the snapshot
//! (`source.snapshot: "true"`). Only the emitter knows which rows are a
//! table's first and last, and the snapshot's first and last (it sees every
//! table's rows), and those are always a batch's first or last row: so a
//! worker keeps those two rows as read ([`ReadRow::Written`]'s `tuple`), and
//! the emitter writes their records again when their marker differs. It
//! also keeps the key of the row before a batch's last: that is the last
//! row the emitter hands Kafka before it holds the batch's last back, and
//! the progress names it. Rows of a table a transform rewrites are handed
//! over as read ([`ReadRow::Read`]); the stream writes their records.

use std::sync::Arc;

use super::super::incremental::key_of;
use super::super::stream::{now_micros, ChangeWriter, Stream};
use super::PipelineError;
use crate::checkpoint::TxnId;
use crate::event::{SnapshotMarker, SourceInfo, TableSchema};
use crate::lsn::Lsn;
use crate::sink::EncodedRecord;
use crate::source::pgoutput::Tuple;
use crate::source::relation::{RelationCache, RowError};
use crate::source::signal::KeyText;

/// A row on its way from a worker to the emitter.
pub(super) enum ReadRow {
    /// As read: the emitter writes its record.
    Read(Tuple),
    /// Written by the worker as a row in the middle of the snapshot.
    Written {
        record: EncodedRecord,
        /// The row as read, kept for a batch's first and last rows (the
        /// emitter may have to write them again with another marker).
        tuple: Option<Tuple>,
        /// The row's key, kept for the row before a batch's last.
        key: Option<KeyText>,
    },
}

impl ReadRow {
    /// The row as read, unless only its record was kept.
    pub fn tuple(&self) -> Option<&Tuple> {
        match self {
            ReadRow::Read(tuple) => Some(tuple),
            ReadRow::Written { tuple, .. } => tuple.as_ref(),
        }
    }
}

/// What a snapshot's rows share: their position, transaction id and Kafka
/// transaction.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowSource {
    /// The slot's consistent point.
    pub point: Lsn,
    /// `source.txId`: the oldest transaction the snapshot does not see.
    pub xid: u32,
    pub txn: TxnId,
}

impl RowSource {
    /// The `source` block of a row processed at `now_micros`.
    pub fn at(&self, now_micros: i64, marker: SnapshotMarker) -> SourceInfo {
        SourceInfo {
            origin: None,
            commit_time_micros: now_micros,
            xid: self.xid,
            lsn: self.point,
            last_commit_lsn: None,
            snapshot: marker,
        }
    }
}

/// One worker's writer of records: see the module documentation.
pub(super) struct RowWriter {
    relations: Arc<RelationCache>,
    /// By table index: the schema of a table whose records the worker
    /// writes (its own copy, topic name included, so the workers do not
    /// share the reference counts every record touches); `None` for a
    /// table a transform rewrites.
    tables: Vec<Option<Arc<TableSchema>>>,
    writer: ChangeWriter,
    source: RowSource,
}

impl RowWriter {
    /// A writer for each of `workers` workers, of the snapshot's tables
    /// (`relation_ids`, by table index) as `stream` would write them.
    pub fn for_workers(
        stream: &Stream<'_>,
        relation_ids: &[u32],
        source: RowSource,
        workers: usize,
    ) -> Result<Vec<RowWriter>, RowError> {
        let relations = Arc::new(stream.relations.clone());
        let mut written = Vec::with_capacity(relation_ids.len());
        for &id in relation_ids {
            let schema = stream.relations.get(id, source.point)?;
            written.push((!stream.transforms(schema)).then_some(schema));
        }
        let own_copy = |schema: &Arc<TableSchema>| {
            Arc::new(TableSchema {
                topic: Arc::from(&*schema.topic),
                ..TableSchema::clone(schema)
            })
        };
        Ok((0..workers)
            .map(|_| RowWriter {
                relations: Arc::clone(&relations),
                tables: written.iter().map(|s| s.map(own_copy)).collect(),
                writer: stream.change_writer(),
                source,
            })
            .collect())
    }

    /// The record of `tuple`, a row of `table`, as a row in the middle of
    /// the snapshot; `None` when a transform rewrites the table's rows
    /// (the emitter writes those).
    pub async fn write(
        &mut self,
        table: usize,
        tuple: &Tuple,
    ) -> Result<Option<EncodedRecord>, PipelineError> {
        let Some(Some(schema)) = self.tables.get(table) else {
            return Ok(None);
        };
        let now = now_micros();
        let source = self.source.at(now, SnapshotMarker::True);
        let event = self.relations.read_event(schema, tuple, source)?;
        Ok(Some(self.writer.write(&event, now, self.source.txn).await?))
    }
}

/// Rows of one table gathered for the emitter: see the module documentation
/// for what of them is kept.
pub(super) struct Batch {
    rows: Vec<ReadRow>,
    /// The last two rows read, as read (written rows only).
    recent: [Option<Tuple>; 2],
}

impl Batch {
    pub fn with_capacity(rows: usize) -> Self {
        Batch {
            rows: Vec::with_capacity(rows),
            recent: [None, None],
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds a row as read, for the emitter to write.
    pub fn push_read(&mut self, tuple: Tuple) {
        self.rows.push(ReadRow::Read(tuple));
    }

    /// Adds `record`, written from `tuple`.
    pub fn push_written(&mut self, record: EncodedRecord, tuple: Tuple) {
        let first = self.rows.is_empty();
        self.rows.push(ReadRow::Written {
            record,
            tuple: first.then(|| tuple.clone()),
            key: None,
        });
        let [older, newer] = &mut self.recent;
        *older = newer.replace(tuple);
    }

    /// The last row added, as read.
    pub fn last(&self) -> Option<&Tuple> {
        self.recent[1]
            .as_ref()
            .or_else(|| self.rows.last().and_then(ReadRow::tuple))
    }

    /// The rows, the last one and the key of the one before it kept
    /// (`key_positions`: a keyed table's key columns); the batch is empty
    /// after.
    pub fn take(&mut self, key_positions: Option<&[usize]>) -> Vec<ReadRow> {
        let [older, newer] = std::mem::take(&mut self.recent);
        let capacity = self.rows.capacity();
        let mut rows = std::mem::replace(&mut self.rows, Vec::with_capacity(capacity));
        let n = rows.len();
        if let Some(ReadRow::Written { tuple, .. }) = rows.last_mut() {
            if tuple.is_none() {
                *tuple = newer;
            }
        }
        if let (Some(positions), Some(older), Some(ReadRow::Written { key, .. })) = (
            key_positions,
            older,
            n.checked_sub(2).and_then(|i| rows.get_mut(i)),
        ) {
            *key = key_of(&older, positions);
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pgoutput::Datum;

    fn tuple(id: &str) -> Tuple {
        Tuple::new([Datum::Text(id.as_bytes()), Datum::Null])
    }

    fn record(id: &str) -> EncodedRecord {
        EncodedRecord {
            topic: "t".into(),
            key: Some(id.as_bytes().to_vec()),
            value: None,
            headers: Vec::new(),
            txn: TxnId::from_u64(1),
            partition: None,
            created_micros: None,
        }
    }

    /// What a batch hands over: (the record's key, the kept row's id, the kept key).
    fn kept(rows: &[ReadRow]) -> Vec<(String, Option<String>, Option<KeyText>)> {
        rows.iter()
            .map(|row| match row {
                ReadRow::Written { record, tuple, key } => (
                    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into(),
                    tuple
                        .as_ref()
                        .map(|t| match t.get(0).unwrap_or(Datum::Null) {
                            Datum::Text(b) => String::from_utf8_lossy(b).into_owned(),
                            _ => String::new(),
                        }),
                    key.clone(),
                ),
                ReadRow::Read(_) => (String::new(), None, None),
            })
            .collect()
    }

    #[test]
    fn a_batch_keeps_its_first_and_last_rows_and_the_key_before_the_last() {
        let mut batch = Batch::with_capacity(4);
        for id in ["1", "2", "3", "4"] {
            batch.push_written(record(id), tuple(id));
        }
        assert_eq!(batch.last(), Some(&tuple("4")));
        let key = |id: &str| Some(vec![Some(id.to_owned())]);
        assert_eq!(
            kept(&batch.take(Some(&[0]))),
            [
                ("1".into(), Some("1".into()), None),
                ("2".into(), None, None),
                ("3".into(), None, key("3")),
                ("4".into(), Some("4".into()), None),
            ]
        );
        // The next batch starts afresh: a one-row batch's row is its first
        // and last, and there is no row before it.
        batch.push_written(record("5"), tuple("5"));
        assert_eq!(
            kept(&batch.take(Some(&[0]))),
            [("5".into(), Some("5".into()), None)]
        );
        // Without a key (a table read by pages) no key is kept.
        batch.push_written(record("6"), tuple("6"));
        batch.push_written(record("7"), tuple("7"));
        assert_eq!(
            kept(&batch.take(None)),
            [
                ("6".into(), Some("6".into()), None),
                ("7".into(), Some("7".into()), None),
            ]
        );
        assert_eq!(batch.len(), 0);
    }

    #[test]
    fn rows_a_worker_does_not_write_are_kept_whole() {
        let mut batch = Batch::with_capacity(2);
        batch.push_read(tuple("1"));
        batch.push_read(tuple("2"));
        assert_eq!(batch.last(), Some(&tuple("2")));
        let rows = batch.take(Some(&[0]));
        assert!(rows
            .iter()
            .all(|row| matches!(row, ReadRow::Read(_)) && row.tuple().is_some()));
    }
}
