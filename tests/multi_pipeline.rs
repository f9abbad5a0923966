//! Several pipelines in one process (issue 23 item 1), through the binary
//! and a `--config` file with `[pipelines.<name>]` tables, against real
//! PostgreSQL and Kafka: pipelines over different databases stream at the
//! same time, every row verified in its own topic prefix; one pipeline's
//! PostgreSQL stopped leaves the others streaming and recovers when it
//! returns; metrics carry the `pipeline` label; `/readyz`, `status` and
//! `check` report each pipeline; the exit code of a process whose
//! pipelines end differently; configuration errors name the pipeline.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::process::{run_binary, ConnectorProcess, LogDir};
use common::{consume_all, metric_sample, wait_for, wait_until, Scenario, TIMEOUT};
use pgcdc_testcontainers::{Kafka, Postgres, StopMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a pipeline may take to stream again after its server returns:
/// its restart backoff kept doubling (up to 60 s) through the outage.
const BACK_AFTER_OUTAGE: Duration = Duration::from_secs(180);

/// A free port on the loopback interface, for `--metrics-addr`.
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// `GET path`: status code and body; `None` while nothing answers.
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

/// The value of one series (`name{labels}`) of the endpoint's page.
async fn value(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, page) = get(addr, "/metrics").await?;
    metric_sample(&page, series)
}

