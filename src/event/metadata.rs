//! Transaction metadata and heartbeat records, as Debezium writes them.
//!
//! With `--provide-transaction-metadata`, every transaction the stream
//! delivers gets a `BEGIN` record before its first event and an `END` record
//! after its last one on `<prefix>.transaction`
//! (`io.debezium.connector.common.TransactionMetadataKey` / `...Value`), and
//! every event of it carries the envelope's `transaction` block
//! (`event.block`: `id`, `total_order`, `data_collection_order`). Heartbeats
//! are `io.debezium.connector.common.ServerNameKey` / `...Heartbeat` records
//! on `__debezium-heartbeat.<prefix>`. Names, field order, optionality and
//! versions follow Debezium 3.x's `SchemaFactory`.
//!
//! One deliberate difference: Debezium's PostgreSQL id is `<txId>:<lsn>`
//! with the LSN *of the record being written*, so `BEGIN`, each event and
//! `END` of one transaction carry different ids and a consumer cannot match
//! them by id. Ours is `<txId>:<commit LSN>` (pgoutput Begin's `final_lsn`),
//! the same on every record of the transaction and unique even after the
//! 32-bit xid wraps around; the shape (`xid:decimal-lsn`) is unchanged, so
//! consumers that split the id at `:` read the same xid.
//!
//! A transaction's `data_collection` is `<schema>.<table>`; a transactional
//! logical decoding message counts under [`MESSAGE_DATA_COLLECTION`] (where
//! Debezium writes a Java object's identity hash instead).

use std::collections::HashMap;
use std::sync::Arc;

use super::value::{ConnectSchema, ConnectType, Field, Value};
use crate::lsn::Lsn;

/// Schema name of transaction metadata keys.
pub const TRANSACTION_KEY_SCHEMA_NAME: &str = "io.debezium.connector.common.TransactionMetadataKey";
/// Schema name of transaction metadata values.
pub const TRANSACTION_VALUE_SCHEMA_NAME: &str =
    "io.debezium.connector.common.TransactionMetadataValue";
/// Schema name of one entry of `data_collections`.
pub const DATA_COLLECTION_SCHEMA_NAME: &str = "event.collection";
/// Schema name of heartbeat keys.
pub const HEARTBEAT_KEY_SCHEMA_NAME: &str = "io.debezium.connector.common.ServerNameKey";
/// Schema name of heartbeat values.
pub const HEARTBEAT_VALUE_SCHEMA_NAME: &str = "io.debezium.connector.common.Heartbeat";
/// The `data_collection` that transactional logical decoding messages count
/// under (Debezium's `LogicalDecodingMessageId` identifier).
pub const MESSAGE_DATA_COLLECTION: &str = "LOGICAL_DECODING_MESSAGE";

fn field(name: &str, schema: ConnectSchema) -> Field {
    Field {
        name: name.to_owned(),
        schema,
    }
}

fn string() -> ConnectSchema {
    ConnectSchema::primitive(ConnectType::String)
}

fn int64() -> ConnectSchema {
    ConnectSchema::primitive(ConnectType::Int64)
}

/// The key schema of transaction metadata records.
pub fn transaction_key_schema() -> ConnectSchema {
    ConnectSchema::structure(TRANSACTION_KEY_SCHEMA_NAME, vec![field("id", string())])
        .with_version(1)
}

/// One `data_collections` entry: a table and its event count.
fn data_collection_schema() -> ConnectSchema {
    ConnectSchema::structure(
        DATA_COLLECTION_SCHEMA_NAME,
        vec![
            field("data_collection", string()),
            field("event_count", int64()),
        ],
    )
    .with_version(1)
    .optional()
}

/// The value schema of transaction metadata records.
pub fn transaction_value_schema() -> ConnectSchema {
    let mut collections = ConnectSchema::primitive(ConnectType::Array).optional();
    collections.items = Some(Box::new(data_collection_schema()));
    ConnectSchema::structure(
        TRANSACTION_VALUE_SCHEMA_NAME,
        vec![
            field("status", string()),
            field("id", string()),
            field("event_count", int64().optional()),
            field("data_collections", collections),
            field("ts_ms", int64()),
        ],
    )
    .with_version(1)
}

