//! Logical decoding from a hot standby (PostgreSQL 16+): the connector's
//! `--pg-url` names the standby, writes go to the primary. The initial
//! snapshot is read on the standby, changes stream, and an idle stream
//! still advances the standby's slot. A signal table is read there too:
//! thousands of streamed transactions later (each one remembered until a
//! snapshot sees it, for incremental snapshots' sake) the run has not
//! restarted once.

use super::*;
use pgcdc_testcontainers::StandbyOptions;

/// One text value of `sql` on `pg`'s database `db`, `None` on no row or an error.
fn value(pg: &Postgres, db: &str, sql: &str) -> Option<String> {
    pg.query(db, sql)
        .ok()?
        .into_iter()
        .next()?
        .into_iter()
        .next()?
}

fn lsn_value(pg: &Postgres, db: &str, sql: &str) -> Option<Lsn> {
    value(pg, db, sql)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_standby_snapshots_streams_and_advances_when_idle() {
    const TABLES: [&str; 2] = ["orders", "lines"];
    const SEEDED: i64 = 50;
    init_logs();
    let Some(primary) = super::failover::primary_of_at_least(16, "standby decoding") else {
        return;
    };
    let standby: &'static Postgres = Box::leak(Box::new(
        Postgres::launch_standby_of(primary, &StandbyOptions::default())
            .unwrap_or_else(|e| panic!("standby: {}", e.report())),
    ));
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(primary, "standbydecoding");
    create_tables(&s, &TABLES);
    s.sql("CREATE TABLE seeded (id bigint PRIMARY KEY, note text)");
    s.sql("CREATE TABLE signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))");
    s.sql(&format!(
        "INSERT INTO seeded SELECT g, 'row ' || g FROM generate_series(1, {SEEDED}) g"
    ));
    // A standby cannot create the publication: it is made on the primary.
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        s.publication
    ));
    let on_standby = Scenario {
        pg: standby,
        ..s.clone()
    };
    let primary_lsn = || lsn_value(primary, &s.db, "SELECT pg_current_wal_lsn()::text");
    let slot_confirmed = || {
        lsn_value(
            standby,
            &s.db,
            &format!(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{}'",
                s.slot
            ),
        )
    };
    let replayed = primary_lsn().expect("primary position");
    wait_until(TIMEOUT, "the standby replaying the setup", || async {
        lsn_value(standby, "postgres", "SELECT pg_last_wal_replay_lsn()::text")
            .is_some_and(|l| l >= replayed)
    })
    .await;

    let running = on_standby.start(
        &bootstrap,
        &[
            "--status-interval",
            "200ms",
            "--signal-data-collection",
            "public.signals",
        ],
    );
    // A slot on a standby waits for the primary's next running-transactions
    // record; the primary logs one every 15 s while busy, this asks at once.
    wait_until(TIMEOUT, "the slot on the standby", || async {
        assert!(
            !running.is_finished(),
            "the connector stopped while creating its slot"
        );
        let _ = primary.execute("postgres", "SELECT pg_log_standby_snapshot()");
        slot_confirmed().is_some()
    })
    .await;

    // The snapshot was read on the standby.
    let seeded = read_topics(&bootstrap, &[s.topic("seeded")], Some(TIMEOUT)).await;
    let snapshot_reads = seeded
        .values()
        .flatten()
        .filter(|r| r.value.as_ref().is_some_and(|v| v["payload"]["op"] == "r"))
        .count();
    assert_eq!(
        snapshot_reads as i64, SEEDED,
        "every seeded row read by the snapshot on the standby"
    );

    // Changes written on the primary stream from the standby.
    let mut workload = Workload::new(&TABLES, 31);
    let written = workload.run_blocking(&s, 60);
    // More transactions than the connector remembers before it takes a
    // snapshot to forget the ones it sees (4,096): on a standby that must
    // not call what only a primary can (pg_current_wal_insert_lsn()).
    s.sql(
        "DO $$ BEGIN FOR i IN 1..4500 LOOP \
         INSERT INTO seeded VALUES (1000 + i, 'burst'); COMMIT; END LOOP; END $$",
    );
    let end = primary_lsn().expect("primary position");
    wait_until(
        TIMEOUT,
        "the standby's slot confirmed past the last write",
        || async {
            assert!(
                !running.is_finished(),
                "the connector stopped while streaming"
            );
            slot_confirmed().is_some_and(|c| c >= end)
        },
    )
    .await;

    // Idle: no heartbeat can be written on a standby, yet the slot follows
    // the WAL the standby replays (here the primary's own bookkeeping).
    primary
        .execute("postgres", "SELECT pg_log_standby_snapshot()")
        .expect("a running-transactions record on the primary");
    let idle_end = primary_lsn().expect("primary position");
    wait_until(
        TIMEOUT,
        "the idle slot advancing with the standby's replay",
        || async { slot_confirmed().is_some_and(|c| c >= idle_end) },
    )
    .await;

    let summary = running.stop().await;
    assert_eq!(
        summary.restarts, 0,
        "no attempt failed on the standby, signal table and all: {summary:?}"
    );

    // What a standby cannot do stops a run with the fix: a heartbeat that
    // writes, and a publication to create.
    let other = Scenario {
        slot: pgcdc_testcontainers::unique_name("slot"),
        ..on_standby.clone()
    };
    let heartbeat = other.start(
        &bootstrap,
        &[
            "--heartbeat-interval",
            "1s",
            "--heartbeat-action-query",
            "INSERT INTO seeded VALUES (0, 'beat')",
        ],
    );
    let error = error_chain(&heartbeat.wait_for_error().await);
    assert!(
        error.contains("--heartbeat-action-query cannot run on a standby"),
        "{error}"
    );
    let unpublished = Scenario {
        publication: pgcdc_testcontainers::unique_name("pub"),
        ..other.clone()
    };
    let error = error_chain(&unpublished.start(&bootstrap, &[]).wait_for_error().await);
    assert!(
        error.contains("it is a standby, which is read-only; run it on the primary"),
        "{error}"
    );
    assert_eq!(
        other.confirmed_flush_lsn(),
        None,
        "no slot made by the refused runs"
    );

    verify_tables(
        "standby decoding",
        &s,
        &bootstrap,
        &TABLES,
        written,
        json_decoder(),
    )
    .await;
}

