//! Debezium's two most used single-message transforms, applied where the
//! events are made: the outbox event router ([`outbox`]) and
//! ExtractNewRecordState, "unwrap" ([`unwrap`]).
//!
//! A transform turns one [`ChangeEvent`] into the Kafka records Debezium
//! would have written with the transform configured: zero (a dropped delete,
//! an outbox row deleted later), one, or two (a rewritten delete and its
//! tombstone). Outbox tables (`--outbox-table`) go through the router; every
//! other table follows `--envelope` (the Debezium envelope, or unwrapped).
//!
//! Transforms make Connect-shaped records ([`Record`]): values under the
//! schemas they derive, never bytes. The pipeline encodes them in the same
//! encode step as Debezium's own records and tags each with the transaction
//! of the event it came from, so the slot is still confirmed only after
//! Kafka acknowledged all of them. An event that yields no record (an
//! ignored outbox delete) is handled all the same: its transaction commits
//! with nothing outstanding.
//!
//! Derived schemas (the unwrapped row, an outbox payload or envelope) are
//! built once per table version and shared as `Arc`s, so the encoders cache
//! their serialized or registered forms by identity and the hot path does no
//! schema work and no HTTP.

pub mod options;
pub mod outbox;
pub mod regex_router;
pub mod unwrap;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use clap::ValueEnum;

use crate::event::envelope::{ConnectorInfo, Stamp};
use crate::event::record::{Header, Record};
use crate::event::value::Value;
use crate::event::{ChangeEvent, TableSchema};
use crate::lsn::Lsn;
use options::TransformOptions;

use outbox::OutboxRouter;
use unwrap::Unwrap;

/// What the value of a non-outbox table's record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EnvelopeMode {
    /// Debezium's envelope (`before`, `after`, `source`, `op`, ...).
    Debezium,
    /// The row itself, as ExtractNewRecordState writes it.
    Unwrap,
}

/// What unwrap does with deletes (ExtractNewRecordState's
/// `delete.tombstone.handling.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeleteHandling {
    /// Neither the delete nor its tombstone is written.
    Drop,
    /// The delete becomes a tombstone (null value); Debezium's own tombstone
    /// is dropped, so one tombstone per delete.
    Tombstone,
    /// The delete becomes the `before` row with `__deleted: "true"` (and
    /// every other row gets `__deleted: "false"`); no tombstone.
    Rewrite,
    /// As rewrite, and Debezium's tombstone (`--tombstones-on-delete`) is kept.
    RewriteWithTombstone,
}

/// Where an additional outbox column goes (`table.fields.additional.placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A Kafka header named by the alias.
    Header,
    /// A field of the value, which then becomes `{payload, <alias>...}`.
    Envelope,
}

/// One `column:placement[:alias]` of `--outbox-additional-placement`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    pub column: String,
    pub placement: Placement,
    /// The header or field name; the column name when not given.
    pub alias: String,
}

/// The whole `--outbox-additional-placement` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdditionalPlacement(pub Vec<AdditionalField>);

/// Parses Debezium's `col:header[:alias],col:envelope[:alias]` syntax.
pub fn parse_additional_placement(s: &str) -> Result<AdditionalPlacement, String> {
    let mut fields = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let parts: Vec<&str> = item.split(':').map(str::trim).collect();
        let (column, placement, alias) = match parts.as_slice() {
            [column, placement] => (*column, *placement, *column),
            [column, placement, alias] => (*column, *placement, *alias),
            _ => {
                return Err(format!(
                    "{item:?} is not column:placement[:alias]; e.g. type:header:eventType"
                ))
            }
        };
        let placement = match placement {
            "header" => Placement::Header,
            "envelope" => Placement::Envelope,
            "partition" => {
                return Err(format!(
                    "{item:?}: the partition placement is not supported; Kafka partitions \
                     come from the key (the aggregate id), so events of one aggregate stay in order"
                ))
            }
            other => {
                return Err(format!(
                    "{item:?}: unknown placement {other:?}; expected header or envelope"
                ))
            }
        };
        if column.is_empty() || alias.is_empty() {
            return Err(format!("{item:?}: column and alias must not be empty"));
        }
        fields.push(AdditionalField {
            column: column.to_owned(),
            placement,
            alias: alias.to_owned(),
        });
    }
    Ok(AdditionalPlacement(fields))
}

