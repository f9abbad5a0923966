//! JSON exactly as Kafka Connect's `JsonConverter` writes Debezium events.
//!
//! With schemas enabled (the converter's default) every key and value is
//! `{"schema": ..., "payload": ...}`; without, just the payload. Bytes
//! (decimals, bytea) are base64, as the converter writes them; floats are
//! numbers in Java's `Float.toString` / `Double.toString` layout, as
//! Jackson prints them (`1.0E7`, `-1.1754944E-38`, see
//! [`crate::event::java_float`]), non-finite ones the strings `"NaN"`,
//! `"Infinity"` and `"-Infinity"`.
//!
//! Schemas are serialized once per table version and spliced into each
//! message, so the hot path only serializes payloads.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use foldhash::HashMap as FastMap;

use super::headers::HeaderWriter;
use super::options::HeaderConverter;
use super::RecordPart;
use crate::checkpoint::TxnId;
use crate::event::envelope::{self, ConnectorInfo, Stamp};
use crate::event::metadata::{MetadataKind, MetadataRecord, TransactionBlock};
use crate::event::record::{Data, Record, RecordKey, RecordValue};
use crate::event::value::{ConnectSchema, Value};
use crate::event::{ChangeEvent, MessageEvent, TableSchema};
use crate::sink::EncodedRecord;

pub(super) mod connect;
pub(super) mod write;

use connect::{enveloped, enveloped_in};
pub use connect::{schema_json, value_json};

/// Serialized key and value schemas of records that do not depend on a
/// table (`<prefix>.message`, transaction boundaries, heartbeats), built once.
struct MessageSchemas {
    key: String,
    value: String,
}

impl MessageSchemas {
    fn of(kind: MetadataKind) -> Self {
        let (key, value) = kind.schemas();
        MessageSchemas {
            key: schema_json(&key, None).to_string(),
            value: schema_json(&value, None).to_string(),
        }
    }
}

struct CachedSchemas {
    table: Arc<TableSchema>,
    key: Option<String>,
    envelope: String,
    /// What the table's last envelope held besides its schema: the next
    /// one's buffer is sized from it, so rows of a similar size never grow
    /// (and copy) theirs.
    payload: usize,
}

/// Writes records as Kafka Connect's JsonConverter does.
pub struct JsonEncoder {
    /// Whether keys carry their schema (`key.converter.schemas.enable`).
    key_schemas: bool,
    /// Whether values carry their schema (`value.converter.schemas.enable`).
    value_schemas: bool,
    headers: HeaderWriter,
    info: ConnectorInfo,
    cache: FastMap<u32, CachedSchemas>,
    /// Logical decoding message records (boxed, as `metadata_schemas`).
    message_schemas: Box<MessageSchemas>,
    /// Serialized schemas of transformed records, by topic and part.
    derived: HashMap<(Arc<str>, RecordPart), (Arc<ConnectSchema>, String)>,
    /// Transaction boundaries and heartbeats (boxed: rarely used, and the
    /// encoder lives in an enum beside a boxed Avro encoder).
    metadata_schemas: Box<[MessageSchemas; 2]>,
}

impl JsonEncoder {
    /// An encoder of keys with their schema when `key_schemas`, values
    /// when `value_schemas`, headers as `headers` writes them.
    pub fn new(
        info: ConnectorInfo,
        key_schemas: bool,
        value_schemas: bool,
        headers: HeaderWriter,
    ) -> Self {
        JsonEncoder {
            key_schemas,
            value_schemas,
            headers,
            info,
            cache: FastMap::default(),
            message_schemas: Box::new(MessageSchemas {
                key: schema_json(&envelope::message_key_schema(), None).to_string(),
                value: schema_json(&envelope::message_value_schema(), None).to_string(),
            }),
            derived: HashMap::new(),
            metadata_schemas: Box::new([
                MessageSchemas::of(MetadataKind::Transaction),
                MessageSchemas::of(MetadataKind::Heartbeat),
            ]),
        }
    }

