//! Transaction metadata and heartbeats, end to end against real Postgres,
//! Kafka and Apicurio Registry.
//!
//! Covered: a multi-table transaction gives `BEGIN`, events whose
//! `transaction` blocks count 1..n overall and per table, and an `END` with
//! the per-table counts (JSON, and Avro read by an independent reader that
//! fetches writer schemas from the registry by id); a transaction whose
//! only change is skipped still gets `BEGIN`/`END` with zero events, a
//! non-transactional message gets neither; the id is `<xid>:<commit lsn>`,
//! checked against the xid Postgres reports and the next transaction's
//! `source.sequence`; heartbeats arrive at the interval, run the action
//! query, and move the slot on a database whose only writes go to an
//! unpublished table; a missing heartbeat table stops the connector, another
//! failing action query does not; and after `kill -9`s under load every
//! committed transaction has its `BEGIN` and `END` with the right counts.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apache_avro::types::Value as Avro;
use common::avro_reader::AvroReader;
use common::process::{ConnectorProcess, LogDir};
use common::{consume, consume_all, consume_raw, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_kafka::pipeline::{HeartbeatError, PipelineError};
use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use serde_json::{json, Value as Json};

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

/// The xid of a transaction run as one simple query whose last statement is
/// `SELECT txid_current() % 4294967296`.
fn run_transaction(s: &Scenario, statements: &str) -> u32 {
    let rows =
        s.pg.query(
            &s.db,
            &format!("{statements}; SELECT (txid_current() % 4294967296)::text"),
        )
        .unwrap_or_else(|e| panic!("SQL failed: {statements}: {e}"));
    rows.last()
        .and_then(|row| row[0].as_deref())
        .expect("the xid")
        .parse()
        .expect("xid parses")
}

/// The LSN part of a `<xid>:<lsn>` id, and checks the xid part.
fn id_lsn(id: &str, xid: u32) -> u64 {
    let (x, lsn) = id.split_once(':').expect("id is <xid>:<lsn>");
    assert_eq!(x, xid.to_string(), "the id's xid part: {id}");
    lsn.parse().expect("decimal lsn")
}

/// Transaction topic records grouped by id: `(status, value payload)` in
/// topic order.
fn boundaries(records: &[Record]) -> BTreeMap<String, Vec<(String, Json)>> {
    let mut by_id: BTreeMap<String, Vec<(String, Json)>> = BTreeMap::new();
    for record in records {
        let key = &record.key.as_ref().expect("a key")["payload"];
        let value = payload(record);
        assert_eq!(key["id"], value["id"], "key and value carry the same id");
        by_id
            .entry(value["id"].as_str().expect("id").to_owned())
            .or_default()
            .push((
                value["status"].as_str().expect("status").to_owned(),
                value.clone(),
            ));
    }
    by_id
}

fn collections(end: &Json) -> BTreeMap<String, i64> {
    end["data_collections"]
        .as_array()
        .expect("data_collections")
        .iter()
        .map(|c| {
            (
                c["data_collection"].as_str().unwrap().to_owned(),
                c["event_count"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_transaction_boundaries_and_blocks() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "txmeta");
    s.sql("CREATE TABLE orders (id int PRIMARY KEY, note text)");
    s.sql("CREATE TABLE items (id int PRIMARY KEY, order_id int NOT NULL)");
    s.sql("CREATE TABLE scratch (id int PRIMARY KEY)");
    let running = s.start(&bootstrap, &["--provide-transaction-metadata", "true"]);
    s.await_slot().await;

    // 8 events: orders 3, items 4 (the key change is a delete and a create),
    // one transactional message.
    let xid1 = run_transaction(
        &s,
        "INSERT INTO orders VALUES (1, 'a'); \
         INSERT INTO items VALUES (10, 1), (11, 1); \
         SELECT pg_logical_emit_message(true, 'audit', 'in a transaction'); \
         UPDATE orders SET note = 'b' WHERE id = 1; \
         UPDATE items SET id = 12 WHERE id = 11; \
         INSERT INTO orders VALUES (2, 'c')",
    );
    let xid2 = run_transaction(&s, "INSERT INTO orders VALUES (3, 'd')");
    // Truncates are skipped by default: a transaction without events.
    let xid3 = run_transaction(&s, "TRUNCATE scratch");
    s.sql("SELECT pg_logical_emit_message(false, 'outside', 'no transaction')");
    let xid4 = run_transaction(&s, "INSERT INTO orders VALUES (4, 'e')");

    let txn_topic = format!("{}.transaction", s.prefix);
    let records = consume(&bootstrap, &txn_topic, 8, TIMEOUT).await;
    assert_eq!(
        records.len(),
        8,
        "BEGIN and END of 4 transactions: {records:#?}"
    );
    let schema = &records[0].value.as_ref().unwrap()["schema"];
    assert_eq!(
        schema["name"],
        "io.debezium.connector.common.TransactionMetadataValue"
    );
    let fields: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["status", "id", "event_count", "data_collections", "ts_ms"]
    );
    assert_eq!(
        records[0].key.as_ref().unwrap()["schema"]["name"],
        "io.debezium.connector.common.TransactionMetadataKey"
    );
    let by_id = boundaries(&records);
    assert_eq!(by_id.len(), 4, "{by_id:#?}");
    let find = |xid: u32| {
        let (id, list) = by_id
            .iter()
            .find(|(id, _)| id.starts_with(&format!("{xid}:")))
            .unwrap_or_else(|| panic!("no boundaries for xid {xid}: {by_id:#?}"));
        let statuses: Vec<&str> = list.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(statuses, ["BEGIN", "END"], "{id}");
        assert_eq!(list[0].1["event_count"], Json::Null);
        assert_eq!(list[0].1["data_collections"], Json::Null);
        (id.clone(), list[1].1.clone(), list[0].1["ts_ms"].clone())
    };
    let (id1, end1, begin_ts1) = find(xid1);
    let (id2, end2, _) = find(xid2);
    let (_, end3, _) = find(xid3);
    let (_, end4, _) = find(xid4);
    assert_eq!(end1["event_count"], 8);
    assert_eq!(
        collections(&end1),
        BTreeMap::from([
            ("public.orders".to_owned(), 3),
            ("public.items".to_owned(), 4),
            ("LOGICAL_DECODING_MESSAGE".to_owned(), 1),
        ])
    );
    assert_eq!(end2["event_count"], 1);
    assert_eq!(end3["event_count"], 0, "the skipped truncate: {end3}");
    assert_eq!(end3["data_collections"], json!([]));
    assert_eq!(end4["event_count"], 1);

    // The data events of transaction 1, across both topics and the messages.
    let orders = consume(&bootstrap, &s.topic("orders"), 5, TIMEOUT).await;
    let items = consume(&bootstrap, &s.topic("items"), 5, TIMEOUT).await;
    let messages = consume(&bootstrap, &format!("{}.message", s.prefix), 2, TIMEOUT).await;
    assert_eq!((orders.len(), items.len(), messages.len()), (5, 5, 2));
    let mut events: Vec<(&str, &Json)> = Vec::new();
    for (name, topic) in [
        ("public.orders", &orders),
        ("public.items", &items),
        ("LOGICAL_DECODING_MESSAGE", &messages),
    ] {
        for record in topic.iter().filter(|r| r.value.is_some()) {
            let p = payload(record);
            if p["transaction"]["id"] == json!(id1) {
                events.push((name, p));
            }
        }
    }
    assert_eq!(
        events.len(),
        8,
        "every event of transaction 1 has its block"
    );
    // Total order follows the WAL order of the changes.
    events.sort_by_key(|(_, p)| p["transaction"]["total_order"].as_i64().unwrap());
    let totals: Vec<i64> = events
        .iter()
        .map(|(_, p)| p["transaction"]["total_order"].as_i64().unwrap())
        .collect();
    assert_eq!(totals, (1..=8).collect::<Vec<_>>());
    let lsns: Vec<i64> = events
        .iter()
        .map(|(_, p)| p["source"]["lsn"].as_i64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] <= w[1]), "WAL order: {lsns:?}");
    let ops: Vec<&str> = events
        .iter()
        .map(|(_, p)| p["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["c", "c", "c", "m", "u", "d", "c", "c"]);
    let mut per_table: HashMap<&str, Vec<i64>> = HashMap::new();
    for (name, p) in &events {
        per_table
            .entry(name)
            .or_default()
            .push(p["transaction"]["data_collection_order"].as_i64().unwrap());
        assert_eq!(p["source"]["txId"], i64::from(xid1));
    }
    assert_eq!(per_table["public.orders"], [1, 2, 3]);
    assert_eq!(per_table["public.items"], [1, 2, 3, 4]);
    assert_eq!(per_table["LOGICAL_DECODING_MESSAGE"], [1]);
    assert_eq!(begin_ts1, events[0].1["source"]["ts_ms"], "commit time");

    // The id's LSN is the commit LSN: past every change of the transaction.
    // The next transaction names where that commit record ends as the last
    // commit (Debezium's lsn_commit): past it, before its own changes.
    let commit1 = id_lsn(&id1, xid1);
    assert!(lsns.iter().all(|&l| (l as u64) < commit1));
    let order3 = orders
        .iter()
        .find(|r| payload(r)["after"]["id"] == 3)
        .expect("order 3");
    assert_eq!(payload(order3)["transaction"]["id"], json!(id2));
    let sequence: Json =
        serde_json::from_str(payload(order3)["source"]["sequence"].as_str().unwrap())
            .expect("sequence is JSON");
    let last_commit: u64 = sequence[0]
        .as_str()
        .and_then(|l| l.parse().ok())
        .expect("sequence[0] is an LSN");
    let order3_lsn = payload(order3)["source"]["lsn"].as_u64().expect("lsn");
    assert!(
        commit1 < last_commit && last_commit <= order3_lsn,
        "last commit {last_commit}: the end of commit {commit1}, before {order3_lsn}"
    );
    // The delete's tombstone has no value and so no block; it is not counted.
    assert!(items.iter().any(|r| r.value.is_none()));

    // The non-transactional message has no block and no boundaries.
    let outside = messages
        .iter()
        .find(|r| payload(r)["message"]["prefix"] == "outside")
        .expect("the non-transactional message");
    assert_eq!(payload(outside)["transaction"], Json::Null);

    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_off_by_default() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "txmeta_off");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let running = s.start(&bootstrap, &[]);
    s.await_slot().await;
    s.sql("INSERT INTO t VALUES (1)");
    let records = consume(&bootstrap, &s.topic("t"), 1, TIMEOUT).await;
    assert_eq!(payload(&records[0])["transaction"], Json::Null);
    running.stop().await;
    let txn_topic = format!("{}.transaction", s.prefix);
    assert!(consume_all(&bootstrap, &txn_topic, TIMEOUT)
        .await
        .is_empty());
}

// ---------------------------------------------------------------------------
// Avro, read back independently
// ---------------------------------------------------------------------------

/// A decoded datum as JSON, unions unwrapped.
fn plain(value: &Avro) -> Json {
    match value {
        Avro::Null => Json::Null,
        Avro::Boolean(b) => json!(b),
        Avro::Int(i) => json!(i),
        Avro::Long(i) => json!(i),
        Avro::String(s) => json!(s),
        Avro::Bytes(b) => json!(String::from_utf8_lossy(b)),
        Avro::Union(_, inner) => plain(inner),
        Avro::Array(items) => Json::Array(items.iter().map(plain).collect()),
        Avro::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(name, v)| (name.clone(), plain(v)))
                .collect(),
        ),
        other => panic!("unexpected Avro value {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_boundaries_blocks_and_heartbeats() {
    let kafka = Kafka::shared();
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "txmeta_avro");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    s.sql("CREATE TABLE b (id int PRIMARY KEY)");
    let url = registry.url();
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--format",
            "avro",
            "--schema-registry-url",
            &url,
            "--provide-transaction-metadata",
            "true",
            "--heartbeat-interval",
            "300ms",
        ],
    );
    s.await_slot().await;
    let xid = run_transaction(
        &s,
        "INSERT INTO a VALUES (1); INSERT INTO b VALUES (1); INSERT INTO a VALUES (2)",
    );

    let reader = AvroReader::new(registry);
    let txn_topic = format!("{}.transaction", s.prefix);
    let bootstrap = kafka.bootstrap_servers();
    let records = consume_raw(&bootstrap, &txn_topic, 2, TIMEOUT).await;
    assert_eq!(records.len(), 2);
    let (_, key_schema, key) = reader.decode_with_schema(records[0].key.as_deref().expect("key"));
    assert_eq!(
        key_schema["connect.name"],
        "io.debezium.connector.common.TransactionMetadataKey"
    );
    let id = plain(&key)["id"].as_str().expect("id").to_owned();
    id_lsn(&id, xid);
    let (_, value_schema, begin) =
        reader.decode_with_schema(records[0].value.as_deref().expect("value"));
    assert_eq!(
        value_schema["connect.name"],
        "io.debezium.connector.common.TransactionMetadataValue"
    );
    let begin = plain(&begin);
    assert_eq!(begin["status"], "BEGIN");
    assert_eq!(begin["id"], json!(id));
    assert_eq!(begin["event_count"], Json::Null);
    let (_, end) = reader.decode(records[1].value.as_deref().expect("value"));
    let end = plain(&end);
    assert_eq!(end["status"], "END");
    assert_eq!(end["event_count"], 3);
    assert_eq!(collections(&end), {
        BTreeMap::from([("public.a".to_owned(), 2), ("public.b".to_owned(), 1)])
    });
    assert_eq!(end["ts_ms"], begin["ts_ms"]);

    let a = consume_raw(&bootstrap, &s.topic("a"), 2, TIMEOUT).await;
    assert_eq!(a.len(), 2, "both changes of a");
    let blocks: Vec<Json> = a
        .iter()
        .map(|r| plain(&reader.decode(r.value.as_deref().unwrap()).1)["transaction"].clone())
        .collect();
    assert_eq!(
        blocks,
        [
            json!({"id": id, "total_order": 1, "data_collection_order": 1}),
            json!({"id": id, "total_order": 3, "data_collection_order": 2}),
        ]
    );
    let b = consume_raw(&bootstrap, &s.topic("b"), 1, TIMEOUT).await;
    assert_eq!(b.len(), 1, "the change of b");
    let (_, b_value) = reader.decode(b[0].value.as_deref().unwrap());
    assert_eq!(
        plain(&b_value)["transaction"],
        json!({"id": id, "total_order": 2, "data_collection_order": 1})
    );

    let heartbeat_topic = format!("__debezium-heartbeat.{}", s.prefix);
    let heartbeats = consume_raw(&bootstrap, &heartbeat_topic, 2, TIMEOUT).await;
    assert_eq!(heartbeats.len(), 2);
    let (_, hb_key_schema, hb_key) =
        reader.decode_with_schema(heartbeats[0].key.as_deref().unwrap());
    assert_eq!(
        hb_key_schema["connect.name"],
        "io.debezium.connector.common.ServerNameKey"
    );
    assert_eq!(plain(&hb_key), json!({"serverName": s.prefix}));
    let (_, hb_value_schema, hb_value) =
        reader.decode_with_schema(heartbeats[0].value.as_deref().unwrap());
    assert_eq!(
        hb_value_schema["connect.name"],
        "io.debezium.connector.common.Heartbeat"
    );
    assert!(plain(&hb_value)["ts_ms"].as_i64().unwrap() > 1_700_000_000_000);
    // The registry holds the subjects under TopicNameStrategy.
    for subject in [
        format!("{txn_topic}-key"),
        format!("{txn_topic}-value"),
        format!("{heartbeat_topic}-key"),
        format!("{heartbeat_topic}-value"),
    ] {
        let (status, body) = registry
            .get(&format!("/subjects/{subject}/versions"))
            .expect("registry answers");
        assert_eq!(status, 200, "{subject}: {body}");
        let versions: Json = serde_json::from_str(&body).expect("JSON answer");
        assert_eq!(versions, json!([1]), "{subject}");
    }
    running.stop().await;
}

