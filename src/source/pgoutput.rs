//! Decoder for the `pgoutput` logical replication protocol, version 1.
//!
//! `pgoutput` is the output plugin behind PostgreSQL's built-in logical
//! replication. On a replication connection started with
//! `START_REPLICATION SLOT .. LOGICAL .. (proto_version '1', publication_names '..')`
//! every `XLogData` frame carries exactly one logical replication message
//! whose first byte is a tag ([format reference]):
//!
//! | tag | message  | body (after the tag)                                                   |
//! |-----|----------|------------------------------------------------------------------------|
//! | `B` | Begin    | final LSN (i64), commit time (i64), xid (i32)                          |
//! | `C` | Commit   | flags (i8), commit LSN (i64), end LSN (i64), commit time (i64)         |
//! | `O` | Origin   | commit LSN (i64), name (cstring)                                       |
//! | `R` | Relation | id (i32), namespace, name (cstrings), replica identity (byte), columns |
//! | `Y` | Type     | oid (i32), namespace, name (cstrings)                                  |
//! | `I` | Insert   | relation id (i32), `N`, tuple                                          |
//! | `U` | Update   | relation id (i32), optional `K`/`O` + old tuple, `N` + new tuple       |
//! | `D` | Delete   | relation id (i32), `K`/`O` + old tuple                                 |
//! | `T` | Truncate | relation count (i32), options (i8), relation ids (i32 each)            |
//! | `M` | Message  | flags (i8), LSN (i64), prefix (cstring), length (i32), content         |
//!
//! Integers are big-endian; strings are NUL-terminated and must be UTF-8 here
//! (names are sent in the connection's `client_encoding`). A tuple is an i16
//! column count followed, per column, by a kind byte: `n` (NULL), `u`
//! (unchanged TOASTed value, not sent) or `t`/`b` (text / binary, each with an
//! i32 length and that many bytes). Commit times count microseconds since the
//! PostgreSQL epoch, 2000-01-01 00:00:00 UTC; see
//! [`Begin::commit_time_unix_micros`].
//!
//! Protocol versions 2 and later add messages for streamed in-progress
//! transactions (`S`, `E`, `c`, `A`, `p`) and two-phase commit (`b`, `P`,
//! `K`, `r`). The connector does not request those features, so receiving one
//! means the replication options and this decoder disagree: it is reported as
//! [`DecodeErrorKind::UnsupportedMessage`] rather than silently skipped.
//!
//! # Design
//!
//! The decoder is sans-IO: [`decode`] takes the bytes of one message and
//! returns a [`LogicalMessage`] or a [`DecodeError`]; it keeps no state across
//! messages (the relation cache lives elsewhere). It is zero-copy for column
//! values: every [`Datum`] and [`Message::content`] is a [`Bytes`] slice of
//! the input, so decoding a row allocates only the `Vec` of datums. Names are
//! owned `String`s, since they are few and outlive the frame in the relation
//! cache.
//!
//! # Never panics
//!
//! Wire input is untrusted as far as this module is concerned: a byte stream
//! we misframe, a server speaking another protocol version or a bug upstream
//! must surface as a [`DecodeError`], never as a panic that takes the pipeline
//! down. Every read is bounds-checked, lengths and counts are signed on the
//! wire and rejected when negative, capacity reservations are capped by the
//! bytes actually remaining, and a complete message followed by extra bytes is
//! an error ([`DecodeErrorKind::TrailingBytes`]) because it means we misparsed.
//! The clippy lints below reject indexing, unchecked arithmetic, `unwrap`
//! and `panic!` in this file (its tests excepted), and the fuzz target
//! `fuzz/fuzz_targets/pgoutput_decode.rs` feeds arbitrary bytes to [`decode`].
//!
//! [format reference]: https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
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

use std::ffi::CStr;
use std::fmt;

use bytes::Bytes;

use crate::lsn::Lsn;

/// Microseconds from the Unix epoch to the PostgreSQL epoch (2000-01-01 UTC).
pub const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800 * 1_000_000;

/// Converts a PostgreSQL timestamp (microseconds since 2000-01-01 UTC) to
/// microseconds since the Unix epoch, saturating at the `i64` range.
///
/// ```
/// use pgcdc_kafka::source::pgoutput::pg_epoch_micros_to_unix_micros;
///
/// assert_eq!(pg_epoch_micros_to_unix_micros(0), 946_684_800_000_000);
/// ```
pub const fn pg_epoch_micros_to_unix_micros(pg_micros: i64) -> i64 {
    pg_micros.saturating_add(PG_EPOCH_UNIX_MICROS)
}

/// One decoded pgoutput message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicalMessage {
    /// `B`: a transaction starts; its changes follow until [`Commit`].
    Begin(Begin),
    /// `C`: the transaction announced by the last [`Begin`] committed.
    Commit(Commit),
    /// `O`: the transaction was replicated to this server from another origin.
    Origin(Origin),
    /// `R`: the shape of a relation, sent before its first change in a session
    /// and again whenever it changes.
    Relation(Relation),
    /// `Y`: the name of a non-built-in type a following relation uses.
    Type(TypeInfo),
    /// `I`: a row was inserted.
    Insert(Insert),
    /// `U`: a row was updated.
    Update(Update),
    /// `D`: a row was deleted.
    Delete(Delete),
    /// `T`: relations were truncated.
    Truncate(Truncate),
    /// `M`: a message from `pg_logical_emit_message`.
    Message(Message),
}

impl LogicalMessage {
    /// The wire tag of this message, e.g. `b'I'` for an insert.
    pub const fn tag(&self) -> u8 {
        match self {
            LogicalMessage::Begin(_) => b'B',
            LogicalMessage::Commit(_) => b'C',
            LogicalMessage::Origin(_) => b'O',
            LogicalMessage::Relation(_) => b'R',
            LogicalMessage::Type(_) => b'Y',
            LogicalMessage::Insert(_) => b'I',
            LogicalMessage::Update(_) => b'U',
            LogicalMessage::Delete(_) => b'D',
            LogicalMessage::Truncate(_) => b'T',
            LogicalMessage::Message(_) => b'M',
        }
    }
}

/// Start of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begin {
    /// LSN of the transaction's commit record.
    pub final_lsn: Lsn,
    /// Commit time in microseconds since 2000-01-01 UTC.
    pub commit_time_micros: i64,
    /// Transaction id.
    pub xid: u32,
}

impl Begin {
    /// Commit time in microseconds since the Unix epoch.
    pub const fn commit_time_unix_micros(&self) -> i64 {
        pg_epoch_micros_to_unix_micros(self.commit_time_micros)
    }
}

/// End of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// Currently unused by PostgreSQL (always 0).
    pub flags: u8,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// LSN just past the commit record: where the next transaction may start.
    pub end_lsn: Lsn,
    /// Commit time in microseconds since 2000-01-01 UTC.
    pub commit_time_micros: i64,
}

impl Commit {
    /// Commit time in microseconds since the Unix epoch.
    pub const fn commit_time_unix_micros(&self) -> i64 {
        pg_epoch_micros_to_unix_micros(self.commit_time_micros)
    }
}

