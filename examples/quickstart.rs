//! Quickstart: starts a private PostgreSQL and Kafka on loopback (the same
//! launcher the tests use), runs the real `pgcdc-kafka` binary against them
//! with its default settings, showing its log, and prints the Kafka
//! messages of a snapshot and of a few changes.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! It builds the binary first (`cargo build --bin pgcdc-kafka`, in the
//! example's profile), or runs the one `PGCDC_BIN` names. Everything
//! it starts stops when it exits. `tests/quickstart.rs` runs it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use pgcdc_testcontainers::{Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const TOPIC: &str = "app.public.customers";

/// Messages the run produces: two snapshot rows, an insert, an update, a
/// delete and its tombstone.
const MESSAGES: usize = 6;

#[allow(dead_code)] // tests/quickstart.rs includes this file and calls `run`
fn main() -> ExitCode {
    let shown = connector_binary().and_then(|bin| run(&bin));
    match shown {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("quickstart failed: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// What the quickstart showed, for its test.
pub struct Shown {
    /// Key and value of each message, as text (`None`: null).
    pub messages: Vec<(Option<String>, Option<String>)>,
    /// The connector's log (stderr) lines.
    pub log: Vec<String>,
    /// The connector's stdout: its summary line.
    pub summary: String,
}

/// The connector binary: `PGCDC_BIN`, or built with cargo beside this
/// example (`target/<profile>/examples/quickstart` ->
/// `target/<profile>/pgcdc-kafka`).
#[allow(dead_code)] // tests/quickstart.rs passes its own binary
fn connector_binary() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("PGCDC_BIN") {
        return Ok(bin.into());
    }
    println!("== building the pgcdc-kafka binary ==");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    // With the example in the same build, the library is the one already
    // compiled for it (the same features): only the binary is linked.
    build.args(["build", "--bin", "pgcdc-kafka", "--example", "quickstart"]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().context("run cargo build")?;
    anyhow::ensure!(status.success(), "cargo build --bin pgcdc-kafka failed");
    let example = std::env::current_exe().context("the example's path")?;
    let profile_dir = example
        .parent()
        .and_then(Path::parent)
        .context("the example is not under target/<profile>/examples")?;
    Ok(profile_dir.join("pgcdc-kafka"))
}

/// Runs the quickstart with the connector binary `bin`.
pub fn run(bin: &Path) -> anyhow::Result<Shown> {
    println!("== 1. PostgreSQL (wal_level=logical) and Kafka (KRaft) on 127.0.0.1 ==");
    let started = Instant::now();
    let pg = Postgres::launch().context("start PostgreSQL")?;
    let kafka = Kafka::launch().context("start Kafka")?;
    println!("  postgres: {}", pg.url("shop"));
    println!("  kafka:    {}", kafka.bootstrap_servers());
    println!("  (started in {:.0?})", started.elapsed());

    println!("\n== 2. a table with two rows: the connector's first start snapshots them ==");
    pg.execute("postgres", "CREATE DATABASE shop")?;
    for sql in [
        "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)",
        "INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com'), (2, 'Bob', NULL)",
    ] {
        println!("  {sql}");
        pg.execute("shop", sql)?;
    }

    let url = pg.url("shop");
    let bootstrap = kafka.bootstrap_servers();
    let args = [
        "run",
        "--pg-url",
        &url,
        "--bootstrap-servers",
        &bootstrap,
        "--topic-prefix",
        "app",
    ];
    println!("\n== 3. the connector, with its default settings; its log is marked | ==");
    println!("  $ pgcdc-kafka {}", args.join(" "));
    let mut child = Command::new(bin)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("PGCDC_LOG_FORMAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let stderr = child.stderr.take().context("the connector's stderr")?;
    let logger = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                println!("  | {line}");
                log.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        })
    };
    let result = changes_and_messages(&pg, &bootstrap, &mut child);

    // SIGTERM: the connector waits for Kafka's acknowledgements, confirms
    // them to the slot and prints its summary on stdout.
    println!("\n== 6. stop: SIGTERM ==");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().context("wait for the connector")?;
    let _ = logger.join();
    let mut summary = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout.read_to_string(&mut summary)?;
    }
    println!("  {}", summary.trim());
    println!("  {status}");
    let messages = result?;
    anyhow::ensure!(status.success(), "the connector exited with {status}");
    let log = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Shown {
        messages,
        log,
        summary,
    })
}

/// Waits for the connector's slot, makes the changes, and prints the
/// topic's messages.
fn changes_and_messages(
    pg: &Postgres,
    bootstrap: &str,
    child: &mut std::process::Child,
) -> anyhow::Result<Vec<(Option<String>, Option<String>)>> {
    // The connector creates its slot on start; changes made after that are
    // streamed, rows from before are in its snapshot.
    let deadline = Instant::now() + Duration::from_secs(120);
    while pg
        .query(
            "shop",
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pgcdc'",
        )?
        .is_empty()
    {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the connector exited ({status}) before creating its slot");
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the connector did not create its slot"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("\n== 4. changes made in PostgreSQL ==");
    for sql in [
        "INSERT INTO customers VALUES (3, 'Cy', 'cy@example.com')",
        "UPDATE customers SET email = 'bob@example.com' WHERE id = 2",
        "DELETE FROM customers WHERE id = 1",
    ] {
        println!("  {sql}");
        pg.execute("shop", sql)?;
    }
    println!("\n== 5. messages on topic {TOPIC} ==");
    read_topic(bootstrap, MESSAGES)
}

/// Reads `count` messages of [`TOPIC`] and prints them: the first in full
/// (Kafka Connect JSON, schema and payload, as a consumer gets it), the
/// others as their payload's op, key, before and after.
fn read_topic(
    bootstrap: &str,
    count: usize,
) -> anyhow::Result<Vec<(Option<String>, Option<String>)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "quickstart")
        .set("enable.auto.commit", "false")
        .create()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while consumer
        .fetch_metadata(Some(TOPIC), Duration::from_secs(5))?
        .topics()
        .iter()
        .all(|t| t.partitions().is_empty())
    {
        anyhow::ensure!(Instant::now() < deadline, "topic {TOPIC} never appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut messages = Vec::new();
    while messages.len() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {count} messages arrived",
            messages.len()
        );
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message?;
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
        let (key, value) = (text(message.key()), text(message.payload()));
        if messages.is_empty() {
            println!("  the first message as written (key and value carry their schema):");
            println!("    key:   {}", key.as_deref().unwrap_or("null"));
            println!("    value: {}", value.as_deref().unwrap_or("null"));
            println!("  each message, by its payload:");
        }
        println!("    {}", brief(key.as_deref(), value.as_deref()));
        messages.push((key, value));
    }
    Ok(messages)
}

/// `op=c key={"id":3} before=null after={...}`, or a tombstone.
fn brief(key: Option<&str>, value: Option<&str>) -> String {
    let payload = |text: Option<&str>| {
        text.and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .map(|v| v["payload"].clone())
            .unwrap_or_default()
    };
    let key = payload(key);
    match value {
        None => format!("tombstone  key={key}"),
        Some(_) => {
            let value = payload(value);
            format!(
                "op={}  key={key}  before={}  after={}",
                value["op"].as_str().unwrap_or("?"),
                value["before"],
                value["after"]
            )
        }
    }
}
