//! Encoders: the Kafka Connect model of an event, written as bytes for Kafka.

pub mod json;
