//! The client against a scripted server over an in-memory pipe: login,
//! commands, START_REPLICATION, status updates, keepalives, stop and errors.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_postgres::error::SqlState;

use super::*;
use crate::lsn::Lsn;

const TIMEOUT: Duration = Duration::from_secs(10);

fn config() -> ReplicationConfig {
    ReplicationConfig {
        endpoints: vec![Endpoint {
            host: "127.0.0.1".into(),
            port: 5432,
            tls_server_name: "localhost".into(),
        }],
        target: TargetSession::Any,
        user: "cdc".into(),
        password: Some("secret".into()),
        database: "app".into(),
        tls: crate::source::tls::PgTls::default(),
        application_name: "pgcdc-kafka-test".into(),
        options: Some("-c datestyle=ISO".into()),
    }
}

/// The server's end of the pipe.
struct Server(Box<dyn super::conn::Wire>);

impl Server {
    /// The startup message: its parameters.
    async fn startup(&mut self) -> Vec<(String, String)> {
        let len = self.0.read_i32().await.expect("startup length") as usize;
        let mut body = vec![0; len - 4];
        self.0.read_exact(&mut body).await.expect("startup body");
        assert_eq!(&body[..4], &196_608i32.to_be_bytes(), "protocol 3.0");
        let fields: Vec<String> = body[4..]
            .split(|&b| b == 0)
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect();
        fields
            .chunks(2)
            .filter(|pair| pair.len() == 2 && !pair[0].is_empty())
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect()
    }

    /// The next frontend message.
    async fn read(&mut self) -> (u8, Vec<u8>) {
        let read = async {
            let tag = self.0.read_u8().await.expect("tag");
            let len = self.0.read_i32().await.expect("length") as usize;
            let mut body = vec![0; len - 4];
            self.0.read_exact(&mut body).await.expect("body");
            (tag, body)
        };
        tokio::time::timeout(TIMEOUT, read)
            .await
            .expect("a frontend message in time")
    }

    /// The next standby status update: its flush position and reply flag.
    async fn status(&mut self) -> (Lsn, bool) {
        let (tag, body) = self.read().await;
        assert_eq!((tag, body[0]), (b'd', b'r'), "a status update");
        let position =
            |at: usize| Lsn::new(u64::from_be_bytes(body[at..at + 8].try_into().unwrap()));
        let (write, flush, apply) = (position(1), position(9), position(17));
        assert_eq!((write, apply), (flush, flush), "one position for all three");
        (flush, body[33] != 0)
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.expect("server write");
    }

    /// AuthenticationOk, server_version, BackendKeyData, ReadyForQuery.
    async fn welcome(&mut self) {
        let mut out = auth(0, &[]);
        out.extend(message(b'S', b"server_version\x0015.4\0"));
        out.extend(message(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]));
        out.extend(ready());
        self.send(&out).await;
    }

    /// Answers START_REPLICATION with CopyBothResponse; returns the query.
    async fn start_copy(&mut self) -> String {
        let (tag, query) = self.read().await;
        assert_eq!(tag, b'Q');
        self.send(&message(b'W', &[0, 0, 0])).await;
        String::from_utf8(query).unwrap()
    }
}

/// A session logged in (without a password) and streaming from 0/100 with
/// this status interval; the server's end, and the START_REPLICATION it got.
async fn streaming(interval: Duration) -> (ReplicationStream, Server, String) {
    let (client, mut server) = pipe();
    let config = config();
    let (session, ()) = tokio::join!(Session::login(client, &config), async {
        server.startup().await;
        server.welcome().await;
    });
    let session = session.expect("login");
    let (stream, query) = tokio::join!(session.start(start(0x100, interval)), server.start_copy());
    (stream.expect("streaming"), server, query)
}

fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn auth(code: i32, data: &[u8]) -> Vec<u8> {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(data);
    message(b'R', &body)
}

fn ready() -> Vec<u8> {
    message(b'Z', b"I")
}

fn error(code: &str, text: &str) -> Vec<u8> {
    message(
        b'E',
        format!("SFATAL\0VFATAL\0C{code}\0M{text}\0\0").as_bytes(),
    )
}

