//! Encoders: the Kafka Connect model of an event, written as bytes for Kafka.
//!
//! [`Encoder`] is the one seam the pipeline calls; each variant writes the
//! same events in its wire format.

pub mod json;

use crate::config::{Format, RunConfig};
use crate::event::envelope::ConnectorInfo;
use crate::event::{ChangeEvent, MessageEvent};

use json::JsonEncoder;

/// Errors encoding an event.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("--format avro is not available in this build yet; use --format json")]
    AvroUnavailable,
}

impl EncodeError {
    /// Whether encoding may succeed when tried again (e.g. the registry was down).
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The configured encoding.
pub enum Encoder {
    Json(JsonEncoder),
}

impl Encoder {
    /// The encoder `config` asks for.
    pub async fn from_config(config: &RunConfig, info: ConnectorInfo) -> Result<Self, EncodeError> {
        match config.format {
            Format::Json => Ok(Encoder::Json(JsonEncoder::new(info, config.json_schemas))),
            Format::Avro => Err(EncodeError::AvroUnavailable),
        }
    }

    /// The key bytes, `None` for a null key.
    pub async fn key(&mut self, event: &ChangeEvent) -> Result<Option<Vec<u8>>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.key(event)),
        }
    }

    /// The value bytes of the event's envelope, processed at `now_micros`.
    pub async fn value(
        &mut self,
        event: &ChangeEvent,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.value(event, now_micros)),
        }
    }

    /// The key bytes of a logical decoding message record.
    pub async fn message_key(&mut self, message: &MessageEvent) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.message_key(message)),
        }
    }

    /// The value bytes of a logical decoding message record.
    pub async fn message_value(
        &mut self,
        message: &MessageEvent,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        match self {
            Encoder::Json(json) => Ok(json.message_value(message, now_micros)),
        }
    }
}
