//! End-to-end backlog benchmark: how fast the release binary drains a WAL
//! backlog into Kafka, next to `pg_recvlogical` draining the same backlog
//! (the physical limit: the walsender decoding pgoutput, nothing else).
//!
//! ```text
//! scripts/bench.sh [--rows N] [--single N] [--mixed N] [--large N] [--wide N]
//!                  [--snapshot-rows N] [--snapshot-workers N]
//!                  [--workloads a,b,c,d,e,u,o,t,s,l] [--avro] [--rate R] [--duration S]
//!                  [--connector-arg ARG]... [--wrap 'perf record -g --'] [--rounds N] [--warm-up-rounds N] [--out FILE]
//! cargo bench --bench e2e -- <same flags>
//! ```
//!
//! Per workload: a fresh database, a publication for the one table, then two
//! pgoutput slots created at the same point (one per reader), then the
//! backlog is written and the WAL position noted. `pg_recvlogical` drains
//! slot 2 up to that position; the connector (`run --stop-when-caught-up
//! --snapshot-mode never`, production defaults otherwise) drains slot 1 into
//! Kafka and exits after every acknowledgement and the confirm. Both are
//! timed from spawn to exit; the connector's CPU seconds and peak RSS come
//! from `/usr/bin/time -v` (or, without it, from polling `/proc/<pid>`).
//!
//! Workloads: (a) inserts of ~100-byte rows in 1,000-row transactions,
//! (b) single-row insert transactions, (c) inserts, updates and deletes
//! (1,000 of each per transaction) on a `REPLICA IDENTITY FULL` table,
//! (d) one transaction of many inserts (memory must not grow with it),
//! (e) a wide table (50 columns: numerics, timestamps, text) in 1,000-row
//! transactions, (u) (a) through `--envelope unwrap`, (o) outbox rows
//! through `--outbox-table`, (t) (a) into a table hash-partitioned
//! [`PARTITIONS`] ways, so that consecutive changes go to different topics
//! (one per partition, as for a pipeline of that many tables). `--avro`
//! runs each backlog workload in Avro too.
//! pg_recvlogical reads over the server's Unix socket (and once more over TCP,
//! for the transport's cost). Each backlog is also drained by
//! `pg_recvlogical -o binary=true`, and the
//! walsender's CPU is measured for every reader (`server.rs`). After each
//! connector run, "Kafka alone" (`ceiling.rs`) produces the very records it
//! wrote again with a bare producer and the connector's producer settings:
//! `min(pg_recvlogical, Kafka alone)` is the physical limit of the run. The
//! broker's CPU is measured for both writers. `--rounds N` repeats every
//! workload N times, interleaved (a, c, a, c, ...), and prints medians;
//! `--warm-up-rounds N` runs N more rounds first and counts none of them
//! (a fresh broker's first round runs slow, BENCHMARKS.md).
//!
//! (s) is the initial snapshot of a table (`--snapshot-rows`, with
//! `--snapshot-workers` connections) against `COPY (SELECT ...) TO STDOUT`
//! of it and against Kafka alone for its records (`snapshot.rs`).
//!
//! (l) is not a backlog: the connector streams while rows are inserted at a
//! steady rate (`--rate` rows/s in 100 transactions a second, for
//! `--duration` seconds), and each record's latency is the time from its
//! transaction's commit (`source.ts_ms`) to the broker appending it (the
//! topic is created with `message.timestamp.type=LogAppendTime`): p50, p99
//! and max.
//! Results: a table on stdout and JSON (default `target/bench/results.json`).

// The results object is one `json!` literal with many fields.
#![recursion_limit = "256"]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry, KAFKA_VERSION, REGISTRY_VERSION};
use serde_json::{json, Value as Json};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");
const TXN_ROWS: u64 = 1_000;
/// A ~100-byte row: bigint, 64 characters of text, an int, a timestamptz.
const TABLE: &str = "CREATE TABLE bench (id bigint PRIMARY KEY, payload text NOT NULL, n int NOT NULL, ts timestamptz NOT NULL)";
const ROW: &str = "i, md5(i::text) || md5((i + 1)::text), (i % 1000)::int, now()";
/// Workload (t)'s table: (a)'s, hash-partitioned on its key into
/// [`PARTITIONS`] tables. The publication publishes each partition's
/// changes as its own (`publish_via_partition_root` off, the default), so
/// each has its own topic.
const PARTITIONED_TABLE: &str = "CREATE TABLE bench (id bigint PRIMARY KEY, payload text NOT NULL, n int NOT NULL, ts timestamptz NOT NULL) PARTITION BY HASH (id)";
const PARTITIONS: u32 = 200;
/// Workload (o): a transactional outbox, ten aggregate types, JSON payloads.
const OUTBOX_TABLE: &str = "CREATE TABLE bench (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb)";
const OUTBOX_ROW: &str = "gen_random_uuid(), 'Order' || (i % 10), (i % 1000)::text, 'OrderCreated', jsonb_build_object('id', i, 'total', i * 1.5, 'note', md5(i::text))";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

