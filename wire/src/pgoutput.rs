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
//! Protocol version 2 (`streaming 'on'`, PostgreSQL 14+) adds streamed
//! in-progress transactions ([streaming reference]):
//!
//! | tag | message       | body (after the tag)                                                   |
//! |-----|---------------|------------------------------------------------------------------------|
//! | `S` | Stream Start  | xid (i32), first segment (i8: 1 for the transaction's first block)     |
//! | `E` | Stream Stop   | nothing                                                                |
//! | `c` | Stream Commit | xid (i32), flags (i8), commit LSN, end LSN, commit time (i64 each)     |
//! | `A` | Stream Abort  | xid, subtransaction xid (i32 each); with `streaming 'parallel'` also abort LSN and time (i64 each) |
//!
//! Between Stream Start and Stream Stop (a *stream block*) the messages
//! `R`, `Y`, `I`, `U`, `D`, `T` and `M` carry the xid of the
//! (sub)transaction that made them right after the tag; [`stream_block_entry`]
//! reads that xid and [`decode_streamed`] the rest. `O` (Origin) has no xid.
//! [`decode`] reads messages outside stream blocks, Stream Start, Stop,
//! Commit and Abort among them.
//!
//! Stream Prepare (`p`) and two-phase commit (`b`, `P`, `K`, `r`, protocol
//! 3+) are not requested by the connector, so receiving one means the
//! replication options and this decoder disagree: it is reported as
//! [`DecodeErrorKind::UnsupportedMessage`] rather than silently skipped.
//!
//! # Design
//!
//! The decoder is sans-IO: [`decode`] takes the bytes of one message and
//! returns a [`LogicalMessage`] or a [`DecodeError`]; it keeps no state across
//! messages (the relation cache lives elsewhere). It is zero-copy for column
//! values: a [`Tuple`] holds the message and where each value is in it, and
//! hands out each [`Datum`] borrowed from it; [`Message::content`] is a
//! [`Bytes`] slice of the input. Decoding a row allocates only the `Vec` of
//! its columns' places. Names are owned `String`s, since they are few and
//! outlive the frame in the relation cache.
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
//! [streaming reference]: https://www.postgresql.org/docs/current/protocol-logical-replication.html#PROTOCOL-LOGICAL-REPLICATION-LOGICAL-STREAMING-OF-LARGE-TRANSACTIONS
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
use std::ops::Range;

use bytes::Bytes;

use crate::lsn::Lsn;

mod error;
mod stream;
mod tuple;
use error::unsupported_feature;
pub use error::{DecodeError, DecodeErrorKind};
pub use stream::{
    decode_streamed, stream_block_entry, BlockEntry, StreamAbort, StreamCommit, StreamStart,
};
pub use tuple::{Datum, Form, Tuple, TupleWriter};

/// Microseconds from the Unix epoch to the PostgreSQL epoch (2000-01-01 UTC).
pub const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800 * 1_000_000;

/// Converts a PostgreSQL timestamp (microseconds since 2000-01-01 UTC) to
/// microseconds since the Unix epoch, saturating at the `i64` range.
///
/// ```
/// use pgcdc_wire::pgoutput::pg_epoch_micros_to_unix_micros;
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
    /// `S`: a block of an in-progress transaction's changes follows.
    StreamStart(StreamStart),
    /// `E`: the current stream block ends.
    StreamStop,
    /// `c`: a streamed transaction committed.
    StreamCommit(StreamCommit),
    /// `A`: a streamed transaction, or one of its subtransactions, aborted.
    StreamAbort(StreamAbort),
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
            LogicalMessage::StreamStart(_) => b'S',
            LogicalMessage::StreamStop => b'E',
            LogicalMessage::StreamCommit(_) => b'c',
            LogicalMessage::StreamAbort(_) => b'A',
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

/// Decodes one pgoutput message.
///
/// `data` is the payload of an `XLogData` frame, starting with the message
/// tag; `lsn` is that frame's WAL start, used in errors. Column values and
/// message content in the result are slices of `data`.
///
/// ```
/// use bytes::Bytes;
/// use pgcdc_wire::lsn::Lsn;
/// use pgcdc_wire::pgoutput::{decode, Datum, LogicalMessage};
///
/// // INSERT into relation 16384 of one text value "42".
/// let data = Bytes::from_static(b"I\0\0\x40\0N\0\x01t\0\0\0\x0242");
/// let LogicalMessage::Insert(insert) = decode(&data, Lsn::new(0x16B3748)).expect("valid insert")
/// else {
///     panic!("not an insert");
/// };
/// assert_eq!(insert.relation_id, 16384);
/// assert_eq!(insert.new.to_vec(), [Datum::Text(b"42")]);
/// ```
pub fn decode(data: &Bytes, lsn: Lsn) -> Result<LogicalMessage, DecodeError> {
    let mut r = Reader::new(data, lsn);
    let tag = r.u8("message tag")?;
    r.tag = Some(tag);
    let message = decode_body(&mut r, tag)?;
    r.finish()?;
    Ok(message)
}

