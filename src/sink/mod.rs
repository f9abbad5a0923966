//! The Kafka side: producing encoded records and tracking their delivery.

pub mod error;
pub mod kafka;
pub mod login;
pub mod transactional;

pub use error::SinkError;
pub use kafka::{EncodedRecord, KafkaSink, Progress};
pub mod topics;
