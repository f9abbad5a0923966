//! Creating topics the first time the connector uses them.
//!
//! Only with `--topic-partitions`, `--topic-replication-factor` or
//! `--topic-config`: without them topics are left to the broker's
//! auto-creation, as Debezium leaves them to Kafka Connect's. A topic is
//! created once, when its table's schema is first built (a Relation message,
//! or the snapshot's catalog read), never per record; a topic that already
//! exists is used as it is and never altered. Known topics are cached, so
//! each name costs one CreateTopics request per process at most.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use rdkafka::config::ClientConfig;

use super::client_log::LoggingContext;
use super::options::TopicOptions;

/// How long one CreateTopics request may take.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors creating a topic.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error(
        "cannot create a Kafka admin client; check --bootstrap-servers and --kafka-property values"
    )]
    Client(#[source] KafkaError),
    #[error("creating topic {topic:?} failed ({code}){hint}")]
    Create {
        topic: String,
        code: RDKafkaErrorCode,
        hint: &'static str,
    },
    #[error("creating topic {topic:?} failed")]
    Request {
        topic: String,
        #[source]
        error: KafkaError,
    },
}

impl TopicError {
    /// Whether trying again may succeed (the broker was unreachable or busy).
    pub fn is_retryable(&self) -> bool {
        match self {
            TopicError::Client(_) => false,
            TopicError::Request { .. } => true,
            TopicError::Create { code, .. } => !matches!(
                code,
                RDKafkaErrorCode::TopicAuthorizationFailed
                    | RDKafkaErrorCode::ClusterAuthorizationFailed
                    | RDKafkaErrorCode::InvalidConfig
                    | RDKafkaErrorCode::InvalidPartitions
                    | RDKafkaErrorCode::InvalidReplicationFactor
                    | RDKafkaErrorCode::InvalidTopic
                    | RDKafkaErrorCode::PolicyViolation
            ),
        }
    }
}

/// Creates missing topics with the configured layout.
pub struct TopicCreator {
    admin: AdminClient<LoggingContext>,
    partitions: i32,
    replication: i32,
    config: Vec<(String, String)>,
    known: HashSet<Arc<str>>,
}

impl TopicCreator {
    /// The creator `options` ask for, connecting with the `producer`'s
    /// settings; `None` when topics are left to the broker.
    pub fn new(
        producer: &ClientConfig,
        options: &TopicOptions,
    ) -> Result<Option<Self>, TopicError> {
        if !options.creates_topics() {
            return Ok(None);
        }
        // The producer's settings carry the security ones (SASL, TLS) the
        // admin requests need too.
        let admin = producer
            .create_with_context(LoggingContext::for_config(producer))
            .map_err(TopicError::Client)?;
        Ok(Some(TopicCreator {
            admin,
            // -1: the broker's num.partitions / default.replication.factor.
            partitions: options.topic_partitions.unwrap_or(-1),
            replication: options.topic_replication_factor.unwrap_or(-1),
            config: options.topic_config.clone(),
            known: HashSet::new(),
        }))
    }

    /// Makes sure `topic` exists, creating it if it does not.
    pub async fn ensure(&mut self, topic: &Arc<str>) -> Result<(), TopicError> {
        if self.known.contains(topic) {
            return Ok(());
        }
        let mut new_topic = NewTopic::new(
            topic,
            self.partitions,
            TopicReplication::Fixed(self.replication),
        );
        for (key, value) in &self.config {
            new_topic = new_topic.set(key, value);
        }
        let options = AdminOptions::new()
            .request_timeout(Some(CREATE_TIMEOUT))
            .operation_timeout(Some(CREATE_TIMEOUT));
        let results = self
            .admin
            .create_topics([&new_topic], &options)
            .await
            .map_err(|error| TopicError::Request {
                topic: topic.to_string(),
                error,
            })?;
        for result in results {
            match result {
                Ok(_) => {
                    tracing::info!(%topic, partitions = self.partitions, replication_factor = self.replication, "created topic")
                }
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    tracing::debug!(%topic, "topic exists; left as it is");
                }
                Err((_, code)) => {
                    return Err(TopicError::Create {
                        topic: topic.to_string(),
                        code,
                        hint: hint(code),
                    })
                }
            }
        }
        self.known.insert(Arc::clone(topic));
        Ok(())
    }
}

fn hint(code: RDKafkaErrorCode) -> &'static str {
    match code {
        RDKafkaErrorCode::TopicAuthorizationFailed
        | RDKafkaErrorCode::ClusterAuthorizationFailed => {
            "; grant CREATE on the topic (or the cluster) to the connector's principal, or create \
             the topic yourself"
        }
        RDKafkaErrorCode::InvalidReplicationFactor => {
            "; --topic-replication-factor is larger than the number of brokers"
        }
        RDKafkaErrorCode::InvalidPartitions => "; check --topic-partitions",
        RDKafkaErrorCode::InvalidConfig => "; check the --topic-config keys and values",
        _ => "",
    }
}
