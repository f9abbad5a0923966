//! The wire format of a replication session, sans-IO: bytes in, typed
//! messages (or a [`FrameError`]) out, and the few frontend messages the
//! client writes.
//!
//! Every backend message is a tag byte, an `i32` length that counts itself
//! but not the tag, and a body
//! ([message flow](https://www.postgresql.org/docs/current/protocol-message-formats.html)).
//! [`split_frame`] cuts whole messages off the front of a read buffer and
//! leaves a partial one where it is, so the reader can be cancelled between
//! reads without losing bytes. During `COPY BOTH` each `CopyData` (`d`) body
//! is one of the streaming replication messages
//! ([streaming replication protocol](https://www.postgresql.org/docs/current/protocol-replication.html)):
//!
//! | first byte | message | body after it |
//! |---|---|---|
//! | `w` | XLogData | WAL start (i64), WAL end (i64), send time (i64), payload |
//! | `k` | primary keepalive | WAL end (i64), send time (i64), reply requested (u8) |
//!
//! and the client answers with standby status updates (`r`, written by
//! [`standby_status_update`]): write, flush and apply positions, the
//! client's clock, and whether it wants an immediate reply. The connector
//! reports one position for all three, the acknowledged one (see
//! [`super`]).
//!
//! # Never panics
//!
//! As in [`crate::pgoutput`], the bytes are untrusted: every read is
//! bounds-checked, a negative or oversized length is an error, and the lints
//! below reject indexing, unchecked arithmetic and panics in this file (its
//! tests excepted). The fuzz target `fuzz/fuzz_targets/replication_frame.rs`
//! feeds arbitrary bytes through [`split_frame`] and every parser here. An
//! XLogData payload is not looked into: it goes whole to
//! [`crate::pgoutput::decode`].
#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::lsn::Lsn;

/// Bytes before a message body: the tag and the length.
const HEADER: usize = 5;

/// The largest message body accepted by default: PostgreSQL's own limit
/// for a single allocation (`MaxAllocSize`, 1 GiB less one byte), which
/// bounds any row a walsender can send.
pub const MAX_FRAME_BODY: usize = 0x3FFF_FFFF;

/// One backend message: its tag and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The message type, e.g. `b'd'` for CopyData.
    pub tag: u8,
    /// The body after the length, a slice of the read buffer.
    pub body: Bytes,
}

/// Bytes that are not a well-formed message of the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length field below the 4 bytes it counts itself.
    #[error("message '{}' announces a length of {length}, less than its own 4 bytes", char::from(*.tag))]
    BadLength { tag: u8, length: i32 },
    /// A message larger than the reader accepts.
    #[error("message '{}' of {length} bytes is over the limit of {limit} bytes", char::from(*.tag))]
    TooLarge {
        tag: u8,
        length: usize,
        limit: usize,
    },
    /// A message that ends inside a field.
    #[error("{what} ends after {remaining} bytes, inside a field of {needed}")]
    Truncated {
        what: &'static str,
        needed: usize,
        remaining: usize,
    },
    /// Bytes after the last field of a fixed-size message.
    #[error("{what} has {extra} bytes past its end")]
    TrailingBytes { what: &'static str, extra: usize },
    /// A CopyData body of a kind the replication protocol does not define.
    #[error("unknown replication message '{}' in CopyData", char::from(*.0))]
    UnknownCopyData(u8),
    /// A string field without its NUL terminator, or not UTF-8.
    #[error("{0} holds a string that is not NUL-terminated UTF-8")]
    BadString(&'static str),
    /// A negative column count.
    #[error("DataRow announces {0} columns")]
    BadColumnCount(i16),
}

/// Cuts the first whole message off `buf`; `Ok(None)` when `buf` holds
/// only part of one (then it reserves room for the rest, so the next read
/// can complete it). `limit` bounds the body size.
///
/// ```
/// use bytes::BytesMut;
/// use pgcdc_wire::frame::{split_frame, MAX_FRAME_BODY};
///
/// let mut buf = BytesMut::from(&b"Z\0\0\0\x05Id"[..]);
/// let frame = split_frame(&mut buf, MAX_FRAME_BODY).unwrap().unwrap();
/// assert_eq!((frame.tag, &frame.body[..]), (b'Z', &b"I"[..]));
/// assert_eq!(split_frame(&mut buf, MAX_FRAME_BODY), Ok(None), "a partial message stays");
/// assert_eq!(&buf[..], b"d");
/// ```
pub fn split_frame(buf: &mut BytesMut, limit: usize) -> Result<Option<Frame>, FrameError> {
    let Some(header) = buf.get(..HEADER) else {
        return Ok(None);
    };
    let mut header = header;
    let tag = header.get_u8();
    let length = header.get_i32();
    let body_len = usize::try_from(length)
        .ok()
        .and_then(|l| l.checked_sub(4))
        .ok_or(FrameError::BadLength { tag, length })?;
    if body_len > limit {
        return Err(FrameError::TooLarge {
            tag,
            length: body_len,
            limit,
        });
    }
    // Cannot overflow: body_len <= limit, and a limit near usize::MAX is
    // no real buffer.
    let total = body_len.saturating_add(HEADER);
    if buf.len() < total {
        buf.reserve(total.saturating_sub(buf.len()));
        return Ok(None);
    }
    let mut frame = buf.split_to(total).freeze();
    frame.advance(HEADER);
    Ok(Some(Frame { tag, body: frame }))
}

/// A CopyData body of the replication stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyData {
    /// `w`: WAL data, one pgoutput message.
    XLogData(XLogData),
    /// `k`: the server's heartbeat.
    Keepalive(Keepalive),
}

