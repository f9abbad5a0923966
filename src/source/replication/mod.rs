//! Our client of PostgreSQL's streaming replication protocol, for logical
//! decoding with pgoutput
//! ([protocol](https://www.postgresql.org/docs/current/protocol-replication.html)).
//!
//! - [`session`]: TCP, TLS as the URL's `sslmode` says (the same rustls
//!   settings as the SQL connection, [`crate::source::tls`]), the startup
//!   message with `replication=database`, authentication (SCRAM-SHA-256,
//!   MD5, cleartext) and simple queries (`IDENTIFY_SYSTEM`,
//!   `CREATE_REPLICATION_SLOT`, ...). [`Session::start`] sends
//!   `START_REPLICATION` with the [`PluginOptions`] the server's version
//!   allows.
//! - `plugin`: those options, chosen from the server's version and the
//!   run's [`PluginRequest`] in one place, with the features' versions from
//!   [`crate::source::version`].
//! - [`stream`]: the COPY BOTH phase. A reader task owns the socket, hands
//!   the messages over in batches (one wake-up per batch, not per message)
//!   and writes every standby status update, so status keeps flowing while
//!   the stream loop waits on Kafka; the module doc says why.
//! - `pace`: inside a stream block (a large transaction streamed before
//!   its commit) over TCP, the reader raises its socket's receive
//!   low-water mark, so the walsender's one `send()` per change does not
//!   wake it (and cost the server a wake-up) every time.
//! - [`frame`]: the sans-IO wire format, fuzzed. XLogData payloads are not
//!   looked into here: every one, Begin and Commit included, goes to the
//!   one pgoutput decoder, [`crate::source::pgoutput::decode`].
//! - [`error`]: [`ReplicationError`], with server errors carrying their
//!   SQLSTATE as a typed value.
//!
//! # The invariant
//!
//! Status updates report the position the stream loop hands over
//! ([`ReplicationStream::update_applied_lsn`]), which is the ack tracker's
//! acknowledged position ([`crate::checkpoint`]): the server may discard
//! WAL before it, and the slot restarts there after a crash. The client
//! never reports a position it merely received: that would let a crash lose
//! changes that were read but never reached Kafka.

use std::fmt;

mod conn;
pub mod error;
pub use pgcdc_wire::frame;
mod pace;
mod plugin;
pub mod session;
pub mod stream;
#[cfg(test)]
mod tests;

pub use error::{ReplicationError, ServerError};
pub use frame::{CopyData, Keepalive, XLogData};
pub use plugin::{Origin, PgoutputBinary, PluginOptions, PluginRequest, ProtoVersion};
pub use session::{ServerIdentity, Session, SlotSnapshot};
pub use stream::{ReplicationMetrics, ReplicationStream, StartReplication};

use crate::source::tls::PgTls;

/// One server of the URL's host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The TCP host (the URL's `hostaddr` when it has one), or a Unix
    /// socket dir.
    pub host: String,
    pub port: u16,
    /// The name the server certificate must be issued for (verify-full).
    pub tls_server_name: String,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Which server of several a session must reach: libpq's
/// `target_session_attrs` (`any`, `read-write`, `read-only`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TargetSession {
    /// The first server that accepts the login.
    #[default]
    Any,
    /// A server that accepts writes: the primary, not a hot standby.
    ReadWrite,
    /// A server that refuses writes: a hot standby.
    ReadOnly,
}

impl TargetSession {
    /// The `target_session_attrs` value.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetSession::Any => "any",
            TargetSession::ReadWrite => "read-write",
            TargetSession::ReadOnly => "read-only",
        }
    }
}

/// Where and as whom a replication session connects.
#[derive(Clone)]
pub struct ReplicationConfig {
    /// The servers to try, in order, as libpq tries a multi-host URL's
    /// hosts; never empty.
    pub endpoints: Vec<Endpoint>,
    /// Which of them is wanted.
    pub target: TargetSession,
    pub user: String,
    /// For password, MD5 and SCRAM authentication.
    pub password: Option<String>,
    pub database: String,
    /// `sslmode` and the certificates.
    pub tls: PgTls,
    /// Shown in `pg_stat_replication`.
    pub application_name: String,
    /// The startup `options` parameter (`-c name=value ...`).
    pub options: Option<String>,
}

impl ReplicationConfig {
    /// The same settings with this `application_name`.
    pub fn with_application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = name.into();
        self
    }

    /// The same settings with these session options (`-c name=value ...`).
    pub fn with_options(mut self, options: impl Into<String>) -> Self {
        self.options = Some(options.into());
        self
    }
}

impl fmt::Debug for ReplicationConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicationConfig")
            .field("endpoints", &self.endpoints)
            .field("target", &self.target)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("database", &self.database)
            .field("tls", &self.tls)
            .field("application_name", &self.application_name)
            .field("options", &self.options)
            .finish()
    }
}
