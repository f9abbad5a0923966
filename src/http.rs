//! The operations endpoint on `--metrics-addr`: `GET /metrics` (Prometheus
//! text format 0.0.4), `GET /healthz` (the process is alive) and `GET /readyz`
//! (the connector is doing its job, or why not: [`HealthPolicy`]), for one
//! connector or for every pipeline of the process ([`Served`]).
//!
//! HTTP/1.1 is hyper's ([`http1`]): we own only the accept loop, the routes
//! and the bounds. Every resource the server may spend is bounded: one
//! request per connection (`Connection: close`); the request head may be at
//! most [`ServerLimits::max_request_bytes`] (hyper answers 431 beyond it) and
//! must arrive, and the response be written, within
//! [`ServerLimits::timeout`]; at most [`ServerLimits::max_connections`] are
//! served at once, and a connection beyond that is closed at once. Request
//! bodies are never read.
//!
//! Responses keep the shape this endpoint always had: `HTTP/1.1` status line
//! (also to an HTTP/1.0 request, see `StatusLine`), `Content-Type`,
//! `Content-Length`, `Cache-Control: no-store`, `Connection: close` (and
//! `Allow` on 405), in that order and case, no `Date`. A malformed (400) or
//! oversized (431) request gets hyper's own answer, without a body.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::metrics::{self, Metrics};

mod pipelines;
mod readiness;

pub use pipelines::Served;
pub use readiness::{HealthPolicy, Readiness};

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
    served: Arc<Served>,
    limits: ServerLimits,
}

/// The metrics and health server, bound and ready to [`serve`](Self::serve).
pub struct HttpServer {
    listener: TcpListener,
    state: Arc<State>,
}

impl HttpServer {
    /// Binds `addr` (port 0 picks a free one; see [`local_addr`](Self::local_addr))
    /// for one connector's `metrics`, served unlabelled.
    pub async fn bind(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        policy: HealthPolicy,
    ) -> Result<Self, HttpError> {
        Self::bind_served(addr, Arc::new(Served::single(metrics, policy))).await
    }

    /// Binds `addr` for the pipelines in `served`, as they come and go.
    pub async fn bind_served(addr: SocketAddr, served: Arc<Served>) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| HttpError::Bind { addr, error })?;
        Ok(HttpServer {
            listener,
            state: Arc::new(State {
                served,
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
        let http = builder(&self.state.limits);
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
            let http = http.clone();
            tokio::spawn(async move {
                let timeout = state.limits.timeout;
                match tokio::time::timeout(timeout, serve_connection(&http, socket, state)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        let error = crate::error_chain(&error);
                        tracing::debug!(%peer, %error, "metrics connection failed");
                    }
                    Err(_) => tracing::debug!(%peer, "metrics connection timed out"),
                }
                drop(permit);
            });
        }
    }
}

/// hyper's smallest read buffer limit ([`http1::Builder::max_buf_size`]
/// panics below it).
const MIN_BUF_SIZE: usize = 8 * 1024;

/// hyper's HTTP/1 settings for `limits`: one request per connection, our
/// header shape, the head bound.
fn builder(limits: &ServerLimits) -> http1::Builder {
    let mut http = http1::Builder::new();
    http.keep_alive(false)
        .title_case_headers(true)
        .auto_date_header(false)
        .max_header_size(limits.max_request_bytes)
        .max_buf_size(limits.max_request_bytes.max(MIN_BUF_SIZE));
    http
}

/// Why serving one connection failed (logged at debug: the client's problem).
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("the request could not be read or answered")]
    Http(#[source] hyper::Error),
    #[error("the connection could not be closed cleanly")]
    Io(#[source] io::Error),
}

/// Answers the one request of `socket`, then closes it.
async fn serve_connection(
    http: &http1::Builder,
    socket: TcpStream,
    state: Arc<State>,
) -> Result<(), ConnectionError> {
    // A ready future: `poll_without_shutdown` needs an `Unpin` one.
    let service = service_fn(move |request| {
        std::future::ready(Ok::<_, Infallible>(respond(&request, &state)))
    });
    let mut connection = http.serve_connection(TokioIo::new(StatusLine::new(socket)), service);
    // Not hyper's shutdown: it closes with unread input left, see `linger`.
    let served = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)).await;
    let socket = connection.into_parts().io.into_inner().inner;
    let closed = linger(socket).await;
    served.map_err(ConnectionError::Http)?;
    closed.map_err(ConnectionError::Io)
}

