//! [`RunConfig::validate`]: every field checked before anything connects,
//! every problem reported at once, each naming its flag and the constraint.
//! The stages' own options check themselves ([`TransformOptions::validate`],
//! [`crate::select::Selection::new`]); their problems are reported here in
//! the same list.
//!
//! [`TransformOptions::validate`]: crate::transform::options::TransformOptions::validate

use super::{
    ConfigError, Delivery, Format, Invalid, RunConfig, SnapshotMode, PINNED_PRODUCER_SETTINGS,
    SNAPSHOT_SLOT_SUFFIX,
};

impl RunConfig {
    /// Checks every field, reporting all problems together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut check = |ok: bool, field: &'static str, value: &str, constraint: &str| {
            if !ok {
                problems.push(Invalid {
                    field,
                    value: value.to_owned(),
                    constraint: constraint.to_owned(),
                });
            }
        };
        check(
            is_topic_prefix(&self.topic_prefix),
            "topic-prefix",
            &self.topic_prefix,
            "must start with a letter or '_' and contain only letters, digits, '.', '_' or '-' \
             (it also names Avro schemas)",
        );
        check(
            self.encode.format != Format::Avro || is_avro_namespace(&self.topic_prefix),
            "topic-prefix",
            &self.topic_prefix,
            "with --format avro must be dot-separated Avro names (letters, digits and '_', \
             each part starting with a letter or '_'): it is the namespace of every schema",
        );
        check(
            is_identifier(&self.slot_name),
            "slot",
            &self.slot_name,
            "must be 1-63 lowercase letters, digits or '_' (PostgreSQL's rule for slot names)",
        );
        check(
            !self.publication_name.is_empty() && self.publication_name.len() <= 63,
            "publication",
            &self.publication_name,
            "must be 1-63 characters",
        );
        check(
            !self.bootstrap_servers.trim().is_empty(),
            "bootstrap-servers",
            &self.bootstrap_servers,
            "must name at least one host:port",
        );
        check(
            self.slot_name.len() <= 63 - SNAPSHOT_SLOT_SUFFIX.len(),
            "slot",
            &self.slot_name,
            &format!(
                "must leave room for the {SNAPSHOT_SLOT_SUFFIX:?} suffix of the slot used while snapshotting ({} characters at most)",
                63 - SNAPSHOT_SLOT_SUFFIX.len()
            ),
        );
        check(
            self.snapshot_workers != Some(0) && self.snapshot_chunk_pages > 0,
            "snapshot-workers",
            &format!("{:?}", self.snapshot_workers),
            "and --snapshot-chunk-pages must be at least 1",
        );
        check(
            self.signal_data_collection.as_deref().is_none_or(|t| {
                t.split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
            }),
            "signal-data-collection",
            self.signal_data_collection.as_deref().unwrap_or(""),
            "must name a table as schema.table",
        );
        check(
            self.incremental_snapshot_chunk_size > 0,
            "incremental-snapshot-chunk-size",
            &self.incremental_snapshot_chunk_size.to_string(),
            "must be at least 1",
        );
        check(
            self.max_in_flight_messages > 0,
            "max-in-flight-messages",
            &self.max_in_flight_messages.to_string(),
            "must be at least 1",
        );
        check(
            self.max_in_flight_bytes >= 1024,
            "max-in-flight-bytes",
            &self.max_in_flight_bytes.to_string(),
            "must be at least 1024",
        );
        check(
            self.encode.format != Format::Avro || self.encode.schema_registry_url.is_some(),
            "schema-registry-url",
            "",
            "is required with --format avro",
        );
        for table in &self.tables {
            check(
                table
                    .split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty()),
                "table",
                table,
                "must be schema.table",
            );
        }
        // --- transaction metadata and heartbeats ---
        if let Some(topic) = &self.transaction_topic {
            check(
                is_topic_name(topic),
                "transaction-topic",
                topic,
                "must be 1-249 letters, digits, '.', '_' or '-' (a Kafka topic name)",
            );
        }
        check(
            is_topic_name(&self.heartbeat_topics_prefix)
                && self.names().heartbeat_topic().len() <= 249,
            "heartbeat-topics-prefix",
            &self.heartbeat_topics_prefix,
            "must be letters, digits, '.', '_' or '-', and with '.<topic-prefix>' at most 249 \
             characters (a Kafka topic name)",
        );
        check(
            self.heartbeat_action_query.is_none() || !self.heartbeat_interval.is_zero(),
            "heartbeat-action-query",
            "",
            "runs at each heartbeat, so it needs --heartbeat-interval (e.g. 10s)",
        );
        check(
            self.heartbeat_action_query
                .as_deref()
                .is_none_or(|q| !q.trim().is_empty()),
            "heartbeat-action-query",
            "",
            "must not be empty",
        );
        for (key, value) in &self.kafka_properties {
            if let Some((_, pinned)) = PINNED_PRODUCER_SETTINGS.iter().find(|(k, _)| k == key) {
                check(
                    value == pinned,
                    "kafka-property",
                    &format!("{key}={value}"),
                    &format!("contradicts the delivery guarantee, which needs {key}={pinned}"),
                );
            }
            check(
                key != "bootstrap.servers",
                "kafka-property",
                key,
                "is set by --bootstrap-servers",
            );
        }
        // --- transforms ---
        for problem in self.transform.validate() {
            check(false, problem.field, &problem.value, &problem.constraint);
        }
        check(
            !self.slot_temporary
                || matches!(self.snapshot_mode, SnapshotMode::Never | SnapshotMode::NoData),
            "slot-temporary",
            "true",
            "needs --snapshot-mode never or no_data: a temporary slot cannot carry a snapshot's position to a later run",
        );
        // --- exactly-once ---
        if self.delivery == Delivery::ExactlyOnce {
            let name = self.names().connector_name();
            check(
                !name.is_empty()
                    && name.len() <= 200
                    && !name.chars().any(|c| c.is_control() || c.is_whitespace()),
                "connector-name",
                &name,
                "must be 1-200 characters without spaces (it names the transactional.id)",
            );
            check(
                is_topic_prefix(&self.names().progress_topic()),
                "progress-topic",
                &self.names().progress_topic(),
                "must contain only letters, digits, '.', '_' or '-'",
            );
            check(
                self.eos_max_batch_transactions > 0 && self.eos_max_batch_bytes > 0,
                "eos-max-batch-transactions",
                &self.eos_max_batch_transactions.to_string(),
                "and --eos-max-batch-bytes must be at least 1",
            );
            for (key, _) in &self.kafka_properties {
                check(
                    key != "transactional.id",
                    "kafka-property",
                    key,
                    "is set from --connector-name with --delivery exactly-once",
                );
            }
        }
        // --- selection and routing ---
        if let Err(invalid) = crate::select::Selection::new(&self.select, &self.tables) {
            problems.extend(invalid);
        }
        if let Err(invalid) =
            crate::select::TopicRouter::from_options(&self.select, &self.topic_prefix)
        {
            problems.extend(invalid);
        }
        for (flag, value) in [
            ("topic-partitions", self.topic_partitions),
            ("topic-replication-factor", self.topic_replication_factor),
        ] {
            if let Some(n) = value.filter(|&n| n < 1) {
                problems.push(Invalid {
                    field: flag,
                    value: n.to_string(),
                    constraint: "must be at least 1".to_owned(),
                });
            }
        }
        problems.extend(self.pg_password.problems(&self.pg_url));
        problems.extend(self.kafka_security.problems(self));
        if self.encode.schema_registry_basic_auth.is_some()
            && self.encode.schema_registry_basic_auth_file.is_some()
        {
            problems.push(Invalid {
                field: "schema-registry-basic-auth",
                value: String::new(),
                constraint: "and --schema-registry-basic-auth-file are both set; give it once"
                    .to_owned(),
            });
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError(problems))
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

fn is_topic_prefix(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Whether `s` is an Avro namespace: dot-separated names matching
/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_avro_namespace(s: &str) -> bool {
    s.split('.').all(|part| {
        part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 249
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}
