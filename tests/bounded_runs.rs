//! Bounded runs, as a scheduler runs them: `--max-run` and
//! `--stop-when-caught-up`, through the binary, never skipping unread changes.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{consume, wait_until, Scenario, TIMEOUT};
use pgcdc_kafka::lsn::Lsn;
use pgcdc_testcontainers::{Kafka, Postgres, StopMode};
use serde_json::Value as Json;

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// Runs the binary to completion and returns its JSON summary.
async fn run_bounded(s: &Scenario, kafka: &Kafka, extra: &[&str]) -> Json {
    let (code, summary, stderr) = run_bounded_exit(s, kafka, extra).await;
    assert_eq!(code, Some(0), "bounded run exits 0; stderr:\n{stderr}");
    summary
}

/// Runs the binary to completion; returns its exit code, JSON summary and
/// stderr. Every run that exits 0 is held to what a scheduler reads from
/// it: the summary's confirmed position is the slot's, read after the exit,
/// and a run that says it caught up has the slot past everything committed
/// before it began (the slot moves only behind Kafka's acknowledgements).
async fn run_bounded_exit(
    s: &Scenario,
    kafka: &Kafka,
    extra: &[&str],
) -> (Option<i32>, Json, String) {
    run_args_exit(s, s.args(&kafka.bootstrap_servers(), extra)).await
}

