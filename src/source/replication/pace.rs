//! Reading a streamed transaction in large pieces: the socket's receive
//! low-water mark.
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
//! wake-ups"). Inside a stream block (pgoutput's Stream Start to Stream
//! Stop, protocol 2) the connector only appends what arrives to the spool,
//! so the reader task of [`super::stream`] catches up after every few
//! changes and waits on the socket again: it was woken, and the server
//! paid, for every few changes.
//!
//! # How
//!
//! While a stream block is open, the reader raises the mark to
//! [`LOW_WATER`] before it waits: the kernel then signals the socket
//! readable once that much is queued, one wake-up for hundreds of changes.
//! Nothing in a block can go to Kafka before its transaction's Stream
//! Commit, so holding its changes back costs no latency. The block's last
//! bytes, or a server that sends slowly, would wait for more, so a wait
//! with the mark raised lasts at most [`FALLBACK`]: then the mark is
//! lowered, which signals at once whatever is queued. Stream Stop lowers it
//! too: between blocks the server sends whole transactions, keepalives and
//! answers, which must not wait.
//!
//! Only there: a whole transaction sent after its commit is read as it
//! comes. There the connector, which encodes and produces every change, is
//! the slower side, and a mark raised whenever reads arrived fast held the
//! server back: a 200,000-row transaction took 15-22 % longer
//! (BENCHMARKS.md). Only over TCP (TLS included): a Unix socket wakes its
//! reader for every message whatever the mark, and a test pipe has no
//! socket.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// The mark while a stream block is open.
pub const LOW_WATER: u32 = 64 * 1024;
/// How long a wait with the mark raised lasts before the mark is lowered.
pub const FALLBACK: Duration = Duration::from_millis(1);

/// pgoutput's Stream Start and Stream Stop: the first byte of their
/// XLogData payloads.
const STREAM_START: u8 = b'S';
const STREAM_STOP: u8 = b'E';

/// The reader's pacing state: the socket (a duplicate of the connection's
/// descriptor, for its option only), whether a stream block is open, and
/// whether the mark is raised.
#[derive(Debug)]
pub(super) struct Pace {
    socket: Option<OwnedFd>,
    in_block: bool,
    raised: bool,
    /// The fallback lowered the mark and nothing was read since: raising
    /// it again now would hide what is queued (epoll checks readiness again
    /// when it reports the event the lowering raised).
    fell_back: bool,
}

impl Pace {
    /// Pacing for the connection whose socket is `socket` (`None`: never
    /// raised).
    pub(super) fn new(socket: Option<OwnedFd>) -> Self {
        Pace {
            socket,
            in_block: false,
            raised: false,
            fell_back: false,
        }
    }

    /// Notes an XLogData payload the reader parsed: Stream Start opens a
    /// block, Stream Stop closes it.
    pub(super) fn saw(&mut self, payload: &[u8]) {
        match payload.first() {
            Some(&STREAM_START) => self.in_block = true,
            Some(&STREAM_STOP) => self.in_block = false,
            _ => {}
        }
    }

    /// The reader read from the socket.
    pub(super) fn read(&mut self) {
        self.fell_back = false;
    }

    /// Before the reader waits on the socket: raises the mark inside a
    /// stream block (unless the fallback lowered it and nothing was read
    /// since) and lowers it outside one. Whether it is raised: the wait
    /// must then end after [`FALLBACK`] with [`Pace::fall_back`].
    ///
    /// # Errors
    /// When a raised mark cannot be lowered: the bytes below it would then
    /// never be signalled, so the connection cannot be read on.
    pub(super) fn before_wait(&mut self) -> io::Result<bool> {
        if self.in_block && !self.raised && !self.fell_back && self.socket.is_some() {
            if let Err(error) = self.set(true) {
                // Reads stay correct without the mark, only dearer for the
                // server: give pacing up for this connection.
                tracing::debug!(%error, "cannot raise the replication socket's receive low-water mark; reading without it");
                self.socket = None;
            }
        } else if !self.in_block {
            self.lower()?;
        }
        Ok(self.raised)
    }

    /// The wait with the mark raised lasted [`FALLBACK`]: lowers the mark,
    /// so the kernel signals what is queued; the first wait after the next
    /// read raises it again if the block is still open.
    ///
    /// # Errors
    /// As [`Pace::before_wait`].
    pub(super) fn fall_back(&mut self) -> io::Result<()> {
        self.fell_back = true;
        self.lower()
    }

    /// Lowers the mark if it is raised, for reads that must not wait for
    /// more (the end of the copy).
    ///
    /// # Errors
    /// As [`Pace::before_wait`].
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
    fn the_mark_is_raised_inside_a_stream_block_only() {
        let (fd, client, _server) = socket();
        let mut pace = Pace::new(Some(fd));
        pace.saw(b"B whole transaction");
        assert!(!pace.before_wait().expect("wait"), "outside a block");
        assert_eq!(mark(&client), 1);

        pace.saw(b"S\0\0\0\x07\x01");
        pace.saw(b"I a change of the block");
        assert!(pace.before_wait().expect("wait"), "inside a block");
        assert_eq!(mark(&client), LOW_WATER);

        pace.saw(b"E");
        assert!(!pace.before_wait().expect("wait"), "Stream Stop closed it");
        assert_eq!(mark(&client), 1);
    }

    #[test]
    fn the_fallback_lowers_the_mark_until_the_next_read() {
        let (fd, client, _server) = socket();
        let mut pace = Pace::new(Some(fd));
        pace.saw(b"S\0\0\0\x07\x01");
        assert!(pace.before_wait().expect("wait"));
        pace.fall_back().expect("lowered");
        assert_eq!(mark(&client), 1, "what is queued is signalled");
        assert!(
            !pace.before_wait().expect("wait"),
            "still lowered: the reader has not read what was signalled"
        );
        pace.read();
        assert!(pace.before_wait().expect("wait"), "the block is still open");
        assert_eq!(mark(&client), LOW_WATER);
        pace.lower().expect("lowered");
        assert_eq!(mark(&client), 1, "the end of the copy");
    }

    #[test]
    fn without_a_socket_the_mark_is_never_raised() {
        let mut pace = Pace::new(None);
        pace.saw(b"S\0\0\0\x07\x01");
        assert!(
            !pace.before_wait().expect("wait"),
            "a Unix socket or a test pipe"
        );
    }

    #[test]
    fn a_descriptor_that_refuses_the_mark_is_read_without_it() {
        let file = std::fs::File::open("/dev/null").expect("open");
        let mut pace = Pace::new(Some(file.as_fd().try_clone_to_owned().expect("dup")));
        pace.saw(b"S\0\0\0\x07\x01");
        assert!(
            !pace.before_wait().expect("no error"),
            "ENOTSOCK: pacing given up"
        );
        assert!(pace.socket.is_none());
    }
}
