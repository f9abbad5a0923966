//! Debezium's envelope, as Kafka Connect schemas and one walk over an
//! event's fields.
//!
//! Field names, order, optionality and schema names follow the Debezium
//! PostgreSQL connector 3.x (`io.debezium.connector.postgresql.Source`,
//! `event.block`, `<topic>.Envelope` version 2), so that JSON consumers and
//! Avro readers cannot tell the difference.
//!
//! Invariant: the envelope's shape is written down here and nowhere else.
//! Each schema function has its walk beside it ([`walk_change`],
//! [`walk_message`], the `source` and `transaction` blocks), calling an
//! [`EnvelopeWriter`] once per field in schema order; the JSON and Avro
//! encoders and the Connect value ([`ValueTree`]) are writers the walk
//! drives. A field added to a schema is added to its walk in the same
//! change (a test checks that they agree); no writer names a field.

use std::convert::Infallible;
use std::sync::Arc;

use super::metadata::TransactionBlock;
use super::value::{ConnectSchema, ConnectType, Field, Value};
use super::{ChangeEvent, ColumnSchema, MessageEvent, SourceInfo};
use crate::lsn::Lsn;

/// Schema name of the `source` block.
pub const SOURCE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.Source";
/// `source.version`: which product and version wrote the record, as an
/// HTTP-style product token (`pgcdc-kafka/0.4.0`, RFC 9110 section
/// 10.1.5): the product before the slash, a semantic version after it.
/// Debezium writes its own version there (`3.6.1.Final`); a consumer that
/// needs to tell the two apart splits at the slash.
pub const SOURCE_VERSION: &str = concat!("pgcdc-kafka/", env!("CARGO_PKG_VERSION"));
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
    /// This run's id (a UUID v7, new at every start): Debezium's
    /// `__debezium.context.runId` header ([`super::context`]).
    pub run_id: Arc<str>,
}

/// When an envelope was made and where its event stands in its transaction:
/// the envelope's `ts_ms` / `ts_us` / `ts_ns` and `transaction` block.
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    /// When the connector processed the event, microseconds since the Unix epoch.
    pub now_micros: i64,
    /// The event's place in its transaction, when transaction metadata is on.
    pub transaction: Option<&'a TransactionBlock>,
}

/// The name of an envelope field, kept as the key the JSON writer writes
/// before the field's value (`,"name":`): one constant copy per field on the
/// hot path, where building it from the bare name takes three. Made by
/// `name!("field")`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldName(&'static str);

impl FieldName {
    /// The field's name.
    pub fn as_str(self) -> &'static str {
        self.0.get(2..self.0.len() - 2).unwrap_or_default()
    }

    /// `,"name":`: the separator and key of the field in a JSON object.
    pub fn json_key(self) -> &'static [u8] {
        self.0.as_bytes()
    }
}

/// The [`FieldName`] of a field called `$name` (an identifier's letters:
/// nothing to escape in any format).
macro_rules! name {
    ($name:literal) => {
        FieldName(concat!(",\"", $name, "\":"))
    };
}

/// What the envelope walk drives: one call per field, in the order of the
/// schema being walked. The JSON writer ([`crate::encode::json`]), the Avro
/// writer ([`crate::encode::avro`]) and [`ValueTree`] implement it, so the
/// envelope's shape is written down once, here.
///
/// The walk is generic over the writer (monomorphized, no `dyn`): the JSON
/// writer is the hot path of the default configuration.
pub trait EnvelopeWriter {
    /// Why the writer gave up (the Avro writer: a field does not fit the
    /// registered schema).
    type Error;