/// [`run_bounded_exit`] with `run`'s whole argument list.
async fn run_args_exit(s: &Scenario, run_args: Vec<String>) -> (Option<i32>, Json, String) {
    // Not every test has the server up when the run starts.
    let wal_before = s.positions_if_up().map(|(wal, _)| wal);
    let mut args = vec![
        "--log-format".to_owned(),
        "json".to_owned(),
        "run".to_owned(),
    ];
    args.extend(run_args);
    let output = tokio::task::spawn_blocking(move || Command::new(BIN).args(&args).output())
        .await
        .expect("join")
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("a summary on stdout; stderr:\n{stderr}"));
    let summary: Json =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("summary is JSON ({e}): {line}"));
    // A run that ends well logs nothing at ERROR on its way out (a
    // consumer closed twice did, on every exit).
    if output.status.code() == Some(0) {
        let errors: Vec<&str> = (stderr.lines())
            .filter(|l| l.contains(r#""level":"ERROR""#))
            .collect();
        assert!(
            errors.is_empty(),
            "a run that exits 0 logs no ERROR: {errors:?}"
        );
    }
    let slot = s.positions_if_up().and_then(|(_, slot)| slot);
    // A run that never reached the server knows no position.
    let reported = summary["confirmed_lsn"].is_string();
    if let (Some(0), Some(slot), true) = (output.status.code(), slot, reported) {
        assert_eq!(
            lsn_field(&summary, "confirmed_lsn"),
            slot,
            "the summary reports the position the slot was confirmed at: {summary}"
        );
        let caught_up = summary["stopped"] == "caught_up" && summary["caught_up"] == true;
        if let (true, Some(before)) = (caught_up, wal_before) {
            assert!(
                slot >= before,
                "a run that exits 0 caught up has everything committed before it began in \
                 Kafka, so the slot past {before}; it is at {slot}: {summary}"
            );
        }
    }
    (output.status.code(), summary, stderr)
}

fn lsn_field(summary: &Json, field: &str) -> Lsn {
    summary[field]
        .as_str()
        .expect("LSN string")
        .parse()
        .expect("LSN parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_time_limited_runs_deliver_everything_once() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "maxrun");
    s.sql("CREATE TABLE backlog (id int PRIMARY KEY, payload text)");

    // An idle database: the run exits by itself and confirms up to the WAL end.
    let before = s.current_lsn();
    let first = tokio::time::timeout(
        Duration::from_secs(60),
        run_bounded(
            &s,
            kafka,
            &["--stop-when-caught-up", "--status-interval", "200ms"],
        ),
    )
    .await
    .expect("an idle stop-when-caught-up run exits promptly");
    assert_eq!(first["stopped"], "caught_up");
    assert_eq!(first["caught_up"], true);
    assert_eq!(first["events"], 0);
    assert!(
        lsn_field(&first, "confirmed_lsn") >= before,
        "an idle caught-up run leaves the slot at the WAL end: {first}"
    );

    // A backlog that one short run cannot drain (deliveries throttled by a long linger).
    const ROWS: i64 = 5_000;
    for batch in 0..50 {
        s.sql(&format!(
            "INSERT INTO backlog SELECT g, repeat('p', 80) FROM generate_series({}, {}) g",
            batch * 100 + 1,
            batch * 100 + 100
        ));
    }
    let throttle = [
        "--max-run",
        "1500ms",
        "--max-in-flight-messages",
        "100",
        "--kafka-property",
        "linger.ms=100",
        "--status-interval",
        "200ms",
    ];
    let mut confirmed_before = lsn_field(&first, "confirmed_lsn");
    let mut delivered: BTreeMap<i64, usize> = BTreeMap::new();
    let mut seen = 0;
    let mut time_limited_runs = 0;
    loop {
        let summary = run_bounded(&s, kafka, &throttle).await;
        assert_eq!(summary["stopped"], "time_limit", "{summary}");
        time_limited_runs += 1;
        let records = consume(
            &kafka.bootstrap_servers(),
            &s.topic("backlog"),
            ROWS as usize,
            Duration::from_secs(5),
        )
        .await;
        let new = &records[seen.min(records.len())..];
        // What this run delivered starts after what the previous run confirmed:
        // a confirmed position ahead of an undelivered commit would skip it.
        if let Some(first_new) = new.first() {
            let lsn = Lsn::new(
                first_new.value.as_ref().unwrap()["payload"]["source"]["lsn"]
                    .as_u64()
                    .unwrap(),
            );
            assert!(lsn >= confirmed_before, "run {time_limited_runs} starts at {lsn}, before it {confirmed_before} was confirmed");
        }
        for r in new {
            let id = r.value.as_ref().unwrap()["payload"]["after"]["id"]
                .as_i64()
                .unwrap();
            *delivered.entry(id).or_default() += 1;
        }
        seen = records.len();
        let confirmed = lsn_field(&summary, "confirmed_lsn");
        assert!(confirmed >= confirmed_before, "confirmed never moves back");
        confirmed_before = confirmed;
        if delivered.len() as i64 == ROWS || time_limited_runs >= 30 {
            break;
        }
        assert_eq!(
            summary["caught_up"], false,
            "a time-limited run with backlog left is not caught up"
        );
        assert!(
            summary["remaining_lag_bytes"]
                .as_u64()
                .is_some_and(|lag| lag > 0),
            "{summary}"
        );
    }
    assert!(
        time_limited_runs >= 2,
        "the backlog took several time-limited runs ({time_limited_runs})"
    );
    assert_eq!(
        delivered.len() as i64,
        ROWS,
        "every row delivered, none skipped"
    );
    let duplicates: usize = delivered.values().map(|n| n - 1).sum();
    assert_eq!(
        duplicates, 0,
        "graceful time-limited stops confirm exactly what was delivered"
    );
    assert_eq!(
        delivered.keys().copied().collect::<Vec<_>>(),
        (1..=ROWS).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_when_caught_up_stops_at_the_start_target_despite_new_writes() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "caughtup");
    s.sql("CREATE TABLE t (id serial PRIMARY KEY, v int)");
    // Create the slot, then leave a backlog.
    run_bounded(&s, kafka, &["--stop-when-caught-up"]).await;
    s.sql("INSERT INTO t (v) SELECT g FROM generate_series(1, 500) g");
    let committed_before_start: i64 = 500;

    // A writer that keeps committing while the bounded run drains.
    let pg = s.pg;
    let db = s.db.clone();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut n = 0u64;
        while !*stop_rx.borrow_and_update() {
            client
                .batch_execute("INSERT INTO t (v) VALUES (-1)")
                .await
                .expect("insert");
            n += 1;
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        n
    });

    let summary = tokio::time::timeout(
        Duration::from_secs(90),
        run_bounded(
            &s,
            kafka,
            &["--stop-when-caught-up", "--status-interval", "200ms"],
        ),
    )
    .await
    .expect("the run stops at its start-time target instead of chasing new writes");
    let _ = stop_tx.send(true);
    let written_during = writer.await.expect("writer");
    assert!(written_during > 0, "writes arrived during the run");
    assert_eq!(summary["stopped"], "caught_up", "{summary}");

    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("t"),
        100_000,
        Duration::from_secs(5),
    )
    .await;
    let backlog = records
        .iter()
        .filter(|r| r.value.as_ref().unwrap()["payload"]["after"]["v"].as_i64() != Some(-1))
        .count() as i64;
    assert_eq!(
        backlog, committed_before_start,
        "everything committed before the start is delivered"
    );
}

