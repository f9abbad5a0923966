//! End to end against real Postgres and Kafka: inserts stream as Debezium
//! JSON keyed by the primary key, and the slot is confirmed only after Kafka
//! acknowledged the messages.

mod common;

use std::time::Duration;

use common::{consume, consume_raw, hold_for, wait_until, Scenario, TIMEOUT};
use pgcdc_kafka::lsn::Lsn;
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::json;

fn lsn_of(record: &common::Record) -> Lsn {
    let raw = record.value.as_ref().expect("value")["payload"]["source"]["lsn"]
        .as_u64()
        .expect("source.lsn is a number");
    Lsn::new(raw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_arrive_as_debezium_json_keyed_by_primary_key() {
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "inserts");
    s.sql("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)");
    s.sql("CREATE TABLE events (note text)");

    let running = s.start(&kafka.bootstrap_servers(), &[]);
    s.await_slot().await;

    s.sql(
        "BEGIN; \
         INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com'); \
         INSERT INTO customers VALUES (2, 'Bob', NULL); \
         INSERT INTO events VALUES ('no key'); \
         COMMIT",
    );
    s.sql("INSERT INTO customers VALUES (3, 'Čéšťa ✓', 'c@example.com')");

    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("customers"),
        3,
        TIMEOUT,
    )
    .await;
    assert_eq!(records.len(), 3, "three customer inserts arrive");
    // Each record's Kafka timestamp is when the connector processed its
    // change: the envelope's ts_ms, not a later clock of the producer's.
    let raw = consume_raw(
        &kafka.bootstrap_servers(),
        &s.topic("customers"),
        3,
        TIMEOUT,
    )
    .await;
    for record in raw {
        let timestamp = record.timestamp;
        let value = record.into_json().value.expect("a value");
        assert_eq!(timestamp, value["payload"]["ts_ms"].as_i64(), "{value}");
    }
    let keyless = consume(&kafka.bootstrap_servers(), &s.topic("events"), 1, TIMEOUT).await;
    assert_eq!(
        keyless.len(),
        1,
        "the insert into a table without a key arrives"
    );
    assert_eq!(
        keyless[0].key, None,
        "a table without primary key gives a null key"
    );
    assert_eq!(
        keyless[0].value.as_ref().unwrap()["payload"]["after"],
        json!({"note": "no key"})
    );

    let key_schema = json!({
        "type": "struct",
        "fields": [{"type": "int32", "optional": false, "field": "id"}],
        "optional": false,
        "name": format!("{}.public.customers.Key", s.prefix),
    });
    let expected_rows = [
        json!({"id": 1, "name": "Ann", "email": "ann@example.com"}),
        json!({"id": 2, "name": "Bob", "email": null}),
        json!({"id": 3, "name": "Čéšťa ✓", "email": "c@example.com"}),
    ];
    for (record, row) in records.iter().zip(&expected_rows) {
        assert_eq!(
            record.key,
            Some(json!({"schema": key_schema, "payload": {"id": row["id"]}})),
            "key is the primary key struct"
        );
        let value = record.value.as_ref().expect("a value, not a tombstone");
        let payload = &value["payload"];
        assert_eq!(payload["op"], "c");
        assert_eq!(payload["before"], json!(null));
        assert_eq!(payload["after"], *row);
        assert_eq!(payload["transaction"], json!(null));
        let source = &payload["source"];
        assert_eq!(source["connector"], "postgresql");
        assert_eq!(source["name"], s.prefix.as_str());
        assert_eq!(source["db"], s.db.as_str());
        assert_eq!(source["schema"], "public");
        assert_eq!(source["table"], "customers");
        assert_eq!(source["snapshot"], "false");
        assert!(
            source["txId"].as_i64().is_some_and(|x| x > 0),
            "txId: {source}"
        );
        assert!(
            source["ts_ms"]
                .as_i64()
                .is_some_and(|t| t > 1_600_000_000_000),
            "ts_ms: {source}"
        );
        assert_eq!(
            source["ts_us"].as_i64().map(|us| us / 1000),
            source["ts_ms"].as_i64()
        );
        let sequence: Vec<Option<String>> =
            serde_json::from_str(source["sequence"].as_str().expect("sequence string"))
                .expect("sequence is a JSON array");
        assert_eq!(sequence.len(), 2);
        assert_eq!(
            sequence[1].as_deref(),
            Some(source["lsn"].to_string().as_str())
        );

        let schema = &value["schema"];
        assert_eq!(
            schema["name"],
            format!("{}.public.customers.Envelope", s.prefix)
        );
        assert_eq!(schema["version"], 2);
        let field_names: Vec<&str> = schema["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap())
            .collect();
        assert_eq!(
            field_names,
            [
                "before",
                "after",
                "source",
                "transaction",
                "op",
                "ts_ms",
                "ts_us",
                "ts_ns"
            ]
        );
        assert_eq!(
            schema["fields"][1],
            json!({
                "type": "struct",
                "fields": [
                    {"type": "int32", "optional": false, "field": "id"},
                    // NOT NULL, but outside the replica identity: a delete's
                    // before-image cannot know it, so the shared row schema
                    // says optional (see src/source/relation.rs).
                    {"type": "string", "optional": true, "field": "name"},
                    {"type": "string", "optional": true, "field": "email"},
                ],
                "optional": true,
                "name": format!("{}.public.customers.Value", s.prefix),
                "field": "after",
            })
        );
    }
    // Commit order, and WAL order inside the transaction.
    let lsns: Vec<Lsn> = records.iter().map(lsn_of).collect();
    assert!(
        lsns.windows(2).all(|w| w[0] < w[1]),
        "events in WAL order: {lsns:?}"
    );
    assert_eq!(
        records[0].value.as_ref().unwrap()["payload"]["source"]["txId"],
        records[1].value.as_ref().unwrap()["payload"]["source"]["txId"],
        "the first two inserts share a transaction"
    );

    let summary = running.stop().await;
    assert_eq!(summary.transactions, 2);
    assert_eq!(summary.events, 4);
    let confirmed = s.confirmed_flush_lsn().expect("slot exists");
    assert!(
        confirmed > *lsns.last().unwrap(),
        "after a graceful stop the slot is confirmed past the last delivered change ({confirmed} vs {:?})",
        lsns.last()
    );
}

/// The core promise: with the broker down, a committed transaction is not
/// acknowledged, so the slot must not be confirmed past it; once the broker
/// is back, the transaction arrives and the slot moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_is_not_confirmed_past_unacknowledged_transactions() {
    let pg = Postgres::shared();
    let kafka = Kafka::launch().expect("private Kafka broker");
    let s = Scenario::new(pg, "ackgate");
    s.sql("CREATE TABLE items (id int PRIMARY KEY, label text)");

    let running = s.start(&kafka.bootstrap_servers(), &["--status-interval", "200ms"]);
    s.await_slot().await;

    s.sql("INSERT INTO items VALUES (1, 'before the outage')");
    let first = consume(&kafka.bootstrap_servers(), &s.topic("items"), 1, TIMEOUT).await;
    assert_eq!(first.len(), 1);
    let first_lsn = lsn_of(&first[0]);
    wait_until(TIMEOUT, "slot confirmed past the first insert", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c > first_lsn)
    })
    .await;

    kafka.stop().expect("broker stops");
    let before_second = s.current_lsn();
    s.sql("INSERT INTO items VALUES (2, 'during the outage')");
    // The WAL position right after the commit: the slot must stay before it.
    // (Not the position before the INSERT: while the connector has nothing
    // open it may confirm an idle keepalive's position, which can pass other
    // databases' writes made before this commit.)
    let second_committed = s.current_lsn();

    // For several status intervals (and keepalives), the slot must stay
    // before the unacknowledged transaction, even though Postgres keeps
    // asking for feedback.
    hold_for(Duration::from_secs(5), || async {
        let confirmed = s.confirmed_flush_lsn().expect("slot exists");
        assert!(
            confirmed < second_committed,
            "slot confirmed to {confirmed}, past the unacknowledged transaction that commits before {second_committed}"
        );
    })
    .await;
    assert!(
        !running.is_finished(),
        "the connector waits for the broker rather than stopping"
    );

    kafka.start().expect("broker restarts");
    let all = consume(&kafka.bootstrap_servers(), &s.topic("items"), 2, TIMEOUT).await;
    let ids: Vec<i64> = all
        .iter()
        .map(|r| {
            r.value.as_ref().unwrap()["payload"]["after"]["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        [1, 2],
        "the transaction written during the outage arrives once the broker is back"
    );
    let second_lsn = lsn_of(&all[1]);
    assert!(second_lsn >= before_second, "second change at {second_lsn}, WAL position before it {before_second}, first change {first_lsn}");
    wait_until(TIMEOUT, "slot confirmed past the second insert", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c > second_lsn)
    })
    .await;
    running.stop().await;
}

