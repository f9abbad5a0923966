//! Fleet mode end to end, with the real binary, a real PostgreSQL and a
//! real Kafka broker: three instances share six pipelines over three
//! databases under continuous load, and one fleet goes through, in order,
//! (a) instances killed with SIGKILL in rounds and restarted, the time
//! from each kill to every table streaming again measured and printed;
//! (b) a rolling restart (SIGTERM, start again with the same instance id)
//! that must move no pipeline; (c) a pipeline added with `fleet apply`
//! and removed with `fleet remove` while the fleet runs; (d) an instance
//! cut off from Kafka (its only path to the broker is a fault proxy that
//! stalls) while still connected to PostgreSQL: its pipelines move, and
//! there are never two writers. At the end every table is checked row by
//! row against its topic (nothing lost), and every partition's records
//! against their writer: each record carries its run's id
//! (`__debezium.context.runId`), and a run that was followed by another
//! never writes again.
//!
//! One test, so that the services, the fleet and the load are set up once
//! (the whole takes about three minutes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::process::{ConnectorProcess, LogDir};
use common::{wait_for, wait_until, TIMEOUT};
use pgcdc_testcontainers::{unique_name, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message};
use serde_json::Value as Json;

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");
const INSTANCES: usize = 3;
const DATABASES: usize = 3;
const TABLES_PER_DB: usize = 2;
const RUN_ID: &str = "__debezium.context.runId";

/// One pipeline of the test: its database, table and names.
#[derive(Debug, Clone)]
struct Pipe {
    name: String,
    db: String,
    table: String,
    slot: String,
    publication: String,
    prefix: String,
    /// `--delivery exactly-once` (else at-least-once).
    exactly_once: bool,
}

impl Pipe {
    fn new(name: &str, db: &str, table: &str, run: &str, exactly_once: bool) -> Pipe {
        Pipe {
            exactly_once,
            name: name.to_owned(),
            db: db.to_owned(),
            table: table.to_owned(),
            slot: unique_name("fleet_slot"),
            publication: unique_name("fleet_pub"),
            prefix: format!("{run}_{name}"),
        }
    }

    fn topic(&self) -> String {
        format!("{}.public.{}", self.prefix, self.table)
    }

    fn toml(&self, pg: &Postgres, password_file: &Path) -> String {
        format!(
            "[pipelines.{name}]\n\
             pg_url = \"postgres://{user}:${{file:{pw}}}@127.0.0.1:{port}/{db}\"\n\
             slot = \"{slot}\"\npublication = \"{publication}\"\ntopic_prefix = \"{prefix}\"\n\
             table = [\"public.{table}\"]\nstatus_interval = \"200ms\"\ndelivery = \"{delivery}\"\n",
            name = self.name,
            user = pg.user(),
            pw = password_file.display(),
            port = pg.port(),
            db = self.db,
            slot = self.slot,
            publication = self.publication,
            prefix = self.prefix,
            table = self.table,
            delivery = if self.exactly_once { "exactly-once" } else { "at-least-once" },
        )
    }
}

/// Every record of the pipelines' topics as it arrives: per topic, the
/// `(partition, id, run id)` in arrival order.
#[derive(Default)]
struct Seen {
    /// Per topic: `(partition, id, run id, arrival)` in offset order.
    records: BTreeMap<String, Vec<(i32, i64, String, Instant)>>,
    /// The next offset per topic partition: the reader's own group
    /// rebalances when a topic appears and may read a partition again.
    next_offset: BTreeMap<(String, i32), i64>,
}

impl Seen {
    fn max_id(&self, topic: &str) -> i64 {
        self.records
            .get(topic)
            .and_then(|r| r.iter().map(|(_, id, _, _)| *id).max())
            .unwrap_or(0)
    }
}

/// Reads every topic matching `^<run>` on a thread until `stop`.
fn collect(
    bootstrap: String,
    run: String,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", unique_name("fleet_reader"))
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create()
            .expect("reader");
        consumer
            .subscribe(&[&format!("^{run}_.*")])
            .expect("subscribe by pattern");
        while !stop.load(Ordering::Relaxed) {
            let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let Some(value) = message.payload() else {
                continue;
            };
            let Ok(value) = serde_json::from_slice::<Json>(value) else {
                continue;
            };
            let row = value.get("payload").unwrap_or(&value);
            let Some(id) = row["after"]["id"].as_i64() else {
                continue;
            };
            let run_id = message
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == RUN_ID).and_then(|h| h.value))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            let mut seen = seen.lock().expect("seen");
            let at = (message.topic().to_owned(), message.partition());
            let next = seen.next_offset.entry(at).or_insert(0);
            if message.offset() < *next {
                continue;
            }
            *next = message.offset() + 1;
            seen.records
                .entry(message.topic().to_owned())
                .or_default()
                .push((message.partition(), id, run_id, Instant::now()));
        }
    })
}

