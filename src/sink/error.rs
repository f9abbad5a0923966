//! What can go wrong producing to Kafka, classified for the restart loop:
//! [`SinkError::is_retryable`] says whether restarting from the slot may
//! succeed. Every message names what happened and what the operator can do.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::login::LoginRefused;
use crate::lsn::Lsn;

/// Errors producing to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("invalid Kafka producer configuration; check --bootstrap-servers and --kafka-property values")]
    Config(#[source] Box<KafkaError>),
    #[error("Kafka did not accept a message for topic {topic:?}: {reason}")]
    Delivery {
        topic: String,
        reason: String,
        #[source]
        error: Box<KafkaError>,
        retryable: bool,
    },
    #[error("timed out after {0:?} waiting for Kafka to acknowledge in-flight messages")]
    FlushTimeout(Duration),
    #[error(
        "another instance with transactional.id {transactional_id:?} started and fenced this one; \
             only one connector with this --connector-name may run at a time, so this one stops \
             (what it had not committed is aborted and the other instance delivers it)"
    )]
    Fenced { transactional_id: String },
    #[error("could not start the Kafka producer's polling thread (out of threads or file descriptors?); raise the process limits (ulimit -u / -n)")]
    Poller(#[source] std::io::Error),
    #[error("kafka transaction of transactional.id {transactional_id:?} failed to {action}")]
    Transaction {
        action: &'static str,
        transactional_id: String,
        #[source]
        error: Box<KafkaError>,
        retryable: bool,
    },
    #[error("a kafka transaction open for {open_for:?} was aborted; it holds a Postgres transaction \
             too large to write within transaction.timeout.ms ({timeout:?}); raise \
             --kafka-property transaction.timeout.ms (and the broker's transaction.max.timeout.ms), \
             or use --delivery at-least-once; nothing was confirmed, so nothing is lost")]
    TransactionTooLong {
        open_for: Duration,
        timeout: Duration,
        #[source]
        error: Box<SinkError>,
    },
    #[error(
        "progress topic {topic:?} records connector {connector:?} at {recorded}, ahead of the \
             server's WAL ({server}): it belongs to another Postgres cluster; use a new \
             --connector-name (or --progress-topic), or delete the record"
    )]
    ProgressAhead {
        topic: String,
        connector: String,
        recorded: Lsn,
        server: Lsn,
    },
    #[error(
        "slot {slot:?} appeared while this instance took the initial snapshot: another \
             instance with the same --slot finished one; this snapshot was aborted in Kafka. \
             Run one instance per slot"
    )]
    SnapshotRace { slot: String },
    #[error(transparent)]
    Authentication(#[from] LoginRefused),
    #[error("progress topic {topic:?}: could not {action}")]
    Progress {
        topic: String,
        action: String,
        #[source]
        error: Option<Box<KafkaError>>,
    },
    #[error("signal topic {topic:?} (--signal-kafka-topic): could not {action}; check --signal-kafka-bootstrap-servers and the kafka properties")]
    SignalTopic {
        topic: String,
        action: &'static str,
        #[source]
        error: Box<KafkaError>,
    },
}

impl SinkError {
    /// Whether restarting from the slot may succeed (the broker was away or
    /// slow) rather than failing the same way again (the message is invalid
    /// for the topic).
    pub fn is_retryable(&self) -> bool {
        match self {
            SinkError::Config(_) => false,
            SinkError::Poller(_) => true,
            SinkError::Delivery { retryable, .. } => *retryable,
            SinkError::FlushTimeout(_)
            | SinkError::Progress { .. }
            | SinkError::SignalTopic { .. } => true,
            SinkError::Fenced { .. }
            | SinkError::TransactionTooLong { .. }
            | SinkError::ProgressAhead { .. }
            | SinkError::SnapshotRace { .. }
            | SinkError::Authentication { .. } => false,
            SinkError::Transaction { retryable, .. } => *retryable,
        }
    }
}

pub(super) fn delivery_error(topic: &str, error: KafkaError) -> SinkError {
    let code = error.rdkafka_error_code();
    let (retryable, reason) = match code {
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => (
            false,
            "the message is larger than the topic or producer allows; raise the topic's \
             max.message.bytes and --kafka-property message.max.bytes, or exclude the column"
                .to_owned(),
        ),
        Some(
            RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed,
        ) => (
            false,
            "the producer is not authorized to write this topic; grant WRITE (and CREATE, for \
             auto-created topics) on it"
                .to_owned(),
        ),
        Some(RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced) => (
            false,
            "another instance with the same transactional.id (--connector-name) fenced this \
             producer; only one may run at a time"
                .to_owned(),
        ),
        Some(RDKafkaErrorCode::InvalidTopic | RDKafkaErrorCode::UnknownTopic) => (
            false,
            "the topic does not exist and cannot be created; create it or enable \
             auto.create.topics.enable on the broker"
                .to_owned(),
        ),
        _ => (true, error.to_string()),
    };
    SinkError::Delivery {
        topic: topic.to_owned(),
        reason,
        error: Box::new(error),
        retryable,
    }
}
