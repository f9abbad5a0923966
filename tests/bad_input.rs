//! Input a connector meets in the wild, end to end against real Postgres,
//! Kafka and the schema registry: tables without a key, REPLICA IDENTITY
//! NOTHING, types pgcdc-kafka has no Debezium mapping for (composite, user
//! range, geometric built-ins, a user-defined base type), a row larger than
//! Kafka accepts, column names Avro cannot express, table and column names
//! with unicode and quotes, and a published table dropped with changes still
//! in the slot. Each is handled as docs/BAD_INPUT.md says: a value
//! representation, a clear error that stops before anything is confirmed, or
//! a warning. Never a panic, never a silently wrong event.

mod common;

use std::time::Duration;

use common::avro_reader::AvroReader;
use common::{consume, consume_raw, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_kafka::error_chain;
use pgcdc_kafka::lsn::Lsn;
use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use serde_json::{json, Value as Json};

async fn registry() -> &'static SchemaRegistry {
    tokio::task::spawn_blocking(SchemaRegistry::shared)
        .await
        .expect("registry launch thread")
}

async fn slot_created(s: &Scenario) {
    s.await_slot().await;
}

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

fn lsn_of(record: &Record) -> Lsn {
    Lsn::new(
        payload(record)["source"]["lsn"]
            .as_u64()
            .expect("source.lsn"),
    )
}

/// The SQL error Postgres gives `sql`, which must fail.
fn sql_error(s: &Scenario, sql: &str) -> String {
    match s.pg.execute(&s.db, sql) {
        Ok(()) => panic!("{sql} succeeded"),
        Err(e) => e.report().to_string(),
    }
}

/// The field `name` of the value schema's `after` struct.
fn after_field_schema<'a>(record: &'a Record, name: &str) -> &'a Json {
    let schema = &record.value.as_ref().expect("value")["schema"];
    let after = schema["fields"]
        .as_array()
        .expect("envelope fields")
        .iter()
        .find(|f| f["field"] == "after")
        .expect("after field");
    after["fields"]
        .as_array()
        .expect("after fields")
        .iter()
        .find(|f| f["field"] == name)
        .unwrap_or_else(|| panic!("no field {name} in {after}"))
}

/// A table without a primary key: its records have a null Kafka key. Under
/// REPLICA IDENTITY DEFAULT (no identity at all), Postgres itself refuses
/// UPDATE and DELETE on a published table, so nothing partial is ever
/// decoded; under FULL they arrive with the whole row as before-image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_without_a_key_has_null_keys() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "nokey");
    s.sql("CREATE TABLE nokey (a int, b text)");
    let topic = s.topic("nokey");
    let running = s.start(&bootstrap, &[]);
    slot_created(&s).await;

    s.sql("INSERT INTO nokey VALUES (1, 'x')");
    let refused = sql_error(&s, "UPDATE nokey SET b = 'y'");
    assert!(
        refused.contains("does not have a replica identity and publishes updates"),
        "{refused}"
    );
    s.sql("ALTER TABLE nokey REPLICA IDENTITY FULL");
    s.sql("UPDATE nokey SET b = 'y'");
    s.sql("DELETE FROM nokey");
    let records = consume(&bootstrap, &topic, 3, TIMEOUT).await;
    let ops: Vec<&str> = records
        .iter()
        .map(|r| payload(r)["op"].as_str().unwrap_or("tombstone"))
        .collect();
    assert_eq!(ops, ["c", "u", "d"], "{records:#?}");
    assert!(
        records.iter().all(|r| r.key.is_none()),
        "no key: a null Kafka key"
    );
    assert_eq!(payload(&records[0])["after"], json!({"a": 1, "b": "x"}));
    assert_eq!(payload(&records[1])["before"], json!({"a": 1, "b": "x"}));
    assert_eq!(payload(&records[1])["after"], json!({"a": 1, "b": "y"}));
    assert_eq!(payload(&records[2])["before"], json!({"a": 1, "b": "y"}));
    // The delete's tombstone has the delete's key: null, as in Debezium.
    s.sql("INSERT INTO nokey VALUES (2, 'after the delete')");
    let records = consume(&bootstrap, &topic, 5, TIMEOUT).await;
    assert_eq!(records.len(), 5);
    assert!(records[3].key.is_none() && records[3].value.is_none());
    assert_eq!(payload(&records[4])["after"]["a"], 2);
    running.stop().await;
}

