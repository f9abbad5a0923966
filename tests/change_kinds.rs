//! Every change kind, end to end against real Postgres and Kafka, read back
//! from the topics: updates, deletes and tombstones, key changes, replica
//! identity before-images, unchanged TOAST values, truncates, logical
//! decoding messages, multi-table transactions, and slot progress on an
//! idle publication.

mod common;

use std::time::Duration;

use common::{consume, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

fn key_payload(record: &Record) -> Option<&Json> {
    record.key.as_ref().map(|k| &k["payload"])
}

fn header<'a>(record: &'a Record, name: &str) -> Option<&'a [u8]> {
    record
        .headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_slice())
}

fn field_schema<'a>(envelope_schema: &'a Json, part: &str, column: &str) -> &'a Json {
    let part = envelope_schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == part)
        .expect("envelope field");
    part["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == column)
        .expect("row field")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_deletes_tombstones_and_key_changes() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "changes");
    s.sql("CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance int NOT NULL)");
    s.sql("CREATE TABLE audit (id int PRIMARY KEY, note text NOT NULL)");
    s.sql("ALTER TABLE audit REPLICA IDENTITY FULL");
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    s.await_slot().await;

    s.sql("INSERT INTO accounts VALUES (1, 'ann', 10), (2, 'bob', 20)");
    s.sql("UPDATE accounts SET balance = 11 WHERE id = 1");
    s.sql("DELETE FROM accounts WHERE id = 2");
    s.sql("UPDATE accounts SET id = 100 WHERE id = 1");
    // One transaction over two tables, under REPLICA IDENTITY FULL for audit.
    s.sql(
        "BEGIN; INSERT INTO audit VALUES (1, 'first'); \
         UPDATE audit SET note = 'second' WHERE id = 1; \
         INSERT INTO accounts VALUES (3, 'cy', 30); \
         DELETE FROM audit WHERE id = 1; COMMIT",
    );

    // 2 creates, 1 update, delete + tombstone, key change as delete +
    // tombstone + create, then the create of id 3.
    let accounts = consume(&kafka.bootstrap_servers(), &s.topic("accounts"), 9, TIMEOUT).await;
    assert_eq!(accounts.len(), 9, "{accounts:#?}");
    let ops: Vec<Option<String>> = accounts
        .iter()
        .map(|r| {
            r.value
                .as_ref()
                .map(|v| v["payload"]["op"].as_str().unwrap().to_owned())
        })
        .collect();
    let expected_ops = ["c", "c", "u", "d", "tombstone", "d", "tombstone", "c", "c"];
    assert_eq!(
        ops.iter()
            .map(|o| o.as_deref().unwrap_or("tombstone"))
            .collect::<Vec<_>>(),
        expected_ops
    );

    let update = payload(&accounts[2]);
    assert_eq!(
        update["after"],
        json!({"id": 1, "owner": "ann", "balance": 11})
    );
    assert_eq!(
        update["before"],
        json!(null),
        "REPLICA IDENTITY DEFAULT sends no before-image for a non-key update"
    );

    let delete = payload(&accounts[3]);
    assert_eq!(delete["after"], json!(null));
    assert_eq!(
        delete["before"],
        json!({"id": 2, "owner": null, "balance": null}),
        "under REPLICA IDENTITY DEFAULT only the key is known; the rest stays null, not zero"
    );
    let schema = &accounts[3].value.as_ref().unwrap()["schema"];
    assert_eq!(
        field_schema(schema, "before", "owner")["optional"],
        true,
        "unknown before-image columns are optional"
    );
    assert_eq!(
        field_schema(schema, "before", "id")["optional"],
        false,
        "key columns stay required"
    );
    assert_eq!(
        key_payload(&accounts[4]),
        Some(&json!({"id": 2})),
        "tombstone carries the deleted key"
    );
    assert!(accounts[4].value.is_none());

    // The key change: delete of id 1 (header: new key), its tombstone, create of id 100 (header: old key).
    assert_eq!(key_payload(&accounts[5]), Some(&json!({"id": 1})));
    assert_eq!(payload(&accounts[5])["before"]["id"], 1);
    let new_key: Json =
        serde_json::from_slice(header(&accounts[5], "__debezium.newkey").expect("newkey header"))
            .unwrap();
    assert_eq!(new_key["payload"], json!({"id": 100}));
    assert_eq!(key_payload(&accounts[6]), Some(&json!({"id": 1})));
    assert!(accounts[6].value.is_none());
    // Debezium's order: the emitter's key-change header, then the context
    // headers; the tombstone repeats its delete's headers.
    let context = [
        "__debezium.context.connectorLogicalName",
        "__debezium.context.taskId",
        "__debezium.context.connectorName",
        "__debezium.context.runId",
    ];
    for (i, first) in [
        (5, "__debezium.newkey"),
        (6, "__debezium.newkey"),
        (7, "__debezium.oldkey"),
    ] {
        let mut names = vec![first];
        names.extend(context);
        // Then our own position header (--skip-delivered), last.
        names.push("pgcdc.position");
        assert_eq!(accounts[i].header_names(), names, "record {i}");
    }
    // Our position header names each record's own place (the tombstone is
    // the next record of its transaction); every other header is Debezium's.
    let debezium_headers = |record: &Record| {
        let mut headers = record.headers.clone();
        assert_eq!(
            headers.pop().map(|(name, _)| name).as_deref(),
            Some("pgcdc.position")
        );
        headers
    };
    assert_eq!(
        debezium_headers(&accounts[6]),
        debezium_headers(&accounts[5]),
        "tombstone = delete's headers"
    );
    let mut positioned = context.to_vec();
    positioned.push("pgcdc.position");
    assert_eq!(
        accounts[0].header_names(),
        positioned,
        "every change record carries the context headers"
    );
    assert_eq!(
        accounts[4].header_names(),
        positioned,
        "and every tombstone"
    );
    let value = |record: &Record, name| record.header_payload(name).expect(name);
    assert_eq!(value(&accounts[0], context[0]), json!(s.prefix));
    assert_eq!(value(&accounts[0], context[1]), json!("0"));
    assert_eq!(value(&accounts[0], context[2]), json!("postgresql"));
    let run_id = value(&accounts[0], context[3]);
    let run_id = run_id.as_str().expect("a string");
    assert_eq!(
        (run_id.len(), &run_id[14..15]),
        (36, "7"),
        "a UUID v7: {run_id}"
    );
    assert!(
        accounts
            .iter()
            .all(|r| r.header_payload(context[3]) == Some(json!(run_id))),
        "one run id per run"
    );
    assert_eq!(key_payload(&accounts[7]), Some(&json!({"id": 100})));
    assert_eq!(payload(&accounts[7])["before"], json!(null));
    assert_eq!(
        payload(&accounts[7])["after"],
        json!({"id": 100, "owner": "ann", "balance": 11})
    );
    let old_key: Json =
        serde_json::from_slice(header(&accounts[7], "__debezium.oldkey").expect("oldkey header"))
            .unwrap();
    assert_eq!(old_key["payload"], json!({"id": 1}));

    let audit = consume(&kafka.bootstrap_servers(), &s.topic("audit"), 4, TIMEOUT).await;
    assert_eq!(audit.len(), 4, "create, update, delete, tombstone");
    assert_eq!(
        payload(&audit[1])["before"],
        json!({"id": 1, "note": "first"}),
        "FULL sends the whole old row"
    );
    assert_eq!(
        payload(&audit[1])["after"],
        json!({"id": 1, "note": "second"})
    );
    assert_eq!(
        payload(&audit[2])["before"],
        json!({"id": 1, "note": "second"})
    );
    let schema = &audit[2].value.as_ref().unwrap()["schema"];
    assert_eq!(
        field_schema(schema, "before", "note")["optional"],
        false,
        "under FULL NOT NULL columns stay required"
    );
    // The multi-table transaction shares one txId across both topics.
    let tx = payload(&audit[0])["source"]["txId"].clone();
    assert_eq!(payload(&accounts[8])["source"]["txId"], tx);
    assert!(
        payload(&audit[1])["source"]["lsn"].as_u64()
            < payload(&accounts[8])["source"]["lsn"].as_u64(),
        "WAL order inside the transaction"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_toast_truncate_and_messages() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "toast");
    s.sql("CREATE TABLE docs (id int PRIMARY KEY, body text, tags int[], counter int)");
    s.sql("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL");
    s.sql("ALTER TABLE docs ALTER COLUMN tags SET STORAGE EXTERNAL");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &["--skipped-operations", "none"],
    );
    s.await_slot().await;

    // Values large enough to be stored out of line, then an update that does not touch them.
    s.sql(
        "INSERT INTO docs SELECT 1, repeat('x', 10000), array(SELECT generate_series(1, 3000)), 0",
    );
    s.sql("UPDATE docs SET counter = 1 WHERE id = 1");
    s.sql("SELECT pg_logical_emit_message(true, 'audit', 'in a transaction')");
    s.sql("SELECT pg_logical_emit_message(false, 'heartbeat', 'outside')");
    s.sql("TRUNCATE docs");

    let docs = consume(&kafka.bootstrap_servers(), &s.topic("docs"), 3, TIMEOUT).await;
    assert_eq!(docs.len(), 3, "insert, update, truncate");
    assert_eq!(
        payload(&docs[0])["after"]["body"].as_str().map(str::len),
        Some(10000)
    );
    let update = payload(&docs[1]);
    assert_eq!(update["op"], "u");
    assert_eq!(update["after"]["counter"], 1);
    assert_eq!(
        update["after"]["body"], "__debezium_unavailable_value",
        "Debezium's placeholder for unchanged TOAST text"
    );
    assert_eq!(
        update["after"]["tags"],
        json!(null),
        "an int[] cannot carry the placeholder: null, and listed in the header"
    );
    assert_eq!(
        docs[1].header_payload("pgcdc.unchanged.columns"),
        Some(json!(["body", "tags"]))
    );
    assert!(header(&docs[0], "pgcdc.unchanged.columns").is_none());

    let truncate = &docs[2];
    assert_eq!(truncate.key, None, "truncate has a null key");
    assert_eq!(payload(truncate)["op"], "t");
    assert_eq!(payload(truncate)["before"], json!(null));
    assert_eq!(payload(truncate)["after"], json!(null));
    assert_eq!(payload(truncate)["source"]["table"], "docs");

    let messages = consume(
        &kafka.bootstrap_servers(),
        &format!("{}.message", s.prefix),
        2,
        TIMEOUT,
    )
    .await;
    assert_eq!(messages.len(), 2);
    assert!(
        messages
            .iter()
            .all(|m| m.header_names() == ["pgcdc.position"]),
        "logical decoding messages carry no Debezium headers, only their position"
    );
    let prefixes: Vec<&Json> = messages
        .iter()
        .map(|m| &key_payload(m).unwrap()["prefix"])
        .collect();
    assert_eq!(prefixes, [&json!("audit"), &json!("heartbeat")]);
    let value = messages[0].value.as_ref().unwrap();
    assert_eq!(
        value["schema"]["name"],
        "io.debezium.connector.postgresql.MessageValue"
    );
    assert_eq!(value["payload"]["op"], "m");
    assert_eq!(
        value["payload"]["message"]["content"], "aW4gYSB0cmFuc2FjdGlvbg==",
        "content is bytes (base64 in JSON)"
    );
    assert!(
        value["payload"]["source"]["txId"].as_i64().is_some(),
        "a transactional message has its txId"
    );
    assert_eq!(
        payload(&messages[1])["source"]["txId"],
        json!(null),
        "a non-transactional one has none"
    );

    let summary = running.stop().await;
    assert_eq!(summary.events, 5);
}