/// Replication origin of the current transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// LSN of the commit on the origin server.
    pub commit_lsn: Lsn,
    /// Name of the origin.
    pub name: String,
}

/// Description of a published relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// Relation OID, the key later changes refer to it by.
    pub id: u32,
    /// Schema name; the wire's empty string is mapped to `pg_catalog`.
    pub namespace: String,
    /// Relation name.
    pub name: String,
    /// Which old values updates and deletes carry.
    pub replica_identity: ReplicaIdentity,
    /// Published columns, in the order tuples list their values.
    pub columns: Vec<Column>,
}

/// A relation's `REPLICA IDENTITY` setting (`pg_class.relreplident`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicaIdentity {
    /// `d`: the primary key, if any.
    Default,
    /// `n`: nothing.
    Nothing,
    /// `f`: all columns.
    Full,
    /// `i`: the columns of a chosen unique index.
    Index,
}

impl ReplicaIdentity {
    /// Parses the `relreplident` byte.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            b'd' => Some(ReplicaIdentity::Default),
            b'n' => Some(ReplicaIdentity::Nothing),
            b'f' => Some(ReplicaIdentity::Full),
            b'i' => Some(ReplicaIdentity::Index),
            _ => None,
        }
    }

    /// The `relreplident` byte.
    pub const fn as_byte(self) -> u8 {
        match self {
            ReplicaIdentity::Default => b'd',
            ReplicaIdentity::Nothing => b'n',
            ReplicaIdentity::Full => b'f',
            ReplicaIdentity::Index => b'i',
        }
    }
}

/// One published column of a [`Relation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Whether the column is part of the replica identity key (flag bit 1).
    pub is_key: bool,
    /// Column name.
    pub name: String,
    /// OID of the column's type.
    pub type_oid: u32,
    /// Type modifier (`atttypmod`), -1 when there is none.
    pub type_modifier: i32,
}

/// Name of a type, sent before a relation that uses a non-built-in type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// Type OID.
    pub oid: u32,
    /// Schema name; the wire's empty string is mapped to `pg_catalog`.
    pub namespace: String,
    /// Type name.
    pub name: String,
}

/// An inserted row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    /// The relation, as announced by an earlier [`Relation`] message.
    pub relation_id: u32,
    /// The new row.
    pub new: Tuple,
}

/// An updated row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// The relation, as announced by an earlier [`Relation`] message.
    pub relation_id: u32,
    /// The old key or row: present when the replica identity changed (`K`)
    /// or the identity is `FULL` (`O`), absent otherwise.
    pub old: Option<OldTuple>,
    /// The new row; unchanged TOASTed values are [`Datum::UnchangedToast`].
    pub new: Tuple,
}

/// A deleted row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// The relation, as announced by an earlier [`Relation`] message.
    pub relation_id: u32,
    /// The old key or row.
    pub old: OldTuple,
}

/// The old values an update or delete carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple {
    /// `K`: only the replica identity columns are meaningful; the others are
    /// [`Datum::Null`].
    Key(Tuple),
    /// `O`: the whole old row (`REPLICA IDENTITY FULL`).
    Full(Tuple),
}

impl OldTuple {
    /// The tuple, whichever kind it is.
    pub const fn tuple(&self) -> &Tuple {
        match self {
            OldTuple::Key(tuple) | OldTuple::Full(tuple) => tuple,
        }
    }

    /// The tuple, by value.
    pub fn into_tuple(self) -> Tuple {
        match self {
            OldTuple::Key(tuple) | OldTuple::Full(tuple) => tuple,
        }
    }
}

/// Truncated relations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// `TRUNCATE .. CASCADE` (option bit 1).
    pub cascade: bool,
    /// `TRUNCATE .. RESTART IDENTITY` (option bit 2).
    pub restart_identity: bool,
    /// The truncated relations.
    pub relation_ids: Vec<u32>,
}

/// A message written with `pg_logical_emit_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Whether the message is part of a transaction (flag bit 1); if not, it
    /// is delivered immediately, outside any Begin/Commit.
    pub transactional: bool,
    /// LSN of the message.
    pub lsn: Lsn,
    /// The prefix the message was emitted with.
    pub prefix: String,
    /// The content, a slice of the input.
    pub content: Bytes,
}

/// The column values of one row, in the relation's column order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tuple(pub Vec<Datum>);

/// One column value of a [`Tuple`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datum {
    /// `n`: SQL NULL.
    Null,
    /// `u`: a TOASTed value that did not change and was not sent.
    UnchangedToast,
    /// `t`: the value in the type's text output format, a slice of the input.
    Text(Bytes),
    /// `b`: the value in the type's binary format, a slice of the input.
    Binary(Bytes),
}

/// A pgoutput message that could not be decoded.
///
/// Decode errors are definite: the same bytes will fail the same way, so
/// retrying does not help ([`DecodeError::is_retryable`] is `false`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DecodeError {
    lsn: Lsn,
    tag: Option<u8>,
    offset: usize,
    kind: DecodeErrorKind,
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
    /// (streaming of in-progress transactions, two-phase commit).
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
fn unsupported_feature(tag: u8) -> Option<(&'static str, &'static str, &'static str)> {
    const STREAMING: (&str, &str) = ("streaming of in-progress transactions", "streaming");
    const TWO_PHASE: (&str, &str) = ("two-phase commit decoding", "two_phase");
    let (message, (feature, option)) = match tag {
        b'S' => ("stream start", STREAMING),
        b'E' => ("stream stop", STREAMING),
        b'c' => ("stream commit", STREAMING),
        b'A' => ("stream abort", STREAMING),
        b'p' => ("stream prepare", STREAMING),
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
             start replication with proto_version '1' and without the '{option}' option"
        ),
        None => format!(
            "message {} belongs to a protocol feature that is not enabled; \
             start replication with proto_version '1'",
            ByteDisplay(tag)
        ),
    }
}

