//! The Avro binary encoding of a Connect value, written straight from the
//! Connect schema: the hot path of the Avro encoder.
//!
//! [`super::value::avro_value`] builds an apache-avro value tree that
//! apache-avro then validates against the parsed schema and writes; per
//! event that costs more than the rest of the pipeline. The encoding itself
//! is small (Avro 1.11 specification, "Binary Encoding"): zig-zag varints
//! for `int` and `long`, little-endian IEEE floats, length-prefixed bytes
//! and strings, the branch index before a union's value, a record's fields
//! in order, arrays and maps as one counted block and a zero. This module
//! writes it walking the same Connect schema the Avro schema was derived
//! from, with the same union order ([`null_first`]) and the same native
//! conversions.
//!
//! Envelopes are written by the envelope walk ([`crate::event::envelope`])
//! driving `AvroFields`, which takes each field's schema from the
//! registered one, so rows and the source block are never built as values.
//!
//! A value that does not fit its schema is not written here: the caller
//! falls back to the tree path, whose error names the path to the value.
//! Tests compare the bytes with apache-avro's for the same values.

use super::schema::{is_avro_decimal, null_first, NativeType};
use super::value::zoned_timestamp_micros;
use crate::encode::options::AvroLogicalTypes;
use crate::event::envelope::{self, ConnectorInfo, EnvelopeWriter, FieldName, Stamp};
use crate::event::metadata::TransactionBlock;
use crate::event::value::{ConnectSchema, ConnectType, Field, Value};
use crate::event::{ChangeEvent, ColumnSchema, MessageEvent};

/// The value does not fit the schema; the tree path says how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfit;

fn write_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}

/// Appends the Avro encoding of `value` under the Avro form of `schema`.
///
/// # Errors
/// [`Unfit`] when the value does not fit the schema; `out` then holds a
/// partial encoding and must be discarded.
pub fn write_value(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    value: &Value,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    let present = !matches!(value, Value::Null);
    write_branch(out, schema, present);
    if !present && schema.optional {
        return Ok(());
    }
    write_required(out, schema, value, logical)
}

