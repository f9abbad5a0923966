//! The encode step: Connect-shaped records ([`Record`]) written as bytes for
//! Kafka ([`EncodedRecord`]).
//!
//! [`Encoder::encode`] is the one place records become bytes, whether
//! Debezium's mapping or a transform made them; each variant writes them in
//! its wire format: [`json`] as Kafka Connect's JsonConverter, [`avro`] as
//! Confluent's AvroConverter with schemas in a [`registry`]. Headers are
//! written by the configured header converter ([`headers`]).

pub mod avro;
pub mod headers;
pub mod json;
pub mod options;
pub mod registry;

#[cfg(test)]
pub(crate) mod golden;

use std::fmt;
use std::sync::Arc;

use crate::checkpoint::TxnId;
use crate::event::envelope::ConnectorInfo;
use crate::event::record::Record;
use crate::event::value::Value;
use crate::metrics::Metrics;
use crate::sink::EncodedRecord;
use options::{EncodeOptions, Format};

use avro::AvroEncoder;
use headers::HeaderWriter;
use json::JsonEncoder;
use registry::RegistryError;

/// Which half of a Kafka record a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordPart {
    /// The record key (`<topic>.Key`, or a message's prefix).
    Key,
    /// The record value (`<topic>.Envelope`, or a message's value).
    Value,
}

impl fmt::Display for RecordPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecordPart::Key => "key",
            RecordPart::Value => "value",
        })
    }
}

/// Errors encoding an event.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The schema registry settings are unusable.
    #[error("cannot set up the schema registry client")]
    RegistrySetup(#[source] RegistryError),
    /// The registry refused a new schema as incompatible with the subject's
    /// earlier ones: a definite stop, before the change is sent.
    #[error(
        "schema registry refused the new {part} schema of {what} (topic {topic}) under subject \
         {subject:?} as incompatible: {reason}; the change: {change}; nothing from this change \
         on is sent or confirmed; to go on, allow the change in the registry (e.g. PUT \
         /config/{subject} with a compatibility level that permits it, such as \
         {{\"compatibility\":\"NONE\"}}) or send the table to a new topic (another \
         --topic-prefix), then restart"
    )]
    Incompatible {
        part: RecordPart,
        /// `table public.t`, or what else the records carry.
        what: String,
        topic: String,
        subject: String,
        /// What changed from the previous schema, in words.
        change: String,
        /// The registry's own explanation.
        reason: String,
    },
    /// Registering a schema failed; retryable when the registry was
    /// unreachable or unavailable.
    #[error("cannot register the {part} schema of topic {topic} under subject {subject:?}")]
    Registry {
        part: RecordPart,
        topic: String,
        subject: String,
        #[source]
        source: RegistryError,
    },
    /// The Connect schema has no Avro form.
    #[error("cannot derive the Avro {part} schema of topic {topic}")]
    Schema {
        part: RecordPart,
        topic: String,
        #[source]
        source: avro::schema::SchemaError,
    },
    /// A value does not fit its Avro schema.
    #[error("cannot write a {part} of topic {topic} as Avro")]
    Value {
        part: RecordPart,
        topic: String,
        #[source]
        source: avro::value::ValueError,
    },
    /// apache-avro refused to write a value (a broken invariant).
    #[error("apache-avro could not write a {part} of topic {topic}; this is a bug in pgcdc-kafka")]
    Encode {
        part: RecordPart,
        topic: String,
        #[source]
        source: apache_avro::Error,
    },
}

impl EncodeError {
    /// Whether encoding may succeed when tried again (e.g. the registry was down).
    pub fn is_retryable(&self) -> bool {
        match self {
            EncodeError::Registry { source, .. } => source.is_retryable(),
            EncodeError::RegistrySetup(_)
            | EncodeError::Incompatible { .. }
            | EncodeError::Schema { .. }
            | EncodeError::Value { .. }
            | EncodeError::Encode { .. } => false,
        }
    }
}

/// The configured encoding.
pub enum Encoder {
    Json(JsonEncoder),
    Avro(Box<AvroEncoder>),
}

impl Encoder {
    /// The encoder `options` ask for.
    pub async fn new(options: &EncodeOptions, info: ConnectorInfo) -> Result<Self, EncodeError> {
        match options.format {
            Format::Json => {
                let headers =
                    HeaderWriter::new(options.header_converter(), options.value_schemas(), &info);
                Ok(Encoder::Json(JsonEncoder::new(
                    info,
                    options.key_schemas(),
                    options.value_schemas(),
                    headers,
                )))
            }
            Format::Avro => Ok(Encoder::Avro(Box::new(
                AvroEncoder::from_options(options, info).await?,
            ))),
        }
    }

    /// Counts schema registrations and registry errors into `metrics` (Avro).
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Self {
        match self {
            Encoder::Avro(avro) => Encoder::Avro(Box::new(avro.with_metrics(metrics))),
            json => json,
        }
    }

    /// An encoder writing exactly as this one, for another task (a
    /// snapshot worker): the same settings, metrics and schema ids, caches
    /// of its own.
    pub fn fork(&self) -> Self {
        match self {
            Encoder::Json(json) => Encoder::Json(json.fork()),
            Encoder::Avro(avro) => Encoder::Avro(Box::new(avro.fork())),
        }
    }

    /// The bytes of `record`, tagged with its transaction `txn`: the one
    /// place where records become bytes. The key is encoded first, then the
    /// value, then the headers (with Avro, each schema is registered the
    /// first time it is needed, in that order).
    ///
    /// # Errors
    /// See [`EncodeError`]: with Avro, registering a schema may fail.
    pub async fn encode(
        &mut self,
        record: Record<'_>,
        txn: TxnId,
    ) -> Result<EncodedRecord, EncodeError> {
        let created_micros = record.created_micros();
        // One dispatch per record: the JSON encoder never waits, so its
        // whole record is written without a future of its own.
        let mut encoded = match self {
            Encoder::Json(json) => json.record(record, txn),
            Encoder::Avro(avro) => avro.record(record, txn).await?,
        };
        encoded.created_micros = created_micros;
        Ok(encoded)
    }
}

/// A header value as Kafka Connect's default `SimpleHeaderConverter` writes
/// it: strings as their UTF-8 text, numbers and booleans as text, bytes as
/// base64, structs and arrays as JSON ([`Value::to_text`]). `None` for null
/// (no header is written).
pub fn header_value(value: &Value) -> Option<Vec<u8>> {
    value.to_text().map(String::into_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_render_like_simple_header_converter() {
        assert_eq!(
            header_value(&Value::String("a b".into())),
            Some(b"a b".to_vec())
        );
        assert_eq!(header_value(&Value::Int64(-7)), Some(b"-7".to_vec()));
        assert_eq!(header_value(&Value::Boolean(true)), Some(b"true".to_vec()));
        assert_eq!(header_value(&Value::Null), None);
        assert_eq!(
            header_value(&Value::Bytes(vec![1, 255])),
            Some(b"Af8=".to_vec())
        );
    }
}
