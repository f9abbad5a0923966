//! The Kafka side: producing encoded records and tracking their delivery.

pub mod kafka;

pub use kafka::{EncodedRecord, KafkaSink, Progress, SinkError};
pub mod topics;
