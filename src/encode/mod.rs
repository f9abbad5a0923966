//! Encoders: the Kafka Connect model of an event, written as bytes for Kafka.
//!
//! [`Encoder`] is the one seam the pipeline calls; each variant writes the
//! same events in its wire format: [`json`] as Kafka Connect's
//! JsonConverter, [`avro`] as Confluent's AvroConverter with schemas in a
//! [`registry`].

pub mod avro;
pub mod json;
pub mod options;
pub mod registry;

#[cfg(test)]
mod golden;

use std::fmt;
use std::sync::Arc;

use crate::event::envelope::ConnectorInfo;
use crate::event::metadata::{self, Heartbeat, TransactionBlock, TransactionBoundary};
use crate::event::value::{ConnectSchema, Value};
use crate::event::{ChangeEvent, MessageEvent};
use crate::metrics::Metrics;
use options::{EncodeOptions, Format};

use avro::AvroEncoder;
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

/// A record whose schemas do not depend on any table: a transaction
/// boundary on the transaction topic, or a heartbeat.
#[derive(Debug, Clone, Copy)]
pub enum MetadataRecord<'a> {
    Transaction(&'a TransactionBoundary),
    Heartbeat(&'a Heartbeat),
}

/// The kinds of [`MetadataRecord`], each with its own pair of schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataKind {
    Transaction,
    Heartbeat,
}

impl MetadataKind {
    /// What the records carry, in an operator's words.
    pub const fn describe(self) -> &'static str {
        match self {
            MetadataKind::Transaction => "transaction metadata",
            MetadataKind::Heartbeat => "heartbeats",
        }
    }

    /// The key and value schemas of this kind.
    pub fn schemas(self) -> (ConnectSchema, ConnectSchema) {
        match self {
            MetadataKind::Transaction => (
                metadata::transaction_key_schema(),
                metadata::transaction_value_schema(),
            ),
            MetadataKind::Heartbeat => (
                metadata::heartbeat_key_schema(),
                metadata::heartbeat_value_schema(),
            ),
        }
    }
}

impl MetadataRecord<'_> {
    pub const fn kind(&self) -> MetadataKind {
        match self {
            MetadataRecord::Transaction(_) => MetadataKind::Transaction,
            MetadataRecord::Heartbeat(_) => MetadataKind::Heartbeat,
        }
    }

    /// The key and value as Connect values.
    pub fn values(&self) -> (Value, Value) {
        match self {
            MetadataRecord::Transaction(t) => (t.key(), t.value()),
            MetadataRecord::Heartbeat(h) => (h.key(), h.value()),
        }
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
            Format::Json => Ok(Encoder::Json(JsonEncoder::new(info, options.json_schemas))),
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

    /// The key bytes, `None` for a null key.
    pub async fn key(&mut self, event: &ChangeEvent) -> Result<Option<Vec<u8>>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.key(event)),
            Encoder::Avro(avro) => avro.key(event).await,
        }
    }

    /// The value bytes of the event's envelope, processed at `now_micros`,
    /// with its `transaction` block when transaction metadata is on.
    pub async fn value(
        &mut self,
        event: &ChangeEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.value(event, transaction, now_micros)),
            Encoder::Avro(avro) => avro.value(event, transaction, now_micros).await,
        }
    }

    /// `value` under a schema a transform derived, as `part` of a record on
    /// `topic`; `what` names the records in errors (see
    /// [`JsonEncoder::encode`], [`AvroEncoder::encode`]).
    pub async fn encode(
        &mut self,
        topic: &Arc<str>,
        part: RecordPart,
        schema: &Arc<ConnectSchema>,
        value: Value,
        what: &str,
    ) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.encode(topic, part, schema, &value)),
            Encoder::Avro(avro) => avro.encode(topic, part, schema, value, what).await,
        }
    }

    /// Whether records are Kafka Connect JSON (rather than Avro).
    pub fn is_json(&self) -> bool {
        matches!(self, Encoder::Json(_))
    }

    /// The key bytes of a logical decoding message record.
    pub async fn message_key(&mut self, message: &MessageEvent) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.message_key(message)),
            Encoder::Avro(avro) => avro.message_key(message).await,
        }
    }

    /// The value bytes of a logical decoding message record.
    pub async fn message_value(
        &mut self,
        message: &MessageEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.message_value(message, transaction, now_micros)),
            Encoder::Avro(avro) => avro.message_value(message, transaction, now_micros).await,
        }
    }

    /// The key and value bytes of a transaction boundary or heartbeat
    /// record bound for `topic`.
    pub async fn metadata(
        &mut self,
        record: MetadataRecord<'_>,
        topic: &str,
    ) -> Result<(Vec<u8>, Vec<u8>), EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.metadata(record)),
            Encoder::Avro(avro) => avro.metadata(record, topic).await,
        }
    }
}
