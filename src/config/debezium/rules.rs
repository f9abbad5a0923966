//! The mapping as data: what happens to each Debezium property.

/// What happens to one Debezium property.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Copied to our key.
    To(&'static str),
    /// Milliseconds, to our duration key.
    Millis(&'static str),
    /// Converted to our key's value.
    Via(&'static str, fn(&str) -> Result<String, String>),
    /// Read together with related properties (see the group functions).
    Group(&'static str),
    /// Accepted, without effect: the reason.
    Ignore(&'static str),
    /// Accepted (without effect) only with one of these values: otherwise
    /// rejected with the reason.
    Only(&'static [&'static str], &'static str),
    /// Rejected: the reason.
    Reject(&'static str),
}

use Rule::*;

const ONE_TASK: &str = "the PostgreSQL connector always runs one task, as does pgcdc-kafka";

/// The Debezium PostgreSQL connector's properties (and the Kafka Connect
/// connector-level ones), by exact name.
#[rustfmt::skip]
pub const PROPERTIES: &[(&str, Rule)] = &[
    ("name", Ignore("the Kafka Connect connector name; a pgcdc-kafka instance is identified by its slot")),
    ("connector.class", Only(&["io.debezium.connector.postgresql.PostgresConnector"], "only the Debezium PostgreSQL connector can be imported")),
    ("tasks.max", Ignore(ONE_TASK)),
    ("plugin.name", Only(&["pgoutput"], "pgcdc-kafka decodes pgoutput only: set plugin.name=pgoutput (a slot of another plugin must be recreated)")),
    ("slot.name", To("slot")),
    ("slot.drop.on.stop", To("slot_drop_on_stop")),
    ("slot.failover", To("slot_failover")),
    ("slot.stream.params", Reject("extra pgoutput parameters are not supported")),
    ("slot.max.retries", Ignore("a slot in use is retried with backoff, without a limit")),
    ("slot.retry.delay.ms", Ignore("a slot in use is retried with backoff, without a limit")),
    ("publication.name", To("publication")),
    ("publication.autocreate.mode", To("publication_autocreate_mode")),
    ("replica.identity.autoset.values", Reject("pgcdc-kafka does not change tables' REPLICA IDENTITY; run ALTER TABLE ... REPLICA IDENTITY yourself")),
    ("database.hostname", Group("the PostgreSQL URL (pg_url)")),
    ("database.port", Group("the PostgreSQL URL (pg_url)")),
    ("database.user", Group("the PostgreSQL URL (pg_url)")),
    ("database.password", Group("the PostgreSQL URL (pg_url)")),
    ("database.dbname", Group("the PostgreSQL URL (pg_url)")),
    ("database.sslmode", Group("the PostgreSQL URL (pg_url): its sslmode parameter (disable, allow, prefer, require, verify-ca, verify-full)")),
    ("database.sslcert", Group("the PostgreSQL URL (pg_url): its sslcert parameter (a PEM file)")),
    ("database.sslkey", Group("the PostgreSQL URL (pg_url): its sslkey parameter (an unencrypted PEM key)")),
    ("database.sslpassword", Reject("encrypted client keys are not supported: decrypt the key (openssl pkey -in key.pem -out plain.pem) and keep the file private")),
    ("database.sslrootcert", Group("the PostgreSQL URL (pg_url): its sslrootcert parameter (a PEM file)")),
    ("database.sslfactory", Reject("SSL socket factories are Java classes; use database.sslmode and database.sslrootcert")),
    ("database.tcpKeepAlive", Ignore("not configurable: a dead connection is detected by wal_sender_timeout and the status updates")),
    ("database.initial.statements", Reject("statements run on connect are not supported")),
    ("database.query.timeout.ms", Ignore("catalog queries have no timeout")),
    ("database.server.name", Group("topic_prefix, when topic.prefix is not set (its name before Debezium 2.0)")),
    ("topic.prefix", To("topic_prefix")),
    ("schema.include.list", To("schema_include_list")),
    ("schema.exclude.list", To("schema_exclude_list")),
    ("table.include.list", Group("table_include_list (and outbox_table with the outbox EventRouter)")),
    ("table.exclude.list", To("table_exclude_list")),
    ("column.include.list", To("column_include_list")),
    ("column.exclude.list", To("column_exclude_list")),
    ("schema.whitelist", To("schema_include_list")),
    ("schema.blacklist", To("schema_exclude_list")),
    ("table.whitelist", To("table_include_list")),
    ("table.blacklist", To("table_exclude_list")),
    ("column.whitelist", To("column_include_list")),
    ("column.blacklist", To("column_exclude_list")),
    ("message.key.columns", To("message_key_columns")),
    ("skip.messages.without.change", Only(&["false"], "every change is written, also one that changes no included column")),
    ("time.precision.mode", To("time_precision")),
    ("decimal.handling.mode", To("decimal_handling")),
    ("hstore.handling.mode", To("hstore_handling")),
    ("interval.handling.mode", To("interval_handling")),
    ("binary.handling.mode", To("binary_handling")),
    ("money.fraction.digits", Only(&["2"], "MONEY values are written with 2 fraction digits")),
    ("tombstones.on.delete", To("tombstones_on_delete")),
    ("column.propagate.source.type", Reject("source column type parameters (__debezium.source.column.type) are not written")),
    ("datatype.propagate.source.type", Reject("source column type parameters (__debezium.source.column.type) are not written")),
    ("message.prefix.include.list", Reject("logical decoding message filters are not supported: every message goes to <prefix>.message")),
    ("message.prefix.exclude.list", Reject("logical decoding message filters are not supported: every message goes to <prefix>.message")),
    ("schema.name.adjustment.mode", Only(&["none"], "schema names are not adjusted")),
    ("field.name.adjustment.mode", Only(&["none"], "field names are not adjusted")),
    ("include.unknown.datatypes", Ignore("columns of types without a mapping are written as strings (see src/source/types.rs)")),
    ("converters", Reject("custom converters are Java classes and cannot run here")),
    ("snapshot.mode", Via("snapshot_mode", snapshot_mode)),
    ("snapshot.locking.mode", Ignore("the snapshot reads an exported snapshot and takes no table locks")),
    ("snapshot.lock.timeout.ms", Ignore("the snapshot takes no table locks")),
    ("snapshot.query.mode", Only(&["select_all"], "the snapshot reads whole tables")),
    ("snapshot.query.mode.custom.name", Reject("custom snapshot queries are not supported")),
    ("snapshot.include.collection.list", Reject("snapshotting a subset of the captured tables is not supported")),
    ("snapshot.select.statement.overrides", Reject("snapshot SELECT overrides are not supported")),
    ("snapshot.delay.ms", Reject("a delayed snapshot start is not supported")),
    ("snapshot.fetch.size", To("snapshot_fetch_size")),
    ("snapshot.max.threads", To("snapshot_workers")),
    ("snapshot.tables.order.by.row.count", Only(&["disabled"], "tables are snapshotted in catalog order")),
    ("snapshot.mode.custom.name", Reject("custom snapshotters are Java classes and cannot run here")),
    ("snapshot.locking.mode.custom.name", Reject("custom snapshot locking is a Java class and cannot run here")),
    ("streaming.delay.ms", Only(&["0"], "a delayed streaming start is not supported")),
    ("event.converting.failure.handling.mode", Only(&["fail"], "a value that cannot be converted stops the connector with an error naming the column; it is never written as null")),
    ("include.schema.comments", Only(&["false"], "column comments are not written into schemas")),
    ("executor.shutdown.timeout.ms", Ignore("shutdown waits --shutdown-timeout for acknowledgements")),
    ("toasted.value.placeholder", To("unavailable_value_placeholder")),
    ("sanitize.field.names", Only(&["false"], "field names are not adjusted")),
    ("event.processing.failure.handling.mode", Only(&["fail"], "pgcdc-kafka never skips an event it cannot process")),
    ("max.batch.size", Ignore("batching is librdkafka's (producer.override.batch.size, linger.ms)")),
    ("max.queue.size", Ignore("reading pauses at --max-in-flight-messages unacknowledged messages instead")),
    ("max.queue.size.in.bytes", Ignore("reading pauses at --max-in-flight-bytes unacknowledged bytes instead")),
    ("poll.interval.ms", Ignore("events are processed as they arrive")),
    ("status.update.interval.ms", Millis("status_interval")),
    ("heartbeat.interval.ms", Group("heartbeat_interval (0, Debezium's default, leaves heartbeats off)")),
    ("heartbeat.action.query", To("heartbeat_action_query")),
    ("heartbeat.topics.prefix", To("heartbeat_topics_prefix")),
    ("topic.heartbeat.prefix", To("heartbeat_topics_prefix")),
    ("schema.refresh.mode", Ignore("schemas are refreshed from every Relation message (like columns_diff)")),
    ("provide.transaction.metadata", To("provide_transaction_metadata")),
    ("topic.transaction", Group("transaction_topic = <topic.prefix>.<topic.transaction>")),
    ("topic.delimiter", To("topic_delimiter")),
    ("topic.naming.strategy", Only(&["io.debezium.schema.SchemaTopicNamingStrategy"], "topics are named <prefix>.<schema>.<table>; route them with the ByLogicalTableRouter transform")),
    ("topic.cache.size", Ignore("topic names are cached per table")),
    ("flush.lsn.source", Only(&["true"], "pgcdc-kafka always confirms the slot, once Kafka acknowledged")),
    ("retriable.restart.connector.wait.ms", Ignore("restarts after transient errors use exponential backoff")),
    ("skipped.operations", To("skipped_operations")),
    ("signal.data.collection", To("signal_data_collection")),
    ("signal.enabled.channels", Only(&["source"], "signals are read from the signal table only")),
    ("notification.enabled.channels", Reject("notifications are not supported")),
    ("incremental.snapshot.chunk.size", To("incremental_snapshot_chunk_size")),
    ("incremental.snapshot.watermarking.strategy", Ignore("watermarks update one progress row per slot in the signal table (docs/SNAPSHOTS.md)")),
    ("read.only", Only(&["false"], "read-only incremental snapshots are not supported")),
    ("xmin.fetch.interval.ms", Only(&["0"], "xmin tracking is not supported")),
    ("unavailable.value.placeholder", To("unavailable_value_placeholder")),
    ("custom.metric.tags", Ignore("metrics are served in Prometheus format by --metrics-addr")),
    ("errors.max.retries", Ignore("transient errors are retried with backoff, without a limit")),
    ("post.processors", Reject("post processors are Java classes and cannot run here")),
    ("lsn.flush.timeout.ms", Ignore("the slot is confirmed as Kafka acknowledges, without a timeout")),
    ("lsn.flush.timeout.action", Ignore("the slot is confirmed as Kafka acknowledges, without a timeout")),
    ("extended.headers.enabled", To("extended_headers")),
    ("guardrail.collections.max", Only(&["0"], "a limit on the number of captured tables is not supported")),
    ("guardrail.collections.limit.action", Ignore("a limit on the number of captured tables is not supported")),
    ("key.converter", Group("format (with the key.converter.* properties)")),
    ("value.converter", Group("format (with the value.converter.* properties)")),
    ("header.converter", Via("header_converter", header_converter)),
    ("header.converter.schemas.enable", Ignore("headers written by the JSON header converter carry a schema when value.converter.schemas.enable (json_value_schemas) is on")),
    ("transforms", Group("the transforms listed, by type (see below)")),
    ("predicates", Group("with transforms: only a TopicNameMatches predicate that sends the outbox table's topic to the EventRouter (and, negated, the rest to ExtractNewRecordState)")),
    ("topic.creation.enable", Ignore("a Kafka Connect worker setting")),
    ("topic.creation.groups", Reject("per-group topic creation settings are not supported: use topic.creation.default.*")),
    ("topic.creation.default.partitions", To("topic_partitions")),
    ("topic.creation.default.replication.factor", To("topic_replication_factor")),
    ("exactly.once.support", Reject("Kafka Connect's exactly-once source support does not apply; see pgcdc-kafka's delivery settings")),
    ("transaction.boundary", Reject("Kafka Connect's exactly-once source support does not apply; see pgcdc-kafka's delivery settings")),
    ("transaction.boundary.interval.ms", Reject("Kafka Connect's exactly-once source support does not apply; see pgcdc-kafka's delivery settings")),
    ("offsets.storage.topic", Ignore("offsets live in the replication slot")),
    ("config.action.reload", Ignore("a Kafka Connect setting")),
    ("errors.tolerance", Only(&["none"], "pgcdc-kafka never skips a record it cannot write")),
    ("errors.log.enable", Ignore("errors are logged")),
    ("errors.log.include.messages", Ignore("row values are never logged")),
    ("errors.retry.timeout", Ignore("transient errors are retried with backoff, without a limit")),
    ("errors.retry.delay.max.ms", Ignore("transient errors are retried with backoff, without a limit")),
];

/// Properties by prefix (after no exact match).
#[rustfmt::skip]
pub const PREFIXES: &[(&str, Rule)] = &[
    ("producer.override.", Group("the [kafka] producer properties (bootstrap.servers: bootstrap_servers)")),
    ("key.converter.", Group("with key.converter")),
    ("value.converter.", Group("with value.converter")),
    ("transforms.", Group("with transforms")),
    ("topic.creation.default.", Group("topic_config <name>=<value>")),
    ("topic.creation.", Reject("per-group topic creation settings are not supported: use topic.creation.default.*")),
    ("predicates.", Group("with predicates")),
    ("snapshot.mode.configuration.based.", Reject("configuration_based snapshots are not supported")),
    ("column.truncate.to.", Reject("column truncation is not supported")),
    ("column.mask.", Reject("column masking and hashing are not supported")),
    ("snapshot.select.statement.overrides.", Reject("snapshot SELECT overrides are not supported")),
    ("signal.", Reject("only the source signal channel (signal.data.collection) is supported")),
    ("notification.", Reject("notifications are not supported")),
    ("incremental.snapshot.", Reject("only incremental.snapshot.chunk.size is supported")),
    ("database.history.", Ignore("the PostgreSQL connector keeps no schema history")),
    ("schema.history.internal.", Ignore("the PostgreSQL connector keeps no schema history")),
    ("database.", Reject("JDBC driver pass-through properties are not supported")),
    ("driver.", Reject("JDBC driver pass-through properties are not supported")),
];

/// Debezium's own defaults that name where a connector's state lives; an
/// import without them must use the same slot and publication Debezium did.
pub(super) const DEBEZIUM_DEFAULTS: &[(&str, &str, &str)] = &[
    ("slot.name", "slot", "debezium"),
    ("publication.name", "publication", "dbz_publication"),
];

/// What Debezium's snapshot.mode becomes.
fn snapshot_mode(value: &str) -> Result<String, String> {
    match value {
        "initial" | "initial_only" | "no_data" | "when_needed" => Ok(value.to_owned()),
        "never" => Ok("no_data".to_owned()),
        "always" => Err("snapshotting at every start is not supported: use initial, initial_only, no_data or when_needed".to_owned()),
        "custom" => Err("custom snapshotters are Java classes and cannot run here".to_owned()),
        "configuration_based" => Err("configuration_based snapshots are not supported: use initial, initial_only, no_data or when_needed".to_owned()),
        "recovery" => Err("recovery snapshots need a schema history, which the PostgreSQL connector has none of".to_owned()),
        other => Err(format!("unknown snapshot.mode {other:?}: use initial, initial_only, never/no_data or when_needed")),
    }
}

fn header_converter(value: &str) -> Result<String, String> {
    match value {
        "org.apache.kafka.connect.storage.SimpleHeaderConverter" => Ok("simple".to_owned()),
        "org.apache.kafka.connect.json.JsonConverter" => Ok("json".to_owned()),
        other => Err(format!(
            "only SimpleHeaderConverter and JsonConverter are supported, not {other}"
        )),
    }
}

/// The rule for one property.
pub fn rule(property: &str) -> Option<Rule> {
    PROPERTIES
        .iter()
        .find(|(name, _)| *name == property)
        .or_else(|| {
            PREFIXES
                .iter()
                .find(|(prefix, _)| property.starts_with(prefix))
        })
        .map(|(_, rule)| *rule)
}

/// The mapping as a Markdown table, for docs/DEBEZIUM_CONFIG.md.
pub fn mapping_table() -> String {
    let mut out = String::from("| Debezium property | pgcdc-kafka |\n|---|---|\n");
    let describe = |rule: &Rule| match rule {
        To(key) | Millis(key) | Via(key, _) => format!("`{key}`"),
        Group(what) => (*what).to_owned(),
        Ignore(reason) => format!("accepted, ignored: {reason}"),
        Only(values, reason) => format!(
            "accepted only as `{}`; otherwise not supported: {reason}",
            values.join("`, `")
        ),
        Reject(reason) => format!("not supported: {reason}"),
    };
    for (name, rule) in PROPERTIES {
        out.push_str(&format!("| `{name}` | {} |\n", describe(rule)));
    }
    for (prefix, rule) in PREFIXES {
        out.push_str(&format!("| `{prefix}*` | {} |\n", describe(rule)));
    }
    out
}
