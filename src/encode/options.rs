//! The encoding stage's options: JSON or Avro, and the schema registry.
//! Flattened into `run`'s flags; the encoder is built from these alone.

use clap::{Args, ValueEnum};

use crate::options::{read_secret_file, Secret};

/// Encoding of keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Json,
    Avro,
}

/// How record headers are written: Kafka Connect's `header.converter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HeaderConverter {
    /// `org.apache.kafka.connect.storage.SimpleHeaderConverter`.
    Simple,
    /// `org.apache.kafka.connect.json.JsonConverter`.
    Json,
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

/// How keys and values are encoded (`--format` and the registry's flags).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Format")]
pub struct EncodeOptions {
    /// Embed the Kafka Connect schema in every JSON key
    /// (key.converter.schemas.enable).
    #[arg(long, env = "PGCDC_JSON_KEY_SCHEMAS", default_value_t = true, action = clap::ArgAction::Set)]
    pub json_key_schemas: bool,

    /// Embed the Kafka Connect schema in every JSON value, and in headers
    /// written by the json header converter (value.converter.schemas.enable).
    #[arg(long, env = "PGCDC_JSON_VALUE_SCHEMAS", default_value_t = true, action = clap::ArgAction::Set)]
    pub json_value_schemas: bool,

    /// Both of the above at once, as before they were separate (kept so
    /// that existing command lines, environments and config files go on
    /// working); cannot be combined with either.
    #[arg(long, env = "PGCDC_JSON_SCHEMAS", action = clap::ArgAction::Set, conflicts_with_all = ["json_key_schemas", "json_value_schemas"])]
    pub json_schemas: Option<bool>,

    /// How record headers are written (Kafka Connect's header.converter):
    /// simple (SimpleHeaderConverter: strings as text, structs as
    /// `{"id":2}`) or json (JsonConverter, with its schema under
    /// --json-value-schemas). Default: json with --format json (as
    /// Debezium Server and the embedded engine write them), simple with avro.
    #[arg(long, env = "PGCDC_HEADER_CONVERTER", value_enum)]
    pub header_converter: Option<HeaderConverter>,

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
    #[arg(long, env = "PGCDC_SCHEMA_REGISTRY_BASIC_AUTH_FILE", value_parser = read_secret_file)]
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
}

impl EncodeOptions {
    /// Whether JSON keys embed their schema (`--json-key-schemas`, or the
    /// older `--json-schemas`).
    pub fn key_schemas(&self) -> bool {
        self.json_schemas.unwrap_or(self.json_key_schemas)
    }

    /// Whether JSON values (and JSON headers) embed their schema
    /// (`--json-value-schemas`, or the older `--json-schemas`).
    pub fn value_schemas(&self) -> bool {
        self.json_schemas.unwrap_or(self.json_value_schemas)
    }

    /// The header converter: `--header-converter`, else json for JSON
    /// records and simple for Avro.
    pub fn header_converter(&self) -> HeaderConverter {
        self.header_converter.unwrap_or(match self.format {
            Format::Json => HeaderConverter::Json,
            Format::Avro => HeaderConverter::Simple,
        })
    }

    /// The schema registry's `user:password`, from the flag or its file.
    pub fn schema_registry_auth(&self) -> Option<&Secret> {
        self.schema_registry_basic_auth
            .as_ref()
            .or(self.schema_registry_basic_auth_file.as_ref())
    }
}
