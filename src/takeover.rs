//! Taking over a running Debezium pipeline (`--takeover-debezium`): read
//! the offset Debezium stored, stream from Debezium's own slot and
//! publication, and leave out what Debezium already produced.
//!
//! # What Debezium's offset says
//!
//! Debezium's PostgreSQL connector (3.x, `PostgresOffsetContext`) stores,
//! per connector, a JSON map whose fields that matter here are
//! - `lsn_commit`: where the last transaction it processed ended: the
//!   position of pgoutput's Commit message, which the server sends at the
//!   *end* of the commit record (`logical.c`, `commit_cb_wrapper`), or the
//!   LSN of a non-transactional logical message;
//! - `lsn_proc`: the last change it processed completely (the change's WAL
//!   position), inside the transaction that follows `lsn_commit`, or
//!   `lsn_commit` itself after a Commit;
//! - `messageType`: what that last message was (`BEGIN`, `INSERT`, ...,
//!   `COMMIT`, `MESSAGE`), and `txId` its transaction;
//! - `lsn_events_processed` (Debezium 3.7+): how many changes at `lsn_proc`
//!   it processed (a COPY writes many rows under one WAL record).
//!
//! Debezium resumes the same way (`WalPositionLocator`): it streams from
//! the slot, skips whole transactions up to `lsn_commit`, then the changes
//! up to `lsn_proc` of the next one. Kafka Connect stores the offset of a
//! record only once Kafka acknowledged it and every record before it, and
//! Debezium moves the slot to a stored `lsn_commit` (never past it) only
//! after that, so:
//! - everything up to the stored offset is in Kafka (nothing is left out by
//!   skipping it), and
//! - the records Debezium produced after its last offset commit (its
//!   unflushed window: up to `offset.flush.interval.ms` of changes, more
//!   when it was killed) are sent again, as Debezium itself would on a
//!   restart.
//!
//! # The rule ([`Resume`])
//!
//! Only the order of commits is global in a logical replication stream, so
//! a transaction is judged by where it commits: with `c` the offset's
//! `lsn_commit`, a transaction whose commit record starts before `c`
//! (`final_lsn < c`) ended at or before `c`: Debezium produced all of it.
//! The one transaction that follows `c` is the one whose predecessor in the
//! stream ended at or before `c` (the first one streamed follows the slot's
//! position, where this attempt starts): of it, Debezium produced the
//! changes before `lsn_proc`, and those at `lsn_proc` it counted (one
//! without `lsn_events_processed`: when a COPY's rows share it, the rest
//! are sent again rather than lost). Everything later is new.

pub mod offset_file;
mod offsets_topic;
pub mod options;
mod resume;
pub mod subjects;
pub mod tails;

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use serde::Deserialize;

use crate::lsn::Lsn;
pub use options::{OffsetSource, TakeoverOptions};
pub use resume::{Resume, Through, TxnVerdict};

/// How long reading Connect's offsets topic may take.
const OFFSETS_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why Debezium's offset could not be taken over.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("cannot read Debezium's offsets topic {topic:?}: {reason}; check --bootstrap-servers and --takeover-debezium")]
    Kafka { topic: String, reason: String },
    #[error("cannot read Debezium's offset file {}: {source}; check --takeover-debezium file:<path> (Debezium Server's offset.storage.file.filename)", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Debezium's offset file {} is not what Kafka's FileOffsetBackingStore writes ({reason}); only that store's files can be read: give the offsets topic instead, or start without --takeover-debezium", path.display())]
    FileFormat { path: PathBuf, reason: String },
    #[error("{location} holds no offset of a Debezium connector for topic prefix {prefix:?}{found}; check --topic-prefix (Debezium's topic.prefix), --takeover-debezium-name and --takeover-debezium, or start without --takeover-debezium if Debezium never stored an offset")]
    NotFound {
        location: String,
        prefix: String,
        /// The connectors that are there, for the hint.
        found: String,
    },
    #[error("{location} holds offsets of several Debezium connectors for topic prefix {prefix:?} ({names}); name the one to take over with --takeover-debezium-name")]
    Ambiguous {
        location: String,
        prefix: String,
        names: String,
    },
    #[error("Debezium's offset in {location} is not one of its PostgreSQL connector ({reason}): {value}")]
    Offset {
        location: String,
        reason: String,
        value: String,
    },
    #[error("--takeover-debezium continues from Debezium's replication slot, but slot {slot:?} {state}; give Debezium's slot.name with --slot (and its publication.name with --publication)")]
    Slot { slot: String, state: &'static str },
    #[error("the schema registry refuses the schemas pgcdc-kafka would register for {refused}; nothing was sent. {}", subjects::FIX)]
    Incompatible { refused: String },
    #[error("cannot derive the Avro schema of subject {subject:?}: {reason}")]
    Schema { subject: String, reason: String },
    #[error("the schema dry run could not ask the registry")]
    Registry {
        #[source]
        source: crate::encode::registry::RegistryError,
    },
    #[error("Debezium's offset in {location} was stored during its initial snapshot, which did not complete: let Debezium finish the snapshot first, or start pgcdc-kafka without --takeover-debezium on a new slot (--snapshot-mode initial)")]
    SnapshotUnfinished { location: String },
}

