//! Connect JSON written straight into a byte buffer: the hot path of the
//! JSON encoder.
//!
//! [`super::value_json`] builds a `serde_json::Value` tree, and
//! [`crate::event::envelope::ValueTree`] a Connect [`Value`] tree before
//! that, cloning every column name and string on the way. For envelopes
//! both trees are skipped: the envelope walk drives [`JsonFields`], which
//! writes each field as it is walked, and rows and values are written from
//! the event. The bytes are exactly those of the tree path written as
//! Jackson writes it (`json_text(&value_json(&envelope_value(..)))`, floats
//! in Java's layout, see [`crate::event::java_float`]), which the tests
//! compare against.

use base64::Engine;

use std::convert::Infallible;

use crate::event::envelope::{self, ConnectorInfo, EnvelopeWriter, FieldName, Stamp};
use crate::event::java_float;
use crate::event::metadata::TransactionBlock;
use crate::event::value::Value;
use crate::event::{ChangeEvent, ColumnSchema, MessageEvent};
use crate::lsn::Lsn;

/// Appends `s` as a JSON string (quoted and escaped).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn write_i64(out: &mut Vec<u8>, i: i64) {
    let mut buffer = itoa::Buffer::new();
    out.extend_from_slice(buffer.format(i).as_bytes());
}

fn write_u64(out: &mut Vec<u8>, u: u64) {
    let mut buffer = itoa::Buffer::new();
    out.extend_from_slice(buffer.format(u).as_bytes());
}

/// A float as JsonConverter writes it: Java's `Float.toString` /
/// `Double.toString` text, a number when finite, else the string Jackson
/// writes (`"NaN"`, `"Infinity"`, `"-Infinity"`).
fn write_float(out: &mut Vec<u8>, text: &str, finite: bool) {
    if finite {
        out.extend_from_slice(text.as_bytes());
    } else {
        write_str(out, text);
    }
}

/// Appends a Connect value as the JsonConverter writes it: the bytes of
/// `json_text(&value_json(value))`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Int8(i) => write_i64(out, i64::from(*i)),
        Value::Int16(i) => write_i64(out, i64::from(*i)),
        Value::Int32(i) => write_i64(out, i64::from(*i)),
        Value::Int64(i) => write_i64(out, *i),
        Value::Float32(f) => write_float(out, &java_float::f32_text(*f), f.is_finite()),
        Value::Float64(f) => write_float(out, &java_float::f64_text(*f), f.is_finite()),
        Value::String(s) => write_str(out, s),
        Value::Bytes(b) => write_base64(out, b),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Map(entries) | Value::Struct(entries) => {
            write_object(out, entries.iter().map(|(k, v)| (k.as_str(), v)));
        }
    }
}

