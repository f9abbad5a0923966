//! The value handling modes (`--binary-handling`, `--time-precision`,
//! `--hstore-handling`, Debezium's `binary.handling.mode`,
//! `time.precision.mode`, `hstore.handling.mode`) end to end against real
//! Postgres, Kafka and (for Avro) Apicurio Registry: each mode changes the
//! column's schema and its values as Debezium documents, in JSON and in Avro.
//!
//! Expected values are worked out by hand from the inserted literals, or
//! computed by Postgres itself (`encode(.., 'base64')`, epoch arithmetic);
//! Avro messages are decoded by an independent reader that fetches the
//! writer schema by id from the registry.
//!
//! Also: a value that fails to convert stops the connector with an error that
//! names the table, column and type but never contains the value.

mod common;

use std::collections::HashMap;

use apache_avro::types::Value as Avro;
use common::avro_reader::AvroReader;
use common::{consume, consume_raw, Record, Running, Scenario, TIMEOUT};
use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry};
use serde_json::{json, Value as Json};

/// Debezium's default `unavailable.value.placeholder`.
const PLACEHOLDER: &str = "__debezium_unavailable_value";

// ---------------------------------------------------------------------------
// Running the connector.
// ---------------------------------------------------------------------------

/// Starts a connector for `s` with `flags` and waits for its slot.
async fn started(s: &Scenario, flags: &[&str]) -> Running {
    s.started(&Kafka::shared().bootstrap_servers(), flags).await
}

/// Runs a connector with `flags` over a fresh table (`ddl`, then the rows of
/// `existing`, which the initial snapshot reads), applies `changes` and returns
/// the first `count` JSON records of the table's topic, by offset.
async fn json_records(
    name: &str,
    ddl: &str,
    existing: &[&str],
    changes: &[&str],
    flags: &[&str],
    count: usize,
) -> (Scenario, Vec<Record>) {
    let s = Scenario::new(Postgres::shared(), name);
    s.sql(ddl);
    for row in existing {
        s.sql(row);
    }
    let table = table_name(ddl);
    let connector = started(&s, flags).await;
    for change in changes {
        s.sql(change);
    }
    let bootstrap = Kafka::shared().bootstrap_servers();
    let mut records = consume(&bootstrap, &s.topic(table), count, TIMEOUT).await;
    assert_eq!(records.len(), count, "records of {table} with {flags:?}");
    connector.stop().await;
    records.sort_by_key(by_key_then_offset);
    (s, records)
}

/// Sorts records by their key's `id`, then by offset (one key, one partition).
fn by_key_then_offset(record: &Record) -> (i64, i64) {
    let key = record.key.as_ref().expect("a key");
    (
        key["payload"]["id"].as_i64().expect("an id key"),
        record.offset,
    )
}

/// The table a `CREATE TABLE <name> (...)` statement creates.
fn table_name(ddl: &str) -> &str {
    ddl.split_whitespace().nth(2).expect("CREATE TABLE <name>")
}

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

fn after(record: &Record) -> &Json {
    &payload(record)["after"]
}

/// A column's field schema in the `after` struct, as JsonConverter wrote it.
fn field_schema<'a>(record: &'a Record, column: &str) -> &'a Json {
    let schema = &record.value.as_ref().expect("not a tombstone")["schema"];
    schema["fields"]
        .as_array()
        .expect("envelope fields")
        .iter()
        .find(|f| f["field"] == "after")
        .and_then(|f| f["fields"].as_array())
        .expect("row fields")
        .iter()
        .find(|f| f["field"] == column)
        .unwrap_or_else(|| panic!("no field {column}"))
}

/// A Connect logical type's field schema (every test column is nullable).
fn logical(kind: &str, name: &str, field: &str) -> Json {
    json!({"type": kind, "optional": true, "name": name, "version": 1, "field": field})
}

// ---------------------------------------------------------------------------
// binary.handling.mode
// ---------------------------------------------------------------------------

const BINARY_TABLE: &str = "CREATE TABLE bins (id int PRIMARY KEY, b bytea, bs bytea[])";

