//! Record headers as bytes: what the configured header converter
//! (Kafka Connect's `header.converter`) writes.
//!
//! - `SimpleHeaderConverter` (Connect's default): a string as its text,
//!   numbers and booleans as Java prints them, bytes as base64, and
//!   structs, maps and arrays as JSON-like text (`{"id":2}`)
//!   ([`Value::to_text`]); a null value gives no header. A Connect
//!   `Decimal` is a `BigDecimal` there, so its text is `BigDecimal.toString`
//!   (`2.25`, a bare number inside a struct: `{"k_num":2.25}`), never the
//!   base64 of its unscaled bytes.
//! - `JsonConverter` (Debezium Server's and the embedded engine's default
//!   with JSON records): the value's JSON, wrapped as
//!   `{"schema":…,"payload":…}` when its schemas are on.
//!
//! A key held in a header (`__debezium.newkey` / `oldkey`) is written by
//! the same converter as any other header, never by the key converter (so
//! never as Confluent-framed Avro).
//!
//! Debezium's context headers are the same on every record of a run, so
//! they are written once, when the writer is made, and kept for the
//! process (`interned`): every record then carries them without touching
//! a reference count that the snapshot workers, the stream and the sink
//! would otherwise share across cores.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

use super::json::connect::{enveloped, schema_json};
use super::json::write::write_value;
use super::options::HeaderConverter;
use crate::event::context::ContextHeader;
use crate::event::envelope::{self, key_value, ConnectorInfo};
use crate::event::record::{Header, HeaderValue, RecordKey};
use crate::event::value::{ConnectSchema, ConnectType, Value, DECIMAL_NAME};
use crate::source::types::java_big_decimal_string;

/// Writes headers as the configured converter does.
#[derive(Debug, Clone)]
pub struct HeaderWriter {
    converter: HeaderConverter,
    /// Whether the JSON converter wraps values with their schema.
    schemas: bool,
    /// The context headers' bytes, in [`ContextHeader::ALL`] order (boxed:
    /// the encoders live in an enum whose JSON variant is the hot one).
    context: Box<[Bytes; 4]>,
}

/// How many distinct header values [`interned`] keeps for the process: a
/// run id is new at every attempt, so a process that retries for weeks
/// would otherwise keep one more value per attempt.
const INTERNED_MAX: usize = 1024;

/// `bytes` as a `Bytes` of static bytes, each distinct value leaked once
/// (at most [`INTERNED_MAX`] of them; past that, shared by reference count
/// as any `Bytes`). Cloning and dropping a static `Bytes` touch no counter:
/// a shared one costs every record two atomic updates of one cache line,
/// made on one core and undone on another (2.5 % of an Avro snapshot's CPU
/// in a profile).
fn interned(bytes: Vec<u8>) -> Bytes {
    static INTERNED: Mutex<BTreeSet<&'static [u8]>> = Mutex::new(BTreeSet::new());
    let mut values = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    keep(&mut values, bytes, INTERNED_MAX)
}

/// [`interned`] with its set of kept values and their bound.
fn keep(values: &mut BTreeSet<&'static [u8]>, bytes: Vec<u8>, max: usize) -> Bytes {
    if let Some(&kept) = values.get(bytes.as_slice()) {
        return Bytes::from_static(kept);
    }
    if values.len() >= max {
        return Bytes::from(bytes);
    }
    let kept: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    values.insert(kept);
    Bytes::from_static(kept)
}

impl HeaderWriter {
    /// A writer for `converter` (`schemas`: the JSON converter's
    /// `schemas.enable`), for the connector and run `info` names.
    pub fn new(converter: HeaderConverter, schemas: bool, info: &ConnectorInfo) -> Self {
        let mut writer = HeaderWriter {
            converter,
            schemas,
            context: Default::default(),
        };
        let string = ConnectSchema::primitive(ConnectType::String);
        writer.context = Box::new(ContextHeader::ALL.map(|header| {
            let value = Value::String(header.value(&info.name, &info.run_id));
            interned(writer.bytes(&value, &string).unwrap_or_default())
        }));
        writer
    }

    /// The bytes of `headers`, in order; a header whose value the
    /// converter writes as nothing is left out.
    pub fn write(&self, headers: Vec<Header<'_>>) -> Vec<(&'static str, Bytes)> {
        // No allocation for a record without headers; room for the
        // position header the sink may add (`sink::position`).
        let mut encoded = Vec::with_capacity(if headers.is_empty() {
            0
        } else {
            headers.len() + 1
        });
        for Header { name, value } in headers {
            let bytes = match value {
                HeaderValue::Value(value, schema) => self.bytes(&value, &schema).map(Bytes::from),
                HeaderValue::Key(key) => Some(Bytes::from(self.key(key))),
                HeaderValue::Context(header) => {
                    let i = ContextHeader::ALL.iter().position(|h| *h == header);
                    i.and_then(|i| self.context.get(i)).cloned()
                }
            };
            encoded.extend(bytes.map(|bytes| (name, bytes)));
        }
        encoded
    }

