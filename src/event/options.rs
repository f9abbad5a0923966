//! The options of the metadata records the stream writes besides the
//! changes ([`super::metadata`]): transaction BEGIN/END records and
//! heartbeats. Flattened into `run`'s flags; the stream's metadata state is
//! built from these and the derived topic names alone. They validate
//! themselves.

use std::time::Duration;

use clap::Args;

use crate::naming::{is_topic_name, Names};
use crate::options::{Invalid, Problems};

/// Debezium's `topic.heartbeat.prefix` default.
pub const DEFAULT_HEARTBEAT_TOPICS_PREFIX: &str = "__debezium-heartbeat";

/// Transaction metadata and heartbeats (Debezium's
/// `provide.transaction.metadata` and `heartbeat.*`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Operations")]
pub struct MetadataOptions {
    /// Write a BEGIN and an END record per transaction to --transaction-topic
    /// and fill each event's `transaction` block (Debezium's
    /// provide.transaction.metadata).
    #[arg(long, env = "PGCDC_PROVIDE_TRANSACTION_METADATA", default_value_t = false, action = clap::ArgAction::Set)]
    pub provide_transaction_metadata: bool,

    /// Topic of the transaction BEGIN/END records (default <prefix>.transaction).
    #[arg(long, env = "PGCDC_TRANSACTION_TOPIC")]
    pub transaction_topic: Option<String>,

    /// Send a heartbeat record this often while between transactions, and
    /// confirm the slot up to the server's reported WAL position once Kafka
    /// acknowledged it (Debezium's heartbeat.interval.ms); 0 turns heartbeats off.
    #[arg(long, env = "PGCDC_HEARTBEAT_INTERVAL", default_value = "0", value_parser = humantime::parse_duration)]
    pub heartbeat_interval: Duration,

    /// Heartbeats go to <heartbeat-topics-prefix>.<topic-prefix> (topic.heartbeat.prefix).
    #[arg(
        long,
        env = "PGCDC_HEARTBEAT_TOPICS_PREFIX",
        default_value = DEFAULT_HEARTBEAT_TOPICS_PREFIX
    )]
    pub heartbeat_topics_prefix: String,

    /// The whole heartbeat topic name, instead of
    /// <heartbeat-topics-prefix>.<topic-prefix> (topic.heartbeat.name).
    #[arg(long, env = "PGCDC_HEARTBEAT_TOPIC")]
    pub heartbeat_topic: Option<String>,

    /// SQL run on the connector's SQL connection before each heartbeat, e.g.
    /// an INSERT into a heartbeat table (heartbeat.action.query).
    #[arg(long, env = "PGCDC_HEARTBEAT_ACTION_QUERY")]
    pub heartbeat_action_query: Option<String>,
}

impl MetadataOptions {
    /// Every problem of these options; `names` derives the heartbeat topic
    /// (whose length depends on the topic prefix too).
    pub fn validate(&self, names: &Names) -> Vec<Invalid> {
        let mut p = Problems::default();
        if let Some(topic) = &self.transaction_topic {
            p.check(
                is_topic_name(topic),
                "transaction-topic",
                topic,
                "must be 1-249 letters, digits, '.', '_' or '-' (a Kafka topic name)",
            );
        }
        if let Some(topic) = &self.heartbeat_topic {
            p.check(
                is_topic_name(topic),
                "heartbeat-topic",
                topic,
                "must be 1-249 letters, digits, '.', '_' or '-' (a Kafka topic name)",
            );
        }
        p.check(
            is_topic_name(&self.heartbeat_topics_prefix),
            "heartbeat-topics-prefix",
            &self.heartbeat_topics_prefix,
            "must be letters, digits, '.', '_' or '-' (it starts a Kafka topic name)",
        );
        let topic = names.heartbeat_topic();
        if self.heartbeat_topic.is_none()
            && is_topic_name(&self.heartbeat_topics_prefix)
            && is_topic_name(&names.prefix)
            && topic.len() > 249
        {
            // Blame the setting that makes it too long: the topic prefix when
            // even the default heartbeat prefix would not fit beside it.
            let room = 249 - names.delimiter.len();
            if DEFAULT_HEARTBEAT_TOPICS_PREFIX.len() + names.prefix.len() > room {
                p.0.push(Invalid {
                    field: "topic-prefix",
                    value: names.prefix.clone(),
                    constraint: format!(
                        "is {} characters: the heartbeat topic <heartbeat-topics-prefix>{}<topic-prefix> \
                         would be {} characters, over Kafka's 249; with the default \
                         --heartbeat-topics-prefix the topic prefix may have {} at most",
                        names.prefix.len(),
                        names.delimiter,
                        topic.len(),
                        room.saturating_sub(DEFAULT_HEARTBEAT_TOPICS_PREFIX.len()),
                    ),
                });
            } else {
                p.0.push(Invalid {
                    field: "heartbeat-topics-prefix",
                    value: self.heartbeat_topics_prefix.clone(),
                    constraint: format!(
                        "makes the heartbeat topic <heartbeat-topics-prefix>{}<topic-prefix> {} \
                         characters, over Kafka's 249; shorten it to {} at most",
                        names.delimiter,
                        topic.len(),
                        room.saturating_sub(names.prefix.len()),
                    ),
                });
            }
        }
        p.check(
            self.heartbeat_action_query.is_none() || !self.heartbeat_interval.is_zero(),
            "heartbeat-action-query",
            "",
            "runs at each heartbeat, so it needs --heartbeat-interval (e.g. 10s)",
        );
        p.check(
            self.heartbeat_action_query
                .as_deref()
                .is_none_or(|q| !q.trim().is_empty()),
            "heartbeat-action-query",
            "",
            "must not be empty",
        );
        p.0
    }
}