/// `w`: one message of the output plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XLogData {
    /// Where in the WAL the data starts (for pgoutput, the message's LSN,
    /// or zero for messages not tied to one).
    pub wal_start: Lsn,
    /// The server's current WAL end.
    pub wal_end: Lsn,
    /// The server's clock when it sent this (microseconds since 2000-01-01).
    pub send_time_micros: i64,
    /// The output plugin's message, for [`crate::pgoutput::decode`].
    pub data: Bytes,
}

/// `k`: the server is alive and its WAL ends at `wal_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// The server's current WAL end.
    pub wal_end: Lsn,
    /// The server's clock when it sent this (microseconds since 2000-01-01).
    pub send_time_micros: i64,
    /// The server wants a status update at once, or it will time us out
    /// (`wal_sender_timeout`).
    pub reply_requested: bool,
}

/// A bounds-checked cursor over a message body.
struct Reader<'a> {
    what: &'static str,
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, body: &'a [u8]) -> Self {
        Reader { what, rest: body }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(FrameError::Truncated {
                what: self.what,
                needed: N,
                remaining: self.rest.len(),
            })?;
        self.rest = tail;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        self.take::<1>().map(|[b]| b)
    }

    fn i16(&mut self) -> Result<i16, FrameError> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, FrameError> {
        self.take().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, FrameError> {
        self.take().map(i64::from_be_bytes)
    }

    fn lsn(&mut self) -> Result<Lsn, FrameError> {
        self.take().map(|b| Lsn::new(u64::from_be_bytes(b)))
    }

    /// A NUL-terminated UTF-8 string.
    fn cstr(&mut self) -> Result<&'a str, FrameError> {
        let end = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(FrameError::BadString(self.what))?;
        let (text, tail) = self.rest.split_at(end);
        self.rest = tail.get(1..).unwrap_or_default();
        std::str::from_utf8(text).map_err(|_| FrameError::BadString(self.what))
    }

    fn bytes(&mut self, len: usize) -> Result<&'a [u8], FrameError> {
        if self.rest.len() < len {
            return Err(FrameError::Truncated {
                what: self.what,
                needed: len,
                remaining: self.rest.len(),
            });
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn end(&self) -> Result<(), FrameError> {
        match self.rest.len() {
            0 => Ok(()),
            extra => Err(FrameError::TrailingBytes {
                what: self.what,
                extra,
            }),
        }
    }
}

