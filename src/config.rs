//! The connector's configuration: one tree, from flags, `PGCDC_*`
//! environment variables, a `--config` TOML file and an imported
//! `--debezium-config` (in that order of precedence, see [`layers`]),
//! validated before anything connects.

pub mod debezium;
mod file;
pub mod layers;
pub mod security;
pub mod show;

pub use layers::{ConfigSources, LoadError, Origin, Origins, Problem};
pub use security::{SaslMechanism, SecurityProtocol};

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use clap::{Args, ValueEnum};
use rdkafka::config::ClientConfig;

use crate::source::replication::ReplicationConfig;
pub use crate::source::setup::PublicationAutocreateMode;
use crate::source::tls::PgTls;
use crate::source::types::{
    BinaryHandling, DecimalHandling, HstoreHandling, IntervalHandling, TimePrecision, ValueOptions,
    DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER,
};
use security::{KafkaSecurity, PgPassword};

/// Everything `pgcdc-kafka run` needs.
#[derive(Debug, Clone, Args)]
pub struct RunConfig {
    /// PostgreSQL connection URL (libpq style), e.g. postgres://user:pw@host:5432/db.
    #[arg(long, env = "PGCDC_PG_URL")]
    pub pg_url: PgUrl,

    #[command(flatten)]
    pub pg_password: PgPassword,

    #[command(flatten)]
    pub kafka_security: KafkaSecurity,

    /// Kafka bootstrap servers, comma separated.
    #[arg(
        long,
        env = "PGCDC_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: String,

    /// Prefix of every topic (Debezium's topic.prefix): data goes to <prefix>.<schema>.<table>.
    #[arg(long, env = "PGCDC_TOPIC_PREFIX")]
    pub topic_prefix: String,

    /// Logical replication slot to stream from; created if missing.
    #[arg(long = "slot", env = "PGCDC_SLOT", default_value = "pgcdc")]
    pub slot_name: String,

