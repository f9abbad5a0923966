//! Debezium's envelope, as Kafka Connect schemas and values.
//!
//! Field names, order, optionality and schema names follow the Debezium
//! PostgreSQL connector 3.x (`io.debezium.connector.postgresql.Source`,
//! `event.block`, `<topic>.Envelope` version 2), so that JSON consumers and
//! Avro readers cannot tell the difference.

use std::sync::Arc;

use super::metadata::{self, TransactionBlock};
use super::value::{ConnectSchema, ConnectType, Field, Value};
use super::{ChangeEvent, ColumnSchema, MessageEvent, SourceInfo};

/// Schema name of the `source` block.
pub const SOURCE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.Source";
/// Allowed values of `source.snapshot`, as Debezium 3.x declares them.
pub const SNAPSHOT_VALUES: &str =
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental";

/// Identity of this connector instance, repeated in every `source` block.
#[derive(Debug, Clone)]
pub struct ConnectorInfo {
    /// The topic prefix (`source.name`).
    pub name: Arc<str>,
    /// The database name (`source.db`).
    pub db: Arc<str>,
}

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

/// The `source` struct's schema.
pub fn source_schema() -> ConnectSchema {
    let mut snapshot = ConnectSchema::named(ConnectType::String, "io.debezium.data.Enum")
        .with_version(1)
        .with_parameter("allowed", SNAPSHOT_VALUES)
        .optional();
    snapshot.default = Some(Value::String("false".to_owned()));
    ConnectSchema::structure(
        SOURCE_SCHEMA_NAME,
        vec![
            field("version", string()),
            field("connector", string()),
            field("name", string()),
            field("ts_ms", int64()),
            field("snapshot", snapshot),
            field("db", string()),
            field("sequence", string().optional()),
            field("ts_us", int64().optional()),
            field("ts_ns", int64().optional()),
            field("schema", string()),
            field("table", string()),
            field("txId", int64().optional()),
            field("lsn", int64().optional()),
            field("xmin", int64().optional()),
        ],
    )
}

/// The `transaction` struct's schema (`event.block`).
pub fn transaction_schema() -> ConnectSchema {
    ConnectSchema::structure(
        "event.block",
        vec![
            field("id", string()),
            field("total_order", int64()),
            field("data_collection_order", int64()),
        ],
    )
    .with_version(1)
    .optional()
}

/// The row struct `<topic>.Value` of the given columns.
pub fn row_schema(topic: &str, columns: &[ColumnSchema]) -> ConnectSchema {
    ConnectSchema::structure(
        &format!("{topic}.Value"),
        columns
            .iter()
            .map(|c| field(&c.name, c.schema.clone()))
            .collect(),
    )
}

/// The key struct `<topic>.Key` of the given key columns.
pub fn key_schema(topic: &str, columns: &[&ColumnSchema]) -> ConnectSchema {
    ConnectSchema::structure(
        &format!("{topic}.Key"),
        columns
            .iter()
            .map(|c| {
                let mut schema = c.schema.clone();
                schema.optional = false;
                field(&c.name, schema)
            })
            .collect(),
    )
}

/// The envelope struct `<topic>.Envelope` around a row schema.
pub fn envelope_schema(topic: &str, row: &ConnectSchema) -> ConnectSchema {
    ConnectSchema::structure(
        &format!("{topic}.Envelope"),
        vec![
            field("before", row.clone().optional()),
            field("after", row.clone().optional()),
            field("source", source_schema()),
            field("transaction", transaction_schema()),
            field("op", string()),
            field("ts_ms", int64().optional()),
            field("ts_us", int64().optional()),
            field("ts_ns", int64().optional()),
        ],
    )
    .with_version(2)
}

fn row_value(event: &ChangeEvent, row: &Option<Vec<Value>>) -> Value {
    match row {
        None => Value::Null,
        Some(values) => Value::Struct(
            event
                .table
                .columns
                .iter()
                .zip(values)
                .map(|(c, v)| (c.name.clone(), v.clone()))
                .collect(),
        ),
    }
}

/// The `source` block of an event.
pub fn source_value(event: &ChangeEvent, info: &ConnectorInfo) -> Value {
    source_block(
        &event.source,
        info,
        &event.table.schema,
        &event.table.table,
        Some(event.source.xid),
    )
}