/// Which part of the envelope an `add.fields` / `add.headers` entry reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// A top-level envelope field (`op`, `ts_ms`).
    Envelope,
    /// A field of `source`.
    Source,
    /// A field of `transaction` (null unless transaction metadata is on).
    Transaction,
}

impl Block {
    fn name(self) -> Option<&'static str> {
        match self {
            Block::Envelope => None,
            Block::Source => Some("source"),
            Block::Transaction => Some("transaction"),
        }
    }
}

/// One entry of `--unwrap-add-fields` / `--unwrap-add-headers`:
/// `field`, `struct.field`, either with `:new_name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataField {
    pub block: Block,
    pub field: String,
    /// The output name, with the `__` prefix: `__op`, `__source_ts_ms`.
    pub name: String,
}

/// A whole `--unwrap-add-fields` / `--unwrap-add-headers` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataFields(pub Vec<MetadataField>);

/// The prefix ExtractNewRecordState puts before added fields and headers.
pub const METADATA_PREFIX: &str = "__";

/// Envelope fields that are not in `source`.
const ENVELOPE_FIELDS: &[&str] = &["op", "ts_ms"];
/// Fields of `transaction`.
const TRANSACTION_FIELDS: &[&str] = &["id", "total_order", "data_collection_order"];

/// Parses ExtractNewRecordState's `add.fields` syntax, resolving unqualified
/// names as it does: `op` and `ts_ms` are the envelope's, `id`,
/// `total_order` and `data_collection_order` the transaction's, anything
/// else the `source` block's.
pub fn parse_metadata_fields(s: &str) -> Result<MetadataFields, String> {
    let source = crate::event::envelope::source_schema();
    let mut fields = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (path, rename) = match item.split(':').collect::<Vec<_>>().as_slice() {
            [path] => (*path, None),
            [path, rename] if !rename.is_empty() => (*path, Some(*rename)),
            _ => return Err(format!("{item:?} is not field[:new_name]")),
        };
        let (block, field) = match path.split_once('.') {
            Some(("source", field)) => (Block::Source, field),
            Some(("transaction", field)) => (Block::Transaction, field),
            Some((other, _)) => {
                return Err(format!(
                    "{item:?}: unknown struct {other:?}; expected source or transaction"
                ))
            }
            None if ENVELOPE_FIELDS.contains(&path) => (Block::Envelope, path),
            None if TRANSACTION_FIELDS.contains(&path) => (Block::Transaction, path),
            None => (Block::Source, path),
        };
        let known = match block {
            Block::Envelope => ENVELOPE_FIELDS.contains(&field),
            Block::Transaction => TRANSACTION_FIELDS.contains(&field),
            Block::Source => source.fields.iter().any(|f| f.name == field),
        };
        if !known {
            let source_fields: Vec<&str> = source.fields.iter().map(|f| f.name.as_str()).collect();
            return Err(format!(
                "{item:?}: no such field; expected op, ts_ms, a source field ({}) or a \
                 transaction field ({})",
                source_fields.join(", "),
                TRANSACTION_FIELDS.join(", ")
            ));
        }
        let name = match (rename, block.name()) {
            (Some(rename), _) => format!("{METADATA_PREFIX}{rename}"),
            (None, Some(block)) if path.contains('.') => {
                format!("{METADATA_PREFIX}{block}_{field}")
            }
            (None, _) => format!("{METADATA_PREFIX}{field}"),
        };
        fields.push(MetadataField {
            block,
            field: field.to_owned(),
            name,
        });
    }
    Ok(MetadataFields(fields))
}

