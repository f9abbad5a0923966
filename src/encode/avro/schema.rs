//! Kafka Connect schemas as Avro schemas, the way Confluent's AvroConverter
//! writes Debezium's (`AvroData.fromConnectSchema` with its defaults:
//! `connect.meta.data=true`, enhanced Avro schema support off).
//!
//! The rules, in the order the converter applies them:
//! - A struct becomes a record; its Connect name splits at the last dot into
//!   `name` and `namespace` (`app.public.t.Envelope` is record `Envelope` in
//!   namespace `app.public.t`). A record name seen a second time in the same
//!   schema is a reference to the first definition (`before` and `after`
//!   share one `Value` record): Avro forbids defining a name twice.
//! - `int8` / `int16` become `int` with `connect.type`; `int32` `int`,
//!   `int64` `long`, `float32` `float`, `float64` `double`.
//! - Metadata rides on the type as properties, in this order:
//!   `connect.doc`, `connect.version`, `connect.parameters`,
//!   `connect.default`, `connect.name`, `connect.type`.
//! - `org.apache.kafka.connect.data.Decimal` is `bytes` with `scale` and
//!   `precision` (from `connect.decimal.precision`, 64 when absent) first and
//!   `logicalType: decimal` last.
//! - An optional schema is the union `["null", T]`, with field default
//!   `null`; an optional schema with a non-null Connect default is
//!   `[T, "null"]` with that default (so `source.snapshot` defaults to
//!   `"false"`); an optional struct is always `["null", record]`.
//!
//! Properties are written in the order Avro's Java `Schema.toString` writes
//! them, so a subject Debezium registered and the same subject registered by
//! pgcdc-kafka hold byte-identical schemas where the Connect schemas agree.
//! Connect parameters are kept in a sorted map here, so their order is
//! alphabetical, except that a decimal's `scale` comes first as
//! `Decimal.builder` puts it.
//!
//! With [`AvroLogicalTypes::Native`], Debezium's temporal and UUID types use
//! Avro's logical types instead (see [`NativeType`]); such a type carries no
//! `connect.*` property, since the converter would read `connect.name`
//! against the logical type and refuse the schema.

use std::collections::HashMap;

use serde_json::{Map, Value as Json};

use crate::encode::options::AvroLogicalTypes;
use crate::event::value::{ConnectSchema, ConnectType, Value};

/// Kafka Connect's decimal logical type.
pub use crate::event::value::DECIMAL_NAME;
/// The Connect parameter Debezium puts a decimal's precision in.
pub const DECIMAL_PRECISION_PARAMETER: &str = "connect.decimal.precision";
/// AvroData's `CONNECT_AVRO_DECIMAL_PRECISION_DEFAULT`.
const DEFAULT_DECIMAL_PRECISION: i64 = 64;
/// Record name and namespace AvroData gives a struct without a name.
const DEFAULT_RECORD_NAME: &str = "io.confluent.connect.avro.ConnectDefault";

/// A Connect schema that has no Avro form.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "{what} {name:?} is not a valid Avro name (a letter or '_', then letters, digits or \
         '_'); rename it or use --format json"
    )]
    InvalidName { what: &'static str, name: String },
    #[error(
        "two different structs are both named {name:?} in one schema, which Avro cannot express"
    )]
    Redefined { name: String },
    #[error("Kafka Connect {kind} schemas have no Avro form in pgcdc-kafka")]
    Unsupported { kind: &'static str },
    #[error("decimal parameter {parameter}={value:?} is not an integer")]
    DecimalParameter {
        parameter: &'static str,
        value: String,
    },
    #[error("the derived Avro schema does not parse; this is a bug in pgcdc-kafka")]
    Parse(#[source] apache_avro::Error),
}

/// The Avro schema of one Connect schema: the text registered with the
/// registry and its parsed form for writing.
#[derive(Debug, Clone)]
pub struct AvroSchema {
    /// Canonical JSON text, as registered.
    pub json: String,
    /// The same schema, parsed by apache-avro.
    pub parsed: apache_avro::Schema,
}

/// An Avro logical type that replaces a Debezium type in
/// [`AvroLogicalTypes::Native`] mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeType {
    /// `io.debezium.time.Date` (int32 days) as `date`.
    Date,
    /// `io.debezium.time.Time` (int32 ms) as `time-millis`.
    TimeMillis,
    /// `io.debezium.time.MicroTime` (int64 µs) as `time-micros`.
    TimeMicros,
    /// `io.debezium.time.Timestamp` (int64 ms) as `timestamp-millis`.
    TimestampMillis,
    /// `io.debezium.time.MicroTimestamp` (int64 µs) as `timestamp-micros`.
    TimestampMicros,
    /// `io.debezium.time.ZonedTimestamp` (ISO-8601 string in UTC) as
    /// `timestamp-micros`.
    ZonedTimestamp,
    /// `io.debezium.data.Uuid` (string) as `string` with logical type `uuid`.
    Uuid,
}