fn source_block(
    s: &SourceInfo,
    info: &ConnectorInfo,
    schema: &str,
    table: &str,
    xid: Option<u32>,
) -> Value {
    let lsn = s.lsn.as_u64();
    let sequence = format!(
        "[{},\"{lsn}\"]",
        s.last_commit_lsn
            .map_or_else(|| "null".to_owned(), |l| format!("\"{}\"", l.as_u64()))
    );
    let ts_us = s.commit_time_micros;
    Value::Struct(vec![
        (
            "version".into(),
            Value::String(env!("CARGO_PKG_VERSION").into()),
        ),
        ("connector".into(), Value::String("postgresql".into())),
        ("name".into(), Value::String(info.name.to_string())),
        ("ts_ms".into(), Value::Int64(ts_us.div_euclid(1000))),
        ("snapshot".into(), Value::String(s.snapshot.as_str().into())),
        ("db".into(), Value::String(info.db.to_string())),
        ("sequence".into(), Value::String(sequence)),
        ("ts_us".into(), Value::Int64(ts_us)),
        ("ts_ns".into(), Value::Int64(ts_us.saturating_mul(1000))),
        ("schema".into(), Value::String(schema.to_owned())),
        ("table".into(), Value::String(table.to_owned())),
        (
            "txId".into(),
            xid.map_or(Value::Null, |x| Value::Int64(i64::from(x))),
        ),
        ("lsn".into(), Value::Int64(lsn as i64)),
        ("xmin".into(), Value::Null),
    ])
}

/// The envelope value of an event, processed at `now_micros` (Unix epoch);
/// `transaction` is its place in its transaction when transaction metadata
/// is on.
pub fn envelope_value(
    event: &ChangeEvent,
    info: &ConnectorInfo,
    transaction: Option<&TransactionBlock>,
    now_micros: i64,
) -> Value {
    Value::Struct(vec![
        ("before".into(), row_value(event, &event.before)),
        ("after".into(), row_value(event, &event.after)),
        ("source".into(), source_value(event, info)),
        (
            "transaction".into(),
            metadata::transaction_value(transaction),
        ),
        ("op".into(), Value::String(event.op.code().into())),
        ("ts_ms".into(), Value::Int64(now_micros.div_euclid(1000))),
        ("ts_us".into(), Value::Int64(now_micros)),
        (
            "ts_ns".into(),
            Value::Int64(now_micros.saturating_mul(1000)),
        ),
    ])
}

/// The key value of an event, `None` for a null key.
pub fn key_value(event: &ChangeEvent) -> Option<Value> {
    event.key().map(Value::Struct)
}

/// Schema name of a logical decoding message's value.
pub const MESSAGE_VALUE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.MessageValue";

/// The key schema of `<prefix>.message` records.
pub fn message_key_schema() -> ConnectSchema {
    ConnectSchema::structure(
        "io.debezium.connector.postgresql.MessageKey",
        vec![field("prefix", string().optional())],
    )
    .with_version(1)
}

/// The value schema of `<prefix>.message` records.
pub fn message_value_schema() -> ConnectSchema {
    let block = ConnectSchema::structure(
        "io.debezium.connector.postgresql.Message",
        vec![
            field("prefix", string().optional()),
            field(
                "content",
                ConnectSchema::primitive(ConnectType::Bytes).optional(),
            ),
        ],
    )
    .with_version(1);
    ConnectSchema::structure(
        MESSAGE_VALUE_SCHEMA_NAME,
        vec![
            field("op", string()),
            field("ts_ms", int64().optional()),
            field("source", source_schema()),
            field("transaction", transaction_schema()),
            field("message", block),
        ],
    )
    .with_version(1)
}

/// The key of a message record: its prefix.
pub fn message_key(message: &MessageEvent) -> Value {
    Value::Struct(vec![(
        "prefix".into(),
        Value::String(message.prefix.clone()),
    )])
}

/// The value of a message record, processed at `now_micros`;
/// `transaction` as in [`envelope_value`].
pub fn message_value(
    message: &MessageEvent,
    info: &ConnectorInfo,
    transaction: Option<&TransactionBlock>,
    now_micros: i64,
) -> Value {
    let xid = message.transactional.then_some(message.source.xid);
    Value::Struct(vec![
        ("op".into(), Value::String("m".into())),
        ("ts_ms".into(), Value::Int64(now_micros.div_euclid(1000))),
        (
            "source".into(),
            source_block(&message.source, info, "", "", xid),
        ),
        (
            "transaction".into(),
            metadata::transaction_value(transaction),
        ),
        (
            "message".into(),
            Value::Struct(vec![
                ("prefix".into(), Value::String(message.prefix.clone())),
                ("content".into(), Value::Bytes(message.content.clone())),
            ]),
        ),
    ])
}
