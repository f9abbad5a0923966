//! The operations endpoint on `--metrics-addr`: `GET /metrics` (Prometheus
//! text format), `GET /healthz` (the process is alive) and `GET /readyz`
//! (the connector is doing its job, or why not).
//!
//! A deliberately small HTTP/1.1 server on a tokio `TcpListener` rather than
//! a framework: three read-only routes do not need one, and every resource it
//! may spend is bounded. One request per connection (`Connection: close`);
//! the request head may be at most [`ServerLimits::max_request_bytes`] and
//! must arrive, and the response be written, within
//! [`ServerLimits::timeout`]; at most [`ServerLimits::max_connections`] are
//! served at once, and a connection beyond that is closed at once. Request
//! bodies are never read.
//!
//! # Readiness
//!
//! `/readyz` answers 200 while the connector is streaming (or taking its
//! snapshot) and both of these hold:
//!
//! - the server was heard from (a keepalive or data on the replication
//!   connection) within [`HealthPolicy::max_silence`], so the connection is
//!   not silently stalled;
//! - Kafka is making progress: when records are in flight, a delivery report
//!   arrived within [`HealthPolicy::max_ack_wait`]. With Kafka down the
//!   connector does not fail at once: librdkafka keeps retrying until
//!   `message.timeout.ms` and reading pauses at the in-flight bound. That
//!   wait is what "not ready" reports; an idle connector with nothing in
//!   flight does not probe Kafka and stays ready.
//!
//! Otherwise it answers 503 with the reason: connecting, restarting after a
//! failure (with the error), stopped (on an error, with it), silent server,
//! or stalled deliveries.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::metrics::{Metrics, Phase};

/// When `/readyz` reports not ready; flags of `pgcdc-kafka run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct HealthPolicy {
    /// /readyz: longest time without a keepalive or data from PostgreSQL
    /// while streaming. Keep it above wal_sender_timeout: the server pings
    /// at half of it when the connection is otherwise quiet.
    #[arg(long = "ready-max-silence", env = "PGCDC_READY_MAX_SILENCE", default_value = "120s", value_parser = humantime::parse_duration)]
    pub max_silence: Duration,

    /// /readyz: longest time without any Kafka delivery report while records
    /// are in flight (Kafka unreachable or stalled).
    #[arg(long = "ready-max-ack-wait", env = "PGCDC_READY_MAX_ACK_WAIT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_ack_wait: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            max_silence: Duration::from_secs(120),
            max_ack_wait: Duration::from_secs(30),
        }
    }
}

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// One line: what the connector is doing, or why it is not ready.
    pub reason: String,
}

impl HealthPolicy {
    /// Whether the connector behind `metrics` is ready now, and why.
    pub fn evaluate(&self, metrics: &Metrics) -> Readiness {
        let s = metrics.snapshot();
        let not_ready = |reason: String| Readiness {
            ready: false,
            reason,
        };
        match &s.phase {
            Phase::Streaming => {
                if let Some(silence) = s.since_server_message.filter(|d| *d > self.max_silence) {
                    return not_ready(format!(
                        "no keepalive or data from PostgreSQL for {}s (limit {}); \
                         the replication connection may be stalled",
                        silence.as_secs(),
                        humantime::format_duration(self.max_silence)
                    ));
                }
            }
            Phase::Snapshotting => {}
            other => return not_ready(other.to_string()),
        }
        if s.in_flight_records > 0 {
            if let Some(wait) = s.since_delivery_progress.filter(|d| *d > self.max_ack_wait) {
                return not_ready(format!(
                    "Kafka has acknowledged nothing for {}s with {} records in flight \
                     (limit {}); check that the brokers in --bootstrap-servers are up and reachable",
                    wait.as_secs(),
                    s.in_flight_records,
                    humantime::format_duration(self.max_ack_wait)
                ));
            }
        }
        Readiness {
            ready: true,
            reason: s.phase.to_string(),
        }
    }
}

/// Resource bounds of the server.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// Longest request head (request line and headers).
    pub max_request_bytes: usize,
    /// Time to receive the request head and write the response.
    pub timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 32,
            max_request_bytes: 8 * 1024,
            timeout: Duration::from_secs(5),
        }
    }
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {addr} for metrics and health checks; pick a free address with --metrics-addr")]
    Bind {
        addr: SocketAddr,
        #[source]
        error: std::io::Error,
    },
}

struct State {
    metrics: Arc<Metrics>,
    policy: HealthPolicy,
    limits: ServerLimits,
}

