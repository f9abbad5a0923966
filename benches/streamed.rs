//! One large transaction, received whole after its commit (pgoutput protocol
//! 1) or streamed while it runs (`--stream-in-progress`, protocol 2):
//!
//! ```text
//! cargo bench --bench streamed -- [--rows N] [--rounds R] [--spool-memory-bytes B]
//! ```
//!
//! Per round and mode: a fresh database and table, the connector binary
//! started and streaming, then one transaction inserting `--rows` rows
//! (default 1,000,000; about 150 bytes each) with the server's default
//! `logical_decoding_work_mem` (64 MB). Reported: the slot's
//! `pg_stat_replication_slots` (`spill_bytes` against `stream_bytes`), the
//! time from the COMMIT returning to the last record being in Kafka (the
//! topic's high watermark polled every 5 ms), and the connector's peak RSS
//! (`VmHWM`). The modes alternate within each round.

use std::error::Error;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

struct Options {
    rows: u64,
    rounds: usize,
    spool_memory_bytes: Option<String>,
}

fn options() -> Result<Options> {
    let mut o = Options {
        rows: 1_000_000,
        rounds: 1,
        spool_memory_bytes: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--rows" => o.rows = value()?.parse()?,
            "--rounds" => o.rounds = value()?.parse()?,
            "--spool-memory-bytes" => o.spool_memory_bytes = Some(value()?),
            // cargo bench passes --bench.
            "--bench" => {}
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    Ok(o)
}

/// What one run measured.
struct Measured {
    spill_bytes: u64,
    spill_txns: u64,
    stream_bytes: u64,
    stream_txns: u64,
    commit_to_last_ack: Duration,
    insert: Duration,
    peak_rss_mb: f64,
}

fn scalar(pg: &Postgres, db: &str, sql: &str) -> Result<String> {
    pg.query(db, sql)?
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .ok_or_else(|| format!("no value from {sql}").into())
}

fn peak_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Kills the connector when dropped.
struct Connector(Child);

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(pg: &Postgres, kafka: &Kafka, o: &Options, streaming: bool) -> Result<Measured> {
    let db = pg.create_database("bench_streamed")?;
    pg.execute(
        &db,
        "CREATE TABLE big (id bigint PRIMARY KEY, payload text NOT NULL)",
    )?;
    let slot = unique_name("slot");
    let topic = format!("{db}.public.big");
    kafka.create_topic(&topic, 1)?;
    let spool_dir = std::env::temp_dir().join(unique_name("bench-spool"));
    let mut args = vec![
        "run".to_owned(),
        "--pg-url".to_owned(),
        pg.url(&db),
        "--bootstrap-servers".to_owned(),
        kafka.bootstrap_servers(),
        "--topic-prefix".to_owned(),
        db.clone(),
        "--slot".to_owned(),
        slot.clone(),
        "--snapshot-mode".to_owned(),
        "never".to_owned(),
        "--stream-in-progress".to_owned(),
        streaming.to_string(),
        "--spool-dir".to_owned(),
        spool_dir.display().to_string(),
    ];
    if let Some(bytes) = &o.spool_memory_bytes {
        args.extend(["--spool-memory-bytes".to_owned(), bytes.clone()]);
    }
    let child = Command::new(BIN)
        .args(&args)
        .env("PGCDC_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let _connector = Connector(child);
    let slot_sql = format!(
        "SELECT confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots WHERE slot_name = '{slot}'"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while scalar(pg, &db, &slot_sql).ok().as_deref() != Some("t") {
        if Instant::now() > deadline {
            return Err("the connector did not make its slot within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Streaming once a first row made it to Kafka.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .set("group.id", unique_name("bench"))
        .create()?;
    let high = |consumer: &BaseConsumer| {
        consumer
            .fetch_watermarks(&topic, 0, Duration::from_secs(5))
            .map(|(_, high)| high)
            .unwrap_or(0)
    };
    pg.execute(&db, "INSERT INTO big VALUES (0, 'warm-up')")?;
    while high(&consumer) < 1 {
        if Instant::now() > deadline {
            return Err("the connector did not stream within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    let url = pg.url(&db);
    let rows = o.rows;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (insert, committed) = runtime.block_on(async move {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let started = Instant::now();
        client
            .batch_execute(&format!(
                "BEGIN; INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, {rows}) g"
            ))
            .await?;
        let insert = started.elapsed();
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>((insert, Instant::now()))
    })?;
    let total = i64::try_from(rows + 1)?;
    let end = Instant::now() + Duration::from_secs(600);
    while high(&consumer) < total {
        if Instant::now() > end {
            return Err("the transaction did not reach Kafka within 600 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let commit_to_last_ack = committed.elapsed();
    let peak_rss_mb = peak_rss_mb(pid);
    // The slot's statistics reach the view shortly after.
    std::thread::sleep(Duration::from_secs(1));
    let stats = scalar(
        pg,
        &db,
        &format!(
            "SELECT concat_ws(',', spill_bytes, spill_txns, stream_bytes, stream_txns) \
             FROM pg_stat_replication_slots WHERE slot_name = '{slot}'"
        ),
    )?;
    let numbers: Vec<u64> = stats
        .split(',')
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()?;
    let _ = std::fs::remove_dir_all(&spool_dir);
    Ok(Measured {
        spill_bytes: numbers[0],
        spill_txns: numbers[1],
        stream_bytes: numbers[2],
        stream_txns: numbers[3],
        commit_to_last_ack,
        insert,
        peak_rss_mb,
    })
}

fn main() -> Result<()> {
    let o = options()?;
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    println!(
        "| mode | rows | INSERT s | COMMIT to last ack s | spill MB (txns) | stream MB (txns) | peak RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|");
    for round in 0..o.rounds {
        // Alternate which mode goes first.
        let modes = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for streaming in modes {
            let m = run(pg, kafka, &o, streaming)?;
            println!(
                "| {} | {} | {:.1} | {:.2} | {:.0} ({}) | {:.0} ({}) | {:.0} |",
                if streaming {
                    "streaming (protocol 2)"
                } else {
                    "whole (protocol 1)"
                },
                o.rows,
                m.insert.as_secs_f64(),
                m.commit_to_last_ack.as_secs_f64(),
                m.spill_bytes as f64 / 1e6,
                m.spill_txns,
                m.stream_bytes as f64 / 1e6,
                m.stream_txns,
                m.peak_rss_mb,
            );
        }
    }
    Ok(())
}