/// Errors making the records of a transformed event.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// An outbox table lacks a column the router needs.
    #[error(
        "outbox table {table} has no column {column:?} ({flag}); name the column that holds \
         it with {flag}, or leave the table out of --outbox-table"
    )]
    MissingColumn {
        table: String,
        column: String,
        flag: &'static str,
    },
    /// An outbox row has no value to route by.
    #[error(
        "the outbox row at LSN {lsn} in {table} has a null {column:?} (--outbox-route-by-field), \
         so it has no topic; nothing from it on is sent or confirmed. Make the column NOT NULL \
         for new rows; to get past this row, restart with the table left out of --outbox-table \
         (its rows then go to the table's own topic as change events) until it is confirmed"
    )]
    NullRoute {
        table: String,
        column: String,
        lsn: Lsn,
    },
    /// The routed topic name is not a Kafka topic name.
    #[error(
        "the outbox row at LSN {lsn} in {table} routes to a topic name of {length} characters, \
         more than Kafka's 249; shorten --outbox-route-topic-replacement or the values of \
         --outbox-route-by-field"
    )]
    TopicTooLong {
        table: String,
        lsn: Lsn,
        length: usize,
    },
}

impl TransformError {
    /// Whether trying again may succeed: never, each names the row or
    /// table the operator must change.
    pub fn is_retryable(&self) -> bool {
        match self {
            TransformError::MissingColumn { .. }
            | TransformError::NullRoute { .. }
            | TransformError::TopicTooLong { .. } => false,
        }
    }
}

/// The configured transforms of one pipeline attempt.
pub struct Transforms {
    outbox: Option<OutboxRouter>,
    unwrap: Option<Unwrap>,
}

impl Transforms {
    /// The transforms `options` ask for; `info` fills the envelope fields
    /// unwrap may add.
    pub fn new(options: &TransformOptions, info: ConnectorInfo) -> Self {
        Transforms {
            outbox: (!options.outbox_tables.is_empty()).then(|| OutboxRouter::new(options)),
            unwrap: (options.envelope == EnvelopeMode::Unwrap).then(|| Unwrap::new(options, info)),
        }
    }

    /// Whether events of `table` are transformed (rather than written as
    /// Debezium envelopes).
    pub fn applies_to(&self, table: &TableSchema) -> bool {
        self.unwrap.is_some() || self.outbox.as_ref().is_some_and(|o| o.routes(table))
    }

    /// The records of `event`, processed at `stamp` (what the envelope's
    /// `ts_ms` and `transaction` block say, for added fields and headers).
    /// `headers` are the event's own (key-change and TOAST headers);
    /// `tombstone` says whether Debezium would follow it with a tombstone.
    pub fn records<'e>(
        &mut self,
        event: &'e ChangeEvent,
        headers: Vec<Header<'e>>,
        tombstone: bool,
        stamp: Stamp<'e>,
    ) -> Result<Vec<Record<'e>>, TransformError> {
        if let Some(outbox) = self.outbox.as_mut().filter(|o| o.routes(&event.table)) {
            return outbox.records(event, headers);
        }
        Ok(match self.unwrap.as_mut() {
            Some(unwrap) => unwrap.records(event, headers, tombstone, stamp),
            None => Vec::new(),
        })
    }
}

