//! `SO_RCVLOWAT`, the receive low-water mark of a socket, set and read
//! safely.
//!
//! The replication reader raises it while a backlog streams in, so that
//! the kernel signals the socket readable once per 64 KiB rather than once
//! per change the server sends (`src/source/replication/pace.rs` says
//! why). socket2 0.6, rustix 1.1 and nix 0.30 expose no setter for it, so
//! this crate holds the one `setsockopt` call, and the connector's own
//! crate keeps `unsafe_code = "forbid"`.
//!
//! On Linux a TCP socket is signalled readable only once this many bytes
//! are queued (or its receive window is nearly closed, or the peer closed),
//! and setting it signals at once what is already queued (a read that
//! does not block still returns what is queued below the mark). A Unix stream
//! socket accepts the option but wakes its reader for every message
//! anyway.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Sets the receive low-water mark of `socket` to `bytes` (the kernel
/// caps it at half its largest receive buffer; 0 means 1).
///
/// # Errors
/// The operating system's, e.g. `ENOTSOCK` for a descriptor that is not a
/// socket.
pub fn set_receive_low_water(socket: &impl AsFd, bytes: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let fd = socket.as_fd();
    // SAFETY: `fd` is an open descriptor, borrowed for the whole call, and
    // the option's value is a live `c_int` whose exact size is passed.
    #[allow(unsafe_code)]
    let done = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    os_result(done)
}

/// The receive low-water mark of `socket`, in bytes.
///
/// # Errors
/// The operating system's, as [`set_receive_low_water`].
pub fn receive_low_water(socket: &impl AsFd) -> io::Result<u32> {
    let mut value: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let fd = socket.as_fd();
    // SAFETY: `fd` is an open descriptor, borrowed for the whole call;
    // `value` and `size` are live and `size` is `value`'s size, which the
    // kernel writes no more than.
    #[allow(unsafe_code)]
    let done = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            std::ptr::from_mut(&mut value).cast(),
            &mut size,
        )
    };
    os_result(done).map(|()| u32::try_from(value).unwrap_or(0))
}

/// A `setsockopt`/`getsockopt` return value as a result: 0 is success,
/// anything else leaves the reason in `errno`.
fn os_result(done: libc::c_int) -> io::Result<()> {
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    #[test]
    fn the_mark_is_set_read_back_and_lowered() {
        let (client, _server) = pair();
        assert_eq!(
            receive_low_water(&client).expect("read"),
            1,
            "Linux's default"
        );
        set_receive_low_water(&client, 64 * 1024).expect("raise");
        assert_eq!(receive_low_water(&client).expect("read"), 64 * 1024);
        set_receive_low_water(&client, 0).expect("lower");
        assert_eq!(receive_low_water(&client).expect("read"), 1, "0 means 1");
    }

    #[test]
    fn a_descriptor_that_is_no_socket_is_refused() {
        let file = std::fs::File::open("/dev/null").expect("open");
        let error = set_receive_low_water(&file, 1024).expect_err("not a socket");
        assert_eq!(error.raw_os_error(), Some(libc::ENOTSOCK), "{error}");
    }
}
