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
mod tests;