/// Reads every record of `topic` (read_committed) and counts them per id of
/// `after` (`op` r, c).
async fn delivered_ids(kafka: &Kafka, topic: &str) -> BTreeMap<i64, usize> {
    let records = common::consume_until_idle(
        &kafka.bootstrap_servers(),
        topic,
        Duration::from_secs(3),
        Duration::from_secs(60),
    )
    .await;
    let mut ids = BTreeMap::new();
    for r in records {
        let id = r.value.as_ref().expect("no tombstones")["payload"]["after"]["id"]
            .as_i64()
            .expect("id");
        *ids.entry(id).or_insert(0) += 1;
    }
    ids
}

/// A scheduled job with an initial snapshot, under exactly-once: a time
/// limit that strikes during the snapshot stops it as a time limit (the
/// snapshot starts over next run, and read_committed consumers see none of
/// the interrupted one), a caught-up run finishes the snapshot and the
/// stream, and repeated time-limited runs over a backlog then deliver every
/// row exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_runs_with_a_snapshot_and_exactly_once() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "bounded_eos");
    s.sql("CREATE TABLE jobs (id int PRIMARY KEY, payload text)");
    s.sql("INSERT INTO jobs SELECT g, repeat('s', 80) FROM generate_series(1, 2000) g");
    let topic = s.topic("jobs");
    let eos = ["--delivery", "exactly-once", "--status-interval", "200ms"];

    // A time limit far shorter than the throttled snapshot.
    let mut interrupted = eos.to_vec();
    interrupted.extend([
        "--max-run",
        "300ms",
        "--max-in-flight-messages",
        "10",
        "--kafka-property",
        "linger.ms=200",
    ]);
    let summary = run_bounded(&s, kafka, &interrupted).await;
    assert_eq!(summary["stopped"], "time_limit", "{summary}");
    assert!(
        delivered_ids(kafka, &topic).await.is_empty(),
        "an interrupted snapshot's records stay invisible to read_committed consumers"
    );

    let mut caught_up = eos.to_vec();
    caught_up.push("--stop-when-caught-up");
    let summary = run_bounded(&s, kafka, &caught_up).await;
    assert_eq!(summary["stopped"], "caught_up", "{summary}");
    let ids = delivered_ids(kafka, &topic).await;
    assert_eq!(ids.len(), 2000, "the whole snapshot");
    assert!(ids.values().all(|&n| n == 1), "each snapshot row once");

    for batch in 0..30 {
        s.sql(&format!(
            "INSERT INTO jobs SELECT g, repeat('p', 80) FROM generate_series({}, {}) g",
            2001 + batch * 100,
            2000 + batch * 100 + 100
        ));
    }
    let mut throttled = eos.to_vec();
    throttled.extend([
        "--max-run",
        "1500ms",
        "--max-in-flight-messages",
        "100",
        "--kafka-property",
        "linger.ms=100",
    ]);
    let mut runs = 0;
    loop {
        runs += 1;
        let summary = run_bounded(&s, kafka, &throttled).await;
        let ids = delivered_ids(kafka, &topic).await;
        assert!(
            ids.values().all(|&n| n == 1),
            "run {runs}: nothing delivered twice: {summary}"
        );
        if ids.len() == 5000 || runs >= 30 {
            break;
        }
        assert_eq!(summary["stopped"], "time_limit", "{summary}");
    }
    let summary = run_bounded(&s, kafka, &caught_up).await;
    assert_eq!(summary["stopped"], "caught_up", "{summary}");
    let ids = delivered_ids(kafka, &topic).await;
    assert_eq!(
        ids.keys().copied().collect::<Vec<_>>(),
        (1..=5000).collect::<Vec<_>>(),
        "every row, after {runs} time-limited runs"
    );
    assert!(ids.values().all(|&n| n == 1), "each exactly once");
}

