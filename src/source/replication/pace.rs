//! Reading a backlog in large pieces: the socket's receive low-water mark.
//!
//! # Why
//!
//! The walsender sends every change with a `send()` of its own
//! (`WalSndWriteData` flushes after each message). Over TCP, each send
//! that finds the reader waiting on the socket wakes it, and the server
//! pays for that wake-up on its own CPU: draining one streamed
//! 1,000,000-row transaction over loopback TCP, `pg_recvlogical`'s
//! walsender spent 5.0-5.6 CPU s, and 2.6-4.4 CPU s when the reader's
//! socket had `SO_RCVLOWAT` at 64 KiB (BENCHMARKS.md, "The walsender's
//! wake-ups"). The reader task of [`super::stream`] waits on the socket
//! whenever it has caught up, which is most of the time when the consumer
//! is quick (a streamed transaction only goes to the spool).
//!
//! # How
//!
//! While a backlog streams in (the reads of a [`WINDOW`] brought
//! [`BURST_BYTES`] or more), the reader raises the mark to [`LOW_WATER`]
//! before it waits: the kernel then signals the socket readable once that
//! much is queued, one wake-up for hundreds of changes. The last bytes of
//! a burst would wait for more that may never come, so a wait with the
//! mark raised lasts at most [`FALLBACK`]: then the mark is lowered, which
//! signals at once whatever is queued. A steady stream below the burst
//! rate never raises it, so its latency is untouched; a burst's tail, a
//! keepalive or a small transaction right after a burst waits at most
//! [`FALLBACK`] (plus the timer's millisecond) more.
//!
//! Only TCP (TLS included) is paced: a Unix socket wakes its reader for
//! every message whatever the mark, and a test pipe has no socket.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::time::Instant;

/// The mark while a backlog streams in.
pub const LOW_WATER: u32 = 64 * 1024;
/// How long a wait with the mark raised lasts before the mark is lowered.
pub const FALLBACK: Duration = Duration::from_millis(1);
/// The span over which the reads' rate is judged.
pub const WINDOW: Duration = Duration::from_millis(1);
/// Bytes per [`WINDOW`] from which the reads are a burst: 16 MB/s, tens of
/// thousands of changes a second.
pub const BURST_BYTES: usize = 16 * 1024;

/// The reader's pacing state: the socket (a duplicate of the connection's
/// descriptor, for its option only), the rate of the recent reads, and
/// whether the mark is raised.
#[derive(Debug)]
pub(super) struct Pace {
    socket: Option<OwnedFd>,
    window_start: Instant,
    window_bytes: usize,
    burst: bool,
    raised: bool,
}

impl Pace {
    /// Pacing for the connection whose socket is `socket` (`None`: never
    /// raised).
    pub(super) fn new(socket: Option<OwnedFd>) -> Self {
        Pace {
            socket,
            window_start: Instant::now(),
            window_bytes: 0,
            burst: false,
            raised: false,
        }
    }

    /// Counts a read of `bytes` at `now`; a [`WINDOW`] or more after the
    /// window began, judges whether it was a burst and begins the next.
    pub(super) fn read(&mut self, bytes: usize, now: Instant) {
        self.window_bytes += bytes;
        let span = now.saturating_duration_since(self.window_start);
        if span >= WINDOW {
            // bytes / span >= BURST_BYTES / WINDOW, without dividing.
            self.burst = self.window_bytes as u128 * WINDOW.as_nanos()
                >= BURST_BYTES as u128 * span.as_nanos();
            self.window_start = now;
            self.window_bytes = 0;
        }
    }

    /// Before the reader waits on the socket: raises the mark in a burst
    /// and lowers it otherwise. Whether it is raised: the wait must then
    /// end after [`FALLBACK`] with [`Pace::fall_back`].
    pub(super) fn before_wait(&mut self) -> bool {
        let wanted = self.burst && self.socket.is_some();
        if wanted != self.raised {
            if let Err(error) = self.set(wanted) {
                // Reads stay correct without the mark, only dearer for the
                // server: give pacing up for this connection.
                tracing::debug!(%error, "cannot set the replication socket's receive low-water mark; reading without it");
                self.socket = None;
                self.raised = false;
            }
        }
        self.raised
    }

