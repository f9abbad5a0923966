//! The server behind `--pg-url` changes under a running connector: another
//! cluster, a standby promoted without the slot, and a standby promoted
//! with a synchronized failover slot (PostgreSQL 17+) under load.
//!
//! The first two must stop the run with an error that says what happened
//! (never a silent snapshot or gap); the third must carry on from the
//! synchronized slot with nothing lost and no snapshot.

use super::*;
use pgcdc_kafka::pipeline::PipelineError;
use pgcdc_kafka::source::identity::IdentityError;
use pgcdc_testcontainers::{PostgresOptions, StandbyOptions};

/// A private cluster for the whole test binary's life (a `Scenario` holds
/// a `&'static Postgres`).
fn leaked(pg: pgcdc_testcontainers::Result<Postgres>, what: &str) -> &'static Postgres {
    Box::leak(Box::new(
        pg.unwrap_or_else(|e| panic!("{what}: {}", e.report())),
    ))
}

/// `args` with `--pg-url` replaced by `url`.
fn with_pg_url(args: Vec<String>, url: &str) -> Vec<String> {
    let mut out = args;
    if let Some(i) = out.iter().position(|a| a == "--pg-url") {
        out[i + 1] = url.to_owned();
    }
    out
}

/// Waits until the standby has replayed everything the primary wrote so far.
async fn await_replayed(primary: &Postgres, standby: &'static Postgres) {
    let lsn = |pg: &Postgres, sql: &str| -> Option<Lsn> {
        pg.query("postgres", sql)
            .ok()?
            .first()?
            .first()?
            .as_deref()?
            .parse()
            .ok()
    };
    let target = lsn(primary, "SELECT pg_current_wal_lsn()::text").expect("primary position");
    wait_until(
        TIMEOUT,
        "the standby replaying the primary's WAL",
        || async {
            lsn(standby, "SELECT pg_last_wal_replay_lsn()::text").is_some_and(|l| l >= target)
        },
    )
    .await;
}

/// Moves `proxy` to `to`, cuts its connections, and returns the error the
/// connector stops with, and its chain.
async fn move_and_await_stop(
    proxy: &FaultProxy,
    to: &Postgres,
    running: Running,
    label: &str,
) -> (PipelineError, String) {
    proxy.retarget(([127, 0, 0, 1], to.port()).into());
    proxy.reset();
    let error = running.wait_for_error().await;
    let chain = error_chain(&error);
    println!("[{label}] stopped with: {chain}");
    (error, chain)
}

/// A connector streaming `ledger` of a new database on `pg` through a
/// fault proxy, with `extra` flags, after its first rows were delivered;
/// returns the scenario, the proxy, the running connector and its flags.
async fn streaming_through_a_proxy(
    pg: &'static Postgres,
    name: &str,
    extra: &[&str],
) -> (Scenario, FaultProxy, Running, Vec<String>) {
    let s = Scenario::new(pg, name);
    create_tables(&s, &LEDGER);
    let proxy = FaultProxy::start(([127, 0, 0, 1], pg.port()).into()).expect("proxy");
    let mut flags = vec!["--status-interval", "200ms"];
    flags.extend_from_slice(extra);
    let args = through_port(
        s.args(&Kafka::shared().bootstrap_servers(), &flags),
        pg,
        proxy.port(),
    );
    let running = s.start_args(args.clone());
    s.await_slot().await;
    Workload::new(&LEDGER, 7).run_blocking(&s, 10);
    s.await_confirmed_past_now("the first rows delivered").await;
    (s, proxy, running, args)
}

/// The table of the identity tests.
const LEDGER: [&str; 1] = ["ledger"];

/// The connector streams from cluster A through a proxy; the proxy moves to
/// cluster B (which has a database of the same name) and cuts the
/// connections. The connector must stop with `OtherCluster` and create
/// nothing on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_behind_the_url_stops_the_run() {
    init_logs();
    let a = leaked(Postgres::launch(), "cluster A");
    let b = leaked(Postgres::launch(), "cluster B");
    let (s, proxy, running, _) = streaming_through_a_proxy(a, "othercluster", &[]).await;
    b.execute("postgres", &format!("CREATE DATABASE {}", s.db))
        .unwrap_or_else(|e| panic!("database on B: {}", e.report()));
    let on_b = Scenario { pg: b, ..s.clone() };
    create_tables(&on_b, &LEDGER);

    let (error, chain) = move_and_await_stop(&proxy, b, running, "other cluster").await;
    assert!(
        matches!(
            error,
            PipelineError::Identity(IdentityError::OtherCluster { .. })
        ),
        "stops because the cluster changed: {chain}"
    );
    assert!(chain.contains("another PostgreSQL cluster"), "{chain}");
    assert_eq!(
        on_b.confirmed_flush_lsn(),
        None,
        "nothing was created on the other cluster"
    );
}