fn write_required(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    value: &Value,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    use ConnectType as C;
    if let Some(native) = NativeType::of(schema, logical) {
        return write_native(out, native, value);
    }
    match (schema.kind, value) {
        (C::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (C::Int8, Value::Int8(i)) => write_long(out, i64::from(*i)),
        (C::Int16, Value::Int16(i)) => write_long(out, i64::from(*i)),
        (C::Int32, Value::Int32(i)) => write_long(out, i64::from(*i)),
        (C::Int64, Value::Int64(i)) => write_long(out, *i),
        (C::Float32, Value::Float32(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (C::Float64, Value::Float64(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (C::String, Value::String(s)) => write_bytes(out, s.as_bytes()),
        // A decimal's unscaled value is already the big-endian two's
        // complement bytes Avro's decimal logical type holds.
        (C::Bytes, Value::Bytes(b)) if b.is_empty() && is_avro_decimal(schema) => {
            return Err(Unfit)
        }
        (C::Bytes, Value::Bytes(b)) => write_bytes(out, b),
        (C::Array, Value::Array(items)) => {
            let item_schema = schema.items.as_deref().ok_or(Unfit)?;
            if !items.is_empty() {
                write_long(out, items.len() as i64);
                for item in items {
                    write_value(out, item_schema, item, logical)?;
                }
            }
            out.push(0);
        }
        (C::Map, Value::Map(entries)) => {
            let (_, value_schema) = schema.map.as_deref().ok_or(Unfit)?;
            if !entries.is_empty() {
                write_long(out, entries.len() as i64);
                for (key, value) in entries {
                    write_bytes(out, key.as_bytes());
                    write_value(out, value_schema, value, logical)?;
                }
            }
            out.push(0);
        }
        (C::Struct, Value::Struct(values)) => {
            if values.len() != schema.fields.len() {
                return Err(Unfit);
            }
            for (field, (name, value)) in schema.fields.iter().zip(values) {
                if field.name != *name {
                    return Err(Unfit);
                }
                write_value(out, &field.schema, value, logical)?;
            }
        }
        _ => return Err(Unfit),
    }
    Ok(())
}

fn write_native(out: &mut Vec<u8>, native: NativeType, value: &Value) -> Result<(), Unfit> {
    match (native, value) {
        (NativeType::Date | NativeType::TimeMillis, Value::Int32(n)) => {
            write_long(out, i64::from(*n));
        }
        (
            NativeType::TimeMicros | NativeType::TimestampMillis | NativeType::TimestampMicros,
            Value::Int64(n),
        ) => write_long(out, *n),
        (NativeType::ZonedTimestamp, Value::String(text)) => {
            write_long(out, zoned_timestamp_micros(text).ok_or(Unfit)?);
        }
        // apache-avro accepts a uuid string of the canonical length only.
        (NativeType::Uuid, Value::String(uuid)) if uuid.len() == 36 => {
            write_bytes(out, uuid.as_bytes());
        }
        _ => return Err(Unfit),
    }
    Ok(())
}

/// The envelope walk's Avro writer: each field under the next field of the
/// registered schema, which must bear the walked field's name.
struct AvroFields<'s, 'o> {
    out: &'o mut Vec<u8>,
    /// The fields of the struct being written, and how many are written.
    fields: &'s [Field],
    next: usize,
    logical: AvroLogicalTypes,
}

impl<'s> AvroFields<'s, '_> {
    /// Appends the struct `schema` whose fields `walk` writes.
    fn record<'o>(
        out: &'o mut Vec<u8>,
        schema: &'s ConnectSchema,
        logical: AvroLogicalTypes,
        walk: impl FnOnce(&mut AvroFields<'s, 'o>) -> Result<(), Unfit>,
    ) -> Result<(), Unfit> {
        if schema.optional || schema.kind != ConnectType::Struct {
            return Err(Unfit);
        }
        let mut fields = AvroFields {
            out,
            fields: &schema.fields,
            next: 0,
            logical,
        };
        walk(&mut fields)?;
        fields.finish()
    }

    /// The schema of the next field, which must be `name`.
    ///
    /// A release build compares the names' lengths only: a full compare
    /// of the 24 envelope fields' names was 2 % of an Avro snapshot's CPU
    /// (a call to `memcmp` each), and the schemas written under are always
    /// the connector's own, whose names the walks follow
    /// (`envelope::tests::the_walk_follows_the_schemas`). A debug build,
    /// every test's, compares them in full.
    #[inline(always)]
    fn field(&mut self, name: &str) -> Result<&'s ConnectSchema, Unfit> {
        let fields = self.fields;
        let field = fields.get(self.next).ok_or(Unfit)?;
        let same = if cfg!(debug_assertions) {
            field.name == name
        } else {
            field.name.len() == name.len()
        };
        if !same {
            return Err(Unfit);
        }
        self.next += 1;
        Ok(&field.schema)
    }

    /// Whether every field of the struct was written.
    fn finish(&self) -> Result<(), Unfit> {
        if self.next == self.fields.len() {
            Ok(())
        } else {
            Err(Unfit)
        }
    }
}

impl EnvelopeWriter for AvroFields<'_, '_> {
    type Error = Unfit;

    fn string(&mut self, name: FieldName, value: &str) -> Result<(), Unfit> {
        let schema = self.field(name.as_str())?;
        write_str_field(self.out, schema, value, self.logical)
    }

    fn long(&mut self, name: FieldName, value: i64) -> Result<(), Unfit> {
        let schema = self.field(name.as_str())?;
        write_value(self.out, schema, &Value::Int64(value), self.logical)
    }

    fn bytes(&mut self, name: FieldName, value: &[u8]) -> Result<(), Unfit> {
        let schema = self.field(name.as_str())?;
        if schema.kind != ConnectType::Bytes
            || is_avro_decimal(schema)
            || NativeType::of(schema, self.logical).is_some()
        {
            return Err(Unfit);
        }
        write_branch(self.out, schema, true);
        write_bytes(self.out, value);
        Ok(())
    }

    fn null(&mut self, name: FieldName) -> Result<(), Unfit> {
        let schema = self.field(name.as_str())?;
        write_value(self.out, schema, &Value::Null, self.logical)
    }

    fn row(
        &mut self,
        name: FieldName,
        _columns: &[ColumnSchema],
        values: Option<&[Value]>,
    ) -> Result<(), Unfit> {
        let schema = self.field(name.as_str())?;
        write_row(self.out, schema, values, self.logical)
    }

    fn structure<F>(&mut self, name: FieldName, fields: F) -> Result<(), Unfit>
    where
        F: FnOnce(&mut Self) -> Result<(), Unfit>,
    {
        let schema = self.field(name.as_str())?;
        if schema.kind != ConnectType::Struct {
            return Err(Unfit);
        }
        write_branch(self.out, schema, true);
        let outer = (
            std::mem::replace(&mut self.fields, &schema.fields),
            std::mem::replace(&mut self.next, 0),
        );
        let walked = fields(self).and_then(|()| self.finish());
        (self.fields, self.next) = outer;
        walked
    }
}

/// The union branch of a present (`true`) or null value under `schema`,
/// when it is optional.
fn write_branch(out: &mut Vec<u8>, schema: &ConnectSchema, present: bool) {
    if schema.optional {
        let null_index = i64::from(!null_first(schema));
        write_long(out, if present { 1 - null_index } else { null_index });
    }
}

/// Appends the envelope of `event` under `schema` (its table's envelope
/// schema): the bytes of `write_value(schema, &envelope_value(..))`,
/// without building the rows as values first (they are most of the
/// envelope, and every column name would be cloned into them).
///
/// # Errors
/// [`Unfit`] as [`write_value`], and when `schema` is not an envelope of
/// the event's table; the caller falls back to the tree path.
pub fn write_envelope(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    event: &ChangeEvent,
    info: &ConnectorInfo,
    transaction: Option<&TransactionBlock>,
    now_micros: i64,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    let stamp = Stamp {
        now_micros,
        transaction,
    };
    AvroFields::record(out, schema, logical, |w| {
        envelope::walk_change(w, event, info, stamp)
    })
}

/// Appends the key of `event` under `schema` (its table's key schema):
/// the bytes of `write_value(schema, &key_value(event))`, without building
/// the key as a value first. Writes nothing and returns `Ok(false)` for a
/// null key.
///
/// # Errors
/// [`Unfit`] as [`write_value`], and when `schema` is not a key of the
/// event's table; the caller falls back to the tree path.
pub fn write_key(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    event: &ChangeEvent,
    logical: AvroLogicalTypes,
) -> Result<bool, Unfit> {
    let Some(key) = event.key_fields() else {
        return Ok(false);
    };
    if schema.kind != ConnectType::Struct || schema.optional {
        return Err(Unfit);
    }
    let mut fields = schema.fields.iter();
    for (name, value) in key {
        let field = fields.next().filter(|f| f.name == name).ok_or(Unfit)?;
        write_value(out, &field.schema, value, logical)?;
    }
    if let Some((name, value)) = &event.table.routed_key_field {
        let field = fields.next().filter(|f| f.name == *name).ok_or(Unfit)?;
        write_str_field(out, &field.schema, value, logical)?;
    }
    match fields.next() {
        Some(_) => Err(Unfit),
        None => Ok(true),
    }
}

/// Appends the value of a logical decoding message record under `schema`
/// (the message value schema).
///
/// # Errors
/// [`Unfit`] as [`write_envelope`].
pub fn write_message(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    message: &MessageEvent,
    info: &ConnectorInfo,
    stamp: Stamp<'_>,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    AvroFields::record(out, schema, logical, |w| {
        envelope::walk_message(w, message, info, stamp)
    })
}

