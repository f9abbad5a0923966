//! The Connect-shaped record: what the record stage makes of an event and
//! the encode step ([`crate::encode::Encoder::encode`]) turns into bytes.
//!
//! A [`Record`] is what a Kafka Connect source task would hand its
//! converters: a topic, a key, a value and headers. Each part is typed, never
//! bytes: a Connect value under its schema ([`Data`]), or the event whose
//! key or envelope it is, so the hot path writes the envelope straight from
//! the event through the envelope walk instead of building it as a value.
//! Debezium's own records are made here ([`Record::change`],
//! [`Record::message`], [`Record::metadata`]); transforms
//! ([`crate::transform`]) make theirs from [`Data`].
//!
//! Invariant: which converter writes a record (Connect JSON, Avro through a
//! registry) is known to the encode step alone. A record only says what it
//! holds, as a Connect source task hands its converters data and schemas,
//! transformed or not.

use std::sync::Arc;

use super::context::ContextHeader;
use super::envelope::Stamp;
use super::metadata::MetadataRecord;
use super::value::{ConnectSchema, Value};
use super::{ChangeEvent, MessageEvent};

/// One Kafka record, before encoding.
#[derive(Debug, Clone)]
pub struct Record<'e> {
    pub topic: Arc<str>,
    /// `None` for a null key.
    pub key: Option<RecordKey<'e>>,
    /// `None` for a tombstone.
    pub value: Option<RecordValue<'e>>,
    pub headers: Vec<Header<'e>>,
}

/// What a record's key holds.
#[derive(Debug, Clone)]
pub enum RecordKey<'e> {
    /// The key struct `<topic>.Key` of the event's table; null when the
    /// table has no key.
    Table(&'e ChangeEvent),
    /// `{prefix}` of a logical decoding message.
    Message(&'e MessageEvent),
    /// The key of a transaction boundary or heartbeat.
    Metadata(MetadataRecord<'e>),
    /// A value a transform made.
    Data(Data),
}

/// What a record's value holds.
#[derive(Debug, Clone)]
pub enum RecordValue<'e> {
    /// Debezium's envelope of the event.
    Envelope(&'e ChangeEvent, Stamp<'e>),
    /// The value of a logical decoding message record.
    Message(&'e MessageEvent, Stamp<'e>),
    /// The value of a transaction boundary or heartbeat.
    Metadata(MetadataRecord<'e>),
    /// A value a transform made.
    Data(Data),
}

/// A Connect value under the schema a transform derived for it (an
/// unwrapped row, an outbox payload or envelope).
///
/// The schema is shared: a transform keeps one `Arc` per table version, so
/// the encoders serialize or register it once and recognize it by identity.
#[derive(Debug, Clone)]
pub struct Data {
    pub schema: Arc<ConnectSchema>,
    pub value: Value,
    /// Names the records in errors: `table public.t (unwrapped)`.
    pub what: Arc<str>,
}

/// One record header.
#[derive(Debug, Clone)]
pub struct Header<'e> {
    pub name: &'static str,
    pub value: HeaderValue<'e>,
}

/// What a header holds. Headers are written as the configured header
/// converter writes them ([`crate::encode::headers`]): Connect's
/// `SimpleHeaderConverter` (text) or a `JsonConverter`.
#[derive(Debug, Clone)]
pub enum HeaderValue<'e> {
    /// A Connect value under its schema; a null value gives no header
    /// under the simple converter.
    Value(Value, Arc<ConnectSchema>),
    /// A record key (Debezium's `__debezium.newkey` / `__debezium.oldkey`);
    /// a null key gives an empty header under the simple converter.
    Key(RecordKey<'e>),
    /// One of Debezium's context headers, the same on every record of a
    /// run (so the encoder writes each once).
    Context(ContextHeader),
}

impl<'e> Header<'e> {
    /// A header holding `value`, of schema `schema`.
    pub fn value(name: &'static str, value: Value, schema: Arc<ConnectSchema>) -> Self {
        Header {
            name,
            value: HeaderValue::Value(value, schema),
        }
    }

    /// A header holding the key `key`.
    pub fn key(name: &'static str, key: RecordKey<'e>) -> Self {
        Header {
            name,
            value: HeaderValue::Key(key),
        }
    }

    /// Debezium's context headers, in order.
    pub fn context() -> impl Iterator<Item = Self> {
        ContextHeader::ALL.into_iter().map(|header| Header {
            name: header.name(),
            value: HeaderValue::Context(header),
        })
    }
}

impl<'e> Record<'e> {
    /// When its change or message was processed (Unix µs), for the records
    /// whose value is stamped with it.
    pub fn created_micros(&self) -> Option<i64> {
        match &self.value {
            Some(RecordValue::Envelope(_, stamp) | RecordValue::Message(_, stamp)) => {
                Some(stamp.now_micros)
            }
            _ => None,
        }
    }

    /// Debezium's record of a change event: on its table's topic, the
    /// table's key struct and the envelope stamped with `stamp`.
    pub fn change(event: &'e ChangeEvent, stamp: Stamp<'e>, headers: Vec<Header<'e>>) -> Self {
        Record {
            topic: Arc::clone(&event.table.topic),
            key: Some(RecordKey::Table(event)),
            value: Some(RecordValue::Envelope(event, stamp)),
            headers,
        }
    }

    /// The record of a logical decoding message on `topic`; it carries no
    /// headers.
    pub fn message(topic: Arc<str>, message: &'e MessageEvent, stamp: Stamp<'e>) -> Self {
        Record {
            topic,
            key: Some(RecordKey::Message(message)),
            value: Some(RecordValue::Message(message, stamp)),
            headers: Vec::new(),
        }
    }

    /// A transaction boundary or heartbeat record on `topic`.
    pub fn metadata(topic: Arc<str>, record: MetadataRecord<'e>) -> Self {
        Record {
            topic,
            key: Some(RecordKey::Metadata(record)),
            value: Some(RecordValue::Metadata(record)),
            headers: Vec::new(),
        }
    }
}
