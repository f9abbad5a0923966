//! A loopback HTTP reverse proxy that demands basic auth, in front of a
//! service that cannot (Apicurio Registry authenticates only through an
//! OIDC server, which the tests do not run).
//!
//! One request per connection, HTTP/1.1: the proxy reads the request head
//! and its `Content-Length` body. Without an `Authorization: Basic` header
//! carrying the expected `user:password` it answers `401` with
//! `WWW-Authenticate: Basic realm="..."` and a Confluent-style JSON error.
//! Otherwise it forwards the request (without the credentials, with
//! `Connection: close`) and relays the answer with its `Connection` header
//! replaced by `close`, so a client that pools connections (hyper, in
//! reqwest) opens a new one for the next request instead of racing the
//! proxy's close. Chunked request bodies are not supported (answered 411);
//! the connector and the tests send none.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::{process, Error, Result};

/// How often the accept loop looks for the stop flag.
const POLL: Duration = Duration::from_millis(20);
/// How long a connection may take to send its request, or the target to answer.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest request or response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The realm named in `WWW-Authenticate`.
const REALM: &str = "schema-registry";

/// A running proxy from `127.0.0.1:port` to a target, demanding basic auth.
#[derive(Debug)]
pub struct BasicAuthProxy {
    port: u16,
    base_path: String,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct State {
    target: SocketAddr,
    /// The whole expected header value, `Basic <base64(user:password)>`.
    expected: String,
    closing: AtomicBool,
    rejected: AtomicUsize,
    forwarded: AtomicUsize,
}

impl BasicAuthProxy {
    /// Proxies a free loopback port to `target`, letting through requests
    /// that carry `user:password`. `base_path` (e.g. `/apis/ccompat/v7`)
    /// is only what [`url`](Self::url) appends.
    pub fn start(
        target: SocketAddr,
        base_path: &str,
        user: &str,
        password: &str,
    ) -> Result<BasicAuthProxy> {
        let port = process::free_port()?;
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(Error::io(format!("bind auth proxy port {port}")))?;
        listener
            .set_nonblocking(true)
            .map_err(Error::io("make the auth proxy listener non-blocking"))?;
        let state = Arc::new(State {
            target,
            expected: format!("Basic {}", base64(format!("{user}:{password}").as_bytes())),
            closing: AtomicBool::new(false),
            rejected: AtomicUsize::new(0),
            forwarded: AtomicUsize::new(0),
        });
        let accept = {
            let state = Arc::clone(&state);
            thread::Builder::new()
                .name(format!("auth-proxy-{port}"))
                .spawn(move || accept_loop(&listener, &state))
                .map_err(Error::io("spawn the auth proxy thread"))?
        };
        Ok(BasicAuthProxy {
            port,
            base_path: base_path.to_owned(),
            state,
            accept: Some(accept),
        })
    }

    /// `http://127.0.0.1:port` followed by the base path.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.base_path)
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Requests answered 401 since the start.
    pub fn rejected(&self) -> usize {
        self.state.rejected.load(Ordering::Relaxed)
    }

    /// Requests forwarded to the target since the start.
    pub fn forwarded(&self) -> usize {
        self.state.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for BasicAuthProxy {
    fn drop(&mut self) {
        self.state.closing.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    while !state.closing.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let state = Arc::clone(state);
                let spawned =
                    thread::Builder::new()
                        .name("auth-proxy-conn".into())
                        .spawn(move || {
                            if let Err(e) = serve(client, &state) {
                                eprintln!("auth proxy: {e}");
                            }
                        });
                if let Err(e) = spawned {
                    eprintln!("auth proxy: cannot serve a connection: {e}");
                }
            }
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// A request or response head: the start line and the header lines.
struct Head {
    start: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The head with `Connection: close` instead of any `Connection` header
    /// and without the `drop` headers.
    fn to_bytes(&self, drop: &[&str]) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.start);
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("connection")
                || drop.iter().any(|d| name.eq_ignore_ascii_case(d))
            {
                continue;
            }
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

/// Reads a head up to the blank line; returns it and the bytes read past it.
fn read_head(stream: &mut TcpStream) -> std::io::Result<(Head, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::Error::new(ErrorKind::InvalidData, "head too long"));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                "closed before the end of the head",
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let rest = buffer[end + 4..].to_vec();
    let mut lines = text.split("\r\n");
    let start = lines.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Ok((Head { start, headers }, rest))
}

fn serve(mut client: TcpStream, state: &State) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(IO_TIMEOUT))?;
    let (head, mut body) = read_head(&mut client)?;
    if head
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        return answer(&mut client, 411, "Length Required", &[], "chunked bodies");
    }
    let length: usize = head
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // Read the whole body first: closing with unread bytes would reset the
    // connection, and the client might see that instead of the answer.
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if head.header("authorization") != Some(state.expected.as_str()) {
        state.rejected.fetch_add(1, Ordering::Relaxed);
        let challenge = format!("Basic realm=\"{REALM}\"");
        return answer(
            &mut client,
            401,
            "Unauthorized",
            &[("WWW-Authenticate", &challenge)],
            "Unauthorized",
        );
    }
    let Ok(mut server) = TcpStream::connect_timeout(&state.target, Duration::from_secs(5)) else {
        return answer(&mut client, 502, "Bad Gateway", &[], "the target is down");
    };
    server.set_read_timeout(Some(IO_TIMEOUT))?;
    server.write_all(&head.to_bytes(&["authorization"]))?;
    server.write_all(&body)?;
    let (response, rest) = read_head(&mut server)?;
    client.write_all(&response.to_bytes(&[]))?;
    client.write_all(&rest)?;
    // The target closes after the answer, as asked.
    std::io::copy(&mut server, &mut client)?;
    state.forwarded.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Answers with a Confluent-style JSON error and closes.
fn answer(
    client: &mut TcpStream,
    status: u16,
    reason: &str,
    headers: &[(&str, &str)],
    message: &str,
) -> std::io::Result<()> {
    let body = format!("{{\"error_code\":{status},\"message\":\"{message}\"}}");
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    client.write_all(out.as_bytes())
}

/// Standard base64 with padding (RFC 4648), for the expected header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use super::{base64, BasicAuthProxy};

