//! `--pgoutput-binary` end to end against real PostgreSQL and Kafka: the
//! records are byte for byte those of text mode.
//!
//! One table holds a column of every type the binary decoder reads, with edge
//! values (NULLs, integer extremes, float and NUMERIC NaN / ±Infinity,
//! numerics of several signs and scales, dates and timestamps before 1970,
//! after 2038 and ±infinity, `24:00:00`, offsets, arrays with NULLs, an enum
//! and a domain). Two connectors stream the same changes from two slots, one
//! in text and one in binary, and every key and value is compared as bytes
//! (the topic prefix, the only intended difference, swapped first).
//!
//! Then a column of a type without a binary decoder (`inet`) is added: the
//! binary connector must stop, naming the type (which also proves its values
//! really arrived in binary), and a new binary run is refused at start,
//! naming the column.

mod common;

use common::{consume_raw, RawRecord, Scenario, TIMEOUT};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};

const DDL: &[&str] = &[
    "CREATE TYPE mood AS ENUM ('sad', 'happy')",
    "CREATE DOMAIN price AS numeric(6,2)",
    "CREATE TABLE every_type (
        id int PRIMARY KEY,
        b bool, i2 int2, i4 int4, i8 int8, o oid, f4 float4, f8 float8,
        n numeric, n2 numeric(10,2), n0 numeric(20,0), n6 numeric(12,6),
        t text, vc varchar(10), c char(5), nm name, bt bytea, u uuid, j json, jb jsonb,
        d date, tm time, tm3 time(3), ttz timetz,
        ts timestamp, ts3 timestamp(3), tstz timestamptz, tstz0 timestamptz(0),
        iv interval,
        ia int4[], ta text[], na numeric(8,3)[], da date[], tsa timestamptz[],
        e mood, p price, b1 bit(1), b10 bit(10), vb varbit
    )",
];

const CHANGES: &[&str] = &[
    "INSERT INTO every_type VALUES (1,
        true, -32768, 2147483647, -9223372036854775808, 4294967295, 'NaN', '-Infinity',
        'NaN', -0.50, 12345678901234567890, -0.000001,
        E'h\u{e9}llo \"q\" \\\\ end', 'abc', 'ab', 'name', '\\x00ff10',
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', '{\"b\": null, \"a\": 1}',
        '-infinity', '24:00:00', '13:14:15.123', '03:04:05.12+02',
        '1900-01-01 00:00:00.5', 'infinity', '2040-02-29 23:59:59.999999+05:30', '-infinity',
        '1 year 2 mons -3 days -04:05:06.5',
        '{1,NULL,3}', '{\"a,b\",NULL,\"\"}', '{1.5,-0.001,0}', '{2000-01-01,infinity}',
        '{\"1970-01-01 00:00:00+00\",\"1969-12-31 23:59:59.999999+00\"}',
        'happy', 12.3, B'1', B'1010010111', B'000000001')",
    "INSERT INTO every_type VALUES (2,
        false, 32767, -2147483648, 9223372036854775807, 0, 3.4028235e+38, 1e-300,
        'Infinity', 99999999.99, -1, 0,
        '', '', '', '', '', '00000000-0000-0000-0000-000000000000', '[]', '{}',
        '4713-01-01 BC', '00:00:00', '23:59:59.999', '00:00:00-15:59',
        '0001-01-01 00:00:00 BC', '2262-04-11 23:47:16.854775', '1969-07-20 20:17:40+00', 'infinity',
        '-178000 years 1 mon',
        '{{1,2},{3,4}}', '{}', '{NULL}', '{-infinity}', '{}',
        'sad', -9999.99, B'0', B'0000000000', B'')",
    "INSERT INTO every_type (id) VALUES (3)",
    "UPDATE every_type SET n = '-Infinity', n2 = 0, n6 = 123456.000100, f4 = -0, f8 = 'NaN',
        iv = '-1 mons 2 days 00:00:00.000001', ts = '2038-01-19 03:14:08', d = '1969-12-31'
     WHERE id = 2",
    "DELETE FROM every_type WHERE id = 3",
];

/// 3 inserts, an update, a delete and its tombstone.
const RECORDS: usize = 6;

const FLAGS: &[&str] = &[
    "--snapshot-mode",
    "never",
    // NUMERIC NaN / ±Infinity as null (Debezium's way), so precise decimals
    // stay on and the special values still travel through both decoders.
    "--debezium-compat",
    "numeric-nan-infinity",
];

fn swapped(bytes: &Option<Vec<u8>>, from: &str, to: &str) -> Option<String> {
    bytes
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).replace(from, to))
}

