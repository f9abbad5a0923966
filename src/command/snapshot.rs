//! `pgcdc-kafka snapshot`: asks a running connector for an incremental
//! snapshot of some tables (or to stop one) by inserting a signal into its
//! `--signal-data-collection` table, as Debezium's signalling does. The
//! connector reads it from the replication stream, so it takes effect in
//! commit order. A `--read-only` connector takes signals from Kafka only:
//! then the command refuses, and says which record to produce instead.

use std::process::ExitCode;

use serde::Serialize;

use super::print_report;
use crate::config::{LogFormat, PgUrl};
use crate::source::setup::{self, SetupError};
use crate::source::signal::{SignalTable, EXECUTE_SNAPSHOT, STOP_SNAPSHOT};

/// `pgcdc-kafka snapshot`: asks a running connector, through its signal
/// table, for an incremental snapshot of some tables (or to stop one).
#[derive(Debug, Clone, clap::Args)]
pub struct SnapshotArgs {
    /// `run`'s TOML configuration file: the settings `snapshot` shares with
    /// `run` (pg_url, signal_data_collection, read_only, topic_prefix,
    /// signal_kafka_topic) are read from it; its other
    /// keys are skipped. Flags and environment override it.
    #[arg(long = "config", env = "PGCDC_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,

    /// PostgreSQL connection URL of the captured database.
    #[arg(long, env = "PGCDC_PG_URL")]
    pub pg_url: PgUrl,

    /// The connector's signal table, schema.table.
    #[arg(long, env = "PGCDC_SIGNAL_DATA_COLLECTION")]
    pub signal_data_collection: Option<String>,

    /// The connector runs `--read-only`: it reads signals from Kafka only,
    /// so the command refuses and prints the record to send instead.
    /// (`--read-only=false` to say otherwise: the tables follow it.)
    #[arg(long, env = "PGCDC_READ_ONLY", default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub read_only: bool,

    /// The connector's topic prefix (the key of its Kafka signals).
    #[arg(long, env = "PGCDC_TOPIC_PREFIX")]
    pub topic_prefix: Option<String>,

    /// The connector's Kafka signal topic (default `<prefix>-signal`).
    #[arg(long, env = "PGCDC_SIGNAL_KAFKA_TOPIC")]
    pub signal_kafka_topic: Option<String>,

    /// Send stop-snapshot instead of execute-snapshot (without tables: stop
    /// the whole incremental snapshot).
    #[arg(long)]
    pub stop: bool,

    /// Tables to snapshot, schema.table.
    #[arg(required_unless_present = "stop")]
    pub tables: Vec<String>,
}

/// Why `pgcdc-kafka snapshot` failed.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("--signal-data-collection {0:?} must name a table as schema.table")]
    BadTable(String),
    #[error("table {0:?} must be named as schema.table")]
    BadDataCollection(String),
    #[error(
        "--signal-data-collection is missing: name the connector's signal table (schema.table)"
    )]
    NoSignalTable,
    #[error("the connector runs --read-only, so it takes signals from its Kafka topic only, and this command inserts into the signal table; produce this record to partition 0 of topic {topic:?} with key {key:?} instead: {value}")]
    ReadOnly {
        topic: String,
        key: String,
        value: String,
    },
    #[error(transparent)]
    Sql(#[from] SetupError),
}

/// What `pgcdc-kafka snapshot` inserted.
#[derive(Debug, Clone, Serialize)]
pub struct SentSignal {
    pub table: String,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub data: String,
}

impl std::fmt::Display for SentSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "inserted into {}: id={} type={} data={}",
            self.table, self.id, self.kind, self.data
        )
    }
}

/// Inserts the signal row `args` describe.
pub async fn send(args: &SnapshotArgs) -> Result<SentSignal, SignalError> {
    if let Some(bad) = args.tables.iter().find(|t| SignalTable::parse(t).is_none()) {
        return Err(SignalError::BadDataCollection(bad.clone()));
    }
    let kind = if args.stop {
        STOP_SNAPSHOT
    } else {
        EXECUTE_SNAPSHOT
    };
    let data = serde_json::json!({"data-collections": args.tables, "type": "incremental"});
    let id = format!(
        "pgcdc-cli-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    if args.read_only {
        let key = args.topic_prefix.as_deref().unwrap_or("<topic prefix>");
        let topic = (args.signal_kafka_topic.clone()).unwrap_or_else(|| format!("{key}-signal"));
        let value = serde_json::json!({"id": id, "type": kind, "data": data}).to_string();
        return Err(SignalError::ReadOnly {
            topic,
            key: key.to_owned(),
            value,
        });
    }
    let signal_table =
        (args.signal_data_collection.as_deref()).ok_or(SignalError::NoSignalTable)?;
    let table = SignalTable::parse(signal_table)
        .ok_or_else(|| SignalError::BadTable(signal_table.to_owned()))?;
    let data = data.to_string();
    let client = setup::connect(&args.pg_url).await?;
    client
        .execute(
            &format!(
                "INSERT INTO {} (id, type, data) VALUES ($1, $2, $3)",
                table.sql()
            ),
            &[&id, &kind, &data],
        )
        .await
        .map_err(|error| SetupError::Query {
            action: format!("inserting a signal into {table}"),
            error,
        })?;
    Ok(SentSignal {
        table: table.to_string(),
        id,
        kind,
        data,
    })
}

/// Runs `pgcdc-kafka snapshot`: 0 when the signal was inserted, 1 otherwise.
pub async fn execute(args: &SnapshotArgs, format: LogFormat) -> ExitCode {
    match send(args).await {
        Ok(sent) => {
            print_report(format, &sent);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {}", crate::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}
