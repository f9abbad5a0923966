//! The Postgres side: slot and publication setup, the pgoutput decoder, the
//! relation cache, value decoding and the signal table.

pub mod catalog;
pub mod pgoutput;
pub mod relation;
pub mod setup;
pub mod signal;
pub mod snapshot;
pub mod tls;
pub mod types;
