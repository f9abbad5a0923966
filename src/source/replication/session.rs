//! A replication session before it streams: TCP, TLS as `sslmode` says,
//! the startup message with `replication=database`, authentication, and
//! simple queries (replication commands such as `IDENTIFY_SYSTEM` and
//! `CREATE_REPLICATION_SLOT`). [`Session::start`] sends `START_REPLICATION`
//! and hands the connection to the reader task ([`super::stream`]).
//!
//! The message flow is PostgreSQL's
//! ([start-up](https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-START-UP),
//! [SASL](https://www.postgresql.org/docs/current/sasl-authentication.html)).
//! Errors the server reports while logging in with a class-28 SQLSTATE are
//! [`ReplicationError::Login`]; all others keep their SQLSTATE in
//! [`ReplicationError::Server`].

use std::io;
use std::sync::Arc;

use bytes::BytesMut;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::conn::{server_error, Conn, Wire};
use super::error::ReplicationError;
use super::frame::{self, AuthRequest, Row};
use super::stream::{ReplicationStream, StartReplication};
use super::{PluginOptions, ReplicationConfig};
use crate::source::tls::SslMode;

/// An authenticated replication session, ready for commands.
pub struct Session {
    conn: Conn,
    server_version_num: u32,
}

impl Session {
    /// Connects and logs in as `config` says.
    pub async fn connect(config: &ReplicationConfig) -> Result<Session, ReplicationError> {
        let io = open(config).await?;
        Session::login(io, config).await
    }

    /// Logs in over an open byte stream (a socket after TLS, or a test pipe).
    pub(super) async fn login(
        io: Box<dyn Wire>,
        config: &ReplicationConfig,
    ) -> Result<Session, ReplicationError> {
        let mut conn = Conn::new(io);
        let mut params = vec![
            ("user", config.user.as_str()),
            ("database", config.database.as_str()),
            ("replication", "database"),
            ("client_encoding", "UTF8"),
            ("application_name", config.application_name.as_str()),
        ];
        if let Some(options) = config.options.as_deref() {
            params.push(("options", options));
        }
        frontend::startup_message(params, &mut conn.out)?;
        conn.flush().await?;
        authenticate(&mut conn, config).await?;
        let mut server_version_num = 0;
        loop {
            let frame = conn.read_frame("starting the session").await?;
            match frame.tag {
                b'S' => {
                    let (name, value) = frame::parse_parameter_status(&frame.body)?;
                    if name == "server_version" {
                        server_version_num = parse_server_version(value);
                    }
                }
                b'Z' => break,
                b'E' => return Err(ReplicationError::at_login(server_error(&frame)?)),
                // BackendKeyData, notices.
                _ => {}
            }
        }
        tracing::debug!(server_version_num, "replication session ready");
        Ok(Session {
            conn,
            server_version_num,
        })
    }

    /// The server's version as `server_version_num` reads it (e.g. 150004),
    /// from its `server_version` ParameterStatus; 0 if it sent none.
    pub fn server_version_num(&self) -> u32 {
        self.server_version_num
    }

    /// `CREATE_REPLICATION_SLOT` for a pgoutput slot named `slot` (already
    /// quoted), in the syntax this server takes: the option list of 15+, or
    /// the keywords of 14, which 15+ still accept but no longer document.
    pub fn create_slot_command(
        &self,
        slot: &str,
        temporary: bool,
        snapshot: SlotSnapshot,
    ) -> String {
        create_slot_command(self.server_version_num, slot, temporary, snapshot)
    }

    /// Runs `sql` (a replication command, or SQL on a `replication=database`
    /// session) with the simple query protocol; returns its rows as text.
    /// A server error leaves the session usable.
    pub async fn simple_query(&mut self, sql: &str) -> Result<Vec<Row>, ReplicationError> {
        frontend::query(sql, &mut self.conn.out)?;
        self.conn.flush().await?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let frame = self.conn.read_frame("running a command").await?;
            match frame.tag {
                b'D' => rows.push(frame::parse_data_row(&frame.body)?),
                b'E' => error = Some(server_error(&frame)?),
                b'Z' => {
                    return match error {
                        Some(e) => Err(ReplicationError::Server(e)),
                        None => Ok(rows),
                    }
                }
                // RowDescription, CommandComplete, EmptyQueryResponse, notices.
                _ => {}
            }
        }
    }

    /// `IDENTIFY_SYSTEM`: the server's current WAL flush position.
    pub async fn identify_system(&mut self) -> Result<crate::lsn::Lsn, ReplicationError> {
        const QUERY: &str = "IDENTIFY_SYSTEM";
        let rows = self.simple_query(QUERY).await?;
        rows.first()
            .and_then(|r| r.get(2))
            .and_then(Option::as_ref)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.parse().ok())
            .ok_or(ReplicationError::Reply { query: QUERY })
    }

    /// Sends `START_REPLICATION` for `start.slot` from `start.lsn`, with the
    /// plugin options this server understands ([`PluginOptions`]), and waits
    /// for the server to enter COPY BOTH; then streams.
    pub async fn start(
        mut self,
        start: StartReplication,
    ) -> Result<ReplicationStream, ReplicationError> {
        let options = PluginOptions::for_server(self.server_version_num, &start.publication);
        let sql = format!(
            "START_REPLICATION SLOT {} LOGICAL {} ({})",
            crate::source::sql::quote_ident(&start.slot),
            start.lsn,
            options.render()
        );
        tracing::debug!(%sql, "starting replication");
        frontend::query(&sql, &mut self.conn.out)?;
        self.conn.flush().await?;
        loop {
            let frame = self.conn.read_frame("starting replication").await?;
            match frame.tag {
                b'W' => break,
                b'E' => return Err(ReplicationError::Server(server_error(&frame)?)),
                // Notices, parameter status.
                b'N' | b'S' => {}
                tag => {
                    return Err(ReplicationError::Unexpected {
                        tag,
                        during: "starting replication",
                    })
                }
            }
        }
        Ok(ReplicationStream::spawn(self.conn, start))
    }
}