/// Every TOAST-able column type, each value stored out of line
/// (`STORAGE EXTERNAL`: no compression, so past ~2 kB it must move to the
/// TOAST table), and an update that leaves them alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_identity_fills_unchanged_toast_from_the_old_row() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "toastfull");
    let hstore = match s.try_query_one("CREATE EXTENSION IF NOT EXISTS hstore") {
        Ok(_) => true,
        Err(e) => {
            eprintln!("extension hstore unavailable, skipping its column: {e}");
            false
        }
    };
    // (column, type, a value of some 10 kB in SQL)
    let mut columns = vec![
        ("c_text", "text", "repeat('t', 10000)".to_owned()),
        (
            "c_varchar",
            "varchar(20000)",
            "repeat('v', 10000)".to_owned(),
        ),
        (
            "c_bytea",
            "bytea",
            "decode(repeat('ab01', 5000), 'hex')".to_owned(),
        ),
        (
            "c_jsonb",
            "jsonb",
            "jsonb_build_object('k', repeat('j', 10000))".to_owned(),
        ),
        (
            "c_json",
            "json",
            "json_build_object('k', repeat('j', 10000))".to_owned(),
        ),
        (
            "c_xml",
            "xml",
            "xmlelement(name x, repeat('x', 10000))".to_owned(),
        ),
        (
            "c_int4s",
            "int4[]",
            "array(SELECT generate_series(1, 3000))".to_owned(),
        ),
        (
            "c_texts",
            "text[]",
            "array_fill(repeat('a', 100), ARRAY[100])".to_owned(),
        ),
        (
            "c_numeric",
            "numeric",
            "(repeat('9', 9000) || '.5')::numeric".to_owned(),
        ),
    ];
    if hstore {
        columns.push((
            "c_hstore",
            "hstore",
            "hstore(array(SELECT 'k' || i FROM generate_series(1, 1000) i), \
             array(SELECT repeat('h', 10) FROM generate_series(1, 1000)))"
                .to_owned(),
        ));
    }
    for table in ["full_rows", "default_rows"] {
        let ddl: Vec<String> = columns.iter().map(|(c, t, _)| format!("{c} {t}")).collect();
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, counter int, {})",
            ddl.join(", ")
        ));
        for (c, _, _) in &columns {
            s.sql(&format!(
                "ALTER TABLE {table} ALTER COLUMN {c} SET STORAGE EXTERNAL"
            ));
        }
    }
    s.sql("ALTER TABLE full_rows REPLICA IDENTITY FULL");
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    s.await_slot().await;

    let names: Vec<&str> = columns.iter().map(|(c, _, _)| *c).collect();
    let values: Vec<&str> = columns.iter().map(|(_, _, v)| v.as_str()).collect();
    for table in ["full_rows", "default_rows"] {
        s.sql(&format!(
            "INSERT INTO {table} (id, counter, {}) VALUES (1, 0, {})",
            names.join(", "),
            values.join(", ")
        ));
        s.sql(&format!("UPDATE {table} SET counter = 1 WHERE id = 1"));
    }

    let full = consume(
        &kafka.bootstrap_servers(),
        &s.topic("full_rows"),
        2,
        TIMEOUT,
    )
    .await;
    assert_eq!(full.len(), 2, "insert and update");
    let (insert, update) = (payload(&full[0]), payload(&full[1]));
    assert_eq!(update["op"], "u");
    assert_eq!(update["after"]["counter"], 1);
    for c in &names {
        assert_eq!(
            update["after"][c], insert["after"][c],
            "{c}: after holds the value the old row carried"
        );
        assert_eq!(
            update["before"][c], insert["after"][c],
            "{c}: before is the old row"
        );
        assert!(
            update["after"][c].to_string().len() > 1000,
            "{c} is a real value"
        );
    }
    assert!(
        header(&full[1], "pgcdc.unchanged.columns").is_none(),
        "no column lacks its value"
    );

    // The control, and the proof that every value was stored out of line
    // (the same values and storage in both tables): under DEFAULT the old
    // row has only the key, so each one arrives as unchanged TOAST.
    let default = consume(
        &kafka.bootstrap_servers(),
        &s.topic("default_rows"),
        2,
        TIMEOUT,
    )
    .await;
    let update = payload(&default[1]);
    assert_eq!(update["after"]["c_text"], "__debezium_unavailable_value");
    assert_eq!(
        default[1].header_payload("pgcdc.unchanged.columns"),
        Some(json!(names))
    );
    running.stop().await;
}