    /// The bytes of `record`, in transaction `txn` (see
    /// [`super::Encoder::encode`]).
    pub fn record(&mut self, record: Record<'_>, txn: TxnId) -> EncodedRecord {
        let Record {
            topic,
            key,
            value,
            headers,
        } = record;
        let key = key.and_then(|key| self.record_key(&topic, key));
        let value = value.map(|value| self.record_value(&topic, value));
        EncodedRecord {
            topic,
            key,
            value,
            headers: self.headers.write(headers),
            txn,
            partition: None,
            created_micros: None,
        }
    }

    /// The bytes of a record's key, on a record bound for `topic`; `None`
    /// for a null key.
    fn record_key(&mut self, topic: &Arc<str>, key: RecordKey<'_>) -> Option<Vec<u8>> {
        match key {
            RecordKey::Table(event) => self.key(event),
            RecordKey::Message(message) => Some(self.message_key(message)),
            RecordKey::Metadata(record) => Some(self.metadata_key(record)),
            RecordKey::Data(data) => Some(self.data(topic, RecordPart::Key, &data)),
        }
    }

    /// The bytes of a record's value, on a record bound for `topic`.
    fn record_value(&mut self, topic: &Arc<str>, value: RecordValue<'_>) -> Vec<u8> {
        match value {
            RecordValue::Envelope(event, stamp) => {
                self.value(event, stamp.transaction, stamp.now_micros)
            }
            RecordValue::Message(message, stamp) => {
                self.message_value(message, stamp.transaction, stamp.now_micros)
            }
            RecordValue::Metadata(record) => self.metadata_value(record),
            RecordValue::Data(data) => self.data(topic, RecordPart::Value, &data),
        }
    }

    /// A transform's data, as JsonConverter writes a value under its schema
    /// (a null too: `{"schema":...,"payload":null}`, or `null`).
    fn data(&mut self, topic: &Arc<str>, part: RecordPart, data: &Data) -> Vec<u8> {
        self.encode(topic, part, &data.schema, &data.value)
    }

    /// An encoder with the same settings and caches of its own: for
    /// another task.
    pub fn fork(&self) -> Self {
        JsonEncoder::new(
            self.info.clone(),
            self.key_schemas,
            self.value_schemas,
            self.headers.clone(),
        )
    }

    /// `value` under a schema a transform derived (an unwrapped row, an
    /// outbox envelope), as `part` of a record on `topic`. The schema is
    /// serialized when it differs from the one last used for that topic and
    /// part, so a transform that keeps its `Arc`s pays for it once.
    pub fn encode(
        &mut self,
        topic: &Arc<str>,
        part: RecordPart,
        schema: &Arc<ConnectSchema>,
        value: &Value,
    ) -> Vec<u8> {
        if !self.schemas_on(part) {
            return enveloped(None, |out| {
                write::write_value(out, value);
                true
            })
            .unwrap_or_default();
        }
        let key = (Arc::clone(topic), part);
        let fresh = self
            .derived
            .get(&key)
            .is_some_and(|(known, _)| Arc::ptr_eq(known, schema) || **known == **schema);
        if !fresh {
            let text = schema_json(schema, None).to_string();
            self.derived.insert(key.clone(), (Arc::clone(schema), text));
        }
        let text = &self.derived[&key].1;
        enveloped(Some(text), |out| {
            write::write_value(out, value);
            true
        })
        .unwrap_or_default()
    }

    /// Whether `part` carries its schema.
    fn schemas_on(&self, part: RecordPart) -> bool {
        match part {
            RecordPart::Key => self.key_schemas,
            RecordPart::Value => self.value_schemas,
        }
    }

    /// An encoder whose keys, values and (JSON) headers all carry their
    /// schema, or none does.
    pub fn uniform(info: ConnectorInfo, schemas: bool) -> Self {
        let headers = HeaderWriter::new(HeaderConverter::Json, schemas, &info);
        JsonEncoder::new(info, schemas, schemas, headers)
    }

