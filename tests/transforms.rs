//! The outbox event router and unwrap (ExtractNewRecordState), end to end
//! against real Postgres, Kafka and Apicurio Registry.
//!
//! Outbox: rows written inside business transactions into outbox tables with
//! jsonb, text and bytea payloads (one of them before the connector starts,
//! so it comes from the snapshot) arrive on the topic their aggregate type
//! names, keyed by the aggregate id, with the payload bytes exactly as
//! stored, the `id` / `eventType` / additional headers, per aggregate in
//! commit order; deleting the rows later produces nothing; the business
//! table keeps its Debezium envelope; additional columns placed in the
//! envelope make the value `{payload, ...}`.
//!
//! Unwrap: every delete handling mode in JSON (values, `__deleted`, added
//! fields and headers, tombstones, snapshot reads), and the tombstone and
//! rewrite modes in Avro, decoded by an independent reader that fetches each
//! writer schema by id from the registry (with an outbox table alongside,
//! whose Avro key and payload are decoded the same way); outbox events
//! written while the connector is stopped arrive once after the restart.

mod common;

use std::time::Duration;

use apache_avro::types::Value as Avro;
use common::avro_reader::AvroReader;
use common::{
    consume, consume_all, read_raw, wait_until, RawRecord, ReadUntil, Record, Running, Scenario,
    TIMEOUT,
};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres, SchemaRegistry};
use serde_json::{json, Value as Json};

// ---------------------------------------------------------------------------
// Raw records (outbox values are not JSON documents) and an Avro reader.
// ---------------------------------------------------------------------------

/// Reads `topic` from the beginning until `count` records arrived (or
/// [`TIMEOUT`] passed), then for a second longer to catch a record too many;
/// returns them in (partition, offset) order.
async fn consume_lingering(topic: &str, count: usize) -> Vec<RawRecord> {
    let until = ReadUntil {
        linger: Some(Duration::from_secs(1)),
        ..ReadUntil::count(count, TIMEOUT)
    };
    let mut records = read_raw(&Kafka::shared().bootstrap_servers(), topic, until).await;
    records.sort_by_key(|r| (r.partition, r.offset));
    records
}

fn utf8(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8")
}

/// Standard base64 with padding, as JsonConverter writes bytes.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A decoded Avro value as JSON: unions unwrapped, bytes as hex.
fn plain(value: &Avro) -> Json {
    match value {
        Avro::Null => Json::Null,
        Avro::Boolean(b) => json!(b),
        Avro::Int(i) => json!(i),
        Avro::Long(i) => json!(i),
        Avro::String(s) => json!(s),
        Avro::Bytes(b) => json!(b.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        Avro::Union(_, inner) => plain(inner),
        Avro::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(name, v)| (name.clone(), plain(v)))
                .collect(),
        ),
        other => panic!("unexpected Avro value {other:?}"),
    }
}

/// An outbox key or value as JsonConverter writes it with its schema:
/// `(schema, payload)`.
fn connect_json(bytes: Option<&[u8]>) -> (Json, Json) {
    let mut json: Json = serde_json::from_slice(bytes.expect("bytes")).expect("JSON");
    (json["schema"].take(), json["payload"].take())
}

/// The aggregate id in an outbox key written with its schema, a JSON string.
fn outbox_key(record: &RawRecord) -> String {
    let (schema, payload) = connect_json(record.key.as_deref());
    assert_eq!(schema, json!({"type": "string", "optional": false}));
    payload.as_str().expect("a string key").to_owned()
}

async fn started(s: &Scenario, extra: &[&str]) -> Running {
    let running = s.start(&Kafka::shared().bootstrap_servers(), extra);
    s.await_slot().await;
    running
}

// ---------------------------------------------------------------------------
// Outbox
// ---------------------------------------------------------------------------

const OUTBOX_COLUMNS: &str = "id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, \
                              aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL";

