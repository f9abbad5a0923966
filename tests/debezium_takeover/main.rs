//! Taking over a running Debezium pipeline (issue 21 item 4): Debezium
//! 3.6.1.Final, embedded with Kafka Connect's `KafkaOffsetBackingStore`,
//! streams a continuous write load into Kafka
//! (`tests/debezium/DebeziumKafkaRunner.java`, as Debezium Server's Kafka
//! sink: offsets stored only for records Kafka acknowledged), is stopped
//! (SIGTERM, or `kill -9`), and pgcdc-kafka takes over with
//! `--takeover-debezium <offsets topic>` on Debezium's slot and publication
//! while the load goes on. Then every row's every version is checked in
//! the topics:
//! - nothing is missing, and each key's versions first arrive in order;
//! - every key stays in one partition across both writers (the Java
//!   client's partitioner and ours agree);
//! - nothing is written twice: what Debezium produced up to its stored
//!   offset is left out by the offset, and its records past it (its
//!   unflushed window, hundreds after the kill) by reading back Debezium's
//!   last record of each partition (its `source.sequence`).
//!
//! Debezium Server's offset file (`FileOffsetBackingStore`,
//! `--takeover-debezium file:`) is taken over the same way after a kill.
//!
//! In Avro (Confluent's AvroConverter, the same registry), the subjects
//! Debezium registered are put under FULL compatibility first: `check` and
//! `run` must refuse pgcdc-kafka's default schemas (NOT NULL columns are
//! optional in its before-images) naming the subject, and with
//! `--debezium-compat all` take over with the subjects' own schema ids, so
//! key bytes, and so partitions, stay the same. Avro records are not read
//! back, so there the records written twice must be exactly Debezium's
//! past its stored offset (its window after the kill).

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::avro_reader::AvroReader;
use common::debezium::{classpath, java};
use common::process::run_binary;
use common::workload::{create_tables, write_continuously, Workload, XorShift};
use common::{
    consume_all, read_raw, record_count, wait_until, ReadUntil, Record, Scenario, TIMEOUT,
};
use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use serde_json::Value as Json;

const TABLES: &[&str] = &["accounts", "orders"];
/// Partitions of each table topic, so that partitioning is tested.
const PARTITIONS: i32 = 3;
/// Records Debezium must have produced before it is stopped.
const DEBEZIUM_RECORDS: usize = 150;
const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const AVRO_CONVERTER: &str = "io.confluent.connect.avro.AvroConverter";
const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM: the engine closes and stores its last offsets.
    Clean,
    /// SIGKILL: what was produced since the last offset flush is unrecorded.
    Kill,
}

/// Where Debezium stores its offsets.
enum Offsets {
    /// Kafka Connect's `KafkaOffsetBackingStore`, in this topic.
    Topic(String),
    /// `FileOffsetBackingStore` (Debezium Server's default), in this file.
    File(std::path::PathBuf),
}

/// Debezium's runner as a child process, killed on drop.
struct Debezium {
    child: Child,
    log: std::path::PathBuf,
}

