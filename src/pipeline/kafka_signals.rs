//! Debezium's `kafka` signal channel (`--signal-enabled-channels kafka`):
//! signals sent as records of a Kafka topic instead of rows of the signal
//! table, in Debezium's layout: partition 0 of `--signal-kafka-topic`
//! (default `<prefix>-signal`), each record keyed by the connector's logical
//! name (the topic prefix) and valued `{"id": "...", "type":
//! "execute-snapshot", "data": {"data-collections": [...], ...}}`. Records
//! keyed otherwise are skipped (they are another connector's), as are values
//! that are not such JSON (with a warning).
//!
//! A signal read here acts as the same signal inserted into the signal
//! table, between two transactions of the stream instead of at a commit
//! position. Incremental snapshots write their watermarks and progress to
//! the signal table, unless `--read-only`, which needs no signal table.
//!
//! The position in the topic is the consumer group's committed offset
//! (`--signal-kafka-group-id`), committed once a signal took effect: an
//! incremental snapshot's signal once the progress row recorded it (so a
//! crash before that reads it again), a blocking snapshot's once its rows
//! were handed to Kafka (a crash before Kafka acknowledged them loses the
//! request; send it again). Debezium commits the same consumer's offsets
//! automatically, on a timer.
//!
//! `--read-only` under at-least-once has no durable progress (the source
//! cannot be written, and only exactly-once's progress record carries it):
//! while its incremental snapshot runs the offset stays at the signal that
//! started it, and is committed once the snapshot completed or was
//! stopped. A crash in between reads the signals again and takes the
//! snapshot from its start (duplicates, not loss).

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Deserialize;

use super::stream::Stream;
use super::PipelineError;
use crate::config::RunConfig;
use crate::sink::client_log::LoggingContext;
use crate::sink::SinkError;
use crate::source::signal::{Signal, SnapshotKind};

/// A record of the signal topic, as Debezium's channel reads it.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

/// One signal read from the topic, at `offset`.
#[derive(Debug)]
pub(super) struct KafkaSignal {
    offset: i64,
    id: String,
    kind: String,
    data: Option<String>,
}

/// The consumer of the signal topic.
pub(super) struct KafkaSignals {
    consumer: Arc<StreamConsumer<LoggingContext>>,
    topic: String,
    connector: String,
    /// Read-only at-least-once: the offsets read are committed only once
    /// the incremental snapshot ends (see the module docs).
    hold_while_running: bool,
    /// The last offset read and not committed because of that.
    held: Option<i64>,
}

fn kafka_error(
    topic: &str,
    action: &'static str,
) -> impl FnOnce(rdkafka::error::KafkaError) -> SinkError {
    let topic = topic.to_owned();
    move |error| SinkError::SignalTopic {
        topic,
        action,
        error: Box::new(error),
    }
}

impl KafkaSignals {
    /// The channel, when `--signal-enabled-channels` has `kafka`: assigned
    /// partition 0 of the topic, from the group's committed offset (the
    /// beginning when it has none). The committed offset is asked for
    /// explicitly, and a failure fails the attempt (retried): librdkafka's
    /// own lookup, when the group coordinator is not ready yet, can leave
    /// the partition unread.
    pub(super) async fn start(config: &RunConfig) -> Result<Option<Self>, SinkError> {
        let options = &config.signal_channels;
        if !options.kafka() {
            return Ok(None);
        }
        let topic = options.topic(&config.topic_prefix);
        let mut client = crate::sink::transactional::client_config(&config.producer_config());
        if let Some(servers) = &options.signal_kafka_bootstrap_servers {
            client.set("bootstrap.servers", servers);
        }
        client
            .set("group.id", &options.signal_kafka_group_id)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest");
        let consumer: StreamConsumer<LoggingContext> = client
            .create_with_context(LoggingContext::for_config(&client))
            .map_err(kafka_error(&topic, "create a consumer"))?;
        let consumer = Arc::new(consumer);
        let (lookup, name) = (Arc::clone(&consumer), topic.clone());
        let committed = tokio::task::spawn_blocking(move || {
            let mut partition = TopicPartitionList::new();
            partition.add_partition(&name, 0);
            lookup.committed_offsets(partition, Duration::from_secs(30))
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(Duration::from_secs(30)))?
        .map_err(kafka_error(
            &topic,
            "read the consumer group's committed position",
        ))?;
        let start = match committed.find_partition(&topic, 0).map(|p| p.offset()) {
            Some(Offset::Offset(next)) => Offset::Offset(next),
            _ => Offset::Beginning,
        };
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&topic, 0, start)
            .and_then(|()| consumer.assign(&assignment))
            .map_err(kafka_error(&topic, "assign partition 0"))?;
        tracing::info!(%topic, group = %options.signal_kafka_group_id, from = ?start, "reading signals from kafka");
        Ok(Some(KafkaSignals {
            consumer,
            topic,
            connector: config.topic_prefix.clone(),
            hold_while_running: options.read_only
                && config.delivery != crate::config::Delivery::ExactlyOnce,
            held: None,
        }))
    }