/// The fleet's instances, each incarnation logging to its own file.
struct Fleet {
    name: String,
    dir: PathBuf,
    bootstraps: Vec<String>,
    instances: Vec<Option<ConnectorProcess>>,
    /// Each instance's --metrics-addr (the same for every incarnation).
    metrics: Vec<String>,
    incarnations: Vec<usize>,
    logs: Vec<PathBuf>,
}

impl Fleet {
    fn id(i: usize) -> String {
        format!("instance{i}")
    }

    fn start(&mut self, i: usize) {
        self.incarnations[i] += 1;
        let log = self
            .dir
            .join(format!("{}-{}.log", Fleet::id(i), self.incarnations[i]));
        let args: Vec<String> = [
            "--fleet",
            &self.name,
            "--fleet-instance",
            &Fleet::id(i),
            "--bootstrap-servers",
            &self.bootstraps[i],
            "--metrics-addr",
            &self.metrics[i],
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.logs.push(log.clone());
        self.instances[i] = Some(ConnectorProcess::spawn(&args, log));
    }

    fn instance(&self, i: usize) -> &ConnectorProcess {
        self.instances[i].as_ref().expect("instance running")
    }

    /// `pgcdc-kafka fleet ARGS...` against the direct listener.
    fn admin(&self, bootstrap: &str, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(BIN)
            .args(["--log-format", "json", "fleet"])
            .args(args)
            .args(["--fleet", &self.name, "--bootstrap-servers", bootstrap])
            .output()
            .expect("fleet command runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn status(&self, bootstrap: &str) -> Json {
        let (ok, out, err) = self.admin(bootstrap, &["status"]);
        assert!(ok, "fleet status failed: {err}");
        serde_json::from_str(out.trim()).expect("status is JSON")
    }

    /// The owner of each pipeline now, once every pipeline has one and the
    /// instances hold `per_instance` partitions each.
    async fn balanced(&self, bootstrap: &str, pipelines: usize) -> BTreeMap<String, String> {
        wait_for(TIMEOUT, "a balanced fleet", || async {
            let status = self.status(bootstrap);
            let owners: BTreeMap<String, String> = status["pipelines"]
                .as_array()
                .expect("pipelines")
                .iter()
                .filter_map(|p| {
                    Some((
                        p["pipeline"].as_str()?.to_owned(),
                        p["owner"].as_str()?.to_owned(),
                    ))
                })
                .collect();
            let counts: Vec<usize> = status["instances"]
                .as_array()
                .expect("instances")
                .iter()
                .map(|i| i["partitions"].as_array().map_or(0, Vec::len))
                .collect();
            let spread = counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0);
            if owners.len() == pipelines && counts.len() == INSTANCES && spread <= 1 {
                Ok(owners)
            } else {
                Err(format!("{status}"))
            }
        })
        .await
    }

    /// `(pipeline, instance)` of every "fleet pipeline started" line
    /// written since `marks` (log lengths).
    fn starts_since(&self, marks: &BTreeMap<PathBuf, usize>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for log in &self.logs {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let from = marks.get(log).copied().unwrap_or(0).min(text.len());
            for line in text[from..]
                .lines()
                .filter(|l| l.contains("fleet pipeline started"))
            {
                let field = |k: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(&format!("{k}=")))
                        .map(|v| v.trim_matches('"').to_owned())
                        .unwrap_or_default()
                };
                out.push((field("pipeline"), field("instance")));
            }
        }
        out
    }

    fn marks(&self) -> BTreeMap<PathBuf, usize> {
        self.logs
            .iter()
            .map(|l| {
                (
                    l.clone(),
                    std::fs::metadata(l).map_or(0, |m| m.len() as usize),
                )
            })
            .collect()
    }
}

/// A free loopback address for a metrics endpoint.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").to_string()
}

/// The value of fleet series `name` on the metrics page at `addr`.
fn fleet_sample(addr: &str, name: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(addr).ok()?;
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    socket.read_to_string(&mut response).ok()?;
    response.lines().find_map(|l| {
        l.strip_prefix(&format!("{name}{{"))?
            .split_once("} ")?
            .1
            .parse()
            .ok()
    })
}

