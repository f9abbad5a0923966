//! Column values and their schemas in the Kafka Connect data model.
//!
//! Debezium describes every column as a Kafka Connect schema (a primitive type,
//! optionally a logical `name` such as `io.debezium.time.MicroTimestamp`, and
//! `parameters`), and every value as the matching Connect value. Consumers
//! (JSON with `schemas.enable`, Avro through the registry) see exactly that
//! model, so the connector decodes Postgres values straight into it: one
//! [`Value`] per column, described by one [`ConnectSchema`] per column. The
//! encoders only translate this model into their wire formats.
//!
//! A value's JSON form (`Serialize`) and text form ([`Value::to_text`]) are
//! Kafka Connect's own, defined here once: the JSON encoder's payloads,
//! record headers and the outbox router's topic names all use them.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use super::java_float::{f32_text, f64_text, json_text};

/// A Kafka Connect primitive or structural schema type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    String,
    Bytes,
    Array,
    Map,
    Struct,
}

impl ConnectType {
    /// The name Kafka Connect's JSON converter writes in `"type"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConnectType::Boolean => "boolean",
            ConnectType::Int8 => "int8",
            ConnectType::Int16 => "int16",
            ConnectType::Int32 => "int32",
            ConnectType::Int64 => "int64",
            ConnectType::Float32 => "float",
            ConnectType::Float64 => "double",
            ConnectType::String => "string",
            ConnectType::Bytes => "bytes",
            ConnectType::Array => "array",
            ConnectType::Map => "map",
            ConnectType::Struct => "struct",
        }
    }
}

/// Kafka Connect's logical name of a decimal (`bytes`, the unscaled value).
pub const DECIMAL_NAME: &str = "org.apache.kafka.connect.data.Decimal";

/// The schema parameters Debezium's column mappers add, in the order they
/// add them (`TruncateColumn`, `MaskStrings`,
/// `PropagateSourceMetadataToSchemaParameter`).
pub const MAPPER_PARAMETERS: [&str; 7] = [
    "truncateLength",
    "masked",
    "__debezium.source.column.type",
    "__debezium.source.column.length",
    "__debezium.source.column.scale",
    "__debezium.source.column.comment",
    "__debezium.source.column.name",
];

/// The schema of one value: what Debezium would declare for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectSchema {
    pub kind: ConnectType,
    /// Logical name, e.g. `io.debezium.time.Date` or `org.apache.kafka.connect.data.Decimal`.
    pub name: Option<String>,
    /// Schema version (`connect.version`), set for a few logical types.
    pub version: Option<i32>,
    /// Documentation (`doc`; Avro `connect.doc`), set for a few logical types.
    pub doc: Option<String>,
    /// Schema parameters, e.g. `scale` for decimals or `allowed` for enums.
    pub parameters: BTreeMap<String, String>,
    pub optional: bool,
    /// Default value, if the schema declares one.
    pub default: Option<Value>,
    /// Element schema of an array.
    pub items: Option<Box<ConnectSchema>>,
    /// Key and value schemas of a map.
    pub map: Option<Box<(ConnectSchema, ConnectSchema)>>,
    /// Fields of a struct, in order.
    pub fields: Vec<Field>,
}

/// A named field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub schema: ConnectSchema,
}

impl ConnectSchema {
    /// A schema of a primitive type, without name or parameters.
    pub fn primitive(kind: ConnectType) -> Self {
        ConnectSchema {
            kind,
            name: None,
            version: None,
            doc: None,
            parameters: BTreeMap::new(),
            optional: false,
            default: None,
            items: None,
            map: None,
            fields: Vec::new(),
        }
    }

    /// A primitive schema carrying a logical name (e.g. `io.debezium.time.Date`).
    pub fn named(kind: ConnectType, name: &str) -> Self {
        ConnectSchema {
            name: Some(name.to_owned()),
            ..ConnectSchema::primitive(kind)
        }
    }

    /// An array of `items`.
    pub fn array(items: ConnectSchema) -> Self {
        ConnectSchema {
            items: Some(Box::new(items)),
            ..ConnectSchema::primitive(ConnectType::Array)
        }
    }

    /// A map from `keys` to `values`.
    pub fn map(keys: ConnectSchema, values: ConnectSchema) -> Self {
        ConnectSchema {
            map: Some(Box::new((keys, values))),
            ..ConnectSchema::primitive(ConnectType::Map)
        }
    }

    /// A struct with the given name and fields.
    pub fn structure(name: &str, fields: Vec<Field>) -> Self {
        ConnectSchema {
            name: Some(name.to_owned()),
            fields,
            ..ConnectSchema::primitive(ConnectType::Struct)
        }
    }

