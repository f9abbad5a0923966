//! The Kafka side: producing encoded records and tracking their delivery.

pub mod kafka;
pub mod login;
pub mod transactional;

pub use kafka::{EncodedRecord, KafkaSink, Progress, SinkError};
pub mod topics;
