//! ExtractNewRecordState ("unwrap"): the record's value is the row itself
//! rather than Debezium's envelope.
//!
//! As Debezium 3.x's SMT does it (`ExtractNewRecordState`,
//! `extractnewstate/DefaultDeleteHandlingStrategy`), applied to the events
//! Debezium would have written:
//! - creates, updates and snapshot reads (`op: "r"`) become their `after`
//!   row; the key stays the table's `<topic>.Key` struct;
//! - the value schema is the table's `<topic>.Value` struct (required, as
//!   the differential test shows Debezium writes it), then, in the rewrite
//!   modes, `__deleted` (an optional string, `"true"` or
//!   `"false"`), then the `--unwrap-add-fields` fields (each optional, typed
//!   as in the envelope: `__op` string, `__lsn` int64, ...): the strategy
//!   adds `__deleted` before the SMT adds the fields;
//! - deletes follow `--unwrap-delete-handling`: `drop` writes nothing,
//!   `tombstone` writes the delete's `after`: a null value under the
//!   `<topic>.Value` schema (no added fields), which the converters write as
//!   JsonConverter and AvroConverter do (`{"schema":…,"payload":null}`,
//!   `null`, or a Kafka tombstone in Avro), and Debezium's own tombstone is
//!   dropped; `rewrite` writes the `before` row with `__deleted: "true"` and
//!   no tombstone, `rewrite-with-tombstone` the same followed by Debezium's
//!   tombstone (when `--tombstones-on-delete`);
//! - truncates are dropped;
//! - `--unwrap-add-headers` adds headers with the same naming; a kept
//!   tombstone carries only `__op` (`d`), as the SMT adds to tombstones.

use std::collections::HashMap;
use std::sync::Arc;

use super::options::TransformOptions;
use super::{intern, struct_field, Block, DeleteHandling, MetadataField};
use crate::event::envelope::{self, ConnectorInfo, Stamp};
use crate::event::record::{Data, Header, Record, RecordKey, RecordValue};
use crate::event::value::{ConnectSchema, ConnectType, Field, Value};
use crate::event::{ChangeEvent, Op, TableSchema};

/// The field the rewrite modes add.
pub const DELETED_FIELD: &str = "__deleted";

/// The unwrap transform of one pipeline attempt.
pub struct Unwrap {
    delete: DeleteHandling,
    fields: Vec<MetadataField>,
    headers: Vec<(MetadataField, &'static str)>,
    info: ConnectorInfo,
    schemas: HashMap<u32, UnwrapSchema>,
}

/// The value schema of one version of a table.
struct UnwrapSchema {
    table: Arc<TableSchema>,
    /// The envelope's `after` field schema: the optional `<topic>.Value`.
    after: Arc<ConnectSchema>,
    value: Arc<ConnectSchema>,
    /// Indexes into `Unwrap::fields` of the fields the envelope has.
    present: Vec<usize>,
    /// Names the records in errors.
    what: Arc<str>,
}

impl Unwrap {
    /// Unwrap as `options` set it up; `info` fills the `source` fields.
    pub fn new(options: &TransformOptions, info: ConnectorInfo) -> Self {
        Unwrap {
            delete: options.unwrap_delete_handling,
            fields: options.unwrap_add_fields.0.clone(),
            headers: options
                .unwrap_add_headers
                .0
                .iter()
                .map(|f| (f.clone(), intern(&f.name)))
                .collect(),
            info,
            schemas: HashMap::new(),
        }
    }

    fn rewrite(&self) -> bool {
        matches!(
            self.delete,
            DeleteHandling::Rewrite | DeleteHandling::RewriteWithTombstone
        )
    }

