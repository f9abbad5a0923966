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
//! incremental snapshot's signal once its progress is recorded (the
//! progress row; with `--read-only` under at-least-once, the progress
//! topic, see `incremental/read_only_progress.rs`), so a crash before that
//! reads it again; a blocking snapshot's once Kafka has its rows.
//! Debezium commits the same consumer's offsets automatically, on a timer.
//! Records skipped (another connector's, unreadable) move the position the
//! same way, in turn: committed directly, one could overtake an earlier
//! signal's offset still waiting for its effect to be durable.
//!
//! # Under exactly-once: the offset in the Kafka transaction
//!
//! There a signal's effect is durable only once the Kafka transaction
//! holding it commits: the snapshot's progress rides in that transaction's
//! progress record (`incremental/committed.rs`), and a blocking snapshot's
//! rows are in it. Committing the offset at once would lose the signal to a
//! crash before that commit: the restarted connector resumes from the last
//! committed record, which lacks the signal, and reads the topic after it.
//! So the offset goes into the same Kafka transaction
//! (`send_offsets_to_transaction` with this consumer's group metadata,
//! [`crate::sink::Delivery::commit_offsets_with_batch`]): it moves exactly
//! when the transaction commits, and an abort takes it back with the
//! effect. The channel starts only once the delivery is initialized
//! ([`super::stream::Stream::stream`]): the offset a crashed instance left
//! pending in its open transaction reads as committed-or-not only after
//! `init_transactions` aborted that transaction.
//!
//! # The blocking snapshot's rows, and the acknowledged position
//!
//! A blocking snapshot read from this channel is emitted in a transaction
//! of its own at the position the stream has read, which the ack tracker
//! may already have acknowledged (a keepalive between transactions moves
//! it there when nothing is in flight). So "acknowledged up to that
//! position" does not say its rows are in Kafka; they are once the
//! position moved past it, or once it is there with nothing in flight
//! (and, exactly-once, no Kafka transaction open). The signal's offset is
//! committed only then ([`Stream::commit_acknowledged_signals`]), and any
//! signal after it waits with it: a crash before takes the blocking
//! snapshot again (duplicates, not loss). The slot itself needs no guard:
//! the rows are not in the WAL, and it is confirmed past the position only
//! once every transaction before, this one included, is acknowledged.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Deserialize;

use super::stream::Stream;
use super::PipelineError;
use crate::config::RunConfig;
use crate::lsn::Lsn;
use crate::sink::client_log::LoggingContext;
use crate::sink::{Delivery, SinkError};
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

/// One record read from the topic, at `offset`: a signal, or (`signal`
/// `None`) a record without effect that only moves the position.
#[derive(Debug)]
pub(super) struct KafkaSignal {
    offset: i64,
    signal: Option<SignalText>,
}

/// A signal as the record spells it.
#[derive(Debug)]
struct SignalText {
    id: String,
    kind: String,
    data: Option<String>,
}