/// Appends an object of `entries`, in order.
///
/// The tree path would keep the first position and the last value of a
/// repeated name (an insertion-ordered map); Connect structs and hstore
/// maps never repeat one.
fn write_object<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a str, &'a Value)>) {
    out.push(b'{');
    for (i, (name, value)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

/// A row as the `before` / `after` struct: column names in table order.
fn write_row(out: &mut Vec<u8>, columns: &[ColumnSchema], row: Option<&[Value]>) {
    match row {
        None => out.extend_from_slice(b"null"),
        Some(values) => write_object(
            out,
            columns
                .iter()
                .zip(values)
                .map(|(c, v)| (c.name.as_str(), v)),
        ),
    }
}

/// Appends `bytes` as the JsonConverter writes them: a base64 string.
fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    // Base64 needs no escaping.
    out.push(b'"');
    let start = out.len();
    let len = base64::encoded_len(bytes.len(), true).unwrap_or(0);
    out.resize(start + len, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(bytes, &mut out[start..])
        .unwrap_or(0);
    out.truncate(start + written);
    out.push(b'"');
}

/// The envelope walk's JSON writer: each field as `,"name":value`, a
/// struct as an object of its fields whose first comma becomes its opening
/// brace, so a field costs one copy of its key and no state.
struct JsonFields {
    out: Vec<u8>,
}

impl JsonFields {
    /// Appends the object whose fields `walk` writes.
    fn object(out: &mut Vec<u8>, walk: impl FnOnce(&mut JsonFields) -> Result<(), Infallible>) {
        let start = out.len();
        let mut fields = JsonFields {
            out: std::mem::take(out),
        };
        let Ok(()) = walk(&mut fields);
        *out = fields.out;
        close(out, start);
    }

    #[inline(always)]
    fn key(&mut self, name: FieldName) {
        self.out.extend_from_slice(name.json_key());
    }
}

/// Ends the object whose fields start at `start`: the first field's comma
/// becomes the opening brace.
#[inline(always)]
fn close(out: &mut Vec<u8>, start: usize) {
    match out.get_mut(start) {
        Some(comma) => *comma = b'{',
        None => out.push(b'{'),
    }
    out.push(b'}');
}

impl EnvelopeWriter for JsonFields {
    type Error = Infallible;

    #[inline(always)]
    fn string(&mut self, name: FieldName, value: &str) -> Result<(), Infallible> {
        self.key(name);
        write_str(&mut self.out, value);
        Ok(())
    }

    #[inline(always)]
    fn word(&mut self, name: FieldName, value: &'static str) -> Result<(), Infallible> {
        debug_assert!(value
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'));
        self.key(name);
        let out = &mut self.out;
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
        Ok(())
    }

    #[inline(always)]
    fn long(&mut self, name: FieldName, value: i64) -> Result<(), Infallible> {
        self.key(name);
        write_i64(&mut self.out, value);
        Ok(())
    }

    #[inline(always)]
    fn bytes(&mut self, name: FieldName, value: &[u8]) -> Result<(), Infallible> {
        self.key(name);
        write_base64(&mut self.out, value);
        Ok(())
    }

    #[inline(always)]
    fn null(&mut self, name: FieldName) -> Result<(), Infallible> {
        self.key(name);
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    #[inline(always)]
    fn row(
        &mut self,
        name: FieldName,
        columns: &[ColumnSchema],
        values: Option<&[Value]>,
    ) -> Result<(), Infallible> {
        self.key(name);
        write_row(&mut self.out, columns, values);
        Ok(())
    }

    /// Written from the numbers, escaped as the string's JSON is: the
    /// envelope's one string that needs escaping, in every record.
    #[inline(always)]
    fn lsn_sequence(
        &mut self,
        name: FieldName,
        first: Option<Lsn>,
        second: Lsn,
    ) -> Result<(), Infallible> {
        self.key(name);
        let out = &mut self.out;
        out.extend_from_slice(b"\"[");
        match first {
            Some(first) => {
                out.extend_from_slice(b"\\\"");
                write_u64(out, first.as_u64());
                out.extend_from_slice(b"\\\"");
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\\\"");
        write_u64(out, second.as_u64());
        out.extend_from_slice(b"\\\"]\"");
        Ok(())
    }

    #[inline(always)]
    fn structure<F>(&mut self, name: FieldName, fields: F) -> Result<(), Infallible>
    where
        F: FnOnce(&mut Self) -> Result<(), Infallible>,
    {
        self.key(name);
        let start = self.out.len();
        let Ok(()) = fields(self);
        close(&mut self.out, start);
        Ok(())
    }
}

/// Appends the envelope payload of `event`: the bytes of
/// `value_json(&envelope_value(event, info, transaction, now_micros))`.
pub fn write_envelope(
    out: &mut Vec<u8>,
    event: &ChangeEvent,
    info: &ConnectorInfo,
    transaction: Option<&TransactionBlock>,
    now_micros: i64,
) {
    let stamp = Stamp {
        now_micros,
        transaction,
    };
    JsonFields::object(out, |w| envelope::walk_change(w, event, info, stamp));
}

/// Appends the value payload of a logical decoding message record.
pub fn write_message(
    out: &mut Vec<u8>,
    message: &MessageEvent,
    info: &ConnectorInfo,
    stamp: Stamp<'_>,
) {
    JsonFields::object(out, |w| envelope::walk_message(w, message, info, stamp));
}

/// Appends the key payload of `event` (the bytes of
/// `value_json(&key_value(event)?)`); returns `false`, writing nothing,
/// for a null key.
pub fn write_key(out: &mut Vec<u8>, event: &ChangeEvent) -> bool {
    let Some(fields) = event.key_fields() else {
        return false;
    };
    out.push(b'{');
    for (n, (name, value)) in fields.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write_value(out, value);
    }
    if let Some((field, value)) = &event.table.routed_key_field {
        out.push(b',');
        write_str(out, field);
        out.push(b':');
        write_str(out, value);
    }
    out.push(b'}');
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::encode::json::value_json;
    use crate::event::envelope::{self, envelope_value, key_value};
    use crate::event::java_float::json_text;
    use crate::event::value::{ConnectSchema, ConnectType};
    use crate::event::{ColumnSchema, Op, SnapshotMarker, SourceInfo, TableSchema};
    use crate::lsn::Lsn;

    fn written(value: &Value) -> String {
        let mut out = Vec::new();
        write_value(&mut out, value);
        String::from_utf8(out).expect("utf-8")
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Boolean),
            any::<i8>().prop_map(Value::Int8),
            any::<i16>().prop_map(Value::Int16),
            any::<i32>().prop_map(Value::Int32),
            any::<i64>().prop_map(Value::Int64),
            any::<f32>().prop_map(Value::Float32),
            any::<f64>().prop_map(Value::Float64),
            Just(Value::Float64(f64::NAN)),
            Just(Value::Float32(f32::NEG_INFINITY)),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x1f\"\\\\/a-zé€😀]{0,12}".prop_map(Value::String),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            let unique = |entries: Vec<(String, Value)>| {
                // Connect structs and hstore maps never repeat a name.
                let mut seen = std::collections::HashSet::new();
                entries
                    .into_iter()
                    .filter(|(k, _)| seen.insert(k.clone()))
                    .collect::<Vec<_>>()
            };
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z\"é]{0,4}", inner.clone()), 0..6)
                    .prop_map(move |e| Value::Map(unique(e))),
                proptest::collection::vec(("[a-z_]{1,6}", inner), 0..6)
                    .prop_map(move |e| Value::Struct(unique(e))),
            ]
        })
    }

    proptest! {
        #[test]
        fn values_are_written_as_the_tree_path_prints_them(value in any_value()) {
            prop_assert_eq!(written(&value), json_text(&value_json(&value)));
        }
    }

    fn table(routed: bool) -> Arc<TableSchema> {
        let column = |name: &str, kind| ColumnSchema {
            name: name.to_owned(),
            type_oid: 0,
            type_modifier: -1,
            schema: ConnectSchema::primitive(kind).optional(),
        };
        let columns = vec![
            column("id", ConnectType::Int64),
            column("naïve \"quoted\"", ConnectType::String),
            column("amount", ConnectType::Bytes),
            column("ratio", ConnectType::Float64),
        ];
        let topic = "app.public.t";
        let row = envelope::row_schema(topic, &columns);
        Arc::new(TableSchema {
            relation_id: 1,
            schema: "public".into(),
            table: "t\"ü".into(),
            qualified_name: "public.t\"ü".into(),
            topic: topic.into(),
            key_schema: Some(envelope::key_schema(topic, &[&columns[0], &columns[1]])),
            envelope_schema: envelope::envelope_schema(topic, &row),
            row_schema: row,
            key_columns: vec![0, 1],
            routed_key_field: routed.then(|| {
                (
                    "__dbz__physicalTableIdentifier".into(),
                    "app.public.t_1".into(),
                )
            }),
            columns,
        })
    }

    fn row(id: i64) -> Vec<Value> {
        vec![
            Value::Int64(id),
            Value::String("line\nbreak \u{1}".into()),
            Value::Bytes(vec![1, 2, 255]),
            Value::Float64(f64::INFINITY),
        ]
    }

    #[test]
    fn envelopes_and_keys_are_written_as_the_tree_path_prints_them() {
        let info = ConnectorInfo {
            name: "app\"x".into(),
            db: "shop".into(),
            run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
        };
        let block = TransactionBlock {
            id: "7:100".into(),
            total_order: 3,
            data_collection_order: 2,
        };
        for (op, before, after, last_commit, transaction, routed) in [
            (
                Op::Create,
                None,
                Some(row(1)),
                Some(Lsn::new(99)),
                None,
                false,
            ),
            (
                Op::Update,
                Some(row(1)),
                Some(row(2)),
                None,
                Some(&block),
                true,
            ),
            (
                Op::Delete,
                Some(row(3)),
                None,
                Some(Lsn::new(5)),
                None,
                false,
            ),
            (Op::Truncate, None, None, None, None, false),
            (Op::Read, None, Some(row(-4)), None, None, true),
        ] {
            let event = ChangeEvent {
                table: table(routed),
                op,
                before,
                after,
                source: SourceInfo {
                    origin: None,
                    commit_time_micros: -1_234_567,
                    xid: u32::MAX,
                    lsn: Lsn::new(u64::MAX - 3),
                    last_commit_lsn: last_commit,
                    snapshot: if op == Op::Read {
                        SnapshotMarker::Last
                    } else {
                        SnapshotMarker::False
                    },
                },
                unmapped_key: Default::default(),
            };
            let mut out = Vec::new();
            write_envelope(&mut out, &event, &info, transaction, 1_700_000_000_123_456);
            let tree = value_json(&envelope_value(
                &event,
                &info,
                transaction,
                1_700_000_000_123_456,
            ));
            assert_eq!(String::from_utf8(out).unwrap(), json_text(&tree), "{op:?}");

            let mut key = Vec::new();
            let wrote = write_key(&mut key, &event);
            match key_value(&event) {
                Some(tree) => {
                    assert!(wrote, "{op:?}");
                    assert_eq!(
                        String::from_utf8(key).unwrap(),
                        json_text(&value_json(&tree))
                    );
                }
                None => assert!(!wrote && key.is_empty(), "{op:?}"),
            }
        }
    }
}