/// JsonConverter with `schemas.enable=false`: keys and values are the bare payloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_without_schemas_is_the_bare_payload() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "noschema");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--json-key-schemas",
            "false",
            "--json-value-schemas",
            "false",
        ],
    );
    s.await_slot().await;
    s.sql("INSERT INTO t VALUES (7, 'seven')");
    let records = consume(&kafka.bootstrap_servers(), &s.topic("t"), 1, TIMEOUT).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key, Some(json!({"id": 7})));
    let value = records[0].value.as_ref().unwrap();
    assert!(value.get("schema").is_none(), "no embedded schema: {value}");
    assert_eq!(value["after"], json!({"id": 7, "v": "seven"}));
    assert_eq!(value["op"], "c");
    running.stop().await;
}

/// zstd is compiled into librdkafka (it refuses `compression.type=zstd`
/// when built without it, and the producer would not start): records
/// compressed with it arrive as with the default lz4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_compression_is_available() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "zstd");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &["--kafka-property", "compression.type=zstd"],
    );
    s.await_slot().await;
    s.sql("INSERT INTO t SELECT g, repeat('z', 500) FROM generate_series(1, 50) g");
    let records = consume(&kafka.bootstrap_servers(), &s.topic("t"), 50, TIMEOUT).await;
    let ids: Vec<i64> = records
        .iter()
        .map(|r| {
            r.value.as_ref().unwrap()["payload"]["after"]["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, (1..=50).collect::<Vec<_>>());
    running.stop().await;
}

/// Transactions larger than the batch of events the connector handles back
/// to back (256), between small ones, arrive whole: every row exactly once,
/// in commit order, and the run's summary counts them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_larger_than_a_receive_burst_arrive_whole() {
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "big_txns");
    s.sql("CREATE TABLE rows (id int PRIMARY KEY)");
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    s.await_slot().await;

    s.sql("INSERT INTO rows SELECT generate_series(1, 1000)");
    s.sql("INSERT INTO rows VALUES (1001)");
    s.sql("INSERT INTO rows SELECT generate_series(1002, 1769)");
    let records = consume(&kafka.bootstrap_servers(), &s.topic("rows"), 1769, TIMEOUT).await;
    let ids: Vec<i64> = records
        .iter()
        .map(|r| {
            r.key.as_ref().expect("a key")["payload"]["id"]
                .as_i64()
                .expect("an id")
        })
        .collect();
    assert_eq!(
        ids,
        (1..=1769).collect::<Vec<_>>(),
        "every row once, in order"
    );
    let summary = running.stop().await;
    assert_eq!((summary.transactions, summary.events), (3, 1769));
}