/// Decodes one pgoutput message.
///
/// `data` is the payload of an `XLogData` frame, starting with the message
/// tag; `lsn` is that frame's WAL start, used in errors. Column values and
/// message content in the result are slices of `data`.
///
/// ```
/// use bytes::Bytes;
/// use pgcdc_kafka::lsn::Lsn;
/// use pgcdc_kafka::source::pgoutput::{decode, Datum, LogicalMessage};
///
/// // INSERT into relation 16384 of one text value "42".
/// let data = Bytes::from_static(b"I\0\0\x40\0N\0\x01t\0\0\0\x0242");
/// let LogicalMessage::Insert(insert) = decode(&data, Lsn::new(0x16B3748)).expect("valid insert")
/// else {
///     panic!("not an insert");
/// };
/// assert_eq!(insert.relation_id, 16384);
/// assert_eq!(insert.new.0, [Datum::Text(Bytes::from_static(b"42"))]);
/// ```
pub fn decode(data: &Bytes, lsn: Lsn) -> Result<LogicalMessage, DecodeError> {
    let mut r = Reader {
        data,
        pos: 0,
        lsn,
        tag: None,
    };
    let tag = r.u8("message tag")?;
    r.tag = Some(tag);
    let message = match tag {
        b'B' => LogicalMessage::Begin(Begin {
            final_lsn: r.lsn("final LSN")?,
            commit_time_micros: r.i64("commit timestamp")?,
            xid: r.u32("transaction id")?,
        }),
        b'C' => LogicalMessage::Commit(Commit {
            flags: r.u8("commit flags")?,
            commit_lsn: r.lsn("commit LSN")?,
            end_lsn: r.lsn("end LSN")?,
            commit_time_micros: r.i64("commit timestamp")?,
        }),
        b'O' => LogicalMessage::Origin(Origin {
            commit_lsn: r.lsn("origin commit LSN")?,
            name: r.cstring("origin name")?,
        }),
        b'R' => LogicalMessage::Relation(relation(&mut r)?),
        b'Y' => LogicalMessage::Type(TypeInfo {
            oid: r.u32("type OID")?,
            namespace: namespace(r.cstring("type namespace")?),
            name: r.cstring("type name")?,
        }),
        b'I' => {
            let relation_id = r.u32("relation id")?;
            r.expect(b'N', "new tuple marker 'N'")?;
            LogicalMessage::Insert(Insert {
                relation_id,
                new: tuple(&mut r)?,
            })
        }
        b'U' => LogicalMessage::Update(update(&mut r)?),
        b'D' => {
            const MARKER: &str = "old tuple marker 'K' or 'O'";
            let relation_id = r.u32("relation id")?;
            let at = r.pos;
            let marker = r.u8(MARKER)?;
            let old = old_tuple(&mut r, marker)?.ok_or_else(|| r.invalid(at, MARKER, marker))?;
            LogicalMessage::Delete(Delete { relation_id, old })
        }
        b'T' => LogicalMessage::Truncate(truncate(&mut r)?),
        b'M' => LogicalMessage::Message(Message {
            transactional: r.u8("message flags")? & 1 != 0,
            lsn: r.lsn("message LSN")?,
            prefix: r.cstring("message prefix")?,
            content: {
                let len = r.length("message content length")?;
                r.bytes(len, "message content")?
            },
        }),
        _ if unsupported_feature(tag).is_some() => {
            return Err(r.error_at(0, DecodeErrorKind::UnsupportedMessage(tag)))
        }
        _ => return Err(r.error_at(0, DecodeErrorKind::UnknownTag(tag))),
    };
    r.finish()?;
    Ok(message)
}

/// Maps pgoutput's empty namespace, which stands for `pg_catalog`.
fn namespace(wire: String) -> String {
    if wire.is_empty() {
        "pg_catalog".to_owned()
    } else {
        wire
    }
}

/// Smallest encoding of a relation column: flags, empty name, OID, modifier.
const MIN_COLUMN_LEN: usize = 1 + 1 + 4 + 4;

