//! A Confluent-compatible schema registry: Apicurio Registry 3.x.
//!
//! The local backend extracts Apicurio's Quarkus fast-jar archive into the
//! cache once (see `cache.rs`) and runs `quarkus-run.jar` with its HTTP and
//! management interfaces moved to free 127.0.0.1 ports. Apicurio 3.3 is built
//! for Java 21: a JDK 21+ is looked up via `$PGCDC_JAVA_HOME`, `$JAVA_HOME`,
//! `PATH` and `/usr/lib/jvm`. Storage is in memory, so every start begins empty.
//!
//! The Confluent API is at [`SchemaRegistry::url`]; the registry counts as
//! ready when `GET {url}/subjects` answers `200` with `[]`. A tiny HTTP/1.1
//! client ([`SchemaRegistry::get`], [`SchemaRegistry::post`],
//! [`SchemaRegistry::put`]) keeps the build free of an HTTP stack: it reads
//! an answer until its framing ends it, and asks a stalled GET once more.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::{self, Launch, Local};
use crate::runner::{External, Runner};
use crate::{cache, BackendKind, BasicAuthProxy, Error, Result, TestCa};

const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long one request may wait for the registry's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Path of the Confluent-compatible API.
const CCOMPAT: &str = "/apis/ccompat/v7";
/// Names a registry shared by every test binary of a run.
const EXTERNAL: &str = "PGCDC_TEST_REGISTRY";

/// A running (or stopped) schema registry on `127.0.0.1`.
#[derive(Debug)]
pub struct SchemaRegistry {
    runner: Runner,
    port: u16,
    /// The HTTPS port, when started with [`SchemaRegistry::launch_tls`].
    tls_port: Option<u16>,
}

/// The certificate files an HTTPS listener presents.
struct TlsListener {
    port: u16,
    cert: PathBuf,
    key: PathBuf,
}