/// PostgreSQL 13 (a real one) is refused with the minimum named, by `run`
/// before it creates anything and by `check` as a FAIL line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_13_is_refused_naming_the_minimum() {
    let pg: &'static Postgres = Box::leak(Box::new(
        tokio::task::spawn_blocking(|| {
            Postgres::launch_with(&pgcdc_testcontainers::PostgresOptions {
                version: Some(13),
                ..Default::default()
            })
        })
        .await
        .expect("launch thread")
        .unwrap_or_else(|e| panic!("PostgreSQL 13: {}", e.report())),
    ));
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "pg13");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("PostgreSQL 13 is refused");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(!error.is_retryable(), "{message}");
    assert!(
        message.contains("PostgreSQL 13") && message.contains("14 or later"),
        "{message}"
    );
    assert_eq!(s.confirmed_flush_lsn(), None, "no slot was created");

    let mut args = s.args(&kafka.bootstrap_servers(), &[]);
    args.insert(0, "check".to_owned());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgcdc-kafka"))
        .args(&args)
        .env_remove("PGCDC_LOG_FORMAT")
        .output()
        .expect("check runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("FAIL postgres:") && l.contains("older than 14")),
        "{stdout}"
    );
    assert!(!output.status.success(), "check fails: {stdout}");
}