fn xlog(start: u64, end: u64, data: &[u8]) -> Vec<u8> {
    let mut body = BytesMut::new();
    body.put_u8(b'w');
    body.put_u64(start);
    body.put_u64(end);
    body.put_i64(0);
    body.put_slice(data);
    message(b'd', &body)
}

fn keepalive(end: u64, reply: bool) -> Vec<u8> {
    let mut body = BytesMut::new();
    body.put_u8(b'k');
    body.put_u64(end);
    body.put_i64(0);
    body.put_u8(u8::from(reply));
    message(b'd', &body)
}

fn pipe() -> (Box<DuplexStream>, Server) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    (Box::new(client), Server(Box::new(server)))
}

fn start(lsn: u64, interval: Duration) -> StartReplication {
    StartReplication {
        slot: "Slot".into(),
        publication: "pub".into(),
        lsn: Lsn::new(lsn),
        acknowledged: Lsn::new(lsn),
        status_interval: interval,
        plugin: PluginRequest::default(),
    }
}

#[tokio::test]
async fn logs_in_with_md5_and_reads_the_server_version() {
    let (client, mut server) = pipe();
    let server = tokio::spawn(async move {
        let params = server.startup().await;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("replication").as_deref(), Some("database"));
        assert_eq!(get("user").as_deref(), Some("cdc"));
        assert_eq!(get("database").as_deref(), Some("app"));
        assert_eq!(get("application_name").as_deref(), Some("pgcdc-kafka-test"));
        assert_eq!(get("options").as_deref(), Some("-c datestyle=ISO"));
        server.send(&auth(5, &[1, 2, 3, 4])).await;
        let (tag, body) = server.read().await;
        assert_eq!(tag, b'p');
        let expected = postgres_protocol::authentication::md5_hash(b"cdc", b"secret", [1, 2, 3, 4]);
        assert_eq!(&body[..body.len() - 1], expected.as_bytes());
        server.welcome().await;
        server
    });
    let session = Session::login(client, &config()).await.expect("login");
    assert_eq!(session.server_version_num(), 150_004);
    server.await.unwrap();
}

#[tokio::test]
async fn cleartext_password_and_a_refused_login() {
    let (client, mut server) = pipe();
    let server = tokio::spawn(async move {
        server.startup().await;
        server.send(&auth(3, &[])).await;
        let (tag, body) = server.read().await;
        assert_eq!((tag, body.as_slice()), (b'p', &b"secret\0"[..]));
        server
            .send(&error(
                "28P01",
                "password authentication failed for user \"cdc\"",
            ))
            .await;
        server
    });
    let error = Session::login(client, &config())
        .await
        .err()
        .expect("a refused login");
    let ReplicationError::Login(server_error) = &error else {
        panic!("not a login error: {error:?}");
    };
    assert_eq!(server_error.code, SqlState::INVALID_PASSWORD);
    assert!(!error.is_retryable());
    assert!(crate::error_chain(&error).contains("password authentication failed"));
    server.await.unwrap();
}