/// Inserts rows into every table continuously: ids 1, 2, 3... per table.
fn load(
    pg: &'static Postgres,
    pipes: &[Pipe],
    next: Arc<BTreeMap<String, AtomicI64>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let pipes = pipes.to_vec();
    tokio::spawn(async move {
        let mut clients = BTreeMap::new();
        for p in &pipes {
            if !clients.contains_key(&p.db) {
                clients.insert(p.db.clone(), pg.connect(&p.db).await.expect("connect"));
            }
        }
        while !stop.load(Ordering::Relaxed) {
            for p in &pipes {
                let id = next[&p.topic()].fetch_add(1, Ordering::SeqCst);
                clients[&p.db]
                    .execute(
                        &format!("INSERT INTO {} (id, v) VALUES ($1, 'x')", p.table),
                        &[&id],
                    )
                    .await
                    .expect("insert");
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    })
}

/// The next id of every table now: a topic holding an id at or above its
/// mark has streamed everything written before.
fn marks(next: &BTreeMap<String, AtomicI64>) -> BTreeMap<String, i64> {
    next.iter()
        .map(|(t, n)| (t.clone(), n.load(Ordering::SeqCst)))
        .collect()
}

/// Waits until every topic reached its mark of `marks`; returns how long
/// that took from `started`.
async fn streaming_since(
    seen: &Arc<Mutex<Seen>>,
    marks: &BTreeMap<String, i64>,
    started: Instant,
    what: &str,
) -> Duration {
    wait_until(TIMEOUT, what, || async {
        let seen = seen.lock().expect("seen");
        marks
            .iter()
            .all(|(topic, mark)| seen.max_id(topic) >= *mark)
    })
    .await;
    started.elapsed()
}

/// [`streaming_since`] the marks of now.
async fn streaming_again(
    seen: &Arc<Mutex<Seen>>,
    next: &BTreeMap<String, AtomicI64>,
    started: Instant,
    what: &str,
) -> Duration {
    streaming_since(seen, &marks(next), started, what).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_fails_over_rebalances_and_never_runs_a_pipeline_twice() {
    let pg = Postgres::shared();
    let kafka = common::kafka_behind_proxy().await;
    let direct = kafka.bootstrap_servers();
    let proxied = kafka.proxied_bootstrap_servers().expect("proxied listener");
    let proxy = kafka.proxy().expect("proxy");
    let run = unique_name("fl");
    // Config files and every instance's logs: kept when the test fails.
    let logs = LogDir::new("fleet");
    let dir = logs.dir().to_path_buf();
    let password = dir.join("pg-password");
    std::fs::write(&password, format!("{}\n", pg.password())).expect("password file");

    let mut pipes = Vec::new();
    for _ in 0..DATABASES {
        let db = pg.create_database("fleet").expect("database");
        for t in 0..TABLES_PER_DB {
            let table = format!("t{t}");
            pg.execute(
                &db,
                &format!("CREATE TABLE {table} (id bigint PRIMARY KEY, v text)"),
            )
            .expect("table");
            let name = format!("p{}", pipes.len());
            // Odd pipelines exactly-once, even ones at-least-once.
            let exactly_once = pipes.len() % 2 == 1;
            pipes.push(Pipe::new(&name, &db, &table, &run, exactly_once));
        }
    }
    let file = dir.join("fleet.toml");
    let body: String = pipes.iter().map(|p| p.toml(pg, &password)).collect();
    std::fs::write(&file, format!("snapshot_mode = \"initial\"\n{body}")).expect("fleet file");

    let mut fleet = Fleet {
        name: run.clone(),
        dir: dir.clone(),
        // The last instance reaches Kafka only through the proxy, for (d).
        bootstraps: (0..INSTANCES)
            .map(|i| {
                if i == INSTANCES - 1 {
                    proxied.clone()
                } else {
                    direct.clone()
                }
            })
            .collect(),
        instances: (0..INSTANCES).map(|_| None).collect(),
        metrics: (0..INSTANCES).map(|_| free_addr()).collect(),
        incarnations: vec![0; INSTANCES],
        logs: Vec::new(),
    };

    // A literal password is refused, naming the key and the way out.
    let literal = dir.join("literal.toml");
    std::fs::write(
        &literal,
        format!(
            "[pipelines.bad]\npg_url = \"{}\"\ntopic_prefix = \"x\"\n",
            pg.url("x")
        ),
    )
    .expect("file");
    let (ok, _, err) = fleet.admin(&direct, &["apply", literal.to_str().expect("utf-8")]);
    assert!(
        !ok && err.contains("pipelines.bad.pg_url") && err.contains("${env:"),
        "{err}"
    );

    // A fleet nothing was applied to yet, and a misspelt key.
    let (ok, _, err) = fleet.admin(&direct, &["status"]);
    assert!(!ok && err.contains("fleet apply"), "{err}");
    let typo = dir.join("typo.toml");
    std::fs::write(
        &typo,
        "[pipelines.typo]\npg_url = \"postgres://u@h/d\"\ntopic_prefix = \"x\"\nslott = \"s\"\n",
    )
    .expect("file");
    let (ok, _, err) = fleet.admin(&direct, &["apply", typo.to_str().expect("utf-8")]);
    assert!(
        !ok && err.contains("slott") && err.contains("did you mean \"slot\""),
        "{err}"
    );

    let (ok, out, err) = fleet.admin(&direct, &["apply", file.to_str().expect("utf-8")]);
    assert!(ok, "fleet apply: {err}");
    assert_eq!(out.matches("\"added\"").count(), pipes.len(), "{out}");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop_reading = Arc::new(AtomicBool::new(false));
    let reader = collect(
        direct.clone(),
        run.clone(),
        Arc::clone(&seen),
        Arc::clone(&stop_reading),
    );
    let next: Arc<BTreeMap<String, AtomicI64>> = Arc::new(
        pipes
            .iter()
            .map(|p| (p.topic(), AtomicI64::new(1)))
            .collect(),
    );
    let stop_load = Arc::new(AtomicBool::new(false));
    let loader = load(pg, &pipes, Arc::clone(&next), Arc::clone(&stop_load));

    let started = Instant::now();
    for i in 0..INSTANCES {
        fleet.start(i);
    }
    let took = streaming_again(&seen, &next, started, "every pipeline streaming at start").await;
    println!(
        "[fleet] {} pipelines on {INSTANCES} instances streaming {took:?} after start",
        pipes.len()
    );
    fleet.balanced(&direct, pipes.len()).await;
    wait_until(
        TIMEOUT,
        "instance0's fleet metrics to show its assignment",
        || async {
            fleet_sample(&fleet.metrics[0], "pgcdc_fleet_member") == Some(1.0)
                && fleet_sample(&fleet.metrics[0], "pgcdc_fleet_assigned_partitions") == Some(2.0)
                && fleet_sample(&fleet.metrics[0], "pgcdc_fleet_pipelines_running") == Some(2.0)
        },
    )
    .await;

    // (a) SIGKILL in rounds, each instance restarted after its pipelines
    // stream elsewhere.
    for round in 0..2 {
        let victim = round;
        let killed = Instant::now();
        fleet.instance(victim).kill_9();
        let took = streaming_again(
            &seen,
            &next,
            killed,
            "every pipeline streaming after a kill",
        )
        .await;
        println!(
            "[fleet] round {round}: {} killed; every pipeline streaming again after {took:?}",
            Fleet::id(victim)
        );
        assert!(took < Duration::from_secs(60), "failover took {took:?}");
        fleet.start(victim);
        fleet.balanced(&direct, pipes.len()).await;
    }

    // (b) A rolling restart moves nothing: each instance comes back within
    // the session timeout with its id, and gets its partitions back.
    let before = fleet.balanced(&direct, pipes.len()).await;
    let log_marks = fleet.marks();
    for i in 0..INSTANCES {
        let stopped = Instant::now();
        let at_stop = marks(&next);
        fleet
            .instance(i)
            .terminate_cleanly(Duration::from_secs(40))
            .await;
        fleet.start(i);
        // Written after the restart, so streamed by the restarted instance.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let took = streaming_since(
            &seen,
            &marks(&next),
            stopped,
            "every pipeline streaming after a restart",
        )
        .await;
        assert!(marks(&next)
            .values()
            .zip(at_stop.values())
            .all(|(now, then)| now > then));
        println!("[fleet] rolling restart: {} stopped and started; every pipeline streaming again {took:?} after the SIGTERM", Fleet::id(i));
    }
    let after = fleet.balanced(&direct, pipes.len()).await;
    let starts = fleet.starts_since(&log_marks);
    let moves = starts
        .iter()
        .filter(|(pipeline, instance)| before.get(pipeline) != Some(instance))
        .count();
    println!(
        "[fleet] rolling restart: {} starts, {moves} moved",
        starts.len()
    );
    assert_eq!(
        moves, 0,
        "a rolling restart moved pipelines: {starts:?}; before {before:?}"
    );
    assert_eq!(before, after);

    // (c) Add a pipeline while the fleet runs, then remove it.
    let extra_db = pipes[0].db.clone();
    pg.execute(&extra_db, "CREATE TABLE t9 (id bigint PRIMARY KEY, v text)")
        .expect("table");
    pg.execute(
        &extra_db,
        "INSERT INTO t9 SELECT g, 'x' FROM generate_series(1, 50) g",
    )
    .expect("rows");
    let extra = Pipe::new("added", &extra_db, "t9", &run, false);
    // A foreign session holds the new pipeline's slot (as a previous
    // owner still stopping would): the fleet waits for it, with backoff.
    let holder_config = pgcdc_kafka::config::RunConfig::from_args([
        "--pg-url",
        &pg.url(&extra_db),
        "--bootstrap-servers",
        &direct,
        "--topic-prefix",
        &extra.prefix,
        "--slot",
        &extra.slot,
        "--publication",
        &extra.publication,
        "--table",
        "public.t9",
    ])
    .expect("holder flags");
    let (stop_holder, shutdown) = pgcdc_kafka::pipeline::Shutdown::new();
    let holder = tokio::spawn(pgcdc_kafka::pipeline::run(holder_config, shutdown));
    let slot_active = |slot: &str| {
        pg.query(
            &extra_db,
            &format!("SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        )
        .expect("slot query")
        .first()
        .and_then(|r| r.first().cloned().flatten())
    };
    wait_until(TIMEOUT, "the foreign session to hold the slot", || async {
        slot_active(&extra.slot).as_deref() == Some("t")
    })
    .await;
    let added = dir.join("added.toml");
    std::fs::write(&added, extra.toml(pg, &password)).expect("file");
    let (ok, out, err) = fleet.admin(&direct, &["apply", added.to_str().expect("utf-8")]);
    assert!(ok, "apply of one more pipeline: {err}");
    assert!(
        out.contains("\"added\"") && out.contains(&format!("\"index\":{}", pipes.len())),
        "{out}"
    );
    wait_until(
        TIMEOUT,
        "a fleet instance to wait for the held slot",
        || async {
            fleet.logs.iter().any(|l| {
                std::fs::read_to_string(l)
                    .unwrap_or_default()
                    .contains("slot is still held by another session")
            })
        },
    )
    .await;
    let released = Instant::now();
    stop_holder.send(true).expect("holder running");
    holder
        .await
        .expect("holder task")
        .expect("holder stops cleanly");
    pg.execute(
        &extra_db,
        "INSERT INTO t9 SELECT g, 'y' FROM generate_series(51, 100) g",
    )
    .expect("rows");
    wait_until(
        TIMEOUT,
        "the added pipeline to stream its table",
        || async { seen.lock().expect("seen").max_id(&extra.topic()) >= 100 },
    )
    .await;
    println!(
        "[fleet] added pipeline streaming {:?} after the foreign session released its slot",
        released.elapsed()
    );
    assert_eq!(slot_active(&extra.slot).as_deref(), Some("t"));
    let (ok, out, err) = fleet.admin(&direct, &["remove", &extra.name]);
    assert!(ok && out.contains("removed"), "fleet remove: {out} {err}");
    wait_until(
        TIMEOUT,
        "the removed pipeline's slot to be released",
        || async { slot_active(&extra.slot).as_deref() == Some("f") },
    )
    .await;
    let status = fleet.status(&direct);
    assert!(
        !status.to_string().contains(&format!("\"{}\"", extra.name)),
        "{status}"
    );
    let (ok, _, err) = fleet.admin(&direct, &["remove", &extra.name]);
    assert!(!ok && err.contains("is not in the fleet"), "{err}");
    fleet.balanced(&direct, pipes.len()).await;

    // (d) The last instance is cut off from Kafka (its only path stalls),
    // still connected to PostgreSQL: its pipelines move to the others,
    // which wait for the slots it releases when its session expires.
    let victim = INSTANCES - 1;
    let cut = Instant::now();
    proxy.stall();
    let took = streaming_again(
        &seen,
        &next,
        cut,
        "every pipeline streaming with one instance cut off",
    )
    .await;
    println!(
        "[fleet] {} cut off from Kafka; every pipeline streaming again after {took:?}",
        Fleet::id(victim)
    );
    wait_until(
        TIMEOUT,
        "the cut-off instance to notice and stop its pipelines",
        || async {
            fleet
                .instance(victim)
                .log_text()
                .contains("session with the fleet's group expired")
        },
    )
    .await;
    let lost = fleet_sample(&fleet.metrics[victim], "pgcdc_fleet_partitions_lost_total");
    assert!(
        lost.is_some_and(|l| l >= 1.0),
        "lost partitions counted: {lost:?}"
    );
    proxy.resume();
    fleet.balanced(&direct, pipes.len()).await;
    streaming_again(
        &seen,
        &next,
        Instant::now(),
        "every pipeline streaming after the heal",
    )
    .await;

    // A second instance started with instance0's id takes its place; the
    // first is put out of the group and stops, saying why.
    let replaced = fleet.instances[0].take().expect("instance0 running");
    fleet.metrics[0] = free_addr();
    fleet.start(0);
    let status = replaced.wait_exit(TIMEOUT).await;
    assert_eq!(status.code(), Some(1), "{}", replaced.log_text());
    assert!(
        replaced.log_text().contains("same --fleet-instance"),
        "{}",
        replaced.log_text()
    );
    fleet.balanced(&direct, pipes.len()).await;
    streaming_again(
        &seen,
        &next,
        Instant::now(),
        "every pipeline streaming after the replacement",
    )
    .await;

    // Stop the load, let everything arrive, and check row by row.
    stop_load.store(true, Ordering::Relaxed);
    loader.await.expect("load task");
    let mut all = pipes.clone();
    all.push(extra);
    wait_until(TIMEOUT, "every row of every table in Kafka", || async {
        let seen = seen.lock().expect("seen");
        pipes
            .iter()
            .all(|p| seen.max_id(&p.topic()) >= next[&p.topic()].load(Ordering::SeqCst) - 1)
    })
    .await;
    std::thread::sleep(Duration::from_secs(1));
    {
        let seen = seen.lock().expect("seen");
        let mut resent = 0;
        let mut late = 0;
        for p in &all {
            let rows: BTreeSet<i64> = pg
                .query(&p.db, &format!("SELECT id FROM {}", p.table))
                .expect("rows")
                .into_iter()
                .filter_map(|r| r.first().cloned().flatten()?.parse().ok())
                .collect();
            let records = seen.records.get(&p.topic()).cloned().unwrap_or_default();
            let ids: BTreeSet<i64> = records.iter().map(|(_, id, _, _)| *id).collect();
            let missing: Vec<&i64> = rows.difference(&ids).collect();
            assert!(
                missing.is_empty(),
                "{}: {} rows missing from {}, e.g. {:?}",
                p.name,
                missing.len(),
                p.topic(),
                &missing[..missing.len().min(10)]
            );
            let duplicates = records.len() - ids.len();
            // Never two writers: per partition, once a run is followed by
            // another, it never writes again. Under exactly-once a zombie is
            // fenced (its late writes are aborted, unseen by read_committed).
            // Under at-least-once the produce requests a cut-off instance had
            // on the wire when it was cut off land when the network heals,
            // after the new owner's records: counted, and allowed only then.
            let mut partitions: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
            let mut late_here = 0;
            for (partition, _, run_id, arrived) in &records {
                let runs = partitions.entry(*partition).or_default();
                if runs.last() == Some(&run_id.as_str()) {
                    continue;
                }
                if runs.contains(&run_id.as_str()) {
                    assert!(
                        !p.exactly_once && *arrived > cut,
                        "{}: run {run_id} wrote again after another run did: two writers",
                        p.topic()
                    );
                    late_here += 1;
                }
                runs.push(run_id);
            }
            if p.exactly_once {
                assert_eq!(
                    duplicates, 0,
                    "{}: exactly-once, yet {duplicates} records twice",
                    p.name
                );
            } else {
                resent += duplicates;
                late += late_here;
            }
            println!(
                "[fleet] {} ({}): {} rows, all in Kafka; {} runs wrote it; {duplicates} duplicates",
                p.name,
                if p.exactly_once {
                    "exactly-once"
                } else {
                    "at-least-once"
                },
                rows.len(),
                partitions.values().map(Vec::len).sum::<usize>()
            );
        }
        println!("[fleet] at-least-once: {resent} records re-sent; {late} late writes of the cut-off instance after the heal");
    }
    for i in 0..INSTANCES {
        fleet
            .instance(i)
            .terminate_cleanly(Duration::from_secs(40))
            .await;
    }
    stop_reading.store(true, Ordering::Relaxed);
    reader.join().expect("reader thread");
}