/// The key schema of heartbeat records.
pub fn heartbeat_key_schema() -> ConnectSchema {
    ConnectSchema::structure(
        HEARTBEAT_KEY_SCHEMA_NAME,
        vec![field("serverName", string())],
    )
    .with_version(1)
}

/// The value schema of heartbeat records.
pub fn heartbeat_value_schema() -> ConnectSchema {
    ConnectSchema::structure(HEARTBEAT_VALUE_SCHEMA_NAME, vec![field("ts_ms", int64())])
        .with_version(1)
}

/// An event's place in its transaction: the envelope's `transaction` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionBlock {
    pub id: Arc<str>,
    /// 1-based position among all events of the transaction.
    pub total_order: i64,
    /// 1-based position among the events of the same table.
    pub data_collection_order: i64,
}

/// Which boundary a transaction metadata record marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    Begin,
    End,
}

impl TransactionStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            TransactionStatus::Begin => "BEGIN",
            TransactionStatus::End => "END",
        }
    }
}

/// A `BEGIN` or `END` record of `<prefix>.transaction`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionBoundary {
    pub status: TransactionStatus,
    pub id: Arc<str>,
    /// The transaction's commit time, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// `END` only: how many events the transaction produced, and how many
    /// per data collection (in the order each first appeared).
    pub counts: Option<(i64, Vec<(String, i64)>)>,
}

impl TransactionBoundary {
    /// The record key `{id}`.
    pub fn key(&self) -> Value {
        Value::Struct(vec![("id".into(), Value::String(self.id.to_string()))])
    }

    /// The record value `{status, id, event_count, data_collections, ts_ms}`.
    pub fn value(&self) -> Value {
        let (event_count, collections) = match &self.counts {
            None => (Value::Null, Value::Null),
            Some((total, per_collection)) => (
                Value::Int64(*total),
                Value::Array(
                    per_collection
                        .iter()
                        .map(|(name, count)| {
                            Value::Struct(vec![
                                ("data_collection".into(), Value::String(name.clone())),
                                ("event_count".into(), Value::Int64(*count)),
                            ])
                        })
                        .collect(),
                ),
            ),
        };
        Value::Struct(vec![
            ("status".into(), Value::String(self.status.as_str().into())),
            ("id".into(), Value::String(self.id.to_string())),
            ("event_count".into(), event_count),
            ("data_collections".into(), collections),
            ("ts_ms".into(), Value::Int64(self.ts_ms)),
        ])
    }
}

/// The counters of the transaction being read: hands out each event's
/// block and builds the boundary records.
#[derive(Debug)]
pub struct OpenTransaction {
    id: Arc<str>,
    ts_ms: i64,
    total: i64,
    /// Per data collection, in first-seen order, with an index by name.
    per_collection: Vec<(String, i64)>,
    index: HashMap<String, usize>,
}

impl OpenTransaction {
    /// Transaction `xid` whose commit record is at `commit_lsn`, committed
    /// at `commit_time_micros` (Unix epoch).
    pub fn new(xid: u32, commit_lsn: Lsn, commit_time_micros: i64) -> Self {
        OpenTransaction {
            id: format!("{xid}:{}", commit_lsn.as_u64()).into(),
            ts_ms: commit_time_micros.div_euclid(1000),
            total: 0,
            per_collection: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The transaction's id, `<xid>:<commit lsn>`.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// The `BEGIN` record.
    pub fn begin(&self) -> TransactionBoundary {
        TransactionBoundary {
            status: TransactionStatus::Begin,
            id: Arc::clone(&self.id),
            ts_ms: self.ts_ms,
            counts: None,
        }
    }

    /// Counts one more event of `data_collection` and returns its block.
    pub fn event(&mut self, data_collection: &str) -> TransactionBlock {
        self.total += 1;
        let order = match self.index.get(data_collection) {
            Some(&i) => {
                self.per_collection[i].1 += 1;
                self.per_collection[i].1
            }
            None => {
                self.index
                    .insert(data_collection.to_owned(), self.per_collection.len());
                self.per_collection.push((data_collection.to_owned(), 1));
                1
            }
        };
        TransactionBlock {
            id: Arc::clone(&self.id),
            total_order: self.total,
            data_collection_order: order,
        }
    }

    /// The `END` record, with the counts.
    pub fn end(self) -> TransactionBoundary {
        TransactionBoundary {
            status: TransactionStatus::End,
            id: self.id,
            ts_ms: self.ts_ms,
            counts: Some((self.total, self.per_collection)),
        }
    }
}

/// A heartbeat record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// The topic prefix (Debezium's `topic.prefix`, the key's `serverName`).
    pub server_name: Arc<str>,
    /// When it was sent, milliseconds since the Unix epoch.
    pub ts_ms: i64,
}

impl Heartbeat {
    /// The record key `{serverName}`.
    pub fn key(&self) -> Value {
        Value::Struct(vec![(
            "serverName".into(),
            Value::String(self.server_name.to_string()),
        )])
    }

