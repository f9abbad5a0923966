//! PostgreSQL's logical replication wire formats, sans-IO: bytes in, a
//! message or an error out, never a panic on wire input (denied by lint in
//! each module, and fuzzed). Kept in a crate of its own so that the fuzz
//! targets build without the connector's Kafka client.
//!
//! - [`lsn`]: the one `Lsn` type of the whole connector.
//! - [`frame`]: the protocol's message framing, the CopyBoth messages of
//!   streaming replication (XLogData, keepalive, standby status update) and
//!   the login and error messages the replication client reads.
//! - [`pgoutput`]: the logical decoding output plugin's messages, carried in
//!   each XLogData payload.

pub mod frame;
pub mod lsn;
pub mod pgoutput;
