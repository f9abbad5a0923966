//! Workload (s): the initial snapshot of one table against `COPY ... TO
//! STDOUT` of the same table into /dev/null (psql), the rate at which the
//! server hands the rows out. The connector runs `--snapshot-mode
//! initial_only` with `--snapshot-workers` connections (2 by default),
//! production defaults otherwise, timed from spawn to exit (after Kafka
//! acknowledged every row); the rows in the topic are counted afterwards.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use serde_json::{json, Value as Json};

use super::{pg_bindir, round, run_connector, scalar, Result, ROW, TABLE};

pub fn run(
    pg: &Postgres,
    kafka: &Kafka,
    rows: u64,
    workers: u32,
    connector_args: &[String],
    wrap: &[String],
) -> Result<Json> {
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

    let mut args: Vec<String> = [
        "--log-format",
        "json",
        "run",
        "--pg-url",
        &pg.url(&db),
        "--bootstrap-servers",
        &kafka.bootstrap_servers(),
        "--topic-prefix",
        &db,
        "--slot",
        "bench_snapshot",
        "--publication",
        "bench",
        "--snapshot-mode",
        "initial_only",
        "--snapshot-workers",
        &workers.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(connector_args.iter().cloned());
    let run = run_connector(&args, wrap)?;
    let delivered = topic_records(kafka, &format!("{db}.public.bench"))?;
    eprintln!(
        "  connector snapshot: {:.2} s, {:.2} CPU s, peak RSS {} MB, {delivered} records in the topic",
        run.wall_s,
        run.cpu_s,
        run.peak_rss_kb / 1024
    );
    if delivered != rows {
        eprintln!("  WARNING: expected {rows} records in the topic, found {delivered}");
    }
    pg.execute(&db, "SELECT pg_drop_replication_slot('bench_snapshot')")?;
    Ok(json!({
        "workload": name,
        "format": "json",
        "rows": rows,
        "records_in_topic": delivered,
        "table_mb": round(table_mb),
        "copy_s": round(copy_s),
        "copy_rows_per_s": round(rows as f64 / copy_s),
        "connector_s": round(run.wall_s),
        "connector_rows_per_s": round(rows as f64 / run.wall_s),
        "ratio_to_copy": round(copy_s / run.wall_s),
        "snapshot_workers": workers,
        "connector_cpu_s": round(run.cpu_s),
        "connector_peak_rss_mb": round(run.peak_rss_kb as f64 / 1024.0),
        "resource_source": run.source,
        "connector_extra_args": connector_args,
        "summary": run.summary,
    }))
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
