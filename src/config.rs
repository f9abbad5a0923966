//! The connector's configuration: one tree, from flags, `PGCDC_*`
//! environment variables, a `--config` TOML file and an imported
//! `--debezium-config` (in that order of precedence, see [`layers`]),
//! validated before anything connects.

pub mod debezium;
mod file;
pub mod fleet;
pub mod layers;
mod pg_url;
pub mod pipelines;
pub mod security;
pub mod setting;
pub mod show;
mod validate;

pub use pg_url::PgUrl;

pub use security::{SaslMechanism, SecurityProtocol};
pub use setting::{ConfigSources, LoadError, Origin, Origins, Problem};

pub use crate::encode::options::{AvroLogicalTypes, EncodeOptions, Format, SubjectNameStrategy};
pub use crate::event::options::MetadataOptions;
use crate::naming::Names;
pub use crate::naming::SNAPSHOT_SLOT_SUFFIX;
use crate::options::{parse_key_value, PROPERTY_SEPARATOR};
pub use crate::options::{ConfigError, Invalid, Secret};
pub use crate::select::SelectOptions;
pub use crate::sink::options::{EosOptions, TopicOptions};
pub use crate::source::options::{PublicationAutocreateMode, PublicationOptions};
pub use crate::transform::options::TransformOptions;

use std::collections::BTreeMap;
use std::time::Duration;

use clap::{Args, ValueEnum};
use rdkafka::config::ClientConfig;

use help::{CONNECTION, DELIVERY, FORMAT, OPERATIONS, SELECTION, SNAPSHOT};

use crate::source::types::compat::{CompatBehaviour, DebeziumCompat};
use crate::source::types::{
    BinaryHandling, DecimalHandling, HstoreHandling, IntervalHandling, SpecialNumeric,
    TimePrecision, ValueOptions, DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER,
};
use security::{KafkaSecurity, PgPassword};

/// The headings of `run --help`: its flags grouped by what they are about.
pub mod help {
    pub const CONNECTION: &str = "Connection";
    pub const SELECTION: &str = "Selection and routing";
    pub const FORMAT: &str = "Format";
    pub const DELIVERY: &str = "Delivery";
    pub const SNAPSHOT: &str = "Snapshot";
    pub const TRANSFORMS: &str = "Transforms";
    pub const OPERATIONS: &str = "Operations";
    pub const FILES: &str = "Configuration files";
    /// Every heading, in the order `--help` shows them.
    pub const ALL: &[&str] = &[
        FILES, CONNECTION, SELECTION, FORMAT, SNAPSHOT, DELIVERY, TRANSFORMS, OPERATIONS,
    ];
}

/// Everything `pgcdc-kafka run` needs.
#[derive(Debug, Clone, Args)]
pub struct RunConfig {
    /// PostgreSQL connection URL (libpq style), e.g. postgres://user:pw@host:5432/db.
    #[arg(help_heading = CONNECTION, long, env = "PGCDC_PG_URL")]
    pub pg_url: PgUrl,

    #[command(flatten)]
    pub pg_password: PgPassword,

    #[command(flatten)]
    pub kafka_security: KafkaSecurity,

    /// Kafka bootstrap servers, comma separated.
    #[arg(
        help_heading = CONNECTION,
        long,
        env = "PGCDC_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: String,

    /// Prefix of every topic (Debezium's topic.prefix): data goes to <prefix>.<schema>.<table>.
    #[arg(help_heading = SELECTION, long, env = "PGCDC_TOPIC_PREFIX")]
    pub topic_prefix: String,

    /// Logical replication slot to stream from; created if missing.
    #[arg(help_heading = CONNECTION, long = "slot", env = "PGCDC_SLOT", default_value = "pgcdc")]
    pub slot_name: String,