impl TakeoverError {
    /// Kafka or the registry may answer later; a bad offset, file or schema
    /// will not change.
    pub fn is_retryable(&self) -> bool {
        match self {
            TakeoverError::Kafka { .. } => true,
            TakeoverError::Registry { source } => source.is_retryable(),
            _ => false,
        }
    }
}

/// One entry of Connect's offset store: key and value as its JsonConverter
/// wrote them (a null value deletes the key's offset).
pub type Entry = (Vec<u8>, Option<Vec<u8>>);

/// The offset Debezium stored for one connector (the fields of
/// `PostgresOffsetContext.getOffset()` that say where it is).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct DebeziumOffset {
    #[serde(default)]
    pub lsn: Option<u64>,
    #[serde(default)]
    pub lsn_proc: Option<u64>,
    #[serde(default)]
    pub lsn_commit: Option<u64>,
    #[serde(default, rename = "messageType")]
    pub message_type: Option<String>,
    #[serde(default, rename = "txId")]
    pub tx_id: Option<u64>,
    #[serde(default)]
    pub lsn_events_processed: Option<u64>,
    #[serde(default)]
    pub snapshot: Option<serde_json::Value>,
    #[serde(default)]
    pub last_snapshot_record: Option<bool>,
    #[serde(default)]
    pub snapshot_completed: Option<bool>,
}

impl DebeziumOffset {
    /// Reads an offset value (Kafka Connect's JsonConverter, schemas off);
    /// `location` names where it was found, for errors.
    pub fn parse(value: &[u8], location: &str) -> Result<Self, TakeoverError> {
        let text = String::from_utf8_lossy(value);
        let bad = |reason: String| TakeoverError::Offset {
            location: location.to_owned(),
            reason,
            value: text.chars().take(300).collect(),
        };
        let json: serde_json::Value =
            serde_json::from_slice(value).map_err(|e| bad(format!("not JSON: {e}")))?;
        if !json.is_object() {
            return Err(bad("not a JSON object".to_owned()));
        }
        let offset: DebeziumOffset =
            serde_json::from_value(json).map_err(|e| bad(format!("not its fields: {e}")))?;
        if offset.lsn.is_none() && offset.lsn_proc.is_none() && offset.lsn_commit.is_none() {
            return Err(bad("it has no lsn, lsn_proc or lsn_commit".to_owned()));
        }
        // A snapshot offset without its last record: Debezium would take
        // the snapshot again.
        let in_snapshot = offset.snapshot.as_ref().is_some_and(|s| !s.is_null())
            && offset.last_snapshot_record != Some(true)
            && offset.snapshot_completed != Some(true);
        if in_snapshot {
            return Err(TakeoverError::SnapshotUnfinished {
                location: location.to_owned(),
            });
        }
        Ok(offset)
    }

    /// Where Debezium's last processed transaction ended (`lsn_commit`;
    /// as Debezium's loader: `lsn_proc` without it, and `lsn` for an
    /// offset stored by a finished snapshot, which streaming starts from).
    pub fn commit(&self) -> Lsn {
        Lsn::new(
            self.lsn_commit
                .or(self.lsn_proc)
                .or(self.lsn)
                .unwrap_or_default(),
        )
    }
}

/// Debezium's offset from where `options` say, for connectors writing
/// under `topic_prefix` (`None`: no takeover asked for). `producer` carries
/// the Kafka connection settings. Blocking: call it off the async runtime.
pub fn load(
    options: &TakeoverOptions,
    topic_prefix: &str,
    producer: &ClientConfig,
) -> Result<Option<DebeziumOffset>, TakeoverError> {
    let Some(source) = &options.takeover_debezium else {
        return Ok(None);
    };
    let name = options.takeover_debezium_name.as_deref();
    let (location, stored) = match source {
        OffsetSource::Topic(topic) => (
            format!("offsets topic {topic:?}"),
            offsets_topic::read(producer, topic, OFFSETS_READ_TIMEOUT)?,
        ),
        OffsetSource::File(path) => (
            format!("offset file {}", path.display()),
            offset_file::read(path)?,
        ),
    };
    let value = select(&stored, topic_prefix, name, &location)?;
    DebeziumOffset::parse(value, &location).map(Some)
}