fn relation(r: &mut Reader<'_>) -> Result<Relation, DecodeError> {
    let id = r.u32("relation id")?;
    let namespace = namespace(r.cstring("relation namespace")?);
    let name = r.cstring("relation name")?;
    let at = r.pos;
    let identity = r.u8("replica identity")?;
    let replica_identity = ReplicaIdentity::from_byte(identity)
        .ok_or_else(|| r.invalid(at, "replica identity 'd', 'n', 'f' or 'i'", identity))?;
    let count = r.count("relation column count")?;
    let mut columns = Vec::with_capacity(count.min(r.remaining().len() / MIN_COLUMN_LEN));
    for _ in 0..count {
        columns.push(Column {
            is_key: r.u8("column flags")? & 1 != 0,
            name: r.cstring("column name")?,
            type_oid: r.u32("column type OID")?,
            type_modifier: r.i32("column type modifier")?,
        });
    }
    Ok(Relation {
        id,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn update(r: &mut Reader<'_>) -> Result<Update, DecodeError> {
    const MARKER: &str = "tuple marker 'K', 'O' or 'N'";
    let relation_id = r.u32("relation id")?;
    let at = r.pos;
    let marker = r.u8(MARKER)?;
    let old = old_tuple(r, marker)?;
    if old.is_some() {
        r.expect(b'N', "new tuple marker 'N'")?;
    } else if marker != b'N' {
        return Err(r.invalid(at, MARKER, marker));
    }
    Ok(Update {
        relation_id,
        old,
        new: tuple(r)?,
    })
}

/// Decodes the tuple after a `K` or `O` marker; `None` for any other marker,
/// which the caller accepts or rejects.
fn old_tuple(r: &mut Reader<'_>, marker: u8) -> Result<Option<OldTuple>, DecodeError> {
    match marker {
        b'K' => Ok(Some(OldTuple::Key(tuple(r)?))),
        b'O' => Ok(Some(OldTuple::Full(tuple(r)?))),
        _ => Ok(None),
    }
}

fn tuple(r: &mut Reader<'_>) -> Result<Tuple, DecodeError> {
    const KIND: &str = "tuple data kind 'n', 'u', 't' or 'b'";
    let count = r.count("tuple column count")?;
    // Every column takes at least its kind byte.
    let mut datums = Vec::with_capacity(count.min(r.remaining().len()));
    for _ in 0..count {
        let at = r.pos;
        let datum = match r.u8(KIND)? {
            b'n' => Datum::Null,
            b'u' => Datum::UnchangedToast,
            b't' => {
                let len = r.length("column value length")?;
                Datum::Text(r.bytes(len, "column value")?)
            }
            b'b' => {
                let len = r.length("column value length")?;
                Datum::Binary(r.bytes(len, "column value")?)
            }
            other => return Err(r.invalid(at, KIND, other)),
        };
        datums.push(datum);
    }
    Ok(Tuple(datums))
}

fn truncate(r: &mut Reader<'_>) -> Result<Truncate, DecodeError> {
    let count = r.length("truncated relation count")?;
    let options = r.u8("truncate options")?;
    let mut relation_ids = Vec::with_capacity(count.min(r.remaining().len() / 4));
    for _ in 0..count {
        relation_ids.push(r.u32("truncated relation id")?);
    }
    Ok(Truncate {
        cascade: options & 1 != 0,
        restart_identity: options & 2 != 0,
        relation_ids,
    })
}

/// A cursor over one message. Invariant: `pos <= data.len()`.
struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
    lsn: Lsn,
    tag: Option<u8>,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> &'a [u8] {
        let data: &'a [u8] = self.data;
        data.get(self.pos..).unwrap_or_default()
    }

    fn error_at(&self, offset: usize, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            lsn: self.lsn,
            tag: self.tag,
            offset,
            kind,
        }
    }

    fn invalid(&self, offset: usize, what: &'static str, found: u8) -> DecodeError {
        self.error_at(offset, DecodeErrorKind::InvalidValue { what, found })
    }

    fn truncated(&self, needed: usize, what: &'static str) -> DecodeError {
        let remaining = self.remaining().len();
        self.error_at(
            self.pos,
            DecodeErrorKind::Truncated {
                needed,
                remaining,
                what,
            },
        )
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        match self.remaining().first_chunk::<N>() {
            Some(chunk) => {
                // In bounds: the chunk exists, so N bytes remain.
                self.pos = self.pos.saturating_add(N);
                Ok(*chunk)
            }
            None => Err(self.truncated(N, what)),
        }
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let [byte] = self.array(what)?;
        Ok(byte)
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), DecodeError> {
        let at = self.pos;
        match self.u8(what)? {
            found if found == byte => Ok(()),
            found => Err(self.invalid(at, what, found)),
        }
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.array(what).map(i32::from_be_bytes)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.array(what).map(u32::from_be_bytes)
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        self.array(what).map(i64::from_be_bytes)
    }

    fn lsn(&mut self, what: &'static str) -> Result<Lsn, DecodeError> {
        self.array(what)
            .map(|raw| Lsn::new(u64::from_be_bytes(raw)))
    }

    /// An i16 count, rejected when negative.
    fn count(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let raw = self.array(what).map(i16::from_be_bytes)?;
        usize::try_from(raw).map_err(|_| {
            self.error_at(
                at,
                DecodeErrorKind::NegativeLength {
                    what,
                    found: raw.into(),
                },
            )
        })
    }

    /// An i32 length or count, rejected when negative.
    fn length(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let raw = self.i32(what)?;
        usize::try_from(raw)
            .map_err(|_| self.error_at(at, DecodeErrorKind::NegativeLength { what, found: raw }))
    }

    /// The next `len` bytes as a zero-copy slice of the input.
    fn bytes(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if len > self.remaining().len() {
            return Err(self.truncated(len, what));
        }
        let start = self.pos;
        self.pos = start.saturating_add(len);
        Ok(self.data.slice(start..self.pos))
    }

    fn cstring(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let cstr = CStr::from_bytes_until_nul(self.remaining())
            .map_err(|_| self.error_at(self.pos, DecodeErrorKind::UnterminatedString { what }))?;
        let text = cstr
            .to_str()
            .map_err(|_| self.error_at(self.pos, DecodeErrorKind::InvalidUtf8 { what }))?
            .to_owned();
        self.pos = self.pos.saturating_add(cstr.to_bytes_with_nul().len());
        Ok(text)
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining().len() {
            0 => Ok(()),
            extra => Err(self.error_at(self.pos, DecodeErrorKind::TrailingBytes(extra))),
        }
    }
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
    use bytes::BufMut;
    use proptest::prelude::*;

    use super::*;

    const LSN: Lsn = Lsn::new(0x16B_3748);

    fn concat(parts: &[&[u8]]) -> Bytes {
        Bytes::from(parts.concat())
    }

    fn hex(text: &str) -> Bytes {
        assert!(text.len().is_multiple_of(2), "odd hex length");
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
            .collect::<Vec<u8>>()
            .into()
    }

    fn ok(data: &Bytes) -> LogicalMessage {
        decode(data, LSN).unwrap_or_else(|e| panic!("decoding {data:?}: {e}"))
    }

    fn err(data: &[u8]) -> DecodeError {
        match decode(&Bytes::copy_from_slice(data), LSN) {
            Ok(message) => panic!("decoded {data:?} as {message:?}"),
            Err(e) => e,
        }
    }

    fn text(value: &'static [u8]) -> Datum {
        Datum::Text(Bytes::from_static(value))
    }

    /// Encodes a message the way pgoutput (protocol version 1) does.
    fn encode(message: &LogicalMessage) -> Vec<u8> {
        fn cstring(out: &mut Vec<u8>, s: &str) {
            out.put_slice(s.as_bytes());
            out.put_u8(0);
        }
        fn namespace(out: &mut Vec<u8>, s: &str) {
            cstring(out, if s == "pg_catalog" { "" } else { s });
        }
        fn tuple(out: &mut Vec<u8>, tuple: &Tuple) {
            out.put_i16(tuple.0.len().try_into().expect("column count fits i16"));
            for datum in &tuple.0 {
                let (kind, value) = match datum {
                    Datum::Null => (b'n', None),
                    Datum::UnchangedToast => (b'u', None),
                    Datum::Text(value) => (b't', Some(value)),
                    Datum::Binary(value) => (b'b', Some(value)),
                };
                out.put_u8(kind);
                if let Some(value) = value {
                    out.put_i32(value.len().try_into().expect("value length fits i32"));
                    out.put_slice(value);
                }
            }
        }
        fn old_tuple(out: &mut Vec<u8>, old: &OldTuple) {
            match old {
                OldTuple::Key(_) => out.put_u8(b'K'),
                OldTuple::Full(_) => out.put_u8(b'O'),
            }
            tuple(out, old.tuple());
        }

        let mut out = vec![message.tag()];
        match message {
            LogicalMessage::Begin(b) => {
                out.put_u64(b.final_lsn.as_u64());
                out.put_i64(b.commit_time_micros);
                out.put_u32(b.xid);
            }
            LogicalMessage::Commit(c) => {
                out.put_u8(c.flags);
                out.put_u64(c.commit_lsn.as_u64());
                out.put_u64(c.end_lsn.as_u64());
                out.put_i64(c.commit_time_micros);
            }
            LogicalMessage::Origin(o) => {
                out.put_u64(o.commit_lsn.as_u64());
                cstring(&mut out, &o.name);
            }
            LogicalMessage::Relation(r) => {
                out.put_u32(r.id);
                namespace(&mut out, &r.namespace);
                cstring(&mut out, &r.name);
                out.put_u8(r.replica_identity.as_byte());
                out.put_i16(r.columns.len().try_into().expect("column count fits i16"));
                for c in &r.columns {
                    out.put_u8(u8::from(c.is_key));
                    cstring(&mut out, &c.name);
                    out.put_u32(c.type_oid);
                    out.put_i32(c.type_modifier);
                }
            }
            LogicalMessage::Type(t) => {
                out.put_u32(t.oid);
                namespace(&mut out, &t.namespace);
                cstring(&mut out, &t.name);
            }
            LogicalMessage::Insert(i) => {
                out.put_u32(i.relation_id);
                out.put_u8(b'N');
                tuple(&mut out, &i.new);
            }
            LogicalMessage::Update(u) => {
                out.put_u32(u.relation_id);
                if let Some(old) = &u.old {
                    old_tuple(&mut out, old);
                }
                out.put_u8(b'N');
                tuple(&mut out, &u.new);
            }
            LogicalMessage::Delete(d) => {
                out.put_u32(d.relation_id);
                old_tuple(&mut out, &d.old);
            }
            LogicalMessage::Truncate(t) => {
                out.put_i32(t.relation_ids.len().try_into().expect("count fits i32"));
                out.put_u8(u8::from(t.cascade) | (u8::from(t.restart_identity) << 1));
                for id in &t.relation_ids {
                    out.put_u32(*id);
                }
            }
            LogicalMessage::Message(m) => {
                out.put_u8(u8::from(m.transactional));
                out.put_u64(m.lsn.as_u64());
                cstring(&mut out, &m.prefix);
                out.put_i32(m.content.len().try_into().expect("length fits i32"));
                out.put_slice(&m.content);
            }
        }
        out
    }

    /// Every strict prefix of a valid message must fail with an
    /// end-of-input error, and one extra byte with `TrailingBytes`.
    fn assert_exact_framing(data: &[u8]) {
        for len in 0..data.len() {
            let e = err(&data[..len]);
            assert!(
                matches!(
                    e.kind(),
                    DecodeErrorKind::Truncated { .. } | DecodeErrorKind::UnterminatedString { .. }
                ),
                "prefix of {len} bytes of {data:?}: {e}"
            );
            assert_eq!(e.lsn(), LSN);
        }
        let mut longer = data.to_vec();
        longer.push(0);
        let e = err(&longer);
        assert_eq!(e.kind(), &DecodeErrorKind::TrailingBytes(1), "{e}");
        assert_eq!(e.offset(), data.len());
    }

    // Captured from PostgreSQL 15 with pg_logical_slot_peek_binary_changes
    // (pgoutput, proto_version '1'; the binary ones with binary 'true').
    const CAPTURED_BEGIN: &str = "42000000000152e798000304b9aa9ebea9000002d9";
    const CAPTURED_COMMIT: &str = "4300000000000152e798000000000152e7c8000304b9aa9ebea9";
    const CAPTURED_TYPE: &str = "59000040017075626c6963006d6f6f6400";
    const CAPTURED_RELATION: &str = "52000040057075626c69630074006400040169640000000017ffffffff\
        006e616d650000000019ffffffff006269670000000019ffffffff006d0000004001ffffffff";
    const CAPTURED_RELATION_FULL: &str =
        "520000400c7075626c69630066006600020169640000000017ffffffff017600000006a4000a0006";
    const CAPTURED_INSERT: &str = "49000040054e00047400000001316e74000000017874000000056861707079";
    const CAPTURED_INSERT_BINARY: &str =
        "49000040054e00046200000004000000016e62000000017862000000056861707079";
    const CAPTURED_UPDATE: &str =
        "55000040054e000474000000013174000000026e3174000000017874000000056861707079";
    const CAPTURED_UPDATE_KEY: &str =
        "55000040054b00047400000001316e6e6e4e000474000000013274000000\
        026e3174000000017874000000056861707079";
    const CAPTURED_UPDATE_TOAST: &str = "55000040054e00047400000001337400000006746f61737432756e";
    const CAPTURED_UPDATE_FULL: &str = "550000400c4f00027400000001317400000004312e35304e0002740000\
        0001317400000004322e3235";
    const CAPTURED_DELETE_KEY: &str = "44000040054b00047400000001326e6e6e";
    const CAPTURED_DELETE_FULL: &str = "440000400c4f00027400000001317400000004322e3235";
    const CAPTURED_TRUNCATE: &str = "5400000002030000400c00004005";
    const CAPTURED_MESSAGE: &str = "4d010000000001531800706678000000000568656c6c6f";
    const CAPTURED_MESSAGE_NONTX: &str = "4d0000000000015318706e6f6e7478000000000200ff";
    const CAPTURED_ORIGIN: &str = "4f0000000000abcdef6f72696700";
    // proto_version '2', streaming 'on': stream start, stream stop, stream commit.
    const CAPTURED_STREAM: [&str; 3] = [
        "53000002e601",
        "45",
        "63000002e6000000000001560c080000000001560c38000304b9abdda857",
    ];

    const ALL_CAPTURED: [&str; 17] = [
        CAPTURED_BEGIN,
        CAPTURED_COMMIT,
        CAPTURED_TYPE,
        CAPTURED_RELATION,
        CAPTURED_RELATION_FULL,
        CAPTURED_INSERT,
        CAPTURED_INSERT_BINARY,
        CAPTURED_UPDATE,
        CAPTURED_UPDATE_KEY,
        CAPTURED_UPDATE_TOAST,
        CAPTURED_UPDATE_FULL,
        CAPTURED_DELETE_KEY,
        CAPTURED_DELETE_FULL,
        CAPTURED_TRUNCATE,
        CAPTURED_MESSAGE,
        CAPTURED_MESSAGE_NONTX,
        CAPTURED_ORIGIN,
    ];

    #[test]
    fn decodes_captured_begin_and_commit() {
        assert_eq!(
            ok(&hex(CAPTURED_BEGIN)),
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn::new(0x152_E798),
                commit_time_micros: 849_620_408_123_049,
                xid: 729,
            })
        );
        assert_eq!(
            ok(&hex(CAPTURED_COMMIT)),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn::new(0x152_E798),
                end_lsn: Lsn::new(0x152_E7C8),
                commit_time_micros: 849_620_408_123_049,
            })
        );
    }

    #[test]
    fn decodes_captured_relation_and_type() {
        let column = |is_key, name: &str, type_oid, type_modifier| Column {
            is_key,
            name: name.to_owned(),
            type_oid,
            type_modifier,
        };
        assert_eq!(
            ok(&hex(CAPTURED_RELATION)),
            LogicalMessage::Relation(Relation {
                id: 16389,
                namespace: "public".to_owned(),
                name: "t".to_owned(),
                replica_identity: ReplicaIdentity::Default,
                columns: vec![
                    column(true, "id", 23, -1),
                    column(false, "name", 25, -1),
                    column(false, "big", 25, -1),
                    column(false, "m", 16385, -1),
                ],
            })
        );
        let LogicalMessage::Relation(full) = ok(&hex(CAPTURED_RELATION_FULL)) else {
            panic!("not a relation");
        };
        assert_eq!(full.replica_identity, ReplicaIdentity::Full);
        // numeric(10,2): ((10 << 16) | 2) + VARHDRSZ.
        assert_eq!(full.columns[1], column(true, "v", 1700, (10 << 16 | 2) + 4));
        assert_eq!(
            ok(&hex(CAPTURED_TYPE)),
            LogicalMessage::Type(TypeInfo {
                oid: 16385,
                namespace: "public".to_owned(),
                name: "mood".to_owned(),
            })
        );
    }

    #[test]
    fn decodes_captured_row_changes() {
        assert_eq!(
            ok(&hex(CAPTURED_INSERT)),
            LogicalMessage::Insert(Insert {
                relation_id: 16389,
                new: Tuple(vec![text(b"1"), Datum::Null, text(b"x"), text(b"happy")]),
            })
        );
        let LogicalMessage::Insert(binary) = ok(&hex(CAPTURED_INSERT_BINARY)) else {
            panic!("not an insert");
        };
        assert_eq!(
            binary.new.0[0],
            Datum::Binary(Bytes::from_static(&[0, 0, 0, 1]))
        );
        assert_eq!(binary.new.0[1], Datum::Null);

        let new_row = Tuple(vec![text(b"2"), text(b"n1"), text(b"x"), text(b"happy")]);
        assert_eq!(
            ok(&hex(CAPTURED_UPDATE_KEY)),
            LogicalMessage::Update(Update {
                relation_id: 16389,
                old: Some(OldTuple::Key(Tuple(vec![
                    text(b"1"),
                    Datum::Null,
                    Datum::Null,
                    Datum::Null,
                ]))),
                new: new_row,
            })
        );
        let LogicalMessage::Update(plain) = ok(&hex(CAPTURED_UPDATE)) else {
            panic!("not an update");
        };
        assert_eq!(plain.old, None);
        assert_eq!(
            ok(&hex(CAPTURED_UPDATE_TOAST)),
            LogicalMessage::Update(Update {
                relation_id: 16389,
                old: None,
                new: Tuple(vec![
                    text(b"3"),
                    text(b"toast2"),
                    Datum::UnchangedToast,
                    Datum::Null,
                ]),
            })
        );
        let LogicalMessage::Update(full) = ok(&hex(CAPTURED_UPDATE_FULL)) else {
            panic!("not an update");
        };
        assert_eq!(
            full.old,
            Some(OldTuple::Full(Tuple(vec![text(b"1"), text(b"1.50")])))
        );
        assert_eq!(full.new, Tuple(vec![text(b"1"), text(b"2.25")]));

        assert_eq!(
            ok(&hex(CAPTURED_DELETE_KEY)),
            LogicalMessage::Delete(Delete {
                relation_id: 16389,
                old: OldTuple::Key(Tuple(vec![
                    text(b"2"),
                    Datum::Null,
                    Datum::Null,
                    Datum::Null,
                ])),
            })
        );
        let LogicalMessage::Delete(full) = ok(&hex(CAPTURED_DELETE_FULL)) else {
            panic!("not a delete");
        };
        assert!(matches!(full.old, OldTuple::Full(_)));
    }

    #[test]
    fn decodes_captured_truncate_message_and_origin() {
        assert_eq!(
            ok(&hex(CAPTURED_TRUNCATE)),
            LogicalMessage::Truncate(Truncate {
                cascade: true,
                restart_identity: true,
                relation_ids: vec![16396, 16389],
            })
        );
        assert_eq!(
            ok(&hex(CAPTURED_MESSAGE)),
            LogicalMessage::Message(Message {
                transactional: true,
                lsn: Lsn::new(0x153_1800),
                prefix: "pfx".to_owned(),
                content: Bytes::from_static(b"hello"),
            })
        );
        let LogicalMessage::Message(nontx) = ok(&hex(CAPTURED_MESSAGE_NONTX)) else {
            panic!("not a message");
        };
        assert!(!nontx.transactional);
        assert_eq!(nontx.content, Bytes::from_static(&[0x00, 0xff]));
        assert_eq!(
            ok(&hex(CAPTURED_ORIGIN)),
            LogicalMessage::Origin(Origin {
                commit_lsn: Lsn::new(0xAB_CDEF),
                name: "orig".to_owned(),
            })
        );
    }

    #[test]
    fn captured_messages_reencode_to_the_same_bytes() {
        for captured in ALL_CAPTURED {
            let data = hex(captured);
            assert_eq!(Bytes::from(encode(&ok(&data))), data, "{captured}");
        }
    }

    #[test]
    fn captured_messages_are_exactly_framed() {
        for captured in ALL_CAPTURED {
            assert_exact_framing(&hex(captured));
        }
    }

    #[test]
    fn values_are_slices_of_the_input() {
        let data = hex(CAPTURED_INSERT);
        let LogicalMessage::Insert(insert) = ok(&data) else {
            panic!("not an insert");
        };
        let Datum::Text(value) = &insert.new.0[3] else {
            panic!("not text");
        };
        let range = data.as_ptr_range();
        assert!(range.contains(&value.as_ptr()), "value was copied");
    }

    #[test]
    fn decodes_hand_built_messages_of_every_kind() {
        let rel: &[u8] = &16384u32.to_be_bytes();
        let cases: Vec<(Bytes, LogicalMessage)> = vec![
            (
                concat(&[
                    b"B",
                    &7u64.to_be_bytes(),
                    &(-1i64).to_be_bytes(),
                    &u32::MAX.to_be_bytes(),
                ]),
                LogicalMessage::Begin(Begin {
                    final_lsn: Lsn::new(7),
                    commit_time_micros: -1,
                    xid: u32::MAX,
                }),
            ),
            (
                concat(&[
                    b"C\x00",
                    &1u64.to_be_bytes(),
                    &2u64.to_be_bytes(),
                    &3i64.to_be_bytes(),
                ]),
                LogicalMessage::Commit(Commit {
                    flags: 0,
                    commit_lsn: Lsn::new(1),
                    end_lsn: Lsn::new(2),
                    commit_time_micros: 3,
                }),
            ),
            (
                concat(&[b"O", &9u64.to_be_bytes(), b"\0"]),
                LogicalMessage::Origin(Origin {
                    commit_lsn: Lsn::new(9),
                    name: String::new(),
                }),
            ),
            (
                concat(&[b"R", rel, b"\0pg_class\0n\x00\x00"]),
                LogicalMessage::Relation(Relation {
                    id: 16384,
                    namespace: "pg_catalog".to_owned(),
                    name: "pg_class".to_owned(),
                    replica_identity: ReplicaIdentity::Nothing,
                    columns: vec![],
                }),
            ),
            (
                concat(&[
                    b"R",
                    rel,
                    b"s\0t\0i\x00\x02",
                    b"\x03k\0",
                    &23u32.to_be_bytes(),
                    &(-1i32).to_be_bytes(),
                    b"\x00v\0",
                    &1043u32.to_be_bytes(),
                    &14i32.to_be_bytes(),
                ]),
                LogicalMessage::Relation(Relation {
                    id: 16384,
                    namespace: "s".to_owned(),
                    name: "t".to_owned(),
                    replica_identity: ReplicaIdentity::Index,
                    columns: vec![
                        Column {
                            is_key: true,
                            name: "k".to_owned(),
                            type_oid: 23,
                            type_modifier: -1,
                        },
                        Column {
                            is_key: false,
                            name: "v".to_owned(),
                            type_oid: 1043,
                            type_modifier: 14,
                        },
                    ],
                }),
            ),
            (
                concat(&[b"Y", &600u32.to_be_bytes(), b"\0point\0"]),
                LogicalMessage::Type(TypeInfo {
                    oid: 600,
                    namespace: "pg_catalog".to_owned(),
                    name: "point".to_owned(),
                }),
            ),
            (
                concat(&[
                    b"I",
                    rel,
                    b"N\x00\x04n",
                    b"u",
                    b"t\0\0\0\0",
                    b"b\0\0\0\x02\xde\xad",
                ]),
                LogicalMessage::Insert(Insert {
                    relation_id: 16384,
                    new: Tuple(vec![
                        Datum::Null,
                        Datum::UnchangedToast,
                        Datum::Text(Bytes::new()),
                        Datum::Binary(Bytes::from_static(&[0xde, 0xad])),
                    ]),
                }),
            ),
            (
                concat(&[b"U", rel, b"N\x00\x00"]),
                LogicalMessage::Update(Update {
                    relation_id: 16384,
                    old: None,
                    new: Tuple(vec![]),
                }),
            ),
            (
                concat(&[b"U", rel, b"O\x00\x01n", b"N\x00\x01t\0\0\0\x01a"]),
                LogicalMessage::Update(Update {
                    relation_id: 16384,
                    old: Some(OldTuple::Full(Tuple(vec![Datum::Null]))),
                    new: Tuple(vec![text(b"a")]),
                }),
            ),
            (
                concat(&[b"U", rel, b"K\x00\x01t\0\0\0\x01k", b"N\x00\x01u"]),
                LogicalMessage::Update(Update {
                    relation_id: 16384,
                    old: Some(OldTuple::Key(Tuple(vec![text(b"k")]))),
                    new: Tuple(vec![Datum::UnchangedToast]),
                }),
            ),
            (
                concat(&[b"D", rel, b"K\x00\x01b\0\0\0\x01\x07"]),
                LogicalMessage::Delete(Delete {
                    relation_id: 16384,
                    old: OldTuple::Key(Tuple(vec![Datum::Binary(Bytes::from_static(&[7]))])),
                }),
            ),
            (
                concat(&[b"T\0\0\0\0\x00"]),
                LogicalMessage::Truncate(Truncate {
                    cascade: false,
                    restart_identity: false,
                    relation_ids: vec![],
                }),
            ),
            (
                concat(&[b"T\0\0\0\x01\x02", rel]),
                LogicalMessage::Truncate(Truncate {
                    cascade: false,
                    restart_identity: true,
                    relation_ids: vec![16384],
                }),
            ),
            (
                concat(&[b"M\x00", &5u64.to_be_bytes(), b"\0\0\0\0\0"]),
                LogicalMessage::Message(Message {
                    transactional: false,
                    lsn: Lsn::new(5),
                    prefix: String::new(),
                    content: Bytes::new(),
                }),
            ),
        ];
        for (data, expected) in cases {
            assert_eq!(ok(&data), expected, "{data:?}");
            assert_exact_framing(&data);
        }
    }

    #[test]
    fn bad_tuple_kind_names_the_field_and_offset() {
        let e = err(&concat(&[b"I", &16384u32.to_be_bytes(), b"N\x00\x05nunnz"]));
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::InvalidValue {
                what: "tuple data kind 'n', 'u', 't' or 'b'",
                found: b'z',
            }
        );
        assert_eq!(e.tag(), Some(b'I'));
        assert_eq!(e.offset(), 12);
        assert_eq!(
            e.to_string(),
            "malformed pgoutput message at LSN 0/16B3748 (tag 'I'): expected tuple data kind \
             'n', 'u', 't' or 'b', found 0x7a at offset 12"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn rejects_unknown_and_empty_messages() {
        let e = err(b"Z");
        assert_eq!(e.kind(), &DecodeErrorKind::UnknownTag(b'Z'));
        assert_eq!(e.offset(), 0);
        assert_eq!(err(b"\x00").kind(), &DecodeErrorKind::UnknownTag(0));
        assert!(err(b"\x00").to_string().contains("(tag 0x00)"));

        let e = err(b"");
        assert_eq!(e.tag(), None);
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::Truncated {
                needed: 1,
                remaining: 0,
                what: "message tag",
            }
        );
        assert!(e.to_string().contains("(empty message)"), "{e}");
    }

    #[test]
    fn rejects_streaming_and_two_phase_messages() {
        for captured in CAPTURED_STREAM {
            let data = hex(captured);
            let e = err(&data);
            assert_eq!(e.kind(), &DecodeErrorKind::UnsupportedMessage(data[0]));
        }
        let e = err(&hex(CAPTURED_STREAM[0]));
        assert_eq!(
            e.to_string(),
            "unsupported pgoutput message at LSN 0/16B3748 (tag 'S'): received a stream start \
             message but streaming of in-progress transactions is not enabled; start \
             replication with proto_version '1' and without the 'streaming' option"
        );
        for tag in [b'A', b'p', b'b', b'P', b'K', b'r'] {
            assert_eq!(
                err(&[tag]).kind(),
                &DecodeErrorKind::UnsupportedMessage(tag)
            );
        }
        assert!(err(b"K").to_string().contains("two-phase commit"));
    }

    #[test]
    fn rejects_negative_lengths_and_counts() {
        let rel: &[u8] = &16384u32.to_be_bytes();
        let negative_value = concat(&[b"I", rel, b"N\x00\x01t\xff\xff\xff\xff"]);
        let e = err(&negative_value);
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::NegativeLength {
                what: "column value length",
                found: -1,
            }
        );
        assert_eq!(e.offset(), 9);

        let negative_columns = concat(&[b"I", rel, b"N\x80\x00"]);
        assert_eq!(
            err(&negative_columns).kind(),
            &DecodeErrorKind::NegativeLength {
                what: "tuple column count",
                found: i32::from(i16::MIN),
            }
        );
        let negative_relation_columns = concat(&[b"R", rel, b"\0t\0d\xff\xff"]);
        assert!(matches!(
            err(&negative_relation_columns).kind(),
            DecodeErrorKind::NegativeLength {
                what: "relation column count",
                found: -1
            }
        ));
        assert!(matches!(
            err(b"T\x80\0\0\0\x00").kind(),
            DecodeErrorKind::NegativeLength {
                found: i32::MIN,
                ..
            }
        ));
        let negative_content = concat(&[b"M\x01", &[0; 8], b"p\0\xff\xff\xff\xfe"]);
        assert!(matches!(
            err(&negative_content).kind(),
            DecodeErrorKind::NegativeLength {
                what: "message content length",
                found: -2
            }
        ));
    }

    #[test]
    fn rejects_huge_lengths_without_allocating() {
        let rel: &[u8] = &16384u32.to_be_bytes();
        let e = err(&concat(&[b"I", rel, b"N\x00\x01t\x7f\xff\xff\xff"]));
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::Truncated {
                needed: i32::MAX as usize,
                remaining: 0,
                what: "column value",
            }
        );
        assert!(matches!(
            err(b"T\x7f\xff\xff\xff\x00").kind(),
            DecodeErrorKind::Truncated {
                needed: 4,
                remaining: 0,
                ..
            }
        ));
        assert!(matches!(
            err(&concat(&[b"I", rel, b"N\x7f\xff"])).kind(),
            DecodeErrorKind::Truncated {
                needed: 1,
                remaining: 0,
                ..
            }
        ));
    }

    #[test]
    fn rejects_bad_markers_and_identities() {
        let rel: &[u8] = &16384u32.to_be_bytes();
        assert!(matches!(
            err(&concat(&[b"I", rel, b"K\x00\x00"])).kind(),
            DecodeErrorKind::InvalidValue {
                what: "new tuple marker 'N'",
                found: b'K'
            }
        ));
        assert!(matches!(
            err(&concat(&[b"U", rel, b"X\x00\x00"])).kind(),
            DecodeErrorKind::InvalidValue { found: b'X', .. }
        ));
        // An old tuple must be followed by 'N', not by a second old tuple.
        assert!(matches!(
            err(&concat(&[b"U", rel, b"K\x00\x00K\x00\x00"])).kind(),
            DecodeErrorKind::InvalidValue {
                what: "new tuple marker 'N'",
                found: b'K'
            }
        ));
        let e = err(&concat(&[b"D", rel, b"N\x00\x00"]));
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::InvalidValue {
                what: "old tuple marker 'K' or 'O'",
                found: b'N',
            }
        );
        assert_eq!(e.offset(), 5);
        assert!(matches!(
            err(&concat(&[b"R", rel, b"s\0t\0x\x00\x00"])).kind(),
            DecodeErrorKind::InvalidValue { found: b'x', .. }
        ));
    }

    #[test]
    fn rejects_invalid_utf8_names() {
        let e = err(&concat(&[b"Y", &1u32.to_be_bytes(), b"ok\0\xff\xfe\0"]));
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::InvalidUtf8 { what: "type name" }
        );
        assert_eq!(e.offset(), 8);
    }

    #[test]
    fn rejects_trailing_bytes() {
        let mut data = hex(CAPTURED_BEGIN).to_vec();
        data.extend_from_slice(b"xyz");
        let e = err(&data);
        assert_eq!(e.kind(), &DecodeErrorKind::TrailingBytes(3));
        assert_eq!(e.offset(), 21);
        assert!(e.to_string().contains("3 unexpected bytes"), "{e}");
    }

    #[test]
    fn converts_commit_times_to_unix_micros() {
        assert_eq!(pg_epoch_micros_to_unix_micros(0), 946_684_800_000_000);
        // 2024-01-01T00:00:00Z is 1_704_067_200 s after the Unix epoch.
        let begin = Begin {
            final_lsn: Lsn::ZERO,
            commit_time_micros: (1_704_067_200 - 946_684_800) * 1_000_000 + 1,
            xid: 1,
        };
        assert_eq!(begin.commit_time_unix_micros(), 1_704_067_200_000_001);
        let commit = Commit {
            flags: 0,
            commit_lsn: Lsn::ZERO,
            end_lsn: Lsn::ZERO,
            commit_time_micros: i64::MAX,
        };
        assert_eq!(commit.commit_time_unix_micros(), i64::MAX);
        assert_eq!(
            pg_epoch_micros_to_unix_micros(i64::MIN),
            i64::MIN + PG_EPOCH_UNIX_MICROS
        );
    }

    fn name() -> impl Strategy<Value = String> {
        "[^\\x00]{0,12}"
    }

    fn namespace_name() -> impl Strategy<Value = String> {
        prop_oneof![Just("pg_catalog".to_owned()), "[a-z_][^\\x00]{0,10}"]
    }

    fn lsn() -> impl Strategy<Value = Lsn> {
        any::<u64>().prop_map(Lsn::new)
    }

    fn value() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from)
    }

    fn tuple_strategy() -> impl Strategy<Value = Tuple> {
        let datum = prop_oneof![
            Just(Datum::Null),
            Just(Datum::UnchangedToast),
            value().prop_map(Datum::Text),
            value().prop_map(Datum::Binary),
        ];
        proptest::collection::vec(datum, 0..8).prop_map(Tuple)
    }

    fn old_tuple_strategy() -> impl Strategy<Value = OldTuple> {
        prop_oneof![
            tuple_strategy().prop_map(OldTuple::Key),
            tuple_strategy().prop_map(OldTuple::Full),
        ]
    }

    fn message_strategy() -> impl Strategy<Value = LogicalMessage> {
        let identity = prop_oneof![
            Just(ReplicaIdentity::Default),
            Just(ReplicaIdentity::Nothing),
            Just(ReplicaIdentity::Full),
            Just(ReplicaIdentity::Index),
        ];
        let column = (any::<bool>(), name(), any::<u32>(), any::<i32>()).prop_map(
            |(is_key, name, type_oid, type_modifier)| Column {
                is_key,
                name,
                type_oid,
                type_modifier,
            },
        );
        prop_oneof![
            (lsn(), any::<i64>(), any::<u32>()).prop_map(|(final_lsn, commit_time_micros, xid)| {
                LogicalMessage::Begin(Begin {
                    final_lsn,
                    commit_time_micros,
                    xid,
                })
            }),
            (any::<u8>(), lsn(), lsn(), any::<i64>()).prop_map(
                |(flags, commit_lsn, end_lsn, commit_time_micros)| {
                    LogicalMessage::Commit(Commit {
                        flags,
                        commit_lsn,
                        end_lsn,
                        commit_time_micros,
                    })
                }
            ),
            (lsn(), name()).prop_map(|(commit_lsn, name)| {
                LogicalMessage::Origin(Origin { commit_lsn, name })
            }),
            (
                any::<u32>(),
                namespace_name(),
                name(),
                identity,
                proptest::collection::vec(column, 0..6)
            )
                .prop_map(|(id, namespace, name, replica_identity, columns)| {
                    LogicalMessage::Relation(Relation {
                        id,
                        namespace,
                        name,
                        replica_identity,
                        columns,
                    })
                }),
            (any::<u32>(), namespace_name(), name()).prop_map(|(oid, namespace, name)| {
                LogicalMessage::Type(TypeInfo {
                    oid,
                    namespace,
                    name,
                })
            }),
            (any::<u32>(), tuple_strategy()).prop_map(|(relation_id, new)| {
                LogicalMessage::Insert(Insert { relation_id, new })
            }),
            (
                any::<u32>(),
                proptest::option::of(old_tuple_strategy()),
                tuple_strategy()
            )
                .prop_map(|(relation_id, old, new)| {
                    LogicalMessage::Update(Update {
                        relation_id,
                        old,
                        new,
                    })
                }),
            (any::<u32>(), old_tuple_strategy()).prop_map(|(relation_id, old)| {
                LogicalMessage::Delete(Delete { relation_id, old })
            }),
            (
                any::<bool>(),
                any::<bool>(),
                proptest::collection::vec(any::<u32>(), 0..6)
            )
                .prop_map(|(cascade, restart_identity, relation_ids)| {
                    LogicalMessage::Truncate(Truncate {
                        cascade,
                        restart_identity,
                        relation_ids,
                    })
                }),
            (any::<bool>(), lsn(), name(), value()).prop_map(
                |(transactional, lsn, prefix, content)| {
                    LogicalMessage::Message(Message {
                        transactional,
                        lsn,
                        prefix,
                        content,
                    })
                }
            ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode(&Bytes::from(data), LSN);
        }

        #[test]
        fn arbitrary_bodies_after_a_known_tag_never_panic(
            tag in proptest::sample::select(b"BCORYIUDTM".to_vec()),
            body in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut data = vec![tag];
            data.extend(body);
            let _ = decode(&Bytes::from(data), LSN);
        }

        #[test]
        fn mutated_messages_never_panic(
            message in message_strategy(),
            position in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut data = encode(&message);
            let at = position.index(data.len());
            data[at] = byte;
            let _ = decode(&Bytes::from(data), LSN);
        }
    }

    proptest! {
        #[test]
        fn round_trips_through_the_encoder(message in message_strategy()) {
            let data = Bytes::from(encode(&message));
            prop_assert_eq!(decode(&data, LSN), Ok(message));
        }

        #[test]
        fn random_messages_are_exactly_framed(message in message_strategy()) {
            assert_exact_framing(&encode(&message));
        }
    }
}