impl SchemaRegistry {
    /// The registry shared by this test binary, started on first use, or the
    /// one `PGCDC_TEST_REGISTRY` names.
    ///
    /// # Panics
    /// When the registry cannot be started, with the full error (every call).
    pub fn shared() -> &'static SchemaRegistry {
        static SHARED: OnceLock<Result<SchemaRegistry>> = OnceLock::new();
        match SHARED.get_or_init(|| match crate::external_port(EXTERNAL)? {
            Some(port) => Ok(SchemaRegistry {
                runner: Runner::External(External {
                    service: "schema-registry",
                    variable: EXTERNAL,
                }),
                port,
                tls_port: None,
            }),
            None => SchemaRegistry::launch(),
        }) {
            Ok(registry) => registry,
            Err(e) => panic!("shared schema registry: {}", e.report()),
        }
    }

    /// Starts a private registry.
    pub fn launch() -> Result<SchemaRegistry> {
        SchemaRegistry::launch_with(None)
    }

    /// Starts a private registry that also serves HTTPS with the server
    /// certificate of `ca`, at [`https_url`](Self::https_url). The plain HTTP
    /// port stays open for the readiness probe and the test's own requests.
    /// Local backend only.
    pub fn launch_tls(ca: &TestCa) -> Result<SchemaRegistry> {
        SchemaRegistry::launch_with(Some(TlsListener {
            port: process::free_port()?,
            cert: ca.server_cert_file(),
            key: ca.server_key_file(),
        }))
    }

    fn launch_with(tls: Option<TlsListener>) -> Result<SchemaRegistry> {
        let port = process::free_port()?;
        let tls_port = tls.as_ref().map(|t| t.port);
        let runner = match BackendKind::from_env()? {
            BackendKind::Local => Runner::Local(Local::new(local_launch(port, tls)?)),
            #[cfg(feature = "docker")]
            BackendKind::Docker if tls.is_some() => {
                return Err(Error::LocalOnly {
                    what: "a schema registry with TLS",
                })
            }
            #[cfg(feature = "docker")]
            BackendKind::Docker => Runner::Docker(crate::docker::registry(port)?),
            #[cfg(not(feature = "docker"))]
            BackendKind::Docker => return Err(Error::DockerFeatureOff),
        };
        let registry = SchemaRegistry {
            runner,
            port,
            tls_port,
        };
        registry.start()?;
        Ok(registry)
    }

    /// The Confluent API base URL: `http://127.0.0.1:port/apis/ccompat/v7`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{CCOMPAT}", self.port)
    }

    /// The Confluent API over HTTPS, `https://127.0.0.1:port/apis/ccompat/v7`,
    /// when started with [`launch_tls`](Self::launch_tls).
    pub fn https_url(&self) -> Option<String> {
        self.tls_port
            .map(|port| format!("https://127.0.0.1:{port}{CCOMPAT}"))
    }

    /// A proxy in front of this registry's HTTP port that demands basic auth
    /// with `user:password` (Apicurio cannot without an OIDC server); its
    /// [`url`](BasicAuthProxy::url) is the Confluent API base.
    pub fn basic_auth_proxy(&self, user: &str, password: &str) -> Result<BasicAuthProxy> {
        let target = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        BasicAuthProxy::start(target, CCOMPAT, user, password)
    }

    /// The HTTP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The registry's pid while the local backend runs.
    pub fn pid(&self) -> Option<u32> {
        self.runner.pid()
    }

    /// The registry log of the local backend.
    pub fn log_file(&self) -> Option<&Path> {
        self.runner.log()
    }

    /// Stops the registry (no-op when stopped); its schemas are lost.
    pub fn stop(&self) -> Result<()> {
        self.runner.stop("TERM", Duration::from_secs(30))
    }

    /// Starts the registry again on the same port, empty, and waits until it
    /// answers (no-op when running).
    pub fn start(&self) -> Result<()> {
        self.runner
            .start(READY_TIMEOUT, || match self.get("/subjects") {
                Ok((200, body)) if body.trim() == "[]" => Ok(()),
                Ok((status, body)) => Err(format!("GET /subjects: {status} {body}")),
                Err(e) => Err(e.to_string()),
            })
    }

    /// `GET {url}{path}`; returns the status and body. `path` starts with `/`
    /// and is relative to [`url`](Self::url), e.g. `/schemas/ids/1`.
    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        self.request("GET", path, None)
    }

    /// `POST {url}{path}` with a JSON body (as the Confluent API wants it);
    /// returns the status and body.
    pub fn post(&self, path: &str, json: &str) -> Result<(u16, String)> {
        self.request("POST", path, Some(json))
    }

    /// `PUT {url}{path}` with a JSON body (the config API's compatibility
    /// levels); returns the status and body.
    pub fn put(&self, path: &str, json: &str) -> Result<(u16, String)> {
        self.request("PUT", path, Some(json))
    }

    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
        let http_err = |detail: String| Error::Http {
            request: format!("{method} {}{path}", self.url()),
            detail,
        };
        let request = Request {
            port: self.port,
            timeout: REQUEST_TIMEOUT,
            method,
            path,
            body: body.unwrap_or(""),
        };
        match request.send() {
            Ok(response) => parse_response(&response).map_err(http_err),
            Err(Exchange::Failed(detail)) => Err(http_err(detail)),
            Err(Exchange::Stalled(detail)) => {
                let log = self
                    .log_file()
                    .map(|log| format!("; the registry's log ends:\n{}", process::log_tail(log)))
                    .unwrap_or_default();
                Err(http_err(format!("{detail}{log}")))
            }
        }
    }
}

/// One request to the Confluent API on `127.0.0.1:port`.
struct Request<'a> {
    port: u16,
    /// How long one attempt may wait for the whole answer.
    timeout: Duration,
    method: &'a str,
    /// Relative to the API's base, e.g. `/schemas/ids/1`.
    path: &'a str,
    body: &'a str,
}