/// Waits until `/readyz` answers `status` with a body that contains every
/// one of `needles`; returns the body.
async fn await_readyz(
    addr: SocketAddr,
    status: u16,
    needles: &[&str],
    timeout: Duration,
) -> String {
    wait_for(
        timeout,
        &format!("/readyz {status} with {needles:?}"),
        || async {
            match get(addr, "/readyz").await {
                Some((code, body))
                    if code == status && needles.iter().all(|n| body.contains(n)) =>
                {
                    Ok(body)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// One `[pipelines.<name>]` table for scenario `s`, plus `extra` lines.
fn pipeline_table(name: &str, s: &Scenario, extra: &str) -> String {
    format!(
        "[pipelines.{name}]\npg_url = \"{}\"\nslot = \"{}\"\npublication = \"{}\"\n\
         topic_prefix = \"{}\"\n{extra}\n",
        s.pg.url(&s.db),
        s.slot,
        s.publication,
        s.prefix
    )
}

/// Writes the config file `text` into `dir`.
fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("pipelines.toml");
    std::fs::write(&path, text).expect("write the config file");
    path
}

/// The ids in topic `<prefix>.public.t`, from the record keys.
async fn ids_in(bootstrap: &str, s: &Scenario) -> BTreeSet<i64> {
    consume_all(bootstrap, &s.topic("t"), TIMEOUT)
        .await
        .iter()
        .filter(|r| r.value.is_some())
        .map(|r| {
            r.key.as_ref().expect("a key")["payload"]["id"]
                .as_i64()
                .expect("an integer id")
        })
        .collect()
}

/// Waits until topic `<prefix>.public.t` holds exactly the ids `expected`.
async fn await_ids(
    bootstrap: &str,
    s: &Scenario,
    expected: std::ops::RangeInclusive<i64>,
    timeout: Duration,
) {
    let expected: BTreeSet<i64> = expected.collect();
    wait_for(
        timeout,
        &format!("ids {expected:?} in {}", s.topic("t")),
        || async {
            let ids = ids_in(bootstrap, s).await;
            if ids == expected {
                Ok(())
            } else {
                let missing: Vec<_> = expected.difference(&ids).collect();
                let extra: Vec<_> = ids.difference(&expected).collect();
                Err(format!("missing {missing:?}, unexpected {extra:?}"))
            }
        },
    )
    .await;
}

fn insert(s: &Scenario, ids: std::ops::RangeInclusive<i64>) {
    s.sql(&format!(
        "INSERT INTO t SELECT i, 'row ' || i FROM generate_series({}, {}) i",
        ids.start(),
        ids.end()
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_stream_side_by_side_and_an_outage_stays_with_its_pipeline() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let private: &'static Postgres = Box::leak(Box::new(
        Postgres::launch().unwrap_or_else(|e| panic!("private postgres: {}", e.report())),
    ));
    let alpha = Scenario::new(Postgres::shared(), "mp_alpha");
    let beta = Scenario::new(Postgres::shared(), "mp_beta");
    let gamma = Scenario::new(private, "mp_gamma");
    let all = [("alpha", &alpha), ("beta", &beta), ("gamma", &gamma)];
    for (_, s) in all {
        s.sql("CREATE TABLE t (id bigint PRIMARY KEY, note text)");
        // Taken by the initial snapshot.
        insert(s, 1..=40);
    }
    let logs = LogDir::new("multi_pipeline");
    let mut text = format!(
        "bootstrap_servers = \"{bootstrap}\"\nstatus_interval = \"200ms\"\n\
         ready_max_ack_wait = \"10s\"\n\n"
    );
    for (name, s) in all {
        text.push_str(&pipeline_table(name, s, ""));
    }
    let config = write_config(logs.dir(), &text);
    let config_arg = config.display().to_string();

    // `check` checks every pipeline, before anything exists.
    let (code, stdout, stderr) =
        run_binary(vec!["check".into(), "--config".into(), config_arg.clone()]).await;
    assert_eq!(
        code,
        Some(0),
        "check passes; stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for (name, _) in all {
        assert!(stdout.contains(&format!("pipeline {name}:\n")), "{stdout}");
    }
    assert_eq!(stdout.matches("PASS publication:").count(), 3, "{stdout}");

    let addr = free_addr();
    let connector = ConnectorProcess::spawn(
        &[
            "--config".to_owned(),
            config_arg.clone(),
            "--metrics-addr".to_owned(),
            addr.to_string(),
        ],
        logs.path(0),
    );
    // Ready through the snapshot, then streaming, each on its own line.
    await_readyz(
        addr,
        200,
        &[
            "3 of 3 pipelines ready\n",
            "\nalpha: ready: streaming",
            "\nbeta: ready: streaming",
            "\ngamma: ready: streaming",
        ],
        TIMEOUT,
    )
    .await;
    // All three stream at once.
    for (_, s) in all {
        insert(s, 41..=100);
    }
    for (_, s) in all {
        await_ids(&bootstrap, s, 1..=100, TIMEOUT).await;
    }
    for (name, _) in all {
        let series =
            format!("pgcdc_events_total{{pipeline=\"{name}\",table=\"public.t\",op=\"c\"}}");
        wait_until(TIMEOUT, &series, || async {
            value(addr, &series).await == Some(60.0)
        })
        .await;
        let snapshot =
            format!("pgcdc_events_total{{pipeline=\"{name}\",table=\"public.t\",op=\"r\"}}");
        assert_eq!(value(addr, &snapshot).await, Some(40.0), "{snapshot}");
    }

    // `status` lists every pipeline with its slot and its progress.
    let (code, stdout, stderr) = run_binary(vec![
        "status".into(),
        "--config".into(),
        config_arg.clone(),
        "--metrics-url".into(),
        format!("http://{addr}"),
    ])
    .await;
    assert_eq!(
        code,
        Some(0),
        "status; stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for (name, s) in all {
        assert!(stdout.contains(&format!("pipeline {name}:\n")), "{stdout}");
        assert!(stdout.contains(&s.slot), "{stdout}");
    }
    // Each pipeline's own progress: 60 streamed and 40 snapshot events.
    assert_eq!(
        stdout
            .matches("readiness:            ready: streaming\n")
            .count(),
        3,
        "{stdout}"
    );
    assert_eq!(stdout.matches("100 events").count(), 3, "{stdout}");

    // gamma's server goes away: gamma restarts with its own backoff,
    // alpha and beta stream on.
    tokio::task::spawn_blocking(move || private.stop(StopMode::Fast))
        .await
        .expect("join")
        .expect("postgres stops");
    await_readyz(
        addr,
        503,
        &["2 of 3 pipelines ready", "\ngamma: not ready: "],
        TIMEOUT,
    )
    .await;
    for s in [&alpha, &beta] {
        insert(s, 101..=150);
    }
    await_ids(&bootstrap, &alpha, 1..=150, TIMEOUT).await;
    await_ids(&bootstrap, &beta, 1..=150, TIMEOUT).await;
    assert_eq!(
        value(addr, "pgcdc_ready{pipeline=\"alpha\"}").await,
        Some(1.0)
    );
    assert_eq!(
        value(addr, "pgcdc_ready{pipeline=\"beta\"}").await,
        Some(1.0)
    );
    assert_eq!(
        value(addr, "pgcdc_ready{pipeline=\"gamma\"}").await,
        Some(0.0)
    );
    wait_until(TIMEOUT, "gamma's restarts counted", || async {
        value(addr, "pgcdc_restarts_total{pipeline=\"gamma\"}").await >= Some(1.0)
    })
    .await;
    assert_eq!(
        value(addr, "pgcdc_restarts_total{pipeline=\"alpha\"}").await,
        Some(0.0)
    );
    connector.assert_running("with one pipeline's database down");

    // gamma's server returns: gamma streams again, from where it was.
    tokio::task::spawn_blocking(move || private.start())
        .await
        .expect("join")
        .expect("postgres starts again");
    insert(&gamma, 101..=150);
    await_readyz(addr, 200, &["3 of 3 pipelines ready"], BACK_AFTER_OUTAGE).await;
    await_ids(&bootstrap, &gamma, 1..=150, TIMEOUT).await;
    connector.terminate_cleanly(TIMEOUT).await;
}

/// Pipelines end on their own: two bounded ones drain and stop, one whose
/// table does not exist stops on that error, and the process exits when
/// the last has, with the worst code (1), every pipeline's report on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exit_code_is_the_worst_of_the_pipelines() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let good = Scenario::new(Postgres::shared(), "mp_good");
    let also = Scenario::new(Postgres::shared(), "mp_also");
    let broken = Scenario::new(Postgres::shared(), "mp_broken");
    for s in [&good, &also] {
        s.sql("CREATE TABLE t (id bigint PRIMARY KEY, note text)");
        insert(s, 1..=25);
    }
    let logs = LogDir::new("multi_pipeline_exit");
    let text = format!(
        "bootstrap_servers = \"{bootstrap}\"\nstop_when_caught_up = \"start-lsn\"\n\n{}{}{}",
        pipeline_table("good", &good, ""),
        pipeline_table("also", &also, ""),
        pipeline_table("broken", &broken, "table = [\"public.no_such_table\"]"),
    );
    let config = write_config(logs.dir(), &text);
    let run = run_binary(vec![
        "run".into(),
        "--config".into(),
        config.display().to_string(),
    ]);
    let (code, stdout, stderr) = tokio::time::timeout(TIMEOUT, run)
        .await
        .expect("every pipeline ends by itself");
    assert_eq!(code, Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for name in ["good", "also"] {
        assert!(
            stdout.contains(&format!("pgcdc-kafka: pipeline {name}: ")),
            "{name}'s report in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("pipeline broken:"), "{stdout}");
    assert!(
        stderr.contains("no_such_table") && stderr.contains("pipeline=broken"),
        "the broken pipeline's error, named: {stderr}"
    );
    await_ids(&bootstrap, &good, 1..=25, TIMEOUT).await;
    await_ids(&bootstrap, &also, 1..=25, TIMEOUT).await;
}

/// Configuration errors name the pipeline and what to do, all at once,
/// before anything connects (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_name_the_pipelines() {
    let logs = LogDir::new("multi_pipeline_config");
    let text = "bootstrap_servers = \"127.0.0.1:1\"\n\
                [pipelines.one]\npg_url = \"postgres://u@127.0.0.1:1/a\"\ntopic_prefix = \"one\"\nslot = \"s\"\n\
                [pipelines.two]\npg_url = \"postgres://u@127.0.0.1:1/b\"\ntopic_prefix = \"two\"\nslot = \"s\"\n\
                [pipelines.Three]\npg_url = \"postgres://u@127.0.0.1:1/c\"\n";
    let config = write_config(logs.dir(), text);
    for command in ["run", "check"] {
        let (code, stdout, stderr) = run_binary(vec![
            command.into(),
            "--config".into(),
            config.display().to_string(),
        ])
        .await;
        assert_eq!(
            code,
            Some(2),
            "{command}: stdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert!(
            stderr.contains("pipelines.Three (from file ")
                && stderr.contains("is not a valid pipeline name"),
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains(
                "pipelines.two.slot: uses replication slot \"s\" on 127.0.0.1:1 as pipeline \
                 \"one\" does; give each pipeline its own slot"
            ),
            "{command}: {stderr}"
        );
    }
    // `snapshot` works on one pipeline: it says how to name it.
    let (code, _, stderr) = run_binary(vec![
        "snapshot".into(),
        "--config".into(),
        config.display().to_string(),
        "public.t".into(),
    ])
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--config: declares pipelines, and `snapshot` works on one"),
        "{stderr}"
    );
    let duplicate = "[pipelines.one]\nslot = \"a\"\n[pipelines.one]\nslot = \"b\"\n";
    let config = write_config(logs.dir(), duplicate);
    let (code, _, stderr) = run_binary(vec![
        "run".into(),
        "--config".into(),
        config.display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("not valid TOML") && stderr.contains("pipelines.one"),
        "{stderr}"
    );
}

/// A number field of the process's own `/proc/<pid>/status`.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The process's resident memory.
fn rss_bytes(pid: u32) -> u64 {
    proc_status(pid, "VmRSS") * 1024
}

/// Starts `count` idle pipelines (one empty table each) in one process,
/// waits until all stream, lets them settle, and returns the RSS.
async fn idle_rss(count: usize, bootstrap: &str, logs: &LogDir) -> u64 {
    let mut text = format!("bootstrap_servers = \"{bootstrap}\"\n\n");
    let mut scenarios = Vec::new();
    for i in 0..count {
        let s = Scenario::new(Postgres::shared(), &format!("mp_idle{i}"));
        s.sql("CREATE TABLE t (id bigint PRIMARY KEY, note text)");
        text.push_str(&pipeline_table(&format!("p{i}"), &s, ""));
        scenarios.push(s);
    }
    let dir = logs.dir().join(format!("n{count}"));
    std::fs::create_dir_all(&dir).expect("config dir");
    let config = write_config(&dir, &text);
    let addr = free_addr();
    let connector = ConnectorProcess::spawn(
        &[
            "--config".to_owned(),
            config.display().to_string(),
            "--metrics-addr".to_owned(),
            addr.to_string(),
        ],
        logs.path(count),
    );
    let ready = format!("{count} of {count} pipelines ready");
    await_readyz(addr, 200, &[&ready], TIMEOUT).await;
    // One row each, so every producer has connected and delivered.
    for s in &scenarios {
        insert(s, 1..=1);
    }
    for i in 0..count {
        let series = format!("pgcdc_kafka_records_acknowledged_total{{pipeline=\"p{i}\"}}");
        wait_until(TIMEOUT, &series, || async {
            value(addr, &series).await >= Some(1.0)
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = connector.pid();
    let rss = (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            rss_bytes(pid)
        })
        .max()
        .unwrap_or_default();
    println!(
        "{count} idle pipelines: {} threads",
        proc_status(pid, "Threads")
    );
    connector.terminate_cleanly(TIMEOUT).await;
    rss
}

/// Issue 23's memory target: at most 20 MB per idle pipeline. Measured as
/// the RSS of one process with 10 idle pipelines minus that with one,
/// over 9; both printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_per_idle_pipeline() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let logs = LogDir::new("multi_pipeline_memory");
    let one = idle_rss(1, &bootstrap, &logs).await;
    let ten = idle_rss(10, &bootstrap, &logs).await;
    let per_pipeline = ten.saturating_sub(one) / 9;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "RSS with 1 idle pipeline: {:.1} MiB; with 10: {:.1} MiB; per additional idle \
         pipeline: {:.1} MiB",
        mib(one),
        mib(ten),
        mib(per_pipeline)
    );
    assert!(
        per_pipeline <= 20 * 1000 * 1000,
        "{:.1} MiB per idle pipeline, above the 20 MB target",
        mib(per_pipeline)
    );
}

/// The seam fleet mode builds on: a [`Supervisor`] starts pipelines one by
/// one and stops one by name while the other streams on; the stopped one
/// stays served, reported as stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supervisor_stops_one_pipeline_by_name_and_the_other_streams_on() {
    use std::sync::Arc;

    use pgcdc_kafka::config::pipelines::PipelineName;
    use pgcdc_kafka::config::RunConfig;
    use pgcdc_kafka::http::{HealthPolicy, Served};
    use pgcdc_kafka::pipeline::StopReason;
    use pgcdc_kafka::supervisor::{PipelineSpec, Supervisor};

    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let one = Scenario::new(Postgres::shared(), "mp_sup_one");
    let two = Scenario::new(Postgres::shared(), "mp_sup_two");
    let served = Arc::new(Served::labelled());
    let mut supervisor = Supervisor::new(Arc::clone(&served));
    let name = |n: &str| n.parse::<PipelineName>().expect("a valid name");
    for (n, s) in [("one", &one), ("two", &two)] {
        s.sql("CREATE TABLE t (id bigint PRIMARY KEY, note text)");
        let config = RunConfig::from_args(s.args(&bootstrap, &["--snapshot-mode", "never"]))
            .expect("valid flags");
        config.validate().expect("valid config");
        supervisor
            .start(PipelineSpec {
                name: name(n),
                config: config.clone(),
                health: HealthPolicy::default(),
            })
            .expect("starts");
        let again = supervisor.start(PipelineSpec {
            name: name(n),
            config,
            health: HealthPolicy::default(),
        });
        assert!(again.is_err(), "a running name is not started twice");
    }
    for s in [&one, &two] {
        s.await_slot().await;
        insert(s, 1..=20);
    }
    for s in [&one, &two] {
        await_ids(&bootstrap, s, 1..=20, TIMEOUT).await;
    }

    assert!(supervisor.stop(&name("one")));
    let finished = tokio::time::timeout(TIMEOUT, supervisor.next_finished())
        .await
        .expect("pipeline one stops")
        .expect("a pipeline finished");
    assert_eq!(finished.name, name("one"));
    let summary = finished.result.expect("a clean stop");
    assert_eq!(summary.stopped, StopReason::Requested);
    assert_eq!(
        supervisor.running().collect::<Vec<_>>(),
        [&name("two")],
        "two runs on"
    );
    insert(&two, 21..=40);
    await_ids(&bootstrap, &two, 1..=40, TIMEOUT).await;
    let readiness = served.readiness();
    assert!(!readiness.ready, "{}", readiness.reason);
    assert!(
        readiness.reason.contains("\none: not ready: stopped")
            && readiness.reason.contains("\ntwo: ready: streaming"),
        "{}",
        readiness.reason
    );

    supervisor.stop_all();
    let last = tokio::time::timeout(TIMEOUT, supervisor.next_finished())
        .await
        .expect("pipeline two stops")
        .expect("a pipeline finished");
    assert_eq!(last.name, name("two"));
    assert!(last.result.is_ok());
    assert!(supervisor.next_finished().await.is_none());
}