impl NativeType {
    /// The native type standing in for `schema`, if `logical` asks for them.
    pub fn of(schema: &ConnectSchema, logical: AvroLogicalTypes) -> Option<NativeType> {
        if logical != AvroLogicalTypes::Native {
            return None;
        }
        use ConnectType as C;
        Some(match (schema.kind, schema.name.as_deref()?) {
            (C::Int32, "io.debezium.time.Date") => NativeType::Date,
            (C::Int32, "io.debezium.time.Time") => NativeType::TimeMillis,
            (C::Int64, "io.debezium.time.MicroTime") => NativeType::TimeMicros,
            (C::Int64, "io.debezium.time.Timestamp") => NativeType::TimestampMillis,
            (C::Int64, "io.debezium.time.MicroTimestamp") => NativeType::TimestampMicros,
            (C::String, "io.debezium.time.ZonedTimestamp") => NativeType::ZonedTimestamp,
            (C::String, "io.debezium.data.Uuid") => NativeType::Uuid,
            _ => return None,
        })
    }

    fn avro(self) -> (&'static str, &'static str) {
        match self {
            NativeType::Date => ("int", "date"),
            NativeType::TimeMillis => ("int", "time-millis"),
            NativeType::TimeMicros => ("long", "time-micros"),
            NativeType::TimestampMillis => ("long", "timestamp-millis"),
            NativeType::TimestampMicros | NativeType::ZonedTimestamp => {
                ("long", "timestamp-micros")
            }
            NativeType::Uuid => ("string", "uuid"),
        }
    }
}

/// Whether an optional schema's union puts `null` first (index 0).
///
/// It does unless the schema has a non-null default (Avro requires a union
/// field's default to match its first branch); structs always put it first.
pub fn null_first(schema: &ConnectSchema) -> bool {
    schema.kind == ConnectType::Struct || schema.default.is_none()
}

/// Precision and scale of a Connect decimal schema, as AvroData reads them.
fn decimal_precision_scale(schema: &ConnectSchema) -> Result<(i64, i64), SchemaError> {
    let parse = |parameter: &'static str, default: i64| match schema.parameters.get(parameter) {
        None => Ok(default),
        Some(value) => value.parse().map_err(|_| SchemaError::DecimalParameter {
            parameter,
            value: value.clone(),
        }),
    };
    Ok((
        parse(DECIMAL_PRECISION_PARAMETER, DEFAULT_DECIMAL_PRECISION)?,
        parse("scale", 0)?,
    ))
}

/// Whether values of `schema` are written as Avro decimals (rather than
/// plain bytes): a Connect decimal whose scale is within `0..=precision`.
/// Outside that range (Postgres 15 allows `numeric(3,5)` and `numeric(3,-1)`)
/// the converter writes the same properties, but Avro readers ignore the
/// logical type, so the value is plain bytes.
pub fn is_avro_decimal(schema: &ConnectSchema) -> bool {
    schema.kind == ConnectType::Bytes
        && schema.name.as_deref() == Some(DECIMAL_NAME)
        && decimal_precision_scale(schema)
            .is_ok_and(|(precision, scale)| precision >= 1 && (0..=precision).contains(&scale))
}

