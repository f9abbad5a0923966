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
use std::os::fd::{AsFd, OwnedFd};
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
use super::{Endpoint, PluginOptions, ReplicationConfig, TargetSession};
use crate::lsn::Lsn;
use crate::source::tls::SslMode;
use crate::source::version::{Feature, ServerVersion};

/// An authenticated replication session, ready for commands.
pub struct Session {
    conn: Conn,
    server_version_num: u32,
    /// `in_hot_standby` and `default_transaction_read_only` as the server
    /// reported them at login (14+ reports both).
    in_hot_standby: Option<bool>,
    default_read_only: Option<bool>,
    /// The server it reached (`None` over a test pipe).
    endpoint: Option<Endpoint>,
}

/// Which cluster a server belongs to and which history it is on, from
/// `IDENTIFY_SYSTEM`: a physical standby shares its primary's
/// `system_identifier` and, once promoted, continues on a new timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerIdentity {
    /// `pg_control_system().system_identifier`: fixed by `initdb`.
    pub system_identifier: u64,
    /// The timeline the server writes (a primary) or replays (a standby).
    pub timeline: u32,
}

impl std::fmt::Display for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "system identifier {} timeline {}",
            self.system_identifier, self.timeline
        )
    }
}

impl Session {
    /// Connects and logs in as `config` says: tries the URL's hosts in
    /// order, as libpq does, and takes the first that accepts the login
    /// and is the kind of server `target_session_attrs` asks for. A refused
    /// login stops the search (libpq's rule: the other hosts would refuse
    /// it too); an unreachable host or one of the wrong kind moves on.
    pub async fn connect(config: &ReplicationConfig) -> Result<Session, ReplicationError> {
        let mut tried = Vec::new();
        let mut last = None;
        for endpoint in &config.endpoints {
            let reached = async {
                let (io, socket) = open(endpoint, config).await?;
                let mut session = Session::login(io, config).await?;
                session.conn.low_water = socket;
                session.endpoint = Some(endpoint.clone());
                let fits = session.is_target(config.target).await?;
                Ok::<_, ReplicationError>((session, fits))
            }
            .await;
            match reached {
                Ok((session, true)) => return Ok(session),
                Ok((_, false)) => {
                    tracing::debug!(%endpoint, target = config.target.as_str(), "not the kind of server asked for; trying the next host");
                    tried.push(format!("{endpoint} (not {})", config.target.as_str()));
                    last = None;
                }
                Err(e @ (ReplicationError::Login(_) | ReplicationError::PasswordMissing)) => {
                    return Err(e)
                }
                Err(e) if config.endpoints.len() == 1 => return Err(e),
                Err(e) => {
                    tracing::debug!(%endpoint, error = %e, "cannot use this host; trying the next");
                    tried.push(format!("{endpoint} ({e})"));
                    last = Some(e);
                }
            }
        }
        Err(ReplicationError::NoTargetServer {
            wanted: config.target.as_str(),
            tried: tried.join(", "),
            last: last.map(Box::new),
        })
    }

    /// Whether this server is of the kind `target` asks for: from the
    /// `in_hot_standby` and `default_transaction_read_only` it reported,
    /// else (an older server or a pooler) `SHOW transaction_read_only`.
    async fn is_target(&mut self, target: TargetSession) -> Result<bool, ReplicationError> {
        if target == TargetSession::Any {
            return Ok(true);
        }
        let read_only = match (self.in_hot_standby, self.default_read_only) {
            (Some(standby), Some(read_only)) => standby || read_only,
            _ => {
                const QUERY: &str = "SHOW transaction_read_only";
                let rows = self.simple_query(QUERY).await?;
                match rows
                    .first()
                    .and_then(|r| r.first())
                    .and_then(Option::as_ref)
                {
                    Some(value) => &value[..] == b"on",
                    None => return Err(ReplicationError::Reply { query: QUERY }),
                }
            }
        };
        Ok(match target {
            TargetSession::ReadWrite => !read_only,
            TargetSession::ReadOnly => read_only,
            TargetSession::Any => true,
        })
    }

