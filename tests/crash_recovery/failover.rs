//! The server behind `--pg-url` changes under a running connector: another
//! cluster, and a standby promoted without the slot. Both must stop the run
//! with an error that says what happened (never a silent snapshot or gap).

use super::*;
use pgcdc_kafka::pipeline::PipelineError;
use pgcdc_kafka::source::identity::IdentityError;
use pgcdc_testcontainers::StandbyOptions;

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

/// The connector streams from cluster A through a proxy; the proxy moves to
/// cluster B (which has a database of the same name) and cuts the
/// connections. The connector must stop with `OtherCluster` and create
/// nothing on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_behind_the_url_stops_the_run() {
    const TABLES: [&str; 1] = ["ledger"];
    init_logs();
    let a = leaked(Postgres::launch(), "cluster A");
    let b = leaked(Postgres::launch(), "cluster B");
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(a, "othercluster");
    create_tables(&s, &TABLES);
    b.execute("postgres", &format!("CREATE DATABASE {}", s.db))
        .unwrap_or_else(|e| panic!("database on B: {}", e.report()));
    let on_b = Scenario { pg: b, ..s.clone() };
    create_tables(&on_b, &TABLES);

    let proxy = FaultProxy::start(([127, 0, 0, 1], a.port()).into()).expect("proxy");
    let args = through_port(
        s.args(&bootstrap, &["--status-interval", "200ms"]),
        a,
        proxy.port(),
    );
    let running = s.start_args(args);
    s.await_slot().await;
    let mut workload = Workload::new(&TABLES, 7);
    workload.run_blocking(&s, 10);
    s.await_confirmed_past_now("the first rows delivered").await;

    proxy.retarget(([127, 0, 0, 1], b.port()).into());
    proxy.reset();
    let error = running.wait_for_error().await;
    let chain = error_chain(&error);
    println!("[other cluster] stopped with: {chain}");
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

/// A standby without slot synchronization is promoted after the primary
/// crashes, and the proxy moves to it: the slot's progress is gone, so the
/// connector must stop with `SlotNotCarried` (not snapshot, not skip).
/// Any version (the standby is made with the low-level backup API).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_standby_without_the_slot_stops_the_run() {
    const TABLES: [&str; 1] = ["ledger"];
    init_logs();
    let primary = leaked(Postgres::launch(), "primary");
    let standby = leaked(
        Postgres::launch_standby_of(primary, &StandbyOptions::default()),
        "standby",
    );
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(primary, "noslotsync");
    create_tables(&s, &TABLES);

    let proxy = FaultProxy::start(([127, 0, 0, 1], primary.port()).into()).expect("proxy");
    let args = through_port(
        s.args(&bootstrap, &["--status-interval", "200ms"]),
        primary,
        proxy.port(),
    );
    let running = s.start_args(args);
    s.await_slot().await;
    Workload::new(&TABLES, 11).run_blocking(&s, 10);
    s.await_confirmed_past_now("the first rows delivered").await;
    await_replayed(primary, standby).await;

    primary
        .stop(StopMode::Immediate)
        .unwrap_or_else(|e| panic!("primary stops: {}", e.report()));
    standby
        .promote()
        .unwrap_or_else(|e| panic!("standby promotes: {}", e.report()));
    proxy.retarget(([127, 0, 0, 1], standby.port()).into());
    proxy.reset();

    let error = running.wait_for_error().await;
    let chain = error_chain(&error);
    println!("[promoted standby without slot] stopped with: {chain}");
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