/// Translates `schema` into its Avro form.
///
/// # Errors
/// When a name is not a valid Avro name, two different structs share a name,
/// or the schema uses a Connect type with no Avro form here (maps with keys
/// other than required strings).
pub fn avro_schema(
    schema: &ConnectSchema,
    logical: AvroLogicalTypes,
) -> Result<AvroSchema, SchemaError> {
    let json = avro_json(schema, logical)?;
    // Every rule above yields a valid Avro schema: a parse failure means the
    // translation itself is wrong.
    let parsed = apache_avro::Schema::parse(&json).map_err(SchemaError::Parse)?;
    Ok(AvroSchema {
        json: json.to_string(),
        parsed,
    })
}

/// The Avro schema of `schema` as JSON, as the registry receives it.
///
/// # Errors
/// As [`avro_schema`].
pub fn avro_json(schema: &ConnectSchema, logical: AvroLogicalTypes) -> Result<Json, SchemaError> {
    Translator {
        logical,
        defined: HashMap::new(),
        namespace: None,
    }
    .schema(schema)
}

struct Translator {
    logical: AvroLogicalTypes,
    /// Records defined so far, by full name, as required (non-optional) schemas.
    defined: HashMap<String, ConnectSchema>,
    /// The enclosing record's namespace, which names inside it default to.
    namespace: Option<String>,
}

impl Translator {
    fn schema(&mut self, schema: &ConnectSchema) -> Result<Json, SchemaError> {
        if !schema.optional {
            return self.base(schema);
        }
        let required = ConnectSchema {
            optional: false,
            ..schema.clone()
        };
        let base = self.base(&required)?;
        Ok(if null_first(schema) {
            Json::Array(vec![Json::from("null"), base])
        } else {
            Json::Array(vec![base, Json::from("null")])
        })
    }

    /// The schema without its optionality.
    fn base(&mut self, schema: &ConnectSchema) -> Result<Json, SchemaError> {
        if let Some(native) = NativeType::of(schema, self.logical) {
            let (kind, logical_type) = native.avro();
            let mut m = Map::new();
            m.insert("type".into(), Json::from(kind));
            m.insert("logicalType".into(), Json::from(logical_type));
            return Ok(Json::Object(m));
        }
        use ConnectType as C;
        let (kind, connect_type) = match schema.kind {
            C::Struct => return self.record(schema),
            C::Map => ("map", None),
            C::Array => ("array", None),
            C::Int8 => ("int", Some("int8")),
            C::Int16 => ("int", Some("int16")),
            C::Int32 => ("int", None),
            C::Int64 => ("long", None),
            C::Float32 => ("float", None),
            C::Float64 => ("double", None),
            C::Boolean => ("boolean", None),
            C::String => ("string", None),
            C::Bytes => ("bytes", None),
        };
        let mut m = Map::new();
        m.insert("type".into(), Json::from(kind));
        let decimal = schema.kind == C::Bytes && schema.name.as_deref() == Some(DECIMAL_NAME);
        if decimal {
            let (precision, scale) = decimal_precision_scale(schema)?;
            m.insert("scale".into(), Json::from(scale));
            m.insert("precision".into(), Json::from(precision));
        }
        if let Some(items) = &schema.items {
            m.insert("items".into(), self.schema(items)?);
        }
        if schema.kind == C::Map {
            // AvroData writes a map with required string keys as an Avro map; other
            // key types need its array-of-entries form, which nothing here produces.
            match schema.map.as_deref() {
                Some((keys, values)) if keys.kind == C::String && !keys.optional => {
                    m.insert("values".into(), self.schema(values)?);
                }
                _ => {
                    return Err(SchemaError::Unsupported {
                        kind: "map without required string keys",
                    })
                }
            }
        }
        connect_properties(&mut m, schema, connect_type);
        if decimal {
            m.insert("logicalType".into(), Json::from("decimal"));
        } else if let Some(logical_type) = connect_logical_type(schema) {
            m.insert("logicalType".into(), Json::from(logical_type));
        }
        Ok(if m.len() == 1 {
            Json::from(kind)
        } else {
            Json::Object(m)
        })
    }

