//! `--signal-enabled-channels` and the `kafka` channel's settings
//! (Debezium's `signal.enabled.channels`, `signal.kafka.*`): where signals
//! come from besides the signal table. The channel itself is
//! `crate::pipeline`'s (`kafka_signals.rs`).

use clap::{Args, ValueEnum};

use crate::options::Problems;

/// A signal channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SignalChannel {
    /// The signal table (--signal-data-collection), read from the stream.
    Source,
    /// A Kafka topic (--signal-kafka-topic).
    Kafka,
}

/// Debezium's signal channel settings.
#[derive(Debug, Clone, Args)]
pub struct SignalChannelOptions {
    /// Where signals are read, comma separated: source (the signal table),
    /// kafka (--signal-kafka-topic) (signal.enabled.channels).
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_SIGNAL_ENABLED_CHANNELS",
        value_enum,
        value_delimiter = ',',
        default_value = "source"
    )]
    pub signal_enabled_channels: Vec<SignalChannel>,

    /// The kafka channel's topic, partition 0 of which is read; records
    /// keyed by the topic prefix, valued `{"type": ..., "data": {...}}`
    /// (signal.kafka.topic; default `<prefix>-signal`).
    #[arg(help_heading = "Snapshot", long, env = "PGCDC_SIGNAL_KAFKA_TOPIC")]
    pub signal_kafka_topic: Option<String>,

    /// The kafka channel's brokers (signal.kafka.bootstrap.servers; default
    /// --bootstrap-servers, with the same security settings).
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_SIGNAL_KAFKA_BOOTSTRAP_SERVERS"
    )]
    pub signal_kafka_bootstrap_servers: Option<String>,

    /// The kafka channel's consumer group, where the position in the topic
    /// is kept (signal.kafka.groupId).
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_SIGNAL_KAFKA_GROUP_ID",
        default_value = "kafka-signal"
    )]
    pub signal_kafka_group_id: String,
}

impl SignalChannelOptions {
    /// Whether the kafka channel is on.
    pub fn kafka(&self) -> bool {
        self.signal_enabled_channels.contains(&SignalChannel::Kafka)
    }

    /// The kafka channel needs the signal table (for its watermarks and
    /// progress) and a valid topic name.
    pub fn check(&self, signal_table: Option<&str>, prefix: &str, p: &mut Problems) {
        if !self.kafka() {
            return;
        }
        p.check(
            signal_table.is_some(),
            "signal-enabled-channels",
            "kafka",
            "the kafka signal channel needs --signal-data-collection too: incremental snapshots \
             write their watermarks and progress there (read-only incremental snapshots are not \
             supported yet)",
        );
        let topic = self.topic(prefix);
        p.check(
            crate::naming::is_topic_name(&topic),
            "signal-kafka-topic",
            topic,
            "must be a Kafka topic name (1-249 letters, digits, '.', '_' or '-')",
        );
    }

    /// The signal topic: --signal-kafka-topic, or `<prefix>-signal` as Debezium's default.
    pub fn topic(&self, prefix: &str) -> String {
        self.signal_kafka_topic
            .clone()
            .unwrap_or_else(|| format!("{prefix}-signal"))
    }
}