/// The metrics and health server, bound and ready to [`serve`](Self::serve).
pub struct HttpServer {
    listener: TcpListener,
    state: Arc<State>,
}

impl HttpServer {
    /// Binds `addr` (port 0 picks a free one; see [`local_addr`](Self::local_addr)).
    pub async fn bind(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        policy: HealthPolicy,
    ) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| HttpError::Bind { addr, error })?;
        Ok(HttpServer {
            listener,
            state: Arc::new(State {
                metrics,
                policy,
                limits: ServerLimits::default(),
            }),
        })
    }

    /// Replaces the default [`ServerLimits`].
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.limits = limits;
        }
        self
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound TCP listener has a local address")
    }

    /// Serves until `shutdown` resolves. Connections being served then are
    /// finished by their own tasks (each within the timeout).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        let connections = Arc::new(Semaphore::new(self.state.limits.max_connections.max(1)));
        tracing::info!(addr = %self.local_addr(), "serving /metrics, /healthz and /readyz");
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => return,
                accepted = self.listener.accept() => accepted,
            };
            let (socket, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off rather than spin.
                    tracing::warn!(%error, "cannot accept a metrics connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                tracing::debug!(%peer, "too many metrics connections; closing one");
                continue;
            };
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                let timeout = state.limits.timeout;
                match tokio::time::timeout(timeout, handle(socket, &state)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "metrics connection failed"),
                    Err(_) => tracing::debug!(%peer, "metrics connection timed out"),
                }
                drop(permit);
            });
        }
    }
}

/// A response: status, content type, body.
struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    allow: bool,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            allow: false,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

async fn handle(mut socket: TcpStream, state: &State) -> std::io::Result<()> {
    let (response, head_only) = match read_head(&mut socket, state.limits.max_request_bytes).await?
    {
        Head::Complete(head) => match parse_request_line(&head) {
            Some((method, path)) => (route(method, path, state), method == "HEAD"),
            None => (Response::text(400, "bad request\n"), false),
        },
        Head::TooLarge => (Response::text(431, "request too large\n"), false),
        Head::Closed => return Ok(()),
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n",
        response.status,
        reason_phrase(response.status),
        response.content_type,
        response.body.len()
    );
    if response.allow {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    if !head_only {
        socket.write_all(response.body.as_bytes()).await?;
    }
    socket.shutdown().await?;
    // Closing with unread input makes the kernel send a reset, which can
    // destroy the response before the client read it: read (a bounded amount
    // of) what the client still sends until it closes. The caller's timeout
    // bounds the wait.
    let mut chunk = [0u8; 1024];
    let mut drained = 0usize;
    while drained < 64 * 1024 {
        match socket.read(&mut chunk).await? {
            0 => break,
            n => drained += n,
        }
    }
    Ok(())
}

enum Head {
    Complete(Vec<u8>),
    TooLarge,
    Closed,
}

/// Reads up to the blank line that ends the request head.
async fn read_head(socket: &mut TcpStream, max: usize) -> std::io::Result<Head> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf) {
            if end > max {
                return Ok(Head::TooLarge);
            }
            buf.truncate(end);
            return Ok(Head::Complete(buf));
        }
        if buf.len() > max {
            return Ok(Head::TooLarge);
        }
    }
}

/// Where the blank line ending a request head starts (CRLF, or bare LF as
/// RFC 9112 allows recipients to accept).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The method and the path (without query) of `GET /path HTTP/1.1`.
fn parse_request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let method = parts.next().filter(|m| !m.is_empty())?;
    let target = parts.next()?;
    let version = parts.next()?;
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return None;
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Some((method, path))
}