/// The server the suite runs against is the PostgreSQL version asked for
/// (`PGCDC_TEST_PG_VERSION`, the version matrix of `.ci/run`), so a pass on
/// a version is a pass on that version; without it, a supported one.
#[test]
fn the_server_is_the_postgresql_version_asked_for() {
    let s = Scenario::new(Postgres::shared(), "version");
    let number: u32 = s
        .query_one("SHOW server_version_num")
        .expect("a version")
        .parse()
        .expect("a number");
    let major = number / 10_000;
    println!("PostgreSQL {number}");
    match pgcdc_testcontainers::requested_version().expect("a valid PGCDC_TEST_PG_VERSION") {
        Some(asked) => assert_eq!(major, asked, "server_version_num {number}"),
        None => assert!(major >= 14, "a supported version: {number}"),
    }
}

/// The features `check` lists, with the major version each needs: written
/// out here, apart from the connector's table, so a wrong threshold there
/// fails here.
const FEATURES: [(&str, u32); 7] = [
    ("logical decoding messages", 14),
    ("binary column values", 14),
    ("streaming of large transactions", 14),
    ("origin filter", 16),
    ("decoding on a standby", 16),
    ("failover slots", 17),
    ("generated columns", 18),
];

fn check_output(s: &Scenario, extra: &[&str]) -> (bool, String) {
    let mut args = s.args(&Kafka::shared().bootstrap_servers(), extra);
    args.insert(0, "check".to_owned());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgcdc-kafka"))
        .args(&args)
        .env_remove("PGCDC_LOG_FORMAT")
        .output()
        .expect("check runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), stdout)
}

/// `check` names the server's version and, per feature, what it needs,
/// whether this server has it and whether the run uses it; on whichever
/// version the suite runs (`PGCDC_TEST_PG_VERSION`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_the_server_version_and_what_each_feature_needs() {
    let s = Scenario::new(Postgres::shared(), "features");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let version = s.query_one("SHOW server_version").expect("a version");
    let number: u32 = s
        .query_one("SHOW server_version_num")
        .expect("a version number")
        .parse()
        .expect("a number");
    let major = number / 10_000;
    let (passed, stdout) = check_output(&s, &[]);
    assert!(passed, "{stdout}");
    let shown = format!("{}.{}", major, number % 10_000);
    assert!(
        stdout.lines().any(|l| l.starts_with(&format!(
            "PASS server version: PostgreSQL {shown} (server_version_num {number})"
        )) && version.starts_with(&shown)),
        "{stdout}"
    );
    for (feature, needs) in FEATURES {
        let line = stdout
            .lines()
            .find(|l| {
                l.get(5..)
                    .is_some_and(|rest| rest.starts_with(&format!("{feature}: ")))
            })
            .unwrap_or_else(|| panic!("a line for {feature}: {stdout}"));
        let has = if major >= needs { "yes" } else { "no" };
        assert!(
            line.contains(&format!(
                "needs PostgreSQL {needs}+; this server: {has}; this run: "
            )),
            "{line}"
        );
        let used = matches!(
            feature,
            "logical decoding messages"
                | "binary column values"
                | "streaming of large transactions"
        );
        assert_eq!(line.starts_with("PASS"), used, "{line}");
        assert_eq!(line.starts_with("INFO"), !used, "{line}");
    }

    // Asking for generated columns: a FAIL line below 18, a PASS on 18.
    let (passed, stdout) = check_output(&s, &["--publish-generated-columns", "true"]);
    let line = stdout
        .lines()
        .find(|l| l.contains("generated columns: needs PostgreSQL 18+"))
        .unwrap_or_else(|| panic!("a generated columns line: {stdout}"));
    if major >= 18 {
        assert!(line.starts_with("PASS"), "{line}");
        assert!(passed, "{stdout}");
    } else {
        assert!(
            line.starts_with("FAIL") && line.contains("run without --publish-generated-columns"),
            "{line}"
        );
        assert!(!passed, "{stdout}");
    }
}

