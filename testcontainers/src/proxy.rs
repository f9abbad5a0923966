//! A TCP proxy on loopback whose faults the test controls: added latency,
//! stalls (bytes stop flowing, connections stay open), resets of every open
//! connection, and refusal of new ones.
//!
//! Each accepted connection is pumped by two threads, one per direction,
//! reading in chunks with a short timeout so a fault applies within
//! [`POLL`]. Latency delays every chunk before it is forwarded, in both
//! directions. A reset sets `SO_LINGER` to zero and closes both sides, so
//! peers see `ECONNRESET` as after a network failure, not an orderly close.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::{process, Error, Result};

/// How often a blocked pump or the accept loop looks at the fault settings.
const POLL: Duration = Duration::from_millis(20);
const CHUNK: usize = 64 * 1024;

/// A running proxy from `127.0.0.1:port` to a target address.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct State {
    /// Where new connections go ([`FaultProxy::retarget`] moves it).
    target: Mutex<Option<SocketAddr>>,
    latency_micros: AtomicU64,
    stalled: AtomicBool,
    refusing: AtomicBool,
    closing: AtomicBool,
    /// Bumped by [`FaultProxy::reset`]: pumps of older generations close.
    generation: AtomicU64,
    open: AtomicUsize,
    accepted: AtomicUsize,
    /// Both sockets of every open connection, to reset them.
    sockets: Mutex<Vec<(u64, TcpStream, TcpStream)>>,
}

impl FaultProxy {
    /// Proxies a free loopback port to `target`.
    pub fn start(target: SocketAddr) -> Result<FaultProxy> {
        FaultProxy::start_on(process::free_port()?, target)
    }

    /// Proxies `127.0.0.1:port` to `target` (for services that must advertise
    /// the proxy's address, chosen before they start).
    pub fn start_on(port: u16, target: SocketAddr) -> Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(Error::io(format!("bind proxy port {port}")))?;
        listener
            .set_nonblocking(true)
            .map_err(Error::io("make the proxy listener non-blocking"))?;
        let state = Arc::new(State {
            target: Mutex::new(Some(target)),
            ..State::default()
        });
        let accept = {
            let state = Arc::clone(&state);
            thread::Builder::new()
                .name(format!("proxy-{port}"))
                .spawn(move || accept_loop(&listener, &state))
                .map_err(Error::io("spawn the proxy thread"))?
        };
        Ok(FaultProxy {
            port,
            state,
            accept: Some(accept),
        })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the proxy forwards new connections to.
    pub fn target(&self) -> SocketAddr {
        self.state.target()
    }

    /// Forwards new connections to `target` from now on (open ones stay
    /// where they are: [`reset`](Self::reset) them to move every client).
    /// Stands for a DNS name or virtual IP that moves to another server, as
    /// after a failover.
    pub fn retarget(&self, target: SocketAddr) {
        *self
            .state
            .target
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(target);
    }

    /// Delays every forwarded chunk by `latency` (zero: none).
    pub fn set_latency(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_micros.store(micros, Ordering::Relaxed);
    }

    /// Stops forwarding bytes in both directions; connections stay open and
    /// new ones are accepted (and stall too) until [`resume`](Self::resume).
    pub fn stall(&self) {
        self.state.stalled.store(true, Ordering::Relaxed);
    }

    /// Forwards bytes again after [`stall`](Self::stall).
    pub fn resume(&self) {
        self.state.stalled.store(false, Ordering::Relaxed);
    }

    /// Resets every open connection (both sides see a connection reset).
    pub fn reset(&self) {
        let generation = self.state.generation.fetch_add(1, Ordering::SeqCst);
        let mut sockets = self
            .state
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sockets.retain(|(g, client, server)| {
            if *g > generation {
                return true;
            }
            for socket in [client, server] {
                let _ = socket2::SockRef::from(socket).set_linger(Some(Duration::ZERO));
                let _ = socket.shutdown(Shutdown::Both);
            }
            false
        });
    }