/// Row 1: bytes chosen to hit the two alphabets' differences (0xfb 0xff ->
/// `+/` vs `-_`). Row 2: 64 bytes Postgres generates. Row 3: empty and NULL.
const BINARY_ROWS: &[&str] = &[
    "INSERT INTO bins VALUES (1, '\\xfbff003e', ARRAY['\\x0a0b'::bytea, NULL])",
    "INSERT INTO bins SELECT 2, decode(string_agg(md5(i::text), ''), 'hex'), NULL \
     FROM generate_series(1, 4) i",
    "INSERT INTO bins VALUES (3, '', NULL)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_handling_modes_in_json() {
    // By hand: fb ff 00 3e = 111110 111111 111100 000000 001111 10(0000)
    // = 62 63 60 0 15 32 = "+/8APg==" (URL-safe: "-_8APg=="); 0a 0b = "Cgs=".
    let modes = [
        ("bytes", "+/8APg==", "Cgs=", "bytes"),
        ("base64", "+/8APg==", "Cgs=", "string"),
        ("base64-url-safe", "-_8APg==", "Cgs=", "string"),
        ("hex", "fbff003e", "0a0b", "string"),
    ];
    for (mode, row1, element, kind) in modes {
        // Row 0 exists before the connector starts: the snapshot (COPY text
        // format) reads it, the other rows come from the stream.
        let (s, mut records) = json_records(
            &format!("bin_{}", mode.replace('-', "_")),
            BINARY_TABLE,
            &["INSERT INTO bins VALUES (0, '\\xfbff003e', NULL)"],
            BINARY_ROWS,
            &["--binary-handling", mode],
            4,
        )
        .await;
        let snapshot = records.remove(0);
        assert_eq!(payload(&snapshot)["op"], json!("r"), "{mode}");
        assert_eq!(
            after(&snapshot),
            &json!({"id": 0, "b": row1, "bs": null}),
            "snapshot in {mode}"
        );
        // Bytes and the string modes share the JSON text for standard base64:
        // the schema says which one a consumer reads.
        assert_eq!(
            field_schema(&records[0], "b"),
            &json!({"type": kind, "optional": true, "field": "b"}),
            "{mode}"
        );
        assert_eq!(
            field_schema(&records[0], "bs"),
            &json!({"type": "array", "items": {"type": kind, "optional": true},
                    "optional": true, "field": "bs"}),
            "{mode}"
        );
        assert_eq!(
            after(&records[0]),
            &json!({"id": 1, "b": row1, "bs": [element, null]}),
            "{mode}"
        );
        // Postgres encodes row 2 itself (its base64 breaks lines every 76 characters).
        let oracle = match mode {
            "hex" => "encode(b, 'hex')",
            "base64-url-safe" => "translate(replace(encode(b, 'base64'), E'\\n', ''), '+/', '-_')",
            _ => "replace(encode(b, 'base64'), E'\\n', '')",
        };
        let expected = s
            .query_one(&format!("SELECT {oracle} FROM bins WHERE id = 2"))
            .expect("row 2");
        assert_eq!(expected.len(), if mode == "hex" { 128 } else { 88 });
        assert_eq!(after(&records[1])["b"], json!(expected), "{mode}");
        assert_eq!(
            after(&records[2]),
            &json!({"id": 3, "b": "", "bs": null}),
            "{mode}"
        );
    }
}

// ---------------------------------------------------------------------------
// time.precision.mode
// ---------------------------------------------------------------------------

const TIME_TABLE: &str = "CREATE TABLE times (id int PRIMARY KEY, d date, t0 time(0), \
     t3 time(3), t6 time, ts3 timestamp(3), ts6 timestamp, tstz timestamptz, ta time[])";

const TIME_ROWS: &[&str] = &[
    "INSERT INTO times VALUES (1, '2024-02-29', '12:34:56', '12:34:56.789', \
     '12:34:56.789999', '2024-01-02 03:04:05.123', '2024-01-02 03:04:05.123999', \
     '2024-01-02 03:04:05.5+00', '{12:34:56.789999,NULL}')",
    "INSERT INTO times VALUES (2, '1969-12-31', '24:00:00', NULL, '00:00:00.000001', NULL, \
     '1969-12-31 23:59:59.9995', NULL, NULL)",
];