/// Parses a CopyData body of the replication stream. The XLogData payload
/// is a zero-copy slice of `body`.
pub fn parse_copy_data(body: &Bytes) -> Result<CopyData, FrameError> {
    let mut r = Reader::new("replication message", body);
    match r.u8()? {
        b'w' => {
            r.what = "XLogData";
            let wal_start = r.lsn()?;
            let wal_end = r.lsn()?;
            let send_time_micros = r.i64()?;
            let consumed = body.len().saturating_sub(r.rest.len());
            Ok(CopyData::XLogData(XLogData {
                wal_start,
                wal_end,
                send_time_micros,
                data: body.slice(consumed..),
            }))
        }
        b'k' => {
            r.what = "primary keepalive";
            let keepalive = Keepalive {
                wal_end: r.lsn()?,
                send_time_micros: r.i64()?,
                reply_requested: r.u8()? != 0,
            };
            r.end()?;
            Ok(CopyData::Keepalive(keepalive))
        }
        other => Err(FrameError::UnknownCopyData(other)),
    }
}

/// An authentication request (`R`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthRequest {
    /// 0: authenticated.
    Ok,
    /// 3: the password in clear text.
    Cleartext,
    /// 5: the MD5 hash of password and user, salted.
    Md5 { salt: [u8; 4] },
    /// 10: SASL, with the mechanisms the server offers.
    Sasl { mechanisms: Vec<String> },
    /// 11: a SASL challenge.
    SaslContinue(Bytes),
    /// 12: the SASL outcome, to verify.
    SaslFinal(Bytes),
    /// Any other method (Kerberos, GSSAPI, SSPI): its code.
    Other(i32),
}

/// Parses an authentication request body.
pub fn parse_auth_request(body: &Bytes) -> Result<AuthRequest, FrameError> {
    let mut r = Reader::new("authentication request", body);
    let code = r.i32()?;
    let rest = || body.slice(4..);
    Ok(match code {
        0 => AuthRequest::Ok,
        3 => AuthRequest::Cleartext,
        5 => {
            let salt = r.take::<4>()?;
            r.end()?;
            AuthRequest::Md5 { salt }
        }
        10 => {
            let mut mechanisms = Vec::new();
            loop {
                let name = r.cstr()?;
                if name.is_empty() {
                    break;
                }
                mechanisms.push(name.to_owned());
            }
            AuthRequest::Sasl { mechanisms }
        }
        11 => AuthRequest::SaslContinue(rest()),
        12 => AuthRequest::SaslFinal(rest()),
        other => AuthRequest::Other(other),
    })
}

/// The fields of an ErrorResponse (`E`) or NoticeResponse (`N`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorFields {
    /// `S`/`V`: ERROR, FATAL, PANIC (or WARNING, NOTICE... in a notice).
    pub severity: String,
    /// `C`: the SQLSTATE code.
    pub code: String,
    /// `M`: the primary message.
    pub message: String,
    /// `D`: detail.
    pub detail: Option<String>,
    /// `H`: a hint.
    pub hint: Option<String>,
}

/// Parses the fields of an ErrorResponse or NoticeResponse. Fields the
/// connector does not report (position, context, source location...) are
/// skipped; text that is not UTF-8 is replaced, since an error should reach
/// the operator even when the server's `lc_messages` encoding is odd.
pub fn parse_error_fields(body: &[u8]) -> Result<ErrorFields, FrameError> {
    let mut fields = ErrorFields::default();
    let mut rest = body;
    loop {
        let Some((&kind, tail)) = rest.split_first() else {
            return Err(FrameError::BadString("error response"));
        };
        if kind == 0 {
            return Ok(fields);
        }
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or(FrameError::BadString("error response"))?;
        let (value, tail) = tail.split_at(end);
        rest = tail.get(1..).unwrap_or_default();
        let value = String::from_utf8_lossy(value).into_owned();
        match kind {
            // `V` is the untranslated severity (PG 9.6+): prefer it.
            b'V' => fields.severity = value,
            b'S' if fields.severity.is_empty() => fields.severity = value,
            b'C' => fields.code = value,
            b'M' => fields.message = value,
            b'D' => fields.detail = Some(value),
            b'H' => fields.hint = Some(value),
            _ => {}
        }
    }
}

/// Parses a ParameterStatus (`S`): name and value.
pub fn parse_parameter_status(body: &[u8]) -> Result<(&str, &str), FrameError> {
    let mut r = Reader::new("parameter status", body);
    let name = r.cstr()?;
    let value = r.cstr()?;
    r.end()?;
    Ok((name, value))
}