/// One outbox event as the test wrote it.
#[derive(Debug, Clone)]
struct Written {
    table: String,
    id: String,
    aggregate: String,
    aggregate_id: String,
    kind: String,
    payload: Vec<u8>,
    region: Option<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_events_of_business_transactions() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "outbox");
    s.sql("CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL)");
    s.sql(&format!(
        "CREATE TABLE outbox ({OUTBOX_COLUMNS}, payload jsonb, region text)"
    ));
    s.sql(&format!(
        "CREATE TABLE outbox_text ({OUTBOX_COLUMNS}, payload text, region text)"
    ));
    s.sql(&format!(
        "CREATE TABLE outbox_bin ({OUTBOX_COLUMNS}, payload bytea, region text)"
    ));
    // Unique aggregate types keep the default topic pattern (outbox.event.X)
    // apart from other runs on the same broker.
    let order = unique_name("Order");
    let customer = unique_name("Customer");
    let invoice = unique_name("Invoice");
    let blob = unique_name("Blob");

    let mut written: Vec<Written> = Vec::new();
    let mut next = 0u32;
    let mut event = |table: &str,
                     aggregate: &str,
                     aggregate_id: &str,
                     kind: &str,
                     payload_sql: &str,
                     payload: &[u8],
                     region: Option<&str>| {
        next += 1;
        let id = format!("00000000-0000-4000-8000-{next:012}");
        written.push(Written {
            table: table.to_owned(),
            id: id.clone(),
            aggregate: aggregate.to_owned(),
            aggregate_id: aggregate_id.to_owned(),
            kind: kind.to_owned(),
            payload: payload.to_vec(),
            region: region.map(str::to_owned),
        });
        let region = region.map_or("NULL".to_owned(), |r| format!("'{r}'"));
        format!(
            "INSERT INTO {table} VALUES ('{id}', '{aggregate}', '{aggregate_id}', '{kind}', \
             {payload_sql}, {region});"
        )
    };

    // Before the connector starts: read by the snapshot.
    let early = event(
        "outbox",
        &order,
        "o-1",
        "OrderCreated",
        "'{\"n\": 0}'",
        br#"{"n": 0}"#,
        Some("eu"),
    );
    s.sql(&format!(
        "BEGIN; INSERT INTO orders VALUES (1, 10); {early} COMMIT"
    ));
    let running = started(
        &s,
        &[
            // Headers as a Kafka Connect worker's default header converter
            // writes them: plain text, compared byte for byte below.
            "--header-converter",
            "simple",
            "--outbox-table",
            "public.outbox,public.outbox_text",
            "--outbox-table",
            "public.outbox_bin",
            "--outbox-additional-placement",
            "region:header:x-region",
            // Debezium 1.x's event type header, which 2.x and 3.x dropped.
            "--outbox-field-event-type",
            "type",
        ],
    )
    .await;

    // Business transactions, each writing its outbox events; o-1 gets events
    // in several transactions and twice in one.
    let t1 = [
        event(
            "outbox",
            &order,
            "o-1",
            "OrderPaid",
            "'{\"n\": 1, \"paid\": true}'",
            br#"{"n": 1, "paid": true}"#,
            None,
        ),
        event(
            "outbox",
            &customer,
            "c-9",
            "CustomerSeen",
            "'[1, 2, 3]'",
            b"[1, 2, 3]",
            Some("us"),
        ),
        event(
            "outbox_text",
            &invoice,
            "i-1",
            "InvoiceIssued",
            "'plain text, not JSON: ü'",
            "plain text, not JSON: ü".as_bytes(),
            None,
        ),
    ]
    .concat();
    s.sql(&format!(
        "BEGIN; UPDATE orders SET total = 11 WHERE id = 1; {t1} COMMIT"
    ));
    let t2 = [
        event(
            "outbox",
            &order,
            "o-2",
            "OrderCreated",
            "'{\"n\": 2}'",
            br#"{"n": 2}"#,
            None,
        ),
        event(
            "outbox",
            &order,
            "o-1",
            "OrderShipped",
            "'{\"n\": 3}'",
            br#"{"n": 3}"#,
            None,
        ),
        event(
            "outbox_bin",
            &blob,
            "b-1",
            "BlobStored",
            "'\\x00ff10'::bytea",
            &[0x00, 0xff, 0x10],
            Some("ap"),
        ),
        event(
            "outbox",
            &order,
            "o-1",
            "OrderClosed",
            "'{\"n\": 4}'",
            br#"{"n": 4}"#,
            None,
        ),
    ]
    .concat();
    s.sql(&format!(
        "BEGIN; INSERT INTO orders VALUES (2, 20); {t2} COMMIT"
    ));
    // Applications delete processed rows: no event, no tombstone.
    s.sql("BEGIN; DELETE FROM outbox; DELETE FROM outbox_text; DELETE FROM outbox_bin; COMMIT");
    // A last event after the deletes shows everything before it was read.
    let last = event(
        "outbox",
        &order,
        "o-2",
        "OrderCancelled",
        "'{\"n\": 5}'",
        br#"{"n": 5}"#,
        None,
    );
    // Everything before this point, the deletes that made no record
    // included, must be confirmed.
    let before_last = s.current_lsn();
    s.sql(&format!("BEGIN; {last} COMMIT"));

    let by_aggregate = |aggregate: &str| -> Vec<Written> {
        written
            .iter()
            .filter(|w| w.aggregate == aggregate)
            .cloned()
            .collect()
    };
    for aggregate in [&order, &customer, &invoice, &blob] {
        let expected = by_aggregate(aggregate);
        let topic = format!("outbox.event.{aggregate}");
        let records = consume_lingering(&topic, expected.len()).await;
        assert_eq!(
            records.len(),
            expected.len(),
            "exactly the inserted events on {topic}: {records:#?}"
        );
        // Per aggregate id, the events in commit order, on one partition.
        let mut keys: Vec<&str> = expected.iter().map(|w| w.aggregate_id.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        let got_keys: Vec<String> = records.iter().map(outbox_key).collect();
        let mut got_keys: Vec<&str> = got_keys.iter().map(String::as_str).collect();
        got_keys.sort_unstable();
        got_keys.dedup();
        assert_eq!(got_keys, keys, "keys are the aggregate ids");
        for key in keys {
            let got: Vec<&RawRecord> = records.iter().filter(|r| outbox_key(r) == key).collect();
            assert!(
                got.windows(2).all(|w| w[0].partition == w[1].partition),
                "one aggregate, one partition"
            );
            let got_ids: Vec<&[u8]> = got.iter().map(|r| r.header("id").expect("id")).collect();
            let written_ids: Vec<&[u8]> = expected
                .iter()
                .filter(|w| w.aggregate_id == key)
                .map(|w| w.id.as_bytes())
                .collect();
            assert_eq!(got_ids, written_ids, "commit order of aggregate {key}");
        }
        for w in &expected {
            let record = records
                .iter()
                .find(|r| r.header("id") == Some(w.id.as_bytes()))
                .unwrap_or_else(|| panic!("event {} arrived", w.id));
            // What JsonConverter writes for the payload column under its
            // schema: the text as a JSON string, bytes in base64.
            let (schema, payload) = connect_json(record.value.as_deref());
            let (kind, name, expected) = match w.table.as_str() {
                "outbox_bin" => ("bytes", Json::Null, json!(base64(&w.payload))),
                "outbox_text" => ("string", Json::Null, json!(utf8(&w.payload))),
                _ => (
                    "string",
                    json!("io.debezium.data.Json"),
                    json!(utf8(&w.payload)),
                ),
            };
            assert_eq!(payload, expected, "payload as stored");
            assert_eq!(schema["type"], kind, "{schema}");
            assert_eq!(schema["optional"], true, "{schema}");
            assert_eq!(schema["name"], name, "{schema}");
            assert_eq!(record.header("eventType"), Some(w.kind.as_bytes()));
            assert_eq!(
                record.header("x-region"),
                w.region.as_deref().map(str::as_bytes),
                "additional header (absent for NULL)"
            );
        }
    }
    // The order aggregate's keys, in order of the records for o-1.
    let orders = consume_lingering(&format!("outbox.event.{order}"), 6).await;
    let o1: Vec<&str> = orders
        .iter()
        .filter(|r| outbox_key(r) == "o-1")
        .map(|r| std::str::from_utf8(r.header("eventType").expect("type")).expect("UTF-8"))
        .collect();
    assert_eq!(
        o1,
        ["OrderCreated", "OrderPaid", "OrderShipped", "OrderClosed"]
    );
    let o2: Vec<&str> = orders
        .iter()
        .filter(|r| outbox_key(r) == "o-2")
        .map(|r| std::str::from_utf8(r.header("eventType").expect("type")).expect("UTF-8"))
        .collect();
    assert_eq!(o2, ["OrderCreated", "OrderCancelled"]);

    // The outbox tables' own topics stay empty; the business table keeps
    // the Debezium envelope.
    for table in ["outbox", "outbox_text", "outbox_bin"] {
        let own = consume_all(&kafka.bootstrap_servers(), &s.topic(table), TIMEOUT).await;
        assert!(own.is_empty(), "{table} has no change events: {own:#?}");
    }
    let business = consume(&kafka.bootstrap_servers(), &s.topic("orders"), 3, TIMEOUT).await;
    let ops: Vec<&Json> = business
        .iter()
        .map(|r| &r.value.as_ref().expect("a value")["payload"]["op"])
        .collect();
    assert_eq!(ops, [&json!("r"), &json!("u"), &json!("c")]);

    wait_until(TIMEOUT, "the slot past the ignored deletes", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c >= before_last)
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_additional_columns_in_the_envelope() {
    let s = Scenario::new(Postgres::shared(), "outbox_env");
    s.sql(&format!(
        "CREATE TABLE events ({OUTBOX_COLUMNS}, payload jsonb, region text NOT NULL, seq bigint)"
    ));
    let topic_base = unique_name("routed");
    let replacement = format!("{topic_base}.${{routedByValue}}.events");
    let running = started(
        &s,
        &[
            "--header-converter",
            "simple",
            "--outbox-table",
            "public.events",
            "--outbox-route-topic-replacement",
            &replacement,
            "--outbox-field-event-key",
            "region",
            "--outbox-additional-placement",
            "region:envelope:where,seq:envelope,type:header:kind",
            "--json-key-schemas",
            "false",
        ],
    )
    .await;
    s.sql(
        "BEGIN; INSERT INTO events VALUES \
         ('10000000-0000-4000-8000-000000000001', 'ship ment', 'a-1', 'Packed', '{\"k\": 1}', 'eu', 7); \
         INSERT INTO events VALUES \
         ('10000000-0000-4000-8000-000000000002', 'ship ment', 'a-1', 'Sent', NULL, 'us', NULL); COMMIT",
    );
    // A space is not allowed in topic names: it becomes `_`.
    let topic = format!("{topic_base}.ship_ment.events");
    let records = consume_lingering(&topic, 2).await;
    assert_eq!(records.len(), 2, "{records:#?}");
    let values: Vec<Json> = records
        .iter()
        .map(|r| serde_json::from_slice(r.value.as_deref().expect("value")).expect("JSON"))
        .collect();
    let schema = &values[0]["schema"];
    assert_eq!(schema["type"], "struct");
    assert_eq!(
        schema["name"],
        json!(format!("{}.ship_ment.Value", s.topic("events")))
    );
    let fields: Vec<&Json> = schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| &f["field"])
        .collect();
    assert_eq!(fields, [&json!("payload"), &json!("where"), &json!("seq")]);
    assert_eq!(schema["fields"][0]["name"], "io.debezium.data.Json");
    assert_eq!(
        values[0]["payload"],
        json!({"payload": "{\"k\": 1}", "where": "eu", "seq": 7})
    );
    assert_eq!(
        values[1]["payload"],
        json!({"payload": null, "where": "us", "seq": null})
    );
    // Key from --outbox-field-event-key; type under its alias, so no
    // eventType header.
    // Without key schemas JsonConverter writes the string key as a JSON string.
    assert_eq!(records[0].key_text(), "\"eu\"");
    assert_eq!(records[1].key_text(), "\"us\"");
    assert_eq!(records[0].header("kind"), Some(&b"Packed"[..]));
    assert_eq!(records[0].header("eventType"), None);
    assert_eq!(
        records[1].header("id"),
        Some(&b"10000000-0000-4000-8000-000000000002"[..])
    );
    running.stop().await;
}

