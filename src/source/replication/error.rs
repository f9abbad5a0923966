//! What can go wrong on a replication session, classified in the type:
//! [`ReplicationError::is_retryable`] says whether reconnecting from the
//! slot may help. A server's ErrorResponse becomes a [`ServerError`] whose
//! SQLSTATE is a typed [`SqlState`], classified by
//! [`crate::source::sqlstate::is_transient`].

use std::io;

use tokio_postgres::error::SqlState;

use super::frame::{ErrorFields, FrameError};
use crate::source::tls::TlsSettingError;

/// An ErrorResponse of the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (SQLSTATE {}){}{}", code.code(), Detail("detail", detail), Detail("hint", hint))]
pub struct ServerError {
    /// ERROR, FATAL or PANIC.
    pub severity: String,
    /// The SQLSTATE.
    pub code: SqlState,
    /// The primary message.
    pub message: String,
    /// The server's detail, if any.
    pub detail: Option<String>,
    /// The server's hint, if any.
    pub hint: Option<String>,
}

impl ServerError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        crate::source::sqlstate::is_transient(&self.code)
    }
}

impl From<ErrorFields> for ServerError {
    fn from(fields: ErrorFields) -> Self {
        ServerError {
            severity: fields.severity,
            code: SqlState::from_code(&fields.code),
            message: fields.message,
            detail: fields.detail,
            hint: fields.hint,
        }
    }
}

/// Renders `; detail: ...` when present.
struct Detail<'a>(&'static str, &'a Option<String>);

impl std::fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Some(text) => write!(f, "; {}: {text}", self.0),
            None => Ok(()),
        }
    }
}

/// Errors of the replication session.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error("cannot connect to PostgreSQL at {addr} for replication; check --pg-url and that the server accepts connections")]
    Connect {
        addr: String,
        #[source]
        error: io::Error,
    },
    #[error("the TLS settings of --pg-url cannot be used for the replication connection")]
    TlsSetting(#[source] TlsSettingError),
    #[error("PostgreSQL at {addr} does not offer TLS, which sslmode={mode} requires; enable ssl on the server or choose sslmode=prefer")]
    TlsRefused { addr: String, mode: &'static str },
    #[error("the TLS handshake with PostgreSQL at {addr} failed (sslmode={mode}); check sslrootcert, and with verify-full that the host in --pg-url is a name the certificate was issued for")]
    Tls {
        addr: String,
        mode: &'static str,
        #[source]
        error: io::Error,
    },
    #[error("PostgreSQL asks for a password, but none is given; pass --pg-password or --pg-password-file")]
    PasswordMissing,
    #[error("PostgreSQL asks for authentication method {0}, which pgcdc-kafka does not support; allow scram-sha-256, md5, password or cert in pg_hba.conf")]
    UnsupportedAuth(String),
    #[error("SCRAM-SHA-256 authentication with PostgreSQL failed; check the password")]
    Scram(#[source] io::Error),
    #[error("PostgreSQL refused the replication login; check the user and password, and that pg_hba.conf has a replication line for this user and database")]
    Login(#[source] ServerError),
    #[error("PostgreSQL reported an error on the replication connection")]
    Server(#[source] ServerError),
    #[error("the replication connection to PostgreSQL broke")]
    Io(#[from] io::Error),
    #[error("the replication connection closed while {0}")]
    Closed(&'static str),
    #[error("PostgreSQL sent a malformed message on the replication connection")]
    Frame(#[from] FrameError),
    #[error("PostgreSQL sent an unexpected message '{}' while {during}", char::from(*.tag))]
    Unexpected { tag: u8, during: &'static str },
    #[error("{query} returned an unexpected reply")]
    Reply { query: &'static str },
    #[error("the replication reader task stopped unexpectedly")]
    ReaderGone,
    #[error(transparent)]
    Unsupported(#[from] crate::source::version::Unsupported),
    #[error("no host of --pg-url took a {wanted} replication session (tried {tried}); during a failover this lasts until a standby is promoted")]
    NoTargetServer {
        wanted: &'static str,
        tried: String,
        /// The last host's error, when one failed rather than being of the wrong kind.
        #[source]
        last: Option<Box<ReplicationError>>,
    },
}

impl ReplicationError {
    /// Whether reconnecting (and restarting from the slot) may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ReplicationError::Connect { .. }
            | ReplicationError::Io(_)
            | ReplicationError::Closed(_)
            | ReplicationError::ReaderGone
            | ReplicationError::NoTargetServer { .. } => true,
            ReplicationError::Server(e) => e.is_retryable(),
            // A server starting up or shutting down answers logins with 57P03/57P01.
            ReplicationError::Login(e) => e.is_retryable(),
            ReplicationError::TlsSetting(_)
            | ReplicationError::TlsRefused { .. }
            | ReplicationError::Tls { .. }
            | ReplicationError::PasswordMissing
            | ReplicationError::UnsupportedAuth(_)
            | ReplicationError::Scram(_)
            | ReplicationError::Frame(_)
            | ReplicationError::Unexpected { .. }
            | ReplicationError::Reply { .. }
            | ReplicationError::Unsupported(_) => false,
        }
    }

    /// The server's error, if this is one.
    pub fn server_error(&self) -> Option<&ServerError> {
        match self {
            ReplicationError::Server(e) | ReplicationError::Login(e) => Some(e),
            _ => None,
        }
    }

    /// A server ErrorResponse during login is a refused login when its class
    /// is 28 (invalid authorization); otherwise (e.g. a missing database,
    /// too many connections) it is reported as is.
    pub(super) fn at_login(error: ServerError) -> Self {
        match error.code.code().starts_with("28") {
            true => ReplicationError::Login(error),
            false => ReplicationError::Server(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, message: &str) -> ServerError {
        ServerError {
            severity: "ERROR".into(),
            code: SqlState::from_code(code),
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    #[test]
    fn server_errors_are_classified_by_sqlstate() {
        let terminated = server(
            "57P01",
            "terminating connection due to administrator command",
        );
        assert!(ReplicationError::Server(terminated).is_retryable());
        let busy = server("55006", "replication slot \"s\" is active for PID 42");
        assert!(
            !ReplicationError::Server(busy).is_retryable(),
            "a second instance must stop and say so"
        );
        let missing = server("42704", "replication slot \"s\" does not exist");
        assert!(!ReplicationError::Server(missing).is_retryable());
        let auth = server("28P01", "password authentication failed for user \"u\"");
        let login = ReplicationError::at_login(auth);
        assert!(matches!(login, ReplicationError::Login(_)));
        assert!(!login.is_retryable());
        let starting =
            ReplicationError::at_login(server("57P03", "the database system is starting up"));
        assert!(starting.is_retryable());
    }

    #[test]
    fn display_carries_the_code_detail_and_hint() {
        let mut e = server("55006", "replication slot \"s\" is active for PID 42");
        assert_eq!(
            e.to_string(),
            "replication slot \"s\" is active for PID 42 (SQLSTATE 55006)"
        );
        e.detail = Some("d".into());
        e.hint = Some("h".into());
        assert!(e
            .to_string()
            .ends_with("(SQLSTATE 55006); detail: d; hint: h"));
    }
}