    /// Publication to stream; created if missing (FOR ALL TABLES, or --table).
    #[arg(
        long = "publication",
        env = "PGCDC_PUBLICATION",
        default_value = "pgcdc"
    )]
    pub publication_name: String,

    /// Tables (schema.table) to put in the publication when it is created.
    /// Without it a missing publication is created FOR ALL TABLES.
    #[arg(long = "table", env = "PGCDC_TABLES", value_delimiter = ',')]
    pub tables: Vec<String>,

    /// Embed the Kafka Connect schema in every JSON key and value
    /// (JsonConverter's schemas.enable).
    #[arg(long, env = "PGCDC_JSON_SCHEMAS", default_value_t = true, action = clap::ArgAction::Set)]
    pub json_schemas: bool,

    /// Encoding of keys and values: json (Kafka Connect JsonConverter) or avro
    /// (Confluent AvroConverter, with schemas in --schema-registry-url).
    #[arg(long, env = "PGCDC_FORMAT", value_enum, default_value = "json")]
    pub format: Format,

    /// Confluent-compatible schema registry base URL (needed for --format avro).
    #[arg(long, env = "PGCDC_SCHEMA_REGISTRY_URL")]
    pub schema_registry_url: Option<String>,

    /// Schema registry basic auth, user:password.
    #[arg(long, env = "PGCDC_SCHEMA_REGISTRY_BASIC_AUTH")]
    pub schema_registry_basic_auth: Option<Secret>,

    /// File holding the schema registry's basic auth, user:password (a
    /// trailing newline is ignored).
    #[arg(long, env = "PGCDC_SCHEMA_REGISTRY_BASIC_AUTH_FILE", value_parser = security::read_secret_file)]
    pub schema_registry_basic_auth_file: Option<Secret>,

    /// PEM file of the CA that signs the schema registry's TLS certificate.
    #[arg(long, env = "PGCDC_SCHEMA_REGISTRY_CA")]
    pub schema_registry_ca: Option<std::path::PathBuf>,

    /// Avro types for dates, times and decimals: debezium (Debezium's Connect
    /// types: plain int/long/string with connect.name) or native (Avro logical types).
    #[arg(
        long,
        env = "PGCDC_AVRO_LOGICAL_TYPES",
        value_enum,
        default_value = "debezium"
    )]
    pub avro_logical_types: AvroLogicalTypes,

    /// Registry subject names: topic (<topic>-key / <topic>-value) or record
    /// (the record's full name).
    #[arg(
        long,
        env = "PGCDC_SUBJECT_NAME_STRATEGY",
        value_enum,
        default_value = "topic"
    )]
    pub subject_name_strategy: SubjectNameStrategy,

    /// When to snapshot existing rows (Debezium's snapshot.mode): initial
    /// (when the slot is new), initial_only (snapshot, then exit), never /
    /// no_data (stream only), when_needed (also when the slot is missing or
    /// was invalidated: it is dropped and taken again).
    #[arg(
        long,
        env = "PGCDC_SNAPSHOT_MODE",
        value_enum,
        default_value = "initial"
    )]
    pub snapshot_mode: SnapshotMode,

    /// Connections reading the snapshot in parallel (default: the number of cores).
    #[arg(long, env = "PGCDC_SNAPSHOT_WORKERS")]
    pub snapshot_workers: Option<usize>,

    /// Table pages (8 kB each) per snapshot chunk: big tables are split into
    /// chunks of this many pages, read by all workers.
    #[arg(long, env = "PGCDC_SNAPSHOT_CHUNK_PAGES", default_value_t = 4096)]
    pub snapshot_chunk_pages: u32,

    /// The signal table, schema.table (Debezium's signal.data.collection),
    /// with columns (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL,
    /// data varchar(2048)); it must be in the publication. A row of type
    /// `execute-snapshot` starts an incremental snapshot of the tables it
    /// names, `stop-snapshot` stops it (see docs/SNAPSHOTS.md).
    #[arg(long, env = "PGCDC_SIGNAL_DATA_COLLECTION")]
    pub signal_data_collection: Option<String>,

    /// Rows per incremental snapshot chunk (Debezium's incremental.snapshot.chunk.size).
    #[arg(
        long,
        env = "PGCDC_INCREMENTAL_SNAPSHOT_CHUNK_SIZE",
        default_value_t = 1024
    )]
    pub incremental_snapshot_chunk_size: u32,

    /// Write a tombstone (same key, null value) after each delete, so log
    /// compaction can drop the key (Debezium's tombstones.on.delete).
    #[arg(long, env = "PGCDC_TOMBSTONES_ON_DELETE", default_value_t = true, action = clap::ArgAction::Set)]
    pub tombstones_on_delete: bool,

    /// Operations not to emit, comma separated among c (insert), u (update),
    /// d (delete), t (truncate), or `none` (Debezium's skipped.operations).
    #[arg(long, env = "PGCDC_SKIPPED_OPERATIONS", default_value = "t", value_parser = parse_skipped_operations)]
    pub skipped_operations: SkippedOperations,

    /// How NUMERIC and MONEY values are written (Debezium's decimal.handling.mode):
    /// precise (Connect Decimal bytes), double, or string. In precise mode a
    /// NUMERIC NaN or Infinity stops the connector with an error rather than
    /// being written as null; choose double or string for columns that hold them.
    #[arg(
        long,
        env = "PGCDC_DECIMAL_HANDLING",
        value_enum,
        default_value = "precise"
    )]
    pub decimal_handling: DecimalHandling,

    /// How INTERVAL values are written (interval.handling.mode): numeric
    /// (int64 microseconds) or string (ISO-8601).
    #[arg(
        long,
        env = "PGCDC_INTERVAL_HANDLING",
        value_enum,
        default_value = "numeric"
    )]
    pub interval_handling: IntervalHandling,

    /// Written in place of unchanged TOASTed values (unavailable.value.placeholder).
    #[arg(long, env = "PGCDC_UNAVAILABLE_VALUE_PLACEHOLDER", default_value = DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER)]
    pub unavailable_value_placeholder: String,

    /// Stop by itself once caught up (for scheduled jobs): `start-lsn` (the
    /// default when given without a value) drains up to the server's WAL
    /// position at start; `idle` stops after --idle-timeout without changes.
    #[arg(long, env = "PGCDC_STOP_WHEN_CAUGHT_UP", value_enum, num_args = 0..=1, default_missing_value = "start-lsn")]
    pub stop_when_caught_up: Option<CaughtUp>,

    /// With `--stop-when-caught-up idle`: how long without changes counts as caught up.
    #[arg(long, env = "PGCDC_IDLE_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,

    /// Stop gracefully after this long even if behind; the next run continues
    /// from what was acknowledged.
    #[arg(long, env = "PGCDC_MAX_RUN", value_parser = humantime::parse_duration)]
    pub max_run: Option<Duration>,

    /// Most messages handed to Kafka and not yet acknowledged.
    #[arg(long, env = "PGCDC_MAX_IN_FLIGHT_MESSAGES", default_value_t = 100_000)]
    pub max_in_flight_messages: usize,

    /// Most bytes (keys + values) handed to Kafka and not yet acknowledged.
    /// Peak memory follows it (librdkafka holds a copy of each record until
    /// it is acknowledged); 64 MiB keeps a fast backlog of JSON records
    /// with embedded schemas under 100 MB RSS at no measured throughput cost.
    #[arg(long, env = "PGCDC_MAX_IN_FLIGHT_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_in_flight_bytes: usize,

    /// How often the confirmed position is reported to Postgres.
    #[arg(long, env = "PGCDC_STATUS_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub status_interval: Duration,

    /// How long a graceful shutdown waits for Kafka to acknowledge in-flight messages.
    #[arg(long, env = "PGCDC_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,

    /// Serve Prometheus metrics (/metrics) and health checks (/healthz,
    /// /readyz) on this address, e.g. 127.0.0.1:9187.
    #[arg(long, env = "PGCDC_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    // --- value handling ---
    /// How BYTEA values are written (Debezium's binary.handling.mode): bytes
    /// (Connect bytes; base64 in JSON), or a string in base64, base64-url-safe or hex.
    #[arg(
        long,
        env = "PGCDC_BINARY_HANDLING",
        value_enum,
        default_value = "bytes"
    )]
    pub binary_handling: BinaryHandling,

    /// How DATE, TIME and TIMESTAMP values are written (time.precision.mode):
    /// adaptive (Debezium's types at the column's precision), adaptive_time_microseconds
    /// (TIME always in microseconds), or connect (Kafka Connect's Date, Time and
    /// Timestamp, in milliseconds: finer digits are dropped).
    #[arg(
        long,
        env = "PGCDC_TIME_PRECISION",
        value_enum,
        default_value = "adaptive"
    )]
    pub time_precision: TimePrecision,

    /// How HSTORE values are written (hstore.handling.mode): json (a JSON object
    /// in a string) or map (a Connect map of string to optional string).
    #[arg(
        long,
        env = "PGCDC_HSTORE_HANDLING",
        value_enum,
        default_value = "json"
    )]
    pub hstore_handling: HstoreHandling,
    // --- transforms ---
    /// Outbox tables (schema.table, repeatable or comma separated): each row
    /// inserted into one becomes an event on the topic its routing column
    /// names (Debezium's outbox EventRouter); their deletes produce nothing.
    #[arg(
        long = "outbox-table",
        env = "PGCDC_OUTBOX_TABLE",
        value_delimiter = ','
    )]
    pub outbox_tables: Vec<String>,

    /// Outbox column with the event id, sent as the `id` header (table.field.event.id).
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_EVENT_ID", default_value = "id")]
    pub outbox_field_event_id: String,

    /// Outbox column with the record key, the aggregate id (table.field.event.key).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_FIELD_EVENT_KEY",
        default_value = "aggregateid"
    )]
    pub outbox_field_event_key: String,

    /// Outbox column with the event type, sent as the `eventType` header when present.
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_EVENT_TYPE", default_value = "type")]
    pub outbox_field_event_type: String,

    /// Outbox column with the payload, the record value as it is (table.field.event.payload).
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_PAYLOAD", default_value = "payload")]
    pub outbox_field_payload: String,

    /// Outbox column whose value names the topic (route.by.field).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_ROUTE_BY_FIELD",
        default_value = "aggregatetype"
    )]
    pub outbox_route_by_field: String,

    /// Topic of outbox events; ${routedByValue} is the routing column's value
    /// (route.topic.replacement).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_ROUTE_TOPIC_REPLACEMENT",
        default_value = "outbox.event.${routedByValue}"
    )]
    pub outbox_route_topic_replacement: String,

    /// More outbox columns for each event: column:header[:alias] adds a
    /// header, column:envelope[:alias] makes the value {payload, alias...}
    /// (table.fields.additional.placement).
    #[arg(long, env = "PGCDC_OUTBOX_ADDITIONAL_PLACEMENT", default_value = "", value_parser = crate::transform::parse_additional_placement)]
    pub outbox_additional_placement: crate::transform::AdditionalPlacement,

    /// Value of records of non-outbox tables: debezium (the change event
    /// envelope) or unwrap (the row itself, as ExtractNewRecordState).
    #[arg(long, env = "PGCDC_ENVELOPE", value_enum, default_value = "debezium")]
    pub envelope: crate::transform::EnvelopeMode,

    /// With --envelope unwrap, what a delete becomes: drop, tombstone,
    /// rewrite (the before row with __deleted "true") or rewrite-with-tombstone
    /// (delete.tombstone.handling.mode).
    #[arg(
        long,
        env = "PGCDC_UNWRAP_DELETE_HANDLING",
        value_enum,
        default_value = "tombstone"
    )]
    pub unwrap_delete_handling: crate::transform::DeleteHandling,

    /// With --envelope unwrap, envelope fields added to the value as
    /// __<name>: e.g. op,table,lsn,source.ts_ms (add.fields).
    #[arg(long, env = "PGCDC_UNWRAP_ADD_FIELDS", default_value = "", value_parser = crate::transform::parse_metadata_fields)]
    pub unwrap_add_fields: crate::transform::MetadataFields,

    /// With --envelope unwrap, envelope fields added as __<name> headers (add.headers).
    #[arg(long, env = "PGCDC_UNWRAP_ADD_HEADERS", default_value = "", value_parser = crate::transform::parse_metadata_fields)]
    pub unwrap_add_headers: crate::transform::MetadataFields,
    // --- selection and routing ---
    /// Schemas to capture: comma-separated regexes matching the whole schema
    /// name, ignoring case (`\,` for a comma in one); Debezium's schema.include.list.
    #[arg(long, env = "PGCDC_SCHEMA_INCLUDE_LIST")]
    pub schema_include_list: Option<String>,

    /// Schemas not to capture (schema.exclude.list); not with --schema-include-list.
    #[arg(long, env = "PGCDC_SCHEMA_EXCLUDE_LIST")]
    pub schema_exclude_list: Option<String>,

    /// Tables to capture: comma-separated regexes matching the whole
    /// `schema.table`, ignoring case (table.include.list).
    #[arg(long, env = "PGCDC_TABLE_INCLUDE_LIST")]
    pub table_include_list: Option<String>,

    /// Tables not to capture (table.exclude.list); not with --table-include-list.
    #[arg(long, env = "PGCDC_TABLE_EXCLUDE_LIST")]
    pub table_exclude_list: Option<String>,

    /// Columns to capture: regexes matching `schema.table.column`; the others
    /// vanish from schemas and values (column.include.list).
    #[arg(long, env = "PGCDC_COLUMN_INCLUDE_LIST")]
    pub column_include_list: Option<String>,

    /// Columns to leave out (column.exclude.list); key columns cannot be left out.
    #[arg(long, env = "PGCDC_COLUMN_EXCLUDE_LIST")]
    pub column_exclude_list: Option<String>,

    /// Key columns per table, overriding the primary key (message.key.columns):
    /// `schema.table:col1,col2;schema2.table2:colA`, the table part a regex.
    #[arg(long, env = "PGCDC_MESSAGE_KEY_COLUMNS")]
    pub message_key_columns: Option<String>,

    /// Between the parts of topic names: <prefix><d><schema><d><table> (topic.delimiter).
    #[arg(long, env = "PGCDC_TOPIC_DELIMITER", default_value = ".")]
    pub topic_delimiter: String,

    /// REGEX=REPLACEMENT (repeatable; the first match wins): records whose
    /// default topic the regex matches go to the replacement, `$1` naming
    /// groups (Debezium's ByLogicalTableRouter topic.regex / topic.replacement).
    #[arg(long, env = "PGCDC_TOPIC_ROUTE")]
    pub topic_route: Vec<String>,

    /// Key field added to routed records, holding their default topic (key.field.name).
    #[arg(
        long,
        env = "PGCDC_TOPIC_ROUTE_KEY_FIELD",
        default_value = "__dbz__physicalTableIdentifier"
    )]
    pub topic_route_key_field: String,

    /// Whether routed keys get --topic-route-key-field (key.enforce.uniqueness).
    #[arg(long, env = "PGCDC_TOPIC_ROUTE_KEY_UNIQUENESS", default_value_t = true, action = clap::ArgAction::Set)]
    pub topic_route_key_uniqueness: bool,

    /// Partitions of topics the connector creates; with --topic-replication-factor
    /// or --topic-config, each topic is created on first use if missing.
    #[arg(long, env = "PGCDC_TOPIC_PARTITIONS")]
    pub topic_partitions: Option<i32>,

    /// Replication factor of topics the connector creates.
    #[arg(long, env = "PGCDC_TOPIC_REPLICATION_FACTOR")]
    pub topic_replication_factor: Option<i32>,

    /// Topic configuration of created topics, key=value (repeatable), e.g. cleanup.policy=compact.
    #[arg(long = "topic-config", env = "PGCDC_TOPIC_CONFIG", value_parser = parse_key_value)]
    pub topic_config: Vec<(String, String)>,

    /// all_tables (create FOR ALL TABLES if missing), filtered (create or
    /// alter it to exactly the selected tables), or disabled (it must exist);
    /// Debezium's publication.autocreate.mode.
    #[arg(
        long,
        env = "PGCDC_PUBLICATION_AUTOCREATE_MODE",
        value_enum,
        default_value = "all_tables"
    )]
    pub publication_autocreate_mode: PublicationAutocreateMode,

    /// Publish changes of partitions as their partitioned root table
    /// (publish_via_partition_root), set when the publication is created or altered.
    #[arg(long, env = "PGCDC_PUBLISH_VIA_PARTITION_ROOT", default_value_t = false, action = clap::ArgAction::Set)]
    pub publish_via_partition_root: bool,

    /// Drop the slot after a graceful stop (slot.drop.on.stop): changes made
    /// after it are never captured.
    #[arg(long, env = "PGCDC_SLOT_DROP_ON_STOP", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slot_drop_on_stop: bool,

    /// Stream from a temporary slot that the replication connection creates
    /// and that dies with it: nothing is left on the server when the
    /// connector goes, but nothing survives a lost connection either, so the
    /// connector stops (never retries) when it loses it. For ad-hoc taps and
    /// tests; needs --snapshot-mode never or no_data.
    #[arg(long, env = "PGCDC_SLOT_TEMPORARY", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slot_temporary: bool,
    // --- transaction metadata and heartbeats ---
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
        default_value = "__debezium-heartbeat"
    )]
    pub heartbeat_topics_prefix: String,

    /// SQL run on the connector's SQL connection before each heartbeat, e.g.
    /// an INSERT into a heartbeat table (heartbeat.action.query).
    #[arg(long, env = "PGCDC_HEARTBEAT_ACTION_QUERY")]
    pub heartbeat_action_query: Option<String>,
    // --- exactly-once ---
    /// Delivery guarantee: at-least-once (the default) or exactly-once (a
    /// transactional producer; consumers with isolation.level=read_committed
    /// see every committed Postgres transaction exactly once). See docs/EXACTLY_ONCE.md.
    #[arg(
        long,
        env = "PGCDC_DELIVERY",
        value_enum,
        default_value = "at-least-once"
    )]
    pub delivery: Delivery,

    /// Name of this connector (default: the topic prefix). With
    /// --delivery exactly-once it keys the progress record and makes the
    /// transactional.id `pgcdc-kafka-<name>`, which fences other instances.
    #[arg(long, env = "PGCDC_CONNECTOR_NAME")]
    pub connector_name: Option<String>,

    /// Compacted topic recording the last Postgres position committed to
    /// Kafka (default: <prefix>.progress); created if missing.
    #[arg(long, env = "PGCDC_PROGRESS_TOPIC")]
    pub progress_topic: Option<String>,

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

    /// Extra librdkafka producer properties, key=value (repeatable).
    #[arg(long = "kafka-property", value_parser = parse_key_value)]
    pub kafka_properties: Vec<(String, String)>,
}