mod ceiling;
mod debezium;
mod latency;
mod record_file;
mod rounds;
mod server;
mod snapshot;
mod wide;

struct Options {
    rows: u64,
    single: u64,
    mixed: u64,
    large: u64,
    wide: u64,
    snapshot_rows: u64,
    snapshot_workers: u32,
    rate: u64,
    duration_s: u64,
    workloads: Vec<char>,
    avro: bool,
    connector_args: Vec<String>,
    /// A command the connector runs under (e.g. `perf record -g --`), split
    /// on whitespace: for profiling a run, not for its figures.
    wrap: Vec<String>,
    /// Every workload this many times, interleaved; medians printed.
    rounds: u32,
    /// Rounds run before those, and left out of every table and median.
    warm_up_rounds: u32,
    /// Debezium drains each backlog too (`debezium.rs`).
    debezium: bool,
    out: PathBuf,
}

fn options() -> Result<Options> {
    let mut o = Options {
        rows: 200_000,
        single: 20_000,
        mixed: 150_000,
        large: 200_000,
        wide: 50_000,
        snapshot_rows: 500_000,
        snapshot_workers: 2,
        rate: 5_000,
        duration_s: 60,
        workloads: vec!['a', 'b', 'c'],
        avro: false,
        connector_args: Vec::new(),
        wrap: Vec::new(),
        rounds: 1,
        warm_up_rounds: 0,
        debezium: false,
        out: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/bench/results.json"
        )),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--rows" => o.rows = value()?.parse()?,
            "--single" => o.single = value()?.parse()?,
            "--mixed" => o.mixed = value()?.parse()?,
            "--large" => o.large = value()?.parse()?,
            "--wide" => o.wide = value()?.parse()?,
            "--snapshot-rows" => o.snapshot_rows = value()?.parse()?,
            "--snapshot-workers" => o.snapshot_workers = value()?.parse()?,
            "--rate" => o.rate = value()?.parse()?,
            "--duration" => o.duration_s = value()?.parse()?,
            "--workloads" => {
                o.workloads = value()?
                    .split(',')
                    .filter_map(|w| w.chars().next())
                    .collect()
            }
            "--avro" => o.avro = true,
            "--debezium" => o.debezium = true,
            "--connector-arg" => o.connector_args.push(value()?),
            "--wrap" => o.wrap = value()?.split_whitespace().map(String::from).collect(),
            "--rounds" => o.rounds = value()?.parse::<u32>()?.max(1),
            "--warm-up-rounds" => o.warm_up_rounds = value()?.parse()?,
            "--out" => o.out = PathBuf::from(value()?),
            // `cargo bench` passes `--bench` to every bench binary.
            "--bench" => {}
            "-h" | "--help" => {
                println!("flags: --rows N (workload a, default 200000) --single N (b, 20000) --mixed N (c, 150000) --large N (d, 200000) --wide N (e, 50000) --snapshot-rows N (s, 500000) --snapshot-workers N (s, 2) --workloads a,b,c,d,e,u,o,t,s,l (default a,b,c) --avro (each backlog workload again in Avro) --debezium (Debezium 3.6 embedded drains each backlog too, into Kafka) --rate R --duration S (l: rows/s and seconds, 5000 and 60) --connector-arg ARG (repeatable, appended to `run`) --wrap CMD (run the connector under a profiler, e.g. 'perf record -g --') --rounds N (every workload N times, interleaved, with medians) --warm-up-rounds N (N rounds first, not counted) --out FILE");
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other} (try --help)").into()),
        }
    }
    Ok(o)
}

