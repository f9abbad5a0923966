//! The Kafka side: producing encoded records and tracking their delivery.

pub mod error;
pub mod kafka;
pub mod login;
pub mod record;
pub mod transactional;

pub use error::SinkError;
pub use kafka::KafkaSink;
pub use record::{EncodedRecord, Progress};
pub mod topics;