    /// A key in a header: the key struct under its schema; a null key as
    /// an empty header.
    fn key(&self, key: RecordKey<'_>) -> Vec<u8> {
        let (schema, value) = match key {
            RecordKey::Table(event) => match (&event.table.key_schema, key_value(event)) {
                (Some(schema), Some(value)) => (schema.clone(), value),
                _ => return Vec::new(),
            },
            RecordKey::Message(message) => (
                envelope::message_key_schema(),
                envelope::message_key(message),
            ),
            RecordKey::Metadata(record) => (record.kind().schemas().0, record.key()),
            RecordKey::Data(data) => ((*data.schema).clone(), data.value),
        };
        self.bytes(&value, &schema).unwrap_or_default()
    }

    /// `value` (of `schema`) as the converter writes it.
    fn bytes(&self, value: &Value, schema: &ConnectSchema) -> Option<Vec<u8>> {
        match self.converter {
            HeaderConverter::Simple => simple_text(value, schema).map(String::into_bytes),
            HeaderConverter::Json => {
                let schema = self.schemas.then(|| schema_json(schema, None).to_string());
                enveloped(schema.as_deref(), |out| {
                    write_value(out, value);
                    true
                })
            }
        }
    }
}

/// `value` as `SimpleHeaderConverter` writes it (`Values.convertToString`):
/// [`Value::to_text`], but with each Connect `Decimal` in it as its
/// `BigDecimal.toString`.
fn simple_text(value: &Value, schema: &ConnectSchema) -> Option<String> {
    if !has_decimal(schema) || *value == Value::Null {
        return value.to_text();
    }
    let mut out = String::new();
    embedded_text(&mut out, value, schema);
    Some(out)
}

/// Whether `schema` is, or holds, a Connect `Decimal`.
fn has_decimal(schema: &ConnectSchema) -> bool {
    decimal_scale(schema).is_some()
        || schema.fields.iter().any(|f| has_decimal(&f.schema))
        || schema.items.as_deref().is_some_and(has_decimal)
}

/// The scale of a Connect `Decimal` schema.
fn decimal_scale(schema: &ConnectSchema) -> Option<usize> {
    (schema.name.as_deref() == Some(DECIMAL_NAME))
        .then(|| schema.parameters.get("scale")?.parse().ok())
        .flatten()
}

/// Appends `value` as `Values.append` embeds it: decimals as their text,
/// structs and arrays element by element, anything else as its JSON.
fn embedded_text(out: &mut String, value: &Value, schema: &ConnectSchema) {
    match (value, decimal_scale(schema)) {
        (Value::Bytes(unscaled), Some(scale)) => {
            let (negative, digits) = unscaled_digits(unscaled);
            out.push_str(&java_big_decimal_string(negative, &digits, scale));
        }
        (Value::Struct(fields), _) => {
            out.push('{');
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(name).unwrap_or_default());
                out.push(':');
                match schema.fields.iter().find(|f| f.name == *name) {
                    Some(f) => embedded_text(out, field, &f.schema),
                    None => out.push_str(&serde_json::to_string(field).unwrap_or_default()),
                }
            }
            out.push('}');
        }
        (Value::Array(items), _) if schema.items.is_some() => {
            let item_schema = schema.items.as_deref().unwrap_or(schema);
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                embedded_text(out, item, item_schema);
            }
            out.push(']');
        }
        _ => out.push_str(&serde_json::to_string(value).unwrap_or_default()),
    }
}