// ---------------------------------------------------------------------------
// Unwrap
// ---------------------------------------------------------------------------

/// Runs one unwrap scenario: a row read by the snapshot, an insert, an
/// update, a delete, then a marker insert; returns the records of the table.
async fn unwrap_run(mode: &str) -> (Scenario, Vec<Record>) {
    let kafka = Kafka::shared();
    let s = Scenario::new(
        Postgres::shared(),
        &format!("unwrap_{}", mode.replace('-', "_")),
    );
    s.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int)");
    s.sql("INSERT INTO items VALUES (1, 'one', 1)");
    let running = started(
        &s,
        &[
            "--envelope",
            "unwrap",
            "--unwrap-delete-handling",
            mode,
            "--unwrap-add-fields",
            "op,table,lsn,source.ts_ms",
            "--unwrap-add-headers",
            "op,db",
        ],
    )
    .await;
    s.sql("INSERT INTO items VALUES (2, 'two', 2)");
    s.sql("UPDATE items SET qty = 3 WHERE id = 2");
    s.sql("DELETE FROM items WHERE id = 2");
    s.sql("INSERT INTO items VALUES (99, 'marker', NULL)");
    let expected = match mode {
        "drop" => 4,
        "tombstone" | "rewrite" => 5,
        _ => 6,
    };
    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("items"),
        expected,
        TIMEOUT,
    )
    .await;
    assert_eq!(records.len(), expected, "{mode}: {records:#?}");
    let all = consume_all(&kafka.bootstrap_servers(), &s.topic("items"), TIMEOUT).await;
    assert_eq!(all.len(), expected, "{mode}: nothing more than expected");
    running.stop().await;
    (s, records)
}