/// Stored generated columns are left out of snapshot and stream alike on
/// every version (pgoutput never sends them before 18, nor on 18 unless
/// the publication asks); `--publish-generated-columns` puts them in both
/// on 18 and is refused before anything is created below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_columns_are_the_same_in_snapshot_and_stream_on_every_version() {
    let kafka = Kafka::shared();
    let major = |s: &Scenario| -> u32 {
        s.query_one("SHOW server_version_num")
            .expect("a version")
            .parse::<u32>()
            .expect("a number")
            / 10_000
    };
    let table = "CREATE TABLE g (id int PRIMARY KEY, price int NOT NULL, \
                 doubled int GENERATED ALWAYS AS (price * 2) STORED)";
    let rows = |s: &Scenario, extra: &[&str]| {
        s.sql(table);
        s.sql("INSERT INTO g (id, price) VALUES (1, 10)");
        let running = s.start(&kafka.bootstrap_servers(), extra);
        (running, s.topic("g"))
    };

    let plain = Scenario::new(Postgres::shared(), "gencols");
    let (running, topic) = rows(&plain, &[]);
    plain.await_slot().await;
    plain.sql("INSERT INTO g (id, price) VALUES (2, 20)");
    let records = consume(&kafka.bootstrap_servers(), &topic, 2, TIMEOUT).await;
    let after: Vec<_> = records
        .iter()
        .map(|r| r.value.as_ref().expect("a value")["payload"]["after"].clone())
        .collect();
    assert_eq!(
        after,
        vec![json!({"id": 1, "price": 10}), json!({"id": 2, "price": 20})],
        "snapshot and stream leave the generated column out"
    );
    running.stop().await;

    let asking = Scenario::new(Postgres::shared(), "gencols_on");
    let (running, topic) = rows(&asking, &["--publish-generated-columns", "true"]);
    if major(&asking) < 18 {
        let error = running
            .wait_for_exit(TIMEOUT)
            .await
            .expect_err("refused below 18");
        let message = pgcdc_kafka::error_chain(&error);
        assert!(!error.is_retryable(), "{message}");
        assert!(
            message
                .contains("--publish-generated-columns needs generated columns (PostgreSQL 18+)"),
            "{message}"
        );
        assert_eq!(asking.confirmed_flush_lsn(), None, "no slot was created");
        return;
    }
    asking.await_slot().await;
    asking.sql("INSERT INTO g (id, price) VALUES (2, 20)");
    asking.sql("UPDATE g SET price = 30 WHERE id = 2");
    let records = consume(&kafka.bootstrap_servers(), &topic, 3, TIMEOUT).await;
    let after: Vec<_> = records
        .iter()
        .map(|r| r.value.as_ref().expect("a value")["payload"]["after"].clone())
        .collect();
    assert_eq!(
        after,
        vec![
            json!({"id": 1, "price": 10, "doubled": 20}),
            json!({"id": 2, "price": 20, "doubled": 40}),
            json!({"id": 2, "price": 30, "doubled": 60}),
        ],
        "snapshot and stream carry the generated column"
    );
    assert_eq!(
        asking.query_one(&format!(
            "SELECT pubgencols::text FROM pg_publication WHERE pubname = '{}'",
            asking.publication
        )),
        Some("s".to_owned()),
        "the publication was created with publish_generated_columns = stored"
    );
    running.stop().await;

    // A publication made by hand that publishes them, used as it is: the
    // snapshot follows it, whatever the flag says.
    let by_hand = Scenario::new(Postgres::shared(), "gencols_hand");
    by_hand.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES WITH (publish_generated_columns = stored)",
        by_hand.publication
    ));
    let (running, topic) = rows(&by_hand, &["--publication-autocreate-mode", "disabled"]);
    by_hand.await_slot().await;
    by_hand.sql("INSERT INTO g (id, price) VALUES (2, 20)");
    let records = consume(&kafka.bootstrap_servers(), &topic, 2, TIMEOUT).await;
    let after: Vec<_> = records
        .iter()
        .map(|r| r.value.as_ref().expect("a value")["payload"]["after"].clone())
        .collect();
    assert_eq!(
        after,
        vec![
            json!({"id": 1, "price": 10, "doubled": 20}),
            json!({"id": 2, "price": 20, "doubled": 40}),
        ],
        "snapshot and stream both follow the publication"
    );
    running.stop().await;

    // Asked for, but the existing publication does not publish them and
    // all_tables mode leaves it alone: stop, saying what to run.
    let left_alone = Scenario::new(Postgres::shared(), "gencols_alone");
    left_alone.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        left_alone.publication
    ));
    let (running, _) = rows(&left_alone, &["--publish-generated-columns", "true"]);
    let message = pgcdc_kafka::error_chain(&running.wait_for_error().await);
    assert!(
        message.contains(&format!(
            "ALTER PUBLICATION \"{}\" SET (publish_generated_columns = stored);",
            left_alone.publication
        )),
        "{message}"
    );
    assert_eq!(
        left_alone.confirmed_flush_lsn(),
        None,
        "no slot was created"
    );
}