/// A `&'static str` for a header name that comes from the configuration.
///
/// Record headers carry static names; the names transforms add are few and
/// fixed by the flags, so each distinct one is leaked once and reused by every
/// later attempt.
pub fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The field `name` of a struct value.
fn struct_field<'v>(value: &'v Value, name: &str) -> Option<&'v Value> {
    match value {
        Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

/// Shared `Arc` of a Kafka topic name.
type Topic = Arc<str>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn additional_placement_parses_debezium_syntax() {
        let p = parse_additional_placement("type:header:eventType, region:envelope,ts:header")
            .expect("parses");
        assert_eq!(
            p.0,
            vec![
                AdditionalField {
                    column: "type".into(),
                    placement: Placement::Header,
                    alias: "eventType".into()
                },
                AdditionalField {
                    column: "region".into(),
                    placement: Placement::Envelope,
                    alias: "region".into()
                },
                AdditionalField {
                    column: "ts".into(),
                    placement: Placement::Header,
                    alias: "ts".into()
                },
            ]
        );
        assert!(parse_additional_placement("a:partition").is_err());
        assert!(parse_additional_placement("a:body").is_err());
        assert!(parse_additional_placement("a").is_err());
        assert_eq!(parse_additional_placement("").expect("empty").0, vec![]);
    }

    #[test]
    fn metadata_fields_resolve_like_extract_new_record_state() {
        let f = parse_metadata_fields("op,table,lsn,source.ts_ms,ts_ms,id,version:V")
            .expect("parses")
            .0;
        let got: Vec<(Block, &str, &str)> = f
            .iter()
            .map(|m| (m.block, m.field.as_str(), m.name.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Block::Envelope, "op", "__op"),
                (Block::Source, "table", "__table"),
                (Block::Source, "lsn", "__lsn"),
                (Block::Source, "ts_ms", "__source_ts_ms"),
                (Block::Envelope, "ts_ms", "__ts_ms"),
                (Block::Transaction, "id", "__id"),
                (Block::Source, "version", "__V"),
            ]
        );
        let err = parse_metadata_fields("op,nope").expect_err("unknown field");
        assert!(err.contains("\"nope\""), "{err}");
        assert!(parse_metadata_fields("after.id").is_err());
    }

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        transform: TransformOptions,
    }

    /// The transform options of `run`'s flags `args`.
    pub(super) fn parse(args: &[&str]) -> Result<TransformOptions, clap::Error> {
        use clap::Parser;
        let argv = std::iter::once("run").chain(args.iter().copied());
        Flags::try_parse_from(argv).map(|f| f.transform)
    }

    #[test]
    fn flags_default_to_debeziums_options() {
        let c = parse(&[]).expect("parses");
        assert!(c.outbox_tables.is_empty());
        assert_eq!(
            (
                c.outbox_field_event_id.as_str(),
                c.outbox_field_event_key.as_str(),
                c.outbox_field_event_type.as_deref(),
                c.outbox_field_payload.as_str(),
                c.outbox_route_by_field.as_str(),
                c.outbox_route_topic_replacement.as_str(),
            ),
            (
                "id",
                "aggregateid",
                None,
                "payload",
                "aggregatetype",
                "outbox.event.${routedByValue}"
            )
        );
        assert_eq!(c.envelope, EnvelopeMode::Debezium);
        assert_eq!(c.unwrap_delete_handling, DeleteHandling::Tombstone);
        assert!(c.outbox_additional_placement.0.is_empty());
        assert!(c.unwrap_add_fields.0.is_empty());

        let c = parse(&[
            "--outbox-table",
            "public.a,s.b",
            "--outbox-table",
            "public.c",
            "--envelope",
            "unwrap",
            "--unwrap-delete-handling",
            "rewrite-with-tombstone",
            "--unwrap-add-headers",
            "op",
        ])
        .expect("parses");
        assert_eq!(c.validate(), []);
        assert_eq!(c.outbox_tables, ["public.a", "s.b", "public.c"]);
        assert_eq!(
            c.unwrap_delete_handling,
            DeleteHandling::RewriteWithTombstone
        );
        assert_eq!(c.unwrap_add_headers.0[0].name, "__op");
    }

    #[test]
    fn bad_transform_flags_are_reported() {
        assert!(parse(&["--unwrap-add-fields", "op,bogus"]).is_err());
        assert!(parse(&["--outbox-additional-placement", "x:partition"]).is_err());
        assert!(parse(&["--unwrap-delete-handling", "none"]).is_err());
        let c = parse(&["--outbox-table", "outbox", "--unwrap-add-fields", "op"]).expect("parses");
        let fields: Vec<&str> = c.validate().iter().map(|i| i.field).collect();
        assert_eq!(fields, ["outbox-table", "unwrap-add-fields"]);
    }

    #[test]
    fn interned_names_are_shared() {
        let a = intern("eventType");
        let b = intern(&String::from("eventType"));
        assert!(std::ptr::eq(a, b));
    }
}