    /// The records of `event`: see the module documentation.
    pub fn records<'e>(
        &mut self,
        event: &'e ChangeEvent,
        mut headers: Vec<Header<'e>>,
        tombstone: bool,
        stamp: Stamp<'e>,
    ) -> Vec<Record<'e>> {
        let row = match event.op {
            Op::Truncate => return Vec::new(),
            Op::Delete => match self.delete {
                DeleteHandling::Drop => return Vec::new(),
                DeleteHandling::Tombstone => {
                    return vec![self.null_after(event, headers, stamp)];
                }
                DeleteHandling::Rewrite | DeleteHandling::RewriteWithTombstone => {
                    event.before.as_ref()
                }
            },
            Op::Create | Op::Update | Op::Read => event.after.as_ref(),
        };
        let envelope = self.add_headers(event, &mut headers, stamp);
        let topic = Arc::clone(&event.table.topic);
        let value = row.map(|row| {
            let rewrite = self.rewrite();
            let schema = table_schema(&mut self.schemas, &self.fields, rewrite, &event.table);
            let mut value: Vec<(String, Value)> = event
                .table
                .columns
                .iter()
                .zip(row)
                .map(|(c, v)| (c.name.clone(), v.clone()))
                .collect();
            if rewrite {
                let deleted = if event.op == Op::Delete {
                    "true"
                } else {
                    "false"
                };
                value.push((DELETED_FIELD.to_owned(), Value::String(deleted.to_owned())));
            }
            for &i in &schema.present {
                let field = &self.fields[i];
                let v = envelope
                    .as_ref()
                    .map_or(Value::Null, |e| metadata_value(e, field));
                value.push((field.name.clone(), v));
            }
            RecordValue::Data(Data {
                schema: Arc::clone(&schema.value),
                value: Value::Struct(value),
                what: Arc::clone(&schema.what),
            })
        });
        let mut records = vec![Record {
            topic: Arc::clone(&topic),
            key: Some(RecordKey::Table(event)),
            value,
            headers,
        }];
        if event.op == Op::Delete
            && tombstone
            && self.delete == DeleteHandling::RewriteWithTombstone
        {
            let headers = self
                .headers
                .iter()
                .filter(|(f, _)| f.block == Block::Envelope && f.field == "op")
                .map(|(field, name)| {
                    let value = Value::String("d".to_owned());
                    Header::value(
                        name,
                        value,
                        header_schema(&event.table.envelope_schema, field),
                    )
                })
                .collect();
            records.push(Record {
                topic,
                key: Some(RecordKey::Table(event)),
                value: None,
                headers,
            });
        }
        records
    }

    /// Adds the `--unwrap-add-headers` headers of `event` to `headers`;
    /// returns the envelope value when fields or headers read it.
    fn add_headers<'e>(
        &self,
        event: &'e ChangeEvent,
        headers: &mut Vec<Header<'e>>,
        stamp: Stamp<'e>,
    ) -> Option<Value> {
        let envelope = (!self.fields.is_empty() || !self.headers.is_empty()).then(|| {
            envelope::envelope_value(event, &self.info, stamp.transaction, stamp.now_micros)
        })?;
        for (field, name) in &self.headers {
            let value = metadata_value(&envelope, field);
            headers.push(Header::value(
                name,
                value,
                header_schema(&event.table.envelope_schema, field),
            ));
        }
        Some(envelope)
    }

    /// A delete in tombstone mode: the strategy extracts `after`, a null
    /// under the envelope's `after` schema, and adds no fields to it. The
    /// converters decide the bytes (JsonConverter: the schema with a null
    /// payload, or `null`; AvroConverter: no value at all).
    fn null_after<'e>(
        &mut self,
        event: &'e ChangeEvent,
        mut headers: Vec<Header<'e>>,
        stamp: Stamp<'e>,
    ) -> Record<'e> {
        self.add_headers(event, &mut headers, stamp);
        let schema = table_schema(&mut self.schemas, &self.fields, false, &event.table);
        Record {
            topic: Arc::clone(&event.table.topic),
            key: Some(RecordKey::Table(event)),
            value: Some(RecordValue::Data(Data {
                schema: Arc::clone(&schema.after),
                value: Value::Null,
                what: Arc::clone(&schema.what),
            })),
            headers,
        }
    }
}