impl Debezium {
    /// Debezium with JsonConverters, or with `registry` AvroConverters.
    fn start(
        s: &Scenario,
        kafka: &Kafka,
        name: &str,
        offsets: &Offsets,
        registry: Option<&str>,
        work: &Path,
    ) -> Self {
        let pg = s.pg;
        let port = pg.port().to_string();
        let bootstrap = kafka.bootstrap_servers();
        let store: Vec<(&str, String)> = match offsets {
            Offsets::Topic(topic) => vec![
                (
                    "engine.offset.storage",
                    "org.apache.kafka.connect.storage.KafkaOffsetBackingStore".into(),
                ),
                ("engine.offset.storage.topic", topic.clone()),
                ("engine.offset.storage.partitions", "3".into()),
                ("engine.offset.storage.replication.factor", "1".into()),
            ],
            Offsets::File(path) => vec![
                (
                    "engine.offset.storage",
                    "org.apache.kafka.connect.storage.FileOffsetBackingStore".into(),
                ),
                (
                    "engine.offset.storage.file.filename",
                    path.display().to_string(),
                ),
            ],
        };
        let store: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let settings: &[(&str, &str)] = &[
            ("engine.name", name),
            (
                "engine.connector.class",
                "io.debezium.connector.postgresql.PostgresConnector",
            ),
            ("engine.bootstrap.servers", &bootstrap),
            // Connect's default is 60 s; shorter here, so that the offset
            // is stored soon, and a kill leaves up to this much unrecorded.
            ("engine.offset.flush.interval.ms", "10000"),
            ("engine.database.hostname", pg.host()),
            ("engine.database.port", &port),
            ("engine.database.user", pg.user()),
            ("engine.database.password", pg.password()),
            ("engine.database.dbname", &s.db),
            ("engine.topic.prefix", &s.prefix),
            ("engine.slot.name", &s.slot),
            ("engine.publication.name", &s.publication),
            ("engine.publication.autocreate.mode", "disabled"),
            ("engine.plugin.name", "pgoutput"),
            ("engine.snapshot.mode", "no_data"),
            ("producer.bootstrap.servers", &bootstrap),
            ("producer.linger.ms", "5"),
        ];
        let converters: Vec<(&str, &str)> = match registry {
            None => vec![
                ("key.converter", JSON_CONVERTER),
                ("value.converter", JSON_CONVERTER),
                ("header.converter", JSON_CONVERTER),
            ],
            Some(url) => vec![
                ("key.converter", AVRO_CONVERTER),
                ("key.converter.schema.registry.url", url),
                ("value.converter", AVRO_CONVERTER),
                ("value.converter.schema.registry.url", url),
                ("header.converter", SIMPLE_HEADER_CONVERTER),
            ],
        };
        let mut props = String::new();
        for (k, v) in settings.iter().chain(&store).chain(&converters) {
            let _ = writeln!(props, "{k}={}", v.replace('\\', "\\\\"));
        }
        let config = work.join(format!("{name}.properties"));
        std::fs::write(&config, props).expect("write the runner's properties");
        let log = work.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("create the runner's log");
        let child = Command::new(java())
            .arg("-cp")
            .arg(classpath())
            .arg(format!("-Djava.io.tmpdir={}", work.display()))
            .arg("DebeziumKafkaRunner")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .spawn()
            .expect("java runs (set PGCDC_JAVA_HOME to a Java 21+)");
        Debezium { child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!("Debezium's runner exited ({status}):\n{}", self.log_text());
        }
    }

    /// Stops it as `how` says and waits for it to exit.
    async fn stop(&mut self, how: Stop) {
        let signal = match how {
            Stop::Clean => "-TERM",
            Stop::Kill => "-KILL",
        };
        let status = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
        let child = &mut self.child;
        wait_until(TIMEOUT, "Debezium's runner exits", || {
            let exited = child.try_wait().expect("try_wait").is_some();
            async move { exited }
        })
        .await;
        if how == Stop::Clean {
            assert!(
                self.log_text().contains("debezium-kafka-runner: stopped"),
                "Debezium's runner did not stop cleanly:\n{}",
                self.log_text()
            );
        }
    }
}

