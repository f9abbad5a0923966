//! Operability against real Postgres and Kafka: the metrics endpoint follows
//! a known workload, readiness follows Kafka and Postgres outages, `check`
//! finds deliberately broken setups (and passes a correct one), and `status`
//! reports the slot and a running connector.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::process::run_binary;
use common::{metric_sample as sample, wait_for, wait_until, Scenario, TIMEOUT};
use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::http::{HealthPolicy, HttpServer};
use pgcdc_kafka::metrics::Metrics;
use pgcdc_kafka::pipeline::{self, PipelineError, RunSummary, Shutdown};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres, SchemaRegistry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// How long readiness may take to return after a restarted broker or server:
/// longer than [`TIMEOUT`], because the connector's restart backoff has kept
/// doubling (up to 60 s) through the outage, so its next attempt may come a
/// minute after the service is back, and the service itself must start first.
const BACK_AFTER_OUTAGE: Duration = Duration::from_secs(180);

/// `GET path` on the connector's endpoint: status code and body.
async fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut socket = tokio::net::TcpStream::connect(addr).await.ok()?;
    socket
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await.ok()?;
    let response = String::from_utf8(response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// A connector running in-process with its metrics endpoint.
struct Connector {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<RunSummary, PipelineError>>,
}

impl Connector {
    async fn start(s: &Scenario, bootstrap: &str, extra: &[&str], policy: HealthPolicy) -> Self {
        let config = RunConfig::from_args(s.args(bootstrap, extra)).expect("valid flags");
        config.validate().expect("valid config");
        let metrics = Arc::new(Metrics::new());
        let server = HttpServer::bind(
            "127.0.0.1:0".parse().expect("address"),
            Arc::clone(&metrics),
            policy,
        )
        .await
        .expect("metrics endpoint binds");
        let addr = server.local_addr();
        let (stop, shutdown) = Shutdown::new();
        tokio::spawn(server.serve(shutdown.clone().requested()));
        let task = tokio::spawn(pipeline::run_with_metrics(config, shutdown, metrics));
        Connector { addr, stop, task }
    }

    async fn metrics(&self) -> String {
        let (status, body) = get(self.addr, "/metrics")
            .await
            .expect("metrics endpoint answers");
        assert_eq!(status, 200);
        body
    }

    async fn value(&self, series: &str) -> f64 {
        sample(&self.metrics().await, series).unwrap_or(f64::NAN)
    }

    async fn readyz(&self) -> (u16, String) {
        get(self.addr, "/readyz")
            .await
            .expect("readiness endpoint answers")
    }

    /// Waits until `/readyz` answers `status`; returns its body.
    async fn wait_ready(&self, status: u16, timeout: Duration) -> String {
        wait_for(timeout, &format!("/readyz {status}"), || async {
            match self.readyz().await {
                (code, body) if code == status => Ok(body),
                (code, body) => Err(format!("{code} {body}")),
            }
        })
        .await
    }

    async fn stop(self) -> RunSummary {
        let _ = self.stop.send(true);
        tokio::time::timeout(TIMEOUT, self.task)
            .await
            .unwrap_or_else(|_| panic!("connector stops within {TIMEOUT:?}"))
            .expect("connector task did not panic")
            .unwrap_or_else(|e| panic!("connector failed: {}", pgcdc_kafka::error_chain(&e)))
    }
}

fn quick_policy() -> HealthPolicy {
    HealthPolicy {
        max_silence: Duration::from_secs(120),
        max_ack_wait: Duration::from_secs(3),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_a_known_workload() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "metrics");
    s.sql("CREATE TABLE orders (id int PRIMARY KEY, note text)");
    s.sql("CREATE TABLE items (id int PRIMARY KEY, qty int)");
    let c = Connector::start(
        &s,
        &kafka.bootstrap_servers(),
        &["--snapshot-mode", "never"],
        quick_policy(),
    )
    .await;
    assert_eq!(get(c.addr, "/healthz").await, Some((200, "ok\n".into())));
    let body = c.wait_ready(200, TIMEOUT).await;
    assert!(body.contains("streaming"), "{body}");

    s.sql("INSERT INTO orders VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    s.sql("UPDATE orders SET note = 'x' WHERE id IN (1, 2)");
    s.sql("DELETE FROM orders WHERE id = 3");
    s.sql(
        "BEGIN; INSERT INTO items VALUES (1, 10), (2, 20); \
         DELETE FROM items WHERE id = 2; COMMIT",
    );
    let after_workload = s.current_lsn();

    // 3 + 2 + (delete + tombstone) + 2 + (delete + tombstone) records.
    let records = 11.0;
    wait_until(TIMEOUT, "every record acknowledged", || async {
        c.value("pgcdc_kafka_records_acknowledged_total").await == records
    })
    .await;
    let text = c.metrics().await;
    let events = |table: &str, op: &str| {
        sample(
            &text,
            &format!("pgcdc_events_total{{table=\"public.{table}\",op=\"{op}\"}}"),
        )
    };
    assert_eq!(events("orders", "c"), Some(3.0), "{text}");
    assert_eq!(events("orders", "u"), Some(2.0));
    assert_eq!(events("orders", "d"), Some(1.0));
    assert_eq!(events("items", "c"), Some(2.0));
    assert_eq!(events("items", "d"), Some(1.0));
    assert_eq!(
        events("items", "u"),
        None,
        "no series for what did not happen"
    );
    assert_eq!(sample(&text, "pgcdc_transactions_total"), Some(4.0));
    assert_eq!(
        sample(&text, "pgcdc_kafka_records_sent_total"),
        Some(records)
    );
    assert_eq!(
        sample(&text, "pgcdc_kafka_delivery_errors_total"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "pgcdc_kafka_ack_latency_seconds_count"),
        Some(records)
    );
    assert!(
        sample(
            &text,
            "pgcdc_event_bytes_total{table=\"public.orders\",op=\"c\"}"
        )
        .is_some_and(|b| b > 0.0),
        "{text}"
    );
    assert_eq!(sample(&text, "pgcdc_phase{phase=\"streaming\"}"), Some(1.0));
    assert_eq!(sample(&text, "pgcdc_restarts_total"), Some(0.0));

    // Idle: everything acknowledged and confirmed, lag back to (near) zero.
    // Other tests write WAL to the same server, so the byte lag may not stay
    // at exactly zero; it must fall to a fraction of one WAL segment.
    wait_until(TIMEOUT, "lag back to ~0 when idle", || async {
        let text = c.metrics().await;
        let v = |series: &str| sample(&text, series).unwrap_or(f64::NAN);
        v("pgcdc_in_flight_records") == 0.0
            && v("pgcdc_in_flight_bytes") == 0.0
            && v("pgcdc_lag_seconds") == 0.0
            && v("pgcdc_lag_bytes") < 1024.0 * 1024.0
            && v("pgcdc_confirmed_lsn") >= after_workload.as_u64() as f64
            && v("pgcdc_acknowledged_lsn") >= after_workload.as_u64() as f64
    })
    .await;
    let text = c.metrics().await;
    assert!(
        sample(&text, "pgcdc_received_lsn").unwrap() >= after_workload.as_u64() as f64,
        "{text}"
    );
    assert!(
        sample(&text, "pgcdc_last_acknowledged_commit_timestamp_seconds").unwrap() > 0.0,
        "{text}"
    );
    // The test cluster's wal_sender_timeout is 10 s: a keepalive comes soon.
    wait_until(TIMEOUT, "a keepalive", || async {
        c.value("pgcdc_last_keepalive_timestamp_seconds").await > 0.0
    })
    .await;
    let summary = c.stop().await;
    assert_eq!(summary.transactions, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_kafka() {
    let kafka = Arc::new(Kafka::launch().expect("private kafka starts"));
    let s = Scenario::new(Postgres::shared(), "ready_kafka");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let c = Connector::start(
        &s,
        &kafka.bootstrap_servers(),
        &["--snapshot-mode", "never"],
        quick_policy(),
    )
    .await;
    c.wait_ready(200, TIMEOUT).await;
    s.sql("INSERT INTO t VALUES (1)");
    wait_until(TIMEOUT, "first record acknowledged", || async {
        c.value("pgcdc_kafka_records_acknowledged_total").await == 1.0
    })
    .await;

    let broker = Arc::clone(&kafka);
    tokio::task::spawn_blocking(move || broker.stop())
        .await
        .expect("join")
        .expect("kafka stops");
    // Idle with Kafka down: nothing waits for Kafka, so still ready.
    assert_eq!(c.readyz().await.0, 200);
    s.sql("INSERT INTO t VALUES (2)");
    let body = c.wait_ready(503, TIMEOUT).await;
    assert!(
        body.contains("Kafka has acknowledged nothing") && body.contains("1 records in flight"),
        "{body}"
    );
    assert_eq!(c.value("pgcdc_ready").await, 0.0);
    assert_eq!(c.value("pgcdc_in_flight_records").await, 1.0);

    let broker = Arc::clone(&kafka);
    tokio::task::spawn_blocking(move || broker.start())
        .await
        .expect("join")
        .expect("kafka starts again");
    c.wait_ready(200, BACK_AFTER_OUTAGE).await;
    wait_until(TIMEOUT, "second record acknowledged", || async {
        c.value("pgcdc_kafka_records_acknowledged_total").await == 2.0
    })
    .await;
    assert_eq!(c.value("pgcdc_kafka_delivery_errors_total").await, 0.0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_restarts_while_postgres_is_away() {
    let pg: &'static Postgres = Box::leak(Box::new(Postgres::launch().expect("private postgres")));
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "ready_pg");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let c = Connector::start(
        &s,
        &kafka.bootstrap_servers(),
        &["--snapshot-mode", "never"],
        quick_policy(),
    )
    .await;
    c.wait_ready(200, TIMEOUT).await;

    tokio::task::spawn_blocking(move || pg.stop(pgcdc_testcontainers::StopMode::Fast))
        .await
        .expect("join")
        .expect("postgres stops");
    let body = c.wait_ready(503, TIMEOUT).await;
    assert!(
        body.contains("restarting after a failure") || body.contains("connecting"),
        "{body}"
    );
    tokio::task::spawn_blocking(move || pg.start())
        .await
        .expect("join")
        .expect("postgres starts again");
    c.wait_ready(200, BACK_AFTER_OUTAGE).await;
    assert!(c.value("pgcdc_restarts_total").await >= 1.0);
    s.sql("INSERT INTO t VALUES (1)");
    wait_until(TIMEOUT, "streaming again after the restart", || async {
        c.value("pgcdc_events_total{table=\"public.t\",op=\"c\"}")
            .await
            == 1.0
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connector_on_an_active_slot_is_not_ready_and_says_why() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "two");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let bootstrap = kafka.bootstrap_servers();
    let start = || {
        Connector::start(
            &s,
            &bootstrap,
            &["--snapshot-mode", "never"],
            quick_policy(),
        )
    };
    let first = start().await;
    first.wait_ready(200, TIMEOUT).await;
    let second = start().await;
    wait_for(
        TIMEOUT,
        "the second connector's readiness to name the busy slot",
        || async {
            let (code, body) = second.readyz().await;
            assert_eq!(code, 503, "{body}");
            // Whether SQLSTATE 55006 (object in use) is retried is the
            // pipeline's classification to make; either way readiness names it.
            match (body.contains("restarting after a failure")
                || body.contains("stopped on an error"))
                && body.contains("is active for PID")
            {
                true => Ok(()),
                false => Err(body),
            }
        },
    )
    .await;
    assert_eq!(first.readyz().await.0, 200, "the first one streams on");
    let _ = second.stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(60), second.task).await;
    first.stop().await;
}

fn check_args(url: &str, s: &Scenario, bootstrap: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "check",
        "--pg-url",
        url,
        "--bootstrap-servers",
        bootstrap,
        "--topic-prefix",
        &s.prefix,
        "--slot",
        &s.slot,
        "--publication",
        &s.publication,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The report line of `check`, e.g. `FAIL wal_level: ...`.
fn line<'a>(stdout: &'a str, status: &str, check: &str) -> &'a str {
    let prefix = format!("{status} {check}:");
    stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_wal_level_replica_with_its_fix() {
    let pg: &'static Postgres = Box::leak(Box::new(Postgres::launch().expect("private postgres")));
    pg.execute("postgres", "ALTER SYSTEM SET wal_level = replica")
        .expect("alter system");
    tokio::task::spawn_blocking(move || pg.restart())
        .await
        .expect("join")
        .expect("restart");
    let s = Scenario::new(pg, "walrep");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let kafka = Kafka::shared();
    let (code, stdout, stderr) = run_binary(check_args(
        &pg.url(&s.db),
        &s,
        &kafka.bootstrap_servers(),
        &[],
    ))
    .await;
    assert_eq!(code, Some(1), "fails; stdout:\n{stdout}\nstderr:\n{stderr}");
    let wal = line(&stdout, "FAIL", "wal_level");
    assert!(wal.contains("is replica"), "{wal}");
    assert!(
        wal.contains(
            "fix: as a superuser run ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL"
        ),
        "{wal}"
    );
    line(&stdout, "PASS", "role");
    line(&stdout, "PASS", "kafka");
    assert!(stdout.trim_end().ends_with("warnings"), "{stdout}");
    assert!(stdout.contains("check failed: 1 problems"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_a_role_without_replication() {
    let pg = Postgres::shared();
    let s = Scenario::new(pg, "norepl");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let role = unique_name("cdc");
    pg.execute(
        "postgres",
        &format!("CREATE ROLE {role} LOGIN PASSWORD 'pw'"),
    )
    .expect("create role");
    let url = format!("postgres://{role}:pw@127.0.0.1:{}/{}", pg.port(), s.db);
    let (code, stdout, _) = run_binary(check_args(
        &url,
        &s,
        &Kafka::shared().bootstrap_servers(),
        &[],
    ))
    .await;
    assert_eq!(code, Some(1), "{stdout}");
    let role_line = line(&stdout, "FAIL", "role");
    assert!(
        role_line.contains("neither REPLICATION nor SUPERUSER")
            && role_line.contains(&format!("ALTER ROLE \"{role}\" REPLICATION")),
        "{role_line}"
    );
    // And it cannot create a FOR ALL TABLES publication.
    let publication = line(&stdout, "FAIL", "publication");
    assert!(
        publication.contains("needs a superuser") && publication.contains("CREATE PUBLICATION"),
        "{publication}"
    );
    line(&stdout, "PASS", "wal_level");
    assert!(
        !stdout.contains("password") && !stdout.contains(":pw@"),
        "{stdout}"
    );
}

/// `check` and `run` read the role from the same catalog facts: a role
/// that Amazon RDS lets replicate through membership of `rds_replication`
/// (not the REPLICATION attribute) passes `check` as it is accepted by `run`
/// (check used to fail it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_accepts_a_role_that_replicates_through_rds_replication() {
    let pg = Postgres::shared();
    let s = Scenario::new(pg, "rdsrepl");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let role = unique_name("rds");
    pg.execute(
        "postgres",
        &format!(
            "DO $$ BEGIN CREATE ROLE rds_replication; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
             CREATE ROLE {role} LOGIN PASSWORD 'pw' IN ROLE rds_replication"
        ),
    )
    .expect("create roles");
    let url = format!("postgres://{role}:pw@127.0.0.1:{}/{}", pg.port(), s.db);
    let (_, stdout, _) = run_binary(check_args(
        &url,
        &s,
        &Kafka::shared().bootstrap_servers(),
        &[],
    ))
    .await;
    let role_line = line(&stdout, "PASS", "role");
    assert!(
        role_line.contains(&format!("{role} is a member of rds_replication")),
        "{role_line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_tables_without_a_key_and_an_unreachable_kafka() {
    let s = Scenario::new(Postgres::shared(), "nokey");
    s.sql("CREATE TABLE good (id int PRIMARY KEY)");
    s.sql("CREATE TABLE heap (a int, b text)");
    s.sql("CREATE TABLE full_heap (a int)");
    s.sql("ALTER TABLE full_heap REPLICA IDENTITY FULL");
    let (code, stdout, _) = run_binary(check_args(
        &s.pg.url(&s.db),
        &s,
        "127.0.0.1:1",
        &["--check-timeout", "3s"],
    ))
    .await;
    assert_eq!(code, Some(1), "{stdout}");
    let identity = line(&stdout, "FAIL", "replica identity");
    assert!(
        identity.contains("public.heap without a primary key or replica identity")
            && identity
                .contains("fix: add a primary key (ALTER TABLE public.heap ADD PRIMARY KEY (...))"),
        "{identity}"
    );
    let null_keys = line(&stdout, "WARN", "null keys");
    assert!(null_keys.contains("public.full_heap"), "{null_keys}");
    let before = line(&stdout, "WARN", "before-images");
    assert!(before.contains("public.good"), "{before}");
    let kafka = line(&stdout, "FAIL", "kafka");
    assert!(kafka.contains("fix: check --bootstrap-servers"), "{kafka}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_a_correct_setup() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "goodsetup");
    s.sql("CREATE TABLE accounts (id int PRIMARY KEY, owner text)");
    let args = check_args(&s.pg.url(&s.db), &s, &kafka.bootstrap_servers(), &[]);
    let (code, stdout, stderr) = run_binary(args.clone()).await;
    assert_eq!(
        code,
        Some(0),
        "passes; stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for check in [
        "postgres",
        "wal_level",
        "role",
        "replication slot",
        "wal senders",
        "publication",
        "replica identity",
        "kafka",
        "topics",
    ] {
        line(&stdout, "PASS", check);
    }
    // Warnings do not fail the check: the test cluster keeps unbounded WAL.
    line(&stdout, "WARN", "max_slot_wal_keep_size");
    assert!(stdout.contains("check passed"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    // Nothing was created.
    assert_eq!(s.confirmed_flush_lsn(), None, "no slot created by check");

    // The same report as JSON.
    let mut json_args = vec!["--log-format".to_owned(), "json".to_owned()];
    json_args.extend(args);
    let (code, stdout, _) = run_binary(json_args).await;
    assert_eq!(code, Some(0));
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let findings = report["findings"].as_array().expect("findings");
    assert!(findings
        .iter()
        .any(|f| f["check"] == "wal_level" && f["status"] == "pass"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reaches_the_schema_registry_with_avro() {
    let registry = tokio::task::spawn_blocking(SchemaRegistry::shared)
        .await
        .expect("registry starts");
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "registry");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let avro = |url: String| {
        check_args(
            &s.pg.url(&s.db),
            &s,
            &kafka.bootstrap_servers(),
            &[
                "--format",
                "avro",
                "--schema-registry-url",
                &url,
                "--check-timeout",
                "3s",
            ],
        )
    };
    let (code, stdout, _) = run_binary(avro(registry.url())).await;
    assert_eq!(code, Some(0), "{stdout}");
    line(&stdout, "PASS", "schema registry");

    let (code, stdout, _) = run_binary(avro(
        "http://user:secret@127.0.0.1:1/apis/ccompat/v7".into(),
    ))
    .await;
    assert_eq!(code, Some(1), "{stdout}");
    let failed = line(&stdout, "FAIL", "schema registry");
    assert!(
        failed.contains("fix: check --schema-registry-url"),
        "{failed}"
    );
    assert!(
        !stdout.contains("secret"),
        "credentials never printed: {stdout}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_the_slot_and_a_running_connector() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "status");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut run_args = vec!["run".to_owned()];
    run_args.extend(s.args(
        &kafka.bootstrap_servers(),
        &[
            "--metrics-addr",
            &addr.to_string(),
            "--snapshot-mode",
            "never",
        ],
    ));
    let mut child = Command::new(BIN)
        .args(&run_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("connector starts");
    wait_until(TIMEOUT, "the binary's /readyz answers 200", || async {
        get(addr, "/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    s.sql("INSERT INTO t VALUES (1), (2)");
    wait_until(TIMEOUT, "two events", || async {
        let text = get(addr, "/metrics")
            .await
            .map(|(_, b)| b)
            .unwrap_or_default();
        // The binary labels every series with its pipeline.
        sample(
            &text,
            "pgcdc_events_total{pipeline=\"default\",table=\"public.t\",op=\"c\"}",
        ) == Some(2.0)
    })
    .await;

    let status_args = |metrics: bool| {
        let mut args = vec![
            "status".to_owned(),
            "--pg-url".to_owned(),
            s.pg.url(&s.db),
            "--slot".to_owned(),
            s.slot.clone(),
        ];
        if metrics {
            args.extend(["--metrics-url".to_owned(), format!("http://{addr}")]);
        }
        args
    };
    let (code, stdout, stderr) = run_binary(status_args(true)).await;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for needle in [
        &format!("slot {:?}", s.slot) as &str,
        "active:               yes",
        "confirmed_flush_lsn:",
        "retained WAL:",
        "wal_status:           reserved",
        &format!("connector http://{addr}"),
        "phase:                streaming",
        "readiness:            ready: streaming",
        "2 events",
    ] {
        assert!(stdout.contains(needle), "{needle:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("/ 0/0"), "every position known: {stdout}");

    // The connector is gone: the slot remains, inactive.
    wait_until(TIMEOUT, "slot inactive", || async {
        s.query_one(&format!(
            "SELECT active::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref()
            == Some("false")
    })
    .await;
    let (code, stdout, _) = run_binary(status_args(false)).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("active:               no"), "{stdout}");

    // A slot that does not exist, and a metrics URL nobody serves.
    let mut args = status_args(true);
    args[4] = "no_such_slot".to_owned();
    let (code, stdout, _) = run_binary(args).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("replication slot \"no_such_slot\" does not exist"),
        "{stdout}"
    );
    assert!(stdout.contains("did not answer"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_registry_metrics_follow_the_run() {
    let kafka = Kafka::shared();
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "metrics_snap");
    s.sql("CREATE TABLE a (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE b (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE c (v text)");
    s.sql("INSERT INTO a SELECT g, 'a' FROM generate_series(1, 50) g");
    s.sql("INSERT INTO b SELECT g, 'b' FROM generate_series(1, 20) g");
    s.sql("INSERT INTO c VALUES ('no key')");
    let url = registry.url();
    let c = Connector::start(
        &s,
        &kafka.bootstrap_servers(),
        &["--format", "avro", "--schema-registry-url", &url],
        quick_policy(),
    )
    .await;
    wait_until(TIMEOUT, "the snapshot acknowledged", || async {
        c.value("pgcdc_kafka_records_acknowledged_total").await == 71.0
    })
    .await;
    c.wait_ready(200, TIMEOUT).await;
    let text = c.metrics().await;
    assert_eq!(sample(&text, "pgcdc_snapshot_tables"), Some(3.0), "{text}");
    assert_eq!(sample(&text, "pgcdc_snapshot_tables_done"), Some(3.0));
    assert_eq!(sample(&text, "pgcdc_snapshot_running"), Some(0.0));
    assert_eq!(
        sample(&text, "pgcdc_events_total{table=\"public.a\",op=\"r\"}"),
        Some(50.0)
    );
    // A key and a value schema for a and b, a value schema for c (no key).
    assert_eq!(sample(&text, "pgcdc_schema_registrations_total"), Some(5.0));
    assert_eq!(
        sample(&text, "pgcdc_schema_registry_errors_total"),
        Some(0.0)
    );

    // A new column is a new value schema: one more registration.
    s.sql("ALTER TABLE a ADD COLUMN w int");
    s.sql("INSERT INTO a VALUES (51, 'a', 1)");
    wait_until(TIMEOUT, "the new schema registered", || async {
        c.value("pgcdc_schema_registrations_total").await == 6.0
    })
    .await;
    c.stop().await;
}