    /// The record value `{ts_ms}`.
    pub fn value(&self) -> Value {
        Value::Struct(vec![("ts_ms".into(), Value::Int64(self.ts_ms))])
    }
}

/// A record whose schemas do not depend on any table: a transaction
/// boundary on the transaction topic, or a heartbeat.
#[derive(Debug, Clone, Copy)]
pub enum MetadataRecord<'a> {
    Transaction(&'a TransactionBoundary),
    Heartbeat(&'a Heartbeat),
}

/// The kinds of [`MetadataRecord`], each with its own pair of schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataKind {
    Transaction,
    Heartbeat,
}

impl MetadataKind {
    /// What the records carry, in an operator's words.
    pub const fn describe(self) -> &'static str {
        match self {
            MetadataKind::Transaction => "transaction metadata",
            MetadataKind::Heartbeat => "heartbeats",
        }
    }

    /// The key and value schemas of this kind.
    pub fn schemas(self) -> (ConnectSchema, ConnectSchema) {
        match self {
            MetadataKind::Transaction => (transaction_key_schema(), transaction_value_schema()),
            MetadataKind::Heartbeat => (heartbeat_key_schema(), heartbeat_value_schema()),
        }
    }
}

impl MetadataRecord<'_> {
    pub const fn kind(&self) -> MetadataKind {
        match self {
            MetadataRecord::Transaction(_) => MetadataKind::Transaction,
            MetadataRecord::Heartbeat(_) => MetadataKind::Heartbeat,
        }
    }

    /// The key as a Connect value.
    pub fn key(&self) -> Value {
        match self {
            MetadataRecord::Transaction(t) => t.key(),
            MetadataRecord::Heartbeat(h) => h.key(),
        }
    }

    /// The value as a Connect value.
    pub fn value(&self) -> Value {
        match self {
            MetadataRecord::Transaction(t) => t.value(),
            MetadataRecord::Heartbeat(h) => h.value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_transaction_and_per_table() {
        let mut t = OpenTransaction::new(571, Lsn::new(53_195_829), 1_486_500_577_125_123);
        assert_eq!(t.begin().value(), {
            Value::Struct(vec![
                ("status".into(), Value::String("BEGIN".into())),
                ("id".into(), Value::String("571:53195829".into())),
                ("event_count".into(), Value::Null),
                ("data_collections".into(), Value::Null),
                ("ts_ms".into(), Value::Int64(1_486_500_577_125)),
            ])
        });
        let orders: Vec<(i64, i64)> = ["s1.a", "s2.a", "s1.a"]
            .iter()
            .map(|c| {
                let b = t.event(c);
                assert_eq!(&*b.id, "571:53195829");
                (b.total_order, b.data_collection_order)
            })
            .collect();
        assert_eq!(orders, [(1, 1), (2, 1), (3, 2)]);
        let end = t.end();
        assert_eq!(end.status, TransactionStatus::End);
        assert_eq!(
            end.counts,
            Some((3, vec![("s1.a".to_owned(), 2), ("s2.a".to_owned(), 1)]))
        );
        assert_eq!(
            end.key(),
            Value::Struct(vec![("id".into(), Value::String("571:53195829".into()))])
        );
    }

    #[test]
    fn an_empty_transaction_ends_with_zero_events() {
        let end = OpenTransaction::new(1, Lsn::new(2), 0).end();
        let Value::Struct(fields) = end.value() else {
            panic!("a struct");
        };
        assert_eq!(fields[2], ("event_count".into(), Value::Int64(0)));
        assert_eq!(fields[3], ("data_collections".into(), Value::Array(vec![])));
    }
}
