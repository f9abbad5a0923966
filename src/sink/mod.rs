//! The Kafka side: producing encoded records and tracking their delivery.

pub mod at_least_once;
pub mod client_log;
pub mod delivery;
pub mod error;
pub mod kafka;
pub mod login;
pub mod options;
pub mod poller;
pub mod position;
pub mod reader;
pub mod record;
pub mod tails;
mod topic_handles;
pub mod transactional;

pub use at_least_once::{AtLeastOnce, Dedupe};
pub use delivery::{Delivery, DeliveryFailure, InKafka};
pub use error::SinkError;
pub use kafka::KafkaSink;
pub use record::{EncodedRecord, Progress};
pub use transactional::Transactional;
pub mod topics;