/// A PostgreSQL connection URL whose password never reaches a log, with
/// its TLS settings (libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`;
/// see [`crate::source::tls`]).
#[derive(Clone)]
pub struct PgUrl {
    raw: String,
    parsed: tokio_postgres::Config,
    tls: PgTls,
}

impl PgUrl {
    /// The TLS settings.
    pub fn tls(&self) -> &PgTls {
        &self.tls
    }

    /// The same connection with `password` (from `--pg-password` or
    /// `--pg-password-file`) in place of the URL's.
    pub fn with_password(&self, password: &Secret) -> PgUrl {
        let mut url = self.clone();
        url.parsed.password(password.expose());
        url
    }

    /// Where the TCP connection goes: the first `hostaddr`, else the host.
    pub fn connect_host(&self) -> String {
        match self.parsed.get_hostaddrs().first() {
            Some(addr) => addr.to_string(),
            None => self.host(),
        }
    }

    /// A replication connection with these settings: host, port, user,
    /// password, database and TLS (the certificate checked against the
    /// URL's host, as on the SQL connection).
    pub fn replication_config(&self) -> ReplicationConfig {
        ReplicationConfig {
            host: self.connect_host(),
            port: self.port(),
            user: self.user(),
            password: Some(self.password()).filter(|p| !p.is_empty()),
            database: self.dbname(),
            tls: self.tls.clone(),
            tls_server_name: self.host(),
            application_name: "pgcdc-kafka".to_owned(),
            options: None,
        }
    }