    /// A string field.
    fn string(&mut self, name: FieldName, value: &str) -> Result<(), Self::Error>;
    /// An `int64` field.
    fn long(&mut self, name: FieldName, value: i64) -> Result<(), Self::Error>;
    /// A `bytes` field.
    fn bytes(&mut self, name: FieldName, value: &[u8]) -> Result<(), Self::Error>;
    /// Null, in an optional field.
    fn null(&mut self, name: FieldName) -> Result<(), Self::Error>;
    /// A row field (`before`, `after`): the struct of `columns` with
    /// `values` in column order, or null.
    fn row(
        &mut self,
        name: FieldName,
        columns: &[ColumnSchema],
        values: Option<&[Value]>,
    ) -> Result<(), Self::Error>;
    /// A string field holding one of the envelope's own words (the
    /// connector's name and version, an op code, a snapshot marker):
    /// printable ASCII without quotes or backslashes. Provided as
    /// [`Self::string`]; a writer may skip escaping it.
    fn word(&mut self, name: FieldName, value: &'static str) -> Result<(), Self::Error> {
        self.string(name, value)
    }
    /// A string field holding the JSON array of two LSNs as decimal
    /// strings, the first `null` when unknown (`source.sequence`):
    /// `["<first>","<second>"]`. Provided as [`Self::string`] of that text;
    /// a writer may write it from the numbers instead.
    fn lsn_sequence(
        &mut self,
        name: FieldName,
        first: Option<Lsn>,
        second: Lsn,
    ) -> Result<(), Self::Error> {
        self.string(name, Sequence::of(first, second).as_str())
    }
    /// A struct field; `fields` writes its fields.
    fn structure<F>(&mut self, name: FieldName, fields: F) -> Result<(), Self::Error>
    where
        F: FnOnce(&mut Self) -> Result<(), Self::Error>;
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

/// Walks the fields of `event`'s envelope ([`envelope_schema`]) into `w`.
///
/// # Errors
/// Whatever `w` returns.
pub fn walk_change<W: EnvelopeWriter>(
    w: &mut W,
    event: &ChangeEvent,
    info: &ConnectorInfo,
    stamp: Stamp<'_>,
) -> Result<(), W::Error> {
    let table = &*event.table;
    w.row(name!("before"), &table.columns, event.before.as_deref())?;
    w.row(name!("after"), &table.columns, event.after.as_deref())?;
    let origin = Origin {
        schema: &table.schema,
        table: &table.table,
        xid: Some(event.source.xid),
    };
    w.structure(name!("source"), |w| {
        walk_source(w, &event.source, info, origin)
    })?;
    walk_transaction(w, stamp.transaction)?;
    w.word(name!("op"), event.op.code())?;
    let now = stamp.now_micros;
    w.long(name!("ts_ms"), now.div_euclid(1000))?;
    w.long(name!("ts_us"), now)?;
    w.long(name!("ts_ns"), now.saturating_mul(1000))
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
            field("origin", string().optional()),
            field("origin_lsn", int64().optional()),
        ],
    )
    .with_version(1)
}

/// What a `source` block says about where the change was made.
#[derive(Clone, Copy)]
struct Origin<'a> {
    schema: &'a str,
    table: &'a str,
    /// `txId`; null for a non-transactional message.
    xid: Option<u32>,
}

/// The fields of the `source` block ([`source_schema`]).
fn walk_source<W: EnvelopeWriter>(
    w: &mut W,
    s: &SourceInfo,
    info: &ConnectorInfo,
    origin: Origin<'_>,
) -> Result<(), W::Error> {
    let ts_us = s.commit_time_micros;
    w.word(name!("version"), SOURCE_VERSION)?;
    w.word(name!("connector"), "postgresql")?;
    w.string(name!("name"), &info.name)?;
    w.long(name!("ts_ms"), ts_us.div_euclid(1000))?;
    w.word(name!("snapshot"), s.snapshot.as_str())?;
    w.string(name!("db"), &info.db)?;
    w.lsn_sequence(name!("sequence"), s.last_commit_lsn, s.lsn)?;
    w.long(name!("ts_us"), ts_us)?;
    w.long(name!("ts_ns"), ts_us.saturating_mul(1000))?;
    w.string(name!("schema"), origin.schema)?;
    w.string(name!("table"), origin.table)?;
    match origin.xid {
        Some(xid) => w.long(name!("txId"), i64::from(xid))?,
        None => w.null(name!("txId"))?,
    }
    // Connect's int64 holds the LSN's bits, as Debezium writes it.
    w.long(name!("lsn"), s.lsn.as_u64() as i64)?;
    w.null(name!("xmin"))?;
    match &s.origin {
        Some(origin) => {
            w.string(name!("origin"), &origin.name)?;
            w.long(name!("origin_lsn"), origin.commit_lsn.as_u64() as i64)
        }
        None => {
            w.null(name!("origin"))?;
            w.null(name!("origin_lsn"))
        }
    }
}

/// The text of [`EnvelopeWriter::lsn_sequence`], held on the stack (the
/// walk allocates nothing of its own).
struct Sequence {
    /// `["<u64>","<u64>"]` is at most 47 bytes.
    text: [u8; 48],
    len: usize,
}