/// One row of a simple-query result: each column's text, `None` for NULL.
pub type Row = Vec<Option<Bytes>>;

/// Parses a DataRow (`D`); the values are zero-copy slices of `body`.
pub fn parse_data_row(body: &Bytes) -> Result<Row, FrameError> {
    let mut r = Reader::new("DataRow", body);
    let columns = r.i16()?;
    let count = usize::try_from(columns).map_err(|_| FrameError::BadColumnCount(columns))?;
    // Each column takes at least its 4-byte length.
    let mut row = Vec::with_capacity(count.min(r.rest.len() / 4));
    for _ in 0..count {
        let len = r.i32()?;
        match usize::try_from(len) {
            Err(_) => row.push(None),
            Ok(len) => {
                let start = body.len().saturating_sub(r.rest.len());
                r.bytes(len)?;
                row.push(Some(body.slice(start..start.saturating_add(len))));
            }
        }
    }
    r.end()?;
    Ok(row)
}

/// Microseconds from the Unix epoch to the PostgreSQL epoch (2000-01-01).
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

/// Now, in microseconds since the PostgreSQL epoch, as status updates carry it.
pub fn pg_now_micros() -> i64 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    unix.saturating_sub(PG_EPOCH_UNIX_MICROS)
}

/// Appends a standby status update (`r` in CopyData) reporting `position`
/// as written, flushed and applied.
///
/// `position` must be the acknowledged position (what Kafka holds), never
/// the received one: the server may recycle WAL before the flush position
/// and the slot restarts there.
pub fn standby_status_update(position: Lsn, now_micros: i64, reply: bool, out: &mut BytesMut) {
    // The length counts itself (4), `r` (1), three positions and the
    // clock (8 each) and the reply flag (1); the CopyData tag comes first.
    const LENGTH: i32 = 38;
    out.reserve(39);
    out.put_u8(b'd');
    out.put_i32(LENGTH);
    out.put_u8(b'r');
    for _ in 0..3 {
        out.put_u64(position.as_u64());
    }
    out.put_i64(now_micros);
    out.put_u8(u8::from(reply));
}