/// Under exactly-once the progress record names the server its position
/// belongs to, so the check survives a restart, which forgets the server:
/// a new run whose URL now reaches another cluster, with a slot and
/// publication of the same names there, stops instead of skipping that
/// cluster's transactions by the other cluster's recorded position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_progress_remembers_the_cluster_across_restarts() {
    init_logs();
    let a = leaked(Postgres::launch(), "cluster A");
    let b = leaked(Postgres::launch(), "cluster B");
    let (s, proxy, running, args) =
        streaming_through_a_proxy(a, "eosidentity", &["--delivery", "exactly-once"]).await;
    running.stop().await;

    // B looks the same: database, table, publication and slot of the same names.
    b.execute("postgres", &format!("CREATE DATABASE {}", s.db))
        .unwrap_or_else(|e| panic!("database on B: {}", e.report()));
    let on_b = Scenario { pg: b, ..s.clone() };
    create_tables(&on_b, &LEDGER);
    on_b.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        s.publication
    ));
    on_b.sql(&format!(
        "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
        s.slot
    ));
    proxy.retarget(([127, 0, 0, 1], b.port()).into());

    let error = s.start_args(args).wait_for_error().await;
    let chain = error_chain(&error);
    println!("[exactly-once, restarted on another cluster] stopped with: {chain}");
    assert!(
        matches!(
            error,
            PipelineError::Identity(IdentityError::OtherCluster { .. })
        ),
        "stops because the progress record names another cluster: {chain}"
    );
}

/// A standby without slot synchronization is promoted after the primary
/// crashes, and the proxy moves to it: the slot's progress is gone, so the
/// connector must stop with `SlotNotCarried` (not snapshot, not skip).
/// Any version (the standby is made with the low-level backup API).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_standby_without_the_slot_stops_the_run() {
    init_logs();
    let primary = leaked(Postgres::launch(), "primary");
    let standby = leaked(
        Postgres::launch_standby_of(primary, &StandbyOptions::default()),
        "standby",
    );
    let (s, proxy, running, _) = streaming_through_a_proxy(primary, "noslotsync", &[]).await;
    await_replayed(primary, standby).await;

    primary
        .stop(StopMode::Immediate)
        .unwrap_or_else(|e| panic!("primary stops: {}", e.report()));
    standby
        .promote()
        .unwrap_or_else(|e| panic!("standby promotes: {}", e.report()));
    let (error, chain) =
        move_and_await_stop(&proxy, standby, running, "promoted standby without slot").await;
    assert!(
        matches!(
            error,
            PipelineError::Identity(IdentityError::SlotNotCarried {
                from_timeline: 1,
                to_timeline: 2,
                ..
            })
        ),
        "stops because the slot did not come along: {chain}"
    );
    let on_standby = Scenario {
        pg: standby,
        ..s.clone()
    };
    assert_eq!(
        on_standby.confirmed_flush_lsn(),
        None,
        "no slot was created on the promoted standby"
    );
}

/// A private primary of PostgreSQL `min` or later (the version asked for
/// with `PGCDC_TEST_PG_VERSION` when it is that recent, else `min` itself),
/// for the life of the test binary; `None`, after saying the test is
/// skipped, when the server turns out older (a build of another version
/// behind the requested one).
pub(super) fn primary_of_at_least(min: u32, test: &str) -> Option<&'static Postgres> {
    let version = pgcdc_testcontainers::requested_version()
        .ok()
        .flatten()
        .filter(|v| *v >= min)
        .unwrap_or(min);
    let primary = leaked(
        Postgres::launch_with(&PostgresOptions {
            version: Some(version),
            ..PostgresOptions::default()
        }),
        "primary",
    );
    let version_num = primary.version_num().expect("server version");
    if version_num < min * 10_000 {
        println!("SKIPPED [{test}]: the server is {version_num}; this needs PostgreSQL {min}+");
        return None;
    }
    Some(primary)
}

