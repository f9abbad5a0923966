//! [`RunConfig::validate`]: every field checked before anything connects,
//! every problem reported at once, each naming its flag and the constraint.
//! The stages' own options check themselves ([`TransformOptions::validate`],
//! [`crate::select::Selection::new`]); their problems are reported here in
//! the same list.
//!
//! [`TransformOptions::validate`]: crate::transform::options::TransformOptions::validate

use crate::naming::{is_topic_name, SchemaNameAdjustment};
use crate::options::Problems;
use crate::source::replication::PgoutputBinary;

use super::{
    ConfigError, Delivery, Format, Invalid, RunConfig, SnapshotMode, PINNED_PRODUCER_SETTINGS,
    SNAPSHOT_SLOT_SUFFIX,
};

impl RunConfig {
    /// Checks every field, reporting all problems together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut p = Problems::default();
        self.check_names_and_snapshot(&mut p);
        self.check_metadata(&mut p);
        self.check_kafka_properties(&mut p);
        for problem in self.transform.validate() {
            p.0.push(problem);
        }
        self.check_temporary_slot(&mut p);
        self.check_exactly_once(&mut p);
        self.check_selection_and_secrets(&mut p);
        if let Err(e) = self.column_mappers() {
            p.0.extend(e.0);
        }
        if let Err(e) = self.topic_renames() {
            p.0.extend(e.0);
        }
        if let Err(problems) = self.snapshot_select.parse() {
            p.0.extend(problems);
        }
        self.notifications.check(&mut p);
        let signal_table = self.signal_data_collection.as_deref();
        (self.signal_channels).check(signal_table, &self.topic_prefix, &mut p);
        p.0.extend(self.streaming.problems());
        if p.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError(p.0))
        }
    }

    /// The prefix, slot and publication names, the snapshot and bounded-run flags, the tables.
    fn check_names_and_snapshot(&self, p: &mut Problems) {
        // Kafka's topic-name rules are the only ones a prefix must meet for
        // JSON (Debezium and Kafka accept `1app`); Avro also makes it the
        // namespace of every schema, whose rules are stricter.
        if !is_topic_name(&self.topic_prefix) {
            p.check(
                false,
                "topic-prefix",
                &self.topic_prefix,
                "must be 1-249 letters, digits, '.', '_' or '-' (it starts every topic name, \
                 and Kafka allows only these in topic names)",
            );
        } else {
            p.check(
                self.encode.format != Format::Avro
                    || is_avro_namespace(&self.topic_prefix)
                    || self.schema_name_adjustment_mode != SchemaNameAdjustment::None,
                "topic-prefix",
                &self.topic_prefix,
                "with --format avro must be dot-separated Avro names (letters, digits and '_', \
                 each part starting with a letter or '_', so no '-' and no leading digit): it is \
                 the namespace of every schema (or pass --schema-name-adjustment-mode avro to \
                 write '_' for what Avro refuses); Kafka and --format json accept it as it is",
            );
        }
        p.check(
            is_identifier(&self.slot_name),
            "slot",
            &self.slot_name,
            "must be 1-63 lowercase letters, digits or '_' (PostgreSQL's rule for slot names)",
        );
        p.check(
            !self.publication_name.is_empty() && self.publication_name.len() <= 63,
            "publication",
            &self.publication_name,
            "must be 1-63 characters",
        );
        p.check(
            !self.bootstrap_servers.trim().is_empty(),
            "bootstrap-servers",
            &self.bootstrap_servers,
            "must name at least one host:port",
        );
        p.check(
            self.slot_name.len() <= 63 - SNAPSHOT_SLOT_SUFFIX.len(),
            "slot",
            &self.slot_name,
            format!(
                "must leave room for the {SNAPSHOT_SLOT_SUFFIX:?} suffix of the slot used while snapshotting ({} characters at most)",
                63 - SNAPSHOT_SLOT_SUFFIX.len()
            ),
        );
        p.check(
            self.snapshot_workers != Some(0) && self.snapshot_chunk_pages > 0,
            "snapshot-workers",
            format!("{:?}", self.snapshot_workers),
            "and --snapshot-chunk-pages must be at least 1",
        );
        p.check(
            self.signal_data_collection.as_deref().is_none_or(|t| {
                t.split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
            }),
            "signal-data-collection",
            self.signal_data_collection.as_deref().unwrap_or(""),
            "must name a table as schema.table",
        );
        // Signals and incremental-snapshot windows read key and signal
        // values from the stream as text; binary tuples would be skipped.
        p.check(
            !(self.pgoutput_binary == PgoutputBinary::On
                && (self.signal_data_collection.is_some() || self.signal_channels.read_only)),
            "pgoutput-binary",
            "on",
            "cannot be combined with --signal-data-collection or --read-only yet (signals and \
             incremental snapshots read streamed values as text); use --pgoutput-binary auto or off",
        );
        p.check(
            self.snapshot_fetch_size > 0,
            "snapshot-fetch-size",
            self.snapshot_fetch_size.to_string(),
            "must be at least 1",
        );
        p.check(
            self.incremental_snapshot_chunk_size > 0,
            "incremental-snapshot-chunk-size",
            self.incremental_snapshot_chunk_size.to_string(),
            "must be at least 1",
        );
        p.check(
            (1..=64).contains(&self.incremental_snapshot_tables_in_flight),
            "incremental-snapshot-tables-in-flight",
            self.incremental_snapshot_tables_in_flight.to_string(),
            "must be between 1 (one table at a time) and 64 (each window selects a chunk of every table in flight, so its rows are held in memory together)",
        );
        p.check(
            self.max_in_flight_messages > 0,
            "max-in-flight-messages",
            self.max_in_flight_messages.to_string(),
            "must be at least 1",
        );
        p.check(
            self.max_in_flight_bytes >= 1024,
            "max-in-flight-bytes",
            self.max_in_flight_bytes.to_string(),
            "must be at least 1024",
        );
        p.check(
            self.encode.format != Format::Avro || self.encode.schema_registry_url.is_some(),
            "schema-registry-url",
            "",
            "is required with --format avro",
        );
        for table in &self.tables {
            p.check(
                table
                    .split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty()),
                "table",
                table,
                "must be schema.table",
            );
        }
    }

    /// Transaction metadata and heartbeats.
    fn check_metadata(&self, p: &mut Problems) {
        p.0.extend(self.metadata.validate(&self.names()));
    }

    /// Pass-through producer properties never contradict a typed setting.
    fn check_kafka_properties(&self, p: &mut Problems) {
        for (key, value) in &self.kafka_properties {
            if let Some((_, pinned)) = PINNED_PRODUCER_SETTINGS.iter().find(|(k, _)| k == key) {
                p.check(
                    value == pinned,
                    "kafka-property",
                    format!("{key}={value}"),
                    format!("contradicts the delivery guarantee, which needs {key}={pinned}"),
                );
            }
            p.check(
                key != "bootstrap.servers",
                "kafka-property",
                key,
                "is set by --bootstrap-servers",
            );
        }
    }

    /// A temporary slot cannot carry a snapshot.
    fn check_temporary_slot(&self, p: &mut Problems) {
        p.check(
            !self.slot_temporary
                || matches!(self.snapshot_mode, SnapshotMode::Never | SnapshotMode::NoData),
            "slot-temporary",
            "true",
            "needs --snapshot-mode never or no_data: a temporary slot cannot carry a snapshot's position to a later run",
        );
        p.check(
            !(self.slot_temporary && self.slot_failover),
            "slot-failover",
            "true",
            "cannot go with --slot-temporary: PostgreSQL synchronizes only persistent slots to standbys",
        );
    }

    /// `--delivery exactly-once` and its batching flags.
    fn check_exactly_once(&self, p: &mut Problems) {
        if self.delivery == Delivery::ExactlyOnce {
            let name = self.names().connector_name();
            p.check(
                !name.is_empty()
                    && name.len() <= 200
                    && !name.chars().any(|c| c.is_control() || c.is_whitespace()),
                "connector-name",
                &name,
                "must be 1-200 characters without spaces (it names the transactional.id)",
            );
            p.check(
                is_topic_name(&self.names().progress_topic()),
                "progress-topic",
                self.names().progress_topic(),
                "must contain only letters, digits, '.', '_' or '-'",
            );
            p.0.extend(self.eos.validate());
            for (key, _) in &self.kafka_properties {
                p.check(
                    key != "transactional.id",
                    "kafka-property",
                    key,
                    "is set from --connector-name with --delivery exactly-once",
                );
            }
        }
    }

    /// Selection and routing, topic creation, and the secrets given twice.
    fn check_selection_and_secrets(&self, p: &mut Problems) {
        if let Err(invalid) = crate::select::Selection::new(&self.select, &self.tables) {
            p.0.extend(invalid);
        }
        if let Err(invalid) =
            crate::select::TopicRouter::from_options(&self.select, &self.topic_prefix)
        {
            p.0.extend(invalid);
        }
        p.0.extend(self.topics.validate());
        p.0.extend(self.pg_password.problems(&self.pg_url));
        p.0.extend(self.kafka_security.problems(self));
        if self.encode.schema_registry_basic_auth.is_some()
            && self.encode.schema_registry_basic_auth_file.is_some()
        {
            p.0.push(Invalid {
                field: "schema-registry-basic-auth",
                value: String::new(),
                constraint: "and --schema-registry-basic-auth-file are both set; give it once"
                    .to_owned(),
            });
        }
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether `s` is an Avro namespace: dot-separated names matching
/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_avro_namespace(s: &str) -> bool {
    s.split('.').all(|part| {
        part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}