/// Closes our side, then reads (a bounded amount of) what the client still
/// sends until it closes: closing with unread input makes the kernel send a
/// reset, which can destroy the response before the client read it. The
/// caller's timeout bounds the wait.
async fn linger(mut socket: TcpStream) -> io::Result<()> {
    socket.shutdown().await?;
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

/// The answer to `request`; its body is never read.
fn respond<B>(request: &Request<B>, state: &State) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let readiness = state.served.readiness();
            if readiness.ready {
                text(StatusCode::OK, format!("ready: {}\n", readiness.reason))
            } else {
                let body = format!("not ready: {}\n", readiness.reason);
                text(StatusCode::SERVICE_UNAVAILABLE, body)
            }
        }
        "/metrics" => {
            let mut response = text(StatusCode::OK, state.served.render());
            // Replaces the value in place: the header order stays.
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /metrics, /healthz or /readyz\n",
        ),
    }
}

/// A plain-text response with the headers every answer carries.
fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let body = body.into();
    let length = HeaderValue::from(body.len());
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CONTENT_LENGTH, length);
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The connection as hyper sees it, answering as an HTTP/1.1 server.
///
/// hyper answers an HTTP/1.0 request with an `HTTP/1.0` status line. RFC 9110
/// section 6.2 has a server send the highest version it conforms to below
/// the request's major version, `HTTP/1.1` here, as this endpoint always
/// did; so a response that starts with `HTTP/1.0 ` is sent as `HTTP/1.1 `
/// (same length: nothing else moves). Reads pass through.
struct StatusLine<S> {
    inner: S,
    /// Bytes of the response written so far (up to the version's end).
    written: usize,
    /// The response started with `HTTP/1.0 `.
    rewrite: bool,
}

impl<S> StatusLine<S> {
    const FROM: &'static [u8] = b"HTTP/1.0 ";
    const TO: &'static [u8] = b"HTTP/1.1 ";

    fn new(inner: S) -> Self {
        StatusLine {
            inner,
            written: 0,
            rewrite: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StatusLine<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StatusLine<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.written == 0 && buf.starts_with(Self::FROM) {
            this.rewrite = true;
        }
        let written = if this.rewrite && this.written < Self::TO.len() {
            // The bytes at the version's positions, from our copy.
            let mut fixed = buf.to_vec();
            for (byte, to) in fixed.iter_mut().zip(Self::TO.iter().skip(this.written)) {
                *byte = *to;
            }
            ready!(Pin::new(&mut this.inner).poll_write(cx, &fixed))?
        } else {
            ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?
        };
        this.written = this.written.saturating_add(written).min(Self::TO.len());
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::AsyncReadExt;

    use crate::metrics::Phase;

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
    async fn status_line_says_http_1_1_across_partial_writes() {
        for (response, expected) in [
            (
                &b"HTTP/1.0 503 Service Unavailable\r\n\r\n"[..],
                &b"HTTP/1.1 503 Service Unavailable\r\n\r\n"[..],
            ),
            (
                b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.0 ",
                b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.0 ",
            ),
        ] {
            // A pipe of 4 bytes: every write is partial.
            let (client, server) = tokio::io::duplex(4);
            let mut writer = StatusLine::new(server);
            let written = tokio::spawn(async move {
                writer.write_all(response).await.expect("write");
                writer.shutdown().await.expect("shutdown");
            });
            let mut received = Vec::new();
            let mut client = client;
            client.read_to_end(&mut received).await.expect("read");
            written.await.expect("writer");
            assert_eq!(received, expected);
        }
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
}
