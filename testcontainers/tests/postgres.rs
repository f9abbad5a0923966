//! The PostgreSQL service: logical decoding is on, databases isolate tests,
//! and a private server survives stop/start in every mode.

use pgcdc_testcontainers::{Postgres, StopMode};

fn scalar(pg: &Postgres, db: &str, sql: &str) -> Option<String> {
    let rows = pg.query(db, sql).expect("query");
    rows.into_iter()
        .next()
        .and_then(|row| row.into_iter().next())
        .flatten()
}

#[test]
fn shared_server_has_logical_decoding() {
    let pg = Postgres::shared();
    assert_eq!(
        scalar(pg, "postgres", "SHOW wal_level").as_deref(),
        Some("logical")
    );
    assert_eq!(
        scalar(pg, "postgres", "SHOW max_replication_slots").as_deref(),
        Some("64")
    );
    assert_eq!(
        scalar(pg, "postgres", "SHOW wal_sender_timeout").as_deref(),
        Some("10s")
    );
    assert!(pg
        .url("x")
        .starts_with("postgres://postgres:postgres@127.0.0.1:"));
}

#[test]
fn logical_slot_can_be_created_and_read() {
    let pg = Postgres::shared();
    let db = pg.create_database("slot_test").expect("create database");
    let slot = pgcdc_testcontainers::unique_name("slot");
    pg.execute(
        &db,
        "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE t",
    )
    .expect("create table and publication");
    pg.execute(
        &db,
        &format!("SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"),
    )
    .expect("create slot");
    pg.execute(&db, "INSERT INTO t VALUES (1, 'a')")
        .expect("insert");
    let changes = scalar(
        pg,
        &db,
        &format!(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('{slot}', NULL, NULL, \
             'proto_version', '1', 'publication_names', 'p')"
        ),
    );
    // Begin, Relation, Insert, Commit.
    assert_eq!(changes.as_deref(), Some("4"));
    pg.execute(&db, &format!("SELECT pg_drop_replication_slot('{slot}')"))
        .expect("drop slot");
}

#[test]
fn databases_are_isolated() {
    let pg = Postgres::shared();
    let a = pg.create_database("iso").expect("create a");
    let b = pg.create_database("iso").expect("create b");
    assert_ne!(a, b);
    pg.execute(&a, "CREATE TABLE only_in_a (x int)")
        .expect("create table");
    let err = pg
        .execute(&b, "SELECT * FROM only_in_a")
        .expect_err("table must not exist in b");
    assert!(
        err.report().to_string().contains("only_in_a"),
        "{}",
        err.report()
    );
}

#[tokio::test]
async fn works_from_async_tests() {
    let pg = Postgres::shared();
    // The blocking helpers run on their own thread, so they work in a runtime.
    let db = pg.create_database("async").expect("create database");
    let client = pg.connect(&db).await.expect("connect");
    let row = client.query_one("SELECT 1 + 1", &[]).await.expect("query");
    assert_eq!(row.get::<_, i32>(0), 2);
}

#[test]
fn private_server_survives_stop_and_start() {
    let pg = Postgres::launch().expect("launch postgres");
    let port = pg.port();
    let data_dir = pg
        .data_dir()
        .expect("local backend has a data dir")
        .to_owned();
    pg.execute(
        "postgres",
        "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)",
    )
    .expect("write");
    for (i, mode) in [StopMode::Fast, StopMode::Immediate, StopMode::Smart]
        .into_iter()
        .enumerate()
    {
        pg.stop(mode).expect("stop");
        assert!(pg.pid().is_none());
        assert!(
            pg.execute("postgres", "SELECT 1").is_err(),
            "stopped after {mode:?}"
        );
        pg.start().expect("start again");
        assert_eq!(pg.port(), port);
        pg.execute("postgres", &format!("INSERT INTO kept VALUES ({})", i + 2))
            .expect("write after restart");
    }
    pg.restart().expect("restart");
    assert_eq!(
        scalar(&pg, "postgres", "SELECT count(*) FROM kept").as_deref(),
        Some("4")
    );
    assert!(data_dir.join("PG_VERSION").is_file());
    let work = data_dir.parent().expect("work dir").to_owned();
    drop(pg);
    assert!(
        !work.exists(),
        "dropping the server removes {}",
        work.display()
    );
}