fn route(method: &str, path: &str, state: &State) -> Response {
    if method != "GET" && method != "HEAD" {
        return Response {
            allow: true,
            ..Response::text(405, "only GET and HEAD\n")
        };
    }
    match path {
        "/healthz" => Response::text(200, "ok\n"),
        "/readyz" => {
            let readiness = state.policy.evaluate(&state.metrics);
            if readiness.ready {
                Response::text(200, format!("ready: {}\n", readiness.reason))
            } else {
                Response::text(503, format!("not ready: {}\n", readiness.reason))
            }
        }
        "/metrics" => {
            let ready = state.policy.evaluate(&state.metrics).ready;
            Response {
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                ..Response::text(200, state.metrics.render(ready))
            }
        }
        _ => Response::text(404, "not found; try /metrics, /healthz or /readyz\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::AsyncReadExt;

    async fn server(limits: ServerLimits) -> (SocketAddr, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        let server = HttpServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            Arc::clone(&metrics),
            HealthPolicy::default(),
        )
        .await
        .expect("bind")
        .with_limits(limits);
        let addr = server.local_addr();
        tokio::spawn(server.serve(std::future::pending()));
        (addr, metrics)
    }

    async fn request(addr: SocketAddr, raw: &[u8]) -> String {
        let mut socket = TcpStream::connect(addr).await.expect("connect");
        // A refused connection may be reset under the write or the read.
        let _ = socket.write_all(raw).await;
        let mut response = Vec::new();
        let _ = socket.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    }

    #[tokio::test]
    async fn routes() {
        let (addr, metrics) = server(ServerLimits::default()).await;
        let ok = request(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nok\n"), "{ok}");

        let not_ready = request(addr, b"GET /readyz HTTP/1.0\r\n\r\n").await;
        assert!(not_ready.starts_with("HTTP/1.1 503 "), "{not_ready}");
        assert!(not_ready.contains("not ready: connecting"), "{not_ready}");

        metrics.set_phase(Phase::Streaming);
        let ready = request(addr, b"GET /readyz?verbose=1 HTTP/1.1\n\n").await;
        assert!(ready.starts_with("HTTP/1.1 200 "), "{ready}");

        let text = request(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(text.contains("text/plain; version=0.0.4"), "{text}");
        assert!(text.contains("\npgcdc_ready 1\n"), "{text}");

        let head = request(addr, b"HEAD /healthz HTTP/1.1\r\n\r\n").await;
        assert!(head.ends_with("Connection: close\r\n\r\n"), "{head}");
        let missing = request(addr, b"GET /nope HTTP/1.1\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        let post = request(addr, b"POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        assert!(post.contains("Allow: GET, HEAD"), "{post}");
        let garbage = request(addr, b"\x00\x01\x02 nonsense\r\n\r\n").await;
        assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    }

    #[tokio::test]
    async fn oversized_and_slow_requests_are_cut_off() {
        let limits = ServerLimits {
            max_connections: 2,
            max_request_bytes: 256,
            timeout: Duration::from_millis(300),
        };
        let (addr, _) = server(limits).await;
        let mut big = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 4096));
        let response = request(addr, &big).await;
        assert!(response.starts_with("HTTP/1.1 431 "), "{response}");

        // A client that never finishes its request is dropped after the timeout.
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET /metrics HTTP/1.1\r\n")
            .await
            .expect("write");
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "connection closed by the server");
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_are_closed() {
        let limits = ServerLimits {
            max_connections: 1,
            max_request_bytes: 256,
            timeout: Duration::from_secs(2),
        };
        let (addr, _) = server(limits).await;
        // Holds the only slot without sending anything.
        let _idle = TcpStream::connect(addr).await.expect("connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let refused = request(addr, b"GET /healthz HTTP/1.1\r\n\r\n").await;
        assert!(refused.is_empty(), "closed without an answer: {refused}");
        // Once the idle one times out, the slot is free again.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let ok = request(addr, b"GET /healthz HTTP/1.1\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
    }

    #[test]
    fn readiness_reports_each_phase() {
        let metrics = Metrics::new();
        let policy = HealthPolicy {
            max_silence: Duration::from_secs(60),
            max_ack_wait: Duration::ZERO,
        };
        assert!(!policy.evaluate(&metrics).ready);
        metrics.set_phase(Phase::Restarting {
            error: "replication stream failed: connection reset".into(),
            retry_in: Duration::from_secs(4),
        });
        let r = policy.evaluate(&metrics);
        assert!(!r.ready);
        assert!(r.reason.contains("restarting") && r.reason.contains("connection reset"));
        assert!(r.reason.contains("4s"), "{}", r.reason);
        metrics.set_phase(Phase::Failed {
            error: "slot invalidated".into(),
        });
        assert!(policy
            .evaluate(&metrics)
            .reason
            .contains("stopped on an error"));
        metrics.set_phase(Phase::Snapshotting);
        assert!(policy.evaluate(&metrics).ready);
        metrics.set_phase(Phase::Streaming);
        assert!(policy.evaluate(&metrics).ready);

        // A record outstanding longer than max_ack_wait (zero here).
        metrics.record_enqueued(10);
        std::thread::sleep(Duration::from_millis(5));
        let r = policy.evaluate(&metrics);
        assert!(!r.ready && r.reason.contains("Kafka"), "{}", r.reason);
        metrics.record_delivered(10, Duration::from_millis(1));
        assert!(policy.evaluate(&metrics).ready);
    }
}
