//! Debezium's snapshot notifications: what a snapshot is doing, told to the
//! log, to a Kafka topic and to the metrics.
//!
//! The model is Debezium's (`io.debezium.pipeline.notification`): an `id`,
//! an `aggregate_type` (`Initial Snapshot` for the initial and blocking
//! snapshots, `Incremental Snapshot`), a `type` (`STARTED`, `IN_PROGRESS`,
//! `TABLE_SCAN_COMPLETED`, `COMPLETED`, `ABORTED`, `PAUSED`, `RESUMED`),
//! `additional_data` (string to string, with Debezium's keys:
//! `connector_name`, `data_collections`, `current_collection_in_progress`,
//! `scanned_collection`, `total_rows_scanned`, `status`,
//! `last_processed_key`) and a `timestamp` in epoch milliseconds.
//!
//! Channels (`--notification-enabled-channels`, Debezium's
//! `notification.enabled.channels`):
//! - `log`: one INFO line per notification, with its fields;
//! - `sink`: a record in `--notification-sink-topic-name`, keyed by
//!   `{"id": ...}`, valued as Debezium's sink channel writes it through
//!   Kafka Connect's JsonConverter (`io.debezium.connector.common.Notification`,
//!   with or without the embedded schema as `--json-value-schemas` says).
//!
//! Every notification is also counted in
//! `pgcdc_snapshot_notifications_total{aggregate_type, type}`.
//!
//! Notifications are informational and outside the delivery guarantee: they
//! are produced by a producer of their own, not in the data's Kafka
//! transactions, and a notification that cannot be delivered is logged at
//! WARN and dropped (the snapshot goes on), as Debezium's channel drops one
//! it cannot queue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value};

use crate::config::RunConfig;
use crate::metrics::Metrics;
use crate::sink::SinkError;

pub mod options;

pub use options::{Channel, NotificationOptions};

/// `aggregate_type` of the initial snapshot's notifications (and of blocking
/// snapshots', which Debezium takes with the same snapshotter).
pub const INITIAL_SNAPSHOT: &str = "Initial Snapshot";
/// `aggregate_type` of incremental snapshots' notifications.
pub const INCREMENTAL_SNAPSHOT: &str = "Incremental Snapshot";

/// Debezium's `SnapshotStatus` (and `SnapshotResultStatus`) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Started,
    InProgress,
    TableScanCompleted,
    Completed,
    Aborted,
    Paused,
    Resumed,
}

impl Kind {
    /// The `type` as Debezium writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Started => "STARTED",
            Kind::InProgress => "IN_PROGRESS",
            Kind::TableScanCompleted => "TABLE_SCAN_COMPLETED",
            Kind::Completed => "COMPLETED",
            Kind::Aborted => "ABORTED",
            Kind::Paused => "PAUSED",
            Kind::Resumed => "RESUMED",
        }
    }
}

/// One notification, with Debezium's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub id: String,
    pub aggregate_type: &'static str,
    pub kind: Kind,
    pub additional_data: BTreeMap<String, String>,
    pub timestamp_ms: i64,
}

impl Notification {
    /// A notification with a fresh random id (Debezium: a UUID), or `id`.
    pub fn new(aggregate_type: &'static str, kind: Kind, id: Option<&str>) -> Self {
        Notification {
            id: id.map_or_else(
                || crate::event::context::new_run_id().to_string(),
                str::to_owned,
            ),
            aggregate_type,
            kind,
            additional_data: BTreeMap::new(),
            timestamp_ms: crate::event::now_micros() / 1000,
        }
    }

    /// Adds `key` = `value` to `additional_data`.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.additional_data.insert(key.to_owned(), value.into());
        self
    }

    /// The record's key, as Connect's JsonConverter writes Debezium's
    /// `NotificationKey`.
    pub fn key_json(&self, schemas: bool) -> Value {
        let payload = json!({ "id": self.id });
        if !schemas {
            return payload;
        }
        json!({
            "schema": {
                "type": "struct",
                "fields": [{"type": "string", "optional": false, "field": "id"}],
                "optional": false,
                "name": "io.debezium.connector.common.NotificationKey",
                "version": 1,
            },
            "payload": payload,
        })
    }

    /// The record's value, as Connect's JsonConverter writes Debezium's
    /// `Notification`.
    pub fn value_json(&self, schemas: bool) -> Value {
        let payload = json!({
            "id": self.id,
            "type": self.kind.as_str(),
            "aggregate_type": self.aggregate_type,
            "additional_data": self.additional_data,
            "timestamp": self.timestamp_ms,
        });
        if !schemas {
            return payload;
        }
        let string = |field: &str| json!({"type": "string", "optional": false, "field": field});
        json!({
            "schema": {
                "type": "struct",
                "fields": [
                    string("id"),
                    string("type"),
                    string("aggregate_type"),
                    {"type": "map", "keys": {"type": "string", "optional": false},
                     "values": {"type": "string", "optional": false},
                     "optional": true, "field": "additional_data"},
                    {"type": "int64", "optional": false, "field": "timestamp"},
                ],
                "optional": false,
                "name": "io.debezium.connector.common.Notification",
                "version": 1,
            },
            "payload": payload,
        })
    }
}