/// 12:34:56 is 45,296 s after midnight; 2024-02-29 is day 19,782 (2024-01-01
/// is 54 * 365 + 13 leap days = 19,723, then 31 + 28); 2024-01-02 03:04:05 UTC
/// is 19,724 days * 86,400 s + 11,045 s = 1,704,164,645 s.
const T_SECONDS: i64 = 45_296;
const TS_SECONDS: i64 = 1_704_164_645;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_precision_modes_in_json() {
    let d = "io.debezium.time.Date";
    let (time, micro_time) = ("io.debezium.time.Time", "io.debezium.time.MicroTime");
    let (ts, micro_ts) = (
        "io.debezium.time.Timestamp",
        "io.debezium.time.MicroTimestamp",
    );
    let connect = |name: &str| format!("org.apache.kafka.connect.data.{name}");
    let ms = |s: i64, ms: i64| s * 1000 + ms;
    let us = |s: i64, us: i64| s * 1_000_000 + us;

    // (mode, [(column, type, logical name)], row 1, row 2)
    let adaptive = (
        "adaptive",
        vec![
            ("d", "int32", d.to_owned()),
            ("t0", "int32", time.to_owned()),
            ("t3", "int32", time.to_owned()),
            ("t6", "int64", micro_time.to_owned()),
            ("ts3", "int64", ts.to_owned()),
            ("ts6", "int64", micro_ts.to_owned()),
        ],
        json!({"id": 1, "d": 19_782, "t0": ms(T_SECONDS, 0), "t3": ms(T_SECONDS, 789),
               "t6": us(T_SECONDS, 789_999), "ts3": ms(TS_SECONDS, 123),
               "ts6": us(TS_SECONDS, 123_999), "tstz": "2024-01-02T03:04:05.500000Z",
               "ta": [us(T_SECONDS, 789_999), null]}),
        json!({"id": 2, "d": -1, "t0": 86_400_000, "t3": null, "t6": 1, "ts3": null,
               "ts6": -500, "tstz": null, "ta": null}),
    );
    let micros = (
        "adaptive_time_microseconds",
        vec![
            ("d", "int32", d.to_owned()),
            ("t0", "int64", micro_time.to_owned()),
            ("t3", "int64", micro_time.to_owned()),
            ("t6", "int64", micro_time.to_owned()),
            ("ts3", "int64", ts.to_owned()),
            ("ts6", "int64", micro_ts.to_owned()),
        ],
        json!({"id": 1, "d": 19_782, "t0": us(T_SECONDS, 0), "t3": us(T_SECONDS, 789_000),
               "t6": us(T_SECONDS, 789_999), "ts3": ms(TS_SECONDS, 123),
               "ts6": us(TS_SECONDS, 123_999), "tstz": "2024-01-02T03:04:05.500000Z",
               "ta": [us(T_SECONDS, 789_999), null]}),
        json!({"id": 2, "d": -1, "t0": 86_400_000_000i64, "t3": null, "t6": 1, "ts3": null,
               "ts6": -500, "tstz": null, "ta": null}),
    );
    // Milliseconds everywhere: the sub-millisecond digits are dropped, toward
    // the past (1969-12-31 23:59:59.9995 is -0.5 ms, so -1 ms).
    let connect_mode = (
        "connect",
        vec![
            ("d", "int32", connect("Date")),
            ("t0", "int32", connect("Time")),
            ("t3", "int32", connect("Time")),
            ("t6", "int32", connect("Time")),
            ("ts3", "int64", connect("Timestamp")),
            ("ts6", "int64", connect("Timestamp")),
        ],
        json!({"id": 1, "d": 19_782, "t0": ms(T_SECONDS, 0), "t3": ms(T_SECONDS, 789),
               "t6": ms(T_SECONDS, 789), "ts3": ms(TS_SECONDS, 123),
               "ts6": ms(TS_SECONDS, 123), "tstz": "2024-01-02T03:04:05.500000Z",
               "ta": [ms(T_SECONDS, 789), null]}),
        json!({"id": 2, "d": -1, "t0": 86_400_000, "t3": null, "t6": 0, "ts3": null,
               "ts6": -1, "tstz": null, "ta": null}),
    );
    for (mode, schemas, row1, row2) in [adaptive, micros, connect_mode] {
        let (_, records) = json_records(
            &format!("time_{mode}"),
            TIME_TABLE,
            &[],
            TIME_ROWS,
            &["--time-precision", mode],
            2,
        )
        .await;
        for (column, kind, name) in &schemas {
            assert_eq!(
                field_schema(&records[0], column),
                &logical(kind, name, column),
                "{column} in {mode}"
            );
        }
        assert_eq!(
            field_schema(&records[0], "tstz"),
            &logical("string", "io.debezium.time.ZonedTimestamp", "tstz"),
            "{mode}"
        );
        let t6 = schemas.iter().find(|c| c.0 == "t6").expect("t6");
        let mut items = logical(t6.1, &t6.2, "");
        items.as_object_mut().expect("object").remove("field");
        assert_eq!(
            field_schema(&records[0], "ta"),
            &json!({"type": "array", "items": items, "optional": true, "field": "ta"}),
            "{mode}"
        );
        assert_eq!(after(&records[0]), &row1, "row 1 in {mode}");
        assert_eq!(after(&records[1]), &row2, "row 2 in {mode}");
    }
}