/// Appends a CopyDone (`c`): the client ends the COPY BOTH.
pub fn copy_done(out: &mut BytesMut) {
    out.put_u8(b'c');
    out.put_i32(4);
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn xlog(start: u64, end: u64, data: &[u8]) -> Vec<u8> {
        let mut body = vec![b'w'];
        body.extend_from_slice(&start.to_be_bytes());
        body.extend_from_slice(&end.to_be_bytes());
        body.extend_from_slice(&7i64.to_be_bytes());
        body.extend_from_slice(data);
        body
    }

    fn keepalive(end: u64, reply: bool) -> Vec<u8> {
        let mut body = vec![b'k'];
        body.extend_from_slice(&end.to_be_bytes());
        body.extend_from_slice(&9i64.to_be_bytes());
        body.push(u8::from(reply));
        body
    }

    #[test]
    fn frames_are_cut_whole_and_partial_ones_wait() {
        let mut wire = frame(b'd', &xlog(1, 2, b"BEGIN"));
        wire.extend(frame(b'd', &keepalive(3, true)));
        let split_at = wire.len() - 3;
        let mut buf = BytesMut::from(&wire[..split_at]);
        let first = split_frame(&mut buf, MAX_FRAME_BODY).unwrap().unwrap();
        assert_eq!(first.tag, b'd');
        assert_eq!(
            parse_copy_data(&first.body).unwrap(),
            CopyData::XLogData(XLogData {
                wal_start: Lsn::new(1),
                wal_end: Lsn::new(2),
                send_time_micros: 7,
                data: Bytes::from_static(b"BEGIN"),
            })
        );
        assert_eq!(split_frame(&mut buf, MAX_FRAME_BODY), Ok(None));
        buf.extend_from_slice(&wire[split_at..]);
        let second = split_frame(&mut buf, MAX_FRAME_BODY).unwrap().unwrap();
        assert_eq!(
            parse_copy_data(&second.body).unwrap(),
            CopyData::Keepalive(Keepalive {
                wal_end: Lsn::new(3),
                send_time_micros: 9,
                reply_requested: true,
            })
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn bad_lengths_are_errors() {
        let mut buf = BytesMut::from(&b"d\0\0\0\x03"[..]);
        assert_eq!(
            split_frame(&mut buf, MAX_FRAME_BODY),
            Err(FrameError::BadLength {
                tag: b'd',
                length: 3
            })
        );
        let mut buf = BytesMut::from(&b"d\xff\xff\xff\xff"[..]);
        assert!(split_frame(&mut buf, MAX_FRAME_BODY).is_err());
        let mut buf = BytesMut::from(&frame(b'd', &[0; 10])[..]);
        assert_eq!(
            split_frame(&mut buf, 9),
            Err(FrameError::TooLarge {
                tag: b'd',
                length: 10,
                limit: 9
            })
        );
    }

    #[test]
    fn copy_data_errors() {
        let body = Bytes::from(keepalive(1, false));
        assert!(matches!(
            parse_copy_data(&body.slice(..body.len() - 1)),
            Err(FrameError::Truncated { .. })
        ));
        let mut long = keepalive(1, false);
        long.push(0);
        assert_eq!(
            parse_copy_data(&Bytes::from(long)),
            Err(FrameError::TrailingBytes {
                what: "primary keepalive",
                extra: 1
            })
        );
        assert_eq!(
            parse_copy_data(&Bytes::from_static(b"x")),
            Err(FrameError::UnknownCopyData(b'x'))
        );
        assert!(parse_copy_data(&Bytes::new()).is_err());
        assert!(parse_copy_data(&Bytes::from(xlog(1, 2, b"")[..24].to_vec())).is_err());
    }

    #[test]
    fn status_update_reports_one_position_three_times() {
        let mut out = BytesMut::new();
        standby_status_update(Lsn::new(0x16_B374_D848), 5, true, &mut out);
        let frame = split_frame(&mut out, MAX_FRAME_BODY).unwrap().unwrap();
        assert_eq!(frame.tag, b'd');
        let body = frame.body;
        assert_eq!(body.len(), 34);
        assert_eq!(body[0], b'r');
        for i in 0..3 {
            let at = 1 + i * 8;
            assert_eq!(
                u64::from_be_bytes(body[at..at + 8].try_into().unwrap()),
                0x16_B374_D848
            );
        }
        assert_eq!(i64::from_be_bytes(body[25..33].try_into().unwrap()), 5);
        assert_eq!(body[33], 1);
    }

    #[test]
    fn error_fields() {
        let body =
            b"SERROR\0VERROR\0C55006\0Mreplication slot \"s\" is active for PID 42\0Hstop it\0\0";
        let fields = parse_error_fields(body).unwrap();
        assert_eq!(fields.severity, "ERROR");
        assert_eq!(fields.code, "55006");
        assert_eq!(
            fields.message,
            "replication slot \"s\" is active for PID 42"
        );
        assert_eq!(fields.hint.as_deref(), Some("stop it"));
        assert_eq!(fields.detail, None);
        assert!(parse_error_fields(b"C55006").is_err());
        assert!(parse_error_fields(b"").is_err());
    }

    #[test]
    fn auth_requests() {
        let parse = |b: &[u8]| parse_auth_request(&Bytes::copy_from_slice(b));
        assert_eq!(parse(&[0, 0, 0, 0]), Ok(AuthRequest::Ok));
        assert_eq!(parse(&[0, 0, 0, 3]), Ok(AuthRequest::Cleartext));
        assert_eq!(
            parse(&[0, 0, 0, 5, 1, 2, 3, 4]),
            Ok(AuthRequest::Md5 { salt: [1, 2, 3, 4] })
        );
        assert_eq!(
            parse(b"\0\0\0\x0aSCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0"),
            Ok(AuthRequest::Sasl {
                mechanisms: vec!["SCRAM-SHA-256-PLUS".into(), "SCRAM-SHA-256".into()]
            })
        );
        assert_eq!(
            parse(b"\0\0\0\x0br=abc"),
            Ok(AuthRequest::SaslContinue(Bytes::from_static(b"r=abc")))
        );
        assert_eq!(parse(&[0, 0, 0, 7]), Ok(AuthRequest::Other(7)));
        assert!(parse(&[0, 0, 0, 5, 1]).is_err());
        assert!(parse(b"\0\0\0\x0aSCRAM").is_err());
    }

    #[test]
    fn data_rows() {
        let mut body = vec![0, 3];
        body.extend_from_slice(&2i32.to_be_bytes());
        body.extend_from_slice(b"ab");
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&0i32.to_be_bytes());
        let row = parse_data_row(&Bytes::from(body.clone())).unwrap();
        assert_eq!(
            row,
            vec![Some(Bytes::from_static(b"ab")), None, Some(Bytes::new())]
        );
        body.truncate(body.len() - 1);
        assert!(parse_data_row(&Bytes::from(body)).is_err());
        assert_eq!(
            parse_data_row(&Bytes::from_static(&[0xff, 0xff])),
            Err(FrameError::BadColumnCount(-1))
        );
    }

    #[test]
    fn parameter_status() {
        assert_eq!(
            parse_parameter_status(b"server_version\x0016.4 (Debian)\0"),
            Ok(("server_version", "16.4 (Debian)"))
        );
        assert!(parse_parameter_status(b"server_version\x0016").is_err());
    }

    /// Feeds every parser with `bytes`, as the fuzz target does.
    fn parse_everything(bytes: &[u8], chunk: usize) {
        let mut buf = BytesMut::new();
        for piece in bytes.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match split_frame(&mut buf, 1 << 16) {
                    Ok(Some(frame)) => {
                        let _ = parse_copy_data(&frame.body);
                        let _ = parse_auth_request(&frame.body);
                        let _ = parse_error_fields(&frame.body);
                        let _ = parse_parameter_status(&frame.body);
                        let _ = parse_data_row(&frame.body);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        assert!(!e.to_string().is_empty());
                        return;
                    }
                }
            }
        }
    }

    fn copy_data_strategy() -> impl Strategy<Value = CopyData> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u64>(),
                any::<i64>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(s, e, t, d)| CopyData::XLogData(XLogData {
                    wal_start: Lsn::new(s),
                    wal_end: Lsn::new(e),
                    send_time_micros: t,
                    data: Bytes::from(d),
                })),
            (any::<u64>(), any::<i64>(), any::<bool>()).prop_map(|(e, t, r)| {
                CopyData::Keepalive(Keepalive {
                    wal_end: Lsn::new(e),
                    send_time_micros: t,
                    reply_requested: r,
                })
            }),
        ]
    }

    fn encode(message: &CopyData) -> Vec<u8> {
        let body = match message {
            CopyData::XLogData(x) => {
                let mut body = vec![b'w'];
                body.extend_from_slice(&x.wal_start.as_u64().to_be_bytes());
                body.extend_from_slice(&x.wal_end.as_u64().to_be_bytes());
                body.extend_from_slice(&x.send_time_micros.to_be_bytes());
                body.extend_from_slice(&x.data);
                body
            }
            CopyData::Keepalive(k) => {
                let mut body = vec![b'k'];
                body.extend_from_slice(&k.wal_end.as_u64().to_be_bytes());
                body.extend_from_slice(&k.send_time_micros.to_be_bytes());
                body.push(u8::from(k.reply_requested));
                body
            }
        };
        frame(b'd', &body)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..256),
            chunk in 1usize..32,
        ) {
            parse_everything(&bytes, chunk);
        }

        /// However the stream is cut into reads, the same messages come out.
        #[test]
        fn messages_survive_any_read_boundaries(
            messages in proptest::collection::vec(copy_data_strategy(), 0..12),
            chunk in 1usize..64,
        ) {
            let wire: Vec<u8> = messages.iter().flat_map(encode).collect();
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            for piece in wire.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(frame) = split_frame(&mut buf, MAX_FRAME_BODY).unwrap() {
                    prop_assert_eq!(frame.tag, b'd');
                    out.push(parse_copy_data(&frame.body).unwrap());
                }
            }
            prop_assert!(buf.is_empty());
            prop_assert_eq!(out, messages);
        }
    }
}
