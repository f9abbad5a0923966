//! Avro with a schema registry, end to end against real Postgres, Kafka and
//! Apicurio Registry (its Confluent-compatible API).
//!
//! Every consumed key and value is read by an independent reader: it parses
//! the Confluent header (magic byte, 4-byte schema id), fetches the writer
//! schema by id from the registry over HTTP (`GET /schemas/ids/{id}`), and
//! decodes the body with apache-avro, never using the connector's own
//! schemas. Decoded values are compared with what Postgres itself computes
//! from the source rows (epoch arithmetic, `::text`, `encode(.., 'hex')`).
//!
//! Covered: the Debezium type table (decimals, timestamps with and without
//! time zone, dates before 1970, uuid, json, arrays, NULLs, unchanged TOAST),
//! the registered schemas' Debezium layout, logical decoding messages, native
//! logical types with record-name subjects, schema evolution (add a nullable
//! column, drop one) under a BACKWARD rule, an incompatible change (stops
//! with the error, the slot does not pass it, and a relaxed rule lets a
//! restart deliver it), and a registry outage with restart (no loss, no
//! duplicate schema versions).

mod common;

use std::time::Duration;

use apache_avro::types::Value as Avro;
use common::avro_reader::AvroReader;
use common::{consume_raw, wait_until, RawRecord, Running, Scenario, TIMEOUT};
use pgcdc_kafka::encode::registry::RegistryError;
use pgcdc_kafka::encode::EncodeError;
use pgcdc_kafka::lsn::Lsn;
use pgcdc_kafka::pipeline::PipelineError;
use pgcdc_testcontainers::{Kafka, Postgres, SchemaRegistry, TestCa};
use serde_json::{json, Value as Json};

// ---------------------------------------------------------------------------
// The connector, a raw consumer, and the independent Avro reader.
// ---------------------------------------------------------------------------

/// Starts the connector in-process with Avro against the registry API at
/// `url`.
fn start_avro(s: &Scenario, url: &str, extra: &[&str]) -> Running {
    let mut flags = vec!["--format", "avro", "--schema-registry-url", url];
    flags.extend_from_slice(extra);
    s.start(&bootstrap(), &flags)
}

/// [`start_avro`] against `registry`, once the slot exists.
async fn started_avro(s: &Scenario, registry: &SchemaRegistry, extra: &[&str]) -> Running {
    let running = start_avro(s, &registry.url(), extra);
    s.await_slot().await;
    running
}

/// How long records may take to arrive after the registry is back: longer
/// than [`TIMEOUT`], because the connector's restart backoff has kept doubling
/// (up to 60 s) through the outage, so its next attempt may come a minute
/// after the registry (a JVM, restarted) answers again.
const BACK_AFTER_OUTAGE: Duration = Duration::from_secs(180);

/// The shared broker's bootstrap servers.
fn bootstrap() -> String {
    Kafka::shared().bootstrap_servers()
}