/// The consumer of the signal topic.
pub(super) struct KafkaSignals {
    consumer: Arc<StreamConsumer<LoggingContext>>,
    topic: String,
    connector: String,
    /// The offset to commit once Kafka has everything up to the position
    /// (a blocking snapshot's rows, see the module docs).
    awaiting: Option<(i64, Lsn)>,
    /// Exactly-once: a signal took effect in the open Kafka transaction,
    /// which has not committed yet.
    in_open_batch: bool,
    /// The topic is on the producer's cluster, so its offsets may go into
    /// the producer's Kafka transactions.
    same_cluster: bool,
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
        let producer = config.producer_config();
        let mut client =
            options.kafka_consumer_config(crate::sink::transactional::client_config(&producer));
        client.set("auto.offset.reset", "earliest");
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
        let servers = |c: &rdkafka::ClientConfig| c.get("bootstrap.servers").map(str::to_owned);
        let same_cluster = servers(&client) == servers(&producer);
        if !same_cluster && config.delivery == crate::config::Delivery::ExactlyOnce {
            tracing::warn!(%topic, "--signal-kafka-bootstrap-servers names other brokers than --bootstrap-servers: under exactly-once a signal's offset is then committed when it takes effect, not in the kafka transaction that holds its effect, and a crash between the two loses the signal; send signals through the topic on the data cluster");
        }
        Ok(Some(KafkaSignals {
            consumer,
            topic,
            connector: config.topic_prefix.clone(),
            awaiting: None,
            in_open_batch: false,
            same_cluster,
        }))
    }

    /// The next record of the topic: a signal for this connector, or one
    /// to skip. Errors of the topic (it does not exist yet, the broker is
    /// away) are retried: signals are optional.
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
                return KafkaSignal {
                    offset,
                    signal: None,
                };
            }
            let parsed = message
                .payload()
                .and_then(|p| serde_json::from_slice::<Envelope>(p).ok());
            let Some(envelope) = parsed else {
                tracing::warn!(topic = %self.topic, offset, "signal ignored: the value is not JSON {{\"type\": ..., \"data\": {{...}}}}");
                return KafkaSignal {
                    offset,
                    signal: None,
                };
            };
            return KafkaSignal {
                offset,
                signal: Some(SignalText {
                    id: envelope.id.unwrap_or_else(|| format!("kafka-{offset}")),
                    kind: envelope.kind,
                    data: envelope.data.map(|d| d.to_string()),
                }),
            };
        }
    }

    /// The record at `offset` took effect (`rows_at`: once Kafka has
    /// everything up to that position, a blocking snapshot's rows). Under
    /// exactly-once its offset goes into the open Kafka transaction, which
    /// holds that effect (module docs); otherwise it is committed now, or
    /// with the offset awaiting Kafka's acknowledgement, if one does.
    async fn took_effect(
        &mut self,
        offset: i64,
        rows_at: Option<Lsn>,
        delivery: &mut dyn Delivery,
    ) -> Result<(), SinkError> {
        let group = self.consumer.group_metadata().filter(|_| self.same_cluster);
        if let Some(group) = group {
            let next = self.position_after(offset)?;
            if delivery.commit_offsets_with_batch(next, group).await? {
                self.in_open_batch = true;
                return Ok(());
            }
        }
        match rows_at {
            Some(position) => self.awaiting = Some(await_with(self.awaiting, offset, position)),
            None => match &mut self.awaiting {
                Some((awaiting, _)) => *awaiting = offset,
                None => self.commit(offset),
            },
        }
        Ok(())
    }

    /// Whether a signal took effect in the open Kafka transaction
    /// (exactly-once), which has not committed yet.
    pub(super) fn in_open_batch(&self) -> bool {
        self.in_open_batch
    }

    /// The open Kafka transaction committed, with the offsets it held.
    pub(super) fn batch_committed(&mut self) {
        self.in_open_batch = false;
    }

    /// The position after the record at `offset`, as the group commits it.
    fn position_after(&self, offset: i64) -> Result<TopicPartitionList, SinkError> {
        let mut position = TopicPartitionList::new();
        position
            .add_partition_offset(&self.topic, 0, Offset::Offset(offset + 1))
            .map_err(kafka_error(&self.topic, "name the position to commit"))?;
        Ok(position)
    }

    /// The record at `offset` took effect: the next start reads after it.
    fn commit(&self, offset: i64) {
        let committed = self.position_after(offset).and_then(|position| {
            (self.consumer.commit(&position, CommitMode::Async))
                .map_err(kafka_error(&self.topic, "commit the position"))
        });
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
    /// Acts on a record read from the topic, between transactions.
    pub(super) async fn kafka_signal(&mut self, read: KafkaSignal) -> Result<(), PipelineError> {
        let rows_at = match &read.signal {
            Some(text) => self.apply_kafka_signal(text, read.offset).await?,
            None => None,
        };
        // Exactly-once: the progress the signal changed rides in the next
        // Kafka transaction's progress record, and its offset with it.
        self.delivery.open_batch()?;
        if let Some(signals) = &mut self.kafka_signals {
            signals
                .took_effect(read.offset, rows_at, self.delivery.as_mut())
                .await?;
        }
        self.commit_acknowledged_signals();
        Ok(())
    }

    /// Applies a signal read from the topic at `offset`; returns the
    /// position of its rows, if it emitted some (a blocking snapshot).
    async fn apply_kafka_signal(
        &mut self,
        read: &SignalText,
        offset: i64,
    ) -> Result<Option<Lsn>, PipelineError> {
        let Some(incremental) = self.incremental.as_mut() else {
            return Ok(None);
        };
        let signal = incremental.parse_signal(&read.id, &read.kind, read.data.as_deref());
        tracing::info!(id = %read.id, kind = %read.kind, offset, "signal read from kafka");
        let blocking = matches!(
            signal,
            Signal::ExecuteSnapshot {
                kind: SnapshotKind::Blocking,
                ..
            }
        );
        let mut rows_at = None;
        if !blocking {
            incremental
                .on_signal(signal, &self.notifier)
                .await
                .map_err(super::incremental::IncrementalError::from)?;
            // Read-only under at-least-once: recorded in the progress topic
            // before the offset moves past the signal.
            self.record_read_only_progress_now(None).await?;
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
            rows_at = Some(self.received);
        }
        Ok(rows_at)
    }

    /// Commits the offset awaiting Kafka's acknowledgement of a blocking
    /// snapshot's rows once Kafka surely has them (see the module docs).
    pub(super) fn commit_acknowledged_signals(&mut self) {
        let Some(signals) = &mut self.kafka_signals else {
            return;
        };
        let Some((offset, position)) = signals.awaiting else {
            return;
        };
        let settled = self.delivery.is_drained() && self.delivery.batch_deadline().is_none();
        if surely_in_kafka(self.delivery.acked(), position, settled) {
            signals.awaiting = None;
            signals.commit(offset);
        }
    }
}

/// The offset awaiting acknowledgement once the signal at `offset` also
/// waits for `position`: the later offset, and the later position.
fn await_with(awaiting: Option<(i64, Lsn)>, offset: i64, position: Lsn) -> (i64, Lsn) {
    let position = awaiting.map_or(position, |(_, p)| p.max(position));
    (offset, position)
}

/// Whether a transaction at `position` is surely in Kafka, with the
/// acknowledged position at `acked` and (`settled`) nothing in flight nor
/// in an open Kafka transaction: past it, or at it and settled. At it
/// alone says nothing: a keepalive may have moved the position there
/// before the transaction's records were even sent (module docs).
fn surely_in_kafka(acked: Lsn, position: Lsn, settled: bool) -> bool {
    acked > position || (acked == position && settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_snapshot_at_an_acknowledged_position_waits_for_its_rows() {
        let at = Lsn::new(0x100);
        assert!(
            !surely_in_kafka(at, at, false),
            "acknowledged through a keepalive, rows in flight"
        );
        assert!(surely_in_kafka(at, at, true), "everything delivered");
        assert!(
            surely_in_kafka(Lsn::new(0x101), at, false),
            "a later transaction acknowledged"
        );
        assert!(!surely_in_kafka(Lsn::new(0xff), at, true));
        assert_eq!(
            await_with(Some((7, Lsn::new(0x200))), 9, at),
            (9, Lsn::new(0x200)),
            "a later signal waits for the earlier snapshot's rows too"
        );
        assert_eq!(await_with(None, 9, at), (9, at));
    }
}