// ---------------------------------------------------------------------------
// Heartbeats
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_move_the_slot_when_only_unpublished_tables_change() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "heartbeat");
    s.sql("CREATE TABLE watched (id int PRIMARY KEY)");
    s.sql("CREATE TABLE busy (id serial PRIMARY KEY, payload text)");
    s.sql("CREATE TABLE heartbeat_log (id serial PRIMARY KEY, at timestamptz DEFAULT now())");
    let running = s.start(
        &bootstrap,
        &[
            "--table",
            "public.watched",
            "--heartbeat-interval",
            "400ms",
            "--heartbeat-action-query",
            "INSERT INTO heartbeat_log DEFAULT VALUES",
        ],
    );
    s.await_slot().await;
    let start = s.confirmed_flush_lsn().expect("slot");
    for _ in 0..20 {
        s.sql("INSERT INTO busy (payload) SELECT md5(i::text) FROM generate_series(1, 200) i");
    }
    let written = s.current_lsn();
    assert!(written > start);
    wait_until(
        TIMEOUT,
        "the slot to pass the unpublished writes",
        || async { s.confirmed_flush_lsn().is_some_and(|lsn| lsn >= written) },
    )
    .await;
    wait_until(TIMEOUT, "the action query to run three times", || async {
        s.query_one("SELECT count(*)::text FROM heartbeat_log")
            .is_some_and(|n| n.parse::<u32>().unwrap() >= 3)
    })
    .await;
    // The action query's own writes are passed too.
    let after_heartbeats = s.current_lsn();
    wait_until(TIMEOUT, "the slot to pass the heartbeat writes", || async {
        s.confirmed_flush_lsn()
            .is_some_and(|lsn| lsn >= after_heartbeats)
    })
    .await;

    let topic = format!("__debezium-heartbeat.{}", s.prefix);
    let heartbeats = consume(&bootstrap, &topic, 3, TIMEOUT).await;
    assert_eq!(heartbeats.len(), 3);
    let first = &heartbeats[0];
    assert_eq!(
        first.key.as_ref().unwrap()["schema"]["name"],
        "io.debezium.connector.common.ServerNameKey"
    );
    assert_eq!(
        first.key.as_ref().unwrap()["payload"],
        json!({"serverName": s.prefix})
    );
    assert_eq!(
        first.value.as_ref().unwrap()["schema"]["name"],
        "io.debezium.connector.common.Heartbeat"
    );
    let stamps: Vec<i64> = heartbeats
        .iter()
        .map(|r| payload(r)["ts_ms"].as_i64().unwrap())
        .collect();
    // The next heartbeat is due an interval after the previous one was sent.
    assert!(
        stamps.windows(2).all(|w| w[1] - w[0] >= 399),
        "heartbeats at least an interval apart: {stamps:?}"
    );
    // Nothing of the unpublished tables reached Kafka.
    assert!(consume_all(&bootstrap, &s.topic("busy"), TIMEOUT)
        .await
        .is_empty());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_action_queries() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();

    // A missing heartbeat table: a definite stop naming the fix.
    let s = Scenario::new(Postgres::shared(), "heartbeat_missing");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let running = s.start(
        &bootstrap,
        &[
            "--heartbeat-interval",
            "200ms",
            "--heartbeat-action-query",
            "INSERT INTO no_such_heartbeat_table DEFAULT VALUES",
        ],
    );
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("stops on the missing table");
    let text = pgcdc_kafka::error_chain(&error);
    assert!(
        matches!(
            error,
            PipelineError::Heartbeat(HeartbeatError::MissingTable { .. })
        ),
        "{text}"
    );
    assert!(!error.is_retryable(), "{text}");
    assert!(
        text.contains("no_such_heartbeat_table") && text.contains("42P01"),
        "{text}"
    );

    // Any other failure is a warning: heartbeats go on.
    let s = Scenario::new(Postgres::shared(), "heartbeat_failing");
    s.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let running = s.start(
        &bootstrap,
        &[
            "--heartbeat-interval",
            "200ms",
            "--heartbeat-action-query",
            "SELECT 1 / 0",
        ],
    );
    let topic = format!("__debezium-heartbeat.{}", s.prefix);
    let heartbeats = consume(&bootstrap, &topic, 3, TIMEOUT).await;
    assert_eq!(heartbeats.len(), 3);
    assert!(!running.is_finished());
    running.stop().await;
}

