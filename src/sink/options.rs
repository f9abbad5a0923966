//! The Kafka side's own options: the topics the connector creates and how
//! exactly-once groups Postgres transactions into Kafka transactions.
//! Flattened into `run`'s flags; [`super::topics::TopicCreator`] and
//! [`super::transactional::EosSettings`] are built from these (and the
//! producer's settings), not from the whole run configuration. Each
//! validates itself.

use std::time::Duration;

use clap::Args;

use crate::options::{parse_key_value, Invalid, Problems, PROPERTY_SEPARATOR};

/// Topic creation (`--topic-partitions` and friends): with any of them set,
/// each topic is created on first use if it is missing.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Delivery")]
pub struct TopicOptions {
    /// Partitions of topics the connector creates; with --topic-replication-factor
    /// or --topic-config, each topic is created on first use if missing.
    #[arg(long, env = "PGCDC_TOPIC_PARTITIONS")]
    pub topic_partitions: Option<i32>,

    /// Replication factor of topics the connector creates.
    #[arg(long, env = "PGCDC_TOPIC_REPLICATION_FACTOR")]
    pub topic_replication_factor: Option<i32>,

    /// Topic configuration of created topics, key=value (repeatable), e.g.
    /// cleanup.policy=compact. In PGCDC_TOPIC_CONFIG, one entry per line.
    #[arg(long = "topic-config", env = "PGCDC_TOPIC_CONFIG", value_delimiter = PROPERTY_SEPARATOR, value_parser = parse_key_value)]
    pub topic_config: Vec<(String, String)>,
}

impl TopicOptions {
    /// Whether topics are created at all.
    pub fn creates_topics(&self) -> bool {
        self.topic_partitions.is_some()
            || self.topic_replication_factor.is_some()
            || !self.topic_config.is_empty()
    }

    /// Every problem of these options.
    pub fn validate(&self) -> Vec<Invalid> {
        let mut p = Problems::default();
        for (field, value) in [
            ("topic-partitions", self.topic_partitions),
            ("topic-replication-factor", self.topic_replication_factor),
        ] {
            if let Some(n) = value {
                p.check(n >= 1, field, n.to_string(), "must be at least 1");
            }
        }
        p.0
    }
}

/// How `--delivery exactly-once` batches Postgres transactions into one
/// Kafka transaction (see [`super::transactional::BatchLimits`]).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Delivery")]
pub struct EosOptions {
    /// Most Postgres transactions grouped into one Kafka transaction.
    #[arg(long, env = "PGCDC_EOS_MAX_BATCH_TRANSACTIONS", default_value_t = 1000)]
    pub eos_max_batch_transactions: usize,

    /// Most record bytes (keys + values) grouped into one Kafka transaction
    /// (a single bigger Postgres transaction still goes in one).
    #[arg(long, env = "PGCDC_EOS_MAX_BATCH_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub eos_max_batch_bytes: usize,

    /// Longest a Kafka transaction stays open waiting for more Postgres
    /// transactions: the commit cadence (latency vs throughput).
    #[arg(long, env = "PGCDC_EOS_MAX_BATCH_TIME", default_value = "100ms", value_parser = humantime::parse_duration)]
    pub eos_max_batch_time: Duration,
}

impl EosOptions {
    /// Every problem of these options (checked with `--delivery exactly-once` only).
    pub fn validate(&self) -> Vec<Invalid> {
        let mut p = Problems::default();
        p.check(
            self.eos_max_batch_transactions > 0 && self.eos_max_batch_bytes > 0,
            "eos-max-batch-transactions",
            self.eos_max_batch_transactions.to_string(),
            "and --eos-max-batch-bytes must be at least 1",
        );
        p.0
    }
}