impl Drop for Debezium {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_after_a_clean_stop() {
    takeover(Stop::Clean, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_after_kill_9() {
    takeover(Stop::Kill, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_avro_subjects_under_full_compatibility_after_kill_9() {
    takeover(Stop::Kill, true, false).await;
}

/// Debezium Server's way: offsets in a file (`--takeover-debezium file:`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_from_an_offset_file_after_kill_9() {
    takeover(Stop::Kill, false, true).await;
}

async fn takeover(how: Stop, avro: bool, file: bool) {
    let kafka = Kafka::shared();
    let pg = Postgres::shared();
    let registry = avro.then(SchemaRegistry::shared);
    let registry_url = registry.map(SchemaRegistry::url);
    let bootstrap = kafka.bootstrap_servers();
    let label = match (how, avro, file) {
        (_, _, true) => "takeover_file",
        (_, true, _) => "takeover_avro",
        (Stop::Clean, false, _) => "takeover_clean",
        (Stop::Kill, false, _) => "takeover_kill",
    };
    let s = Scenario::new(pg, label);
    create_tables(&s, TABLES);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE {}",
        s.publication,
        TABLES.join(", ")
    ));
    // Debezium's slot, made here so the load starts after it exists.
    s.sql(&format!(
        "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
        s.slot
    ));
    for table in TABLES {
        kafka
            .create_topic(&s.topic(table), PARTITIONS)
            .expect("create the table topic");
    }
    let work = std::env::temp_dir().join(pgcdc_testcontainers::unique_name(label));
    std::fs::create_dir_all(&work).expect("work dir");
    let offsets = match file {
        false => Offsets::Topic(format!("{}-connect-offsets", s.prefix)),
        true => Offsets::File(work.join("offsets.dat")),
    };
    let offsets_stored = || async {
        match &offsets {
            Offsets::Topic(topic) => record_count(&bootstrap, topic).await > 0,
            Offsets::File(path) => path.exists(),
        }
    };
    let name = format!("dbz-{label}");
    let mut debezium = Debezium::start(&s, kafka, &name, &offsets, registry_url.as_deref(), &work);

    let (mut rng, seed) = XorShift::seeded("PGCDC_TAKEOVER_SEED");
    println!("[{label}] workload seed {seed} (PGCDC_TAKEOVER_SEED)");
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(TABLES, rng.next()),
        Arc::clone(&stop_writer),
    ));