/// What a new slot does with the snapshot it is consistent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotSnapshot {
    /// Exported for other sessions (`SET TRANSACTION SNAPSHOT`) until the
    /// creating session runs its next command: the initial snapshot.
    Export,
    /// Not kept: streaming starts at the consistent point.
    Nothing,
}

/// See [`Session::create_slot_command`]; 0 (version unknown) takes the
/// current syntax.
pub(super) fn create_slot_command(
    server_version_num: u32,
    slot: &str,
    temporary: bool,
    snapshot: SlotSnapshot,
) -> String {
    let temporary = if temporary { " TEMPORARY" } else { "" };
    let old_syntax = server_version_num != 0 && server_version_num < 150_000;
    let snapshot = match (old_syntax, snapshot) {
        (false, SlotSnapshot::Export) => " (SNAPSHOT 'export')",
        (false, SlotSnapshot::Nothing) => " (SNAPSHOT 'nothing')",
        (true, SlotSnapshot::Export) => " EXPORT_SNAPSHOT",
        (true, SlotSnapshot::Nothing) => " NOEXPORT_SNAPSHOT",
    };
    format!("CREATE_REPLICATION_SLOT {slot}{temporary} LOGICAL pgoutput{snapshot}")
}

/// `server_version` ("15.4", "16.2 (Debian 16.2-1)", "17beta1", "9.6.24")
/// as `server_version_num` (150004, 160002, 170000, 90624); 0 if unreadable.
pub(super) fn parse_server_version(text: &str) -> u32 {
    let numbers: Vec<u32> = text
        .split(|c: char| !c.is_ascii_digit())
        .take_while(|part| !part.is_empty())
        .take(3)
        .map(|part| part.parse().unwrap_or(0))
        .collect();
    // Saturating: the text comes from the wire.
    let num = |major: u32, minor: u32, patch: u32| {
        major
            .saturating_mul(10_000)
            .saturating_add(minor.saturating_mul(100))
            .saturating_add(patch)
    };
    match numbers.as_slice() {
        [major, minor, patch] if *major < 10 => num(*major, *minor, *patch),
        [major, minor, ..] if *major >= 10 => num(*major, 0, *minor),
        [major, ..] => num(*major, 0, 0),
        _ => 0,
    }
}