/// Below 16 a standby cannot decode: `run` pointed at one stops before
/// creating anything, naming the version needed and the way out, and
/// `check` says the same in its feature line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_older_than_16_is_refused_before_anything_is_created() {
    init_logs();
    let primary: &'static Postgres = Box::leak(Box::new(
        Postgres::launch_with(&pgcdc_testcontainers::PostgresOptions {
            version: Some(15),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("PostgreSQL 15: {}", e.report())),
    ));
    let standby: &'static Postgres = Box::leak(Box::new(
        Postgres::launch_standby_of(primary, &StandbyOptions::default())
            .unwrap_or_else(|e| panic!("standby: {}", e.report())),
    ));
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(primary, "oldstandby");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        s.publication
    ));
    let on_standby = Scenario {
        pg: standby,
        ..s.clone()
    };
    wait_until(TIMEOUT, "the standby replaying the setup", || async {
        value(
            standby,
            &s.db,
            &format!(
                "SELECT 1 FROM pg_publication WHERE pubname = '{}'",
                s.publication
            ),
        )
        .is_some()
    })
    .await;

    let error = on_standby.start(&bootstrap, &[]).wait_for_error().await;
    let message = error_chain(&error);
    assert!(!error.is_retryable(), "{message}");
    assert!(
        message.contains("streaming from a standby needs decoding on a standby (PostgreSQL 16+)")
            && message.contains("point --pg-url at the primary"),
        "{message}"
    );
    assert_eq!(
        value(
            standby,
            &s.db,
            "SELECT count(*)::text FROM pg_replication_slots WHERE slot_type = 'logical'"
        )
        .as_deref(),
        Some("0"),
        "no slot was made on the standby"
    );

    let mut args = on_standby.args(&bootstrap, &[]);
    args.insert(0, "check".to_owned());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgcdc-kafka"))
        .args(&args)
        .env_remove("PGCDC_LOG_FORMAT")
        .output()
        .expect("check runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with(
            "FAIL decoding on a standby: needs PostgreSQL 16+; this server: no; this run: uses it"
        ) && l.contains("point --pg-url at the primary")),
        "{stdout}"
    );
    assert!(!output.status.success(), "check fails: {stdout}");
}
