//! Every name the connector derives from its settings, in one place so
//! that no two stages can spell one differently: the topics (tables,
//! logical messages, transaction metadata, heartbeats, the exactly-once
//! progress), registry subjects, the Kafka client and transactional ids,
//! the snapshot's working slot and the application names PostgreSQL shows.
//!
//! Kept as they are, Debezium's way: table, message, transaction and
//! heartbeat topics join their parts with `--topic-delimiter`; the progress
//! topic (ours, not Debezium's) is `<prefix>.progress` whatever the
//! delimiter, since changing it would orphan existing progress records.

use std::fmt::Display;

/// Suffix of the slot that exists only while an initial snapshot runs.
pub const SNAPSHOT_SLOT_SUFFIX: &str = "_snapshot";

/// The settings names are derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// `--topic-prefix`, Debezium's `topic.prefix`.
    pub prefix: String,
    /// `--topic-delimiter`.
    pub delimiter: String,
    /// `--connector-name`, if given (else the prefix).
    pub connector: Option<String>,
    /// `--slot`.
    pub slot: String,
    /// `--transaction-topic`, if given.
    pub transaction_topic: Option<String>,
    /// `--heartbeat-topics-prefix`.
    pub heartbeat_topics_prefix: String,
    /// `--heartbeat-topic`, if given (Debezium's `topic.heartbeat.name`).
    pub heartbeat_topic: Option<String>,
    /// `--progress-topic`, if given.
    pub progress_topic: Option<String>,
}

impl Names {
    /// The default topic of a table, `<prefix>.<schema>.<table>`, with every
    /// character Kafka does not allow in a topic name replaced by `_`, as
    /// Debezium's `TopicNamingStrategy.sanitizedTopicName` does.
    pub fn table_topic(&self, schema: &str, table: &str) -> String {
        table_topic(&self.prefix, &self.delimiter, schema, table)
    }

    /// The topic of `pg_logical_emit_message` records.
    pub fn message_topic(&self) -> String {
        message_topic(&self.prefix, &self.delimiter)
    }

    /// `--transaction-topic`, or `<prefix><delimiter>transaction`.
    pub fn transaction_topic(&self) -> String {
        self.transaction_topic
            .clone()
            .unwrap_or_else(|| format!("{}{}transaction", self.prefix, self.delimiter))
    }

    /// The topic of heartbeat records: `--heartbeat-topic`, or
    /// `<heartbeat-topics-prefix>.<topic-prefix>` (with `--topic-delimiter`
    /// in place of the dot, as Debezium names them).
    pub fn heartbeat_topic(&self) -> String {
        if let Some(topic) = &self.heartbeat_topic {
            return topic.clone();
        }
        format!(
            "{}{}{}",
            self.heartbeat_topics_prefix, self.delimiter, self.prefix
        )
    }

    /// `--progress-topic`, or `<prefix>.progress`.
    pub fn progress_topic(&self) -> String {
        self.progress_topic
            .clone()
            .unwrap_or_else(|| format!("{}.progress", self.prefix))
    }

    /// `--connector-name`, or the topic prefix.
    pub fn connector_name(&self) -> String {
        self.connector
            .clone()
            .unwrap_or_else(|| self.prefix.clone())
    }

    /// The transactional.id of `--delivery exactly-once`.
    pub fn transactional_id(&self) -> String {
        format!("pgcdc-kafka-{}", self.connector_name())
    }

    /// The producer's client.id.
    pub fn client_id(&self) -> String {
        format!("pgcdc-kafka-{}", self.prefix)
    }

    /// The application_name of the replication connection.
    pub fn application_name(&self) -> String {
        format!("pgcdc-kafka-{}", self.prefix)
    }

    /// The application_name of the connection that exports the snapshot.
    pub fn snapshot_application_name(&self) -> String {
        format!("pgcdc-kafka-{}-snapshot", self.prefix)
    }

    /// The slot that exists only while an initial snapshot runs.
    pub fn snapshot_slot(&self) -> String {
        snapshot_slot(&self.slot)
    }
}

/// The working slot of `slot` while its initial snapshot runs.
pub fn snapshot_slot(slot: &str) -> String {
    format!("{slot}{SNAPSHOT_SLOT_SUFFIX}")
}

/// `<prefix><delimiter><schema><delimiter><table>`, sanitized: the default
/// topic of a table (the topic router needs it without the other names).
pub fn table_topic(prefix: &str, delimiter: &str, schema: &str, table: &str) -> String {
    let d = delimiter;
    sanitized_topic(&format!("{prefix}{d}{schema}{d}{table}"))
}

/// `<prefix><delimiter>message`: the topic of logical messages.
pub fn message_topic(prefix: &str, delimiter: &str) -> String {
    format!("{prefix}{delimiter}message")
}