impl Request<'_> {
    /// The raw response. A GET is asked again, on a new connection, when the
    /// first gets no whole answer in time: the registry is a JVM on the
    /// tests' two cores, and a stall of one of its event loops (one GET
    /// waited past 30 s in CI) is not what a test is about.
    fn send(&self) -> Result<Vec<u8>, Exchange> {
        let attempts = if self.method == "GET" { 2 } else { 1 };
        let mut stalls = Vec::new();
        for _ in 0..attempts {
            match self.exchange() {
                Err(Exchange::Stalled(detail)) => stalls.push(detail),
                done => return done,
            }
        }
        Err(Exchange::Stalled(stalls.join("; asked again: ")))
    }

    /// One attempt on its own connection, read until the answer's framing
    /// says it is whole (or the registry closes).
    fn exchange(&self) -> Result<Vec<u8>, Exchange> {
        let Request {
            port,
            timeout,
            method,
            path,
            body,
        } = *self;
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| Exchange::Failed(format!("connect: {e}")))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| Exchange::Failed(e.to_string()))?;
        let request = format!(
            "{method} {CCOMPAT}{path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
             Accept: application/vnd.schemaregistry.v1+json, application/json\r\n\
             Content-Type: application/vnd.schemaregistry.v1+json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| Exchange::Failed(format!("send: {e}")))?;
        let mut response = Vec::new();
        let mut chunk = [0u8; 8192];
        while !is_complete(&response) {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => response.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Exchange::Stalled(format!(
                        "no whole answer in {:?} ({} bytes received)",
                        timeout,
                        response.len()
                    )))
                }
                Err(e) => return Err(Exchange::Failed(format!("read: {e}"))),
            }
        }
        Ok(response)
    }
}

/// Why a [`Request`] got no response.
enum Exchange {
    /// No whole answer within the request's timeout: worth asking again.
    Stalled(String),
    /// Anything else.
    Failed(String),
}

/// Whether `raw` holds a whole HTTP/1.1 response by its own framing
/// (`Content-Length`, or chunked encoding's last chunk); a response with
/// neither ends when the registry closes the connection.
fn is_complete(raw: &[u8]) -> bool {
    let Some(head_end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let body = &raw[head_end + 4..];
    for line in head.lines() {
        if let Some(length) = line.strip_prefix("content-length:") {
            return length.trim().parse().is_ok_and(|n: usize| body.len() >= n);
        }
        if says_chunked(line) {
            return body.starts_with(b"0\r\n\r\n") || body.ends_with(b"\r\n0\r\n\r\n");
        }
    }
    false
}

/// Whether a line of a response's head says its body is chunked.
fn says_chunked(line: &str) -> bool {
    let line = line.to_ascii_lowercase();
    line.starts_with("transfer-encoding:") && line.contains("chunked")
}

/// Splits an HTTP/1.1 response into status and body, undoing chunked encoding.
fn parse_response(raw: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("truncated response")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {:?}", head.lines().next()))?;
    if !head.lines().any(says_chunked) {
        return Ok((status, body.to_owned()));
    }
    let (mut rest, mut out) = (body, String::new());
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or("truncated chunk")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size:?}"))?;
        if size == 0 {
            return Ok((status, out));
        }
        let chunk = after.get(..size).ok_or("truncated chunk")?;
        out.push_str(chunk);
        rest = after.get(size..).unwrap_or("").trim_start_matches("\r\n");
    }
}