    /// The wait with the mark raised lasted [`FALLBACK`]: lowers the mark,
    /// so the kernel signals what is queued, and ends the burst.
    ///
    /// # Errors
    /// When the mark cannot be lowered: the bytes below it would then never
    /// be signalled, so the connection cannot be read on.
    pub(super) fn fall_back(&mut self) -> io::Result<()> {
        self.burst = false;
        self.lower()
    }

    /// Lowers the mark if it is raised, for reads that must not wait for
    /// more (the end of the copy).
    ///
    /// # Errors
    /// As [`Pace::fall_back`].
    pub(super) fn lower(&mut self) -> io::Result<()> {
        if self.raised {
            self.set(false)?;
        }
        Ok(())
    }

    fn set(&mut self, raised: bool) -> io::Result<()> {
        if let Some(socket) = &self.socket {
            let mark = if raised { LOW_WATER } else { 1 };
            pgcdc_sockopt::set_receive_low_water(socket, mark)?;
        }
        self.raised = raised;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use super::*;

    fn socket() -> (OwnedFd, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let fd = client.as_fd().try_clone_to_owned().expect("dup");
        (fd, client, server)
    }

    fn mark(socket: &TcpStream) -> u32 {
        pgcdc_sockopt::receive_low_water(socket).expect("read the mark")
    }

    #[test]
    fn reads_at_the_burst_rate_raise_the_mark_and_slower_ones_lower_it() {
        let (fd, client, _server) = socket();
        let mut pace = Pace::new(Some(fd));
        let start = pace.window_start;
        assert!(!pace.before_wait(), "nothing read yet");

        // Two windows' worth of bytes over two windows: the rate itself.
        pace.read(BURST_BYTES, start + WINDOW);
        pace.read(BURST_BYTES, start + WINDOW * 2);
        assert!(pace.before_wait(), "a burst");
        assert_eq!(mark(&client), LOW_WATER);

        // Half the rate: no longer a burst.
        pace.read(BURST_BYTES / 2, start + WINDOW * 3);
        assert!(!pace.before_wait(), "below the rate");
        assert_eq!(mark(&client), 1);
    }

    #[test]
    fn a_window_is_judged_by_its_rate_not_its_bytes() {
        let mut pace = Pace::new(None);
        let start = pace.window_start;
        pace.read(BURST_BYTES / 4, start + WINDOW / 2);
        assert!(!pace.burst, "the window is not over yet");
        pace.read(BURST_BYTES, start + WINDOW);
        assert!(pace.burst, "1.25 windows' bytes in one window");
        // A large read after a quiet second is no burst.
        pace.read(BURST_BYTES * 10, start + WINDOW + Duration::from_secs(1));
        assert!(!pace.burst);
    }

    #[test]
    fn the_fallback_and_the_end_lower_the_mark() {
        let (fd, client, _server) = socket();
        let mut pace = Pace::new(Some(fd));
        let start = pace.window_start;
        pace.read(BURST_BYTES * 2, start + WINDOW);
        assert!(pace.before_wait());
        pace.fall_back().expect("lowered");
        assert_eq!(mark(&client), 1);
        assert!(!pace.before_wait(), "the burst ended with the fallback");

        pace.read(BURST_BYTES * 2, start + WINDOW * 2);
        assert!(pace.before_wait());
        pace.lower().expect("lowered");
        assert_eq!(mark(&client), 1);
    }

    #[test]
    fn without_a_socket_the_mark_is_never_raised() {
        let mut pace = Pace::new(None);
        let start = pace.window_start;
        pace.read(BURST_BYTES * 100, start + WINDOW);
        assert!(pace.burst);
        assert!(!pace.before_wait(), "a Unix socket or a test pipe");
    }

    #[test]
    fn a_socket_that_refuses_the_mark_is_read_without_it() {
        let file = std::fs::File::open("/dev/null").expect("open");
        let mut pace = Pace::new(Some(file.as_fd().try_clone_to_owned().expect("dup")));
        let start = pace.window_start;
        pace.read(BURST_BYTES * 2, start + WINDOW);
        assert!(!pace.before_wait(), "ENOTSOCK: pacing given up");
        assert!(pace.socket.is_none());
    }
}