    let topics: Vec<String> = TABLES.iter().map(|t| s.topic(t)).collect();
    let produced = || async {
        let mut n = 0;
        for topic in &topics {
            n += record_count(&bootstrap, topic).await;
        }
        n
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    // Enough records, and an offset stored: then more, unrecorded until the
    // next offset flush (the window a kill leaves).
    while produced().await < DEBEZIUM_RECORDS || !offsets_stored().await {
        debezium.assert_running();
        assert!(
            tokio::time::Instant::now() < deadline,
            "Debezium produced too little in 90 s; its log:\n{}",
            debezium.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    debezium.assert_running();
    debezium.stop(how).await;
    let by_debezium = produced().await;
    println!("[{label}] Debezium stopped ({how:?}) after {by_debezium} records");

    // The load goes on while nothing reads the slot, then pgcdc-kafka
    // takes over under it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let source = match &offsets {
        Offsets::Topic(topic) => topic.clone(),
        Offsets::File(path) => format!("file:{}", path.display()),
    };
    let mut takeover: Vec<String> = [
        "--takeover-debezium",
        source.as_str(),
        "--takeover-debezium-name",
        name.as_str(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if how == Stop::Clean && !avro {
        refuses_what_it_cannot_continue(&s, &bootstrap, &source).await;
    }
    if let Some(url) = &registry_url {
        takeover.extend(["--format", "avro", "--schema-registry-url", url].map(String::from));
        refuses_under_full(&s, &bootstrap, url, &takeover).await;
        takeover.extend(["--debezium-compat", "all"].map(String::from));
    }
    let takeover: Vec<&str> = takeover.iter().map(String::as_str).collect();
    let running = s.start(&bootstrap, &takeover);
    s.await_confirmed_past_now("pgcdc-kafka streams after Debezium")
        .await;
    stop_writer.store(true, Ordering::Relaxed);
    let written = writer.await.expect("writer");
    s.await_confirmed_past_now("pgcdc-kafka caught up").await;
    let summary = running.stop().await;
    println!(
        "[{label}] writer: {} transactions, {} changes; pgcdc-kafka: {} events, {} records acknowledged",
        written.transactions, written.changes, summary.events, summary.acknowledged_records
    );

    let offset = stored_offset(&bootstrap, &offsets, &name, &s.prefix).await;
    let mut records = BTreeMap::new();
    for topic in &topics {
        let read = match registry {
            None => consume_all(&bootstrap, topic, TIMEOUT).await,
            Some(registry) => read_avro(&bootstrap, topic, registry).await,
        };
        records.insert(topic.clone(), read);
    }
    if let Some(url) = &registry_url {
        for topic in &topics {
            for part in ["key", "value"] {
                let versions = subject_versions(url, &format!("{topic}-{part}")).await;
                println!("[{label}] subject {topic}-{part}: versions {versions}");
                // Debezium's own schemas: the same ids, so the same key
                // bytes and partitions.
                assert_eq!(
                    versions,
                    serde_json::json!([1]),
                    "[{label}] {topic}-{part} keeps Debezium's schema"
                );
            }
        }
    }
    let source = table_versions(&s);
    let checked = verify(label, &source, &records, &offset);
    assert!(checked.debezium > 0 && checked.ours > 0, "{checked:?}");
    if avro {
        // Avro records are not read back: what is sent twice is exactly
        // Debezium's records past its stored offset.
        assert_eq!(
            checked.duplicates, checked.debezium_past_offset,
            "[{label}] the records sent twice must be exactly Debezium's records past its stored offset {offset}"
        );
    } else {
        // Debezium's last record of each partition, read back, holds its
        // unflushed window too: nothing is sent twice.
        assert_eq!(checked.duplicates, 0, "[{label}] nothing sent twice");
    }
    if how == Stop::Kill {
        assert!(
            checked.debezium_past_offset > 0,
            "[{label}] killed 3 s after an offset flush, within its 10 s interval: \
             Debezium's last records are past its stored offset"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Sets FULL compatibility on the table topics' value subjects Debezium
/// registered; then `check` and `run` with `args` (pgcdc-kafka's default
/// schemas) must refuse, naming the subject and the setting.
async fn refuses_under_full(s: &Scenario, bootstrap: &str, registry: &str, args: &[String]) {
    let http = reqwest::Client::new();
    for table in TABLES {
        let subject = format!("{}-value", s.topic(table));
        let answer = http
            .put(format!("{registry}/config/{subject}"))
            .header("Content-Type", "application/vnd.schemaregistry.v1+json")
            .body(r#"{"compatibility":"FULL"}"#)
            .send()
            .await
            .expect("the registry answers");
        assert!(
            answer.status().is_success(),
            "PUT /config/{subject}: {answer:?}"
        );
    }
    let subject = format!("{}-value", s.topic(TABLES[0]));
    let mut check = vec!["check".to_owned()];
    check.extend(s.args(bootstrap, &[]));
    check.extend(args.iter().cloned());
    let (code, stdout, stderr) = run_binary(check).await;
    assert_eq!(code, Some(1), "check must fail:\n{stdout}\n{stderr}");
    let refused = stdout
        .lines()
        .find(|l| l.starts_with("FAIL schema dry run") && l.contains(&subject))
        .unwrap_or_else(|| panic!("no FAIL line for {subject}:\n{stdout}"));
    assert!(
        refused.contains("FULL") && refused.contains("--debezium-compat"),
        "{refused}"
    );
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let error = s
        .start(bootstrap, &extra)
        .wait_for_error()
        .await
        .to_string();
    assert!(
        error.contains(&subject) && error.contains("FULL") && error.contains("--debezium-compat"),
        "run must stop naming the subject, its level and the setting: {error}"
    );
    println!("refused as it must be: {error}");
}

/// Without Debezium's slot, or with an offset store that holds nothing for
/// the connector, a takeover stops before creating or sending anything.
async fn refuses_what_it_cannot_continue(s: &Scenario, bootstrap: &str, source: &str) {
    let mut other_slot = s.args(bootstrap, &["--takeover-debezium", source]);
    let at = other_slot
        .iter()
        .position(|a| a == "--slot")
        .expect("--slot")
        + 1;
    other_slot[at] = "not_debeziums_slot".to_owned();
    let error = s.start_args(other_slot).wait_for_error().await.to_string();
    assert!(
        error.contains("\"not_debeziums_slot\" does not exist") && error.contains("--slot"),
        "{error}"
    );
    let wrong_name = [
        "--takeover-debezium",
        source,
        "--takeover-debezium-name",
        "nobody",
    ];
    let error = s
        .start(bootstrap, &wrong_name)
        .wait_for_error()
        .await
        .to_string();
    assert!(
        error.contains("holds no offset") && error.contains("--takeover-debezium-name"),
        "{error}"
    );
    assert!(
        s.query_one("SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = 'not_debeziums_slot'")
            .as_deref()
            == Some("0"),
        "no slot was created"
    );
}

/// The version numbers of `subject`.
async fn subject_versions(registry: &str, subject: &str) -> Json {
    let answer = reqwest::get(format!("{registry}/subjects/{subject}/versions"))
        .await
        .expect("the registry answers");
    let body = answer.bytes().await.expect("the registry's answer");
    serde_json::from_slice(&body).expect("a JSON list")
}

/// A topic's Avro records, each value decoded with its writer schema as
/// `{"payload": ...}` (the shape JSON records with schemas have).
async fn read_avro(bootstrap: &str, topic: &str, registry: &SchemaRegistry) -> Vec<Record> {
    let count = record_count(bootstrap, topic).await;
    let raw = read_raw(bootstrap, topic, ReadUntil::count(count, TIMEOUT)).await;
    assert_eq!(raw.len(), count, "read the whole of {topic}");
    let reader = AvroReader::new(registry);
    raw.into_iter()
        .map(|r| Record {
            partition: r.partition,
            offset: r.offset,
            key: r.key.as_deref().map(|k| reader.json(k)),
            value: r
                .value
                .as_deref()
                .map(|v| serde_json::json!({ "payload": reader.json(v) })),
            headers: r.headers,
        })
        .collect()
}

/// Debezium's offset as the engine stored it.
async fn stored_offset(bootstrap: &str, offsets: &Offsets, name: &str, prefix: &str) -> Json {
    let key = serde_json::json!([name, { "server": prefix }]);
    let value = match offsets {
        Offsets::Topic(topic) => consume_all(bootstrap, topic, TIMEOUT)
            .await
            .into_iter()
            .rev()
            .find(|r| r.key.as_ref() == Some(&key))
            .and_then(|r| r.value),
        Offsets::File(path) => pgcdc_kafka::takeover::offset_file::read(path)
            .expect("the offset file reads")
            .into_iter()
            .find(|(k, _)| serde_json::from_slice::<Json>(k).ok().as_ref() == Some(&key))
            .and_then(|(_, v)| serde_json::from_slice(&v?).ok()),
    };
    value.unwrap_or_else(|| panic!("no offset stored under {key}"))
}

/// Each table row's latest version.
fn table_versions(s: &Scenario) -> BTreeMap<RowKey, i64> {
    let mut source = BTreeMap::new();
    for table in TABLES {
        let rows =
            s.pg.query(
                &s.db,
                &format!("SELECT id::text, version::text FROM {table}"),
            )
            .expect("read the table");
        for row in rows {
            let number = |i: usize| -> i64 {
                row.get(i)
                    .cloned()
                    .flatten()
                    .expect("a value")
                    .parse()
                    .expect("a number")
            };
            source.insert((s.topic(table), number(0)), number(1));
        }
    }
    source
}

/// A row: its topic and id.
type RowKey = (String, i64);
/// One record of a row: partition, version, written by pgcdc-kafka.
type Seen = (i32, i64, bool);

#[derive(Debug)]
struct Checked {
    debezium: usize,
    ours: usize,
    duplicates: usize,
    /// Debezium's records after the position of its stored offset.
    debezium_past_offset: usize,
}

fn lsn_field(value: &Json) -> u64 {
    match value {
        Json::Number(n) => n.as_u64().expect("an LSN"),
        Json::String(s) => s.parse().expect("an LSN"),
        // No commit yet (the first transaction Debezium streamed), as its
        // records' `source.sequence` says with a null.
        Json::Null => 0,
        other => panic!("not an LSN: {other}"),
    }
}

fn verify(
    label: &str,
    source: &BTreeMap<RowKey, i64>,
    records: &BTreeMap<String, Vec<Record>>,
    offset: &Json,
) -> Checked {
    let stored = (
        lsn_field(&offset["lsn_commit"]),
        lsn_field(&offset["lsn_proc"]),
    );
    let mut problems = Vec::new();
    let mut seen: BTreeMap<RowKey, Vec<Seen>> = BTreeMap::new();
    let (mut debezium, mut ours, mut past) = (0, 0, 0);
    for (topic, topic_records) in records {
        let mut sorted: Vec<&Record> = topic_records.iter().collect();
        sorted.sort_by_key(|r| (r.partition, r.offset));
        for r in sorted {
            let value = r.value.as_ref().expect("no tombstones in this load");
            let payload = &value["payload"];
            let id = payload["after"]["id"].as_i64().expect("after.id");
            let version = payload["after"]["version"].as_i64().expect("after.version");
            let by_us = r.header("pgcdc.position").is_some();
            if by_us {
                ours += 1;
            } else {
                debezium += 1;
                // `["<lsn_commit>","<lsn>"]`; no commit before the first
                // transaction Debezium streamed.
                let sequence: Vec<Option<String>> = serde_json::from_str(
                    payload["source"]["sequence"]
                        .as_str()
                        .expect("source.sequence"),
                )
                .expect("sequence is a JSON array");
                let lsn = |i: usize| -> u64 {
                    sequence[i]
                        .as_deref()
                        .map_or(0, |n| n.parse().expect("an LSN"))
                };
                let position = (lsn(0), lsn(1));
                if position > stored {
                    past += 1;
                }
            }
            seen.entry((topic.clone(), id))
                .or_default()
                .push((r.partition, version, by_us));
        }
    }
    let mut duplicates = 0;
    for (key, &latest) in source {
        let Some(changes) = seen.get(key) else {
            problems.push(format!("{key:?}: no record (latest version {latest})"));
            continue;
        };
        let partitions: BTreeSet<i32> = changes.iter().map(|c| c.0).collect();
        if partitions.len() > 1 {
            problems.push(format!(
                "{key:?}: in partitions {partitions:?} (Debezium's and ours differ?)"
            ));
        }
        let mut first = BTreeSet::new();
        let mut highest = 0;
        for &(_, version, _) in changes {
            if first.insert(version) {
                if version != highest + 1 {
                    problems.push(format!(
                        "{key:?}: version {version} first arrived after {highest}: {changes:?}"
                    ));
                }
                highest = highest.max(version);
            } else {
                duplicates += 1;
            }
        }
        if highest != latest {
            problems.push(format!(
                "{key:?}: latest version {latest}, highest in Kafka {highest}: {changes:?}"
            ));
        }
    }
    for key in seen.keys().filter(|k| !source.contains_key(*k)) {
        problems.push(format!("{key:?} is in Kafka but not in the table"));
    }
    let checked = Checked {
        debezium,
        ours,
        duplicates,
        debezium_past_offset: past,
    };
    println!(
        "[{label}] {} rows checked; {debezium} records by Debezium ({past} past its stored offset {offset}), {ours} by pgcdc-kafka; {duplicates} duplicates",
        source.len()
    );
    assert!(
        problems.is_empty(),
        "[{label}] {} problems (first 30):\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    checked
}