/// The value schema of `table`'s current version, derived once per version.
fn table_schema<'s>(
    schemas: &'s mut HashMap<u32, UnwrapSchema>,
    fields: &[MetadataField],
    rewrite: bool,
    table: &Arc<TableSchema>,
) -> &'s UnwrapSchema {
    let stale = schemas
        .get(&table.relation_id)
        .is_none_or(|s| !Arc::ptr_eq(&s.table, table));
    if stale {
        let mut value = table.row_schema.clone();
        // Only the null `after` of a delete in tombstone mode is written
        // under the envelope's optional field schema.
        let after = value.clone().optional();
        if rewrite {
            value.fields.push(Field {
                name: DELETED_FIELD.to_owned(),
                schema: ConnectSchema::primitive(ConnectType::String).optional(),
            });
        }
        let mut present = Vec::new();
        for (i, field) in fields.iter().enumerate() {
            if let Some(schema) = metadata_schema(&table.envelope_schema, field) {
                value.fields.push(Field {
                    name: field.name.clone(),
                    schema,
                });
                present.push(i);
            }
        }
        let schema = UnwrapSchema {
            table: Arc::clone(table),
            after: Arc::new(after),
            value: Arc::new(value),
            present,
            what: format!("table {}.{} (unwrapped)", table.schema, table.table).into(),
        };
        schemas.insert(table.relation_id, schema);
    }
    &schemas[&table.relation_id]
}

/// The schema of an added field: the envelope's, made optional and without
/// default (as the SMT copies the schema's basics).
fn metadata_schema(envelope: &ConnectSchema, field: &MetadataField) -> Option<ConnectSchema> {
    let parent = match field.block.name() {
        None => envelope,
        Some(block) => &envelope.fields.iter().find(|f| f.name == block)?.schema,
    };
    let schema = &parent.fields.iter().find(|f| f.name == field.field)?.schema;
    Some(ConnectSchema {
        optional: true,
        default: None,
        ..schema.clone()
    })
}

/// The schema of a header holding an envelope field: as the SMT adds it
/// (`FieldReference.getSchema`: the field schema's basics, made optional),
/// the added field's schema; an optional string if the envelope lacks it.
fn header_schema(envelope: &ConnectSchema, field: &MetadataField) -> Arc<ConnectSchema> {
    let schema = metadata_schema(envelope, field);
    Arc::new(schema.unwrap_or_else(|| ConnectSchema::primitive(ConnectType::String).optional()))
}