    fn record(&mut self, schema: &ConnectSchema) -> Result<Json, SchemaError> {
        let full_name = schema.name.as_deref().unwrap_or(DEFAULT_RECORD_NAME);
        let (namespace, name) = match full_name.rsplit_once('.') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, full_name),
        };
        check_name("record name", name)?;
        if let Some(namespace) = namespace {
            for part in namespace.split('.') {
                check_name("namespace part", part)?;
            }
        }
        if let Some(first) = self.defined.get(full_name) {
            // AvroData keeps the first definition of a name and refers to
            // it afterwards, dropping a later one's own `connect.*`
            // metadata (parameters such as the source column type, doc,
            // version); only different fields cannot be expressed.
            if first.fields != schema.fields {
                return Err(SchemaError::Redefined {
                    name: full_name.to_owned(),
                });
            }
            // Avro's `getQualified`: the short name inside the same namespace.
            return Ok(Json::from(match (namespace, self.namespace.as_deref()) {
                (None, _) => name,
                (Some(ns), Some(enclosing)) if ns == enclosing => name,
                _ => full_name,
            }));
        }
        self.defined.insert(full_name.to_owned(), schema.clone());

        let mut m = Map::new();
        m.insert("type".into(), Json::from("record"));
        m.insert("name".into(), Json::from(name));
        match (namespace, self.namespace.as_deref()) {
            (Some(ns), enclosing) if Some(ns) != enclosing => {
                m.insert("namespace".into(), Json::from(ns));
            }
            (None, Some(_)) => {
                m.insert("namespace".into(), Json::from(""));
            }
            _ => {}
        }
        let enclosing = std::mem::replace(&mut self.namespace, namespace.map(str::to_owned));
        let fields = schema
            .fields
            .iter()
            .map(|field| {
                check_name("field name", &field.name)?;
                let mut f = Map::new();
                f.insert("name".into(), Json::from(field.name.as_str()));
                f.insert("type".into(), self.schema(&field.schema)?);
                if let Some(default) = &field.schema.default {
                    f.insert("default".into(), default_json(default));
                } else if field.schema.optional {
                    f.insert("default".into(), Json::Null);
                }
                Ok(Json::Object(f))
            })
            .collect::<Result<Vec<_>, SchemaError>>();
        self.namespace = enclosing;
        m.insert("fields".into(), Json::Array(fields?));
        connect_properties(&mut m, schema, None);
        Ok(Json::Object(m))
    }
}

/// The `connect.*` properties AvroData puts on a (non-union) type.
fn connect_properties(
    m: &mut Map<String, Json>,
    schema: &ConnectSchema,
    connect_type: Option<&str>,
) {
    if let Some(doc) = &schema.doc {
        m.insert("connect.doc".into(), Json::from(doc.as_str()));
    }
    if let Some(version) = schema.version {
        m.insert("connect.version".into(), Json::from(version));
    }
    if !schema.parameters.is_empty() {
        let parameters = schema
            .parameters_in_connect_order()
            .map(|(k, v)| (k.to_owned(), Json::from(v)))
            .collect();
        m.insert("connect.parameters".into(), Json::Object(parameters));
    }
    if let Some(default) = &schema.default {
        m.insert("connect.default".into(), default_json(default));
    }
    if let Some(name) = &schema.name {
        m.insert("connect.name".into(), Json::from(name.as_str()));
    }
    if let Some(connect_type) = connect_type {
        m.insert("connect.type".into(), Json::from(connect_type));
    }
}

/// Logical types AvroData derives from Kafka Connect's own logical names.
fn connect_logical_type(schema: &ConnectSchema) -> Option<&'static str> {
    match (schema.kind, schema.name.as_deref()?) {
        (ConnectType::Int32, "org.apache.kafka.connect.data.Date") => Some("date"),
        (ConnectType::Int32, "org.apache.kafka.connect.data.Time") => Some("time-millis"),
        (ConnectType::Int64, "org.apache.kafka.connect.data.Timestamp") => Some("timestamp-millis"),
        _ => None,
    }
}

