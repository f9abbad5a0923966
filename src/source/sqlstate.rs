//! Which server errors are worth retrying, decided from their SQLSTATE
//! ([error codes](https://www.postgresql.org/docs/current/errcodes-appendix.html)).
//!
//! Both Postgres connections use it: the SQL connection (tokio-postgres'
//! `DbError`) and the replication session ([`super::replication`]'s
//! `ServerError`). Both carry the code as a typed
//! [`SqlState`], never as text to be searched.

use tokio_postgres::error::SqlState;

/// Whether a server error is worth retrying: connection problems (class
/// 08), the server shutting down or starting (57P01-57P03), and too many
/// connections (53300). A slot held by another walsender (55006) is not
/// retried: that is usually a second connector instance, and the operator
/// must hear about it.
///
/// ```
/// use pgcdc_kafka::source::sqlstate::is_transient;
/// use tokio_postgres::error::SqlState;
///
/// assert!(is_transient(&SqlState::ADMIN_SHUTDOWN));
/// assert!(!is_transient(&SqlState::OBJECT_IN_USE));
/// ```
pub fn is_transient(code: &SqlState) -> bool {
    code.code().starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
        ]
        .contains(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for transient in ["08006", "08000", "57P01", "57P02", "57P03", "53300"] {
            assert!(is_transient(&SqlState::from_code(transient)), "{transient}");
        }
        // Slot busy, slot missing, bad password, out of disk: not by waiting.
        for definite in ["55006", "42704", "28P01", "53100", "XX000"] {
            assert!(!is_transient(&SqlState::from_code(definite)), "{definite}");
        }
    }
}
