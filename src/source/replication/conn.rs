//! One protocol connection as bytes: whole backend messages read off it
//! (a partial one kept between reads, so reading is cancel-safe) and the
//! frontend's queued messages written. Both the login ([`super::session`])
//! and the streaming phase ([`super::stream`]) use it; neither knows the
//! other's states.

use std::io;
use std::os::fd::OwnedFd;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::error::{ReplicationError, ServerError};
use super::frame::{self, Frame, MAX_FRAME_BODY};

/// Bytes asked of the socket per read: enough for hundreds of small
/// changes, so a backlog is read in few system calls.
pub(super) const READ_CHUNK: usize = 128 * 1024;

/// A byte stream carrying the protocol: a TCP or Unix socket, TLS over TCP,
/// or an in-memory pipe in tests.
pub(super) trait Wire: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Wire for T {}

/// Reads whole messages off a connection, keeping a partial one between
/// reads (so [`Conn::read_frame`] is cancel-safe) and writes what the
/// frontend queued in `out`.
pub(super) struct Conn {
    pub(super) io: Box<dyn Wire>,
    pub(super) read: BytesMut,
    pub(super) out: BytesMut,
    /// A duplicate of a TCP connection's descriptor, for its receive
    /// low-water mark ([`super::pace`]); `None` over a Unix socket or a
    /// test pipe.
    pub(super) low_water: Option<OwnedFd>,
}

impl Conn {
    pub(super) fn new(io: Box<dyn Wire>) -> Self {
        Conn {
            io,
            read: BytesMut::with_capacity(READ_CHUNK),
            out: BytesMut::new(),
            low_water: None,
        }
    }

    /// A whole message already buffered, without reading.
    pub(super) fn buffered_frame(&mut self) -> Result<Option<Frame>, ReplicationError> {
        Ok(frame::split_frame(&mut self.read, MAX_FRAME_BODY)?)
    }

    /// Reads from the socket once; `during` names the step for an early close.
    /// Cancel-safe: data read is kept in `self.read`, nothing is lost.
    pub(super) async fn fill(&mut self, during: &'static str) -> Result<(), ReplicationError> {
        if self.read.capacity() - self.read.len() < READ_CHUNK / 4 {
            self.read.reserve(READ_CHUNK);
        }
        match self.io.read_buf(&mut self.read).await? {
            0 => Err(ReplicationError::Closed(during)),
            _ => Ok(()),
        }
    }

    /// The next message, reading as needed.
    pub(super) async fn read_frame(
        &mut self,
        during: &'static str,
    ) -> Result<Frame, ReplicationError> {
        loop {
            if let Some(frame) = self.buffered_frame()? {
                return Ok(frame);
            }
            self.fill(during).await?;
        }
    }

    /// Writes and flushes what is queued in `out`.
    pub(super) async fn flush(&mut self) -> Result<(), ReplicationError> {
        while self.out.has_remaining() {
            let n = self.io.write(&self.out).await?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero).into());
            }
            self.out.advance(n);
        }
        self.io.flush().await?;
        Ok(())
    }
}

/// The server's ErrorResponse as a typed error.
pub(super) fn server_error(frame: &Frame) -> Result<ServerError, ReplicationError> {
    Ok(frame::parse_error_fields(&frame.body)?.into())
}