/// A Connect default as AvroData writes it (`defaultValueFromConnect`):
/// bytes as an ISO-8859-1 string, structs as objects.
fn default_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Int8(i) => Json::from(*i),
        Value::Int16(i) => Json::from(*i),
        Value::Int32(i) => Json::from(*i),
        Value::Int64(i) => Json::from(*i),
        Value::Float32(f) => {
            serde_json::Number::from_f64(f64::from(*f)).map_or(Json::Null, Json::Number)
        }
        Value::Float64(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::from(s.as_str()),
        Value::Bytes(b) => Json::from(b.iter().map(|&b| char::from(b)).collect::<String>()),
        Value::Array(items) => Json::Array(items.iter().map(default_json).collect()),
        Value::Map(entries) | Value::Struct(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), default_json(v)))
                .collect(),
        ),
    }
}

/// Avro's name rule: `[A-Za-z_][A-Za-z0-9_]*`.
fn check_name(what: &'static str, name: &str) -> Result<(), SchemaError> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(SchemaError::InvalidName {
            what,
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::envelope;
    use crate::event::value::Field;

    fn field(name: &str, schema: ConnectSchema) -> Field {
        Field {
            name: name.to_owned(),
            schema,
        }
    }

    fn debezium(schema: &ConnectSchema) -> String {
        avro_json(schema, AvroLogicalTypes::Debezium)
            .expect("translates")
            .to_string()
    }

    /// `text` re-serialized without whitespace, keeping key order.
    fn compact(text: &str) -> String {
        serde_json::from_str::<Json>(text)
            .expect("valid JSON")
            .to_string()
    }

    fn decimal(precision: u32, scale: u32) -> ConnectSchema {
        ConnectSchema::named(ConnectType::Bytes, DECIMAL_NAME)
            .with_version(1)
            .with_parameter("scale", scale.to_string())
            .with_parameter(DECIMAL_PRECISION_PARAMETER, precision.to_string())
    }

    #[test]
    fn decimal_as_the_converter_writes_it() {
        assert_eq!(
            debezium(&decimal(10, 2)),
            r#"{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}"#
        );
        // MONEY: no precision parameter, AvroData's default precision.
        let money = ConnectSchema::named(ConnectType::Bytes, DECIMAL_NAME)
            .with_version(1)
            .with_parameter("scale", "2");
        assert_eq!(
            debezium(&money),
            r#"{"type":"bytes","scale":2,"precision":64,"connect.version":1,"connect.parameters":{"scale":"2"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}"#
        );
        assert!(is_avro_decimal(&decimal(10, 2)));
        assert!(!is_avro_decimal(&decimal(3, 5)));
        assert!(!is_avro_decimal(&ConnectSchema::primitive(
            ConnectType::Bytes
        )));
    }

    #[test]
    fn string_maps_are_avro_maps() {
        let hstore = ConnectSchema::map(
            ConnectSchema::primitive(ConnectType::String),
            ConnectSchema::primitive(ConnectType::String).optional(),
        );
        assert_eq!(
            debezium(&hstore.clone().optional()),
            r#"["null",{"type":"map","values":["null","string"]}]"#
        );
        avro_schema(&hstore, AvroLogicalTypes::Debezium).expect("parses");
        let int_keys = ConnectSchema::map(
            ConnectSchema::primitive(ConnectType::Int32),
            ConnectSchema::primitive(ConnectType::String),
        );
        assert!(matches!(
            avro_json(&int_keys, AvroLogicalTypes::Debezium),
            Err(SchemaError::Unsupported { .. })
        ));
    }

    #[test]
    fn kafka_connect_temporal_types_carry_avro_logical_types() {
        let time = ConnectSchema::named(ConnectType::Int32, "org.apache.kafka.connect.data.Time")
            .with_version(1);
        assert_eq!(
            debezium(&time),
            r#"{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Time","logicalType":"time-millis"}"#
        );
        let timestamp = ConnectSchema::named(
            ConnectType::Int64,
            "org.apache.kafka.connect.data.Timestamp",
        )
        .with_version(1);
        assert_eq!(
            debezium(&timestamp),
            r#"{"type":"long","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis"}"#
        );
    }

    #[test]
    fn primitives_and_connect_properties() {
        let int16 = ConnectSchema::primitive(ConnectType::Int16);
        assert_eq!(debezium(&int16), r#"{"type":"int","connect.type":"int16"}"#);
        assert_eq!(
            debezium(&ConnectSchema::primitive(ConnectType::Int64)),
            r#""long""#
        );
        let date =
            ConnectSchema::named(ConnectType::Int32, "io.debezium.time.Date").with_version(1);
        assert_eq!(
            debezium(&date.clone().optional()),
            r#"["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}]"#
        );
        let array = ConnectSchema::array(ConnectSchema::primitive(ConnectType::Int32).optional());
        assert_eq!(
            debezium(&array),
            r#"{"type":"array","items":["null","int"]}"#
        );
        let enumeration = ConnectSchema::named(ConnectType::String, "io.debezium.data.Enum")
            .with_version(1)
            .with_parameter("allowed", "a,b");
        assert_eq!(
            debezium(&enumeration),
            r#"{"type":"string","connect.version":1,"connect.parameters":{"allowed":"a,b"},"connect.name":"io.debezium.data.Enum"}"#
        );
    }

    #[test]
    fn variable_scale_decimal_as_avro_data_writes_it() {
        use crate::source::types::{column_schema, PgType, ValueOptions};
        let schema = column_schema(&PgType::Numeric, -1, &ValueOptions::default());
        // Confluent AvroData 7.0.16's fromConnectSchema of Debezium 3.6's schema.
        assert_eq!(
            debezium(&schema),
            concat!(
                r#"{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","#,
                r#""fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"#,
                r#""connect.doc":"Variable scaled decimal","connect.version":1,"#,
                r#""connect.name":"io.debezium.data.VariableScaleDecimal"}"#
            )
        );
    }

    fn sample_row() -> ConnectSchema {
        let variable = ConnectSchema::structure(
            "io.debezium.data.VariableScaleDecimal",
            vec![
                field("scale", ConnectSchema::primitive(ConnectType::Int32)),
                field("value", ConnectSchema::primitive(ConnectType::Bytes)),
            ],
        )
        .with_version(1);
        ConnectSchema::structure(
            "app.public.t.Value",
            vec![
                field("id", ConnectSchema::primitive(ConnectType::Int32)),
                field("price", decimal(10, 2).optional()),
                field("v1", variable.clone().optional()),
                field("v2", variable),
            ],
        )
    }

    #[test]
    fn envelope_defines_value_once_and_refers_to_it_after() {
        let row = sample_row();
        let envelope = envelope::envelope_schema("app.public.t", &row);
        let json = avro_json(&envelope, AvroLogicalTypes::Debezium).expect("translates");
        assert_eq!(json["name"], "Envelope");
        assert_eq!(json["namespace"], "app.public.t");
        assert_eq!(json["connect.version"], 2);
        assert_eq!(json["connect.name"], "app.public.t.Envelope");
        let before = &json["fields"][0];
        assert_eq!(before["name"], "before");
        assert_eq!(before["default"], Json::Null);
        assert_eq!(before["type"][0], "null");
        let value = &before["type"][1];
        assert_eq!(value["name"], "Value");
        assert!(value.get("namespace").is_none(), "inherits Envelope's");
        assert_eq!(value["connect.name"], "app.public.t.Value");
        // The second VariableScaleDecimal use and `after` are references.
        assert_eq!(
            value["fields"][2]["type"][1]["namespace"],
            "io.debezium.data"
        );
        assert_eq!(
            value["fields"][3]["type"],
            "io.debezium.data.VariableScaleDecimal"
        );
        assert_eq!(
            json["fields"][1].to_string(),
            r#"{"name":"after","type":["null","Value"],"default":null}"#
        );
        assert_eq!(
            json["fields"][3].to_string(),
            compact(&format!(
                r#"{{"name":"transaction","type":["null",{}],"default":null}}"#,
                super::super::static_schemas::TRANSACTION
            ))
        );
        avro_schema(&envelope, AvroLogicalTypes::Debezium).expect("apache-avro parses it");
    }

    #[test]
    fn native_logical_types_replace_debezium_ones() {
        let native = |schema: &ConnectSchema| {
            avro_json(schema, AvroLogicalTypes::Native)
                .expect("translates")
                .to_string()
        };
        let named = |kind, name| ConnectSchema::named(kind, name).with_version(1);
        let cases = [
            (
                named(ConnectType::Int32, "io.debezium.time.Date"),
                r#"{"type":"int","logicalType":"date"}"#,
            ),
            (
                named(ConnectType::Int32, "io.debezium.time.Time"),
                r#"{"type":"int","logicalType":"time-millis"}"#,
            ),
            (
                named(ConnectType::Int64, "io.debezium.time.MicroTime"),
                r#"{"type":"long","logicalType":"time-micros"}"#,
            ),
            (
                named(ConnectType::Int64, "io.debezium.time.Timestamp"),
                r#"{"type":"long","logicalType":"timestamp-millis"}"#,
            ),
            (
                named(ConnectType::Int64, "io.debezium.time.MicroTimestamp"),
                r#"{"type":"long","logicalType":"timestamp-micros"}"#,
            ),
            (
                named(ConnectType::String, "io.debezium.time.ZonedTimestamp"),
                r#"{"type":"long","logicalType":"timestamp-micros"}"#,
            ),
            (
                named(ConnectType::String, "io.debezium.data.Uuid"),
                r#"{"type":"string","logicalType":"uuid"}"#,
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(native(&schema), expected);
            assert_ne!(debezium(&schema), expected);
        }
        // Decimals and the rest are the same in both modes.
        assert_eq!(native(&decimal(5, 1)), debezium(&decimal(5, 1)));
        let zoned_time = named(ConnectType::String, "io.debezium.time.ZonedTime");
        assert_eq!(native(&zoned_time), debezium(&zoned_time));
        let parsed = apache_avro::Schema::parse(
            &avro_json(
                &ConnectSchema::array(
                    named(ConnectType::Int32, "io.debezium.time.Date").optional(),
                ),
                AvroLogicalTypes::Native,
            )
            .expect("translates"),
        )
        .expect("parses");
        assert_eq!(
            parsed,
            apache_avro::Schema::parse_str(
                r#"{"type":"array","items":["null",{"type":"int","logicalType":"date"}]}"#
            )
            .expect("parses")
        );
    }

    #[test]
    fn rejects_what_avro_cannot_name() {
        let bad_column = ConnectSchema::structure(
            "app.public.t.Value",
            vec![field(
                "my-col",
                ConnectSchema::primitive(ConnectType::Int32),
            )],
        );
        assert!(matches!(
            avro_json(&bad_column, AvroLogicalTypes::Debezium),
            Err(SchemaError::InvalidName { what: "field name", name }) if name == "my-col"
        ));
        let bad_prefix = ConnectSchema::structure("my-app.public.t.Key", Vec::new());
        assert!(matches!(
            avro_json(&bad_prefix, AvroLogicalTypes::Debezium),
            Err(SchemaError::InvalidName {
                what: "namespace part",
                ..
            })
        ));
        let a = ConnectSchema::structure(
            "x.S",
            vec![field("a", ConnectSchema::primitive(ConnectType::Int32))],
        );
        let b = ConnectSchema::structure(
            "x.S",
            vec![field("b", ConnectSchema::primitive(ConnectType::Int32))],
        );
        let annotated = a
            .clone()
            .with_parameter("__debezium.source.column.type", "NUMERIC");
        let reused =
            ConnectSchema::structure("x.T", vec![field("a", annotated), field("c", a.clone())]);
        let json = avro_json(&reused, AvroLogicalTypes::Debezium).expect("one definition of x.S");
        assert_eq!(
            json["fields"][1]["type"], "S",
            "the second refers to the first: {json}"
        );
        let both = ConnectSchema::structure("x.T", vec![field("a", a), field("b", b)]);
        assert!(matches!(
            avro_json(&both, AvroLogicalTypes::Debezium),
            Err(SchemaError::Redefined { name }) if name == "x.S"
        ));
    }
}