/// The value of an added field in an envelope value (null when its block is).
fn metadata_value(envelope: &Value, field: &MetadataField) -> Value {
    let parent = match field.block.name() {
        None => Some(envelope),
        Some(block) => struct_field(envelope, block),
    };
    parent
        .and_then(|p| struct_field(p, &field.field))
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::golden;
    use crate::encode::json::JsonEncoder;
    use crate::transform::parse_metadata_fields;

    /// The golden delete of row 3 of `app.public.t`.
    fn delete() -> ChangeEvent {
        golden::events()
            .into_iter()
            .find(|(_, event, _)| event.op == Op::Delete)
            .expect("a delete")
            .1
    }

    /// The golden table's columns in a JsonConverter schema.
    macro_rules! columns {
        () => {
            concat!(
                r#"{"type":"int64","optional":false,"field":"id"},"#,
                r#"{"type":"string","optional":true,"field":"naïve \"quoted\""},"#,
                r#"{"type":"bytes","optional":true,"field":"raw"},"#,
                r#"{"type":"double","optional":true,"field":"ratio"}"#
            )
        };
    }

    fn unwrap(args: &[&str]) -> Unwrap {
        let options = crate::transform::tests::parse(args).expect("flags parse");
        Unwrap::new(&options, golden::info())
    }

    const STAMP: Stamp<'static> = Stamp {
        now_micros: 1_700_000_000_000_001,
        transaction: None,
    };

    /// The value bytes of `record` as JSON, with or without schemas.
    fn json_value(record: Record<'_>, schemas: bool) -> Option<String> {
        let mut encoder = JsonEncoder::uniform(golden::info(), schemas);
        let encoded = encoder.record(record, crate::checkpoint::TxnId::from_u64(0));
        encoded.value.map(|v| String::from_utf8(v).expect("utf-8"))
    }

    #[test]
    fn tombstone_mode_writes_a_null_under_the_value_schema() {
        let event = delete();
        let mut unwrap = unwrap(&[
            "--unwrap-add-fields",
            "op,lsn",
            "--unwrap-add-headers",
            "op",
        ]);
        let records = unwrap.records(&event, Vec::new(), true, STAMP);
        assert_eq!(records.len(), 1, "Debezium's own tombstone is dropped");
        assert_eq!(records[0].headers.len(), 1, "add.headers still apply");
        assert_eq!(
            json_value(records[0].clone(), true).as_deref(),
            Some(concat!(
                r#"{"schema":{"type":"struct","fields":["#,
                columns!(),
                r#"],"optional":true,"name":"app.public.t.Value"},"payload":null}"#
            )),
            "the after schema, without added fields"
        );
        assert_eq!(
            json_value(records[0].clone(), false).as_deref(),
            Some("null")
        );
    }

    #[test]
    fn deleted_comes_before_the_added_fields() {
        let event = delete();
        let mut unwrap = unwrap(&[
            "--unwrap-delete-handling",
            "rewrite",
            "--unwrap-add-fields",
            "op,table",
        ]);
        let records = unwrap.records(&event, Vec::new(), true, STAMP);
        assert_eq!(records.len(), 1);
        assert_eq!(
            json_value(records[0].clone(), true).as_deref(),
            Some(concat!(
                r#"{"schema":{"type":"struct","fields":["#,
                columns!(),
                r#",{"type":"string","optional":true,"field":"__deleted"},"#,
                r#"{"type":"string","optional":true,"field":"__op"},"#,
                r#"{"type":"string","optional":true,"field":"__table"}],"#,
                r#""optional":false,"name":"app.public.t.Value"},"#,
                r#""payload":{"id":3,"naïve \"quoted\"":"line\nbreak \u0001","raw":"AQL/","ratio":0.25,"#,
                r#""__deleted":"true","__op":"d","__table":"t\"ü"}}"#
            ))
        );
    }

    #[test]
    fn added_fields_take_the_envelope_types_as_optional() {
        let row = envelope::row_schema("app.public.t", &[]);
        let env = envelope::envelope_schema("app.public.t", &row);
        let fields = parse_metadata_fields("op,lsn,source.ts_ms,snapshot,id")
            .expect("parses")
            .0;
        let schemas: Vec<ConnectSchema> = fields
            .iter()
            .map(|f| metadata_schema(&env, f).expect("known"))
            .collect();
        assert_eq!(schemas[0].kind, ConnectType::String);
        assert!(schemas.iter().all(|s| s.optional && s.default.is_none()));
        assert_eq!(schemas[1].kind, ConnectType::Int64);
        assert_eq!(schemas[2].kind, ConnectType::Int64);
        assert_eq!(schemas[3].name.as_deref(), Some("io.debezium.data.Enum"));
        assert_eq!(schemas[4].kind, ConnectType::String);
        let db = &parse_metadata_fields("db").expect("parses").0[0];
        assert!(
            header_schema(&env, db).optional,
            "an add.headers header is optional too, although source.db is required"
        );
    }

    #[test]
    fn added_values_come_from_the_envelope() {
        let envelope = Value::Struct(vec![
            ("op".into(), Value::String("c".into())),
            (
                "source".into(),
                Value::Struct(vec![("lsn".into(), Value::Int64(42))]),
            ),
            ("transaction".into(), Value::Null),
        ]);
        let fields = parse_metadata_fields("op,lsn,id").expect("parses").0;
        assert_eq!(
            metadata_value(&envelope, &fields[0]),
            Value::String("c".into())
        );
        assert_eq!(metadata_value(&envelope, &fields[1]), Value::Int64(42));
        assert_eq!(metadata_value(&envelope, &fields[2]), Value::Null);
    }
}