#[tokio::test]
async fn scram_starts_with_the_mechanism_and_a_client_first_message() {
    let (client, mut server) = pipe();
    let server = tokio::spawn(async move {
        server.startup().await;
        server
            .send(&auth(10, b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0"))
            .await;
        let (tag, body) = server.read().await;
        assert_eq!(tag, b'p');
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with("SCRAM-SHA-256\0"), "{text}");
        assert!(text.contains("n,,n=,r="), "no channel binding: {text}");
        server.send(&error("28P01", "SCRAM refused")).await;
    });
    let error = Session::login(client, &config())
        .await
        .err()
        .expect("refused");
    assert!(matches!(error, ReplicationError::Login(_)), "{error:?}");
    server.await.unwrap();
}

#[tokio::test]
async fn a_query_error_is_typed_and_leaves_the_session_usable() {
    let (client, mut server) = pipe();
    let server = tokio::spawn(async move {
        server.startup().await;
        server.welcome().await;
        let (tag, query) = server.read().await;
        assert_eq!(
            (tag, query.as_slice()),
            (b'Q', &b"CREATE_REPLICATION_SLOT x\0"[..])
        );
        let mut out = error("42710", "replication slot \"x\" already exists");
        out.extend(ready());
        server.send(&out).await;
        let (tag, query) = server.read().await;
        assert_eq!((tag, query.as_slice()), (b'Q', &b"IDENTIFY_SYSTEM\0"[..]));
        let mut row = vec![0, 4];
        for value in [&b"7001"[..], b"1", b"0/16B3748", b"app"] {
            row.extend_from_slice(&(value.len() as i32).to_be_bytes());
            row.extend_from_slice(value);
        }
        let mut out = message(b'T', &[0, 0]);
        out.extend(message(b'D', &row));
        out.extend(message(b'C', b"IDENTIFY_SYSTEM\0"));
        out.extend(ready());
        server.send(&out).await;
    });
    let mut session = Session::login(client, &config()).await.unwrap();
    let error = session
        .simple_query("CREATE_REPLICATION_SLOT x")
        .await
        .expect_err("the slot exists");
    let server_error = error.server_error().expect("a server error");
    assert_eq!(server_error.code, SqlState::DUPLICATE_OBJECT);
    assert_eq!(
        server_error.message,
        "replication slot \"x\" already exists"
    );
    assert_eq!(
        session.identify_system().await.expect("identify"),
        "0/16B3748".parse().unwrap()
    );
    server.await.unwrap();
}

#[tokio::test]
async fn start_replication_refused_with_its_sqlstate() {
    let (client, mut server) = pipe();
    let server = tokio::spawn(async move {
        server.startup().await;
        server.welcome().await;
        server.read().await;
        let mut out = error("42704", "replication slot \"Slot\" does not exist");
        out.extend(ready());
        server.send(&out).await;
        server
    });
    let session = Session::login(client, &config()).await.unwrap();
    let error = session
        .start(start(0x100, Duration::from_secs(1)))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        error.server_error().map(|e| e.code.clone()),
        Some(SqlState::UNDEFINED_OBJECT)
    );
    assert!(!error.is_retryable());
    server.await.unwrap();
}

#[tokio::test]
async fn status_updates_carry_the_acknowledged_position_not_the_received_one() {
    let (mut stream, mut server, query) = streaming(Duration::from_millis(50)).await;
    assert_eq!(
        query,
        "START_REPLICATION SLOT \"Slot\" LOGICAL 0/100 \
         (proto_version '1', publication_names '\"pub\"', messages 'true')\0"
    );
    // The first status confirms where streaming started.
    assert_eq!(server.status().await, (Lsn::new(0x100), false));

    let mut out = xlog(0x200, 0x9000, b"BEGIN");
    out.extend(xlog(0x300, 0x9000, b"COMMIT"));
    out.extend(keepalive(0x9000, true));
    server.send(&out).await;
    // The reply to the keepalive: still the start, although 0x9000 was received.
    assert_eq!(server.status().await, (Lsn::new(0x100), false));
    for expected in [&b"BEGIN"[..], b"COMMIT"] {
        match stream.recv().await.expect("no error") {
            Some(CopyData::XLogData(x)) => assert_eq!(&x.data[..], expected),
            other => panic!("expected XLogData, got {other:?}"),
        }
    }
    assert!(matches!(
        stream.try_recv(),
        Some(CopyData::Keepalive(Keepalive {
            reply_requested: true,
            ..
        }))
    ));
    assert_eq!(stream.try_recv(), None);
    assert_eq!(stream.metrics().last_wal_end(), Lsn::new(0x9000));

    // A handed-over position goes out within the status interval, and a
    // lower one never moves it back.
    stream.update_applied_lsn(Lsn::new(0x301));
    stream.update_applied_lsn(Lsn::new(0x200));
    let (position, _) = server.status().await;
    assert_eq!(position, Lsn::new(0x301));
    assert_eq!(stream.metrics().last_applied_lsn(), Lsn::new(0x301));
}

#[tokio::test]
async fn a_requested_reply_goes_out_at_once_and_only_once() {
    // An idle stream: without a request the next status would be 10 s away.
    let (mut stream, mut server, _) = streaming(Duration::from_millis(50)).await;
    assert_eq!(server.status().await, (Lsn::new(0x100), false));
    stream.request_reply();
    assert_eq!(
        server.status().await,
        (Lsn::new(0x100), true),
        "a status asking for a reply, at once"
    );
    assert_eq!(stream.metrics().replies_requested(), 1);
    // The server's answer: a keepalive with its sent position.
    server.send(&keepalive(0x500, false)).await;
    match stream.recv().await.expect("no error") {
        Some(CopyData::Keepalive(k)) => assert_eq!(k.wal_end, Lsn::new(0x500)),
        other => panic!("expected the keepalive, got {other:?}"),
    }
    // The statuses after it, up to a raised position's, do not ask again.
    stream.update_applied_lsn(Lsn::new(0x500));
    loop {
        let (position, reply) = server.status().await;
        assert!(!reply, "asked once");
        if position == Lsn::new(0x500) {
            break;
        }
    }
    assert_eq!(stream.metrics().replies_requested(), 1);
}