impl Sequence {
    fn of(first: Option<Lsn>, second: Lsn) -> Self {
        let mut sequence = Sequence {
            text: [0; 48],
            len: 0,
        };
        sequence.push(b"[");
        match first {
            Some(first) => sequence.push_lsn(first.as_u64()),
            None => sequence.push(b"null"),
        }
        sequence.push(b",");
        sequence.push_lsn(second.as_u64());
        sequence.push(b"]");
        sequence
    }

    fn push_lsn(&mut self, lsn: u64) {
        self.push(b"\"");
        self.push(itoa::Buffer::new().format(lsn).as_bytes());
        self.push(b"\"");
    }

    fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        self.text[self.len..end].copy_from_slice(bytes);
        self.len = end;
    }

    fn as_str(&self) -> &str {
        // Only ASCII was pushed.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
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

/// The `transaction` field ([`transaction_schema`]): the block, or null.
fn walk_transaction<W: EnvelopeWriter>(
    w: &mut W,
    block: Option<&TransactionBlock>,
) -> Result<(), W::Error> {
    let Some(block) = block else {
        return w.null(name!("transaction"));
    };
    w.structure(name!("transaction"), |w| {
        w.string(name!("id"), &block.id)?;
        w.long(name!("total_order"), block.total_order)?;
        w.long(name!("data_collection_order"), block.data_collection_order)
    })
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

/// Walks the fields of a logical decoding message's value
/// ([`message_value_schema`]) into `w`.
///
/// # Errors
/// Whatever `w` returns.
pub fn walk_message<W: EnvelopeWriter>(
    w: &mut W,
    message: &MessageEvent,
    info: &ConnectorInfo,
    stamp: Stamp<'_>,
) -> Result<(), W::Error> {
    w.word(name!("op"), "m")?;
    w.long(name!("ts_ms"), stamp.now_micros.div_euclid(1000))?;
    let origin = Origin {
        schema: "",
        table: "",
        xid: message.transactional.then_some(message.source.xid),
    };
    w.structure(name!("source"), |w| {
        walk_source(w, &message.source, info, origin)
    })?;
    walk_transaction(w, stamp.transaction)?;
    w.structure(name!("message"), |w| {
        w.string(name!("prefix"), &message.prefix)?;
        w.bytes(name!("content"), &message.content)
    })
}

/// The key of a message record: its prefix.
pub fn message_key(message: &MessageEvent) -> Value {
    Value::Struct(vec![(
        "prefix".into(),
        Value::String(message.prefix.clone()),
    )])
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

/// The key value of an event, `None` for a null key.
pub fn key_value(event: &ChangeEvent) -> Option<Value> {
    event.key().map(Value::Struct)
}

/// The [`EnvelopeWriter`] that builds the Connect value: what transforms
/// read envelope fields from, and what the Avro encoder reports a value
/// that does not fit on.
#[derive(Debug, Default)]
pub struct ValueTree {
    /// The fields of the struct being written.
    fields: Vec<(String, Value)>,
}

impl ValueTree {
    /// The struct whose fields `walk` writes.
    pub fn build(walk: impl FnOnce(&mut ValueTree) -> Result<(), Infallible>) -> Value {
        let mut tree = ValueTree::default();
        let Ok(()) = walk(&mut tree);
        Value::Struct(tree.fields)
    }

    fn push(&mut self, name: FieldName, value: Value) -> Result<(), Infallible> {
        self.fields.push((name.as_str().to_owned(), value));
        Ok(())
    }
}

impl EnvelopeWriter for ValueTree {
    type Error = Infallible;

    fn string(&mut self, name: FieldName, value: &str) -> Result<(), Infallible> {
        self.push(name, Value::String(value.to_owned()))
    }

    fn long(&mut self, name: FieldName, value: i64) -> Result<(), Infallible> {
        self.push(name, Value::Int64(value))
    }

    fn bytes(&mut self, name: FieldName, value: &[u8]) -> Result<(), Infallible> {
        self.push(name, Value::Bytes(value.to_vec()))
    }

    fn null(&mut self, name: FieldName) -> Result<(), Infallible> {
        self.push(name, Value::Null)
    }

    fn row(
        &mut self,
        name: FieldName,
        columns: &[ColumnSchema],
        values: Option<&[Value]>,
    ) -> Result<(), Infallible> {
        let row = values.map_or(Value::Null, |values| {
            Value::Struct(
                columns
                    .iter()
                    .zip(values)
                    .map(|(c, v)| (c.name.clone(), v.clone()))
                    .collect(),
            )
        });
        self.push(name, row)
    }

    fn structure<F>(&mut self, name: FieldName, fields: F) -> Result<(), Infallible>
    where
        F: FnOnce(&mut Self) -> Result<(), Infallible>,
    {
        let outer = std::mem::take(&mut self.fields);
        let Ok(()) = fields(self);
        let inner = std::mem::replace(&mut self.fields, outer);
        self.push(name, Value::Struct(inner))
    }
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
    let stamp = Stamp {
        now_micros,
        transaction,
    };
    ValueTree::build(|w| walk_change(w, event, info, stamp))
}

/// The value of a message record, processed at `now_micros`;
/// `transaction` as in [`envelope_value`].
pub fn message_value(
    message: &MessageEvent,
    info: &ConnectorInfo,
    transaction: Option<&TransactionBlock>,
    now_micros: i64,
) -> Value {
    let stamp = Stamp {
        now_micros,
        transaction,
    };
    ValueTree::build(|w| walk_message(w, message, info, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Op, SnapshotMarker, TableSchema};

    /// Whether `value`'s fields are `schema`'s, by name and in order, down
    /// through every struct that is not null.
    fn follows(schema: &ConnectSchema, value: &Value) -> Result<(), String> {
        let Value::Struct(fields) = value else {
            return Ok(());
        };
        let names = |f: &mut dyn Iterator<Item = &str>| f.collect::<Vec<_>>().join(",");
        let want = names(&mut schema.fields.iter().map(|f| f.name.as_str()));
        let got = names(&mut fields.iter().map(|(n, _)| n.as_str()));
        if want != got {
            return Err(format!("{:?}: schema {want}, walk {got}", schema.name));
        }
        for (field, (_, value)) in schema.fields.iter().zip(fields) {
            follows(&field.schema, value)?;
        }
        Ok(())
    }

    fn info() -> ConnectorInfo {
        ConnectorInfo {
            name: "app".into(),
            db: "shop".into(),
            run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
        }
    }

    fn source(last_commit_lsn: Option<Lsn>) -> SourceInfo {
        SourceInfo {
            origin: None,
            commit_time_micros: 1_700_000_000_000_001,
            xid: 7,
            lsn: Lsn::new(u64::MAX),
            last_commit_lsn,
            snapshot: SnapshotMarker::False,
        }
    }

    #[test]
    fn the_walk_follows_the_schemas() {
        let columns = vec![ColumnSchema {
            name: "id".into(),
            type_oid: 20,
            type_modifier: -1,
            schema: ConnectSchema::primitive(ConnectType::Int64),
        }];
        let row = row_schema("app.public.t", &columns);
        let table = Arc::new(TableSchema {
            relation_id: 1,
            schema: "public".into(),
            table: "t".into(),
            qualified_name: "public.t".into(),
            topic: "app.public.t".into(),
            key_schema: None,
            envelope_schema: envelope_schema("app.public.t", &row),
            row_schema: row,
            key_columns: vec![],
            routed_key_field: None,
            columns,
        });
        let block = TransactionBlock {
            id: "7:9".into(),
            total_order: 1,
            data_collection_order: 1,
        };
        for transaction in [None, Some(&block)] {
            let event = ChangeEvent {
                table: Arc::clone(&table),
                op: Op::Update,
                before: Some(vec![Value::Int64(1)]),
                after: Some(vec![Value::Int64(2)]),
                source: source(None),
                unmapped_key: Default::default(),
            };
            let value = envelope_value(&event, &info(), transaction, 5);
            assert_eq!(follows(&table.envelope_schema, &value), Ok(()));
            let message = MessageEvent {
                transactional: transaction.is_some(),
                prefix: "p".into(),
                content: vec![1],
                source: source(Some(Lsn::new(3))),
            };
            let value = message_value(&message, &info(), transaction, 5);
            assert_eq!(follows(&message_value_schema(), &value), Ok(()));
        }
    }

    #[test]
    fn the_sequence_holds_the_longest_lsns() {
        let text = |last| Sequence::of(last, Lsn::new(u64::MAX)).as_str().to_owned();
        assert_eq!(
            text(Some(Lsn::new(u64::MAX))),
            "[\"18446744073709551615\",\"18446744073709551615\"]"
        );
        assert_eq!(text(None), "[null,\"18446744073709551615\"]");
    }
}