    /// The parsed connection settings.
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.parsed
    }

    /// The URL as given, including any password: for connecting only.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// First host name, or 127.0.0.1 when the URL names none.
    pub fn host(&self) -> String {
        match self.parsed.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "127.0.0.1".to_owned(),
        }
    }

    /// First port, or 5432.
    pub fn port(&self) -> u16 {
        self.parsed.get_ports().first().copied().unwrap_or(5432)
    }

    /// The user name, or `postgres`.
    pub fn user(&self) -> String {
        self.parsed.get_user().unwrap_or("postgres").to_owned()
    }

    /// The password, or empty.
    pub fn password(&self) -> String {
        self.parsed
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    }

    /// The database name, or the user name as libpq defaults it.
    pub fn dbname(&self) -> String {
        self.parsed
            .get_dbname()
            .map(str::to_owned)
            .unwrap_or_else(|| self.user())
    }
}

impl std::str::FromStr for PgUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rest, parameters) = crate::source::tls::split_parameters(s);
        let mut parsed = rest.parse::<tokio_postgres::Config>().map_err(|e| {
            format!("not a PostgreSQL connection URL ({e}); expected postgres://user:password@host:port/database")
        })?;
        let tls = PgTls::from_parameters(&parameters).map_err(|e| e.to_string())?;
        parsed.ssl_mode(tls.tokio_postgres_mode());
        Ok(PgUrl {
            raw: s.to_owned(),
            parsed,
            tls,
        })
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "postgres://{}@{}:{}/{}",
            self.user(),
            self.host(),
            self.port(),
            self.dbname()
        )?;
        match self.tls.mode {
            crate::source::tls::SslMode::Prefer => Ok(()),
            mode => write!(f, "?sslmode={}", mode.as_str()),
        }
    }
}

