//! What crosses into the sink and what comes back out: a record ready for
//! Kafka, tagged with its Postgres transaction, and the delivery progress
//! the pipeline reads (everything below `acked` is in Kafka).

use std::sync::Arc;

use bytes::Bytes;

use super::error::SinkError;
use crate::checkpoint::TxnId;
use crate::lsn::Lsn;

/// One message ready for Kafka, tagged with the transaction it belongs to.
#[derive(Debug, Clone)]
pub struct EncodedRecord {
    pub topic: Arc<str>,
    /// `None` for a null key (tables without a primary key or replica identity).
    pub key: Option<Vec<u8>>,
    /// `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Shared bytes: a header that is the same on every record (Debezium's
    /// context headers) is written once and only counted here.
    pub headers: Vec<(&'static str, Bytes)>,
    pub txn: TxnId,
    /// The partition, when the sink chose it (see `sink::at_least_once`);
    /// `None`: the producer's partitioner chooses.
    pub partition: Option<i32>,
    /// When the connector processed the change (Unix µs, the envelope's
    /// `ts_us`): the Kafka record's timestamp, and where its
    /// acknowledgement latency is counted from. `None` (a record without
    /// such a time): the producer's clock when it takes the record.
    pub created_micros: Option<i64>,
}

impl EncodedRecord {
    /// The bytes it holds against `--max-in-flight-bytes`.
    pub(super) fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.headers_size()
    }

    /// The bytes of its headers' names and values.
    pub(super) fn headers_size(&self) -> usize {
        self.headers.iter().map(|(k, v)| k.len() + v.len()).sum()
    }
}

/// What the delivery side reports to the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Everything below this LSN is acknowledged by Kafka.
    pub acked: Lsn,
    /// The first delivery that failed for good, if any.
    pub failure: Option<Arc<SinkError>>,
}
