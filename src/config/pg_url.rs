//! `--pg-url`: a libpq-style PostgreSQL URL whose password never reaches a
//! log, with its TLS settings, and the connection facts read from it.

use std::fmt;

use crate::options::Secret;
use crate::source::replication::ReplicationConfig;
use crate::source::tls::PgTls;

/// A PostgreSQL connection URL whose password never reaches a log, with
/// its TLS settings (libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`;
/// see [`crate::source::tls`]).
#[derive(Clone)]
pub struct PgUrl {
    raw: String,
    parsed: tokio_postgres::Config,
    tls: PgTls,
}

impl PgUrl {
    /// The TLS settings.
    pub fn tls(&self) -> &PgTls {
        &self.tls
    }

    /// The same connection with `password` (from `--pg-password` or
    /// `--pg-password-file`) in place of the URL's.
    pub fn with_password(&self, password: &Secret) -> PgUrl {
        let mut url = self.clone();
        url.parsed.password(password.expose());
        url
    }

    /// Where the TCP connection goes: the first `hostaddr`, else the host.
    pub fn connect_host(&self) -> String {
        match self.parsed.get_hostaddrs().first() {
            Some(addr) => addr.to_string(),
            None => self.host(),
        }
    }

    /// A replication connection with these settings: host, port, user,
    /// password, database and TLS (the certificate checked against the
    /// URL's host, as on the SQL connection).
    pub fn replication_config(&self) -> ReplicationConfig {
        ReplicationConfig {
            host: self.connect_host(),
            port: self.port(),
            user: self.user(),
            password: Some(self.password()).filter(|p| !p.is_empty()),
            database: self.dbname(),
            tls: self.tls.clone(),
            tls_server_name: self.host(),
            application_name: "pgcdc-kafka".to_owned(),
            options: None,
        }
    }

    /// The parsed connection settings.
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.parsed
    }

    /// The URL as given, including any password: for connecting only.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// First host name, or 127.0.0.1 when the URL names none.
    pub fn host(&self) -> String {
        match self.parsed.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "127.0.0.1".to_owned(),
        }
    }

    /// First port, or 5432.
    pub fn port(&self) -> u16 {
        self.parsed.get_ports().first().copied().unwrap_or(5432)
    }

    /// The user name, or `postgres`.
    pub fn user(&self) -> String {
        self.parsed.get_user().unwrap_or("postgres").to_owned()
    }

    /// The password, or empty.
    pub fn password(&self) -> String {
        self.parsed
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    }

    /// The database name, or the user name as libpq defaults it.
    pub fn dbname(&self) -> String {
        self.parsed
            .get_dbname()
            .map(str::to_owned)
            .unwrap_or_else(|| self.user())
    }
}

impl std::str::FromStr for PgUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rest, parameters) = crate::source::tls::split_parameters(s);
        let mut parsed = rest.parse::<tokio_postgres::Config>().map_err(|e| {
            format!("not a PostgreSQL connection URL ({e}); expected postgres://user:password@host:port/database")
        })?;
        let tls = PgTls::from_parameters(&parameters).map_err(|e| e.to_string())?;
        parsed.ssl_mode(tls.tokio_postgres_mode());
        Ok(PgUrl {
            raw: s.to_owned(),
            parsed,
            tls,
        })
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "postgres://{}@{}:{}/{}",
            self.user(),
            self.host(),
            self.port(),
            self.dbname()
        )?;
        match self.tls.mode {
            crate::source::tls::SslMode::Prefer => Ok(()),
            mode => write!(f, "?sslmode={}", mode.as_str()),
        }
    }
}