#[tokio::test]
async fn stop_reports_the_last_position_then_drains_until_the_server_ends() {
    let (mut stream, mut server, _) = streaming(Duration::from_secs(3600)).await;
    assert_eq!(server.status().await.0, Lsn::new(0x100));
    stream.update_applied_lsn(Lsn::new(0x500));
    stream.stop();
    // The raised position, though its interval has not passed, then CopyDone.
    assert_eq!(server.status().await.0, Lsn::new(0x500));
    assert_eq!(server.read().await, (b'c', vec![]));
    // In flight when the server saw CopyDone: read and dropped.
    let mut out = xlog(0x600, 0x600, b"late");
    out.extend(message(b'c', &[]));
    out.extend(message(b'C', b"START_STREAMING\0"));
    out.extend(ready());
    server.send(&out).await;
    assert_eq!(server.read().await, (b'X', vec![]), "terminate");
    let drained = tokio::time::timeout(TIMEOUT, async {
        let mut late = 0;
        while let Some(message) = stream.recv().await.expect("a clean end") {
            assert!(!matches!(message, CopyData::XLogData(ref x) if &x.data[..] == b"late"));
            late += 1;
        }
        late
    })
    .await
    .expect("the stream ends");
    assert_eq!(drained, 0);
}

#[tokio::test]
async fn an_error_ends_the_stream_after_the_messages_before_it() {
    let (mut stream, mut server, _) = streaming(Duration::from_secs(3600)).await;
    let mut out = xlog(0x200, 0x200, b"I");
    out.extend(error(
        "57P01",
        "terminating connection due to administrator command",
    ));
    server.send(&out).await;
    assert!(matches!(
        stream.recv().await,
        Ok(Some(CopyData::XLogData(_)))
    ));
    let error = stream
        .recv()
        .await
        .expect_err("the walsender was terminated");
    assert_eq!(
        error.server_error().map(|e| e.code.clone()),
        Some(SqlState::ADMIN_SHUTDOWN)
    );
    assert!(error.is_retryable());
    assert!(matches!(stream.recv().await, Ok(None)), "reported once");
}

#[tokio::test]
async fn a_walsender_shutting_down_ends_the_stream() {
    // WalSndDone: CommandComplete without CopyDone, then the server exits.
    let (mut stream, mut server, _) = streaming(Duration::from_secs(3600)).await;
    let mut out = xlog(0x200, 0x200, b"I");
    out.extend(message(b'C', b"COPY 0\0"));
    server.send(&out).await;
    assert!(matches!(
        stream.recv().await,
        Ok(Some(CopyData::XLogData(_)))
    ));
    assert!(matches!(stream.recv().await, Ok(None)), "a clean end");
}

#[tokio::test]
async fn a_closed_connection_is_a_retryable_end() {
    let (mut stream, server, _) = streaming(Duration::from_secs(3600)).await;
    drop(server);
    let error = stream.recv().await.expect_err("closed");
    assert!(error.is_retryable(), "{error:?}");
}

#[tokio::test]
async fn status_keeps_flowing_while_the_consumer_does_not_read() {
    let (stream, server, _) = streaming(Duration::from_millis(20)).await;
    let (mut reader, mut writer) = tokio::io::split(server.0);
    // More than the channel holds, and nobody takes them.
    let flood = tokio::spawn(async move {
        let one = xlog(0x200, 0x200, b"I");
        let mut out = Vec::new();
        for _ in 0..(stream::BATCH * 40) {
            out.extend_from_slice(&one);
        }
        let _ = writer.write_all(&out).await;
        writer
    });
    let mut statuses = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while tokio::time::Instant::now() < deadline {
        let tag = tokio::time::timeout(TIMEOUT, reader.read_u8())
            .await
            .unwrap()
            .unwrap();
        let len = reader.read_i32().await.unwrap() as usize;
        let mut body = vec![0; len - 4];
        reader.read_exact(&mut body).await.unwrap();
        assert_eq!((tag, body[0]), (b'd', b'r'));
        statuses += 1;
    }
    assert!(
        statuses >= 5,
        "only {statuses} status updates while held back"
    );
    drop(stream);
    flood.abort();
}

