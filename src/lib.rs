//! pgcdc-kafka: PostgreSQL change data capture into Kafka, Debezium-compatible.
//!
//! A change travels one way: replication stream ([`source::replication`])
//! -> pgoutput decoding ([`source::pgoutput`]) -> change events ([`event`])
//! -> transforms ([`transform`]) -> encoding ([`encode`]) -> Kafka producer
//! ([`sink`]) -> delivery ack -> slot LSN confirmed ([`checkpoint`]).
//! [`pipeline`] wires the stages together; [`command`] holds one module per
//! subcommand.
//!
//! # Who owns what
//!
//! - The replication protocol: [`source::replication`] alone (login, START_REPLICATION
//!   options per server version, framing, status updates).
//! - What the catalog says (server, role, slots, publications, tables):
//!   [`source::catalog`], for `run`, `check` and `status` alike.
//! - The Debezium envelope's shape: [`event::envelope`] alone, one walk that
//!   the JSON and Avro writers and the Connect value follow.
//! - Records to bytes: [`encode::Encoder::encode`] alone; Debezium's mapping
//!   ([`event::record`]) and the transforms make records, never bytes.
//! - Which LSN may be confirmed: [`checkpoint`] alone, fed by the delivery.
//! - What is specific to a delivery guarantee: one [`sink::Delivery`] each,
//!   [`sink::AtLeastOnce`] and [`sink::Transactional`] (Kafka transactions,
//!   the progress record, skipping what Kafka holds); the read loop
//!   ([`pipeline`]) keeps positions and its `select!`, and never asks which.
//! - Every derived name (topics, subjects, ids, slot names): [`naming`].
//! - Each stage's options: the stage itself ([`encode::options`],
//!   [`transform::options`], [`select::SelectOptions`]), flattened into
//!   `run`'s flags by [`config`], which validates them all at once.
//! - Operations: [`metrics`] and [`http`].
//! - Several pipelines in one process: [`supervisor`] runs each as its own
//!   task (own slot, producer, backoff, failure); [`config::pipelines`]
//!   reads and checks their `[pipelines.<name>]` tables.
//!
//! # Delivery guarantee
//!
//! At least once, with no committed change ever lost: the slot's confirmed
//! LSN moves to the end of a transaction only after Kafka acknowledged
//! (`acks=all`, idempotent producer) every message of it and of every earlier
//! transaction. After any crash, streaming resumes from the slot and repeats
//! at most the transactions that were not yet confirmed.
//!
//! With `--delivery exactly-once`, consumers reading with
//! `isolation.level=read_committed` see each committed transaction exactly
//! once and whole: Kafka transactions carry a progress record, the slot is
//! confirmed after the Kafka commit, and a restart skips what Kafka already
//! holds ([`sink::transactional`]).

pub mod build_info;
pub mod checkpoint;
pub mod command;
pub mod config;
pub mod encode;
pub mod event;
pub mod fleet;
pub mod http;
pub use pgcdc_wire::lsn;
pub mod metrics;
pub mod naming;
pub mod notification;
pub mod options;
pub mod pipeline;
pub mod progress;
pub mod select;
pub mod sink;
pub mod source;
pub mod supervisor;
pub mod takeover;
pub mod transform;

/// A value for people, or `unknown` when it is not known (an LSN of a run
/// that never reached the server, a slot that is gone).
pub fn or_unknown<T: std::fmt::Display>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| "unknown".to_owned(), ToString::to_string)
}

/// An error and its chain of sources, joined by `": "`, for one log line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
