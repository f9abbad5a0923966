//! `--signal-enabled-channels` and the `kafka` channel's settings
//! (Debezium's `signal.enabled.channels`, `signal.kafka.*`): where signals
//! come from besides the signal table; and `--read-only` (Debezium's
//! `read.only`), incremental snapshots that write nothing to the source,
//! whose signals come through Kafka. The channel itself is
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

    /// Incremental snapshots without writing to the source database (no
    /// watermark or progress rows): for replicas' primaries and locked-down
    /// sources, a role with SELECT and REPLICATION is enough. Needs the
    /// kafka signal channel (read.only; docs/SNAPSHOTS.md).
    #[arg(help_heading = "Snapshot", long, env = "PGCDC_READ_ONLY", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub read_only: bool,
}

impl SignalChannelOptions {
    /// Whether the kafka channel is on.
    pub fn kafka(&self) -> bool {
        self.signal_enabled_channels.contains(&SignalChannel::Kafka)
    }

    /// The kafka channel needs the signal table (for its watermarks and
    /// progress) unless read-only, and a valid topic name; read-only needs
    /// the kafka channel.
    pub fn check(&self, signal_table: Option<&str>, prefix: &str, p: &mut Problems) {
        p.check(
            !self.read_only || self.kafka(),
            "read-only",
            "true",
            "read-only incremental snapshots take their signals from Kafka: add kafka to \
             --signal-enabled-channels (a signal table is only read, never written)",
        );
        if !self.kafka() {
            return;
        }
        p.check(
            signal_table.is_some() || self.read_only,
            "signal-enabled-channels",
            "kafka",
            "the kafka signal channel needs --signal-data-collection too: incremental snapshots \
             write their watermarks and progress there; or run with --read-only, which writes \
             nothing to the source",
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

    /// The kafka channel's consumer settings over `base` (the connector's
    /// own Kafka connection settings): --signal-kafka-bootstrap-servers
    /// when given, its group, and offsets committed only by hand.
    pub fn kafka_consumer_config(&self, mut base: rdkafka::ClientConfig) -> rdkafka::ClientConfig {
        if let Some(servers) = &self.signal_kafka_bootstrap_servers {
            base.set("bootstrap.servers", servers);
        }
        base.set("group.id", &self.signal_kafka_group_id)
            .set("enable.auto.commit", "false");
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(channels: &[SignalChannel], read_only: bool) -> SignalChannelOptions {
        SignalChannelOptions {
            signal_enabled_channels: channels.to_vec(),
            signal_kafka_topic: None,
            signal_kafka_bootstrap_servers: None,
            signal_kafka_group_id: "kafka-signal".into(),
            read_only,
        }
    }

    fn fields(options: &SignalChannelOptions, signal_table: Option<&str>) -> Vec<&'static str> {
        let mut p = Problems::default();
        options.check(signal_table, "cdc", &mut p);
        p.0.iter().map(|i| i.field).collect()
    }

    #[test]
    fn read_only_takes_signals_from_kafka_without_a_signal_table() {
        use SignalChannel::{Kafka, Source};
        assert!(fields(&options(&[Kafka], true), None).is_empty());
        assert!(fields(&options(&[Source, Kafka], true), Some("public.s")).is_empty());
        assert_eq!(
            fields(&options(&[Source], true), Some("public.s")),
            ["read-only"],
            "read-only without the kafka channel has no signals"
        );
        assert_eq!(
            fields(&options(&[Kafka], false), None),
            ["signal-enabled-channels"],
            "read-write needs the signal table for its watermarks"
        );
    }
}