fn check_unwrapped(s: &Scenario, record: &Record, op: &str, row: Json, deleted: Option<&str>) {
    let value = record.value.as_ref().expect("a value");
    let payload = &value["payload"];
    let schema = &value["schema"];
    assert_eq!(schema["name"], json!(format!("{}.Value", s.topic("items"))));
    for (column, v) in row.as_object().expect("row") {
        assert_eq!(&payload[column], v, "{column} of {payload}");
    }
    assert_eq!(payload["__op"], op);
    assert_eq!(payload["__table"], "items");
    assert!(
        payload["__lsn"].as_i64().is_some_and(|l| l > 0),
        "{payload}"
    );
    assert!(payload["__source_ts_ms"]
        .as_i64()
        .is_some_and(|t| t > 1_600_000_000_000));
    assert_eq!(payload.get("__deleted").and_then(Json::as_str), deleted);
    // JSON records: headers as a JsonConverter writes them, with schema.
    assert_eq!(record.header_payload("__op"), Some(json!(op)));
    assert_eq!(record.header_payload("__db"), Some(json!(s.db)));
    let names: Vec<&str> = schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| f["field"].as_str().expect("name"))
        .collect();
    // As Debezium: the strategy adds `__deleted` before the SMT adds the
    // fields, to the table's required `<topic>.Value` schema (the
    // differential test against Debezium shows it required).
    let mut expected = vec!["id", "name", "qty"];
    if deleted.is_some() {
        expected.push("__deleted");
    }
    expected.extend(["__op", "__table", "__lsn", "__source_ts_ms"]);
    assert_eq!(names, expected);
    assert_eq!(schema["optional"], false, "{schema}");
    let added = &schema["fields"].as_array().expect("fields")[3..];
    assert!(added.iter().all(|f| f["optional"] == true), "{schema}");
    let shift = usize::from(deleted.is_some());
    assert_eq!(schema["fields"][5 + shift]["type"], "int64");
    if deleted.is_some() {
        assert_eq!(schema["fields"][3]["type"], "string");
    }
}

