//! `--notification-*`: the channels snapshot notifications go to
//! (Debezium's `notification.*` settings); see [`crate::notification`].

use clap::{Args, ValueEnum};

use crate::options::Problems;

/// A notification channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Channel {
    /// A record in --notification-sink-topic-name.
    Sink,
    /// A line in the log.
    Log,
}

/// `--notification-*`: where notifications go.
#[derive(Debug, Clone, Default, Args)]
pub struct NotificationOptions {
    /// Where snapshot notifications go, comma separated: sink (a Kafka topic,
    /// --notification-sink-topic-name), log (Debezium's
    /// notification.enabled.channels). None by default.
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_NOTIFICATION_ENABLED_CHANNELS",
        value_enum,
        value_delimiter = ','
    )]
    pub notification_enabled_channels: Vec<Channel>,

    /// The topic of the sink channel (notification.sink.topic.name).
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_NOTIFICATION_SINK_TOPIC_NAME"
    )]
    pub notification_sink_topic_name: Option<String>,
}

impl NotificationOptions {
    /// The sink channel's topic, when that channel is on.
    pub fn sink_topic(&self) -> Option<&str> {
        let sink = self.notification_enabled_channels.contains(&Channel::Sink);
        self.notification_sink_topic_name
            .as_deref()
            .filter(|_| sink)
    }

    /// The sink channel needs its topic.
    pub fn check(&self, p: &mut Problems) {
        let sink = self.notification_enabled_channels.contains(&Channel::Sink);
        let topic = self.notification_sink_topic_name.as_deref().unwrap_or("");
        p.check(
            !sink || crate::naming::is_topic_name(topic),
            "notification-sink-topic-name",
            topic,
            "the sink notification channel needs a topic: set --notification-sink-topic-name \
             (notification.sink.topic.name) to a Kafka topic name",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_channel_needs_a_topic() {
        let mut p = Problems::default();
        let options = NotificationOptions {
            notification_enabled_channels: vec![Channel::Sink, Channel::Log],
            notification_sink_topic_name: None,
        };
        options.check(&mut p);
        assert_eq!(p.0.len(), 1);
        assert!(p.0[0].constraint.contains("--notification-sink-topic-name"));
        let mut p = Problems::default();
        NotificationOptions {
            notification_sink_topic_name: Some("app.notifications".into()),
            ..options
        }
        .check(&mut p);
        assert!(p.0.is_empty());
    }
}