fn main() -> Result<()> {
    let o = options()?;
    eprintln!(
        "starting PostgreSQL and Kafka{} ...",
        if o.avro {
            " and the schema registry"
        } else {
            ""
        }
    );
    let pg = Postgres::launch()?;
    let kafka = Kafka::launch()?;
    let registry = if o.avro {
        Some(SchemaRegistry::launch()?)
    } else {
        None
    };
    let recvlogical = pg_bindir().join("pg_recvlogical");
    let pg_version = scalar(&pg, "postgres", "SHOW server_version")?;

    let mut results = Vec::new();
    let warm_up = o.warm_up_rounds;
    for round in 1..=warm_up + o.rounds {
        if round <= warm_up {
            eprintln!("warm-up round {round} of {warm_up} (not counted)");
        } else if o.rounds > 1 {
            eprintln!("round {} of {}", round - warm_up, o.rounds);
        }
        for w in &o.workloads {
            let (name, rows) = match w {
                'a' => ("a: inserts, 1,000-row txns", o.rows),
                'b' => ("b: single-row txns", o.single),
                'c' => ("c: insert/update/delete, replica identity full", o.mixed),
                'd' => ("d: one large transaction", o.large),
                'e' => ("e: wide rows (50 columns), 1,000-row txns", o.wide),
                'u' => ("u: (a) with --envelope unwrap", o.rows),
                'o' => (
                    "o: outbox rows routed by --outbox-table, 1,000-row txns",
                    o.rows,
                ),
                't' => ("t: (a) over 200 partitions (200 topics)", o.rows),
                's' => {
                    let mut snapshots = snapshot::run(
                        &pg,
                        &kafka,
                        registry.as_ref(),
                        o.snapshot_rows,
                        o.snapshot_workers,
                        &o.connector_args,
                        &o.wrap,
                    )?;
                    for r in &mut snapshots {
                        r["round"] = json!(round);
                    }
                    results.extend(snapshots);
                    continue;
                }
                'l' => {
                    results.push(latency::run(
                        &pg,
                        &kafka,
                        o.rate,
                        o.duration_s,
                        &o.connector_args,
                        &o.wrap,
                    )?);
                    continue;
                }
                other => return Err(format!("unknown workload {other}").into()),
            };
            eprintln!("workload {name}: {rows} changes ...");
            let services = Services {
                pg: &pg,
                kafka: &kafka,
                registry: registry.as_ref(),
                recvlogical: &recvlogical,
                connector_args: &o.connector_args,
                wrap: &o.wrap,
                debezium: o.debezium,
            };
            let mut round_results = workload(services, *w, name, rows)?;
            for r in &mut round_results {
                r["round"] = json!(round);
            }
            results.extend(round_results);
        }
    }

    // Rounds were numbered from the first warm-up one.
    let (warm_up_results, mut results): (Vec<Json>, Vec<Json>) = (results.into_iter())
        .partition(|r| r["round"].as_u64().is_some_and(|n| n <= u64::from(warm_up)));
    for r in &mut results {
        r["round"] = json!(r["round"].as_u64().unwrap_or_default() - u64::from(warm_up));
    }
    print_table(&results);
    let mut medians = rounds::medians(&results);
    rounds::print_medians(&medians);
    let snapshot_medians = rounds::snapshot_medians(&results);
    rounds::print_snapshot_medians(&snapshot_medians);
    medians.extend(snapshot_medians);
    let report = json!({
        "machine": machine(),
        "versions": {
            "postgres": pg_version,
            "kafka": KAFKA_VERSION,
            "registry": if o.avro { Json::from(REGISTRY_VERSION) } else { Json::Null },
            "pgcdc_kafka": env!("CARGO_PKG_VERSION"),
            "commit": git_commit(),
        },
        "results": results,
        "medians": medians,
        "warm_up_results": warm_up_results,
    });
    if let Some(dir) = o.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&o.out, serde_json::to_string_pretty(&report)? + "\n")?;
    eprintln!("wrote {}", o.out.display());
    Ok(())
}

/// What a workload runs against; `registry` only when it also runs in Avro.
#[derive(Clone, Copy)]
struct Services<'a> {
    pg: &'a Postgres,
    kafka: &'a Kafka,
    registry: Option<&'a SchemaRegistry>,
    recvlogical: &'a Path,
    connector_args: &'a [String],
    wrap: &'a [String],
    debezium: bool,
}