#[tokio::test]
async fn an_option_the_server_is_too_old_for_is_refused_before_start_replication() {
    let (client, mut server) = pipe();
    let config = config();
    let (session, ()) = tokio::join!(Session::login(client, &config), async {
        server.startup().await;
        server.welcome().await;
    });
    let session = session.expect("login");
    let mut asking = start(0x100, Duration::from_secs(10));
    asking.plugin.origin = Some(Origin::None);
    let Err(error) = session.start(asking).await else {
        panic!("origin on 15.4 must be refused");
    };
    assert!(!error.is_retryable(), "the server will not grow younger");
    assert!(
        error
            .to_string()
            .contains("--origin-filter needs origin filter (PostgreSQL 16+)")
            && error.to_string().contains("PostgreSQL 15.4"),
        "{error}"
    );
    let mut rest = Vec::new();
    server.0.read_to_end(&mut rest).await.expect("hang-up");
    assert!(rest.is_empty(), "nothing was sent: {rest:?}");
}

#[test]
fn the_password_is_not_in_debug_output() {
    let text = format!("{:?}", config());
    assert!(!text.contains("secret"), "{text}");
}

/// A scripted server on a loopback port: answers an SSLRequest with `N`,
/// accepts the login, reports `in_hot_standby`, then waits for the client
/// to hang up.
async fn scripted_host(hot_standby: bool) -> (Endpoint, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        loop {
            let len = socket.read_i32().await.expect("startup length") as usize;
            let mut body = vec![0; len - 4];
            socket.read_exact(&mut body).await.expect("startup body");
            if body[..4] == 80_877_103i32.to_be_bytes() {
                socket.write_all(b"N").await.expect("refuse TLS");
                continue;
            }
            break;
        }
        let flag = if hot_standby { "on" } else { "off" };
        let mut out = auth(0, &[]);
        out.extend(message(b'S', b"server_version\x0017.2\0"));
        out.extend(message(
            b'S',
            format!("in_hot_standby\0{flag}\0").as_bytes(),
        ));
        out.extend(message(b'S', b"default_transaction_read_only\0off\0"));
        out.extend(ready());
        socket.write_all(&out).await.expect("welcome");
        let mut rest = Vec::new();
        let _ = socket.read_to_end(&mut rest).await;
    });
    (loopback(port), server)
}

/// The loopback server on `port`.
fn loopback(port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        tls_server_name: "localhost".into(),
    }
}

/// A loopback port nothing listens on.
async fn closed_port() -> Endpoint {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    loopback(port)
}

#[tokio::test]
async fn a_multi_host_url_reaches_the_first_server_of_the_wanted_kind() {
    let down = closed_port().await;
    let (standby, _s) = scripted_host(true).await;
    let (primary, _p) = scripted_host(false).await;
    let read_write = ReplicationConfig {
        endpoints: vec![down, standby.clone(), primary.clone()],
        target: TargetSession::ReadWrite,
        ..config()
    };
    let session = Session::connect(&read_write)
        .await
        .expect("a read-write host");
    assert_eq!(
        session.endpoint(),
        Some(&primary),
        "past the dead host and the standby"
    );

    let (standby, _s) = scripted_host(true).await;
    let any = ReplicationConfig {
        endpoints: vec![closed_port().await, standby.clone()],
        target: TargetSession::Any,
        ..config()
    };
    let session = Session::connect(&any).await.expect("any host");
    assert_eq!(session.endpoint(), Some(&standby), "any kind will do");

    let (standby, _s) = scripted_host(true).await;
    let only_standbys = ReplicationConfig {
        endpoints: vec![closed_port().await, standby],
        target: TargetSession::ReadWrite,
        ..config()
    };
    let Err(error) = Session::connect(&only_standbys).await else {
        panic!("no read-write host");
    };
    assert!(
        matches!(error, ReplicationError::NoTargetServer { .. }),
        "{error}"
    );
    assert!(error.is_retryable(), "a promotion may be under way");
    assert!(error.to_string().contains("(not read-write)"), "{error}");
}

