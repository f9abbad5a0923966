//! Debezium's side: the embedded engine run by
//! `tests/debezium/DebeziumDiffRunner.java` (fetched and compiled by
//! `tests/debezium/fetch-debezium.sh`), one run over one slot feeding every
//! output, read back from its JSON-lines files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde::Deserialize;

use super::compare::Rec;
use crate::common::debezium::{classpath, java};

/// The Debezium release compared against (keep in step with
/// `tests/debezium/pom.xml` and `fetch-debezium.sh`).
pub const DEBEZIUM_VERSION: &str = "3.6.1.Final";

/// Where the connector reads from.
pub struct Source<'a> {
    pub host: &'a str,
    pub port: u16,
    pub user: &'a str,
    pub password: &'a str,
    pub database: &'a str,
    pub publication: &'a str,
}

/// One engine run: its slot, its connector settings beyond the connection,
/// and the outputs it feeds.
pub struct Run {
    pub slot: String,
    pub settings: Vec<(String, String)>,
    pub outputs: Vec<Output>,
}

/// One output: a name and its `output.<name>.*` settings (converters,
/// `topics`, `transforms`).
pub struct Output {
    pub name: &'static str,
    pub settings: Vec<(String, String)>,
}

/// A Java properties file value: backslashes escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Runs Debezium over `source` and `run`'s slot until the logical decoding
/// message with prefix `stop_prefix`, and returns each output's records in
/// the order Debezium produced them.
///
/// # Panics
/// When the engine fails or does not see the stop message in time, with its log.
pub fn run(
    source: &Source<'_>,
    prefix: &str,
    stop_prefix: &str,
    run: &Run,
    work: &Path,
) -> BTreeMap<String, Vec<Rec>> {
    let mut props = String::new();
    let base = [
        ("name", "dbz-diff"),
        (
            "connector.class",
            "io.debezium.connector.postgresql.PostgresConnector",
        ),
        (
            "offset.storage",
            "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        ),
        ("offset.flush.interval.ms", "0"),
        ("database.hostname", source.host),
        ("database.user", source.user),
        ("database.password", source.password),
        ("database.dbname", source.database),
        ("topic.prefix", prefix),
        ("slot.name", run.slot.as_str()),
        ("publication.name", source.publication),
        ("publication.autocreate.mode", "disabled"),
        ("plugin.name", "pgoutput"),
        ("snapshot.mode", "no_data"),
    ];
    let port = source.port.to_string();
    let settings = run.settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    for (k, v) in base
        .into_iter()
        .chain([("database.port", port.as_str())])
        .chain(settings)
    {
        let _ = writeln!(props, "engine.{k}={}", escape(v));
    }
    let _ = writeln!(props, "stop.topic={prefix}.message");
    let _ = writeln!(props, "stop.prefix={stop_prefix}");
    let _ = writeln!(props, "timeout.seconds=180");
    let outputs = &run.outputs;
    let names: Vec<&str> = outputs.iter().map(|o| o.name).collect();
    let _ = writeln!(props, "outputs={}", names.join(","));
    for o in outputs {
        for (k, v) in &o.settings {
            let _ = writeln!(props, "output.{}.{k}={}", o.name, escape(v));
        }
    }
    let config = work.join("runner.properties");
    std::fs::write(&config, props).expect("write runner.properties");
    let out_dir = work.join("debezium");
    let log_path = work.join("debezium.log");
    let log = std::fs::File::create(&log_path).expect("create debezium.log");
    let status = Command::new(java())
        .arg("-cp")
        .arg(classpath())
        .arg(format!("-Djava.io.tmpdir={}", work.display()))
        .arg("DebeziumDiffRunner")
        .arg(&config)
        .arg(&out_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .status()
        .expect("java runs (set PGCDC_JAVA_HOME to a Java 17+)");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        status.success(),
        "Debezium's runner failed ({status}); its log {}:\n{}",
        log_path.display(),
        log_text()
    );
    outputs
        .iter()
        .map(|o| {
            let path = out_dir.join(format!("{}.jsonl", o.name));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (o.name.to_owned(), text.lines().map(parse_line).collect())
        })
        .collect()
}

#[derive(Deserialize)]
struct Line {
    topic: String,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<HeaderLine>,
}

#[derive(Deserialize)]
struct HeaderLine {
    name: String,
    value: Option<String>,
}

/// One record of the runner's JSON lines (bytes in base64).
fn parse_line(line: &str) -> Rec {
    let line: Line = serde_json::from_str(line).expect("a runner line is JSON");
    let bytes = |b: Option<String>| {
        b.map(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .expect("base64")
        })
    };
    Rec {
        topic: line.topic,
        key: bytes(line.key),
        value: bytes(line.value),
        // A null header reads back from Kafka as empty bytes.
        headers: line
            .headers
            .into_iter()
            .map(|h| (h.name, bytes(h.value).unwrap_or_default()))
            .collect(),
    }
}