fn local_launch(port: u16, tls: Option<TlsListener>) -> Result<Launch> {
    let jar = cache::registry_jar()?;
    let java = cache::java(21)?;
    process::with_work_dir("schema-registry", |work| {
        let management_port = process::free_port()?;
        let tmp = work.join("tmp");
        std::fs::create_dir(&tmp).map_err(Error::io(format!("create dir {}", tmp.display())))?;
        let mut args = vec![
            "-Xms64m".to_owned(),
            "-Xmx512m".into(),
            "-XX:+ExitOnOutOfMemoryError".into(),
            format!("-Djava.io.tmpdir={}", tmp.display()),
            "-Dquarkus.http.host=127.0.0.1".into(),
            format!("-Dquarkus.http.port={port}"),
            "-Dquarkus.management.host=127.0.0.1".into(),
            format!("-Dquarkus.management.port={management_port}"),
            "-Dquarkus.log.level=WARN".into(),
        ];
        if let Some(tls) = tls {
            args.extend([
                format!("-Dquarkus.http.ssl-port={}", tls.port),
                format!(
                    "-Dquarkus.http.ssl.certificate.files={}",
                    tls.cert.display()
                ),
                format!(
                    "-Dquarkus.http.ssl.certificate.key-files={}",
                    tls.key.display()
                ),
            ]);
        }
        args.extend(["-jar".to_owned(), jar.display().to_string()]);
        Ok(Launch {
            service: "schema-registry",
            program: java,
            args: args.into_iter().map(Into::into).collect(),
            log: work.join("registry.log"),
            work_dir: work.to_path_buf(),
            stop_signal: "KILL",
            grace: Duration::from_secs(1),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    use super::{is_complete, parse_response, Exchange, Request};

    #[test]
    fn parses_plain_and_chunked_responses() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]";
        assert_eq!(parse_response(plain), Ok((200, "[]".to_owned())));
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n\
                        3\r\n{\"a\r\n2\r\n\":\r\n1\r\n1\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok((404, "{\"a\":1}".to_owned())));
    }

    #[test]
    fn a_response_is_complete_by_its_framing() {
        assert!(!is_complete(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"));
        assert!(!is_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n["
        ));
        assert!(is_complete(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]"
        ));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n";
        assert!(!is_complete(chunked));
        assert!(is_complete(&[&chunked[..], b"0\r\n\r\n"].concat()));
        assert!(is_complete(
            b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ));
        // Without framing only the registry's close ends it.
        assert!(!is_complete(b"HTTP/1.1 200 OK\r\n\r\n[]"));
    }

    /// A registry that lets the first connection hang: the GET is asked again
    /// and answered; a POST is not asked twice.
    #[test]
    fn a_stalled_get_is_asked_again_and_a_post_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let server = std::thread::spawn(move || {
            let mut held = Vec::new();
            let mut request_lines = Vec::new();
            for answer in [false, true, false] {
                let (mut client, _) = listener.accept().expect("a connection");
                let mut head = [0u8; 1024];
                let n = client.read(&mut head).expect("request");
                let text = String::from_utf8_lossy(&head[..n]).into_owned();
                request_lines.push(text.lines().next().unwrap_or_default().to_owned());
                if answer {
                    // The connection stays open: the framing ends the answer.
                    client
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")
                        .expect("answer");
                }
                held.push(client);
            }
            // Long past the POST's timeout: it must not have come again.
            std::thread::sleep(Duration::from_millis(800));
            listener.set_nonblocking(true).expect("non-blocking");
            let again = listener.accept().is_ok();
            (request_lines, again)
        });
        let get = Request {
            port,
            timeout: Duration::from_millis(200),
            method: "GET",
            path: "/subjects",
            body: "",
        };
        let response = get.send().ok().expect("the second attempt is answered");
        assert_eq!(parse_response(&response), Ok((200, "[]".to_owned())));
        let post = Request {
            method: "POST",
            ..get
        };
        assert!(matches!(post.send(), Err(Exchange::Stalled(_))));
        let (request_lines, post_again) = server.join().expect("server");
        assert_eq!(
            request_lines,
            [
                "GET /apis/ccompat/v7/subjects HTTP/1.1",
                "GET /apis/ccompat/v7/subjects HTTP/1.1",
                "POST /apis/ccompat/v7/subjects HTTP/1.1",
            ]
        );
        assert!(!post_again, "a stalled POST is not sent twice");
    }
}