    #[test]
    fn base64_matches_rfc_4648() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
            ("user:pass", "dXNlcjpwYXNz"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    /// A backend that answers every request with what it received, keeping
    /// the connection open unless asked to close (as a keep-alive server).
    fn echo_backend() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let (head, mut body) = super::read_head(&mut stream).expect("request");
                    let length: usize = head
                        .header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let already = body.len().min(length);
                    body.resize(length, 0);
                    let _ = stream.read_exact(&mut body[already..]);
                    let mut seen = format!("{}\n", head.start);
                    for (name, value) in &head.headers {
                        seen.push_str(&format!("{}={value}\n", name.to_ascii_lowercase()));
                    }
                    seen.push_str(&String::from_utf8_lossy(&body));
                    let keep_alive = if head.header("connection") == Some("close") {
                        ""
                    } else {
                        "Connection: keep-alive\r\n"
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\n{keep_alive}Content-Length: {}\r\n\r\n{seen}",
                        seen.len()
                    );
                });
            }
        });
        addr
    }

    fn exchange(port: u16, request: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .expect("the proxy closes");
        answer
    }

    #[test]
    fn demands_the_credentials_and_forwards_with_them() {
        let proxy = BasicAuthProxy::start(echo_backend(), "/api", "user", "pass").expect("proxy");
        assert_eq!(
            proxy.url(),
            format!("http://127.0.0.1:{}/api", proxy.port())
        );
        let body = r#"{"schema":"x"}"#;
        let post = |auth: &str| {
            format!(
                "POST /api/subjects/s/versions HTTP/1.1\r\nHost: h\r\n{auth}\
                 Connection: keep-alive\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };

        let missing = exchange(proxy.port(), &post(""));
        assert!(missing.starts_with("HTTP/1.1 401 "), "{missing}");
        assert!(
            missing.contains("WWW-Authenticate: Basic realm=\"schema-registry\""),
            "{missing}"
        );
        // user:wrong
        let wrong = exchange(
            proxy.port(),
            &post("Authorization: Basic dXNlcjp3cm9uZw==\r\n"),
        );
        assert!(wrong.starts_with("HTTP/1.1 401 "), "{wrong}");
        assert_eq!((proxy.rejected(), proxy.forwarded()), (2, 0));

        let right = exchange(proxy.port(), &post("Authorization: Basic dXNlcjpwYXNz\r\n"));
        assert!(right.starts_with("HTTP/1.1 200 OK\r\n"), "{right}");
        let (head, echoed) = right.split_once("\r\n\r\n").expect("a head");
        assert!(
            head.contains("Connection: close") && !head.contains("keep-alive"),
            "the client is told the connection closes: {head}"
        );
        assert!(
            echoed.starts_with("POST /api/subjects/s/versions HTTP/1.1\n"),
            "{echoed}"
        );
        assert!(echoed.ends_with(body), "the body is forwarded: {echoed}");
        assert!(
            !echoed.contains("authorization="),
            "credentials are not forwarded: {echoed}"
        );
        assert!(echoed.contains("connection=close"), "{echoed}");
        assert_eq!((proxy.rejected(), proxy.forwarded()), (2, 1));
    }
}