/// When the connector snapshots existing rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum SnapshotMode {
    /// When the slot does not exist yet.
    Initial,
    /// Like initial, then exit instead of streaming.
    InitialOnly,
    /// Never: stream changes only.
    Never,
    /// Debezium's name for never.
    NoData,
    /// Like initial, and also when the slot was invalidated.
    WhenNeeded,
}

/// When a bounded run counts as caught up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaughtUp {
    /// Everything up to the server's WAL position at start has been read.
    StartLsn,
    /// No change arrived for --idle-timeout.
    Idle,
}

/// The delivery guarantee (`--delivery`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Delivery {
    /// Idempotent producer; a crash re-sends the tail since the last confirmed transaction.
    #[default]
    AtLeastOnce,
    /// Transactional producer; read_committed consumers see each change once.
    ExactlyOnce,
}

/// Encoding of keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Json,
    Avro,
}

/// How Avro schemas represent temporal and decimal columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AvroLogicalTypes {
    /// Debezium-compatible: the Connect types, as the Confluent AvroConverter writes them.
    Debezium,
    /// Avro's own logical types (date, time-micros, timestamp-micros, uuid, decimal).
    Native,
}

/// How registry subjects are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SubjectNameStrategy {
    /// `<topic>-key` and `<topic>-value` (TopicNameStrategy).
    Topic,
    /// The record's full name (RecordNameStrategy).
    Record,
}