/// A transaction applied under a replication origin (as a logical
/// replication subscriber applies one) names it in `source.origin` and
/// `source.origin_lsn`, as Debezium does from pgoutput's Origin message; a
/// local one has both null, and the Source schema says they are optional.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_changes_name_their_origin() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "origin");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let origin = format!("upstream_{}", s.prefix);
    s.sql(&format!("SELECT pg_replication_origin_create('{origin}')"));
    let running = s.start(&kafka.bootstrap_servers(), &[]);
    s.await_slot().await;
    s.sql("INSERT INTO t VALUES (1)");
    // One session: the origin set up, then a transaction applied under it.
    s.sql(&format!(
        "SELECT pg_replication_origin_session_setup('{origin}'); \
         SELECT pg_replication_origin_xact_setup('0/ABCDEF', now()); \
         INSERT INTO t VALUES (2)"
    ));
    s.sql("INSERT INTO t VALUES (3)");
    let records = consume(&kafka.bootstrap_servers(), &s.topic("t"), 3, TIMEOUT).await;
    let source = |i: usize| &payload(&records[i])["source"];
    assert_eq!(
        (&source(0)["origin"], &source(0)["origin_lsn"]),
        (&json!(null), &json!(null))
    );
    assert_eq!(source(1)["origin"], json!(origin));
    assert_eq!(source(1)["origin_lsn"], json!(0xAB_CDEF));
    assert_eq!(
        source(2)["origin"],
        json!(null),
        "the origin is per transaction"
    );
    let schema = &records[0].value.as_ref().expect("a value")["schema"];
    let source_schema = schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .find(|f| f["field"] == "source")
        .expect("source");
    assert_eq!(
        source_schema["version"], 1,
        "the Source schema's Connect version"
    );
    let tail: Vec<(&Json, &Json)> = source_schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .rev()
        .take(2)
        .map(|f| (&f["field"], &f["optional"]))
        .collect();
    assert_eq!(
        tail,
        [
            (&json!("origin_lsn"), &json!(true)),
            (&json!("origin"), &json!(true))
        ]
    );
    assert!(source(0)["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("pgcdc-kafka/")));
    running.stop().await;
    s.sql(&format!("SELECT pg_replication_origin_drop('{origin}')"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_truncate_by_default_and_idle_slot_keeps_advancing() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "idle");
    s.sql("CREATE TABLE published (id int PRIMARY KEY)");
    s.sql("CREATE TABLE unpublished (id serial PRIMARY KEY, filler text)");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &["--table", "public.published", "--status-interval", "200ms"],
    );
    s.await_slot().await;
    s.sql("INSERT INTO published VALUES (1)");
    s.sql("TRUNCATE published");
    s.sql("INSERT INTO published VALUES (2)");
    let published = consume(
        &kafka.bootstrap_servers(),
        &s.topic("published"),
        3,
        Duration::from_secs(10),
    )
    .await;
    let ops: Vec<&Json> = published.iter().map(|r| &payload(r)["op"]).collect();
    assert_eq!(
        ops,
        [&json!("c"), &json!("c")],
        "truncate is skipped by default (skipped.operations=t)"
    );

    // Traffic only on a table outside the publication: the slot must follow
    // the WAL rather than retain it forever.
    let start = s.confirmed_flush_lsn().unwrap();
    for _ in 0..20 {
        s.sql(
            "INSERT INTO unpublished (filler) SELECT repeat('y', 1000) FROM generate_series(1, 50)",
        );
    }
    let target = s.current_lsn();
    assert!(target > start);
    wait_until(
        TIMEOUT,
        "confirmed_flush_lsn to pass the unpublished traffic",
        || async { s.confirmed_flush_lsn().is_some_and(|c| c >= target) },
    )
    .await;
    running.stop().await;
}

/// `--debezium-compat all` writes Debezium's own values where pgcdc-kafka
/// differs on purpose (see `tests/debezium/deviations.toml`): DATE infinity
/// as Debezium's overflowed day number, NUMERIC NaN as null, an unchanged
/// TOASTed `int4[]` as the placeholder's character codes, and a delete's
/// before-image under REPLICA IDENTITY DEFAULT with its NOT NULL columns
/// required and filled with zeros and empty strings, and a NULL in a column
/// with a DEFAULT as that default (what Connect's converters write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_compat_writes_debeziums_values() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "compat");
    s.sql(
        "CREATE TABLE c (id int PRIMARY KEY, name text NOT NULL, d date NOT NULL, \
         tags int[] NOT NULL, x numeric, note text DEFAULT 'n/a')",
    );
    s.sql("ALTER TABLE c ALTER COLUMN tags SET STORAGE EXTERNAL");
    // Read by the snapshot, where Debezium's DATE infinity is pgjdbc's.
    s.sql("INSERT INTO c VALUES (0, 'pre', '-infinity', '{}', NULL, NULL)");
    let running = s.start(&kafka.bootstrap_servers(), &["--debezium-compat", "all"]);
    s.await_slot().await;

    s.sql(
        "INSERT INTO c SELECT 1, 'ann', 'infinity', array(SELECT generate_series(1, 3000)), 'NaN', \
         NULL",
    );
    s.sql("UPDATE c SET name = 'bo', d = '-infinity' WHERE id = 1");
    s.sql("DELETE FROM c WHERE id = 1");

    let records = consume(&kafka.bootstrap_servers(), &s.topic("c"), 5, TIMEOUT).await;
    assert_eq!(records.len(), 5, "read, create, update, delete, tombstone");
    let read = payload(&records[0]);
    assert_eq!(read["op"], "r");
    assert_eq!(
        read["after"]["d"], -625_821_272,
        "Debezium's snapshot -infinity"
    );
    assert_eq!(
        read["after"]["note"], "n/a",
        "an explicit NULL as the default"
    );
    let records = &records[1..];
    let created = payload(&records[0]);
    assert_eq!(
        created["after"]["d"], -2_147_472_692,
        "Debezium's DATE infinity"
    );
    assert_eq!(created["after"]["x"], json!(null), "Debezium's NaN");
    assert_eq!(
        created["after"]["note"], "n/a",
        "an explicit NULL as the default"
    );

    let updated = payload(&records[1]);
    assert_eq!(updated["after"]["d"], -2_147_472_691);
    let placeholder: Vec<Json> = "__debezium_unavailable_value"
        .bytes()
        .map(|b| json!(b))
        .collect();
    assert_eq!(
        updated["after"]["tags"],
        Json::Array(placeholder),
        "the placeholder's character codes"
    );

    let deleted = payload(&records[2]);
    assert_eq!(
        deleted["before"],
        json!({"id": 1, "name": "", "d": 0, "tags": [], "x": null, "note": "n/a"}),
        "Debezium's zeros for the columns the before-image lacks, the default for a nullable one"
    );
    let schema = &records[2].value.as_ref().expect("value")["schema"];
    for column in ["name", "d", "tags"] {
        assert_eq!(
            field_schema(schema, "before", column)["optional"],
            false,
            "NOT NULL {column} is required, as Debezium declares it"
        );
    }
    assert_eq!(field_schema(schema, "before", "x")["optional"], true);
    assert!(records[3].value.is_none(), "the tombstone");
    running.stop().await;
}