/// One workload: setup, backlog, then pg_recvlogical and the connector (JSON,
/// and Avro when a registry is given) over the same WAL range.
fn workload(services: Services<'_>, kind: char, name: &str, rows: u64) -> Result<Vec<Json>> {
    let Services {
        pg,
        kafka,
        registry,
        recvlogical,
        connector_args,
        wrap,
        debezium,
    } = services;
    let db = pg.create_database(&format!("bench_{kind}"))?;
    pg.execute(
        &db,
        match kind {
            'e' => &wide::TABLE,
            'o' => OUTBOX_TABLE,
            't' => PARTITIONED_TABLE,
            _ => TABLE,
        },
    )?;
    if kind == 't' {
        pg.execute(
            &db,
            &format!(
                "DO $$ BEGIN FOR k IN 0..{} LOOP \
                   EXECUTE format('CREATE TABLE bench_%s PARTITION OF bench \
                     FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER %s)', k, k); \
                   END LOOP; END $$",
                PARTITIONS - 1
            ),
        )?;
    }
    if kind == 'c' {
        pg.execute(&db, "ALTER TABLE bench REPLICA IDENTITY FULL")?;
        // The rows the backlog updates and deletes exist before the slots do.
        let third = rows / 3;
        pg.execute(
            &db,
            &format!(
                "INSERT INTO bench SELECT {ROW} FROM generate_series(1, {}) AS i",
                2 * third
            ),
        )?;
    }
    pg.execute(&db, "CREATE PUBLICATION bench FOR TABLE bench")?;
    let mut slots = vec![
        "bench_json",
        "bench_recvlogical",
        "bench_recvlogical_tcp",
        "bench_recvlogical_binary",
    ];
    if registry.is_some() {
        slots.push("bench_avro");
    }
    if debezium {
        slots.push("bench_debezium_json");
        if registry.is_some() {
            slots.push("bench_debezium_avro");
        }
    }
    for slot in &slots {
        pg.execute(
            &db,
            &format!("SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"),
        )?;
    }
    let start_lsn = scalar(pg, &db, "SELECT pg_current_wal_lsn()")?;

    let write = Instant::now();
    let changes = write_backlog(pg, &db, kind, rows)?;
    // The backlog commits asynchronously; a checkpoint flushes the WAL, so
    // the range ends at a flushed position (what a walsender can send).
    pg.execute(&db, "CHECKPOINT")?;
    let write_s = write.elapsed().as_secs_f64();
    let end_lsn = scalar(pg, &db, "SELECT pg_current_wal_lsn()")?;
    let wal_bytes: u64 = scalar(
        pg,
        &db,
        &format!("SELECT pg_wal_lsn_diff('{end_lsn}', '{start_lsn}')"),
    )?
    .parse()?;
    eprintln!("  backlog written in {write_s:.1} s: {changes} changes, {wal_bytes} WAL bytes ({start_lsn}..{end_lsn})");

    // The physical limit: the walsender decoding the same range, output
    // discarded, over the server's Unix socket (the cheapest transport: over
    // TCP loopback a reader that keeps up makes the walsender send every
    // change as its own segment, at about twice the walsender CPU); then over
    // TCP, for the transport's cost; then with pgoutput's binary option (PG
    // 14+), which sends column values in their binary send format.
    let recv_url = pg.socket_url(&db).unwrap_or_else(|| pg.url(&db));
    let (recv_s, recv_server_cpu) =
        drain_with_recvlogical(recvlogical, &recv_url, "bench_recvlogical", &end_lsn, false)?;
    eprintln!(
        "  pg_recvlogical: {recv_s:.2} s, walsender {} CPU s",
        fmt_cpu(recv_server_cpu)
    );
    let (tcp_s, tcp_server_cpu) = drain_with_recvlogical(
        recvlogical,
        &pg.url(&db),
        "bench_recvlogical_tcp",
        &end_lsn,
        false,
    )?;
    eprintln!(
        "  pg_recvlogical over TCP: {tcp_s:.2} s, walsender {} CPU s",
        fmt_cpu(tcp_server_cpu)
    );
    let (binary_s, binary_server_cpu) = drain_with_recvlogical(
        recvlogical,
        &recv_url,
        "bench_recvlogical_binary",
        &end_lsn,
        true,
    )?;
    eprintln!(
        "  pg_recvlogical, binary = true: {binary_s:.2} s, walsender {} CPU s",
        fmt_cpu(binary_server_cpu)
    );

    let mut out = Vec::new();
    let mut formats = vec![("json", "bench_json")];
    if registry.is_some() {
        formats.push(("avro", "bench_avro"));
    }
    for (format, slot) in formats {
        let mut args = run_args(
            (pg, &db, kafka),
            &format!("{db}_{format}"),
            slot,
            &["--snapshot-mode", "never", "--stop-when-caught-up"],
        );
        with_format(&mut args, format, registry);
        match kind {
            'u' => args.extend(["--envelope".to_owned(), "unwrap".to_owned()]),
            'o' => args.extend(["--outbox-table".to_owned(), "public.bench".to_owned()]),
            _ => {}
        }
        args.extend(connector_args.iter().cloned());
        // (t)'s topics exist before the run, as in a pipeline that has run
        // before: what is timed is the drain, not the broker creating 200
        // topics one after the other as their first records arrive.
        let partition_topics = match kind {
            't' => create_partition_topics(kafka, &format!("{db}_{format}"))?,
            _ => Vec::new(),
        };
        let walsender = server::WalsenderCpu::watch();
        let broker_before = ceiling::broker_cpu(kafka);
        let run = run_connector(&args, wrap)?;
        let server_cpu = walsender.stop();
        let broker_cpu = broker_before
            .zip(ceiling::broker_cpu(kafka))
            .map(|(a, b)| b - a);
        let events = run.summary["events"].as_u64().unwrap_or(0);
        let complete = events == changes && run.summary["caught_up"] == json!(true);
        if !complete {
            // A run that lost or skipped changes has no figure worth printing.
            return Err(format!(
                "the connector ({format}) did not deliver all {changes} changes and catch up; \
                 summary: {}",
                run.summary
            )
            .into());
        }
        eprintln!(
            "  connector ({format}): {:.2} s, {:.2} CPU s, peak RSS {} MB, walsender {} CPU s",
            run.wall_s,
            run.cpu_s,
            run.peak_rss_kb / 1024,
            fmt_cpu(server_cpu),
        );
        // The same run again with nothing left to read: the fixed cost of
        // starting, connecting, catching up and stopping.
        let idle = run_connector(&args, wrap)?;
        eprintln!(
            "  connector ({format}), nothing to read: {:.2} s",
            idle.wall_s
        );
        // The outbox's records are spread over routed topics: no one topic
        // to read back.
        let alone = match kind {
            'o' => None,
            _ => {
                let topics = match kind {
                    't' => partition_topics,
                    _ => vec![format!("{db}_{format}.public.bench")],
                };
                let alone = ceiling::run_many(kafka, &topics, &args_after_run(&args))?;
                alone.print(format, broker_cpu);
                Some(alone)
            }
        };
        let dbz = match debezium {
            false => None,
            true => {
                let records = run.summary["acknowledged_records"]
                    .as_u64()
                    .unwrap_or(changes);
                // Its topics exist first too, as the connector's did.
                let prefix = format!("{db}_dbz_{format}");
                if kind == 't' {
                    create_partition_topics(kafka, &prefix)?;
                }
                let d = debezium::drain(
                    (pg, &db, kafka),
                    registry.filter(|_| format == "avro"),
                    &format!("bench_debezium_{format}"),
                    &prefix,
                    records,
                )?;
                eprintln!(
                    "  Debezium ({format}): {:.2} s, {:.2} CPU s, peak RSS {} MB",
                    d.wall_s,
                    d.cpu_s,
                    d.peak_rss_kb / 1024
                );
                Some(d)
            }
        };
        let per_change = |cpu: Option<f64>| cpu.map(|c| round(c * 1e6 / changes as f64));
        let recv_rate = changes as f64 / recv_s;
        let alone_rate = alone.as_ref().map(|a| changes as f64 / a.wall_s);
        let limit_rate = alone_rate.map_or(recv_rate, |a| a.min(recv_rate));
        // One transaction: none of its records may reach Kafka before the
        // server has sent its commit, so reading it and producing it cannot
        // overlap. Its limit is the two one after the other.
        let serial_s = alone
            .as_ref()
            .filter(|_| kind == 'd')
            .map(|a| recv_s + a.wall_s);
        out.push(json!({
            "workload": name,
            "format": format,
            "changes": changes,
            "transactions": run.summary["transactions"],
            "all_events_delivered": complete,
            "wal_bytes": wal_bytes,
            "start_lsn": start_lsn,
            "end_lsn": end_lsn,
            "backlog_write_s": round(write_s),
            "recvlogical_s": round(recv_s),
            "recvlogical_rows_per_s": round(changes as f64 / recv_s),
            "recvlogical_wal_mb_per_s": round(wal_bytes as f64 / 1e6 / recv_s),
            "connector_s": round(run.wall_s),
            "connector_rows_per_s": round(changes as f64 / run.wall_s),
            "connector_wal_mb_per_s": round(wal_bytes as f64 / 1e6 / run.wall_s),
            "ratio_to_recvlogical": round(recv_s / run.wall_s),
            "recvlogical_walsender_cpu_s": recv_server_cpu.map(round),
            "recvlogical_tcp_s": round(tcp_s),
            "recvlogical_tcp_rows_per_s": round(changes as f64 / tcp_s),
            "recvlogical_tcp_walsender_cpu_s": tcp_server_cpu.map(round),
            "recvlogical_binary_s": round(binary_s),
            "recvlogical_binary_walsender_cpu_s": binary_server_cpu.map(round),
            "connector_walsender_cpu_s": server_cpu.map(round),
            "walsender_us_per_change": {
                "recvlogical": recv_server_cpu.map(|c| round(c * 1e6 / changes as f64)),
                "recvlogical_tcp": tcp_server_cpu.map(|c| round(c * 1e6 / changes as f64)),
                "recvlogical_binary": binary_server_cpu.map(|c| round(c * 1e6 / changes as f64)),
                "connector": server_cpu.map(|c| round(c * 1e6 / changes as f64)),
            },
            "connector_us_per_change": round(run.cpu_s * 1e6 / changes as f64),
            "broker_cpu_s": broker_cpu.map(round),
            "broker_us_per_change": per_change(broker_cpu),
            "kafka_alone_s": alone.as_ref().map(|a| round(a.wall_s)),
            "kafka_alone_records": alone.as_ref().map(|a| a.records),
            "kafka_alone_bytes": alone.as_ref().map(|a| a.bytes),
            "kafka_alone_rows_per_s": alone_rate.map(round),
            "kafka_alone_broker_us_per_change": per_change(alone.as_ref().and_then(|a| a.broker_cpu_s)),
            "ratio_to_kafka_alone": alone.as_ref().map(|a| round(a.wall_s / run.wall_s)),
            "limit_rows_per_s": round(limit_rate),
            "limit": if alone_rate.is_some_and(|a| a < recv_rate) { "kafka alone" } else { "pg_recvlogical" },
            "ratio_to_limit": round(changes as f64 / run.wall_s / limit_rate),
            "serial_limit_s": serial_s.map(round),
            "ratio_to_serial_limit": serial_s.map(|s| round(s / run.wall_s)),
            "connector_idle_run_s": round(idle.wall_s),
            "debezium_s": dbz.as_ref().map(|d| round(d.wall_s)),
            "debezium_rows_per_s": dbz.as_ref().map(|d| round(changes as f64 / d.wall_s)),
            "debezium_us_per_change": dbz.as_ref().map(|d| round(d.cpu_s * 1e6 / changes as f64)),
            "debezium_peak_rss_mb": dbz.as_ref().map(|d| round(d.peak_rss_kb as f64 / 1024.0)),
            "ratio_to_debezium": dbz.as_ref().map(|d| round(d.wall_s / run.wall_s)),
            "connector_cpu_s": round(run.cpu_s),
            "connector_peak_rss_mb": round(run.peak_rss_kb as f64 / 1024.0),
            "resource_source": run.source,
            "connector_extra_args": connector_args,
            "summary": run.summary,
        }));
    }
    for slot in &slots {
        pg.execute(&db, &format!("SELECT pg_drop_replication_slot('{slot}')"))?;
    }
    pg.execute(&db, "CHECKPOINT")?;
    Ok(out)
}

