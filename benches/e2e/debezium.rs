//! Debezium on the same backlog (`--debezium`): Debezium 3.6's PostgreSQL
//! connector in the embedded engine, its records converted as a Kafka
//! Connect worker converts them and produced to Kafka, each batch marked
//! processed after Kafka acknowledged it (`tests/debezium/DebeziumKafkaRunner.java`,
//! the takeover test's runner). It drains its own slot, created with the
//! others before the backlog, so it reads the very WAL range the connector
//! read. Timed from spawn (the JVM's start included, as the connector's is)
//! to the acknowledgement of its last record; CPU and peak RSS of the JVM
//! at that moment, from `/proc`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};

use crate::Result;

#[path = "../../tests/common/debezium.rs"]
mod runtime;

const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const AVRO_CONVERTER: &str = "io.confluent.connect.avro.AvroConverter";
const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
/// Longer than any drain here takes; a stuck run fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(30 * 60);

/// One Debezium drain.
pub struct Drain {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_rss_kb: u64,
}

/// The records Debezium writes to `<prefix>.public.bench` (for (t), to
/// its partitions' topics) from `slot` of database `db`, until `records`
/// are acknowledged; JSON, or Avro through `registry`. The producer gets
/// the connector's defaults (`acks=all`, idempotence, lz4, 5 ms linger)
/// so the two write the same way.
pub fn drain(
    (pg, db, kafka): (&Postgres, &str, &Kafka),
    registry: Option<&SchemaRegistry>,
    slot: &str,
    prefix: &str,
    records: u64,
) -> Result<Drain> {
    let work = std::env::temp_dir().join(format!("pgcdc-bench-debezium-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let port = pg.port().to_string();
    let bootstrap = kafka.bootstrap_servers();
    let mut settings: Vec<(&str, String)> = vec![
        ("engine.name", prefix.to_owned()),
        (
            "engine.connector.class",
            "io.debezium.connector.postgresql.PostgresConnector".into(),
        ),
        (
            "engine.offset.storage",
            "org.apache.kafka.connect.storage.MemoryOffsetBackingStore".into(),
        ),
        ("engine.database.hostname", pg.host().to_owned()),
        ("engine.database.port", port),
        ("engine.database.user", pg.user().to_owned()),
        ("engine.database.password", pg.password().to_owned()),
        ("engine.database.dbname", db.to_owned()),
        ("engine.topic.prefix", prefix.to_owned()),
        ("engine.slot.name", slot.to_owned()),
        ("engine.publication.name", "bench".into()),
        ("engine.publication.autocreate.mode", "disabled".into()),
        ("engine.plugin.name", "pgoutput".into()),
        ("engine.snapshot.mode", "no_data".into()),
        ("producer.bootstrap.servers", bootstrap),
        ("producer.acks", "all".into()),
        ("producer.enable.idempotence", "true".into()),
        ("producer.compression.type", "lz4".into()),
        ("producer.linger.ms", "5".into()),
    ];
    match registry {
        None => settings.extend([
            ("key.converter", JSON_CONVERTER.to_owned()),
            ("value.converter", JSON_CONVERTER.to_owned()),
            ("header.converter", JSON_CONVERTER.to_owned()),
        ]),
        Some(r) => settings.extend([
            ("key.converter", AVRO_CONVERTER.to_owned()),
            ("key.converter.schema.registry.url", r.url()),
            ("value.converter", AVRO_CONVERTER.to_owned()),
            ("value.converter.schema.registry.url", r.url()),
            ("header.converter", SIMPLE_HEADER_CONVERTER.to_owned()),
        ]),
    }
    let mut props = String::new();
    for (k, v) in &settings {
        let _ = writeln!(props, "{k}={}", v.replace('\\', "\\\\"));
    }
    let config = work.join(format!("{prefix}.properties"));
    std::fs::write(&config, props)?;
    let log = work.join(format!("{prefix}.log"));

    let classpath = runtime::classpath();
    let started = Instant::now();
    let mut child = Command::new(runtime::java())
        .arg("-cp")
        .arg(classpath)
        .arg(format!("-Djava.io.tmpdir={}", work.display()))
        .arg("DebeziumKafkaRunner")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let pid = child.id();
    // The runner prints `debezium-kafka-runner: produced N` after each
    // acknowledged batch.
    let produced = Arc::new(AtomicU64::new(0));
    let reader = {
        let out = child.stdout.take().expect("piped");
        let produced = Arc::clone(&produced);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(std::io::Result::ok) {
                if let Some(n) = line.strip_prefix("debezium-kafka-runner: produced ") {
                    produced.store(n.trim().parse().unwrap_or(0), Ordering::Relaxed);
                }
            }
        })
    };
    let mut usage = (0.0, 0);
    let outcome = loop {
        if let Some(u) = crate::proc_usage(pid) {
            usage = (u.0, usage.1.max(u.1));
        }
        if produced.load(Ordering::Relaxed) >= records {
            break Ok(started.elapsed().as_secs_f64());
        }
        if let Some(status) = child.try_wait()? {
            break Err(format!(
                "Debezium's runner exited ({status}); its log: {}",
                log.display()
            ));
        }
        if started.elapsed() > DEADLINE {
            break Err(format!(
                "Debezium acknowledged {} of {records} records in {DEADLINE:?}; its log: {}",
                produced.load(Ordering::Relaxed),
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SIGTERM: the engine closes; nothing of it is measured any more.
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
    let _ = reader.join();
    let wall_s = outcome?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(Drain {
        wall_s,
        cpu_s: usage.0,
        peak_rss_kb: usage.1,
    })
}
