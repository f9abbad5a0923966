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
    let unchanged: Vec<String> =
        serde_json::from_slice(header(&docs[1], "pgcdc.unchanged.columns").expect("header"))
            .unwrap();
    assert_eq!(unchanged, ["body", "tags"]);
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