/// The sink channel: a producer of its own and the topic.
struct Sink {
    producer: FutureProducer,
    topic: String,
    key_schemas: bool,
    value_schemas: bool,
}

/// Sends notifications to the enabled channels and counts them.
#[derive(Clone)]
pub struct Notifier {
    connector_name: String,
    log: bool,
    sink: Option<Arc<Sink>>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("log", &self.log)
            .field("sink", &self.sink.as_ref().map(|s| &s.topic))
            .finish_non_exhaustive()
    }
}

/// How long librdkafka may try to deliver a notification.
const NOTIFICATION_TIMEOUT: Duration = Duration::from_secs(30);

impl Notifier {
    /// The channels `config` enables; `connector_name` of every notification
    /// is the topic prefix, Debezium's logical name.
    pub fn new(config: &RunConfig, metrics: &Arc<Metrics>) -> Result<Self, SinkError> {
        let options = &config.notifications;
        let sink = match (
            options
                .notification_enabled_channels
                .contains(&Channel::Sink),
            &options.notification_sink_topic_name,
        ) {
            (true, Some(topic)) => {
                let mut producer = config.producer_config();
                producer.set(
                    "message.timeout.ms",
                    NOTIFICATION_TIMEOUT.as_millis().to_string(),
                );
                producer.remove("enable.gapless.guarantee");
                Some(Arc::new(Sink {
                    producer: producer
                        .create()
                        .map_err(|e| SinkError::Config(Box::new(e)))?,
                    topic: topic.clone(),
                    key_schemas: config.encode.key_schemas(),
                    value_schemas: config.encode.value_schemas(),
                }))
            }
            _ => None,
        };
        Ok(Notifier {
            connector_name: config.topic_prefix.clone(),
            log: options
                .notification_enabled_channels
                .contains(&Channel::Log),
            sink,
            metrics: Arc::clone(metrics),
        })
    }

    /// Sends `notification` (with `connector_name` added) to every enabled
    /// channel; never waits: the sink's delivery is awaited by a task.
    pub fn notify(&self, notification: Notification) {
        let notification = notification.with("connector_name", self.connector_name.as_str());
        self.metrics
            .notification(notification.aggregate_type, notification.kind.as_str());
        if self.log {
            tracing::info!(
                id = %notification.id,
                aggregate_type = notification.aggregate_type,
                r#type = notification.kind.as_str(),
                additional_data = ?notification.additional_data,
                timestamp = notification.timestamp_ms,
                "notification"
            );
        }
        let Some(sink) = &self.sink else { return };
        let key = notification.key_json(sink.key_schemas).to_string();
        let value = notification.value_json(sink.value_schemas).to_string();
        let record = FutureRecord::to(&sink.topic).key(&key).payload(&value);
        match sink.producer.send_result(record) {
            Ok(delivery) => {
                let topic = sink.topic.clone();
                tokio::spawn(async move {
                    if let Ok(Err((error, _))) | Err(error) = delivery
                        .await
                        .map_err(|_| rdkafka::error::KafkaError::Canceled)
                    {
                        tracing::warn!(%topic, error = %error, "a notification was not delivered; dropped");
                    }
                });
            }
            Err((error, _)) => {
                tracing::warn!(topic = %sink.topic, error = %error, "a notification could not be queued; dropped");
            }
        }
    }

    /// Waits (off the runtime's threads) until queued notifications are
    /// delivered or `timeout` passes: at the end of a run, so the last ones
    /// (`COMPLETED`) are not lost with the producer.
    pub async fn flush(&self, timeout: Duration) {
        let Some(sink) = self.sink.clone() else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || {
            use rdkafka::producer::Producer;
            let _ = sink.producer.flush(timeout);
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_debeziums_fields_and_schema_names() {
        let n = Notification::new(
            INCREMENTAL_SNAPSHOT,
            Kind::TableScanCompleted,
            Some("sig-1"),
        )
        .with("scanned_collection", "public.t")
        .with("status", "SUCCEEDED");
        let value = n.value_json(false);
        assert_eq!(value["id"], "sig-1");
        assert_eq!(value["type"], "TABLE_SCAN_COMPLETED");
        assert_eq!(value["aggregate_type"], "Incremental Snapshot");
        assert_eq!(value["additional_data"]["status"], "SUCCEEDED");
        assert!(value["timestamp"]
            .as_i64()
            .is_some_and(|t| t > 1_600_000_000_000));
        let with_schema = n.value_json(true);
        assert_eq!(
            with_schema["schema"]["name"],
            "io.debezium.connector.common.Notification"
        );
        assert_eq!(with_schema["payload"], value);
        assert_eq!(n.key_json(false), json!({"id": "sig-1"}));
        assert_ne!(
            Notification::new(INITIAL_SNAPSHOT, Kind::Started, None).id,
            Notification::new(INITIAL_SNAPSHOT, Kind::Started, None).id,
            "fresh ids"
        );
    }
}