/// Reads the body of a message whose tag was read.
fn decode_body(r: &mut Reader<'_>, tag: u8) -> Result<LogicalMessage, DecodeError> {
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
        b'R' => LogicalMessage::Relation(relation(r)?),
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
                new: tuple(r)?,
            })
        }
        b'U' => LogicalMessage::Update(update(r)?),
        b'D' => {
            const MARKER: &str = "old tuple marker 'K' or 'O'";
            let relation_id = r.u32("relation id")?;
            let at = r.pos;
            let marker = r.u8(MARKER)?;
            let old = old_tuple(r, marker)?.ok_or_else(|| r.invalid(at, MARKER, marker))?;
            LogicalMessage::Delete(Delete { relation_id, old })
        }
        b'T' => LogicalMessage::Truncate(truncate(r)?),
        b'M' => LogicalMessage::Message(Message {
            transactional: r.u8("message flags")? & 1 != 0,
            lsn: r.lsn("message LSN")?,
            prefix: r.cstring("message prefix")?,
            content: {
                let len = r.length("message content length")?;
                r.bytes(len, "message content")?
            },
        }),
        b'S' => LogicalMessage::StreamStart(StreamStart {
            xid: r.u32("transaction id")?,
            first_segment: {
                let at = r.pos;
                match r.u8("first segment flag")? {
                    0 => false,
                    1 => true,
                    other => return Err(r.invalid(at, "first segment flag 0 or 1", other)),
                }
            },
        }),
        b'E' => LogicalMessage::StreamStop,
        b'c' => LogicalMessage::StreamCommit(StreamCommit {
            xid: r.u32("transaction id")?,
            flags: r.u8("commit flags")?,
            commit_lsn: r.lsn("commit LSN")?,
            end_lsn: r.lsn("end LSN")?,
            commit_time_micros: r.i64("commit timestamp")?,
        }),
        b'A' => LogicalMessage::StreamAbort(StreamAbort {
            xid: r.u32("transaction id")?,
            subxid: r.u32("subtransaction id")?,
            // Only with `streaming 'parallel'`; nothing else may follow.
            abort: if r.remaining().is_empty() {
                None
            } else {
                Some((r.lsn("abort LSN")?, r.i64("abort timestamp")?))
            },
        }),
        _ if unsupported_feature(tag).is_some() => {
            return Err(r.error_at(0, DecodeErrorKind::UnsupportedMessage(tag)))
        }
        _ => return Err(r.error_at(0, DecodeErrorKind::UnknownTag(tag))),
    };
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
    use tuple::Column;
    const KIND: &str = "tuple data kind 'n', 'u', 't' or 'b'";
    let count = r.count("tuple column count")?;
    // Every column takes at least its kind byte.
    let mut columns = Vec::with_capacity(count.min(r.remaining().len()));
    for _ in 0..count {
        let at = r.pos;
        let column = match r.u8(KIND)? {
            b'n' => Column::Null,
            b'u' => Column::UnchangedToast,
            b't' => {
                let len = r.length("column value length")?;
                Column::Text(r.range(len, "column value")?)
            }
            b'b' => {
                let len = r.length("column value length")?;
                Column::Binary(r.range(len, "column value")?)
            }
            other => return Err(r.invalid(at, KIND, other)),
        };
        columns.push(column);
    }
    Ok(Tuple::from_checked(r.data.clone(), columns))
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
    fn new(data: &'a Bytes, lsn: Lsn) -> Self {
        Reader {
            data,
            pos: 0,
            lsn,
            tag: None,
        }
    }

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
        let range = self.range(len, what)?;
        Ok(self.data.slice(range))
    }

    /// Where the next `len` bytes of the input are; they are skipped.
    fn range(&mut self, len: usize, what: &'static str) -> Result<Range<usize>, DecodeError> {
        if len > self.remaining().len() {
            return Err(self.truncated(len, what));
        }
        let start = self.pos;
        self.pos = start.saturating_add(len);
        Ok(start..self.pos)
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
mod tests;