/// A string field: the union branch when optional, then the string.
fn write_str_field(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    text: &str,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    if schema.kind != ConnectType::String || NativeType::of(schema, logical).is_some() {
        return Err(Unfit);
    }
    write_branch(out, schema, true);
    write_bytes(out, text.as_bytes());
    Ok(())
}

/// A row as the optional row struct of the envelope: the union branch, then
/// each column's value under its field's schema.
fn write_row(
    out: &mut Vec<u8>,
    schema: &ConnectSchema,
    row: Option<&[Value]>,
    logical: AvroLogicalTypes,
) -> Result<(), Unfit> {
    if schema.kind != ConnectType::Struct {
        return Err(Unfit);
    }
    let Some(values) = row else {
        if !schema.optional {
            return Err(Unfit);
        }
        write_branch(out, schema, false);
        return Ok(());
    };
    write_branch(out, schema, true);
    if values.len() != schema.fields.len() {
        return Err(Unfit);
    }
    for (field, value) in schema.fields.iter().zip(values) {
        write_value(out, &field.schema, value, logical)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::encode::avro::schema::{avro_schema, DECIMAL_NAME};
    use crate::encode::avro::value::avro_value;
    use crate::event::value::Field;
    use crate::event::TableSchema;

    /// The bytes apache-avro writes for `value` (the tree path).
    fn reference(schema: &ConnectSchema, value: &Value, logical: AvroLogicalTypes) -> Vec<u8> {
        let avro = avro_schema(schema, logical).expect("schema translates");
        let tree = avro_value(schema, value.clone(), logical).expect("value fits");
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&avro.parsed)
            .build()
            .expect("writer");
        let mut out = Vec::new();
        writer
            .write_value_ref(&mut out, &tree)
            .expect("apache-avro writes it");
        out
    }

    fn direct(
        schema: &ConnectSchema,
        value: &Value,
        logical: AvroLogicalTypes,
    ) -> Result<Vec<u8>, Unfit> {
        let mut out = Vec::new();
        write_value(&mut out, schema, value, logical).map(|()| out)
    }

    fn field(name: &str, schema: ConnectSchema) -> Field {
        Field {
            name: name.to_owned(),
            schema,
        }
    }

    fn named(kind: ConnectType, name: &str) -> ConnectSchema {
        ConnectSchema::named(kind, name)
    }

    /// A row with every kind of column, each required and optional.
    fn row_schema() -> ConnectSchema {
        use ConnectType as C;
        let decimal = named(C::Bytes, DECIMAL_NAME)
            .with_parameter("scale", "2")
            .with_parameter("connect.decimal.precision", "10");
        let mut with_default = ConnectSchema::primitive(C::String).optional();
        with_default.default = Some(Value::String("d".into()));
        let kinds = vec![
            ("b", ConnectSchema::primitive(C::Boolean)),
            ("i8", ConnectSchema::primitive(C::Int8)),
            ("i16", ConnectSchema::primitive(C::Int16)),
            ("i32", ConnectSchema::primitive(C::Int32)),
            ("i64", ConnectSchema::primitive(C::Int64)),
            ("f32", ConnectSchema::primitive(C::Float32)),
            ("f64", ConnectSchema::primitive(C::Float64)),
            ("s", ConnectSchema::primitive(C::String)),
            ("bytes", ConnectSchema::primitive(C::Bytes)),
            ("dec", decimal),
            ("date", named(C::Int32, "io.debezium.time.Date")),
            ("time", named(C::Int32, "io.debezium.time.Time")),
            ("micro_time", named(C::Int64, "io.debezium.time.MicroTime")),
            ("ts", named(C::Int64, "io.debezium.time.Timestamp")),
            (
                "micro_ts",
                named(C::Int64, "io.debezium.time.MicroTimestamp"),
            ),
            ("zoned", named(C::String, "io.debezium.time.ZonedTimestamp")),
            ("uuid", named(C::String, "io.debezium.data.Uuid")),
            (
                "tags",
                ConnectSchema::array(ConnectSchema::primitive(C::Int32).optional()),
            ),
            (
                "attrs",
                ConnectSchema::map(
                    ConnectSchema::primitive(C::String),
                    ConnectSchema::primitive(C::String).optional(),
                ),
            ),
        ];
        let mut fields = Vec::new();
        for (name, schema) in kinds {
            fields.push(field(&format!("{name}_opt"), schema.clone().optional()));
            fields.push(field(name, schema));
        }
        fields.push(field("defaulted", with_default));
        ConnectSchema::structure("app.public.t.Value", fields)
    }

    fn row(seed: i64, nulls: bool) -> Value {
        let values = vec![
            Value::Boolean(seed % 2 == 0),
            Value::Int8(seed as i8),
            Value::Int16(-(seed as i16)),
            Value::Int32(seed as i32 * 1000),
            Value::Int64(seed.wrapping_mul(1 << 40)),
            Value::Float32(seed as f32 / 3.0),
            Value::Float64(-(seed as f64) / 7.0),
            Value::String(format!("naïve {seed} 😀")),
            Value::Bytes(vec![seed as u8, 0, 255]),
            Value::Bytes(vec![0xff, 0x38u8.wrapping_add(seed as u8)]),
            Value::Int32(-719_528 + seed as i32),
            Value::Int32(86_399_999),
            Value::Int64(86_399_999_999),
            Value::Int64(-1_000 * seed),
            Value::Int64(1_700_000_000_000_000 + seed),
            Value::String(if seed % 2 == 0 {
                "2024-02-29T23:59:59.123456Z".into()
            } else {
                "infinity".into()
            }),
            Value::String("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
            Value::Array(
                (0..seed % 4)
                    .map(|i| Value::Int32(i as i32))
                    .chain([Value::Null])
                    .collect(),
            ),
            // One entry: apache-avro writes a map's entries in hash order.
            Value::Map(vec![("k".into(), Value::String("v".into()))]),
        ];
        let schema = row_schema();
        let mut fields = Vec::new();
        let mut names = schema.fields.iter().map(|f| f.name.clone());
        for value in values {
            let optional = if nulls { Value::Null } else { value.clone() };
            fields.push((names.next().unwrap(), optional));
            fields.push((names.next().unwrap(), value));
        }
        fields.push((
            names.next().unwrap(),
            if nulls {
                Value::Null
            } else {
                Value::String("x".into())
            },
        ));
        Value::Struct(fields)
    }

    #[test]
    fn rows_are_the_bytes_apache_avro_writes() {
        let schema = row_schema();
        for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
            for seed in [0, 1, 2, 3, 63, 64, 127, -5] {
                for nulls in [false, true] {
                    let value = row(seed, nulls);
                    assert_eq!(
                        direct(&schema, &value, logical),
                        Ok(reference(&schema, &value, logical)),
                        "{logical:?} seed {seed} nulls {nulls}"
                    );
                    let optional = schema.clone().optional();
                    assert_eq!(
                        direct(&optional, &value, logical),
                        Ok(reference(&optional, &value, logical))
                    );
                    assert_eq!(
                        direct(&optional, &Value::Null, logical),
                        Ok(reference(&optional, &Value::Null, logical))
                    );
                }
            }
        }
    }

    #[test]
    fn maps_read_back_whole() {
        let schema = ConnectSchema::map(
            ConnectSchema::primitive(ConnectType::String),
            ConnectSchema::primitive(ConnectType::Int64).optional(),
        );
        let entries: Vec<(String, Value)> = (0..70)
            .map(|i| {
                (
                    format!("k{i}"),
                    if i % 3 == 0 {
                        Value::Null
                    } else {
                        Value::Int64(i)
                    },
                )
            })
            .collect();
        let logical = AvroLogicalTypes::Debezium;
        let bytes = direct(&schema, &Value::Map(entries.clone()), logical).expect("fits");
        let avro = avro_schema(&schema, logical).expect("schema translates");
        let read = apache_avro::reader::datum::GenericDatumReader::builder(&avro.parsed)
            .build()
            .expect("reader")
            .read_value(&mut bytes.as_slice())
            .expect("apache-avro reads it");
        let expected = avro_value(&schema, Value::Map(entries), logical).expect("fits");
        assert_eq!(read, expected);
    }

    #[test]
    fn longs_are_zigzag_varints() {
        let long = ConnectSchema::primitive(ConnectType::Int64);
        for n in [
            0,
            -1,
            1,
            63,
            -64,
            64,
            8191,
            -8192,
            i64::MAX,
            i64::MIN,
            1 << 35,
        ] {
            assert_eq!(
                direct(&long, &Value::Int64(n), AvroLogicalTypes::Debezium),
                Ok(reference(
                    &long,
                    &Value::Int64(n),
                    AvroLogicalTypes::Debezium
                )),
                "{n}"
            );
        }
    }

    #[test]
    fn values_that_do_not_fit_are_left_to_the_tree_path() {
        let schema = row_schema();
        let logical = AvroLogicalTypes::Native;
        assert_eq!(direct(&schema, &Value::Int32(1), logical), Err(Unfit));
        let Value::Struct(mut fields) = row(1, false) else {
            unreachable!()
        };
        fields.pop();
        assert_eq!(direct(&schema, &Value::Struct(fields), logical), Err(Unfit));
        let zoned = named(ConnectType::String, "io.debezium.time.ZonedTimestamp");
        assert_eq!(
            direct(&zoned, &Value::String("yesterday".into()), logical),
            Err(Unfit)
        );
        assert!(avro_value(&zoned, Value::String("yesterday".into()), logical).is_err());
    }

    /// A table of [`row_schema`]'s columns, keyed by `key` (column
    /// indexes; a key column `nullable` keeps its optional schema, as a
    /// chosen key column may), its key routed when `routed` names a field.
    fn table(key: &[(usize, bool)], routed: Option<&str>) -> TableSchema {
        use crate::event::{envelope, ColumnSchema};

        let columns: Vec<ColumnSchema> = row_schema()
            .fields
            .iter()
            .map(|f| ColumnSchema {
                name: f.name.clone(),
                type_oid: 0,
                type_modifier: -1,
                schema: f.schema.clone(),
            })
            .collect();
        let topic = "app.public.t";
        let table_row = envelope::row_schema(topic, &columns);
        let key_schema = (!key.is_empty()).then(|| {
            let key_columns: Vec<&ColumnSchema> = key.iter().map(|&(i, _)| &columns[i]).collect();
            let mut schema = envelope::key_schema(topic, &key_columns);
            for (field, &(_, nullable)) in schema.fields.iter_mut().zip(key) {
                field.schema.optional = nullable;
            }
            if let Some(name) = routed {
                schema
                    .fields
                    .push(field(name, ConnectSchema::primitive(ConnectType::String)));
            }
            schema
        });
        TableSchema {
            relation_id: 1,
            schema: "public".into(),
            table: "t".into(),
            qualified_name: "public.t".into(),
            topic: topic.into(),
            key_schema,
            envelope_schema: envelope::envelope_schema(topic, &table_row),
            row_schema: table_row,
            key_columns: key.iter().map(|&(i, _)| i).collect(),
            routed_key_field: routed.map(|name| (name.to_owned(), "app.public.t_1".to_owned())),
            columns,
        }
    }

    /// [`row`]'s values, as a row.
    fn values(seed: i64, nulls: bool) -> Vec<Value> {
        match row(seed, nulls) {
            Value::Struct(fields) => fields.into_iter().map(|(_, v)| v).collect(),
            _ => unreachable!("a struct"),
        }
    }

    #[test]
    fn envelopes_are_the_bytes_of_the_tree_path() {
        use crate::event::envelope::envelope_value;
        use crate::event::{Op, SnapshotMarker, SourceInfo};
        use crate::lsn::Lsn;

        let table = Arc::new(table(&[], None));
        let info = ConnectorInfo {
            name: "app".into(),
            db: "shop".into(),
            run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
        };
        let block = TransactionBlock {
            id: "7:100".into(),
            total_order: 3,
            data_collection_order: 2,
        };
        for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
            for (op, before, after, transaction) in [
                (Op::Create, None, Some(values(1, false)), None),
                (
                    Op::Update,
                    Some(values(2, true)),
                    Some(values(3, false)),
                    Some(&block),
                ),
                (Op::Delete, Some(values(4, false)), None, None),
                (Op::Truncate, None, None, None),
            ] {
                let event = ChangeEvent {
                    table: Arc::clone(&table),
                    op,
                    before,
                    after,
                    source: SourceInfo {
                        origin: None,
                        commit_time_micros: 1_700_000_000_000_000,
                        xid: 9,
                        lsn: Lsn::new(4242),
                        last_commit_lsn: transaction.map(|_| Lsn::new(4000)),
                        snapshot: SnapshotMarker::False,
                    },
                    unmapped_key: Default::default(),
                };
                let schema = &table.envelope_schema;
                let mut out = Vec::new();
                write_envelope(
                    &mut out,
                    schema,
                    &event,
                    &info,
                    transaction,
                    1_700_000_000_500_000,
                    logical,
                )
                .expect("fits");
                let tree = envelope_value(&event, &info, transaction, 1_700_000_000_500_000);
                assert_eq!(out, reference(schema, &tree, logical), "{logical:?} {op:?}");
            }
        }
    }

    #[test]
    fn keys_are_the_bytes_of_the_tree_path() {
        use crate::event::envelope::key_value;
        use crate::event::{Op, SnapshotMarker, SourceInfo, UnmappedKey};
        use crate::lsn::Lsn;

        // A bigint and a text key; one with a nullable column (null in the
        // rows with nulls) and a routed field; one of a single column. (The
        // row's odd columns are required, the even ones optional.)
        let tables = [
            table(&[(9, false), (15, false)], None),
            table(
                &[(15, false), (4, true)],
                Some("__dbz__physicalTableIdentifier"),
            ),
            table(&[(1, false)], None),
        ];
        for table in tables {
            let table = Arc::new(table);
            let schema = table.key_schema.clone().expect("a key");
            for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
                for (op, before, after, unmapped) in [
                    (Op::Create, None, Some(values(1, false)), None),
                    (
                        Op::Update,
                        Some(values(2, true)),
                        Some(values(3, true)),
                        None,
                    ),
                    (Op::Delete, Some(values(4, false)), None, None),
                    // A column mapper changed the key columns in the row.
                    (Op::Create, None, Some(values(5, false)), Some(6)),
                ] {
                    let key_of = |seed| {
                        let row = values(seed, false);
                        table.key_columns.iter().map(|&i| row[i].clone()).collect()
                    };
                    let event = ChangeEvent {
                        table: Arc::clone(&table),
                        op,
                        before,
                        after,
                        source: SourceInfo {
                            origin: None,
                            commit_time_micros: 1_700_000_000_000_000,
                            xid: 9,
                            lsn: Lsn::new(4242),
                            last_commit_lsn: None,
                            snapshot: SnapshotMarker::False,
                        },
                        unmapped_key: UnmappedKey {
                            before: None,
                            after: unmapped.map(key_of),
                        },
                    };
                    let mut out = Vec::new();
                    assert_eq!(write_key(&mut out, &schema, &event, logical), Ok(true));
                    let tree = key_value(&event).expect("a key");
                    assert_eq!(
                        out,
                        reference(&schema, &tree, logical),
                        "{logical:?} {op:?}"
                    );
                    // Rows 2 and 3 differ in every key column.
                    assert_eq!(event.key_changed(), op == Op::Update);
                }
            }
            // No row, no key; a schema that is not the table's key is left
            // to the tree path.
            let none = ChangeEvent {
                table: Arc::clone(&table),
                op: Op::Truncate,
                before: None,
                after: None,
                source: SourceInfo {
                    origin: None,
                    commit_time_micros: 0,
                    xid: 0,
                    lsn: Lsn::new(1),
                    last_commit_lsn: None,
                    snapshot: SnapshotMarker::False,
                },
                unmapped_key: UnmappedKey::default(),
            };
            assert_eq!(
                write_key(&mut Vec::new(), &schema, &none, AvroLogicalTypes::Debezium),
                Ok(false)
            );
            let created = ChangeEvent {
                after: Some(values(1, false)),
                op: Op::Create,
                ..none
            };
            assert_eq!(
                write_key(
                    &mut Vec::new(),
                    &row_schema(),
                    &created,
                    AvroLogicalTypes::Debezium
                ),
                Err(Unfit)
            );
        }
    }
}
