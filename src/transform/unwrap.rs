//! ExtractNewRecordState ("unwrap"): the record's value is the row itself
//! rather than Debezium's envelope.
//!
//! As Debezium 3.x's SMT does it, applied to the events Debezium would have
//! written:
//! - creates, updates and snapshot reads (`op: "r"`) become their `after`
//!   row; the key stays the table's `<topic>.Key` struct;
//! - the value schema is the table's `<topic>.Value` row schema, then the
//!   `--unwrap-add-fields` fields (each optional, typed as in the envelope:
//!   `__op` string, `__lsn` int64, ...), then, in the rewrite modes,
//!   `__deleted` (an optional string, `"true"` or `"false"`);
//! - deletes follow `--unwrap-delete-handling`: `drop` writes nothing,
//!   `tombstone` writes a single tombstone (the delete becomes it; Debezium's
//!   own tombstone is dropped), `rewrite` writes the `before` row with
//!   `__deleted: "true"` and no tombstone, `rewrite-with-tombstone` the same
//!   followed by Debezium's tombstone (when `--tombstones-on-delete`);
//! - truncates are dropped;
//! - `--unwrap-add-headers` adds headers with the same naming; a kept
//!   tombstone carries only `__op` (`d`), as the SMT adds to tombstones.

use std::collections::HashMap;
use std::sync::Arc;

use super::options::TransformOptions;
use super::{intern, struct_field, Block, DeleteHandling, MetadataField};
use crate::event::envelope::{self, ConnectorInfo, Stamp};
use crate::event::record::{Data, Header, JsonForm, Record, RecordKey, RecordValue};
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
                DeleteHandling::Tombstone => None,
                DeleteHandling::Rewrite | DeleteHandling::RewriteWithTombstone => {
                    event.before.as_ref()
                }
            },
            Op::Create | Op::Update | Op::Read => event.after.as_ref(),
        };
        let envelope = (!self.fields.is_empty() || !self.headers.is_empty()).then(|| {
            envelope::envelope_value(event, &self.info, stamp.transaction, stamp.now_micros)
        });
        if let Some(envelope) = &envelope {
            for (field, name) in &self.headers {
                let value = metadata_value(envelope, field);
                headers.push(Header::value(
                    name,
                    value,
                    header_schema(&event.table.envelope_schema, field),
                ));
            }
        }
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
            for &i in &schema.present {
                let field = &self.fields[i];
                let v = envelope
                    .as_ref()
                    .map_or(Value::Null, |e| metadata_value(e, field));
                value.push((field.name.clone(), v));
            }
            if rewrite {
                let deleted = if event.op == Op::Delete {
                    "true"
                } else {
                    "false"
                };
                value.push((DELETED_FIELD.to_owned(), Value::String(deleted.to_owned())));
            }
            RecordValue::Data(Data {
                schema: Arc::clone(&schema.value),
                value: Value::Struct(value),
                json: JsonForm::Connect,
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
        if rewrite {
            value.fields.push(Field {
                name: DELETED_FIELD.to_owned(),
                schema: ConnectSchema::primitive(ConnectType::String).optional(),
            });
        }
        let schema = UnwrapSchema {
            table: Arc::clone(table),
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
    use crate::transform::parse_metadata_fields;

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
