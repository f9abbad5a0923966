//! The change event model: what one row change is, independent of how it is
//! encoded, and the Debezium envelope built from it.
//!
//! A [`TableSchema`] is derived once per pgoutput Relation message and shared
//! by every event of that table until the next Relation message replaces it.
//! A [`ChangeEvent`] is one row change in that table's terms. The envelope
//! module holds the Kafka Connect structs Debezium emits and the one walk
//! that writes them; [`record::Record`] is the Connect-shaped record that
//! Debezium's mapping or a transform makes of an event, and that the encode
//! step turns into bytes.

pub mod context;
pub mod envelope;
pub mod java_float;
pub mod metadata;
pub mod options;
pub mod record;
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
    /// `source.snapshot`: [`SnapshotMarker::False`] for streamed changes.
    pub snapshot: SnapshotMarker,
    /// `source.origin` / `source.origin_lsn`: the replication origin of a
    /// transaction that a subscriber applied (pgoutput's Origin message);
    /// `None` for local changes.
    pub origin: Option<SourceOrigin>,
}

/// The replication origin a transaction came from: its name and the commit
/// LSN on the origin server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOrigin {
    pub name: Arc<str>,
    pub commit_lsn: Lsn,
}

/// `source.snapshot`: whether a record was read by a snapshot and where in
/// it, as Debezium 3.x writes it (the `io.debezium.data.Enum` declared in
/// [`envelope::SNAPSHOT_VALUES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotMarker {
    /// A streamed change.
    False,
    /// A row of the initial snapshot that is neither first nor last.
    True,
    /// The initial snapshot's first row.
    First,
    /// The first row of a table, not the snapshot's first.
    FirstInDataCollection,
    /// The last row of a table, not the snapshot's last.
    LastInDataCollection,
    /// The initial snapshot's last row.
    Last,
    /// A row read by an incremental snapshot.
    Incremental,
}

/// Where a row read by the initial snapshot stands, which decides its
/// [`SnapshotMarker`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotPosition {
    /// The snapshot's first row.
    pub first: bool,
    /// The snapshot's last row.
    pub last: bool,
    /// The first row of its table.
    pub first_in_table: bool,
    /// The last row of its table.
    pub last_in_table: bool,
}

impl SnapshotMarker {
    /// Every marker, in the order Debezium declares them.
    pub const ALL: [SnapshotMarker; 7] = [
        SnapshotMarker::True,
        SnapshotMarker::First,
        SnapshotMarker::FirstInDataCollection,
        SnapshotMarker::LastInDataCollection,
        SnapshotMarker::Last,
        SnapshotMarker::False,
        SnapshotMarker::Incremental,
    ];

    /// The marker of an initial-snapshot row at `position`: the snapshot's
    /// first and last rows are `first` and `last`; otherwise a table's last
    /// row is `last_in_data_collection`, its first `first_in_data_collection`
    /// (so a one-row table's row is `last_in_data_collection`), any other
    /// `true`.
    pub const fn of_row(position: SnapshotPosition) -> Self {
        if position.first {
            SnapshotMarker::First
        } else if position.last {
            SnapshotMarker::Last
        } else if position.last_in_table {
            SnapshotMarker::LastInDataCollection
        } else if position.first_in_table {
            SnapshotMarker::FirstInDataCollection
        } else {
            SnapshotMarker::True
        }
    }

    /// The value of `source.snapshot`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SnapshotMarker::False => "false",
            SnapshotMarker::True => "true",
            SnapshotMarker::First => "first",
            SnapshotMarker::FirstInDataCollection => "first_in_data_collection",
            SnapshotMarker::LastInDataCollection => "last_in_data_collection",
            SnapshotMarker::Last => "last",
            SnapshotMarker::Incremental => "incremental",
        }
    }
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
    /// The key columns' own values where a column mapper (masking,
    /// hashing, truncation) changed them in the rows: Debezium's keys are
    /// never mapped. Empty without mappers on key columns.
    pub unmapped_key: UnmappedKey,
}

/// The key values of each row image before the column mappers, in key
/// column order; `None` where the row's own values are the key's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnmappedKey {
    pub before: Option<Vec<Value>>,
    pub after: Option<Vec<Value>>,
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
            unmapped_key: self.unmapped_key.clone(),
        }
    }

    /// The key values, from `after` (or `before` for deletes); `None` for a null key.
    pub fn key(&self) -> Option<Vec<(String, Value)>> {
        let mut key: Vec<(String, Value)> = self
            .key_fields()?
            .map(|(name, value)| (name.to_owned(), value.clone()))
            .collect();
        if let Some((field, value)) = &self.table.routed_key_field {
            key.push((field.clone(), Value::String(value.clone())));
        }
        Some(key)
    }

    /// The key's columns and their values, from `after` (or `before` for
    /// deletes), borrowed, in the key's order; `None` for a null key. The
    /// routed key field (`table.routed_key_field`), which follows them in
    /// the key, is not among them.
    pub fn key_fields(&self) -> Option<impl Iterator<Item = (&str, &Value)>> {
        let (row, unmapped) = match (&self.after, &self.before) {
            (Some(after), _) => (after, &self.unmapped_key.after),
            (None, Some(before)) => (before, &self.unmapped_key.before),
            (None, None) => return None,
        };
        (!self.table.key_columns.is_empty()).then(|| self.key_fields_of(row, unmapped.as_deref()))
    }

    /// Whether the key of `before` differs from the key of `after` (an
    /// update that moves its row to another key); `false` unless the
    /// change has both and its table a key.
    pub fn key_changed(&self) -> bool {
        match (&self.before, &self.after) {
            (Some(before), Some(after)) if !self.table.key_columns.is_empty() => !self
                .key_fields_of(before, self.unmapped_key.before.as_deref())
                .eq(self.key_fields_of(after, self.unmapped_key.after.as_deref())),
            _ => false,
        }
    }

    /// The key's columns and their values in `row`, or in `unmapped` (the
    /// key's own values before the column mappers) when there are those.
    fn key_fields_of<'a>(
        &'a self,
        row: &'a [Value],
        unmapped: Option<&'a [Value]>,
    ) -> impl Iterator<Item = (&'a str, &'a Value)> {
        static NULL: Value = Value::Null;
        let table = &*self.table;
        table.key_columns.iter().enumerate().map(move |(k, &i)| {
            let value = match unmapped {
                Some(values) => values.get(k),
                None => row.get(i),
            };
            (table.columns[i].name.as_str(), value.unwrap_or(&NULL))
        })
    }
}

/// The wall clock in microseconds since the Unix epoch: when an event is
/// processed (`ts_ms` and friends), as opposed to when it was committed.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_the_values_the_schema_allows() {
        let all: Vec<&str> = SnapshotMarker::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(all.join(","), envelope::SNAPSHOT_VALUES);
    }

    #[test]
    fn first_and_last_of_the_snapshot_win_over_the_table_ones() {
        let at = |first, last, first_in_table, last_in_table| {
            SnapshotMarker::of_row(SnapshotPosition {
                first,
                last,
                first_in_table,
                last_in_table,
            })
        };
        assert_eq!(at(true, false, true, true), SnapshotMarker::First);
        assert_eq!(at(false, true, false, true), SnapshotMarker::Last);
        assert_eq!(
            at(false, false, true, true),
            SnapshotMarker::LastInDataCollection
        );
        assert_eq!(
            at(false, false, true, false),
            SnapshotMarker::FirstInDataCollection
        );
        assert_eq!(at(false, false, false, false), SnapshotMarker::True);
    }
}