/// A decoded value as JSON, for comparisons: unions unwrapped, bytes as
/// hex, Avro decimals as `{"unscaled": "<digits>"}`, logical types as their
/// numbers.
fn plain(value: &Avro) -> Json {
    match value {
        Avro::Null => Json::Null,
        Avro::Boolean(b) => json!(b),
        Avro::Int(i) | Avro::Date(i) | Avro::TimeMillis(i) => json!(i),
        Avro::Long(i)
        | Avro::TimeMicros(i)
        | Avro::TimestampMillis(i)
        | Avro::TimestampMicros(i) => json!(i),
        Avro::Float(f) => json!(f),
        Avro::Double(f) => json!(f),
        Avro::String(s) => json!(s),
        Avro::Uuid(u) => json!(u.to_string()),
        Avro::Bytes(b) => json!(hex(b)),
        Avro::Decimal(d) => {
            let bytes = <Vec<u8>>::try_from(d).expect("decimal bytes");
            json!({ "unscaled": unscaled(&bytes).to_string() })
        }
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

/// A field of a decoded record (through a union).
fn field<'a>(value: &'a Avro, name: &str) -> &'a Avro {
    match value {
        Avro::Union(_, inner) => field(inner, name),
        Avro::Record(fields) => fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no field {name} in {value:?}")),
        other => panic!("not a record: {other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A big-endian two's complement integer.
fn unscaled(bytes: &[u8]) -> i128 {
    assert!(!bytes.is_empty() && bytes.len() <= 16, "{bytes:?}");
    let negative = bytes[0] & 0x80 != 0;
    let mut buf = [if negative { 0xff } else { 0 }; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    i128::from_be_bytes(buf)
}

/// `unscaled * 10^-scale` as Postgres prints a numeric.
fn decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let digits = format!("{digits:0>width$}", width = scale as usize + 1);
    let (int, frac) = digits.split_at(digits.len() - scale as usize);
    format!("{sign}{int}.{frac}")
}

fn registry_get(registry: &SchemaRegistry, path: &str) -> Json {
    let (status, body) = registry.get(path).expect("registry answers");
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).expect("JSON answer")
}

fn set_compatibility(registry: &SchemaRegistry, subject: &str, level: &str) {
    let (status, body) = registry
        .put(
            &format!("/config/{subject}"),
            &json!({ "compatibility": level }).to_string(),
        )
        .expect("registry answers");
    assert_eq!(status, 200, "PUT /config/{subject}: {body}");
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

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

const KINDS_TABLE: &str = "CREATE TABLE kinds (
    id int PRIMARY KEY,
    small smallint,
    amount numeric(10,2),
    ratio numeric,
    flag boolean,
    f8 double precision,
    ts timestamp,
    ts3 timestamp(3),
    tstz timestamptz,
    d date,
    t time,
    iv interval,
    u uuid,
    j json,
    jb jsonb,
    ints int[],
    texts text[],
    raw bytea,
    big text)";

/// What Postgres says row `id` of `kinds` is, in [`plain`]'s terms.
fn kinds_row(s: &Scenario, id: i32) -> Json {
    let text = s
        .query_one(&format!(
            "SELECT json_build_object(
                'id', id, 'small', small,
                'amount', CASE WHEN amount IS NULL THEN NULL
                          ELSE json_build_object('unscaled', (amount * 100)::bigint::text) END,
                'ratio', ratio::text, 'flag', flag, 'f8', f8,
                'ts', (extract(epoch FROM ts) * 1000000)::bigint,
                'ts3', (extract(epoch FROM ts3) * 1000)::bigint,
                'tstz', to_char(tstz AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
                'd', d - date '1970-01-01',
                't', (extract(epoch FROM t) * 1000000)::bigint,
                'iv', NULL,
                'u', u::text, 'j', j::text, 'jb', jb::text,
                'ints', ints, 'texts', texts,
                'raw', encode(raw, 'hex'), 'big', big)::text
             FROM kinds WHERE id = {id}"
        ))
        .expect("the row");
    serde_json::from_str(&text).expect("JSON row")
}

/// A decoded `kinds` row in [`plain`]'s terms, the variable-scale decimal
/// printed as Postgres prints it, the interval set aside.
fn decoded_row(row: &Avro) -> (Json, Json) {
    let mut json = plain(row);
    let ratio = match field(row, "ratio") {
        Avro::Union(_, inner) if **inner == Avro::Null => Json::Null,
        ratio => {
            let Avro::Int(scale) = field(ratio, "scale") else {
                panic!("scale: {ratio:?}")
            };
            let Avro::Bytes(value) = field(ratio, "value") else {
                panic!("value: {ratio:?}")
            };
            json!(decimal_text(unscaled(value), *scale as u32))
        }
    };
    json["ratio"] = ratio;
    let interval = json["iv"].take();
    (json, interval)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_types_decode_with_the_registered_schemas() {
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "avro_types");
    s.sql(KINDS_TABLE);
    let connector = started_avro(&s, registry, &[]).await;

    s.sql(
        "INSERT INTO kinds VALUES (1, -7, 12345.67, 3.14159, true, 1.5,
            '1969-07-20 20:17:40.123456', '1960-01-01 00:00:00.5', '1955-11-05 06:00:00.25+02',
            '1900-03-01', '23:59:59.999999', '1 year 2 mons 3 days 04:05:06.5',
            'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', '{\"b\": null}',
            '{1,NULL,-3}', '{\"x\",\"y z\",NULL}', '\\x00ff',
            (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i))",
    );
    s.sql("INSERT INTO kinds (id) VALUES (2)");
    let (inserted_1, inserted_2) = (kinds_row(&s, 1), kinds_row(&s, 2));
    // `big` is TOASTed and unchanged: pgoutput does not send it.
    s.sql("UPDATE kinds SET small = 8, ratio = -0.5 WHERE id = 1");
    let mut updated_1 = kinds_row(&s, 1);
    updated_1["big"] = json!("__debezium_unavailable_value");
    s.sql("DELETE FROM kinds WHERE id = 2");
    s.sql("SELECT pg_logical_emit_message(true, 'audit', 'hello')");

    let topic = s.topic("kinds");
    let records = consume_raw(&bootstrap(), &topic, 5, TIMEOUT).await;
    assert_eq!(records.len(), 5, "{records:#?}");
    let reader = AvroReader::new(registry);

    let mut value_ids = Vec::new();
    let mut rows = Vec::new();
    for record in &records[..4] {
        let (key_id, key) = reader.decode(record.key.as_deref().expect("a key"));
        let (value_id, value) = reader.decode(record.value.as_deref().expect("a value"));
        value_ids.push(value_id);
        rows.push((key_id, plain(&key), value));
    }
    assert!(records[4].value.is_none(), "the delete's tombstone");
    assert_eq!(records[4].key, records[3].key);
    assert!(
        value_ids.iter().all(|&id| id == value_ids[0]),
        "one value schema: {value_ids:?}"
    );

    let ops: Vec<Json> = rows.iter().map(|(_, _, v)| plain(field(v, "op"))).collect();
    assert_eq!(ops, [json!("c"), json!("c"), json!("u"), json!("d")]);
    let keys: Vec<&Json> = rows.iter().map(|(_, k, _)| k).collect();
    assert_eq!(
        keys,
        [
            &json!({"id": 1}),
            &json!({"id": 2}),
            &json!({"id": 1}),
            &json!({"id": 2})
        ]
    );

    // The first insert, value by value, against what Postgres computes.
    let (first, interval) = decoded_row(field(&rows[0].2, "after"));
    // 14 months of 30.4375 days, 3 days and 04:05:06.5, in microseconds.
    assert_eq!(
        interval,
        json!(14_i64 * 2_629_800_000_000 + 3 * 86_400_000_000 + 14_706_500_000)
    );
    assert_eq!(first, inserted_1);
    assert_eq!(first["d"], json!(-25_508), "1900-03-01 is before 1970");
    assert_eq!(first["tstz"], json!("1955-11-05T04:00:00.250000Z"));
    assert_eq!(first["big"].as_str().map(str::len), Some(12_800));

    // All NULLs.
    let (second, interval) = decoded_row(field(&rows[1].2, "after"));
    assert_eq!(interval, Json::Null);
    assert_eq!(second, inserted_2);
    assert!(second
        .as_object()
        .expect("row")
        .iter()
        .all(|(k, v)| k == "id" || v.is_null()));

    // The update: the unchanged TOASTed value is the placeholder.
    let (updated, _) = decoded_row(field(&rows[2].2, "after"));
    assert_eq!(updated, updated_1);
    assert_eq!(updated["ratio"], json!("-0.5"));

    // The delete: before holds the key only (REPLICA IDENTITY DEFAULT).
    let deleted = &rows[3].2;
    assert_eq!(plain(field(deleted, "after")), Json::Null);
    assert_eq!(plain(field(field(deleted, "before"), "id")), json!(2));
    assert_eq!(plain(field(field(deleted, "before"), "amount")), Json::Null);
    let source = plain(field(deleted, "source"));
    assert_eq!(source["connector"], "postgresql");
    assert_eq!(source["name"], json!(s.prefix));
    assert_eq!(source["table"], "kinds");
    assert_eq!(source["snapshot"], "false");

    // The registered schemas have Debezium's Avro layout.
    let envelope = reader.schema(value_ids[0]);
    assert_eq!(envelope["type"], "record");
    assert_eq!(envelope["name"], "Envelope");
    assert_eq!(envelope["namespace"], json!(topic));
    assert_eq!(envelope["connect.version"], 2);
    assert_eq!(envelope["connect.name"], json!(format!("{topic}.Envelope")));
    assert_eq!(envelope["fields"][0]["name"], "before");
    assert_eq!(envelope["fields"][0]["default"], Json::Null);
    assert_eq!(envelope["fields"][0]["type"][1]["name"], "Value");
    assert_eq!(
        envelope["fields"][0]["type"][1]["connect.name"],
        json!(format!("{topic}.Value"))
    );
    assert_eq!(
        envelope["fields"][1],
        json!({"name": "after", "type": ["null", "Value"], "default": null})
    );
    assert_eq!(envelope["fields"][2]["type"]["name"], "Source");
    assert_eq!(
        envelope["fields"][2]["type"]["namespace"],
        "io.debezium.connector.postgresql"
    );
    assert_eq!(
        column_type(&envelope, "amount"),
        &json!(["null", {"type": "bytes", "scale": 2, "precision": 10, "connect.version": 1,
            "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}])
    );
    assert_eq!(column_type(&envelope, "id"), &json!("int"));
    assert_eq!(
        column_type(&envelope, "small"),
        &json!(["null", {"type": "int", "connect.type": "int16"}])
    );
    assert_eq!(
        column_type(&envelope, "ts"),
        &json!(["null", {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}])
    );
    assert_eq!(
        column_type(&envelope, "tstz"),
        &json!(["null", {"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"}])
    );
    assert_eq!(
        column_type(&envelope, "ints"),
        &json!(["null", {"type": "array", "items": ["null", "int"]}])
    );
    assert_eq!(
        column_type(&envelope, "ratio")[1]["name"],
        "VariableScaleDecimal"
    );
    assert_eq!(
        column_type(&envelope, "ratio")[1]["namespace"],
        "io.debezium.data"
    );
    assert_eq!(
        column_type(&envelope, "ratio")[1]["connect.doc"],
        "Variable scaled decimal",
        "AvroData keeps the Connect schema's doc"
    );
    let key = reader.schema(rows[0].0);
    assert_eq!(
        key,
        json!({"type": "record", "name": "Key", "namespace": topic,
            "fields": [{"name": "id", "type": "int"}], "connect.name": format!("{topic}.Key")})
    );

    // TopicNameStrategy subjects, one version each.
    let subjects = registry_get(registry, "/subjects");
    for subject in [format!("{topic}-key"), format!("{topic}-value")] {
        assert!(
            subjects.as_array().expect("list").contains(&json!(subject)),
            "{subjects}"
        );
        assert_eq!(
            registry_get(registry, &format!("/subjects/{subject}/versions")),
            json!([1])
        );
    }

    // The logical decoding message.
    let message_topic = format!("{}.message", s.prefix);
    let messages = consume_raw(&bootstrap(), &message_topic, 1, TIMEOUT).await;
    assert_eq!(messages.len(), 1);
    let (_, key) = reader.decode(messages[0].key.as_deref().expect("key"));
    assert_eq!(plain(&key), json!({"prefix": "audit"}));
    let (id, value) = reader.decode(messages[0].value.as_deref().expect("value"));
    assert_eq!(plain(field(&value, "op")), json!("m"));
    assert_eq!(
        plain(field(&value, "message")),
        json!({"prefix": "audit", "content": hex(b"hello")})
    );
    assert_eq!(
        reader.schema(id)["connect.name"],
        "io.debezium.connector.postgresql.MessageValue"
    );

    connector.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_logical_types_with_record_name_subjects() {
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "avro_native");
    s.sql(
        "CREATE TABLE moments (id int PRIMARY KEY, d date, t time, t3 time(3), ts timestamp,
            ts3 timestamp(3), tstz timestamptz, u uuid, amount numeric(6,3), zt timetz)",
    );
    let connector = started_avro(
        &s,
        registry,
        &[
            "--avro-logical-types",
            "native",
            "--subject-name-strategy",
            "record",
        ],
    )
    .await;
    s.sql(
        "INSERT INTO moments VALUES (1, '1969-12-31', '12:34:56.789012', '01:02:03.456',
            '1950-06-01 12:00:00.000001', '2030-01-01 00:00:00.999', '1999-12-31 23:59:59.5-05',
            '00000000-0000-0000-0000-000000000001', -123.456, '10:00:00+02'),
            (2, NULL, NULL, NULL, NULL, NULL, 'infinity', NULL, NULL, NULL)",
    );
    let topic = s.topic("moments");
    let records = consume_raw(&bootstrap(), &topic, 2, TIMEOUT).await;
    assert_eq!(records.len(), 2);
    let reader = AvroReader::new(registry);
    let (value_id, value) = reader.decode(records[0].value.as_deref().expect("value"));
    let after = field(&value, "after");
    let expect = |sql: &str| -> i64 {
        s.query_one(&format!("SELECT ({sql})::bigint FROM moments WHERE id = 1"))
            .expect("value")
            .parse()
            .expect("integer")
    };
    let unwrap = |name: &str| match field(after, name) {
        Avro::Union(1, inner) => (**inner).clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(
        unwrap("d"),
        Avro::Date(expect("d - date '1970-01-01'") as i32)
    );
    assert_eq!(unwrap("d"), Avro::Date(-1));
    assert_eq!(
        unwrap("t"),
        Avro::TimeMicros(expect("extract(epoch FROM t) * 1000000"))
    );
    assert_eq!(
        unwrap("t3"),
        Avro::TimeMillis(expect("extract(epoch FROM t3) * 1000") as i32)
    );
    assert_eq!(
        unwrap("ts"),
        Avro::TimestampMicros(expect("extract(epoch FROM ts) * 1000000"))
    );
    assert_eq!(
        unwrap("ts3"),
        Avro::TimestampMillis(expect("extract(epoch FROM ts3) * 1000"))
    );
    assert_eq!(
        unwrap("tstz"),
        Avro::TimestampMicros(expect("extract(epoch FROM tstz) * 1000000"))
    );
    assert_eq!(
        plain(&unwrap("u")),
        json!("00000000-0000-0000-0000-000000000001")
    );
    assert!(matches!(unwrap("u"), Avro::Uuid(_)), "uuid logical type");
    assert_eq!(plain(&unwrap("amount")), json!({"unscaled": "-123456"}));
    assert_eq!(unwrap("zt"), Avro::String("08:00:00Z".into()));

    let envelope = reader.schema(value_id);
    let logical = |column: &str| column_type(&envelope, column)[1].clone();
    assert_eq!(logical("d"), json!({"type": "int", "logicalType": "date"}));
    assert_eq!(
        logical("t"),
        json!({"type": "long", "logicalType": "time-micros"})
    );
    assert_eq!(
        logical("t3"),
        json!({"type": "int", "logicalType": "time-millis"})
    );
    assert_eq!(
        logical("ts"),
        json!({"type": "long", "logicalType": "timestamp-micros"})
    );
    assert_eq!(
        logical("ts3"),
        json!({"type": "long", "logicalType": "timestamp-millis"})
    );
    assert_eq!(
        logical("tstz"),
        json!({"type": "long", "logicalType": "timestamp-micros"})
    );
    assert_eq!(
        logical("u"),
        json!({"type": "string", "logicalType": "uuid"})
    );
    assert_eq!(logical("amount")["logicalType"], "decimal");
    assert_eq!(logical("zt")["connect.name"], "io.debezium.time.ZonedTime");

    // `infinity` is Debezium's TIMESTAMP sentinel, NULLs stay null.
    let (_, value) = reader.decode(records[1].value.as_deref().expect("value"));
    let after = field(&value, "after");
    assert_eq!(
        field(after, "tstz"),
        &Avro::Union(
            1,
            Box::new(Avro::TimestampMicros(9_223_372_036_825_200_000))
        )
    );
    assert_eq!(field(after, "d"), &Avro::Union(0, Box::new(Avro::Null)));

    // RecordNameStrategy: subjects are the records' full names.
    for subject in [format!("{topic}.Key"), format!("{topic}.Envelope")] {
        assert_eq!(
            registry_get(registry, &format!("/subjects/{subject}/versions")),
            json!([1])
        );
    }
    let (status, _) = registry
        .get(&format!("/subjects/{topic}-value/versions"))
        .expect("answer");
    assert_eq!(status, 404, "no topic-name subject");
    connector.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_evolution_registers_new_versions_before_use() {
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "avro_evolve");
    s.sql("CREATE TABLE evolving (id int PRIMARY KEY, a text)");
    let connector = started_avro(&s, registry, &[]).await;
    let topic = s.topic("evolving");
    let subject = format!("{topic}-value");

    s.sql("INSERT INTO evolving VALUES (1, 'one')");
    assert_eq!(consume_raw(&bootstrap(), &topic, 1, TIMEOUT).await.len(), 1);
    // Debezium-style evolution passes a BACKWARD rule: new fields are
    // optional with default null, dropped ones were.
    set_compatibility(registry, &subject, "BACKWARD");

    // The change that needs the new schema comes in the same transaction.
    s.sql("BEGIN; ALTER TABLE evolving ADD COLUMN b int; INSERT INTO evolving VALUES (2, 'two', 2); COMMIT");
    s.sql("INSERT INTO evolving VALUES (3, 'three', 3)");
    s.sql("ALTER TABLE evolving DROP COLUMN a");
    s.sql("INSERT INTO evolving VALUES (4, 4)");
    s.sql("UPDATE evolving SET b = 10 WHERE id = 1");

    let records = consume_raw(&bootstrap(), &topic, 5, TIMEOUT).await;
    assert_eq!(records.len(), 5, "{records:#?}");
    let reader = AvroReader::new(registry);
    let decoded: Vec<(u32, Json)> = records
        .iter()
        .map(|r| {
            let (id, value) = reader.decode(r.value.as_deref().expect("value"));
            (id, plain(field(&value, "after")))
        })
        .collect();
    assert_eq!(decoded[0].1, json!({"id": 1, "a": "one"}));
    assert_eq!(decoded[1].1, json!({"id": 2, "a": "two", "b": 2}));
    assert_eq!(decoded[2].1, json!({"id": 3, "a": "three", "b": 3}));
    assert_eq!(decoded[3].1, json!({"id": 4, "b": 4}));
    assert_eq!(decoded[4].1, json!({"id": 1, "b": 10}));
    let ids: Vec<u32> = decoded.iter().map(|(id, _)| *id).collect();
    assert!(
        ids[0] != ids[1] && ids[1] == ids[2] && ids[2] != ids[3] && ids[3] == ids[4],
        "{ids:?}"
    );

    // Three versions of the value subject, in order; the key never changed.
    assert_eq!(
        registry_get(registry, &format!("/subjects/{subject}/versions")),
        json!([1, 2, 3])
    );
    for (version, id) in [(1, ids[0]), (2, ids[1]), (3, ids[3])] {
        let answer = registry_get(registry, &format!("/subjects/{subject}/versions/{version}"));
        assert_eq!(answer["id"], json!(id), "{answer}");
    }
    assert_eq!(
        registry_get(registry, &format!("/subjects/{topic}-key/versions")),
        json!([1])
    );
    connector.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incompatible_change_stops_before_the_change() {
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "avro_incompatible");
    s.sql("CREATE TABLE strict (id int PRIMARY KEY, v int)");
    let connector = started_avro(&s, registry, &[]).await;
    let topic = s.topic("strict");
    let subject = format!("{topic}-value");

    s.sql("INSERT INTO strict VALUES (1, 1)");
    assert_eq!(consume_raw(&bootstrap(), &topic, 1, TIMEOUT).await.len(), 1);
    wait_until(TIMEOUT, "the insert confirmed", || async {
        s.confirmed_flush_lsn()
            .is_some_and(|l| l >= s.current_lsn())
    })
    .await;
    set_compatibility(registry, &subject, "FULL_TRANSITIVE");

    s.sql("BEGIN; ALTER TABLE strict ALTER COLUMN v TYPE text; INSERT INTO strict VALUES (2, 'two'); COMMIT");
    let after_change = s.current_lsn();

    let error = connector
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("the connector stops");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(!error.is_retryable(), "{message}");
    let PipelineError::Encode(EncodeError::Incompatible {
        what,
        subject: refused,
        change,
        reason,
        ..
    }) = &error
    else {
        panic!("not an incompatibility: {message}");
    };
    assert_eq!(what, "table public.strict");
    assert_eq!(refused, &subject);
    assert_eq!(
        change,
        "changed column v from int32 optional to string optional"
    );
    assert!(!reason.is_empty());
    for part in [
        topic.as_str(),
        subject.as_str(),
        "compatibility",
        "new topic",
        reason.as_str(),
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }

    // Nothing of the change was sent or confirmed.
    // (Idle keepalives may move it into the transaction, never past its commit.)
    let confirmed = s.confirmed_flush_lsn().expect("slot");
    assert!(
        confirmed < after_change,
        "confirmed {confirmed} past the change at {after_change}"
    );
    assert_eq!(
        consume_raw(&bootstrap(), &topic, 2, Duration::from_secs(3))
            .await
            .len(),
        1
    );
    assert_eq!(
        registry_get(registry, &format!("/subjects/{subject}/versions")),
        json!([1])
    );

    // With the rule relaxed, a restart delivers the change from the slot.
    set_compatibility(registry, &subject, "NONE");
    let connector = start_avro(&s, &registry.url(), &[]);
    let records = consume_raw(&bootstrap(), &topic, 2, TIMEOUT).await;
    assert_eq!(records.len(), 2);
    let reader = AvroReader::new(registry);
    let (_, value) = reader.decode(records[1].value.as_deref().expect("value"));
    assert_eq!(plain(field(&value, "after")), json!({"id": 2, "v": "two"}));
    let summary = connector.stop().await;
    assert!(summary.confirmed_lsn >= Some(after_change));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_outage_loses_nothing_and_duplicates_no_version() {
    let registry =
        tokio::task::spawn_blocking(|| SchemaRegistry::launch().expect("private registry"))
            .await
            .expect("launch thread");
    let s = Scenario::new(Postgres::shared(), "avro_outage");
    s.sql("CREATE TABLE altered (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE steady (id int PRIMARY KEY, v text)");
    let connector = started_avro(&s, &registry, &[]).await;
    let (altered, steady) = (s.topic("altered"), s.topic("steady"));

    for i in 1..=3 {
        s.sql(&format!(
            "INSERT INTO altered VALUES ({i}, 'a{i}'); INSERT INTO steady VALUES ({i}, 's{i}')"
        ));
    }
    // Read (and decode, while the registry still has them) what was sent.
    let old = AvroReader::new(&registry);
    for topic in [&altered, &steady] {
        let records = consume_raw(&bootstrap(), topic, 3, TIMEOUT).await;
        assert_eq!(records.len(), 3);
        for r in &records {
            old.decode(r.value.as_deref().expect("value"));
        }
    }
    wait_until(TIMEOUT, "everything confirmed", || async {
        s.confirmed_flush_lsn()
            .is_some_and(|l| l >= s.current_lsn())
    })
    .await;
    let sent_before: Lsn = s.confirmed_flush_lsn().expect("slot");

    // Down. The next change needs a new schema, so the connector must reach
    // the registry: it retries from the slot, sending and confirming nothing.
    drop(old);
    let registry = tokio::task::spawn_blocking(move || {
        registry.stop().expect("stop the registry");
        registry
    })
    .await
    .expect("stop thread");
    s.sql("BEGIN; ALTER TABLE altered ADD COLUMN w int; INSERT INTO altered VALUES (4, 'a4', 4); COMMIT");
    let after_change = s.current_lsn();
    for i in 5..=6 {
        s.sql(&format!("INSERT INTO altered VALUES ({i}, 'a{i}', {i}); INSERT INTO steady VALUES ({i}, 's{i}')"));
    }
    assert_eq!(
        consume_raw(&bootstrap(), &altered, 4, Duration::from_secs(3))
            .await
            .len(),
        3
    );
    assert_eq!(
        consume_raw(&bootstrap(), &steady, 4, Duration::from_secs(1))
            .await
            .len(),
        3
    );
    let confirmed = s.confirmed_flush_lsn().expect("slot");
    assert!(
        confirmed < after_change,
        "confirmed {confirmed} past the change at {after_change}"
    );

    // Up again, empty (in-memory storage): the connector registers what it
    // needs anew and delivers everything.
    let registry = tokio::task::spawn_blocking(move || {
        registry.start().expect("restart the registry");
        registry
    })
    .await
    .expect("start thread");
    let altered_records = consume_raw(&bootstrap(), &altered, 6, BACK_AFTER_OUTAGE).await;
    let steady_records = consume_raw(&bootstrap(), &steady, 5, TIMEOUT).await;
    assert_eq!(altered_records.len(), 6, "{altered_records:#?}");
    assert_eq!(steady_records.len(), 5, "{steady_records:#?}");

    let new = AvroReader::new(&registry);
    let ids_after = |records: &[RawRecord], reader: &AvroReader<'_>| -> Vec<(i64, Json)> {
        records[3..]
            .iter()
            .map(|r| {
                let (_, value) = reader.decode(r.value.as_deref().expect("value"));
                (r.offset, plain(field(&value, "after")))
            })
            .collect()
    };
    assert_eq!(
        ids_after(&altered_records, &new)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        [
            json!({"id": 4, "v": "a4", "w": 4}),
            json!({"id": 5, "v": "a5", "w": 5}),
            json!({"id": 6, "v": "a6", "w": 6})
        ]
    );
    assert_eq!(
        ids_after(&steady_records, &new)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        [json!({"id": 5, "v": "s5"}), json!({"id": 6, "v": "s6"})]
    );
    // Registered once each in the new registry, however many retries it took.
    for subject in [
        format!("{altered}-value"),
        format!("{altered}-key"),
        format!("{steady}-value"),
        format!("{steady}-key"),
    ] {
        assert_eq!(
            registry_get(&registry, &format!("/subjects/{subject}/versions")),
            json!([1]),
            "{subject}"
        );
    }
    let summary = connector.stop().await;
    assert!(summary.confirmed_lsn > Some(sent_before));
    drop(registry);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_over_tls_trusts_only_the_given_ca() {
    let (registry, ca) = tokio::task::spawn_blocking(|| {
        let ca = TestCa::generate().expect("test CA");
        let registry = SchemaRegistry::launch_tls(&ca).expect("registry with TLS");
        (registry, ca)
    })
    .await
    .expect("launch thread");
    let https = registry.https_url().expect("an HTTPS listener");
    let s = Scenario::new(Postgres::shared(), "avro_tls");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    s.sql("INSERT INTO t VALUES (1, 'one')");
    let topic = s.topic("t");

    // Without the CA the certificate is rejected: a definite error that names
    // the fix, not an outage retried forever; nothing is sent or confirmed.
    let untrusted = start_avro(&s, &https, &[]);
    let error = untrusted
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("an untrusted registry certificate stops the connector");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(
        matches!(
            &error,
            PipelineError::Encode(EncodeError::Registry {
                source: RegistryError::Untrusted { .. },
                ..
            })
        ),
        "{message}"
    );
    assert!(message.contains("--schema-registry-ca"), "{message}");
    assert!(consume_raw(&bootstrap(), &topic, 1, Duration::from_secs(2))
        .await
        .is_empty());

    // With it, the schemas are registered over HTTPS and the rows delivered.
    let ca_file = ca.ca_file();
    let ca_flag = ca_file.to_str().expect("utf-8 path");
    let connector = start_avro(&s, &https, &["--schema-registry-ca", ca_flag]);
    let records = consume_raw(&bootstrap(), &topic, 1, TIMEOUT).await;
    assert_eq!(records.len(), 1);
    let reader = AvroReader::new(&registry);
    let (_, value) = reader.decode(records[0].value.as_deref().expect("value"));
    assert_eq!(plain(field(&value, "after")), json!({"id": 1, "v": "one"}));
    assert_eq!(
        registry_get(&registry, "/subjects"),
        json!([format!("{topic}-key"), format!("{topic}-value")])
            .as_array()
            .map(|subjects| {
                let mut sorted = subjects.clone();
                sorted.sort_by_key(|v| v.to_string());
                Json::Array(sorted)
            })
            .expect("array"),
    );
    connector.stop().await;
}
