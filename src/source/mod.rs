//! The Postgres side: the replication protocol client, slot and publication
//! setup, the pgoutput decoder, the relation cache, value decoding and the
//! signal table.
//!
//! Nothing here imports [`crate::pipeline`]: the pipeline uses the source,
//! never the reverse (SQLSTATE classification, for one, lives in
//! [`sqlstate`]).

pub mod binary_mode;
pub mod catalog;
pub mod column_mappers;
pub mod copy_binary;
pub mod identity;
pub use pgcdc_wire::pgoutput;
pub mod options;
pub mod relation;
pub mod replication;
pub mod setup;
pub mod signal;
pub mod signal_channels;
pub mod snapshot;
pub mod snapshot_select;
pub mod sql;
pub mod sqlstate;
pub mod streaming;
pub mod tls;
pub mod types;
pub mod version;