/// REPLICA IDENTITY NOTHING on a keyed table: inserts arrive keyed by the
/// primary key; Postgres refuses UPDATE and DELETE on the published table,
/// so no event without a before-image or key is ever produced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_identity_nothing_refuses_updates_and_deletes_at_the_source() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "rinothing");
    s.sql("CREATE TABLE quiet (id int PRIMARY KEY, v text)");
    s.sql("ALTER TABLE quiet REPLICA IDENTITY NOTHING");
    let topic = s.topic("quiet");
    let running = s.start(&bootstrap, &[]);
    slot_created(&s).await;

    s.sql("INSERT INTO quiet VALUES (1, 'one')");
    for sql in ["UPDATE quiet SET v = 'uno'", "DELETE FROM quiet"] {
        let refused = sql_error(&s, sql);
        assert!(
            refused.contains("does not have a replica identity"),
            "{sql}: {refused}"
        );
    }
    s.sql("INSERT INTO quiet VALUES (2, 'two')");
    let records = consume(&bootstrap, &topic, 2, TIMEOUT).await;
    let seen: Vec<(Json, Json)> = records
        .iter()
        .map(|r| {
            (
                r.key.as_ref().expect("keyed")["payload"].clone(),
                payload(r)["after"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!({"id": 1}), json!({"id": 1, "v": "one"})),
            (json!({"id": 2}), json!({"id": 2, "v": "two"}))
        ]
    );
    running.stop().await;
}

/// Columns of the exotic-types table and a literal for each.
const EXOTIC: [(&str, &str, &str); 11] = [
    ("c_pair", "pair", "ROW(7, 'seven \"quoted\"')"),
    (
        "c_pairs",
        "pair[]",
        "ARRAY[ROW(1, 'a')::pair, ROW(2, NULL)::pair]",
    ),
    ("c_frange", "floatrange", "floatrange(1.5, 2.25, '[)')"),
    ("c_point", "point", "point(1.5, -2)"),
    ("c_box", "box", "box(point(0, 0), point(2, 3))"),
    ("c_polygon", "polygon", "polygon '((0,0),(1,1),(1,0))'"),
    ("c_circle", "circle", "circle '<(1,2),3>'"),
    ("c_line", "line", "line '{1,-1,0}'"),
    ("c_lseg", "lseg", "lseg '[(0,0),(1,1)]'"),
    ("c_path", "path", "path '[(0,0),(1,1),(2,0)]'"),
    ("c_fancy", "fancy", "'a fancy value'::fancy"),
];

