//! The connector's configuration: one tree, from flags, `PGCDC_*`
//! environment variables, a `--config` TOML file and an imported
//! `--debezium-config` (in that order of precedence, see [`layers`]),
//! validated before anything connects.

pub mod debezium;
mod file;
pub mod layers;
pub mod show;

pub use layers::{ConfigSources, LoadError, Origin, Origins, Problem};

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use clap::{Args, ValueEnum};
use rdkafka::config::ClientConfig;

use crate::source::types::{
    DecimalHandling, IntervalHandling, ValueOptions, DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER,
};

/// Everything `pgcdc-kafka run` needs.
#[derive(Debug, Clone, Args)]
pub struct RunConfig {
    /// PostgreSQL connection URL (libpq style), e.g. postgres://user:pw@host:5432/db.
    #[arg(long, env = "PGCDC_PG_URL")]
    pub pg_url: PgUrl,

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
    #[arg(long, env = "PGCDC_MAX_IN_FLIGHT_BYTES", default_value_t = 256 * 1024 * 1024)]
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

    /// Extra librdkafka producer properties, key=value (repeatable).
    #[arg(long = "kafka-property", value_parser = parse_key_value)]
    pub kafka_properties: Vec<(String, String)>,
}

/// A PostgreSQL connection URL whose password never reaches a log.
#[derive(Clone)]
pub struct PgUrl {
    raw: String,
    parsed: tokio_postgres::Config,
}

impl PgUrl {
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
        let parsed = s.parse::<tokio_postgres::Config>().map_err(|e| {
            format!("not a PostgreSQL connection URL ({e}); expected postgres://user:password@host:port/database")
        })?;
        Ok(PgUrl {
            raw: s.to_owned(),
            parsed,
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
        )
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
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError(problems))
        }
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
        config
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
    fn pass_through_properties_override_defaults_but_not_guarantees() {
        let c = parse(&["--topic-prefix", "app", "--kafka-property", "linger.ms=50"]);
        c.validate().expect("valid");
        let pc = c.producer_config();
        assert_eq!(pc.get("linger.ms"), Some("50"));
        assert_eq!(pc.get("enable.idempotence"), Some("true"));
    }
}