/// A secret: parsed like a string, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for handing to a client.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Which change kinds are not emitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkippedOperations {
    pub inserts: bool,
    pub updates: bool,
    pub deletes: bool,
    pub truncates: bool,
}

fn parse_skipped_operations(s: &str) -> Result<SkippedOperations, String> {
    let mut skipped = SkippedOperations::default();
    if s.trim() == "none" {
        return Ok(skipped);
    }
    for op in s.split(',').map(str::trim).filter(|op| !op.is_empty()) {
        match op {
            "c" => skipped.inserts = true,
            "u" => skipped.updates = true,
            "d" => skipped.deletes = true,
            "t" => skipped.truncates = true,
            other => {
                return Err(format!(
                    "unknown operation {other:?}; expected a comma-separated list of c, u, d, t, or none"
                ))
            }
        }
    }
    Ok(skipped)
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected key=value, got {s:?}"))?;
    Ok((k.trim().to_owned(), v.trim().to_owned()))
}

/// A configuration value that fails validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: &'static str,
    pub value: String,
    pub constraint: String,
}

/// Every invalid field at once.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:{}", .0.iter().map(|i| format!("\n  {}: {:?} {}", i.field, i.value, i.constraint)).collect::<String>())]
pub struct ConfigError(pub Vec<Invalid>);

/// Suffix of the slot that exists only while an initial snapshot runs.
pub const SNAPSHOT_SLOT_SUFFIX: &str = "_snapshot";

/// librdkafka settings the delivery guarantee depends on; a pass-through
/// property may not contradict them.
const PINNED_PRODUCER_SETTINGS: &[(&str, &str)] =
    &[("enable.idempotence", "true"), ("acks", "all")];

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

/// Parses `run`'s flags alone (for embedding and tests).
#[derive(Debug, clap::Parser)]
#[command(name = "pgcdc-kafka run")]
struct RunArgs {
    #[command(flatten)]
    run: RunConfig,
}

/// `run`'s flags and the files layered under them.
#[derive(Debug, clap::Parser)]
#[command(name = "pgcdc-kafka run")]
struct LoadArgs {
    #[command(flatten)]
    sources: ConfigSources,
    #[command(flatten)]
    run: RunConfig,
}