    /// The same schema, marked optional.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The same schema with one more parameter.
    pub fn with_parameter(mut self, key: &str, value: impl Into<String>) -> Self {
        self.parameters.insert(key.to_owned(), value.into());
        self
    }

    /// The parameters in the order Kafka Connect writes them: a decimal's
    /// `scale` first, as `Decimal.builder(scale)` puts it before anything
    /// added later (`connect.decimal.precision`), the others alphabetically
    /// (each of Debezium's other schemas has at most one), then those of
    /// Debezium's column mappers in the order they add them
    /// ([`MAPPER_PARAMETERS`]), after the type's own.
    pub fn parameters_in_connect_order(&self) -> impl Iterator<Item = (&str, &str)> {
        let scale_first = self.name.as_deref() == Some(DECIMAL_NAME);
        let rank = |key: &str| match MAPPER_PARAMETERS.iter().position(|p| *p == key) {
            _ if scale_first && key == "scale" => 0,
            Some(position) => 2 + position,
            None => 1,
        };
        let mut params: Vec<(&str, &str)> = self
            .parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        params.sort_by_key(|(k, _)| rank(k));
        params.into_iter()
    }

    /// The same schema with a `connect.version`.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// The same schema with documentation `doc`.
    pub fn with_doc(mut self, doc: &str) -> Self {
        self.doc = Some(doc.to_owned());
        self
    }
}

/// A value in the Kafka Connect data model.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    String(String),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    /// A map with string keys (the only maps Debezium's PostgreSQL connector
    /// writes: `hstore.handling.mode=map`), entries in iteration order.
    Map(Vec<(String, Value)>),
    /// Struct fields in schema order.
    Struct(Vec<(String, Value)>),
}

/// The JSON form of a value, as Kafka Connect's `JsonConverter` writes a
/// payload: structs and maps as objects (fields in order), bytes as base64,
/// non-finite floats as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`,
/// and a `float32` as the double of the digits Java's `Float.toString` gives
/// it, not its widened `f64`. A tree holds numbers, not their layout:
/// [`super::java_float::json_text`] writes one as Jackson does (`1.0E10`).
impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Boolean(b) => serializer.serialize_bool(*b),
            Value::Int8(i) => serializer.serialize_i8(*i),
            Value::Int16(i) => serializer.serialize_i16(*i),
            Value::Int32(i) => serializer.serialize_i32(*i),
            Value::Int64(i) => serializer.serialize_i64(*i),
            Value::Float32(f) if f.is_finite() => match f32_text(*f).parse::<f64>() {
                Ok(wide) => serializer.serialize_f64(wide),
                Err(_) => serializer.serialize_unit(),
            },
            Value::Float32(f) => serialize_float(serializer, f64::from(*f)),
            Value::Float64(f) => serialize_float(serializer, *f),
            Value::String(s) => serializer.serialize_str(s),
            Value::Bytes(b) => serializer.serialize_str(&BASE64.encode(b)),
            Value::Array(items) => serializer.collect_seq(items),
            Value::Map(entries) | Value::Struct(entries) => {
                serializer.collect_map(entries.iter().map(|(k, v)| (k, v)))
            }
        }
    }
}

fn serialize_float<S: serde::Serializer>(serializer: S, f: f64) -> Result<S::Ok, S::Error> {
    if f.is_nan() {
        serializer.serialize_str("NaN")
    } else if f.is_infinite() {
        serializer.serialize_str(if f > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        serializer.serialize_f64(f)
    }
}

impl Value {
    /// The value as text, as Kafka Connect's `SimpleHeaderConverter` writes
    /// a header (and `StringConverter` a key): a string as itself, numbers
    /// and booleans as printed, bytes as base64, arrays, maps and structs
    /// as their JSON. `None` for null.
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::String(s) => s.clone(),
            Value::Boolean(b) => b.to_string(),
            Value::Int8(i) => i.to_string(),
            Value::Int16(i) => i.to_string(),
            Value::Int32(i) => i.to_string(),
            Value::Int64(i) => i.to_string(),
            // `String.valueOf`: Java's layout (`1.0E10`, `NaN`).
            Value::Float32(f) => f32_text(*f),
            Value::Float64(f) => f64_text(*f),
            Value::Bytes(b) => BASE64.encode(b),
            Value::Array(_) | Value::Map(_) | Value::Struct(_) => {
                // Serializing a Value cannot fail: every map key is a string.
                json_text(&serde_json::to_value(self).unwrap_or_default())
            }
        })
    }
}

/// A UUID's 16 bytes as its canonical lowercase text
/// (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`), as Java's `UUID.toString`
/// writes it.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