// ---------------------------------------------------------------------------
// hstore.handling.mode
// ---------------------------------------------------------------------------

const HSTORE_TABLE: &str =
    "CREATE TABLE tags (id int PRIMARY KEY, note text, h hstore, hs hstore[])";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hstore_handling_modes_in_json() {
    // A value long enough to be stored out of line (EXTERNAL: no compression),
    // so an update of another column sends it as "unchanged TOAST".
    let big: String = (0..300).map(|i| format!("\"k{i}\"=>\"{i:04}\",")).collect();
    let big = big.trim_end_matches(',');
    let rows = [
        "ALTER TABLE tags ALTER COLUMN h SET STORAGE EXTERNAL".to_owned(),
        r#"INSERT INTO tags VALUES (1, NULL, '"b"=>NULL, "a"=>"1"', ARRAY['"x"=>"y"'::hstore, NULL])"#
            .to_owned(),
        "INSERT INTO tags VALUES (2, NULL, '', NULL)".to_owned(),
        format!("INSERT INTO tags VALUES (3, NULL, '{big}', NULL)"),
        "UPDATE tags SET note = 'touched' WHERE id = 3".to_owned(),
    ];
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    for mode in ["json", "map"] {
        let s = Scenario::new(Postgres::shared(), &format!("hstore_{mode}"));
        s.sql("CREATE EXTENSION IF NOT EXISTS hstore");
        s.sql(HSTORE_TABLE);
        let connector = started(&s, &["--hstore-handling", mode]).await;
        for row in &rows {
            s.sql(row);
        }
        let bootstrap = Kafka::shared().bootstrap_servers();
        let mut records = consume(&bootstrap, &s.topic("tags"), 4, TIMEOUT).await;
        assert_eq!(records.len(), 4, "{mode}");
        connector.stop().await;
        records.sort_by_key(by_key_then_offset);
        let update = records
            .iter()
            .find(|r| payload(r)["op"] == "u")
            .expect("the update");
        // pgjdbc parses into a java.util.HashMap; "a" hashes to bucket 1, "b" to 2.
        match mode {
            "json" => {
                let schema = logical("string", "io.debezium.data.Json", "h");
                assert_eq!(field_schema(&records[0], "h"), &schema);
                assert_eq!(
                    after(&records[0]),
                    &json!({"id": 1, "note": null, "h": r#"{"a":"1","b":null}"#,
                            "hs": [r#"{"x":"y"}"#, null]})
                );
                assert_eq!(after(&records[1])["h"], json!("{}"));
                assert_eq!(
                    after(update)["h"],
                    json!(format!("{{\"{PLACEHOLDER}\":\"{PLACEHOLDER}\"}}"))
                );
            }
            _ => {
                let map = json!({"type": "map", "keys": {"type": "string", "optional": false},
                                 "values": {"type": "string", "optional": true}});
                let mut field = map.clone();
                field["optional"] = json!(true);
                field["field"] = json!("h");
                assert_eq!(field_schema(&records[0], "h"), &field);
                let mut items = map;
                items["optional"] = json!(true);
                assert_eq!(
                    field_schema(&records[0], "hs"),
                    &json!({"type": "array", "items": items, "optional": true, "field": "hs"})
                );
                assert_eq!(
                    after(&records[0]),
                    &json!({"id": 1, "note": null, "h": {"a": "1", "b": null},
                            "hs": [{"x": "y"}, null]})
                );
                let text = serde_json::to_string(&after(&records[0])["h"]).expect("JSON");
                assert_eq!(text, r#"{"a":"1","b":null}"#, "HashMap iteration order");
                assert_eq!(after(&records[1])["h"], json!({}));
                assert_eq!(after(update)["h"], json!({PLACEHOLDER: PLACEHOLDER}));
            }
        }
        // The inserted big value arrives whole in both modes.
        let inserted = &after(&records[2])["h"];
        let entries = match mode {
            "json" => serde_json::from_str::<Json>(inserted.as_str().expect("a string"))
                .expect("JSON object"),
            _ => inserted.clone(),
        };
        let entries = entries.as_object().expect("an object");
        assert_eq!(entries.len(), 300, "{mode}");
        assert_eq!(entries["k7"], json!("0007"));
        // JSON records: headers as a JsonConverter writes them, with schema.
        assert_eq!(
            update.header_payload("pgcdc.unchanged.columns"),
            Some(json!(["h"])),
            "{mode}"
        );
    }
}

// ---------------------------------------------------------------------------
// Errors never carry row values.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_value_is_named_but_never_shown() {
    // A value that cannot be converted (a timestamp past int64 microseconds)
    // whose text contains a distinctive marker: the year 294276 and the
    // microseconds 424242 occur nowhere else in the error's context.
    let s = Scenario::new(Postgres::shared(), "secret_err");
    s.sql("CREATE TABLE vault (id int PRIMARY KEY, opened timestamp)");
    let connector = started(&s, &[]).await;
    s.sql("INSERT INTO vault VALUES (1, '294276-12-31 23:59:59.424242')");
    let error = connector.wait_for_error().await;
    let text = pgcdc_kafka::error_chain(&error);
    for needle in [
        "column \"opened\"",
        "public.vault",
        "timestamp",
        "does not fit",
    ] {
        assert!(text.contains(needle), "the error names {needle}: {text}");
    }
    for secret in ["294276", "424242", "23:59:59"] {
        assert!(
            !text.contains(secret),
            "the error repeats the value: {text}"
        );
        assert!(
            !format!("{error:?}").contains(secret),
            "the error's Debug repeats the value: {error:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// Avro: binary, time precision and hstore modes with the registry.
// ---------------------------------------------------------------------------

/// The values (tombstones left out) of the first `count` records of `topic`.
async fn consume_values(topic: &str, count: usize) -> Vec<Vec<u8>> {
    let bootstrap = Kafka::shared().bootstrap_servers();
    consume_raw(&bootstrap, topic, count, TIMEOUT)
        .await
        .into_iter()
        .filter_map(|r| r.value)
        .collect()
}

/// The writer schema (as JSON) and the `after` record of one framed value.
fn avro_after(reader: &AvroReader, bytes: &[u8]) -> (Json, Avro) {
    let (_, json, value) = reader.decode_with_schema(bytes);
    let Avro::Record(fields) = value else {
        panic!("an envelope record")
    };
    let after = fields
        .into_iter()
        .find(|(name, _)| name == "after")
        .map(|(_, v)| v)
        .expect("after");
    (json, unwrap(after))
}

fn unwrap(value: Avro) -> Avro {
    match value {
        Avro::Union(_, inner) => unwrap(*inner),
        other => other,
    }
}

fn column(row: &Avro, name: &str) -> Avro {
    let Avro::Record(fields) = row else {
        panic!("a row record: {row:?}")
    };
    let value = fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no column {name}"));
    unwrap(value)
}

/// The Avro type of `column` in the row record of an envelope schema.
fn column_type<'a>(envelope: &'a Json, column: &str) -> &'a Json {
    let row = &envelope["fields"][0]["type"][1];
    row["fields"]
        .as_array()
        .expect("row fields")
        .iter()
        .find(|f| f["name"] == column)
        .map(|f| &f["type"])
        .unwrap_or_else(|| panic!("no column {column} in {row}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_in_avro() {
    let registry = SchemaRegistry::shared();
    let url = registry.url();
    let s = Scenario::new(Postgres::shared(), "modes_avro");
    s.sql("CREATE EXTENSION IF NOT EXISTS hstore");
    s.sql(
        "CREATE TABLE m (id int PRIMARY KEY, b bytea, d date, t6 time, ts6 timestamp, \
         h hstore)",
    );
    let connector = started(
        &s,
        &[
            "--format",
            "avro",
            "--schema-registry-url",
            &url,
            "--binary-handling",
            "hex",
            "--time-precision",
            "connect",
            "--hstore-handling",
            "map",
        ],
    )
    .await;
    s.sql(
        r#"INSERT INTO m VALUES (1, '\xfbff003e', '2024-02-29', '12:34:56.789999',
           '2024-01-02 03:04:05.123999', '"b"=>NULL, "a"=>"1"')"#,
    );
    s.sql("INSERT INTO m VALUES (2, NULL, NULL, NULL, NULL, NULL)");
    let values = consume_values(&s.topic("m"), 2).await;
    assert_eq!(values.len(), 2);
    connector.stop().await;

    let reader = AvroReader::new(SchemaRegistry::shared());
    let (schema, row) = avro_after(&reader, &values[0]);
    assert_eq!(column_type(&schema, "b"), &json!(["null", "string"]));
    let connect = |kind: &str, name: &str, logical: &str| {
        json!(["null", {"type": kind, "connect.version": 1,
                        "connect.name": format!("org.apache.kafka.connect.data.{name}"),
                        "logicalType": logical}])
    };
    assert_eq!(column_type(&schema, "d"), &connect("int", "Date", "date"));
    assert_eq!(
        column_type(&schema, "t6"),
        &connect("int", "Time", "time-millis")
    );
    assert_eq!(
        column_type(&schema, "ts6"),
        &connect("long", "Timestamp", "timestamp-millis")
    );
    assert_eq!(
        column_type(&schema, "h"),
        &json!(["null", {"type": "map", "values": ["null", "string"]}])
    );
    assert_eq!(column(&row, "b"), Avro::String("fbff003e".into()));
    assert_eq!(column(&row, "d"), Avro::Date(19_782));
    assert_eq!(
        column(&row, "t6"),
        Avro::TimeMillis((T_SECONDS * 1000 + 789) as i32)
    );
    assert_eq!(
        column(&row, "ts6"),
        Avro::TimestampMillis(TS_SECONDS * 1000 + 123)
    );
    let Avro::Map(h) = column(&row, "h") else {
        panic!("an Avro map")
    };
    let h: HashMap<String, Avro> = h.into_iter().map(|(k, v)| (k, unwrap(v))).collect();
    assert_eq!(
        h,
        HashMap::from([
            ("a".to_owned(), Avro::String("1".into())),
            ("b".to_owned(), Avro::Null),
        ])
    );
    let (_, nulls) = avro_after(&reader, &values[1]);
    for name in ["b", "d", "t6", "ts6", "h"] {
        assert_eq!(column(&nulls, name), Avro::Null, "{name}");
    }

    // The default modes on the same table in a fresh database: bytes and
    // Debezium's adaptive types, for contrast.
    let s = Scenario::new(Postgres::shared(), "modes_avro_default");
    s.sql("CREATE TABLE m (id int PRIMARY KEY, b bytea, t6 time)");
    let connector = started(&s, &["--format", "avro", "--schema-registry-url", &url]).await;
    s.sql(r#"INSERT INTO m VALUES (1, '\xfbff003e', '12:34:56.789999')"#);
    let values = consume_values(&s.topic("m"), 1).await;
    assert_eq!(values.len(), 1);
    connector.stop().await;
    let (schema, row) = avro_after(&reader, &values[0]);
    assert_eq!(column_type(&schema, "b"), &json!(["null", "bytes"]));
    assert_eq!(
        column_type(&schema, "t6"),
        &json!(["null", {"type": "long", "connect.version": 1,
                         "connect.name": "io.debezium.time.MicroTime"}])
    );
    assert_eq!(column(&row, "b"), Avro::Bytes(vec![0xfb, 0xff, 0x00, 0x3e]));
    assert_eq!(
        column(&row, "t6"),
        Avro::Long(T_SECONDS * 1_000_000 + 789_999)
    );
}