/// The `pgcdc-kafka` arguments every workload passes (JSON logs, `run`
/// against database `db`, publication `bench`), then `extra`.
fn run_args(
    (pg, db, kafka): (&Postgres, &str, &Kafka),
    topic_prefix: &str,
    slot: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = ["--log-format", "json", "run", "--pg-url"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(pg.url(db));
    args.extend(["--bootstrap-servers".to_owned(), kafka.bootstrap_servers()]);
    for (flag, value) in [
        ("--topic-prefix", topic_prefix),
        ("--slot", slot),
        ("--publication", "bench"),
    ] {
        args.extend([flag.to_owned(), value.to_owned()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Creates (t)'s topics under `prefix`, one per partition of its table,
/// each with one partition; returns their names.
fn create_partition_topics(kafka: &Kafka, prefix: &str) -> Result<Vec<String>> {
    let topics: Vec<String> = (0..PARTITIONS)
        .map(|k| format!("{prefix}.public.bench_{k}"))
        .collect();
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    kafka.create_topics(&names, 1)?;
    Ok(topics)
}

/// The flags after `run` in `args` (what RunConfig parses).
fn args_after_run(args: &[String]) -> Vec<String> {
    args.iter()
        .skip_while(|a| *a != "run")
        .skip(1)
        .cloned()
        .collect()
}

/// `--format`, and the registry's URL for Avro.
fn with_format(args: &mut Vec<String>, format: &str, registry: Option<&SchemaRegistry>) {
    args.extend(["--format".to_owned(), format.to_owned()]);
    if let Some(r) = registry.filter(|_| format == "avro") {
        args.extend(["--schema-registry-url".to_owned(), r.url()]);
    }
}

/// `pg_recvlogical` drains `slot` to `end_lsn` into /dev/null: its wall
/// time, and the walsender's CPU seconds (when its process is visible).
fn drain_with_recvlogical(
    recvlogical: &Path,
    url: &str,
    slot: &str,
    end_lsn: &str,
    binary: bool,
) -> Result<(f64, Option<f64>)> {
    let walsender = server::WalsenderCpu::watch();
    let started = Instant::now();
    let mut command = Command::new(recvlogical);
    command
        .args(["--start", "-S", slot, "-d", url])
        .args(["-o", "proto_version=1", "-o", "publication_names=bench"])
        .args(["--endpos", end_lsn, "-f", "/dev/null", "--no-loop"]);
    if binary {
        command.args(["-o", "binary=true"]);
    }
    let status = command.status()?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu = walsender.stop();
    if !status.success() {
        return Err(format!("pg_recvlogical failed: {status}").into());
    }
    Ok((wall_s, cpu))
}

fn fmt_cpu(cpu: Option<f64>) -> String {
    cpu.map_or_else(|| "n/a".to_owned(), |c| format!("{c:.2}"))
}

/// Writes the backlog with server-side loops (one statement, COMMIT inside a
/// DO block); returns the number of change events it makes.
fn write_backlog(pg: &Postgres, db: &str, kind: char, rows: u64) -> Result<u64> {
    let sync_off = "PERFORM set_config('synchronous_commit', 'off', false);";
    match kind {
        'a' | 'u' | 'o' | 't' => {
            let row = if kind == 'o' { OUTBOX_ROW } else { ROW };
            let batches = rows.div_ceil(TXN_ROWS);
            pg.execute(db, &format!(
                "DO $$ BEGIN {sync_off} FOR b IN 0..{} LOOP \
                   INSERT INTO bench SELECT {row} FROM generate_series(b * {TXN_ROWS} + 1, least((b + 1) * {TXN_ROWS}, {rows})) AS i; \
                   COMMIT; END LOOP; END $$",
                batches - 1
            ))?;
            Ok(rows)
        }
        'b' => {
            pg.execute(
                db,
                &format!(
                    "DO $$ BEGIN {sync_off} FOR i IN 1..{rows} LOOP \
                   INSERT INTO bench VALUES ({ROW}); COMMIT; END LOOP; END $$"
                ),
            )?;
            Ok(rows)
        }
        'd' => {
            pg.execute(
                db,
                &format!(
                    "DO $$ BEGIN {sync_off} \
                     INSERT INTO bench SELECT {ROW} FROM generate_series(1, {rows}) AS i; END $$"
                ),
            )?;
            Ok(rows)
        }
        'e' => {
            let batches = rows.div_ceil(TXN_ROWS);
            pg.execute(db, &format!(
                "DO $$ BEGIN {sync_off} FOR b IN 0..{} LOOP \
                   INSERT INTO bench SELECT {} FROM generate_series(b * {TXN_ROWS} + 1, least((b + 1) * {TXN_ROWS}, {rows})) AS i; \
                   COMMIT; END LOOP; END $$",
                batches - 1,
                *wide::ROW,
            ))?;
            Ok(rows)
        }
        'c' => {
            // ids 1..t are updated, t+1..2t deleted, 2t+1..3t inserted;
            // every transaction does 1,000 of each.
            let t = rows / 3;
            let batches = t.div_ceil(TXN_ROWS);
            pg.execute(db, &format!(
                "DO $$ DECLARE lo bigint; hi bigint; BEGIN {sync_off} FOR b IN 0..{} LOOP \
                   lo := b * {TXN_ROWS} + 1; hi := least((b + 1) * {TXN_ROWS}, {t}); \
                   UPDATE bench SET n = n + 1, payload = md5(payload) || md5(id::text) WHERE id BETWEEN lo AND hi; \
                   DELETE FROM bench WHERE id BETWEEN {t} + lo AND {t} + hi; \
                   INSERT INTO bench SELECT {ROW} FROM generate_series(2 * {t} + lo, 2 * {t} + hi) AS i; \
                   COMMIT; END LOOP; END $$",
                batches - 1
            ))?;
            Ok(3 * t)
        }
        _ => unreachable!("workload kinds are checked in main"),
    }
}

struct Run {
    wall_s: f64,
    cpu_s: f64,
    peak_rss_kb: u64,
    source: &'static str,
    summary: Json,
}

/// Runs the release binary to its exit: under `/usr/bin/time -v` when it
/// exists (getrusage of the child), else polling `/proc/<pid>` every 50 ms;
/// under `wrap` (a profiler) when one is given.
fn run_connector(args: &[String], wrap: &[String]) -> Result<Run> {
    let command = || {
        let mut c = match wrap.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        c.args(args);
        c
    };
    let time = Path::new("/usr/bin/time");
    let log = std::env::temp_dir().join(format!("pgcdc-bench-{}.log", std::process::id()));
    let stderr = std::fs::File::create(&log)?;
    let started = Instant::now();
    let (status, stdout, cpu_s, peak_rss_kb, source);
    if time.exists() {
        let rusage = std::env::temp_dir().join(format!("pgcdc-bench-{}.time", std::process::id()));
        let output = Command::new(time)
            .arg("-v")
            .arg("-o")
            .arg(&rusage)
            .arg(command().get_program())
            .args(command().get_args())
            .stderr(stderr)
            .output()?;
        let report = std::fs::read_to_string(&rusage)?;
        let _ = std::fs::remove_file(&rusage);
        let field = |name: &str| -> f64 {
            report
                .lines()
                .find_map(|l| l.trim().strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        status = output.status;
        stdout = output.stdout;
        cpu_s = field("User time (seconds):") + field("System time (seconds):");
        peak_rss_kb = field("Maximum resident set size (kbytes):") as u64;
        source = "/usr/bin/time -v";
    } else {
        let mut child = command().stdout(Stdio::piped()).stderr(stderr).spawn()?;
        let pid = child.id();
        let mut last = (0.0, 0);
        let reader = {
            let mut out = child.stdout.take().expect("piped");
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut out, &mut buf).map(|_| buf)
            })
        };
        status = loop {
            if let Some(s) = proc_usage(pid) {
                last = (s.0, last.1.max(s.1));
            }
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        stdout = reader.join().expect("reader thread")?;
        (cpu_s, peak_rss_kb) = last;
        source = "/proc/<pid> polled every 50 ms (CPU up to the last poll)";
    }
    let wall_s = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("connector failed ({status}); its log: {}", log.display()).into());
    }
    // Kept only when the run failed: one per benchmark process piled up.
    let _ = std::fs::remove_file(&log);
    let stdout = String::from_utf8_lossy(&stdout);
    let summary = serde_json::from_str(stdout.lines().last().unwrap_or("null"))?;
    Ok(Run {
        wall_s,
        cpu_s,
        peak_rss_kb,
        source,
        summary,
    })
}

/// CPU seconds (utime + stime) and VmHWM in kB of a running process.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = rest.get(11)?.parse::<f64>().ok()? + rest.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    // USER_HZ is 100 on Linux.
    Some((ticks / 100.0, hwm))
}

fn print_table(results: &[Json]) {
    let kind =
        |key: &str| -> Vec<&Json> { results.iter().filter(|r| r.get(key).is_some()).collect() };
    let num = |r: &Json, key: &str| r[key].as_f64().unwrap_or(0.0);
    let backlog = kind("recvlogical_s");
    if !backlog.is_empty() {
        println!("\n| workload | format | changes | WAL MB | pg_recvlogical s | rows/s | WAL MB/s | connector s | rows/s | ratio | CPU s | peak RSS MB |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &backlog {
            println!(
                "| {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.1} | {:.2} | {:.0} | {:.2} | {:.2} | {:.0} |",
                r["workload"].as_str().unwrap_or(""),
                r["format"].as_str().unwrap_or(""),
                r["changes"],
                num(r, "wal_bytes") / 1e6,
                num(r, "recvlogical_s"),
                num(r, "recvlogical_rows_per_s"),
                num(r, "recvlogical_wal_mb_per_s"),
                num(r, "connector_s"),
                num(r, "connector_rows_per_s"),
                num(r, "ratio_to_recvlogical"),
                num(r, "connector_cpu_s"),
                num(r, "connector_peak_rss_mb"),
            );
        }
        println!("\nCPU per change, µs (walsender: the server decoding the slot for that reader):");
        println!("\n| workload | format | walsender, pg_recvlogical | walsender, pg_recvlogical binary | pg_recvlogical binary s | walsender, connector | connector |");
        println!("|---|---|---:|---:|---:|---:|---:|");
        let us = |r: &Json, reader: &str| {
            r["walsender_us_per_change"][reader]
                .as_f64()
                .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"))
        };
        for r in &backlog {
            println!(
                "| {} | {} | {} | {} | {:.2} | {} | {:.2} |",
                r["workload"].as_str().unwrap_or(""),
                r["format"].as_str().unwrap_or(""),
                us(r, "recvlogical"),
                us(r, "recvlogical_binary"),
                num(r, "recvlogical_binary_s"),
                us(r, "connector"),
                num(r, "connector_us_per_change"),
            );
        }
    }
    let snapshots = kind("copy_s");
    if !snapshots.is_empty() {
        println!("\n| workload | format | rows | table MB | COPY s | rows/s | connector s | rows/s | ratio to COPY | Kafka alone s | ratio to Kafka alone | record bytes | CPU s | CPU µs/row | load avg | peak RSS MB |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in snapshots {
            println!(
                "| {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {:.2} | {:.0} |",
                r["workload"].as_str().unwrap_or(""),
                r["format"].as_str().unwrap_or(""),
                r["rows"],
                num(r, "table_mb"),
                num(r, "copy_s"),
                num(r, "copy_rows_per_s"),
                num(r, "connector_s"),
                num(r, "connector_rows_per_s"),
                num(r, "ratio_to_copy"),
                num(r, "kafka_alone_s"),
                num(r, "ratio_to_kafka_alone"),
                r["record_bytes"],
                num(r, "connector_cpu_s"),
                num(r, "connector_us_per_row"),
                num(r, "load_average_1m"),
                num(r, "connector_peak_rss_mb"),
            );
        }
    }
    let steady = kind("latency_p50_ms");
    if !steady.is_empty() {
        println!("\n| workload | records | commit-to-append p50 ms | p99 ms | max ms | CPU s | peak RSS MB |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for r in steady {
            println!(
                "| {} | {} | {} | {} | {} | {:.2} | {:.0} |",
                r["workload"].as_str().unwrap_or(""),
                r["records_read"],
                r["latency_p50_ms"],
                r["latency_p99_ms"],
                r["latency_max_ms"],
                num(r, "connector_cpu_s"),
                num(r, "connector_peak_rss_mb"),
            );
        }
    }
}

fn scalar(pg: &Postgres, db: &str, sql: &str) -> Result<String> {
    pg.query(db, sql)?
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .ok_or_else(|| format!("no value from {sql}").into())
}

/// The bin dir pgcdc-testcontainers uses (`PGCDC_PG_BINDIR`, else the newest
/// `/usr/lib/postgresql/*/bin`).
fn pg_bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PGCDC_PG_BINDIR") {
        return dir.into();
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("pg_recvlogical").exists())
        .collect();
    dirs.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
    });
    dirs.pop()
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
}

fn machine() -> Json {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines().find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
    });
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_owned())
            })
        });
    json!({ "cpus": cpus, "cpu_model": model, "os": os })
}

fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short",
            "HEAD",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