    /// While `refuse` is true, new connections are closed as soon as they
    /// are accepted (open ones are left alone).
    pub fn refuse(&self, refuse: bool) {
        self.state.refusing.store(refuse, Ordering::Relaxed);
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::Relaxed)
    }

    /// Connections accepted and forwarded since the start.
    pub fn accepted_connections(&self) -> usize {
        self.state.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.state.closing.store(true, Ordering::SeqCst);
        self.reset();
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl State {
    fn target(&self) -> SocketAddr {
        self.target
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .expect("a proxy always has a target")
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    while !state.closing.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(POLL);
                continue;
            }
            Err(_) => {
                thread::sleep(POLL);
                continue;
            }
        };
        if state.refusing.load(Ordering::Relaxed) {
            let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
            drop(client);
            continue;
        }
        let Ok(server) = TcpStream::connect_timeout(&state.target(), Duration::from_secs(5)) else {
            // The target is down: the client sees its connection closed.
            drop(client);
            continue;
        };
        if let Err(e) = start_pumps(client, server, state) {
            eprintln!("fault proxy: cannot forward a connection: {e}");
        }
    }
}

fn start_pumps(client: TcpStream, server: TcpStream, state: &Arc<State>) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    for socket in [&client, &server] {
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(POLL))?;
    }
    let generation = state.generation.load(Ordering::SeqCst);
    state
        .sockets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((generation, client.try_clone()?, server.try_clone()?));
    state.accepted.fetch_add(1, Ordering::Relaxed);
    state.open.fetch_add(1, Ordering::Relaxed);
    let alive = Arc::new(AtomicUsize::new(2));
    let pumps = [(client.try_clone()?, server.try_clone()?), (server, client)];
    for (from, to) in pumps {
        let state = Arc::clone(state);
        let alive = Arc::clone(&alive);
        thread::Builder::new()
            .name("proxy-pump".into())
            .spawn(move || {
                pump(from, to, &state, generation);
                if alive.fetch_sub(1, Ordering::SeqCst) == 1 {
                    state.open.fetch_sub(1, Ordering::Relaxed);
                }
            })?;
    }
    Ok(())
}

/// Copies `from` to `to` until either side closes or the connection is reset.
fn pump(mut from: TcpStream, mut to: TcpStream, state: &State, generation: u64) {
    let reset = || {
        state.closing.load(Ordering::SeqCst) || state.generation.load(Ordering::SeqCst) > generation
    };
    let mut buffer = vec![0u8; CHUNK];
    loop {
        if reset() {
            return;
        }
        if state.stalled.load(Ordering::Relaxed) {
            thread::sleep(POLL);
            continue;
        }
        let n = match from.read(&mut buffer) {
            Ok(0) => {
                // Half-close: pass the FIN on, keep the other direction.
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        };
        let latency = Duration::from_micros(state.latency_micros.load(Ordering::Relaxed));
        if !latency.is_zero() {
            thread::sleep(latency);
        }
        while state.stalled.load(Ordering::Relaxed) && !reset() {
            thread::sleep(POLL);
        }
        if reset() || to.write_all(&buffer[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use super::FaultProxy;

    /// An echo server on a free port.
    fn echo() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 || stream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn roundtrip(stream: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(text)?;
        let mut got = vec![0u8; text.len()];
        stream.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn forwards_delays_stalls_and_resets() {
        let proxy = FaultProxy::start(echo()).expect("proxy");
        let mut stream = TcpStream::connect(proxy.addr()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(roundtrip(&mut stream, b"hello").expect("echo"), b"hello");

        proxy.set_latency(Duration::from_millis(150));
        let started = Instant::now();
        roundtrip(&mut stream, b"slow").expect("echo");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "both ways delayed"
        );
        proxy.set_latency(Duration::ZERO);

        proxy.stall();
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        assert!(
            roundtrip(&mut stream, b"stuck").is_err(),
            "nothing flows while stalled"
        );
        proxy.resume();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut late = [0u8; 5];
        stream
            .read_exact(&mut late)
            .expect("the stalled bytes arrive");
        assert_eq!(&late, b"stuck");

        assert_eq!(proxy.open_connections(), 1);
        proxy.reset();
        let mut buf = [0u8; 1];
        let after_reset = stream.read(&mut buf);
        assert!(
            matches!(after_reset, Ok(0) | Err(_)),
            "the connection is gone: {after_reset:?}"
        );

        proxy.refuse(true);
        let mut refused = TcpStream::connect(proxy.addr()).expect("TCP accepts");
        refused
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert!(
            roundtrip(&mut refused, b"x").is_err(),
            "refused connections close"
        );
        proxy.refuse(false);
        let mut again = TcpStream::connect(proxy.addr()).expect("connect");
        again
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(roundtrip(&mut again, b"back").expect("echo"), b"back");
        assert_eq!(proxy.accepted_connections(), 2);
    }
}