/// A `--stop-when-caught-up` run whose records fail to deliver while it
/// drains (its broker was killed) reached its target but is not a success:
/// it exits 3, not 0, says why, and confirms nothing past those records; the
/// next run, with the broker back, delivers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_run_whose_records_fail_to_deliver_exits_3() {
    let kafka = Kafka::launch().unwrap_or_else(|e| panic!("private kafka: {}", e.report()));
    let s = Scenario::new(Postgres::shared(), "undelivered");
    s.sql("CREATE TABLE pending (id int PRIMARY KEY)");
    // Creates the slot.
    run_bounded(&s, &kafka, &["--stop-when-caught-up"]).await;
    s.sql("INSERT INTO pending SELECT generate_series(1, 100)");
    // The WAL position right after the commit: the slot must stay before it.
    // (Not the position before the INSERT: while the connector has nothing
    // open it may confirm an idle keepalive's position, which can pass other
    // databases' writes made before this commit.)
    let committed = s.current_lsn();

    // The broker this test started, killed by its pid (Kafka::kill).
    let pid = kafka.pid();
    assert!(pid.is_some(), "a local broker with a pid");
    kafka
        .kill()
        .unwrap_or_else(|e| panic!("kill the broker: {}", e.report()));
    // The records are read at once (the target is the WAL end at start),
    // then fail after message.timeout.ms while the run drains.
    let undelivered = [
        "--stop-when-caught-up",
        "--status-interval",
        "200ms",
        "--kafka-property",
        "message.timeout.ms=4000",
    ];
    let (code, summary, stderr) = tokio::time::timeout(
        Duration::from_secs(60),
        run_bounded_exit(&s, &kafka, &undelivered),
    )
    .await
    .expect("the run stops by itself");
    assert_eq!(
        code,
        Some(3),
        "exit code; summary {summary}; stderr:\n{stderr}"
    );
    assert_eq!(summary["stopped"], "caught_up", "{summary}");
    assert_eq!(summary["caught_up"], false, "{summary}");
    assert!(
        stderr.contains("Kafka did not acknowledge every record it read"),
        "{stderr}"
    );
    let confirmed = s.confirmed_flush_lsn().expect("the slot exists");
    assert!(
        confirmed < committed,
        "the undelivered records are confirmed: {confirmed} >= {committed}"
    );
    assert!(
        lsn_field(&summary, "confirmed_lsn") < committed,
        "{summary}"
    );

    // With the broker back the next run delivers them and succeeds.
    kafka
        .start()
        .unwrap_or_else(|e| panic!("restart the broker: {}", e.report()));
    let summary = run_bounded(&s, &kafka, &["--stop-when-caught-up"]).await;
    assert_eq!(summary["caught_up"], true, "{summary}");
    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("pending"),
        100,
        Duration::from_secs(30),
    )
    .await;
    let mut ids: Vec<i64> = records
        .iter()
        .filter_map(|r| r.value.as_ref()?["payload"]["after"]["id"].as_i64())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, (1..=100).collect::<Vec<_>>(), "every record delivered");
}

/// Exactly-once with `--stop-when-caught-up idle` behind a broker that
/// answers slowly: start-up (initializing the transactional producer,
/// reading the progress topic) takes longer than `--idle-timeout`, which
/// must not count as idle time. The run delivers the backlog committed
/// before it began, then stops caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_idle_run_behind_a_slow_broker_delivers_its_backlog() {
    let kafka = common::kafka_behind_proxy().await;
    let proxy = kafka.proxy().expect("the broker's proxy");
    let proxied = kafka.proxied_bootstrap_servers().expect("proxied listener");
    let s = Scenario::new(Postgres::shared(), "idleslow");
    s.sql("CREATE TABLE backlog (id int PRIMARY KEY)");
    let idle = [
        "--delivery",
        "exactly-once",
        "--stop-when-caught-up",
        "idle",
        "--idle-timeout",
        "500ms",
        "--status-interval",
        "200ms",
    ];
    // Creates the slot and the progress record.
    let (code, summary, stderr) = run_args_exit(&s, s.args(&proxied, &idle)).await;
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    s.sql("INSERT INTO backlog SELECT generate_series(1, 300)");

    proxy.set_latency(Duration::from_millis(300));
    let (code, summary, stderr) = tokio::time::timeout(
        Duration::from_secs(120),
        run_args_exit(&s, s.args(&proxied, &idle)),
    )
    .await
    .expect("the run stops by itself");
    proxy.set_latency(Duration::ZERO);
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    assert_eq!(summary["stopped"], "caught_up", "{summary}");
    assert_eq!(
        summary["transactions"], 1,
        "the backlog was read: {summary}"
    );
    let ids = delivered_ids(&kafka, &s.topic("backlog")).await;
    assert_eq!(
        ids.keys().copied().collect::<Vec<_>>(),
        (1..=300).collect::<Vec<_>>(),
        "every row committed before the run is in Kafka"
    );
    assert!(ids.values().all(|&n| n == 1), "and once");
}