    /// The server this session reached (`None` over a test pipe).
    pub fn endpoint(&self) -> Option<&Endpoint> {
        self.endpoint.as_ref()
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
        let (mut in_hot_standby, mut default_read_only) = (None, None);
        loop {
            let frame = conn.read_frame("starting the session").await?;
            match frame.tag {
                b'S' => {
                    let (name, value) = frame::parse_parameter_status(&frame.body)?;
                    match name {
                        "server_version" => server_version_num = parse_server_version(value),
                        "in_hot_standby" => in_hot_standby = Some(value == "on"),
                        "default_transaction_read_only" => default_read_only = Some(value == "on"),
                        _ => {}
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
            in_hot_standby,
            default_read_only,
            endpoint: None,
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
    pub async fn identify_system(&mut self) -> Result<Lsn, ReplicationError> {
        Ok(self.identify().await?.1)
    }

    /// `IDENTIFY_SYSTEM`: which cluster and timeline the server is on, and
    /// its current WAL flush position.
    pub async fn identify(&mut self) -> Result<(ServerIdentity, Lsn), ReplicationError> {
        const QUERY: &str = "IDENTIFY_SYSTEM";
        let rows = self.simple_query(QUERY).await?;
        let field = |i: usize| {
            rows.first()
                .and_then(|r| r.get(i))
                .and_then(Option::as_ref)
                .and_then(|b| std::str::from_utf8(b).ok())
        };
        let parsed = (|| {
            let identity = ServerIdentity {
                system_identifier: field(0)?.parse().ok()?,
                timeline: field(1)?.parse().ok()?,
            };
            Some((identity, field(2)?.parse().ok()?))
        })();
        parsed.ok_or(ReplicationError::Reply { query: QUERY })
    }

    /// `TIMELINE_HISTORY`: where each timeline before `timeline` ended, as
    /// `(timeline, switch point)`, oldest first (empty for timeline 1).
    pub async fn timeline_history(
        &mut self,
        timeline: u32,
    ) -> Result<Vec<(u32, Lsn)>, ReplicationError> {
        const QUERY: &str = "TIMELINE_HISTORY";
        if timeline <= 1 {
            return Ok(Vec::new());
        }
        let rows = self.simple_query(&format!("{QUERY} {timeline}")).await?;
        let content = rows
            .first()
            .and_then(|r| r.get(1))
            .and_then(Option::as_ref)
            .ok_or(ReplicationError::Reply { query: QUERY })?;
        Ok(parse_timeline_history(&String::from_utf8_lossy(content)))
    }

    /// Sends `START_REPLICATION` for `start.slot` from `start.lsn`, with the
    /// plugin options this server understands ([`PluginOptions`]), and waits
    /// for the server to enter COPY BOTH; then streams.
    pub async fn start(
        mut self,
        start: StartReplication,
    ) -> Result<ReplicationStream, ReplicationError> {
        let options = PluginOptions::for_server(
            ServerVersion(self.server_version_num),
            &start.publication,
            &start.plugin,
        )?;
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
    let old_syntax = !ServerVersion(server_version_num).has(Feature::SlotOptionList);
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

/// A timeline history file's lines, `parentTLI<tab>switchpoint<tab>reason`
/// ([format](https://www.postgresql.org/docs/current/continuous-archiving.html#BACKUP-TIMELINES)),
/// as `(timeline, switch point)`; lines that do not parse are skipped.
pub(super) fn parse_timeline_history(content: &str) -> Vec<(u32, Lsn)> {
    content
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let timeline = fields.next()?.parse().ok()?;
            let switch = fields.next()?.parse().ok()?;
            Some((timeline, switch))
        })
        .collect()
}

/// TCP, then TLS as `sslmode` says (an `SSLRequest` first, as libpq does);
/// or a Unix socket when the host is a directory, in clear as libpq does.
/// With a TCP connection, a duplicate of its descriptor for the reader's
/// pacing ([`super::pace`]).
async fn open(
    endpoint: &Endpoint,
    config: &ReplicationConfig,
) -> Result<(Box<dyn Wire>, Option<OwnedFd>), ReplicationError> {
    let mode = config.tls.mode;
    #[cfg(unix)]
    if endpoint.host.starts_with('/') {
        let path = format!("{}/.s.PGSQL.{}", endpoint.host, endpoint.port);
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
        return Ok((Box::new(socket), None));
    }
    let addr = endpoint.to_string();
    let mut tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|error| ReplicationError::Connect {
            addr: addr.clone(),
            error,
        })?;
    // Status updates are small and must not wait for more to send.
    let _ = tcp.set_nodelay(true);
    // Without it the stream is read as before, only dearer for the server.
    let socket = tcp.as_fd().try_clone_to_owned().ok();
    if mode == SslMode::Disable {
        return Ok((Box::new(tcp), socket));
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
        ([b'N'], SslMode::Prefer) => return Ok((Box::new(tcp), socket)),
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
    let name = ServerName::try_from(endpoint.tls_server_name.clone())
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
    Ok((Box::new(stream), socket))
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
    fn timeline_history_files() {
        let content = "1\t0/3000148\tno recovery target specified\n\n2\t0/5000000\tbefore 2026-01-01\nbad line\n";
        assert_eq!(
            parse_timeline_history(content),
            vec![
                (1, "0/3000148".parse().unwrap()),
                (2, "0/5000000".parse().unwrap())
            ]
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
