//! Workload (s): the initial snapshot of one table against `COPY ... TO
//! STDOUT` of the same table into /dev/null (psql), the rate at which the
//! server hands the rows out. The connector runs `--snapshot-mode
//! initial_only` with `--snapshot-workers` connections (2 by default),
//! production defaults otherwise, timed from spawn to exit (after Kafka
//! acknowledged every row); the rows in the topic are counted afterwards.
//!
//! A third figure bounds what any connector could reach here: the same
//! number of records, copies of the snapshot's first record (same key and
//! value bytes), produced straight from this process with the connector's
//! producer defaults (acks=all, idempotence, lz4) to a new topic (the broker's
//! default partition count, like the connector's): Kafka's ingest rate on
//! this machine, with no reading, decoding or encoding.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::{json, Value as Json};

use super::{pg_bindir, round, run_connector, scalar, Result, ROW, TABLE};

pub fn run(
    pg: &Postgres,
    kafka: &Kafka,
    registry: Option<&SchemaRegistry>,
    rows: u64,
    workers: u32,
    connector_args: &[String],
    wrap: &[String],
) -> Result<Vec<Json>> {
    let name = format!("s: initial snapshot, {workers} workers, vs COPY");
    eprintln!("workload {name}: {rows} rows ...");
    let db = pg.create_database("bench_s")?;
    pg.execute(&db, TABLE)?;
    pg.execute(
        &db,
        &format!("INSERT INTO bench SELECT {ROW} FROM generate_series(1, {rows}) AS i"),
    )?;
    // Hint bits and the visibility map set once, so neither reader pays for
    // them; the table is in shared buffers or the page cache for both.
    pg.execute(&db, "VACUUM (ANALYZE) bench")?;
    pg.execute(&db, "CREATE PUBLICATION bench FOR TABLE bench")?;
    let table_mb: f64 =
        scalar(pg, &db, "SELECT pg_total_relation_size('bench')")?.parse::<f64>()? / 1e6;

    let psql = pg_bindir().join("psql");
    let copy = |sql: &str| -> Result<f64> {
        let started = Instant::now();
        let status = Command::new(&psql)
            .args(["-X", "-q", "-d", &pg.url(&db), "-c", sql])
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(format!("psql {sql} failed: {status}").into());
        }
        Ok(started.elapsed().as_secs_f64())
    };
    copy("COPY bench TO STDOUT")?; // warm-up: the table read once
    let copy_s = copy("COPY bench TO STDOUT")?;
    eprintln!("  COPY bench TO STDOUT: {copy_s:.2} s");

    let mut formats = vec!["json"];
    if registry.is_some() {
        formats.push("avro");
    }
    let mut out = Vec::new();
    for format in formats {
        let prefix = format!("{db}_{format}");
        let slot = format!("bench_snapshot_{format}");
        let mut args = super::run_args(
            (pg, &db, kafka),
            &prefix,
            &slot,
            &[
                "--snapshot-mode",
                "initial_only",
                "--snapshot-workers",
                &workers.to_string(),
            ],
        );
        super::with_format(&mut args, format, registry);
        args.extend(connector_args.iter().cloned());
        let run = run_connector(&args, wrap)?;
        let topic = format!("{prefix}.public.bench");
        let delivered = topic_records(kafka, &topic)?;
        eprintln!(
            "  connector snapshot ({format}): {:.2} s, {:.2} CPU s, peak RSS {} MB, {delivered} records in the topic",
            run.wall_s,
            run.cpu_s,
            run.peak_rss_kb / 1024
        );
        if delivered != rows {
            return Err(
                format!("the snapshot ({format}) left {delivered} records, not {rows}").into(),
            );
        }
        let (alone_s, record_bytes) = kafka_alone(kafka, &topic, rows)?;
        eprintln!("  Kafka alone, {rows} copies of a {record_bytes}-byte record: {alone_s:.2} s");
        pg.execute(&db, &format!("SELECT pg_drop_replication_slot('{slot}')"))?;
        out.push(json!({
            "workload": name,
            "format": format,
            "rows": rows,
            "records_in_topic": delivered,
            "table_mb": round(table_mb),
            "copy_s": round(copy_s),
            "copy_rows_per_s": round(rows as f64 / copy_s),
            "connector_s": round(run.wall_s),
            "connector_rows_per_s": round(rows as f64 / run.wall_s),
            "ratio_to_copy": round(copy_s / run.wall_s),
            "kafka_alone_s": round(alone_s),
            "kafka_alone_rows_per_s": round(rows as f64 / alone_s),
            "ratio_to_kafka_alone": round(alone_s / run.wall_s),
            "record_bytes": record_bytes,
            "snapshot_workers": workers,
            "connector_cpu_s": round(run.cpu_s),
            "connector_peak_rss_mb": round(run.peak_rss_kb as f64 / 1024.0),
            "resource_source": run.source,
            "connector_extra_args": connector_args,
            "summary": run.summary,
        }));
    }
    Ok(out)
}

/// Records in `topic`: the sum of its partitions' high watermarks (a fresh
/// topic, so its low watermarks are 0).
fn topic_records(kafka: &Kafka, topic: &str) -> Result<u64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .set("group.id", "pgcdc-bench-snapshot")
        .create()?;
    let timeout = Duration::from_secs(10);
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let mut total = 0;
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        let (low, high) = consumer.fetch_watermarks(topic, partition.id(), timeout)?;
        total += (high - low).max(0) as u64;
    }
    Ok(total)
}

/// Produces `rows` copies of `topic`'s first record to a new, auto-created
/// topic, as the connector's producer would (acks=all, idempotence, lz4);
/// returns the time to the last acknowledgement and the record's key +
/// value size. One key: with more than one partition the connector spreads
/// its records, this does not (the topic's partition count is printed).
fn kafka_alone(kafka: &Kafka, topic: &str, rows: u64) -> Result<(f64, usize)> {
    let bootstrap = kafka.bootstrap_servers();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "pgcdc-bench-ceiling")
        .set("enable.auto.commit", "false")
        .create()?;
    let timeout = Duration::from_secs(10);
    let partitions = consumer
        .fetch_metadata(Some(topic), timeout)?
        .topics()
        .first()
        .map_or(0, |t| t.partitions().len());
    if partitions != 1 {
        eprintln!("  note: {topic} has {partitions} partitions; the Kafka-alone run writes one");
    }
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let (key, value) = loop {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message?;
            break (
                message.key().unwrap_or_default().to_vec(),
                message.payload().unwrap_or_default().to_vec(),
            );
        }
        if Instant::now() > deadline {
            return Err(format!("no record in {topic} within 30 s").into());
        }
    };
    let target = format!("{topic}.kafka_alone");
    // The connector's producer settings (RunConfig::producer_config).
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "5")
        .create()?;
    let started = Instant::now();
    for _ in 0..rows {
        let mut record = BaseRecord::to(&target).key(&key[..]).payload(&value[..]);
        while let Err((_, back)) = producer.send(record) {
            record = back;
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    producer.flush(Duration::from_secs(120))?;
    Ok((started.elapsed().as_secs_f64(), key.len() + value.len()))
}