/// The value without the envelope's closing `ts_ms` / `ts_us` / `ts_ns`:
/// when each connector processed the change, the one part that must differ.
fn processed_at_cut(value: Option<String>) -> String {
    let value = value.unwrap_or_default();
    match value.rfind(",\"ts_ms\":") {
        Some(at) if value[at..].starts_with(",\"ts_ms\":") && !value[at..].contains("\"op\"") => {
            value[..at].to_owned()
        }
        _ => value,
    }
}

fn assert_same(text: &[RawRecord], binary: &[RawRecord], text_prefix: &str, binary_prefix: &str) {
    assert_eq!(text.len(), RECORDS, "text records");
    assert_eq!(binary.len(), RECORDS, "binary records");
    for (i, (t, b)) in text.iter().zip(binary).enumerate() {
        assert!(
            !String::from_utf8_lossy(t.key.as_deref().unwrap_or_default()).contains(binary_prefix),
            "the prefixes must not overlap"
        );
        assert_eq!(
            swapped(&b.key, binary_prefix, text_prefix),
            swapped(&t.key, "", ""),
            "key of record {i}"
        );
        let (bv, tv) = (
            processed_at_cut(swapped(&b.value, binary_prefix, text_prefix)),
            processed_at_cut(swapped(&t.value, "", "")),
        );
        if let Some(at) = bv.bytes().zip(tv.bytes()).position(|(x, y)| x != y) {
            let around = |v: &str| v[at.saturating_sub(120)..(at + 80).min(v.len())].to_owned();
            panic!(
                "value of record {i} differs at byte {at}:\n binary ...{}\n text   ...{}",
                around(&bv),
                around(&tv)
            );
        }
        assert_eq!(bv, tv, "value of record {i}");
        // Byte for byte, not only after the lossy UTF-8 view.
        for r in [t, b] {
            let value = r.value.as_deref().unwrap_or_default();
            assert!(
                std::str::from_utf8(value).is_ok(),
                "record {i} is UTF-8 JSON"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_values_make_the_same_records_as_text() {
    let text = Scenario::new(Postgres::shared(), "pgoutput_binary");
    for ddl in DDL {
        text.sql(ddl);
    }
    let binary = Scenario {
        slot: unique_name("slot"),
        prefix: unique_name("binary"),
        ..text.clone()
    };
    let bootstrap = Kafka::shared().bootstrap_servers();
    let text_run = text.started(&bootstrap, FLAGS).await;
    let binary_flags = [FLAGS, &["--pgoutput-binary"]].concat();
    let binary_run = binary.started(&bootstrap, &binary_flags).await;
    for change in CHANGES {
        text.sql(change);
    }
    let (text_topic, binary_topic) = (text.topic("every_type"), binary.topic("every_type"));
    let (from_text, from_binary) = tokio::join!(
        consume_raw(&bootstrap, &text_topic, RECORDS, TIMEOUT),
        consume_raw(&bootstrap, &binary_topic, RECORDS, TIMEOUT),
    );
    assert_same(&from_text, &from_binary, &text.prefix, &binary.prefix);
    // Not vacuous: the edge values reached the records.
    let first =
        String::from_utf8_lossy(from_text[0].value.as_deref().expect("a value")).into_owned();
    for expected in [
        "\"n\":null",
        "\"f4\":\"NaN\"",
        "2040-02-29T18:29:59.999999Z",
        "\"ia\":[1,null,3]",
    ] {
        assert!(first.contains(expected), "{expected} in {first}");
    }

    // A type without a binary decoder: the running binary connector stops on
    // it, and a new binary run is refused before streaming, naming the column.
    text.sql("ALTER TABLE every_type ADD COLUMN addr inet");
    text.sql("INSERT INTO every_type (id, addr) VALUES (4, '192.168.0.1')");
    let error = pgcdc_kafka::error_chain(&binary_run.wait_for_error().await);
    assert!(
        error.contains("values of type inet cannot be read in binary form")
            && error.contains("--pgoutput-binary"),
        "{error}"
    );
    let summary = text_run.stop().await;
    assert!(
        summary.acked_lsn > pgcdc_kafka::lsn::Lsn::ZERO,
        "{summary:?}"
    );
    let refused = binary.start(&bootstrap, &binary_flags);
    let error = pgcdc_kafka::error_chain(&refused.wait_for_error().await);
    assert!(
        error.contains("public.every_type.addr (inet)") && error.contains("--pgoutput-binary"),
        "{error}"
    );
}
