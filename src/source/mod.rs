//! The Postgres side: slot and publication setup, the pgoutput decoder, the
//! relation cache and value decoding.

pub mod pgoutput;
pub mod relation;
pub mod setup;
pub mod snapshot;
pub mod tls;
pub mod types;
