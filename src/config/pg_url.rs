//! `--pg-url`: a libpq-style PostgreSQL URL whose password never reaches a
//! log, with its TLS settings, and the connection facts read from it.

use std::fmt;

use crate::options::Secret;
use crate::source::replication::{Endpoint, ReplicationConfig, TargetSession};
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

    /// A replication connection with these settings: every host with its
    /// port, `target_session_attrs`, user, password, database and TLS (the
    /// certificate checked against the URL's host, as on the SQL
    /// connection).
    pub fn replication_config(&self) -> ReplicationConfig {
        ReplicationConfig {
            endpoints: self.endpoints(),
            target: match self.parsed.get_target_session_attrs() {
                tokio_postgres::config::TargetSessionAttrs::ReadWrite => TargetSession::ReadWrite,
                tokio_postgres::config::TargetSessionAttrs::ReadOnly => TargetSession::ReadOnly,
                _ => TargetSession::Any,
            },
            user: self.user(),
            password: Some(self.password()).filter(|p| !p.is_empty()),
            database: self.dbname(),
            tls: self.tls.clone(),
            application_name: "pgcdc-kafka".to_owned(),
            options: None,
        }
    }

    /// The URL's servers in order, as libpq pairs them: the i-th host with
    /// the i-th `hostaddr` (if any) and the i-th port (one port applies to
    /// every host); 127.0.0.1:5432 when it names none.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        let hosts: Vec<String> = self
            .parsed
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .collect();
        let addrs = self.parsed.get_hostaddrs();
        let ports = self.parsed.get_ports();
        let count = hosts.len().max(addrs.len()).max(1);
        (0..count)
            .map(|i| {
                let name = hosts.get(i).cloned();
                let connect = addrs.get(i).map(ToString::to_string).or(name.clone());
                let port = match ports {
                    [one] => *one,
                    _ => ports.get(i).copied().unwrap_or(5432),
                };
                Endpoint {
                    host: connect.unwrap_or_else(|| "127.0.0.1".to_owned()),
                    port,
                    tls_server_name: name.unwrap_or_else(|| "127.0.0.1".to_owned()),
                }
            })
            .collect()
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
        let hosts: Vec<String> = self
            .endpoints()
            .iter()
            .map(|e| format!("{}:{}", e.tls_server_name, e.port))
            .collect();
        write!(
            f,
            "postgres://{}@{}/{}",
            self.user(),
            hosts.join(","),
            self.dbname()
        )?;
        let mut parameters = Vec::new();
        if self.tls.mode != crate::source::tls::SslMode::Prefer {
            parameters.push(format!("sslmode={}", self.tls.mode.as_str()));
        }
        if let Some(target) =
            Some(self.replication_config().target).filter(|t| *t != TargetSession::Any)
        {
            parameters.push(format!("target_session_attrs={}", target.as_str()));
        }
        match parameters.is_empty() {
            true => Ok(()),
            false => write!(f, "?{}", parameters.join("&")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_host_urls_keep_every_host_in_order() {
        let url: PgUrl =
            "postgres://cdc:pw@db-a:5433,db-b:5434/app?target_session_attrs=read-write"
                .parse()
                .expect("a multi-host URL parses");
        let config = url.replication_config();
        let hosts: Vec<String> = config.endpoints.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["db-a:5433", "db-b:5434"]);
        assert_eq!(config.target, TargetSession::ReadWrite);
        assert_eq!(
            url.to_string(),
            "postgres://cdc@db-a:5433,db-b:5434/app?target_session_attrs=read-write"
        );

        let one_port: PgUrl = "host=a,b port=6000 hostaddr=10.0.0.1,10.0.0.2 user=u dbname=d"
            .parse()
            .expect("a key-value string with two hosts parses");
        let endpoints = one_port.endpoints();
        assert_eq!(endpoints.len(), 2);
        assert_eq!(endpoints[1].host, "10.0.0.2");
        assert_eq!(endpoints[1].port, 6000);
        assert_eq!(endpoints[1].tls_server_name, "b");
        assert_eq!(one_port.replication_config().target, TargetSession::Any);

        let plain: PgUrl = "postgres://u@h/d".parse().expect("parses");
        assert_eq!(plain.to_string(), "postgres://u@h:5432/d");
    }
}