/// The sign and decimal digits of a big-endian two's complement integer
/// (a Connect `Decimal`'s unscaled bytes, `BigInteger.toByteArray`).
fn unscaled_digits(bytes: &[u8]) -> (bool, String) {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut magnitude = bytes.to_vec();
    if negative {
        // Two's complement negation: invert, then add one.
        let mut carry = true;
        for b in magnitude.iter_mut().rev() {
            let (sum, overflow) = (!*b).overflowing_add(u8::from(carry));
            *b = sum;
            carry = overflow;
        }
    }
    // Long division by ten, least significant digit first.
    let mut digits = Vec::new();
    while magnitude.iter().any(|&b| b != 0) {
        let mut remainder = 0u32;
        for b in magnitude.iter_mut() {
            let current = (remainder << 8) | u32::from(*b);
            *b = (current / 10) as u8;
            remainder = current % 10;
        }
        digits.push(char::from(b'0' + remainder as u8));
    }
    if digits.is_empty() {
        digits.push('0');
    }
    (negative, digits.iter().rev().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ConnectorInfo {
        ConnectorInfo {
            name: "app".into(),
            db: "shop".into(),
            run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
        }
    }

    #[test]
    fn each_value_is_kept_once_and_only_up_to_the_bound() {
        let mut values = BTreeSet::new();
        let run = keep(&mut values, b"run-1".to_vec(), 2);
        let again = keep(&mut values, b"run-1".to_vec(), 2);
        assert_eq!((&run[..], run.as_ptr()), (&b"run-1"[..], again.as_ptr()));
        let other = keep(&mut values, b"run-2".to_vec(), 2);
        assert_ne!(other.as_ptr(), run.as_ptr());
        // Past the bound a value is still right, only not kept.
        let past = keep(&mut values, b"run-3".to_vec(), 2);
        let past_again = keep(&mut values, b"run-3".to_vec(), 2);
        assert_eq!(&past[..], b"run-3");
        assert_ne!(past.as_ptr(), past_again.as_ptr());
        assert_eq!(values.len(), 2);
    }

    #[test]
    fn writers_of_one_run_share_the_context_headers_bytes() {
        let writer = || HeaderWriter::new(HeaderConverter::Json, true, &info());
        let (a, b) = (writer(), writer());
        for (a, b) in a.context.iter().zip(b.context.iter()) {
            assert_eq!(a.as_ptr(), b.as_ptr());
        }
    }

    fn text(headers: &[(&str, Bytes)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v).into_owned()))
            .collect()
    }

    #[test]
    fn context_headers_as_each_converter_writes_them() {
        let simple = HeaderWriter::new(HeaderConverter::Simple, true, &info());
        assert_eq!(
            text(&simple.write(Header::context().collect())),
            [
                ("__debezium.context.connectorLogicalName", "app"),
                ("__debezium.context.taskId", "0"),
                ("__debezium.context.connectorName", "postgresql"),
                (
                    "__debezium.context.runId",
                    "0190a0b0-0000-7000-8000-000000000000"
                ),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
        let json = HeaderWriter::new(HeaderConverter::Json, true, &info());
        assert_eq!(
            text(&json.write(Header::context().take(1).collect()))[0].1,
            r#"{"schema":{"type":"string","optional":false},"payload":"app"}"#
        );
        let bare = HeaderWriter::new(HeaderConverter::Json, false, &info());
        assert_eq!(
            text(&bare.write(Header::context().skip(1).take(1).collect()))[0].1,
            r#""0""#
        );
    }

    #[test]
    fn a_struct_is_json_like_text_under_the_simple_converter() {
        let schema = std::sync::Arc::new(ConnectSchema::structure(
            "app.public.t.Key",
            vec![crate::event::value::Field {
                name: "id".into(),
                schema: ConnectSchema::primitive(ConnectType::Int32),
            }],
        ));
        let value = Value::Struct(vec![("id".into(), Value::Int32(2))]);
        let header = || vec![Header::value("k", value.clone(), schema.clone())];
        let simple = HeaderWriter::new(HeaderConverter::Simple, true, &info());
        assert_eq!(text(&simple.write(header()))[0].1, r#"{"id":2}"#);
        let json = HeaderWriter::new(HeaderConverter::Json, true, &info());
        assert_eq!(
            text(&json.write(header()))[0].1,
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"app.public.t.Key"},"payload":{"id":2}}"#
        );
        let null = vec![Header::value("n", Value::Null, schema.clone())];
        assert!(simple.write(null).is_empty(), "no header for null");
    }

    #[test]
    fn decimals_are_their_big_decimal_text_under_the_simple_converter() {
        // numeric(5,2), as in a key struct with a string beside it.
        let decimal = crate::source::types::numeric_column_schema(5, 2);
        let field = |name: &str, schema: ConnectSchema| crate::event::value::Field {
            name: name.into(),
            schema,
        };
        let key = std::sync::Arc::new(ConnectSchema::structure(
            "app.public.t.Key",
            vec![
                field("k_num", decimal.clone()),
                field("k", ConnectSchema::primitive(ConnectType::String)),
            ],
        ));
        let value = Value::Struct(vec![
            ("k_num".into(), Value::Bytes(vec![0x00, 0xe1])),
            ("k".into(), Value::String("a".into())),
        ]);
        let simple = HeaderWriter::new(HeaderConverter::Simple, true, &info());
        let headers = vec![
            Header::value("key", value, key),
            Header::value(
                "neg",
                Value::Bytes(vec![0xff, 0x6a]),
                decimal.clone().into(),
            ),
            Header::value("tiny", Value::Bytes(vec![0x01]), {
                let mut tiny = decimal;
                tiny.parameters.insert("scale".into(), "7".into());
                tiny.into()
            }),
        ];
        assert_eq!(
            text(&simple.write(headers)),
            [
                ("key", r#"{"k_num":2.25,"k":"a"}"#),
                ("neg", "-1.50"),
                ("tiny", "1E-7"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }
}
