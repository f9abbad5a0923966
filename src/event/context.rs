//! Debezium's context headers (`extended.headers.enabled`, on by default
//! since Debezium 3.2): who wrote a change record.
//!
//! Debezium 3.x's `EventDispatcher` adds them to every change record (row
//! changes, snapshot reads and truncates) after the emitter's own headers
//! (the key-change `__debezium.newkey` / `__debezium.oldkey`); a delete's
//! tombstone repeats its delete's headers. Logical decoding messages,
//! transaction boundaries and heartbeats carry none. Each is a Connect
//! string (`Schema.STRING_SCHEMA`), in this order (`DebeziumHeaderProducer`):
//!
//! | header | value |
//! |---|---|
//! | `__debezium.context.connectorLogicalName` | the topic prefix (`topic.prefix`) |
//! | `__debezium.context.taskId` | `0` (the PostgreSQL connector runs one task) |
//! | `__debezium.context.connectorName` | `postgresql` (the connector plugin's name) |
//! | `__debezium.context.runId` | a UUID v7 made when the task starts, new on every restart |

use std::sync::Arc;

use super::value::uuid_text;

/// One of the context headers, in the order Debezium writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextHeader {
    ConnectorLogicalName,
    TaskId,
    ConnectorName,
    RunId,
}

impl ContextHeader {
    /// Every context header, in order.
    pub const ALL: [ContextHeader; 4] = [
        ContextHeader::ConnectorLogicalName,
        ContextHeader::TaskId,
        ContextHeader::ConnectorName,
        ContextHeader::RunId,
    ];

    /// The header's name.
    pub const fn name(self) -> &'static str {
        match self {
            ContextHeader::ConnectorLogicalName => "__debezium.context.connectorLogicalName",
            ContextHeader::TaskId => "__debezium.context.taskId",
            ContextHeader::ConnectorName => "__debezium.context.connectorName",
            ContextHeader::RunId => "__debezium.context.runId",
        }
    }

    /// The header's value for a connector with topic prefix `logical_name`
    /// in the run `run_id`.
    pub fn value(self, logical_name: &str, run_id: &str) -> String {
        match self {
            ContextHeader::ConnectorLogicalName => logical_name.to_owned(),
            ContextHeader::TaskId => "0".to_owned(),
            ContextHeader::ConnectorName => "postgresql".to_owned(),
            ContextHeader::RunId => run_id.to_owned(),
        }
    }
}

/// A new run id: a UUID version 7 (RFC 9562: 48 bits of Unix milliseconds,
/// then random bits), as Debezium's `UUIDUtils.generateNewUUID` makes it,
/// so ids of later runs sort after earlier ones.
pub fn new_run_id() -> Arc<str> {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut random = [0_u8; 10];
    // The random bits only tell runs apart; a clock-only id is still a
    // valid UUID if the system's random source fails.
    let _ = rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut random);
    uuid_v7(millis as u64, random)
}

/// The UUID v7 text of `millis` and `random` (the version and variant bits
/// overwrite 6 of the random ones).
fn uuid_v7(millis: u64, random: [u8; 10]) -> Arc<str> {
    let mut bytes = [0_u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&random);
    bytes[6] = 0x70 | (bytes[6] & 0x0f);
    bytes[8] = 0x80 | (bytes[8] & 0x3f);
    uuid_text(&bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_version_7_uuids_in_time_order() {
        let id = uuid_v7(0x0123_4567_89ab, [0xff; 10]);
        assert_eq!(&*id, "01234567-89ab-7fff-bfff-ffffffffffff");
        let (a, b) = (new_run_id(), new_run_id());
        assert_ne!(a, b, "random bits tell runs apart");
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!(uuid_v7(1, [0; 10]) < uuid_v7(2, [0xff; 10]));
    }

    #[test]
    fn values_are_debeziums() {
        let values: Vec<String> = ContextHeader::ALL
            .iter()
            .map(|h| h.value("app", "r"))
            .collect();
        assert_eq!(values, ["app", "0", "postgresql", "r"]);
    }
}