/// A primary and a standby with slot synchronization (PostgreSQL 17+), the
/// connector on a multi-host URL with `--slot-failover`, a continuous write
/// load; the primary is killed (immediate stop) and the standby promoted
/// mid-stream. The connector must reconnect to the new primary and go on
/// from the synchronized slot: every row in the topics, nothing lost,
/// re-sends only as contiguous tails, no snapshot.
async fn failover_slot_survives_a_promotion(mode: &str, extra: &[&str]) {
    const TABLES: [&str; 2] = ["accounts", "transfers"];
    init_logs();
    let Some(primary) = primary_of_at_least(17, &format!("failover slots, {mode}")) else {
        return;
    };
    let standby = leaked(
        Postgres::launch_standby_of(
            primary,
            &StandbyOptions {
                sync_replication_slots: true,
                ..StandbyOptions::default()
            },
        ),
        "standby",
    );
    primary
        .alter_system(
            "synchronized_standby_slots",
            standby.physical_slot().expect("the standby's slot"),
        )
        .unwrap_or_else(|e| panic!("synchronized_standby_slots: {}", e.report()));
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(primary, "failover");
    create_tables(&s, &TABLES);
    for topic in topics_of(&s, &TABLES) {
        kafka.create_topic(&topic, 2).expect("create topic");
    }
    let url = format!(
        "postgres://postgres:postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
        primary.port(),
        standby.port(),
        s.db
    );
    let mut flags = vec!["--status-interval", "200ms", "--slot-failover"];
    flags.extend_from_slice(extra);
    let running = s.start_args(with_pg_url(s.args(&bootstrap, &flags), &url));
    s.await_slot().await;

    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_until_failure(
        primary,
        s.db.clone(),
        Workload::new(&TABLES, 23),
        Arc::clone(&stop_writer),
    ));
    // The slot is a failover slot and the standby holds a synchronized copy.
    let on_standby = Scenario {
        pg: standby,
        ..s.clone()
    };
    wait_until(TIMEOUT, "the standby's synchronized copy of the slot", || async {
        on_standby
            .try_query_one(&format!(
                "SELECT (synced AND NOT temporary)::text FROM pg_replication_slots WHERE slot_name = '{}'",
                s.slot
            ))
            .ok()
            .flatten()
            .as_deref()
            == Some("true")
    })
    .await;
    assert_check_sees_failover_ready(&with_pg_url(s.args(&bootstrap, &flags), &url), standby).await;
    s.await_confirmed_past_now("rows streaming under load")
        .await;
    // Let the synchronized copy move on from its first position too.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let fault = Instant::now();
    primary
        .stop(StopMode::Immediate)
        .unwrap_or_else(|e| panic!("primary stops: {}", e.report()));
    let (mut workload, before) = writer.await.expect("writer");
    standby
        .promote()
        .unwrap_or_else(|e| panic!("standby promotes: {}", e.report()));
    println!(
        "[failover {mode}] primary killed after {} transactions, standby promoted in {:?}",
        before,
        fault.elapsed()
    );
    // The load goes on against the new primary.
    let after = workload.run_blocking(&on_standby, 40);
    on_standby
        .await_confirmed_past_now("everything written on the new primary delivered")
        .await;
    println!(
        "[failover {mode}] caught up on the new primary {:?} after the kill",
        fault.elapsed()
    );
    let summary = running.stop().await;
    assert!(summary.restarts > 0, "the run reconnected: {summary:?}");

    let source = source_rows(&on_standby, &TABLES);
    let consumed = read_topics(&bootstrap, &topics_of(&s, &TABLES), Some(TIMEOUT)).await;
    let written: i64 = source.values().sum();
    let verified = verify(
        &format!("failover slot, {mode}"),
        written as u64,
        &source,
        &consumed,
    );
    println!(
        "[failover {mode}] {after} changes after the promotion; {} duplicates",
        verified.duplicates
    );
}

/// `pgcdc-kafka check` with the run's flags: the primary's slot is a
/// failover slot, the standby synchronizes it and holds a copy, and the
/// primary waits for the standby's slot.
async fn assert_check_sees_failover_ready(args: &[String], standby: &Postgres) {
    let args = args.to_vec();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_pgcdc-kafka"))
            .arg("check")
            .args(&args)
            .output()
            .expect("check runs")
    })
    .await
    .expect("check thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("[failover] check says:\n{stdout}");
    for expected in [
        "(primary): slot".to_owned(),
        format!(
            "127.0.0.1:{} (standby): synchronizes failover slots; holds a synchronized copy",
            standby.port()
        ),
        "the primary waits for".to_owned(),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("PASS failover") && l.contains(&expected)),
            "check reports {expected:?}:\n{stdout}"
        );
    }
}

/// Commits workload transactions on `pg` until `stop` is set or the server
/// goes away; returns the workload (its committed rows) and the count.
async fn write_until_failure(
    pg: &'static Postgres,
    db: String,
    mut workload: Workload,
    stop: Arc<AtomicBool>,
) -> (Workload, u64) {
    let client = pg
        .connect(&db)
        .await
        .unwrap_or_else(|e| panic!("writer connects: {}", e.report()));
    let mut transactions = 0;
    while !stop.load(Ordering::Relaxed) {
        let txn = workload.plan();
        if client.batch_execute(&txn.sql).await.is_err() {
            // The server died: whether this one committed is the new
            // primary's to say, and the check reads the tables there.
            break;
        }
        workload.committed(txn);
        transactions += 1;
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    (workload, transactions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_slot_survives_a_promotion_at_least_once() {
    failover_slot_survives_a_promotion("at-least-once", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_slot_survives_a_promotion_exactly_once() {
    failover_slot_survives_a_promotion("exactly-once", &["--delivery", "exactly-once"]).await;
}