    /// The next signal for this connector. Errors of the topic (it does not
    /// exist yet, the broker is away) are retried: signals are optional.
    pub(super) async fn next(&self) -> KafkaSignal {
        loop {
            let message = match self.consumer.recv().await {
                Ok(message) => message,
                Err(error) => {
                    tracing::debug!(topic = %self.topic, %error, "reading the signal topic failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let offset = message.offset();
            if message.key() != Some(self.connector.as_bytes()) {
                tracing::debug!(topic = %self.topic, offset, "a signal for another connector skipped");
                self.commit(offset);
                continue;
            }
            let parsed = message
                .payload()
                .and_then(|p| serde_json::from_slice::<Envelope>(p).ok());
            let Some(envelope) = parsed else {
                tracing::warn!(topic = %self.topic, offset, "signal ignored: the value is not JSON {{\"type\": ..., \"data\": {{...}}}}");
                self.commit(offset);
                continue;
            };
            return KafkaSignal {
                offset,
                id: envelope.id.unwrap_or_else(|| format!("kafka-{offset}")),
                kind: envelope.kind,
                data: envelope.data.map(|d| d.to_string()),
            };
        }
    }

    /// The signal at `offset` took effect: the next start reads after it.
    fn commit(&self, offset: i64) {
        let mut position = TopicPartitionList::new();
        let committed = position
            .add_partition_offset(&self.topic, 0, Offset::Offset(offset + 1))
            .and_then(|()| self.consumer.commit(&position, CommitMode::Async));
        if let Err(error) = committed {
            tracing::warn!(topic = %self.topic, offset, %error, "the signal topic's position was not committed; the signal may be read again");
        }
    }
}

/// The next signal of `signals`; never resolves without a channel.
pub(super) async fn next_signal(signals: Option<&KafkaSignals>) -> KafkaSignal {
    match signals {
        Some(signals) => signals.next().await,
        None => std::future::pending().await,
    }
}

impl Stream<'_> {
    /// Acts on a signal read from the topic, between transactions.
    pub(super) async fn kafka_signal(&mut self, read: KafkaSignal) -> Result<(), PipelineError> {
        let Some(incremental) = self.incremental.as_mut() else {
            return Ok(());
        };
        let signal = incremental.parse_signal(&read.id, &read.kind, read.data.as_deref());
        tracing::info!(id = %read.id, kind = %read.kind, offset = read.offset, "signal read from kafka");
        let blocking = matches!(
            signal,
            Signal::ExecuteSnapshot {
                kind: SnapshotKind::Blocking,
                ..
            }
        );
        if !blocking {
            incremental
                .on_signal(signal, &self.metrics, &self.notifier)
                .await
                .map_err(super::incremental::IncrementalError::from)?;
        } else if let Signal::ExecuteSnapshot {
            id,
            tables,
            conditions,
            ..
        } = signal
        {
            // Its own "transaction" at the position read so far, as a
            // heartbeat's: confirming it skips nothing.
            let txn = self.delivery.begin();
            self.delivery.open_batch()?;
            let source = (self.received, txn, 0, crate::event::now_micros());
            self.blocking_snapshot(&id, &tables, &conditions, source)
                .await?;
            self.delivery.commit(txn, self.received);
        }
        // Exactly-once: the progress the signal changed rides in the next
        // Kafka transaction's progress record.
        self.delivery.open_batch()?;
        let running = (self.incremental.as_ref()).is_some_and(|i| i.is_running());
        if let Some(signals) = &mut self.kafka_signals {
            if signals.hold_while_running && running {
                signals.held = Some(read.offset);
            } else {
                // Past every signal held before it, too.
                signals.held = None;
                signals.commit(read.offset);
            }
        }
        Ok(())
    }

    /// The incremental snapshot ended: the signals held back while it ran
    /// (read-only, at-least-once) are committed.
    pub(super) fn release_kafka_signals(&mut self) {
        if let Some(signals) = &mut self.kafka_signals {
            if let Some(offset) = signals.held.take() {
                signals.commit(offset);
            }
        }
    }
}