/// A large transaction over TCP, first sent whole, then streamed: only
/// inside the stream block does the reader raise its socket's low-water
/// mark, and the block's small tail, below the mark, still arrives (by the
/// fallback that lowers it again), as does the keepalive sent after it.
#[tokio::test]
async fn inside_a_stream_block_over_tcp_the_mark_is_raised_and_the_tail_still_arrives() {
    const CHUNKS: usize = 40;
    const PER_CHUNK: usize = 400;
    const TAIL: usize = 3;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let config = ReplicationConfig {
        endpoints: vec![loopback(listener.local_addr().expect("address").port())],
        tls: crate::source::tls::PgTls {
            mode: crate::source::tls::SslMode::Disable,
            ..Default::default()
        },
        ..config()
    };
    let accept = async {
        let (socket, _) = listener.accept().await.expect("accept");
        let mut server = Server(Box::new(socket));
        server.startup().await;
        server.welcome().await;
        server
    };
    let (session, mut server) = tokio::join!(Session::connect(&config), accept);
    let session = session.expect("login over TCP");
    let (stream, _) = tokio::join!(
        session.start(start(0x100, Duration::from_secs(60))),
        server.start_copy()
    );
    let mut stream = stream.expect("streaming");

    // Chunks of 400 changes (pgoutput Insert messages, about 60 kB a
    // chunk) a millisecond apart, then a keepalive: whole, then inside a
    // stream block with a tail of three changes and a pause before the
    // keepalive.
    let mut lsn = 0x100;
    let mut message = |payload: &[u8]| {
        lsn += 1;
        xlog(lsn, lsn, payload)
    };
    let insert = [b'I'; 100];
    let mut chunks = |server_chunks: usize| -> Vec<Vec<u8>> {
        (0..server_chunks)
            .map(|_| (0..PER_CHUNK).flat_map(|_| message(&insert)).collect())
            .collect()
    };
    let whole = chunks(CHUNKS);
    let streamed = chunks(CHUNKS);
    let stream_start = message(b"S\0\0\0\x07\x01");
    let tail: Vec<u8> = (0..TAIL).flat_map(|_| message(&insert)).collect();
    let stream_stop = message(b"E");
    let sender = async {
        send_chunks(&mut server, whole).await;
        server.send(&keepalive(lsn, false)).await;
    };
    let ((), changes) = tokio::join!(sender, changes_until_keepalive(&mut stream));
    assert_eq!(changes, CHUNKS * PER_CHUNK, "the whole transaction");
    assert_eq!(
        stream.metrics().low_water_waits(),
        (0, 0),
        "a whole transaction is read as it comes"
    );

    let sender = async {
        server.send(&stream_start).await;
        send_chunks(&mut server, streamed).await;
        server.send(&tail).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.send(&stream_stop).await;
        server.send(&keepalive(lsn, false)).await;
    };
    let ((), changes) = tokio::join!(sender, changes_until_keepalive(&mut stream));
    assert_eq!(
        changes,
        CHUNKS * PER_CHUNK + TAIL,
        "every change of the block, the tail too"
    );
    let (raised, fallbacks) = stream.metrics().low_water_waits();
    assert!(raised > 0, "the mark was raised inside the block");
    assert!(
        fallbacks > 0,
        "a wait under the raised mark ended by lowering it ({raised} raised)"
    );
}

/// Sends `chunks` a millisecond apart.
async fn send_chunks(server: &mut Server, chunks: Vec<Vec<u8>>) {
    for chunk in chunks {
        server.send(&chunk).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The Insert messages received before the next keepalive.
async fn changes_until_keepalive(stream: &mut ReplicationStream) -> usize {
    let mut changes = 0;
    loop {
        let message = tokio::time::timeout(TIMEOUT, stream.recv())
            .await
            .expect("every message in time")
            .expect("no error")
            .expect("not ended");
        match message {
            CopyData::XLogData(x) if x.data[0] == b'I' => changes += 1,
            CopyData::XLogData(_) => {}
            CopyData::Keepalive(_) => return changes,
        }
    }
}