/// PostgreSQL down when a run starts, at its time limit, and for a whole
/// run: a run that reaches the server later reports where it really
/// started; a time limit that strikes while the run reconnects ends it as
/// a time limit (exit 0), saying what it was recovering from; a run that
/// never reached the server says its start is unknown, not `0/0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_at_the_start_or_the_time_limit_is_no_failure() {
    let kafka = Kafka::shared();
    let pg: &'static Postgres = Box::leak(Box::new(
        tokio::task::spawn_blocking(Postgres::launch)
            .await
            .expect("launch thread")
            .unwrap_or_else(|e| panic!("private postgres: {}", e.report())),
    ));
    let s = Scenario::new(pg, "pgdown");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    run_bounded(&s, kafka, &["--stop-when-caught-up"]).await;
    let slot_before = s.confirmed_flush_lsn().expect("the slot exists");
    s.sql("INSERT INTO t SELECT generate_series(1, 50)");

    // 1. Down when the run starts, back two seconds later.
    pg.stop(StopMode::Fast).expect("stop postgres");
    let run = tokio::spawn({
        let args = s.args(&kafka.bootstrap_servers(), &["--stop-when-caught-up"]);
        let s = s.clone();
        async move { run_args_exit(&s, args).await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::task::spawn_blocking(|| pg.start())
        .await
        .expect("join")
        .expect("start postgres");
    let (code, summary, stderr) = run.await.expect("join");
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    assert!(summary["restarts"].as_u64() >= Some(1), "{summary}");
    assert!(
        lsn_field(&summary, "start_lsn") >= slot_before,
        "the start is where the slot was, not 0/0: {summary}"
    );

    // 2. Down across the time limit.
    let run = tokio::spawn({
        let args = s.args(&kafka.bootstrap_servers(), &["--max-run", "8s"]);
        let s = s.clone();
        async move { run_args_exit(&s, args).await }
    });
    wait_until(TIMEOUT, "the run streaming", || async {
        s.slot_active() == Some(true)
    })
    .await;
    pg.stop(StopMode::Fast).expect("stop postgres");
    let (code, summary, stderr) = run.await.expect("join");
    tokio::task::spawn_blocking(|| pg.start())
        .await
        .expect("join")
        .expect("start postgres");
    assert_eq!(
        code,
        Some(0),
        "a time limit, not a failure: {summary}\n{stderr}"
    );
    assert_eq!(summary["stopped"], "time_limit", "{summary}");
    assert!(
        summary["interrupted"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "says what it was recovering from: {summary}"
    );

    // 3. Never reachable.
    let closed = format!("postgres://postgres@127.0.0.1:{}/nothing", closed_port());
    let mut args = s.args(&kafka.bootstrap_servers(), &["--max-run", "3s"]);
    let url = args.iter().position(|a| a == "--pg-url").expect("--pg-url") + 1;
    args[url] = closed;
    let (code, summary, stderr) = run_args_exit(&s, args).await;
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    assert_eq!(summary["stopped"], "time_limit", "{summary}");
    assert!(
        summary["start_lsn"].is_null(),
        "the start is unknown: {summary}"
    );

    // 4. A stop asked for while it waits to retry is a stop, not a failure.
    let closed = format!("postgres://postgres@127.0.0.1:{}/nothing", closed_port());
    let mut args = vec![
        "--log-format".to_owned(),
        "json".to_owned(),
        "run".to_owned(),
    ];
    args.extend(s.args(&kafka.bootstrap_servers(), &[]));
    let url = args.iter().position(|a| a == "--pg-url").expect("--pg-url") + 1;
    args[url] = closed;
    let child = Command::new(BIN)
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    // The first attempt fails at once; the backoff before the next is 1 s,
    // then 2 s: 1.5 s lands in one of them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(term.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("the run ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let summary: Json = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("a JSON summary ({e}): {stdout}\n{stderr}"));
    assert_eq!(summary["stopped"], "requested", "{summary}");
    assert!(
        summary["interrupted"]
            .as_str()
            .is_some_and(|e| e.contains("127.0.0.1")),
        "says what it was recovering from: {summary}"
    );
}

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}
