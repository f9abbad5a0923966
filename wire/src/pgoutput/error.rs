//! Why a pgoutput message could not be decoded: where (LSN, tag, byte
//! offset) and what was wrong, with the server setting to blame when the
//! message belongs to a protocol feature the decoder does not support.

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

use std::fmt;

use crate::lsn::Lsn;

/// A pgoutput message that could not be decoded.
///
/// Decode errors are definite: the same bytes will fail the same way, so
/// retrying does not help ([`DecodeError::is_retryable`] is `false`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DecodeError {
    pub(super) lsn: Lsn,
    pub(super) tag: Option<u8>,
    pub(super) offset: usize,
    pub(super) kind: DecodeErrorKind,
}

/// What was wrong with a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The message ended in the middle of a field.
    #[error("message ends inside the {what}: needed {needed} bytes, {remaining} remain")]
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the message.
        remaining: usize,
        /// The field being read.
        what: &'static str,
    },
    /// The first byte is not a known message tag.
    #[error("unknown message tag {}; is the slot's output plugin pgoutput?", ByteDisplay(*.0))]
    UnknownTag(u8),
    /// A message of a protocol feature the connector does not enable
    /// (two-phase commit).
    #[error("{}", unsupported_reason(*.0))]
    UnsupportedMessage(u8),
    /// A field holds a value outside its domain.
    #[error("expected {what}, found 0x{found:02x}")]
    InvalidValue {
        /// What the field may hold.
        what: &'static str,
        /// The byte found instead.
        found: u8,
    },
    /// A length or count is negative.
    #[error("expected a non-negative {what}, found {found}")]
    NegativeLength {
        /// The length or count field.
        what: &'static str,
        /// The value found.
        found: i32,
    },
    /// A string has no terminating NUL before the end of the message.
    #[error("the {what} has no terminating NUL")]
    UnterminatedString {
        /// The string field.
        what: &'static str,
    },
    /// A string is not UTF-8.
    #[error(
        "the {what} is not valid UTF-8; use a UTF8 client_encoding on the replication connection"
    )]
    InvalidUtf8 {
        /// The string field.
        what: &'static str,
    },
    /// Bytes follow a complete message.
    #[error("{0} unexpected bytes after the end of the message")]
    TrailingBytes(usize),
}

impl DecodeError {
    /// The `XLogData` WAL start of the offending message.
    pub const fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// What was wrong.
    pub const fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }

    /// The message tag, `None` for an empty message.
    pub const fn tag(&self) -> Option<u8> {
        self.tag
    }

    /// Byte offset within the message where the offending field starts.
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// Always `false`: decoding the same bytes again fails the same way.
    pub const fn is_retryable(&self) -> bool {
        false
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.tag {
            Some(tag) => format!("tag {}", ByteDisplay(tag)),
            None => "empty message".to_owned(),
        };
        match self.kind {
            DecodeErrorKind::UnsupportedMessage(_) => write!(
                f,
                "unsupported pgoutput message at LSN {} ({tag}): {}",
                self.lsn, self.kind
            ),
            _ => write!(
                f,
                "malformed pgoutput message at LSN {} ({tag}): {} at offset {}",
                self.lsn, self.kind, self.offset
            ),
        }
    }
}

/// Shows a byte as `'I'` when it is printable ASCII, else as `0x00`.
struct ByteDisplay(u8);

impl fmt::Display for ByteDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", char::from(self.0))
        } else {
            write!(f, "0x{:02x}", self.0)
        }
    }
}

/// For a message of a protocol feature the connector does not request: its
/// name, the feature and the `START_REPLICATION` option that enables it.
pub(super) fn unsupported_feature(tag: u8) -> Option<(&'static str, &'static str, &'static str)> {
    const TWO_PHASE: (&str, &str) = ("two-phase commit decoding", "two_phase");
    let (message, (feature, option)) = match tag {
        b'p' => ("stream prepare", TWO_PHASE),
        b'b' => ("begin prepare", TWO_PHASE),
        b'P' => ("prepare", TWO_PHASE),
        b'K' => ("commit prepared", TWO_PHASE),
        b'r' => ("rollback prepared", TWO_PHASE),
        _ => return None,
    };
    Some((message, feature, option))
}

fn unsupported_reason(tag: u8) -> String {
    match unsupported_feature(tag) {
        Some((message, feature, option)) => format!(
            "received a {message} message but {feature} is not enabled; \
             start replication with proto_version '1' or '2' and without the '{option}' option"
        ),
        None => format!(
            "message {} belongs to a protocol feature that is not enabled; \
             start replication with proto_version '1' or '2'",
            ByteDisplay(tag)
        ),
    }
}