impl RunConfig {
    /// Parses `run`'s command-line flags (without the program name), with
    /// the same defaults and `PGCDC_*` environment variables as the binary.
    pub fn from_args<I, S>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        let argv = std::iter::once(std::ffi::OsString::from("run"))
            .chain(args.into_iter().map(Into::into));
        RunArgs::try_parse_from(argv).map(|a| a.run)
    }

    /// Parses `run`'s flags (without the program name) with `--config` and
    /// `--debezium-config` layered under flags and environment, and
    /// validates the result: every problem of every layer at once.
    pub fn load<I, S>(args: I) -> Result<(Self, Origins), LoadError>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString>,
    {
        use clap::CommandFactory;
        let cmd = LoadArgs::command();
        let loaded = layers::load::<LoadArgs>(cmd.clone(), args)?;
        let config = loaded.value.run;
        layers::finish(&cmd, &loaded.origins, loaded.problems, config.validate())?;
        Ok((config, loaded.origins))
    }

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
            self.format != Format::Avro || is_avro_namespace(&self.topic_prefix),
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
            self.format != Format::Avro || self.schema_registry_url.is_some(),
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
            is_topic_name(&self.heartbeat_topics_prefix) && self.heartbeat_topic().len() <= 249,
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
        for table in &self.outbox_tables {
            check(
                table
                    .split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty()),
                "outbox-table",
                table,
                "must be schema.table",
            );
        }
        for (field, value) in [
            ("outbox-field-event-id", &self.outbox_field_event_id),
            ("outbox-field-event-key", &self.outbox_field_event_key),
            ("outbox-field-event-type", &self.outbox_field_event_type),
            ("outbox-field-payload", &self.outbox_field_payload),
            ("outbox-route-by-field", &self.outbox_route_by_field),
            (
                "outbox-route-topic-replacement",
                &self.outbox_route_topic_replacement,
            ),
        ] {
            check(
                !value.trim().is_empty(),
                field,
                value,
                "must name a column (or a topic)",
            );
        }
        let unwrapping = self.envelope == crate::transform::EnvelopeMode::Unwrap;
        check(
            unwrapping
                || (self.unwrap_add_fields.0.is_empty() && self.unwrap_add_headers.0.is_empty()),
            "unwrap-add-fields",
            "",
            "and --unwrap-add-headers need --envelope unwrap",
        );
        check(
            !self.slot_temporary
                || matches!(self.snapshot_mode, SnapshotMode::Never | SnapshotMode::NoData),
            "slot-temporary",
            "true",
            "needs --snapshot-mode never or no_data: a temporary slot cannot carry a snapshot's position to a later run",
        );
        // --- exactly-once ---
        if self.delivery == Delivery::ExactlyOnce {
            let name = self.connector_name();
            check(
                !name.is_empty()
                    && name.len() <= 200
                    && !name.chars().any(|c| c.is_control() || c.is_whitespace()),
                "connector-name",
                &name,
                "must be 1-200 characters without spaces (it names the transactional.id)",
            );
            check(
                is_topic_prefix(&self.progress_topic()),
                "progress-topic",
                &self.progress_topic(),
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
        if let Err(invalid) = crate::select::Selection::from_config(self) {
            problems.extend(invalid);
        }
        if let Err(invalid) = crate::select::TopicRouter::from_config(self) {
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
        if self.schema_registry_basic_auth.is_some()
            && self.schema_registry_basic_auth_file.is_some()
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

    /// The topic of transaction BEGIN/END records.
    pub fn transaction_topic(&self) -> String {
        self.transaction_topic
            .clone()
            .unwrap_or_else(|| format!("{}{}transaction", self.topic_prefix, self.topic_delimiter))
    }

    /// The topic of heartbeat records: `<heartbeat-topics-prefix>.<topic-prefix>`
    /// (with `--topic-delimiter` in place of the dot, as Debezium names them).
    pub fn heartbeat_topic(&self) -> String {
        format!(
            "{}{}{}",
            self.heartbeat_topics_prefix, self.topic_delimiter, self.topic_prefix
        )
    }

    // --- exactly-once ---
    /// `--connector-name`, or the topic prefix.
    pub fn connector_name(&self) -> String {
        self.connector_name
            .clone()
            .unwrap_or_else(|| self.topic_prefix.clone())
    }

    /// The transactional.id of `--delivery exactly-once`.
    pub fn transactional_id(&self) -> String {
        format!("pgcdc-kafka-{}", self.connector_name())
    }

    /// `--progress-topic`, or `<prefix>.progress`.
    pub fn progress_topic(&self) -> String {
        self.progress_topic
            .clone()
            .unwrap_or_else(|| format!("{}.progress", self.topic_prefix))
    }

    /// Parallel snapshot connections.
    pub fn snapshot_workers(&self) -> usize {
        self.snapshot_workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        })
    }

    /// The slot that exists only while the initial snapshot runs.
    pub fn snapshot_slot_name(&self) -> String {
        format!("{}{SNAPSHOT_SLOT_SUFFIX}", self.slot_name)
    }

    /// How column values are decoded.
    pub fn value_options(&self) -> ValueOptions {
        ValueOptions {
            unavailable_value_placeholder: self.unavailable_value_placeholder.clone(),
            decimal_handling: self.decimal_handling,
            interval_handling: self.interval_handling,
            binary_handling: self.binary_handling,
            time_precision: self.time_precision,
            hstore_handling: self.hstore_handling,
            ..ValueOptions::default()
        }
    }

    /// The librdkafka producer configuration: the one place it is built.
    pub fn producer_config(&self) -> ClientConfig {
        let mut settings: BTreeMap<&str, String> = BTreeMap::new();
        settings.insert("bootstrap.servers", self.bootstrap_servers.clone());
        for (k, v) in PINNED_PRODUCER_SETTINGS {
            settings.insert(k, (*v).to_owned());
        }
        // Java clients' default partitioner for keyed records, so consumers that
        // co-partition with Debezium's topics (joins, compaction) see the same layout.
        settings.insert("partitioner", "murmur2_random".to_owned());
        settings.insert("compression.type", "lz4".to_owned());
        settings.insert("linger.ms", "5".to_owned());
        settings.insert("client.id", format!("pgcdc-kafka-{}", self.topic_prefix));
        let mut config = ClientConfig::new();
        for (k, v) in settings {
            config.set(k, v);
        }
        for (k, v) in &self.kafka_properties {
            config.set(k, v);
        }
        // After the pass-through, which validation keeps from contradicting them.
        for typed in self.kafka_security.properties() {
            config.set(typed.property, typed.value);
        }
        config
    }

    /// The PostgreSQL connection: `--pg-url` with `--pg-password` (or the
    /// file's) applied.
    pub fn pg(&self) -> PgUrl {
        match self.pg_password.get() {
            Some(password) => self.pg_url.with_password(password),
            None => self.pg_url.clone(),
        }
    }

    /// The schema registry's `user:password`, from the flag or its file.
    pub fn schema_registry_auth(&self) -> Option<&Secret> {
        self.schema_registry_basic_auth
            .as_ref()
            .or(self.schema_registry_basic_auth_file.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> RunConfig {
        let mut argv = vec!["--pg-url", "postgres://u:secret@db:5433/shop"];
        argv.extend_from_slice(args);
        RunConfig::from_args(argv).expect("arguments parse")
    }

    #[test]
    fn avro_needs_a_prefix_that_is_an_avro_namespace() {
        let json = parse(&["--topic-prefix", "my-app"]);
        assert!(json.validate().is_ok(), "'-' is fine for JSON topics");
        let avro = parse(&[
            "--topic-prefix",
            "my-app",
            "--format",
            "avro",
            "--schema-registry-url",
            "http://127.0.0.1:8081",
        ]);
        let error = avro.validate().expect_err("'-' is not valid in Avro names");
        assert!(error.to_string().contains("namespace"), "{error}");
        let fine = parse(&[
            "--topic-prefix",
            "my_app.eu1",
            "--format",
            "avro",
            "--schema-registry-url",
            "http://127.0.0.1:8081",
        ]);
        assert!(fine.validate().is_ok());
    }

    #[test]
    fn url_accessors_and_redaction() {
        let c = parse(&["--topic-prefix", "app"]);
        assert_eq!(c.pg_url.host(), "db");
        assert_eq!(c.pg_url.port(), 5433);
        assert_eq!(c.pg_url.dbname(), "shop");
        assert_eq!(c.pg_url.password(), "secret");
        assert!(!format!("{:?}", c.pg_url).contains("secret"));
    }

    #[test]
    fn reports_every_invalid_field() {
        let c = parse(&[
            "--topic-prefix",
            "9bad prefix",
            "--slot",
            "Bad-Slot",
            "--kafka-property",
            "acks=1",
        ]);
        let err = c.validate().expect_err("invalid");
        let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
        assert_eq!(fields, ["topic-prefix", "slot", "kafka-property"]);
        assert!(err.to_string().contains("acks=all"));
    }

    #[test]
    fn skipped_operations_parse_like_debezium() {
        assert_eq!(
            parse(&["--topic-prefix", "a"]).skipped_operations,
            SkippedOperations {
                truncates: true,
                ..Default::default()
            }
        );
        let none = parse(&["--topic-prefix", "a", "--skipped-operations", "none"]);
        assert_eq!(none.skipped_operations, SkippedOperations::default());
        let some = parse(&["--topic-prefix", "a", "--skipped-operations", "c,d"]);
        assert!(some.skipped_operations.inserts && some.skipped_operations.deletes);
        assert!(RunConfig::from_args([
            "--pg-url",
            "postgres://h/d",
            "--topic-prefix",
            "a",
            "--skipped-operations",
            "x"
        ])
        .is_err());
    }

    #[test]
    fn value_handling_flags_reach_the_value_options() {
        let defaults = parse(&["--topic-prefix", "a"]).value_options();
        assert_eq!(defaults, ValueOptions::default());
        let c = parse(&[
            "--topic-prefix",
            "a",
            "--binary-handling",
            "base64-url-safe",
            "--time-precision",
            "adaptive_time_microseconds",
            "--hstore-handling",
            "map",
        ]);
        let o = c.value_options();
        assert_eq!(o.binary_handling, BinaryHandling::Base64UrlSafe);
        assert_eq!(o.time_precision, TimePrecision::AdaptiveTimeMicroseconds);
        assert_eq!(o.hstore_handling, HstoreHandling::Map);
        let connect = parse(&["--topic-prefix", "a", "--time-precision", "connect"]);
        assert_eq!(
            connect.value_options().time_precision,
            TimePrecision::Connect
        );
        for (flag, bad) in [
            ("--binary-handling", "utf8"),
            ("--time-precision", "micro"),
            ("--hstore-handling", "text"),
        ] {
            let err = RunConfig::from_args([
                "--pg-url",
                "postgres://h/d",
                "--topic-prefix",
                "a",
                flag,
                bad,
            ])
            .expect_err("unknown mode rejected");
            assert!(err.to_string().contains("possible values"), "{err}");
        }
    }

    #[test]
    fn transaction_metadata_and_heartbeat_flags() {
        let c = parse(&["--topic-prefix", "app"]);
        assert!(!c.provide_transaction_metadata);
        assert_eq!(c.transaction_topic(), "app.transaction");
        assert!(c.heartbeat_interval.is_zero());
        assert_eq!(c.heartbeat_topic(), "__debezium-heartbeat.app");
        c.validate().expect("valid");
        let c = parse(&[
            "--topic-prefix",
            "app",
            "--provide-transaction-metadata",
            "true",
            "--transaction-topic",
            "txns",
            "--heartbeat-interval",
            "10s",
            "--heartbeat-topics-prefix",
            "hb",
        ]);
        assert!(c.provide_transaction_metadata);
        assert_eq!(c.transaction_topic(), "txns");
        assert_eq!(c.heartbeat_interval, Duration::from_secs(10));
        assert_eq!(c.heartbeat_topic(), "hb.app");
        c.validate().expect("valid");
        let bad = parse(&[
            "--topic-prefix",
            "app",
            "--transaction-topic",
            "a b",
            "--heartbeat-topics-prefix",
            "x/y",
            "--heartbeat-action-query",
            "INSERT INTO hb DEFAULT VALUES",
        ]);
        let err = bad.validate().expect_err("invalid");
        let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
        assert_eq!(
            fields,
            [
                "transaction-topic",
                "heartbeat-topics-prefix",
                "heartbeat-action-query"
            ]
        );
        assert!(err.to_string().contains("--heartbeat-interval"));
    }

    #[test]
    fn pass_through_properties_override_defaults_but_not_guarantees() {
        let c = parse(&["--topic-prefix", "app", "--kafka-property", "linger.ms=50"]);
        c.validate().expect("valid");
        let pc = c.producer_config();
        assert_eq!(pc.get("linger.ms"), Some("50"));
        assert_eq!(pc.get("enable.idempotence"), Some("true"));
    }
}