/// Changes applied under a replication origin (as a subscription applies
/// them) are streamed by default, as Debezium streams them; with
/// `--origin-filter none` (16+) they are left out, and below 16 the flag is
/// refused before a slot is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_filter_leaves_out_changes_applied_with_an_origin() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    // One transaction tagged with a replication origin, then one without.
    let write_both = |s: &Scenario| {
        s.sql(&format!(
            "SELECT pg_replication_origin_create('{0}'); \
             SELECT pg_replication_origin_session_setup('{0}'); \
             INSERT INTO t VALUES (1)",
            s.slot
        ));
        s.sql("INSERT INTO t VALUES (2)");
    };
    let ids = |records: &[common::Record]| -> Vec<i64> {
        records
            .iter()
            .map(|r| {
                r.value.as_ref().expect("a value")["payload"]["after"]["id"]
                    .as_i64()
                    .expect("an id")
            })
            .collect()
    };

    let all = Scenario::new(Postgres::shared(), "origin_any");
    all.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let running = all.started(&bootstrap, &[]).await;
    write_both(&all);
    let records = consume(&bootstrap, &all.topic("t"), 2, TIMEOUT).await;
    assert_eq!(ids(&records), vec![1, 2], "every origin by default");
    running.stop().await;

    let filtered = Scenario::new(Postgres::shared(), "origin_none");
    filtered.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let major: u32 = filtered
        .query_one("SHOW server_version_num")
        .expect("a version")
        .parse::<u32>()
        .expect("a number")
        / 10_000;
    let running = filtered.start(&bootstrap, &["--origin-filter", "none"]);
    if major < 16 {
        let message = pgcdc_kafka::error_chain(&running.wait_for_error().await);
        assert!(
            message.contains("--origin-filter needs origin filter (PostgreSQL 16+)"),
            "{message}"
        );
        assert_eq!(filtered.confirmed_flush_lsn(), None, "no slot was created");
        return;
    }
    filtered.await_slot().await;
    write_both(&filtered);
    let records = consume(&bootstrap, &filtered.topic("t"), 1, TIMEOUT).await;
    assert_eq!(
        ids(&records),
        vec![2],
        "the change with an origin is left out"
    );
    filtered.await_confirmed_past_now("both transactions").await;
    assert_eq!(
        common::record_count(&bootstrap, &filtered.topic("t")).await,
        1,
        "nothing else arrived"
    );
    running.stop().await;
}
