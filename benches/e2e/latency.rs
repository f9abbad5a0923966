//! Workload (l): latency at a steady rate. The connector streams while rows
//! are inserted at `rate` rows/s (100 transactions a second) for `duration`
//! seconds. A record's latency is the time from its transaction's commit
//! (`source.ts_ms`, the commit timestamp pgoutput carries) to the broker
//! appending it (`message.timestamp.type=LogAppendTime` on the topic, which
//! the connector creates): what a consumer waits for a change, with the
//! production defaults (acks=all, idempotence). Both clocks are this
//! machine's; the resolution is a millisecond.

use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::{json, Value as Json};

use super::{round, run_connector, Result, ROW, TABLE};

pub fn run(
    pg: &Postgres,
    kafka: &Kafka,
    rate: u64,
    duration_s: u64,
    connector_args: &[String],
    wrap: &[String],
) -> Result<Json> {
    let name = format!("l: steady {rate} rows/s for {duration_s} s");
    eprintln!("workload {name} ...");
    let db = pg.create_database("bench_l")?;
    pg.execute(&db, TABLE)?;
    pg.execute(&db, "CREATE PUBLICATION bench FOR TABLE bench")?;
    // Slots are the cluster's, not the database's: one per round.
    let slot = db.clone();
    pg.execute(
        &db,
        &format!("SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"),
    )?;
    let topic = format!("{db}.public.bench");
    let mut args = super::run_args(
        (pg, &db, kafka),
        &db,
        &slot,
        &[
            "--snapshot-mode",
            "never",
            "--stop-when-caught-up",
            "idle",
            "--idle-timeout",
            "10s",
            "--topic-partitions",
            "1",
            "--topic-config",
            "message.timestamp.type=LogAppendTime",
        ],
    );
    args.extend(connector_args.iter().cloned());
    let wrap = wrap.to_vec();
    let connector =
        std::thread::spawn(move || run_connector(&args, &wrap).map_err(|e| e.to_string()));

    let deadline = Instant::now() + Duration::from_secs(30);
    while super::scalar(
        pg,
        &db,
        &format!("SELECT active::text FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    )? != "true"
    {
        if Instant::now() > deadline {
            return Err("the connector did not start streaming within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // 100 transactions a second, each sleeping until its slot in the schedule.
    let per_txn = (rate / 100).max(1);
    let ticks = duration_s * 100;
    let rows = per_txn * ticks;
    pg.execute(
        &db,
        &format!(
            "DO $$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN FOR k IN 0..{} LOOP \
               INSERT INTO bench SELECT {ROW} FROM generate_series(k * {per_txn} + 1, (k + 1) * {per_txn}) AS i; \
               COMMIT; \
               PERFORM pg_sleep(greatest(0, extract(epoch FROM t0 + (k + 1) * interval '10 ms' - clock_timestamp()))); \
             END LOOP; END $$",
            ticks - 1
        ),
    )?;
    let run = connector.join().expect("connector thread")?;
    pg.execute(&db, &format!("SELECT pg_drop_replication_slot('{slot}')"))?;
    eprintln!(
        "  connector: {:.2} CPU s ({:.2} µs per change), peak RSS {} MB",
        run.cpu_s,
        run.cpu_s * 1e6 / rows as f64,
        run.peak_rss_kb / 1024
    );

    let mut latencies = consume_latencies(&kafka.bootstrap_servers(), &topic, rows)?;
    if latencies.len() as u64 != rows {
        eprintln!("  WARNING: {} of {rows} records read", latencies.len());
    }
    latencies.sort_unstable();
    let quantile = |q: f64| -> i64 {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len().max(1)) - 1;
        latencies.get(i).copied().unwrap_or(0)
    };
    let (p50, p99, max) = (
        quantile(0.50),
        quantile(0.99),
        latencies.last().copied().unwrap_or(0),
    );
    eprintln!("  commit to append: p50 {p50} ms, p99 {p99} ms, max {max} ms");
    Ok(json!({
        "workload": name,
        "format": "json",
        "changes": rows,
        "records_read": latencies.len(),
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "latency_max_ms": max,
        "connector_cpu_s": round(run.cpu_s),
        "connector_peak_rss_mb": round(run.peak_rss_kb as f64 / 1024.0),
        "connector_extra_args": connector_args,
        "summary": run.summary,
    }))
}

/// For every record of `topic` (one partition): its append time minus its
/// commit time, in milliseconds.
fn consume_latencies(bootstrap: &str, topic: &str, expected: u64) -> Result<Vec<i64>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pgcdc-bench-latency")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&partitions)?;
    let mut latencies = Vec::with_capacity(expected as usize);
    let deadline = Instant::now() + Duration::from_secs(60);
    while (latencies.len() as u64) < expected && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let message = message?;
        let Some(payload) = message.payload() else {
            continue; // a tombstone
        };
        let value: Json = serde_json::from_slice(payload)?;
        let commit_ms = value["payload"]["source"]["ts_ms"]
            .as_i64()
            .or_else(|| value["source"]["ts_ms"].as_i64())
            .ok_or("a record without source.ts_ms")?;
        match message.timestamp() {
            Timestamp::LogAppendTime(append_ms) => latencies.push(append_ms - commit_ms),
            other => return Err(format!("expected LogAppendTime records, got {other:?}").into()),
        }
    }
    Ok(latencies)
}
