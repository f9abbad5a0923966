//! The change event model: what one row change is, independent of how it is
//! encoded, and the Debezium envelope built from it.
//!
//! A [`TableSchema`] is derived once per pgoutput Relation message and shared
//! by every event of that table until the next Relation message replaces it.
//! A [`ChangeEvent`] is one row change in that table's terms. The envelope
//! module turns both into the Kafka Connect structs Debezium emits, which the
//! encoders then write as JSON or Avro.

pub mod envelope;
pub mod metadata;
pub mod options;
pub mod value;

use std::sync::Arc;

use crate::lsn::Lsn;
use value::{ConnectSchema, Value};

/// Debezium's `op` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Create,
    Update,
    Delete,
    Truncate,
    Read,
}

impl Op {
    /// The one-letter code in the envelope's `op` field.
    pub const fn code(self) -> &'static str {
        match self {
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Truncate => "t",
            Op::Read => "r",
        }
    }
}

/// One column of a published table, as the stream describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSchema {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
    /// The column's Connect schema, optional unless the column is NOT NULL
    /// or part of the key.
    pub schema: ConnectSchema,
}

/// Everything needed to build events of one table, derived from its Relation message.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub relation_id: u32,
    pub schema: String,
    pub table: String,
    /// `<schema>.<table>`, as metrics and transaction blocks name the table
    /// (built once, not per event).
    pub qualified_name: Arc<str>,
    /// `<prefix>.<schema>.<table>`
    pub topic: Arc<str>,
    pub columns: Vec<ColumnSchema>,
    /// Indexes into `columns` of the key (primary key or replica identity
    /// columns); empty when the table has none, giving a null key.
    pub key_columns: Vec<usize>,
    /// Struct `<topic>.Key`, `None` when `key_columns` is empty.
    pub key_schema: Option<ConnectSchema>,
    /// `(field, value)` appended to every key of a routed table
    /// (`--topic-route`): the table's default topic, so keys stay unique.
    pub routed_key_field: Option<(String, String)>,
    /// Struct `<topic>.Value`: the row.
    pub row_schema: ConnectSchema,
    /// Struct `<topic>.Envelope`.
    pub envelope_schema: ConnectSchema,
}

/// A row's column values, in column order.
pub type Row = Vec<Value>;

/// Where and when a change happened: Debezium's `source` block.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceInfo {
    /// Commit time, microseconds since the Unix epoch.
    pub commit_time_micros: i64,
    pub xid: u32,
    /// LSN of the change itself.
    pub lsn: Lsn,
    /// Commit LSN of the previous transaction, if known (`sequence[0]`).
    pub last_commit_lsn: Option<Lsn>,
    /// `source.snapshot`: `"false"` for streamed changes, else the snapshot
    /// marker (`first`, `true`, `last_in_data_collection`, `last`, ...).
    pub snapshot: &'static str,
}

/// A `pg_logical_emit_message` message, emitted on `<prefix>.message`.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageEvent {
    pub transactional: bool,
    pub prefix: String,
    pub content: Vec<u8>,
    /// For a non-transactional message `xid` is 0 and the commit time is the
    /// time the connector received it.
    pub source: SourceInfo,
}

/// One change to one row.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEvent {
    pub table: Arc<TableSchema>,
    pub op: Op,
    pub before: Option<Row>,
    pub after: Option<Row>,
    pub source: SourceInfo,
}

impl ChangeEvent {
    /// The same change under another op (for splitting a key change).
    pub fn clone_as(&self, op: Op) -> ChangeEvent {
        let (before, after) = match op {
            Op::Delete => (self.before.clone(), None),
            _ => (self.before.clone(), self.after.clone()),
        };
        ChangeEvent {
            table: Arc::clone(&self.table),
            op,
            before,
            after,
            source: self.source.clone(),
        }
    }

    /// The key values, from `after` (or `before` for deletes); `None` for a null key.
    pub fn key(&self) -> Option<Vec<(String, Value)>> {
        let row = self.after.as_ref().or(self.before.as_ref())?;
        if self.table.key_columns.is_empty() {
            return None;
        }
        let mut key: Vec<(String, Value)> = self
            .table
            .key_columns
            .iter()
            .map(|&i| {
                (
                    self.table.columns[i].name.clone(),
                    row.get(i).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        if let Some((field, value)) = &self.table.routed_key_field {
            key.push((field.clone(), Value::String(value.clone())));
        }
        Some(key)
    }
}

/// The wall clock in microseconds since the Unix epoch: when an event is
/// processed (`ts_ms` and friends), as opposed to when it was committed.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