/// The registry subject of `part` (`key` or `value`) of records on `topic`:
/// `<topic>-<part>` (TopicNameStrategy), or with RecordNameStrategy the
/// record's full name when it has one (a primitive, such as an outbox
/// payload column, keeps the topic's subject).
pub fn subject(by_record: bool, topic: &str, part: impl Display, record: Option<&str>) -> String {
    match record {
        Some(name) if by_record => name.to_owned(),
        _ => format!("{topic}-{part}"),
    }
}

/// Whether `topic` is a legal Kafka topic name.
pub fn is_valid_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic.chars().all(is_topic_char)
}

/// Whether Kafka allows `c` in a topic name: `[a-zA-Z0-9._-]`.
pub fn is_topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// `name` with each character Kafka does not allow in a topic name replaced
/// by `_`: one `_` per UTF-16 unit, since Debezium replaces Java `char`s (so
/// an emoji, a surrogate pair, becomes `__`).
pub fn sanitized_topic(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match is_topic_char(c) {
            true => out.push(c),
            false => out.extend(std::iter::repeat_n('_', c.len_utf16())),
        }
    }
    out
}

/// Whether `s` is a valid Kafka topic name: 1-249 letters, digits, '.',
/// '_' or '-', and not `.` or `..`.
pub fn is_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 249
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// How schema names are made valid Avro names (Debezium's
/// `schema.name.adjustment.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum SchemaNameAdjustment {
    /// Names are kept as they are.
    #[default]
    None,
    /// Every character Avro does not allow becomes `_`.
    Avro,
    /// Every character Avro does not allow becomes `_uXXXX` (its UTF-16 code).
    AvroUnicode,
}

/// `name` adjusted as Debezium's `SchemaNameAdjuster` does: the first
/// character must be an ASCII letter or `_`, the others letters, digits,
/// `_` or `.`; any other (per UTF-16 unit) is replaced.
pub fn adjust_schema_name(name: &str, mode: SchemaNameAdjustment) -> String {
    let valid = |i: usize, c: char| {
        c == '_' || c.is_ascii_alphabetic() || (i > 0 && (c.is_ascii_digit() || c == '.'))
    };
    if mode == SchemaNameAdjustment::None || name.chars().enumerate().all(|(i, c)| valid(i, c)) {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        match (valid(i, c), mode) {
            (true, _) => out.push(c),
            (false, SchemaNameAdjustment::AvroUnicode) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("_u{unit:04x}"));
                }
            }
            (false, _) => out.push('_'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_keep_their_historical_shapes() {
        let mut names = Names {
            prefix: "app".to_owned(),
            delimiter: "_".to_owned(),
            connector: None,
            slot: "orders".to_owned(),
            transaction_topic: None,
            heartbeat_topics_prefix: "__debezium-heartbeat".to_owned(),
            heartbeat_topic: None,
            progress_topic: None,
        };
        assert_eq!(names.table_topic("public", "t"), "app_public_t");
        assert_eq!(names.message_topic(), "app_message");
        assert_eq!(names.transaction_topic(), "app_transaction");
        assert_eq!(names.heartbeat_topic(), "__debezium-heartbeat_app");
        assert_eq!(names.progress_topic(), "app.progress", "always a dot");
        assert_eq!(names.transactional_id(), "pgcdc-kafka-app");
        assert_eq!(names.snapshot_slot(), "orders_snapshot");
        names.connector = Some("c1".to_owned());
        assert_eq!(names.transactional_id(), "pgcdc-kafka-c1");
        assert_eq!(names.client_id(), "pgcdc-kafka-app");
    }

    #[test]
    fn subjects_by_topic_or_record() {
        assert_eq!(
            subject(false, "app.public.t", "value", Some("r.V")),
            "app.public.t-value"
        );
        assert_eq!(subject(true, "app.public.t", "value", Some("r.V")), "r.V");
        assert_eq!(
            subject(true, "app.public.t", "key", None),
            "app.public.t-key"
        );
    }

    #[test]
    fn schema_names_are_adjusted_as_debezium_does() {
        use SchemaNameAdjustment::*;
        assert_eq!(
            adjust_schema_name("app.public.my-table", None),
            "app.public.my-table"
        );
        assert_eq!(
            adjust_schema_name("app.public.my-table", Avro),
            "app.public.my_table"
        );
        assert_eq!(
            adjust_schema_name("1app.public.my-table", AvroUnicode),
            "_u0031app.public.my_u002dtable"
        );
        assert_eq!(adjust_schema_name("app.public.t2", Avro), "app.public.t2");
    }

    #[test]
    fn a_heartbeat_topic_name_overrides_the_prefix() {
        let mut names = Names {
            prefix: "app".to_owned(),
            delimiter: ".".to_owned(),
            connector: None,
            slot: "s".to_owned(),
            transaction_topic: None,
            heartbeat_topics_prefix: "hb".to_owned(),
            heartbeat_topic: None,
            progress_topic: None,
        };
        assert_eq!(names.heartbeat_topic(), "hb.app");
        names.heartbeat_topic = Some("shared-heartbeats".to_owned());
        assert_eq!(names.heartbeat_topic(), "shared-heartbeats");
    }
}