/// A composite type, a user-defined range, the geometric built-ins (no
/// PostGIS here) and a user-defined base type: none has a Debezium mapping,
/// so each is an optional string carrying Postgres's own text for the
/// value, in JSON and in Avro alike (Debezium drops such columns unless
/// `include.unknown.datatypes`); an array of them is an array of such
/// strings, one per element.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exotic_types_arrive_as_their_postgres_text() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let registry = registry().await;
    let s = Scenario::new(Postgres::shared(), "exotic");
    s.sql("CREATE TYPE pair AS (x int, y text)");
    s.sql("CREATE TYPE floatrange AS RANGE (subtype = float8)");
    // A base type of its own, borrowing text's I/O functions.
    s.sql("CREATE TYPE fancy");
    s.sql("CREATE FUNCTION fancy_in(cstring) RETURNS fancy AS 'textin' LANGUAGE internal IMMUTABLE STRICT");
    s.sql("CREATE FUNCTION fancy_out(fancy) RETURNS cstring AS 'textout' LANGUAGE internal IMMUTABLE STRICT");
    s.sql("CREATE TYPE fancy (INPUT = fancy_in, OUTPUT = fancy_out, LIKE = text)");
    let columns: Vec<String> = EXOTIC
        .iter()
        .map(|(name, ty, _)| format!("{name} {ty}"))
        .collect();
    s.sql(&format!(
        "CREATE TABLE exotic (id int PRIMARY KEY, {})",
        columns.join(", ")
    ));
    let json_run = s.start(&bootstrap, &[]);
    slot_created(&s).await;
    let literals: Vec<&str> = EXOTIC.iter().map(|(_, _, literal)| *literal).collect();
    s.sql(&format!(
        "INSERT INTO exotic VALUES (1, {})",
        literals.join(", ")
    ));
    let texts =
        s.pg.query(
            &s.db,
            &format!(
                "SELECT {} FROM exotic",
                EXOTIC
                    .iter()
                    .map(|(name, _, _)| format!("{name}::text"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .expect("read back")
        .remove(0);
    let records = consume(&bootstrap, &s.topic("exotic"), 1, TIMEOUT).await;
    assert_eq!(records.len(), 1);
    let after = &payload(&records[0])["after"];
    let expected: Vec<Json> = EXOTIC
        .iter()
        .zip(&texts)
        .map(|((name, _, _), text)| match *name {
            "c_pairs" => json!(["(1,a)", "(2,)"]),
            _ => json!(text.as_deref().expect("not null")),
        })
        .collect();
    for ((name, ty, _), value) in EXOTIC.iter().zip(&expected) {
        assert_eq!(&after[name], value, "{name} {ty}");
        let schema = after_field_schema(&records[0], name);
        let strings = match *name {
            "c_pairs" => &schema["items"],
            _ => schema,
        };
        assert_eq!(strings["type"], "string", "{name} {ty}: {schema}");
        assert_eq!(strings["optional"], true, "{name} {ty}: {schema}");
    }
    json_run.stop().await;

    // The same row in Avro, through the registry, from a second slot.
    let avro = Scenario {
        pg: s.pg,
        db: s.db.clone(),
        slot: pgcdc_testcontainers::unique_name("slot"),
        publication: s.publication.clone(),
        prefix: pgcdc_testcontainers::unique_name("exotic_avro"),
    };
    let avro_run = avro.start(
        &bootstrap,
        &["--format", "avro", "--schema-registry-url", &registry.url()],
    );
    let records = consume_raw(&bootstrap, &avro.topic("exotic"), 1, TIMEOUT).await;
    assert_eq!(records.len(), 1, "the snapshot of the row in Avro");
    let reader = AvroReader::new(registry);
    let value = reader.json(records[0].value.as_deref().expect("value"));
    for ((name, ty, _), expected) in EXOTIC.iter().zip(&expected) {
        assert_eq!(&value["after"][name], expected, "{name} {ty} in Avro");
    }
    avro_run.stop().await;
}

/// A 50 MB row is far beyond what Kafka accepts by default (1 MB): the
/// connector stops with an error that names the topic and the setting to
/// raise, and the slot still holds the row's transaction (peeked after the
/// stop), so it is not lost. (The slot may be confirmed into the middle of
/// the transaction's WAL, from a keepalive while it was being written:
/// Postgres re-sends by commit position, so that loses nothing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_row_stops_with_a_clear_error_and_is_not_confirmed() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "hugerow");
    s.sql("CREATE TABLE blobs (id int PRIMARY KEY, body text NOT NULL)");
    let topic = s.topic("blobs");
    let running = s.start(&bootstrap, &["--status-interval", "200ms"]);
    slot_created(&s).await;
    s.sql("INSERT INTO blobs VALUES (1, 'small')");
    let small = consume(&bootstrap, &topic, 1, TIMEOUT).await;
    assert_eq!(small.len(), 1);

    // Hex digests do not compress: 50 MB in the WAL and the TOAST table.
    let xid =
        s.pg.query(
            &s.db,
            "INSERT INTO blobs SELECT 2, string_agg(md5(g::text), '') \
             FROM generate_series(1, 1600000) g RETURNING xmin::text",
        )
        .expect("the huge insert")
        .remove(0)
        .remove(0)
        .expect("xmin");
    let error = running
        .wait_for_exit(Duration::from_secs(120))
        .await
        .expect_err("a row Kafka cannot take stops the connector");
    let message = error_chain(&error);
    assert!(!error.is_retryable(), "a definite failure: {message}");
    for part in [topic.as_str(), "message.max.bytes"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    println!("[huge row] stopped with: {message}");
    assert_slot_holds(&s, &xid).await;
    let all = consume(&bootstrap, &topic, 2, Duration::from_secs(2)).await;
    assert_eq!(all.len(), 1, "nothing of the huge row was sent");
}

/// After the connector stopped: the slot still holds transaction `xid`
/// (peeked, which consumes nothing), so the next run receives it again.
/// The confirmed LSN is not the measure: a keepalive may confirm into the
/// middle of a transaction's WAL, or past other databases' writes, and
/// Postgres re-sends by commit position.
async fn assert_slot_holds(s: &Scenario, xid: &str) {
    wait_until(TIMEOUT, "the walsender to let go of the slot", || async {
        s.query_one(&format!(
            "SELECT active::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref()
            == Some("false")
    })
    .await;
    let pending = s.query_one(&format!(
        "SELECT count(*)::text FROM pg_logical_slot_peek_binary_changes('{}', NULL, NULL, \
         'proto_version', '1', 'publication_names', '{}') WHERE xid = '{xid}'::xid",
        s.slot, s.publication
    ));
    assert_ne!(
        pending.as_deref(),
        Some("0"),
        "the slot still holds transaction {xid}"
    );
}

/// Avro names are `[A-Za-z_][A-Za-z0-9_]*`. Column names outside that
/// (`1col`, `my-col`, `naïve`) are not adjusted (pgcdc-kafka accepts only
/// Debezium's `field.name.adjustment.mode=none`): in Avro mode the connector
/// stops before sending the table's first change, naming the column and the
/// way out; nothing is confirmed. JSON carries the names as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_names_avro_cannot_express_stop_avro_and_pass_in_json() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let registry = registry().await;
    let s = Scenario::new(Postgres::shared(), "avronames");
    s.sql(r#"CREATE TABLE odd (id int PRIMARY KEY, "1col" int, "my-col" text, "naïve" text)"#);
    let running = s.start(
        &bootstrap,
        &["--format", "avro", "--schema-registry-url", &registry.url()],
    );
    slot_created(&s).await;
    let xid =
        s.pg.query(
            &s.db,
            "INSERT INTO odd VALUES (1, 1, 'dash', 'accent') RETURNING xmin::text",
        )
        .expect("the insert")
        .remove(0)
        .remove(0)
        .expect("xmin");
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("an Avro-invalid column name stops the connector");
    let message = error_chain(&error);
    assert!(!error.is_retryable(), "a definite failure: {message}");
    for part in [
        "\"1col\"",
        "not a valid Avro name",
        "--format json",
        &s.topic("odd"),
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert_slot_holds(&s, &xid).await;

    let running = s.start(&bootstrap, &[]);
    let records = consume(&bootstrap, &s.topic("odd"), 1, TIMEOUT).await;
    assert_eq!(
        payload(&records[0])["after"],
        json!({"id": 1, "1col": 1, "my-col": "dash", "naïve": "accent"})
    );
    running.stop().await;
}

/// Table and column names with unicode, spaces and quotes: the topic has
/// each character Kafka does not allow replaced by `_` (with a warning, as
/// Debezium's topic naming does); the records carry the real names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unicode_and_quoted_names_get_a_sanitized_topic_and_keep_their_names() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "unicode");
    let table = "Ünïcödé \"quoted\" table";
    let column = "naïve \"col\" 😀";
    s.sql(
        r#"CREATE TABLE "Ünïcödé ""quoted"" table" (id int PRIMARY KEY, "naïve ""col"" 😀" text)"#,
    );
    let running = s.start(&bootstrap, &[]);
    slot_created(&s).await;
    s.sql(r#"INSERT INTO "Ünïcödé ""quoted"" table" VALUES (1, 'ünï "v"')"#);
    // Ü, ï, ö, é, the spaces and the quotes each become one `_`.
    let topic = format!("{}.public._n_c_d___quoted__table", s.prefix);
    let records = consume(&bootstrap, &topic, 1, TIMEOUT).await;
    assert_eq!(records.len(), 1, "the record is in {topic}");
    let p = payload(&records[0]);
    assert_eq!(p["source"]["table"], table);
    assert_eq!(p["after"], json!({"id": 1, column: "ünï \"v\""}));
    running.stop().await;
}

/// A table in the publication is dropped while the connector is down, with
/// changes of it still in the slot: they are decoded from the WAL's own
/// catalog, and the connector, which finds the table gone from the current
/// catalog, keys them by the replica identity the Relation message carries
/// (the primary key under DEFAULT), with a warning. The other table goes on.
/// A later start whose `--table` names the dropped table, with no
/// publication yet, stops with Postgres's error and the statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_published_table_keeps_its_changes_and_key() {
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "dropped");
    s.sql("CREATE TABLE keep (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE gone (id int PRIMARY KEY, v text NOT NULL)");
    let tables = ["--table", "public.keep", "--table", "public.gone"];
    let running = s.start(&bootstrap, &tables);
    slot_created(&s).await;
    s.sql("INSERT INTO gone VALUES (1, 'one'); INSERT INTO keep VALUES (1, 'one')");
    assert_eq!(
        consume(&bootstrap, &s.topic("gone"), 1, TIMEOUT)
            .await
            .len(),
        1
    );
    running.stop().await;

    s.sql("INSERT INTO gone VALUES (2, 'two'); INSERT INTO keep VALUES (2, 'two')");
    s.sql("DROP TABLE gone");
    let running = s.start(&bootstrap, &tables);
    let gone = consume(&bootstrap, &s.topic("gone"), 2, TIMEOUT).await;
    assert_eq!(gone.len(), 2, "the change made before the drop arrives");
    assert_eq!(
        gone[1].key.as_ref().expect("keyed")["payload"],
        json!({"id": 2})
    );
    assert_eq!(payload(&gone[1])["after"], json!({"id": 2, "v": "two"}));
    s.sql("INSERT INTO keep VALUES (3, 'three')");
    let keep = consume(&bootstrap, &s.topic("keep"), 3, TIMEOUT).await;
    assert_eq!(keep.len(), 3, "the other table goes on");
    let last = lsn_of(&keep[2]);
    wait_until(TIMEOUT, "slot confirmed past the last change", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c > last)
    })
    .await;
    running.stop().await;

    let fresh = Scenario {
        pg: s.pg,
        db: s.db.clone(),
        slot: pgcdc_testcontainers::unique_name("slot"),
        publication: pgcdc_testcontainers::unique_name("pub"),
        prefix: s.prefix.clone(),
    };
    let error = fresh
        .start(&bootstrap, &tables)
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("a --table that does not exist stops the connector");
    let message = error_chain(&error);
    for part in ["CREATE PUBLICATION", "gone", "does not exist"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}