    /// Publication to stream; created if missing (FOR ALL TABLES, or --table).
    #[arg(
        help_heading = SELECTION,
        long = "publication",
        env = "PGCDC_PUBLICATION",
        default_value = "pgcdc"
    )]
    pub publication_name: String,

    /// Tables (schema.table) to put in the publication when it is created.
    /// Without it a missing publication is created FOR ALL TABLES.
    #[arg(help_heading = SELECTION, long = "table", env = "PGCDC_TABLES", value_delimiter = ',')]
    pub tables: Vec<String>,

    #[command(flatten)]
    pub encode: EncodeOptions,

    /// When to snapshot existing rows (Debezium's snapshot.mode): initial
    /// (when the slot is new), initial_only (snapshot, then exit), never /
    /// no_data (stream only), when_needed (also when the slot is missing or
    /// was invalidated: it is dropped and taken again).
    #[arg(
        help_heading = SNAPSHOT,
        long,
        env = "PGCDC_SNAPSHOT_MODE",
        value_enum,
        default_value = "initial"
    )]
    pub snapshot_mode: SnapshotMode,

    /// Connections reading the snapshot in parallel (default: the number of cores).
    #[arg(help_heading = SNAPSHOT, long, env = "PGCDC_SNAPSHOT_WORKERS")]
    pub snapshot_workers: Option<usize>,

    /// Table pages (8 kB each) per snapshot chunk: big tables are split into
    /// chunks of this many pages, read by all workers.
    #[arg(help_heading = SNAPSHOT, long, env = "PGCDC_SNAPSHOT_CHUNK_PAGES", default_value_t = 4096)]
    pub snapshot_chunk_pages: u32,

    /// Rows per chunk of a table with a primary key in a resumable snapshot
    /// (with --signal-data-collection; Debezium's snapshot.fetch.size): read
    /// in key order, so that it resumes after the last chunk in Kafka.
    #[arg(help_heading = SNAPSHOT, long, env = "PGCDC_SNAPSHOT_FETCH_SIZE", default_value_t = 10240)]
    pub snapshot_fetch_size: u32,

    /// How often a resumable initial snapshot takes a checkpoint: after the
    /// first chunk done this long after the last one, everything sent is
    /// made durable in Kafka with its progress (under exactly-once, a Kafka
    /// transaction commits). Each costs a wait for Kafka; a crash re-sends
    /// at most the rows since the last. 0 takes one after every chunk.
    #[arg(help_heading = SNAPSHOT, long, env = "PGCDC_SNAPSHOT_CHECKPOINT_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub snapshot_checkpoint_interval: Duration,

    /// The signal table, schema.table (Debezium's signal.data.collection),
    /// with columns (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL,
    /// data varchar(2048)); it must be in the publication. A row of type
    /// `execute-snapshot` starts an incremental snapshot of the tables it
    /// names, `stop-snapshot` stops it (see docs/SNAPSHOTS.md).
    #[arg(help_heading = SNAPSHOT, long, env = "PGCDC_SIGNAL_DATA_COLLECTION")]
    pub signal_data_collection: Option<String>,

    /// Rows per incremental snapshot chunk (Debezium's incremental.snapshot.chunk.size).
    #[arg(
        help_heading = SNAPSHOT,
        long,
        env = "PGCDC_INCREMENTAL_SNAPSHOT_CHUNK_SIZE",
        default_value_t = 1024
    )]
    pub incremental_snapshot_chunk_size: u32,

    /// How many tables an incremental snapshot reads at once: each window
    /// (watermark pair, or read-only snapshot) holds a chunk of each of the
    /// first N tables of the list; a table that finishes leaves its place
    /// to the next. 1 reads the tables one after another (docs/SNAPSHOTS.md).
    #[arg(
        help_heading = SNAPSHOT,
        long,
        env = "PGCDC_INCREMENTAL_SNAPSHOT_TABLES_IN_FLIGHT",
        default_value_t = 1
    )]
    pub incremental_snapshot_tables_in_flight: u32,

    /// Write a tombstone (same key, null value) after each delete, so log
    /// compaction can drop the key (Debezium's tombstones.on.delete).
    #[arg(help_heading = FORMAT, long, env = "PGCDC_TOMBSTONES_ON_DELETE", default_value_t = true, action = clap::ArgAction::Set)]
    pub tombstones_on_delete: bool,

    /// Write Debezium's context headers on every change record and
    /// tombstone: __debezium.context.connectorLogicalName (the topic
    /// prefix), taskId (0), connectorName (postgresql) and runId (a UUID
    /// v7 per start) (Debezium's extended.headers.enabled).
    #[arg(help_heading = FORMAT, long, env = "PGCDC_EXTENDED_HEADERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub extended_headers: bool,

    /// none, avro (characters Avro does not allow in a schema name become
    /// `_`) or avro_unicode (they become `_uXXXX`), for the key, value and
    /// envelope schema names derived from topics (schema.name.adjustment.mode).
    #[arg(help_heading = FORMAT, long, env = "PGCDC_SCHEMA_NAME_ADJUSTMENT_MODE", value_enum, default_value = "none")]
    pub schema_name_adjustment_mode: crate::naming::SchemaNameAdjustment,

    /// Operations not to emit, comma separated among c (insert), u (update),
    /// d (delete), t (truncate), or `none` (Debezium's skipped.operations).
    #[arg(help_heading = SELECTION, long, env = "PGCDC_SKIPPED_OPERATIONS", default_value = "t", value_parser = parse_skipped_operations)]
    pub skipped_operations: SkippedOperations,

    /// Write no record for an update that changes no captured column (only
    /// seen with the old row: REPLICA IDENTITY FULL), as Debezium's
    /// skip.messages.without.change.
    #[arg(help_heading = SELECTION, long, env = "PGCDC_SKIP_MESSAGES_WITHOUT_CHANGE", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub skip_messages_without_change: bool,

    /// How NUMERIC and MONEY values are written (Debezium's decimal.handling.mode):
    /// precise (Connect Decimal bytes), double, or string. In precise mode a
    /// NUMERIC NaN or Infinity stops the connector with an error rather than
    /// being written as null; choose double or string for columns that hold them.
    #[arg(
        help_heading = FORMAT,
        long,
        env = "PGCDC_DECIMAL_HANDLING",
        value_enum,
        default_value = "precise"
    )]
    pub decimal_handling: DecimalHandling,

    /// How INTERVAL values are written (interval.handling.mode): numeric
    /// (int64 microseconds) or string (ISO-8601).
    #[arg(
        help_heading = FORMAT,
        long,
        env = "PGCDC_INTERVAL_HANDLING",
        value_enum,
        default_value = "numeric"
    )]
    pub interval_handling: IntervalHandling,

    /// Written in place of unchanged TOASTed values (unavailable.value.placeholder).
    #[arg(help_heading = FORMAT, long, env = "PGCDC_UNAVAILABLE_VALUE_PLACEHOLDER", default_value = DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER)]
    pub unavailable_value_placeholder: String,

    /// Stop by itself once caught up (for scheduled jobs): `start-lsn` (the
    /// default when given without a value) drains up to the server's WAL
    /// position at start; `idle` stops after --idle-timeout without changes.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_STOP_WHEN_CAUGHT_UP", value_enum, num_args = 0..=1, default_missing_value = "start-lsn")]
    pub stop_when_caught_up: Option<CaughtUp>,

    /// With `--stop-when-caught-up idle`: how long without changes counts as caught up.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_IDLE_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,

    /// Stop gracefully after this long even if behind; the next run continues
    /// from what was acknowledged.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_MAX_RUN", value_parser = humantime::parse_duration)]
    pub max_run: Option<Duration>,

    /// Give up (exit 1, naming what did not answer) when PostgreSQL or
    /// Kafka has not answered once within this long of the start. Unset:
    /// retry for ever. Once both have answered it no longer applies: a
    /// running connector rides out outages.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_STARTUP_TIMEOUT", value_parser = humantime::parse_duration)]
    pub startup_timeout: Option<Duration>,

    /// Most messages handed to Kafka and not yet acknowledged.
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_MAX_IN_FLIGHT_MESSAGES", default_value_t = 100_000)]
    pub max_in_flight_messages: usize,

    /// Most bytes (keys + values) handed to Kafka and not yet acknowledged.
    /// Peak memory follows it (librdkafka holds a copy of each record until
    /// it is acknowledged). 16 MiB keeps a fast backlog, a snapshot or one
    /// large transaction of JSON records with embedded schemas under 100 MB
    /// RSS at the drain rate of 32 MiB (BENCHMARKS.md, "Memory" and "The
    /// in-flight bound lowered to 16 MiB").
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_MAX_IN_FLIGHT_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_in_flight_bytes: usize,

    /// How often the confirmed position is reported to Postgres.
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_STATUS_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub status_interval: Duration,

    /// How long a graceful shutdown waits for Kafka to acknowledge in-flight messages.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,

    /// Serve Prometheus metrics (/metrics) and health checks (/healthz,
    /// /readyz) on this address, e.g. 127.0.0.1:9187.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    // --- value handling ---
    /// How BYTEA values are written (Debezium's binary.handling.mode): bytes
    /// (Connect bytes; base64 in JSON), or a string in base64, base64-url-safe or hex.
    #[arg(
        help_heading = FORMAT,
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
        help_heading = FORMAT,
        long,
        env = "PGCDC_TIME_PRECISION",
        value_enum,
        default_value = "adaptive"
    )]
    pub time_precision: TimePrecision,

    /// How HSTORE values are written (hstore.handling.mode): json (a JSON object
    /// in a string) or map (a Connect map of string to optional string).
    #[arg(
        help_heading = FORMAT,
        long,
        env = "PGCDC_HSTORE_HANDLING",
        value_enum,
        default_value = "json"
    )]
    pub hstore_handling: HstoreHandling,

    /// Write Debezium's own values and schemas where pgcdc-kafka differs on
    /// purpose, for a pipeline taken over from Debezium: a comma-separated
    /// list of numeric-nan-infinity, date-infinity,
    /// unchanged-toast-numeric-array, before-image-unknown-columns,
    /// explicit-null-with-default, or all.
    /// Each loses information that the default keeps (docs/CONFIGURATION.md).
    #[arg(
        help_heading = FORMAT,
        long,
        env = "PGCDC_DEBEZIUM_COMPAT",
        value_enum,
        value_delimiter = ','
    )]
    pub debezium_compat: Vec<CompatBehaviour>,
    // --- transforms ---
    #[command(flatten)]
    pub transform: TransformOptions,
    #[command(flatten)]
    pub topic_renames: crate::transform::regex_router::RegexRouterOptions,
    // --- selection and routing ---
    #[command(flatten)]
    pub select: SelectOptions,
    #[command(flatten)]
    pub columns: crate::source::column_mappers::ColumnMapperOptions,
    #[command(flatten)]
    pub snapshot_select: crate::source::snapshot_select::SnapshotSelectOptions,
    #[command(flatten)]
    pub notifications: crate::notification::options::NotificationOptions,
    #[command(flatten)]
    pub signal_channels: crate::source::signal_channels::SignalChannelOptions,

    // --- topic creation ---
    #[command(flatten)]
    pub topics: TopicOptions,

    // --- publication management ---
    #[command(flatten)]
    pub publication: PublicationOptions,

    /// Drop the slot after a graceful stop (slot.drop.on.stop): changes made
    /// after it are never captured.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_SLOT_DROP_ON_STOP", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slot_drop_on_stop: bool,

    /// Stream from a temporary slot that the replication connection creates
    /// and that dies with it: nothing is left on the server when the
    /// connector goes, but nothing survives a lost connection either, so the
    /// connector stops (never retries) when it loses it. For ad-hoc taps and
    /// tests; needs --snapshot-mode never or no_data.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_SLOT_TEMPORARY", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slot_temporary: bool,

    /// Make the slot a failover slot (slot.failover; PostgreSQL 17+): the
    /// server synchronizes it to physical standbys that have
    /// sync_replication_slots on, so after a promotion the connector goes on
    /// from it (with a multi-host --pg-url and target_session_attrs=read-write).
    /// Set on the slot (ALTER_REPLICATION_SLOT) before streaming starts;
    /// `pgcdc-kafka check` lists what the primary and standbys still need.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_SLOT_FAILOVER", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slot_failover: bool,

    /// pgoutput's origin filter (PostgreSQL 16+): none streams only changes
    /// made without a replication origin, leaving out those a logical
    /// replication subscription applied; any streams all. Unset: not sent
    /// (all, as Debezium).
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_ORIGIN_FILTER", value_enum)]
    pub origin_filter: Option<crate::source::replication::Origin>,
    #[command(flatten)]
    pub streaming: crate::source::streaming::StreamingOptions,

    /// Column values in their types' binary send format (pgoutput's
    /// binary option), which costs the walsender and the connector less
    /// than text; the records are the same. auto: binary when every
    /// published column's type has a binary decoder, text otherwise (an
    /// INFO line names the columns); on: binary, refused at start
    /// otherwise; off: text. See docs/VALUE_MODES.md.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_PGOUTPUT_BINARY", value_enum, default_value_t, num_args = 0..=1, default_missing_value = "on")]
    pub pgoutput_binary: crate::source::replication::PgoutputBinary,
    // --- transaction metadata and heartbeats ---
    #[command(flatten)]
    pub metadata: MetadataOptions,
    // --- exactly-once ---
    /// Delivery guarantee: at-least-once (the default) or exactly-once (a
    /// transactional producer; consumers with isolation.level=read_committed
    /// see every committed Postgres transaction exactly once). See docs/EXACTLY_ONCE.md.
    #[arg(
        help_heading = DELIVERY,
        long,
        env = "PGCDC_DELIVERY",
        value_enum,
        default_value = "at-least-once"
    )]
    pub delivery: Delivery,

    /// At-least-once: when a run (re)starts, skip the replayed records that
    /// Kafka already has, found from the last record of each partition of
    /// the topics written to (a `pgcdc.position` header on every streamed
    /// record). Needs a producer that leaves no gaps, so it gives the
    /// producer no delivery timeout (message.timeout.ms=0) and
    /// enable.gapless.guarantee; a --kafka-property message.timeout.ms
    /// other than 0 turns the skipping off. See the README, "Delivery".
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_SKIP_DELIVERED", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub skip_delivered: bool,

    /// Name of this connector (default: the topic prefix). With
    /// --delivery exactly-once it keys the progress record and makes the
    /// transactional.id `pgcdc-kafka-<name>`, which fences other instances.
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_CONNECTOR_NAME")]
    pub connector_name: Option<String>,

    /// Compacted topic recording the last Postgres position committed to
    /// Kafka (default: <prefix>.progress); created if missing.
    #[arg(help_heading = DELIVERY, long, env = "PGCDC_PROGRESS_TOPIC")]
    pub progress_topic: Option<String>,

    // --- exactly-once batching ---
    #[command(flatten)]
    pub eos: EosOptions,

    /// `--takeover-debezium`: Debezium's stored offset to continue after.
    #[command(flatten)]
    pub takeover: crate::takeover::TakeoverOptions,

    /// Extra librdkafka producer properties, key=value (repeatable). In
    /// PGCDC_KAFKA_PROPERTY, one property per line.
    #[arg(help_heading = DELIVERY, long = "kafka-property", env = "PGCDC_KAFKA_PROPERTY", value_delimiter = PROPERTY_SEPARATOR, value_parser = parse_key_value)]
    pub kafka_properties: Vec<(String, String)>,
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

