//! An independent Avro reader for tests: parses the Confluent framing (magic
//! byte, 4-byte schema id), fetches the writer schema by id from the
//! registry over HTTP, decodes the datum with apache-avro, and renders it as
//! JSON, never using the connector's own schemas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apache_avro::types::Value as Avro;
use pgcdc_testcontainers::SchemaRegistry;
use serde_json::Value as Json;

/// A writer schema as the registry holds it (JSON) and parsed.
struct WriterSchema {
    json: Json,
    parsed: apache_avro::Schema,
}

/// Decodes framed records with writer schemas fetched from `registry`,
/// caching them by id.
pub struct AvroReader<'r> {
    registry: &'r SchemaRegistry,
    /// Per schema id: the writer schema as the registry holds it, and parsed.
    schemas: Mutex<HashMap<u32, Arc<WriterSchema>>>,
}

impl<'r> AvroReader<'r> {
    pub fn new(registry: &'r SchemaRegistry) -> Self {
        AvroReader {
            registry,
            schemas: Mutex::new(HashMap::new()),
        }
    }

    /// The writer schema of `id`, fetched once.
    fn fetch(&self, id: u32) -> Arc<WriterSchema> {
        let mut schemas = self.schemas.lock().unwrap_or_else(|e| e.into_inner());
        schemas
            .entry(id)
            .or_insert_with(|| {
                let (status, body) = self
                    .registry
                    .get(&format!("/schemas/ids/{id}"))
                    .expect("registry answers");
                assert_eq!(status, 200, "GET /schemas/ids/{id}: {body}");
                let answer: Json = serde_json::from_str(&body).expect("JSON answer");
                let text = answer["schema"].as_str().expect("a schema string");
                Arc::new(WriterSchema {
                    json: serde_json::from_str(text).expect("the writer schema is JSON"),
                    parsed: apache_avro::Schema::parse_str(text).expect("the writer schema parses"),
                })
            })
            .clone()
    }

    /// The writer schema of `id` as the registry holds it (JSON).
    pub fn schema(&self, id: u32) -> Json {
        self.fetch(id).json.clone()
    }

    /// The schema id and the decoded datum of one framed key or value.
    ///
    /// # Panics
    /// When the bytes are not framed Avro of a schema the registry holds.
    pub fn decode(&self, bytes: &[u8]) -> (u32, Avro) {
        assert!(
            bytes.len() >= 5 && bytes[0] == 0,
            "not Confluent-framed Avro (magic byte 0, 4-byte schema id): {} bytes",
            bytes.len()
        );
        let id = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let schema = self.fetch(id);
        let mut body = &bytes[5..];
        let value = apache_avro::reader::datum::GenericDatumReader::builder(&schema.parsed)
            .build()
            .expect("reader")
            .read_value(&mut body)
            .expect("the datum decodes with its writer schema");
        assert!(body.is_empty(), "{} bytes left after the datum", body.len());
        (id, value)
    }

    /// [`decode`](Self::decode) with the writer schema (JSON) too.
    pub fn decode_with_schema(&self, bytes: &[u8]) -> (u32, Json, Avro) {
        let (id, value) = self.decode(bytes);
        (id, self.schema(id), value)
    }

    /// The decoded datum as JSON (see [`plain`]).
    pub fn json(&self, bytes: &[u8]) -> Json {
        plain(&self.decode(bytes).1)
    }
}

/// A decoded value as JSON: unions unwrapped, numbers and strings as such,
/// arrays and records as arrays and objects; anything else as its debug text.
pub fn plain(value: &Avro) -> Json {
    match value {
        Avro::Null => Json::Null,
        Avro::Boolean(b) => Json::from(*b),
        Avro::Int(i) | Avro::Date(i) | Avro::TimeMillis(i) => Json::from(*i),
        Avro::Long(i)
        | Avro::TimeMicros(i)
        | Avro::TimestampMillis(i)
        | Avro::TimestampMicros(i) => Json::from(*i),
        Avro::Float(f) => Json::from(*f),
        Avro::Double(f) => Json::from(*f),
        Avro::String(s) | Avro::Enum(_, s) => Json::from(s.as_str()),
        Avro::Union(_, inner) => plain(inner),
        Avro::Array(items) => Json::Array(items.iter().map(plain).collect()),
        Avro::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(name, v)| (name.clone(), plain(v)))
                .collect(),
        ),
        other => Json::from(format!("{other:?}")),
    }
}