// ---------------------------------------------------------------------------
// kill -9: no END is lost
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_end() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let pg = Postgres::shared();
    let s = Scenario::new(pg, "txmeta_kill");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    s.sql("CREATE TABLE b (id int PRIMARY KEY)");
    let args = s.args(&bootstrap, &["--provide-transaction-metadata", "true"]);
    let logs = LogDir::new("txmeta_kill");

    // The first instance creates the slot; then a writer commits two-table
    // transactions and records their xids.
    let mut first = Some(ConnectorProcess::spawn(&args, logs.path(0)));
    s.await_slot().await;
    let stop = Arc::new(AtomicBool::new(false));
    let xids = Arc::new(Mutex::new(Vec::<u32>::new()));
    let url = pg.url(&s.db);
    let writer = {
        let (stop, xids) = (Arc::clone(&stop), Arc::clone(&xids));
        tokio::spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("writer connects");
            tokio::spawn(connection);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let rows = client
                    .simple_query(&format!(
                        "BEGIN; INSERT INTO a VALUES ({i}); INSERT INTO b VALUES ({i}); \
                         SELECT (txid_current() % 4294967296)::text; COMMIT"
                    ))
                    .await
                    .expect("writer transaction");
                let xid = rows
                    .iter()
                    .find_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                        _ => None,
                    })
                    .expect("xid");
                xids.lock().unwrap().push(xid.parse().unwrap());
                // Pacing the load, not waiting for anything.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    for round in 0..3 {
        let process = first
            .take()
            .unwrap_or_else(|| ConnectorProcess::spawn(&args, logs.path(round as usize)));
        s.await_slot().await;
        let before = s.confirmed_flush_lsn().unwrap();
        wait_until(TIMEOUT, "the slot to move", || async {
            s.confirmed_flush_lsn().is_some_and(|l| l > before)
        })
        .await;
        // Streaming under load for a while, longer each round, so the kills
        // land at different points of the stream; the moment is the point,
        // there is nothing to wait for.
        tokio::time::sleep(Duration::from_millis(300 + 400 * round)).await;
        process.assert_running("before kill -9");
        process.kill_9();
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("writer");
    let process = ConnectorProcess::spawn(&args, logs.path(9));
    let end = s.current_lsn();
    wait_until(TIMEOUT, "the last instance to catch up", || async {
        s.confirmed_flush_lsn().is_some_and(|l| l >= end)
    })
    .await;
    process.assert_running("after catching up");
    process.terminate(TIMEOUT).await;

    let committed = xids.lock().unwrap().clone();
    assert!(committed.len() > 20, "{} transactions", committed.len());
    let records = consume_all(&bootstrap, &format!("{}.transaction", s.prefix), TIMEOUT).await;
    let mut by_xid: HashMap<u32, (usize, Vec<Json>)> = HashMap::new();
    for record in &records {
        let value = payload(record);
        let id = value["id"].as_str().unwrap();
        let xid: u32 = id.split_once(':').unwrap().0.parse().unwrap();
        let entry = by_xid.entry(xid).or_default();
        match value["status"].as_str().unwrap() {
            "BEGIN" => entry.0 += 1,
            _ => entry.1.push(value.clone()),
        }
    }
    for xid in &committed {
        let (begins, ends) = by_xid
            .get(xid)
            .unwrap_or_else(|| panic!("no BEGIN/END at all for committed xid {xid}"));
        assert!(*begins >= 1, "no BEGIN for xid {xid}");
        assert!(!ends.is_empty(), "END lost for committed xid {xid}");
        for end in ends {
            assert_eq!(end["event_count"], 2, "xid {xid}: {end}");
            assert_eq!(
                collections(end),
                BTreeMap::from([("public.a".to_owned(), 1), ("public.b".to_owned(), 1)])
            );
        }
    }
    let ends: usize = by_xid.values().map(|(_, e)| e.len()).sum();
    eprintln!(
        "[kill -9] {} transactions committed, {} END records ({} repeated after restarts)",
        committed.len(),
        ends,
        ends - committed.len()
    );
    // Every data event's transaction has its END.
    let a = consume_all(&bootstrap, &s.topic("a"), TIMEOUT).await;
    for record in &a {
        let id = payload(record)["transaction"]["id"].as_str().unwrap();
        let xid: u32 = id.split_once(':').unwrap().0.parse().unwrap();
        assert!(
            by_xid.get(&xid).is_some_and(|(_, ends)| !ends.is_empty()),
            "event of {id} without END"
        );
    }
}