/// librdkafka settings the delivery guarantee depends on; a pass-through
/// property may not contradict them.
pub(crate) const PINNED_PRODUCER_SETTINGS: &[(&str, &str)] =
    &[("enable.idempotence", "true"), ("acks", "all")];

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

    /// The names derived from these settings (topics, ids, slots).
    pub fn names(&self) -> Names {
        Names {
            prefix: self.topic_prefix.clone(),
            delimiter: self.select.topic_delimiter.clone(),
            connector: self.connector_name.clone(),
            slot: self.slot_name.clone(),
            transaction_topic: self.metadata.transaction_topic.clone(),
            heartbeat_topics_prefix: self.metadata.heartbeat_topics_prefix.clone(),
            heartbeat_topic: self.metadata.heartbeat_topic.clone(),
            progress_topic: self.progress_topic.clone(),
        }
    }

    /// Parallel snapshot connections.
    pub fn snapshot_workers(&self) -> usize {
        self.snapshot_workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        })
    }

    /// How column values are decoded.
    pub fn value_options(&self) -> ValueOptions {
        let compat = DebeziumCompat::of(&self.debezium_compat);
        ValueOptions {
            unavailable_value_placeholder: self.unavailable_value_placeholder.clone(),
            decimal_handling: self.decimal_handling,
            interval_handling: self.interval_handling,
            binary_handling: self.binary_handling,
            time_precision: self.time_precision,
            hstore_handling: self.hstore_handling,
            special_numeric: if compat.numeric_nan_infinity {
                SpecialNumeric::Null
            } else {
                SpecialNumeric::Fail
            },
            compat,
            ..ValueOptions::default()
        }
    }

    /// Whether incremental snapshots can be asked for: a signal table, or
    /// `--read-only`'s kafka channel.
    pub fn takes_incremental_snapshots(&self) -> bool {
        self.signal_data_collection.is_some() || self.signal_channels.read_only
    }

    /// Whether the run can ever read rows by snapshot (an initial one, or
    /// an incremental or blocking one on a signal), rather than only stream.
    pub fn may_snapshot(&self) -> bool {
        !matches!(
            self.snapshot_mode,
            SnapshotMode::Never | SnapshotMode::NoData
        ) || self.takes_incremental_snapshots()
    }

    /// Whether an at-least-once restart skips what Kafka already has
    /// (`--skip-delivered`): not with a delivery timeout, which can leave a
    /// record out of a partition that holds later ones.
    pub fn skips_delivered(&self) -> bool {
        self.delivery == Delivery::AtLeastOnce
            && self.skip_delivered
            && !self.kafka_properties.iter().any(|(k, v)| {
                matches!(k.as_str(), "message.timeout.ms" | "delivery.timeout.ms") && v != "0"
            })
    }

    /// Whether keyed records go where Kafka's murmur2 puts them (our
    /// default `partitioner`), rather than where a `--kafka-property
    /// partitioner` chose.
    pub fn partitions_keys_by_murmur2(&self) -> bool {
        self.kafka_properties
            .iter()
            .rev()
            .find(|(k, _)| k == "partitioner")
            .is_none_or(|(_, v)| v == "murmur2_random" || v == "murmur2")
    }

    /// A fingerprint of this build and of the settings that decide which
    /// records a transaction makes, carried in each record's position
    /// header: a restart skips records by position only when the run that
    /// wrote Kafka's last records had the same one (see `sink::position`).
    pub fn output_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let output = format!(
            "{} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            crate::build_info::VERSION,
            crate::build_info::COMMIT,
            self.topic_prefix,
            self.tables,
            self.encode,
            self.tombstones_on_delete,
            self.skipped_operations,
            self.decimal_handling,
            self.interval_handling,
            self.unavailable_value_placeholder,
            self.binary_handling,
            self.time_precision,
            self.hstore_handling,
            self.debezium_compat,
            self.transform,
            self.select,
            self.topics,
            self.publication,
            self.metadata,
        );
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        output.hash(&mut hasher);
        hasher.finish()
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
        settings.insert("client.id", self.names().client_id());
        if self.skips_delivered() {
            // No gap in a partition, ever: a record is retried until it is
            // delivered, and an error that could leave one stops the producer.
            settings.insert("message.timeout.ms", "0".to_owned());
            settings.insert("enable.gapless.guarantee", "true".to_owned());
        }
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

    /// The selection and the topic router of these flags, or every problem
    /// with them.
    pub fn selection(
        &self,
    ) -> Result<(crate::select::Selection, crate::select::TopicRouter), ConfigError> {
        crate::select::build(&self.select, &self.tables, &self.topic_prefix)
    }

    /// The column mappers (`--column-truncate-to`, `--column-mask-*`,
    /// `--*-propagate-source-type`), or every problem with them.
    pub fn column_mappers(
        &self,
    ) -> Result<crate::source::column_mappers::ColumnMappers, ConfigError> {
        crate::source::column_mappers::ColumnMappers::new(&self.columns)
    }

    /// The topic renames (`--topic-rename`, Kafka Connect's RegexRouter).
    pub fn topic_renames(
        &self,
    ) -> Result<crate::transform::regex_router::TopicRenames, ConfigError> {
        crate::transform::regex_router::TopicRenames::new(&self.topic_renames)
    }

    /// The PostgreSQL connection: `--pg-url` with `--pg-password` (or the
    /// file's) applied.
    pub fn pg(&self) -> PgUrl {
        match self.pg_password.get() {
            Some(password) => self.pg_url.with_password(password),
            None => self.pg_url.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