/// The stored value for the connector `name` (any, when there is one)
/// writing under `prefix`, among Connect's `(key, value)` entries: keys
/// are `["<connector name>",{"server":"<topic.prefix>"}]`.
fn select<'a>(
    stored: &'a [Entry],
    prefix: &str,
    name: Option<&str>,
    location: &str,
) -> Result<&'a [u8], TakeoverError> {
    let mut ours: Vec<(String, &'a Option<Vec<u8>>)> = Vec::new();
    let mut others = Vec::new();
    for (key, value) in stored {
        let Some((connector, server)) = parse_key(key) else {
            continue;
        };
        if server.as_deref() == Some(prefix) && name.is_none_or(|n| n == connector) {
            // The last entry of a key wins, as Connect reads its topic.
            ours.retain(|(c, _)| *c != connector);
            ours.push((connector, value));
        } else {
            others.push(format!(
                "{connector:?} for prefix {:?}",
                server.unwrap_or_default()
            ));
        }
    }
    // A null value is Connect's tombstone: the offset was deleted.
    ours.retain(|(_, value)| value.is_some());
    match ours.as_slice() {
        [(_, Some(value))] => Ok(value),
        [] => Err(TakeoverError::NotFound {
            location: location.to_owned(),
            prefix: prefix.to_owned(),
            found: match others.is_empty() {
                true => String::new(),
                false => {
                    others.sort();
                    others.dedup();
                    format!(" (it has {})", others.join(", "))
                }
            },
        }),
        several => Err(TakeoverError::Ambiguous {
            location: location.to_owned(),
            prefix: prefix.to_owned(),
            names: several
                .iter()
                .map(|(c, _)| format!("{c:?}"))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// A Connect offset key: the connector's name and its partition's `server`.
fn parse_key(key: &[u8]) -> Option<(String, Option<String>)> {
    let key: serde_json::Value = serde_json::from_slice(key).ok()?;
    let [name, partition] = key.as_array()?.as_slice() else {
        return None;
    };
    let server = partition.get("server").and_then(|s| s.as_str());
    Some((name.as_str()?.to_owned(), server.map(str::to_owned)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: Option<&str>) -> Entry {
        (
            key.as_bytes().to_vec(),
            value.map(|v| v.as_bytes().to_vec()),
        )
    }

    #[test]
    fn a_connect_offset_reads_as_debezium_writes_it() {
        let value = br#"{"transaction_id":null,"lsn_proc":23905960,"messageType":"INSERT","lsn_commit":23905552,"lsn":23905960,"txId":757,"ts_usec":1733390000000000}"#;
        let offset = DebeziumOffset::parse(value, "t").expect("an offset");
        assert_eq!(offset.lsn_proc, Some(23_905_960));
        assert_eq!(offset.lsn_commit, Some(23_905_552));
        assert_eq!(offset.message_type.as_deref(), Some("INSERT"));
        assert_eq!(offset.tx_id, Some(757));
        assert_eq!(offset.commit(), Lsn::new(23_905_552));
    }

    #[test]
    fn offsets_that_cannot_be_resumed_are_refused() {
        assert!(matches!(
            DebeziumOffset::parse(b"[1]", "t"),
            Err(TakeoverError::Offset { .. })
        ));
        assert!(matches!(
            DebeziumOffset::parse(br#"{"ts_usec":1}"#, "t"),
            Err(TakeoverError::Offset { .. })
        ));
        let snapshotting = br#"{"lsn":100,"snapshot":"INITIAL","last_snapshot_record":false}"#;
        assert!(matches!(
            DebeziumOffset::parse(snapshotting, "t"),
            Err(TakeoverError::SnapshotUnfinished { .. })
        ));
        let done = br#"{"lsn":100,"snapshot":"INITIAL","last_snapshot_record":true}"#;
        let offset = DebeziumOffset::parse(done, "t").expect("a finished snapshot's offset");
        assert_eq!(offset.commit(), Lsn::new(100));
    }

    #[test]
    fn the_connector_is_chosen_by_prefix_then_name() {
        let stored = vec![
            entry(r#"["a",{"server":"app"}]"#, Some(r#"{"lsn":1}"#)),
            entry(r#"["a",{"server":"app"}]"#, Some(r#"{"lsn":2}"#)),
            entry(r#"["b",{"server":"other"}]"#, Some(r#"{"lsn":3}"#)),
            entry("not json", Some("x")),
        ];
        assert_eq!(select(&stored, "app", None, "t").unwrap(), br#"{"lsn":2}"#);
        assert_eq!(
            select(&stored, "app", Some("a"), "t").unwrap(),
            br#"{"lsn":2}"#
        );
        let missing = select(&stored, "app", Some("z"), "t").unwrap_err();
        assert!(
            missing.to_string().contains(r#""a" for prefix "app""#),
            "{missing}"
        );
        let mut two = stored.clone();
        two.push(entry(r#"["c",{"server":"app"}]"#, Some(r#"{"lsn":4}"#)));
        assert!(matches!(
            select(&two, "app", None, "t"),
            Err(TakeoverError::Ambiguous { .. })
        ));
        let mut deleted = stored.clone();
        deleted.push(entry(r#"["a",{"server":"app"}]"#, None));
        assert!(matches!(
            select(&deleted, "app", None, "t"),
            Err(TakeoverError::NotFound { .. })
        ));
    }
}