    fn metadata_schemas(&self, record: MetadataRecord<'_>) -> &MessageSchemas {
        match record.kind() {
            MetadataKind::Transaction => &self.metadata_schemas[0],
            MetadataKind::Heartbeat => &self.metadata_schemas[1],
        }
    }

    /// The key bytes of a transaction boundary or heartbeat record.
    pub fn metadata_key(&self, record: MetadataRecord<'_>) -> Vec<u8> {
        self.wrap(
            RecordPart::Key,
            &self.metadata_schemas(record).key,
            &record.key(),
        )
    }

    /// The value bytes of a transaction boundary or heartbeat record.
    pub fn metadata_value(&self, record: MetadataRecord<'_>) -> Vec<u8> {
        self.wrap(
            RecordPart::Value,
            &self.metadata_schemas(record).value,
            &record.value(),
        )
    }

    /// The key bytes of a logical decoding message record.
    pub fn message_key(&self, message: &MessageEvent) -> Vec<u8> {
        let key = envelope::message_key(message);
        self.wrap(RecordPart::Key, &self.message_schemas.key, &key)
    }

    /// The value bytes of a logical decoding message record.
    pub fn message_value(
        &self,
        message: &MessageEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Vec<u8> {
        let stamp = Stamp {
            now_micros,
            transaction,
        };
        let schema = Some(self.message_schemas.value.as_str()).filter(|_| self.value_schemas);
        enveloped(schema, |out| {
            write::write_message(out, message, &self.info, stamp);
            true
        })
        .unwrap_or_default()
    }

    fn schemas(&mut self, table: &Arc<TableSchema>) -> &CachedSchemas {
        cached(&mut self.cache, table)
    }

    /// `value` as a record `part`, with `schema` when that part carries it.
    fn wrap(&self, part: RecordPart, schema: &str, value: &Value) -> Vec<u8> {
        let schema = Some(schema).filter(|_| self.schemas_on(part));
        enveloped(schema, |out| {
            write::write_value(out, value);
            true
        })
        .unwrap_or_default()
    }

    /// The key bytes, `None` for a null key.
    pub fn key(&mut self, event: &ChangeEvent) -> Option<Vec<u8>> {
        let key_schemas = self.key_schemas;
        let schema = self.schemas(&event.table).key.as_deref();
        enveloped(schema.filter(|_| key_schemas), |out| {
            write::write_key(out, event)
        })
    }

    /// The value bytes of the event's envelope, written without building
    /// the envelope as a value first ([`write`]).
    pub fn value(
        &mut self,
        event: &ChangeEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Vec<u8> {
        let value_schemas = self.value_schemas;
        let info = &self.info;
        let cached = cached(&mut self.cache, &event.table);
        let schema = Some(cached.envelope.as_str()).filter(|_| value_schemas);
        let schema_len = schema.map_or(0, str::len);
        // An eighth more than the last one: most rows then fit.
        let capacity = cached.payload + cached.payload / 8;
        let out = enveloped_in(schema, capacity, |out| {
            write::write_envelope(out, event, info, transaction, now_micros);
            true
        })
        .unwrap_or_default();
        cached.payload = out.len().saturating_sub(schema_len);
        out
    }
}

/// The cached serialized schemas of `table`'s current version.
fn cached<'a>(
    cache: &'a mut FastMap<u32, CachedSchemas>,
    table: &Arc<TableSchema>,
) -> &'a mut CachedSchemas {
    let fresh = || CachedSchemas {
        table: Arc::clone(table),
        key: table
            .key_schema
            .as_ref()
            .map(|k| schema_json(k, None).to_string()),
        envelope: schema_json(&table.envelope_schema, None).to_string(),
        payload: 512,
    };
    match cache.entry(table.relation_id) {
        Entry::Occupied(entry) if Arc::ptr_eq(&entry.get().table, table) => entry.into_mut(),
        Entry::Occupied(mut entry) => {
            entry.insert(fresh());
            entry.into_mut()
        }
        Entry::Vacant(entry) => entry.insert(fresh()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::value::ConnectType;
    use serde_json::Value as Json;

    #[test]
    fn schema_json_matches_connect_layout() {
        let s = envelope::source_schema();
        let json = schema_json(&s, Some("source"));
        let snapshot = &json["fields"][4];
        assert_eq!(
            snapshot.to_string(),
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"}"#
        );
        assert_eq!(json["name"], "io.debezium.connector.postgresql.Source");
        assert_eq!(json["optional"], false);
    }

    #[test]
    fn variable_scale_decimal_as_json_converter_writes_it() {
        use crate::source::types::{column_schema, PgType, ValueOptions};
        let schema = column_schema(&PgType::Numeric, -1, &ValueOptions::default());
        // Kafka 4.3's JsonConverter.asJsonSchema of Debezium 3.6's schema.
        assert_eq!(
            schema_json(&schema, None).to_string(),
            concat!(
                r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},"#,
                r#"{"type":"bytes","optional":false,"field":"value"}],"optional":false,"#,
                r#""name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal"}"#
            )
        );
    }

    #[test]
    fn decimal_parameters_put_the_scale_first_as_connect_does() {
        let decimal = crate::source::types::numeric_column_schema(12, 3);
        assert_eq!(
            schema_json(&decimal, None)["parameters"].to_string(),
            r#"{"scale":"3","connect.decimal.precision":"12"}"#
        );
    }

    #[test]
    fn string_maps_as_objects() {
        let schema = ConnectSchema::map(
            ConnectSchema::primitive(ConnectType::String),
            ConnectSchema::primitive(ConnectType::String).optional(),
        );
        assert_eq!(
            schema_json(&schema.optional(), Some("tags")).to_string(),
            r#"{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"string","optional":true},"optional":true,"field":"tags"}"#
        );
        let value = Value::Map(vec![
            ("z".into(), Value::String("1".into())),
            ("a".into(), Value::Null),
        ]);
        assert_eq!(value_json(&value).to_string(), r#"{"z":"1","a":null}"#);
    }

    #[test]
    fn metadata_records_as_the_json_converter_writes_them() {
        use crate::event::metadata::{Heartbeat, OpenTransaction};
        use crate::lsn::Lsn;
        let encoder = JsonEncoder::uniform(
            ConnectorInfo {
                name: "app".into(),
                db: "shop".into(),
                run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
            },
            true,
        );
        let mut open = OpenTransaction::new(7, Lsn::new(100), 5_000_000);
        open.event("public.t");
        let end = open.end();
        let record = MetadataRecord::Transaction(&end);
        let (key, value) = (encoder.metadata_key(record), encoder.metadata_value(record));
        assert_eq!(
            String::from_utf8(key).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1},"payload":{"id":"7:100"}}"#
        );
        assert_eq!(
            String::from_utf8(value).unwrap(),
            concat!(
                r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},"#,
                r#"{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},"#,
                r#"{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},"#,
                r#"{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"#,
                r#""optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],"#,
                r#""optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1},"#,
                r#""payload":{"status":"END","id":"7:100","event_count":1,"#,
                r#""data_collections":[{"data_collection":"public.t","event_count":1}],"ts_ms":5000}}"#
            )
        );
        let heartbeat = Heartbeat {
            server_name: "app".into(),
            ts_ms: 42,
        };
        let record = MetadataRecord::Heartbeat(&heartbeat);
        let (key, value) = (encoder.metadata_key(record), encoder.metadata_value(record));
        assert_eq!(
            String::from_utf8(key).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1},"payload":{"serverName":"app"}}"#
        );
        assert_eq!(
            String::from_utf8(value).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1},"payload":{"ts_ms":42}}"#
        );
    }

    #[test]
    fn special_values() {
        assert_eq!(value_json(&Value::Float64(f64::NAN)), Json::from("NaN"));
        assert_eq!(
            value_json(&Value::Float64(f64::NEG_INFINITY)),
            Json::from("-Infinity")
        );
        assert_eq!(value_json(&Value::Float32(0.1)).to_string(), "0.1");
        assert_eq!(
            value_json(&Value::Bytes(vec![0x01, 0xff])),
            Json::from("Af8=")
        );
    }
}