fn key_id(record: &Record) -> &Json {
    &record.key.as_ref().expect("a key")["payload"]["id"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwrap_deletes_dropped() {
    let (s, r) = unwrap_run("drop").await;
    check_unwrapped(
        &s,
        &r[0],
        "r",
        json!({"id": 1, "name": "one", "qty": 1}),
        None,
    );
    check_unwrapped(
        &s,
        &r[1],
        "c",
        json!({"id": 2, "name": "two", "qty": 2}),
        None,
    );
    check_unwrapped(&s, &r[2], "u", json!({"id": 2, "qty": 3}), None);
    check_unwrapped(&s, &r[3], "c", json!({"id": 99, "qty": null}), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwrap_deletes_as_one_tombstone() {
    let (s, r) = unwrap_run("tombstone").await;
    check_unwrapped(&s, &r[0], "r", json!({"id": 1}), None);
    check_unwrapped(&s, &r[2], "u", json!({"id": 2, "qty": 3}), None);
    // The delete's `after`: a null under the Value schema, which the
    // JsonConverter writes with its schema; Debezium's tombstone dropped.
    let value = r[3]
        .value
        .as_ref()
        .expect("JSON writes the null with its schema");
    assert_eq!(value["payload"], Json::Null);
    assert_eq!(
        value["schema"]["name"],
        json!(format!("{}.Value", s.topic("items")))
    );
    assert_eq!(value["schema"]["optional"], true);
    let names: Vec<&Json> = value["schema"]["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| &f["field"])
        .collect();
    assert_eq!(names, ["id", "name", "qty"], "no added fields on the null");
    assert_eq!(key_id(&r[3]), &json!(2));
    assert_eq!(r[3].header_payload("__op"), Some(json!("d")));
    assert_eq!(r[3].header_payload("__db"), Some(json!(s.db)));
    check_unwrapped(&s, &r[4], "c", json!({"id": 99}), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwrap_deletes_rewritten() {
    let (s, r) = unwrap_run("rewrite").await;
    check_unwrapped(&s, &r[0], "r", json!({"id": 1}), Some("false"));
    check_unwrapped(&s, &r[1], "c", json!({"id": 2, "qty": 2}), Some("false"));
    // REPLICA IDENTITY DEFAULT: the before image has the key only.
    check_unwrapped(
        &s,
        &r[3],
        "d",
        json!({"id": 2, "name": null, "qty": null}),
        Some("true"),
    );
    assert_eq!(key_id(&r[3]), &json!(2));
    check_unwrapped(&s, &r[4], "c", json!({"id": 99}), Some("false"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwrap_deletes_rewritten_with_tombstone() {
    let (s, r) = unwrap_run("rewrite-with-tombstone").await;
    check_unwrapped(&s, &r[3], "d", json!({"id": 2}), Some("true"));
    assert!(r[4].value.is_none(), "Debezium's tombstone kept");
    assert_eq!(key_id(&r[4]), &json!(2));
    assert_eq!(r[4].header_payload("__op"), Some(json!("d")));
    assert_eq!(r[4].header("__db"), None, "a tombstone carries only __op");
    check_unwrapped(&s, &r[5], "c", json!({"id": 99}), Some("false"));
}

/// Unwrap in Avro, tombstone and rewrite modes, with an outbox table in the
/// rewrite run; every datum decoded with the writer schema from the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwrap_and_outbox_in_avro() {
    let registry = SchemaRegistry::shared();
    let url = registry.url();
    for mode in ["tombstone", "rewrite"] {
        let s = Scenario::new(Postgres::shared(), &format!("unwrap_avro_{mode}"));
        s.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int)");
        s.sql(&format!(
            "CREATE TABLE outbox ({OUTBOX_COLUMNS}, payload jsonb)"
        ));
        let aggregate = unique_name("Avro");
        let running = started(
            &s,
            &[
                "--format",
                "avro",
                "--schema-registry-url",
                &url,
                "--envelope",
                "unwrap",
                "--unwrap-delete-handling",
                mode,
                "--unwrap-add-fields",
                "op,lsn",
                "--outbox-table",
                "public.outbox",
            ],
        )
        .await;
        s.sql(&format!(
            "BEGIN; INSERT INTO items VALUES (1, 'one', 1); \
             INSERT INTO outbox VALUES ('20000000-0000-4000-8000-000000000001', '{aggregate}', \
             'a-7', 'Made', '{{\"x\": [1]}}'); COMMIT"
        ));
        s.sql("UPDATE items SET qty = 2 WHERE id = 1");
        s.sql("DELETE FROM items WHERE id = 1");
        s.sql("DELETE FROM outbox");

        let records = consume_lingering(&s.topic("items"), 3).await;
        assert_eq!(records.len(), 3, "{mode}: {records:#?}");
        let reader = AvroReader::new(registry);
        let mut rows = Vec::new();
        for record in &records {
            let (_, _, key) = reader.decode_with_schema(record.key.as_deref().expect("key"));
            assert_eq!(plain(&key), json!({"id": 1}));
            rows.push(
                record
                    .value
                    .as_deref()
                    .map(|v| reader.decode_with_schema(v)),
            );
        }
        let (id, schema, created) = rows[0].clone().expect("a value");
        // The table's required `<topic>.Value`, as Debezium writes it: a
        // record, not a union with null.
        assert_eq!(schema["type"], "record");
        assert_eq!(schema["name"], "Value");
        assert_eq!(
            schema["namespace"],
            json!(format!("{}.public.items", s.prefix))
        );
        let names: Vec<&Json> = schema["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .map(|f| &f["name"])
            .collect();
        let mut expected = vec!["id", "name", "qty"];
        if mode == "rewrite" {
            expected.push("__deleted");
        }
        expected.extend(["__op", "__lsn"]);
        assert_eq!(names, expected);
        let shift = usize::from(mode == "rewrite");
        assert_eq!(
            schema["fields"][3 + shift]["type"],
            json!(["null", "string"])
        );
        assert_eq!(schema["fields"][4 + shift]["type"], json!(["null", "long"]));
        let created = plain(&created);
        assert_eq!(created["id"], 1);
        assert_eq!(created["name"], "one");
        assert_eq!(created["__op"], "c");
        assert!(created["__lsn"].as_i64().is_some_and(|l| l > 0));
        let (updated_id, _, updated) = rows[1].clone().expect("a value");
        assert_eq!(updated_id, id, "one value schema");
        assert_eq!(plain(&updated)["qty"], 2);
        assert_eq!(plain(&updated)["__op"], "u");
        match mode {
            "tombstone" => {
                assert!(rows[2].is_none(), "the delete is a tombstone");
                assert_eq!(created.get("__deleted"), None);
            }
            _ => {
                assert_eq!(created["__deleted"], "false");
                let (_, _, deleted) = rows[2].clone().expect("the rewritten delete");
                let deleted = plain(&deleted);
                assert_eq!(
                    deleted,
                    json!({"id": 1, "name": null, "qty": null, "__op": "d",
                           "__lsn": deleted["__lsn"], "__deleted": "true"})
                );
            }
        }

        // The outbox event: Avro key and payload with the columns' schemas.
        let topic = format!("outbox.event.{aggregate}");
        let events = consume_lingering(&topic, 1).await;
        assert_eq!(
            events.len(),
            1,
            "one event, the delete ignored: {events:#?}"
        );
        let (_, key_schema, key) =
            reader.decode_with_schema(events[0].key.as_deref().expect("key"));
        assert_eq!(plain(&key), json!("a-7"));
        assert_eq!(key_schema, json!("string"), "a null key is never encoded");
        let (_, payload_schema, payload) =
            reader.decode_with_schema(events[0].value.as_deref().expect("value"));
        assert_eq!(plain(&payload), json!("{\"x\": [1]}"));
        assert_eq!(
            payload_schema,
            json!(["null", {"type": "string", "connect.version": 1, "connect.name": "io.debezium.data.Json"}])
        );
        assert_eq!(
            events[0].header("id"),
            Some(&b"20000000-0000-4000-8000-000000000001"[..])
        );
        let subjects = registry.get("/subjects").expect("registry answers").1;
        assert!(subjects.contains(&format!("{topic}-value")), "{subjects}");
        running.stop().await;
    }
}

/// Outbox events written while the connector is stopped arrive after the
/// restart, and a graceful stop confirmed everything before it: nothing is
/// lost or repeated, deletes in between included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_across_a_restart() {
    let s = Scenario::new(Postgres::shared(), "outbox_restart");
    s.sql(&format!(
        "CREATE TABLE outbox ({OUTBOX_COLUMNS}, payload jsonb)"
    ));
    let aggregate = unique_name("Restart");
    let topic = format!("outbox.event.{aggregate}");
    let insert = |n: u32| {
        s.sql(&format!(
            "BEGIN; INSERT INTO outbox VALUES ('30000000-0000-4000-8000-{n:012}', '{aggregate}', \
             'r-1', 'Step', '{{\"n\": {n}}}'); COMMIT"
        ))
    };
    let flags = [
        "--outbox-table",
        "public.outbox",
        "--json-value-schemas",
        "false",
    ];
    let running = started(&s, &flags).await;
    insert(1);
    insert(2);
    assert_eq!(consume_lingering(&topic, 2).await.len(), 2);
    running.stop().await;

    s.sql("DELETE FROM outbox");
    insert(3);
    s.sql("DELETE FROM outbox");
    insert(4);
    let running = started(&s, &flags).await;
    let records = consume_lingering(&topic, 4).await;
    let payloads: Vec<&[u8]> = records
        .iter()
        .map(|r| r.value.as_deref().expect("a payload"))
        .collect();
    // Without value schemas JsonConverter writes the jsonb text as a JSON string.
    assert_eq!(
        payloads,
        [
            &br#""{\"n\": 1}""#[..],
            &br#""{\"n\": 2}""#[..],
            &br#""{\"n\": 3}""#[..],
            &br#""{\"n\": 4}""#[..]
        ],
        "each event once, in commit order"
    );
    assert_eq!(outbox_key(&records[0]), "r-1", "key schemas still on");
    let before_stop = s.current_lsn();
    wait_until(TIMEOUT, "the slot past the last event", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c >= before_stop)
    })
    .await;
    running.stop().await;
}