/// TCP, then TLS as `sslmode` says (an `SSLRequest` first, as libpq does);
/// or a Unix socket when the host is a directory, in clear as libpq does.
async fn open(config: &ReplicationConfig) -> Result<Box<dyn Wire>, ReplicationError> {
    let mode = config.tls.mode;
    #[cfg(unix)]
    if config.host.starts_with('/') {
        let path = format!("{}/.s.PGSQL.{}", config.host, config.port);
        if matches!(
            mode,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        ) {
            return Err(ReplicationError::TlsRefused {
                addr: path,
                mode: mode.as_str(),
            });
        }
        let socket = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|error| ReplicationError::Connect { addr: path, error })?;
        return Ok(Box::new(socket));
    }
    let addr = format!("{}:{}", config.host, config.port);
    let mut tcp = TcpStream::connect((config.host.as_str(), config.port))
        .await
        .map_err(|error| ReplicationError::Connect {
            addr: addr.clone(),
            error,
        })?;
    // Status updates are small and must not wait for more to send.
    let _ = tcp.set_nodelay(true);
    if mode == SslMode::Disable {
        return Ok(Box::new(tcp));
    }
    let tls = config
        .tls
        .rustls_config()
        .map_err(ReplicationError::TlsSetting)?;
    let mut request = BytesMut::new();
    frontend::ssl_request(&mut request);
    tcp.write_all(&request).await?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await?;
    match (answer, mode) {
        ([b'S'], _) => {}
        ([b'N'], SslMode::Prefer) => return Ok(Box::new(tcp)),
        ([b'N'], _) => {
            return Err(ReplicationError::TlsRefused {
                addr,
                mode: mode.as_str(),
            })
        }
        ([tag], _) => {
            return Err(ReplicationError::Unexpected {
                tag,
                during: "asking for TLS",
            })
        }
    }
    // As for the SQL connection: the URL's host is the name checked (under
    // verify-full); a name rustls cannot take is checked against nothing.
    let name = ServerName::try_from(config.tls_server_name.clone())
        .or_else(|_| ServerName::try_from("invalid.invalid".to_owned()))
        .map_err(|e| ReplicationError::Tls {
            addr: addr.clone(),
            mode: mode.as_str(),
            error: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .map_err(|error| ReplicationError::Tls {
            addr,
            mode: mode.as_str(),
            error,
        })?;
    Ok(Box::new(stream))
}

/// Answers the server's authentication requests until it says Ok.
async fn authenticate(conn: &mut Conn, config: &ReplicationConfig) -> Result<(), ReplicationError> {
    let password = || {
        config
            .password
            .as_deref()
            .filter(|p| !p.is_empty())
            .ok_or(ReplicationError::PasswordMissing)
    };
    let mut scram: Option<ScramSha256> = None;
    loop {
        let frame = conn.read_frame("logging in").await?;
        let request = match frame.tag {
            b'R' => frame::parse_auth_request(&frame.body)?,
            b'E' => return Err(ReplicationError::at_login(server_error(&frame)?)),
            b'N' => continue,
            tag => {
                return Err(ReplicationError::Unexpected {
                    tag,
                    during: "logging in",
                })
            }
        };
        match request {
            AuthRequest::Ok => return Ok(()),
            AuthRequest::Cleartext => {
                frontend::password_message(password()?.as_bytes(), &mut conn.out)?;
            }
            AuthRequest::Md5 { salt } => {
                let hash = postgres_protocol::authentication::md5_hash(
                    config.user.as_bytes(),
                    password()?.as_bytes(),
                    salt,
                );
                frontend::password_message(hash.as_bytes(), &mut conn.out)?;
            }
            AuthRequest::Sasl { mechanisms } => {
                if !mechanisms.iter().any(|m| m == SCRAM_SHA_256) {
                    return Err(ReplicationError::UnsupportedAuth(format!(
                        "SASL ({})",
                        mechanisms.join(", ")
                    )));
                }
                // No channel binding, as on the SQL connection (see tls.rs).
                let exchange =
                    ScramSha256::new(password()?.as_bytes(), ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, exchange.message(), &mut conn.out)?;
                scram = Some(exchange);
            }
            AuthRequest::SaslContinue(data) => {
                let exchange = scram.as_mut().ok_or(ReplicationError::Unexpected {
                    tag: b'R',
                    during: "logging in (SASL continue without a start)",
                })?;
                exchange.update(&data).map_err(ReplicationError::Scram)?;
                frontend::sasl_response(exchange.message(), &mut conn.out)?;
            }
            AuthRequest::SaslFinal(data) => {
                let exchange = scram.as_mut().ok_or(ReplicationError::Unexpected {
                    tag: b'R',
                    during: "logging in (SASL final without a start)",
                })?;
                exchange.finish(&data).map_err(ReplicationError::Scram)?;
                continue;
            }
            AuthRequest::Other(code) => {
                return Err(ReplicationError::UnsupportedAuth(format!("code {code}")))
            }
        }
        conn.flush().await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_creation_follows_the_server_version() {
        use super::SlotSnapshot::{Export, Nothing};
        assert_eq!(
            create_slot_command(140_010, "\"s\"", false, Export),
            "CREATE_REPLICATION_SLOT \"s\" LOGICAL pgoutput EXPORT_SNAPSHOT"
        );
        assert_eq!(
            create_slot_command(140_010, "s", true, Nothing),
            "CREATE_REPLICATION_SLOT s TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT"
        );
        assert_eq!(
            create_slot_command(150_004, "s", false, Export),
            "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'export')"
        );
        assert_eq!(
            create_slot_command(180_000, "s", true, Nothing),
            "CREATE_REPLICATION_SLOT s TEMPORARY LOGICAL pgoutput (SNAPSHOT 'nothing')"
        );
    }

    #[test]
    fn server_versions() {
        assert_eq!(parse_server_version("15.4"), 150004);
        assert_eq!(
            parse_server_version("16.2 (Debian 16.2-1.pgdg120+2)"),
            160002
        );
        assert_eq!(parse_server_version("17beta1"), 170000);
        assert_eq!(parse_server_version("9.6.24"), 90624);
        assert_eq!(parse_server_version("weird"), 0);
        assert_eq!(parse_server_version("99999999.99999999"), u32::MAX);
    }
}
