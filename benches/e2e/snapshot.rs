//! Workload (s): the initial snapshot of one table against two references.
//!
//! - COPY: `COPY (SELECT <its columns> FROM public.bench) TO STDOUT`, the
//!   query the connector's workers run, into /dev/null (psql, timed after a
//!   warm-up read): the rate at which the server hands the rows out.
//! - Kafka alone ([`super::ceiling`]): the very records the snapshot wrote,
//!   read back and produced again by a bare producer with the connector's
//!   own producer settings (`RunConfig::producer_config`): Kafka's ingest
//!   rate for them on this machine, with no reading, decoding or encoding.
//!
//! The connector runs `--snapshot-mode initial_only` with
//! `--snapshot-workers` connections (2 by default), production defaults
//! otherwise, timed from spawn to exit (after Kafka acknowledged every
//! row); the rows in the topic are counted afterwards. Its CPU seconds per
//! row are reported beside the wall time (less sensitive to what else runs
//! on a shared machine), with the 1-minute load average at its end, and the
//! server's CPU meanwhile: its processes that ended during the run (the
//! postmaster's reaped children), which are the snapshot's backends and its
//! slot's session.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use serde_json::{json, Value as Json};

use super::{args_after_run, ceiling, pg_bindir, round, run_connector, scalar, Result, ROW, TABLE};

/// What COPY reads: the table's columns, as the connector's workers select
/// them.
const COPY: &str = "COPY (SELECT id, payload, n, ts FROM public.bench) TO STDOUT";

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
    copy(COPY)?; // warm-up: the table read once
    let copy_s = copy(COPY)?;
    eprintln!("  {COPY}: {copy_s:.2} s");

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
        let broker_before = ceiling::broker_cpu(kafka);
        // The backends of what ran before (the COPY reference, the last
        // format's slot drop) end and are reaped first: they are not the
        // snapshot's.
        std::thread::sleep(Duration::from_millis(300));
        let server_before = ended_server_cpu(pg);
        let run = run_connector(&args, wrap)?;
        let load = load_average();
        let broker_cpu = broker_before
            .zip(ceiling::broker_cpu(kafka))
            .map(|(a, b)| b - a);
        // The connector has exited: its backends end and are reaped within
        // milliseconds.
        std::thread::sleep(Duration::from_millis(300));
        let server_cpu = server_before.zip(ended_server_cpu(pg)).map(|(a, b)| b - a);
        let topic = format!("{prefix}.public.bench");
        let delivered = topic_records(kafka, &topic)?;
        eprintln!(
            "  connector snapshot ({format}): {:.2} s, {:.2} CPU s ({:.2} µs/row), server {} CPU s, peak RSS {} MB, {delivered} records in the topic, load average {}",
            run.wall_s,
            run.cpu_s,
            run.cpu_s * 1e6 / rows as f64,
            super::fmt_cpu(server_cpu),
            run.peak_rss_kb / 1024,
            load.map_or_else(|| "n/a".to_owned(), |l| format!("{l:.2}")),
        );
        if delivered != rows {
            return Err(
                format!("the snapshot ({format}) left {delivered} records, not {rows}").into(),
            );
        }
        let alone = ceiling::run(kafka, &topic, &args_after_run(&args))?;
        let record_bytes = alone.bytes / alone.records.max(1);
        alone.print(format, broker_cpu);
        pg.execute(&db, &format!("SELECT pg_drop_replication_slot('{slot}')"))?;
        // At 2,000,000 JSON rows each topic holds gigabytes: not kept
        // from one round to the next.
        delete_topics(kafka, &[&topic, &format!("{topic}.kafka_alone")])?;
        let per_row = |cpu: Option<f64>| cpu.map(|c| round(c * 1e6 / rows as f64));
        out.push(json!({
            "workload": name,
            "format": format,
            "rows": rows,
            "records_in_topic": delivered,
            "table_mb": round(table_mb),
            "copy_statement": COPY,
            "copy_s": round(copy_s),
            "copy_rows_per_s": round(rows as f64 / copy_s),
            "connector_s": round(run.wall_s),
            "connector_rows_per_s": round(rows as f64 / run.wall_s),
            "ratio_to_copy": round(copy_s / run.wall_s),
            "kafka_alone_s": round(alone.wall_s),
            "kafka_alone_records": alone.records,
            "kafka_alone_bytes": alone.bytes,
            "kafka_alone_rows_per_s": round(alone.records as f64 / alone.wall_s),
            "ratio_to_kafka_alone": round(alone.wall_s / run.wall_s),
            "record_bytes": record_bytes,
            "snapshot_workers": workers,
            "connector_cpu_s": round(run.cpu_s),
            "connector_us_per_row": round(run.cpu_s * 1e6 / rows as f64),
            "broker_us_per_row": per_row(broker_cpu),
            "server_us_per_row": per_row(server_cpu),
            "kafka_alone_broker_us_per_row": per_row(alone.broker_cpu_s),
            "kafka_alone_producer_us_per_row": per_row(alone.producer_cpu_s),
            "load_average_1m": load,
            "connector_peak_rss_mb": round(run.peak_rss_kb as f64 / 1024.0),
            "resource_source": run.source,
            "connector_extra_args": connector_args,
            "summary": run.summary,
        }));
    }
    Ok(out)
}

/// CPU seconds of the server's processes that have ended: the postmaster's
/// reaped children (`cutime` + `cstime`). `None` without a local server.
fn ended_server_cpu(pg: &Postgres) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pg.pid()?)).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = rest.get(13)?.parse::<f64>().ok()? + rest.get(14)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(ticks / 100.0)
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

/// The 1-minute load average now (`/proc/loadavg`).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Deletes `topics` (their records were counted and copied already).
fn delete_topics(kafka: &Kafka, topics: &[&str]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in futures::executor::block_on(admin.delete_topics(topics, &options))? {
        if let Err((topic, error)) = result {
            return Err(format!("deleting topic {topic}: {error}").into());
        }
    }
    Ok(())
}
