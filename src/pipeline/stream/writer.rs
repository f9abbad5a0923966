//! Change records written beside the stream, by another task (an initial
//! snapshot's workers), and handed to Kafka by the stream.
//!
//! A [`ChangeWriter`] writes a change record exactly as
//! [`Stream::send_event`] does for an event no transform rewrites: the same
//! encoding, topic renames and context headers, with encoder caches of its
//! own (and, under Avro, the stream's schema ids: a schema is registered
//! once between them). [`Stream::send_written`] then sends and counts the
//! record as `send_event` does.

use super::super::PipelineError;
use super::{renamed, Stream};
use crate::checkpoint::TxnId;
use crate::encode::{EncodeError, Encoder};
use crate::event::envelope::Stamp;
use crate::event::record::{Header, Record};
use crate::event::{ChangeEvent, Op, TableSchema};
use crate::sink::EncodedRecord;
use crate::transform::regex_router::TopicRenames;

/// Writes untransformed change records as the stream would; see the module
/// documentation.
pub(in crate::pipeline) struct ChangeWriter {
    encoder: Encoder,
    renames: TopicRenames,
    context_headers: bool,
}

impl ChangeWriter {
    /// The record of `event`, processed at `now_micros` outside any
    /// Postgres transaction (no `transaction` block), in Kafka transaction
    /// `txn`.
    ///
    /// # Errors
    /// See [`EncodeError`]: with Avro, registering a schema may fail.
    pub(in crate::pipeline) async fn write(
        &mut self,
        event: &ChangeEvent,
        now_micros: i64,
        txn: TxnId,
    ) -> Result<EncodedRecord, EncodeError> {
        let headers = if self.context_headers {
            Header::context().collect()
        } else {
            Vec::new()
        };
        let stamp = Stamp {
            now_micros,
            transaction: None,
        };
        let record = Record::change(event, stamp, headers);
        self.encoder
            .encode(renamed(&self.renames, record), txn)
            .await
    }
}

impl Stream<'_> {
    /// A writer of this stream's change records for another task.
    pub(in crate::pipeline) fn change_writer(&self) -> ChangeWriter {
        ChangeWriter {
            encoder: self.encoder.fork(),
            renames: self.renames.clone(),
            context_headers: self.config.extended_headers,
        }
    }

    /// Whether a transform rewrites the events of `table`: their records
    /// are then the stream's to write ([`Stream::send_event`]), not a
    /// [`ChangeWriter`]'s.
    pub(in crate::pipeline) fn transforms(&self, table: &TableSchema) -> bool {
        self.transforms.applies_to(table)
    }

    /// Sends `record`, the record of an `op` event of `table` (its
    /// qualified name) that a [`ChangeWriter`] wrote, and counts it; with
    /// `tombstone`, a tombstone of its key follows.
    pub(in crate::pipeline) async fn send_written(
        &mut self,
        table: &str,
        op: Op,
        record: EncodedRecord,
        tombstone: bool,
    ) -> Result<(), PipelineError> {
        let key_bytes = record.key.as_ref().map_or(0, Vec::len);
        let mut bytes = key_bytes + record.value.as_ref().map_or(0, Vec::len);
        // The tombstone: the same key and headers, encoded once, and no
        // value (Debezium's tombstone is its delete's `newRecord` with the
        // delete's headers).
        let tombstone = tombstone.then(|| EncodedRecord {
            topic: std::sync::Arc::clone(&record.topic),
            key: record.key.clone(),
            value: None,
            headers: record.headers.clone(),
            txn: record.txn,
            partition: None,
            created_micros: record.created_micros,
        });
        self.delivery.send(record).await?;
        self.summary.events += 1;
        if let Some(tombstone) = tombstone {
            self.delivery.send(tombstone).await?;
            bytes += key_bytes;
        }
        self.metrics.event(table, op.code(), bytes);
        Ok(())
    }
}
