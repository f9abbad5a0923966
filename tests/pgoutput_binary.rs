//! `--pgoutput-binary` end to end against real PostgreSQL and Kafka: the
//! records are byte for byte those of text mode, for every type text mode
//! models.
//!
//! One table holds a column of every built-in type the connector models,
//! arrays of them (multi-dimensional, empty, with NULLs), an enum, domains
//! and their arrays, with edge values (NULLs, integer and MONEY extremes,
//! float and NUMERIC NaN / ±Infinity, dates and timestamps BC, after 2038
//! and ±infinity, `24:00:00`, IPv4-mapped IPv6, empty and unbounded
//! ranges, tsvector quoting); two more the extension types (`hstore`,
//! `ltree`, `citext`) and `xml` when the server has them. Three connectors stream
//! the same changes from three slots: text (`off`), binary (`on`) and the
//! default (`auto`, which picks binary here); every key and value is
//! compared as bytes (the topic prefix, the only intended difference,
//! swapped first).
//!
//! Then a column of a type without a binary decoder (`point`) is added:
//! the `on` connector must stop, naming the type (which also proves its
//! values really arrived in binary), a new `on` run is refused at start,
//! naming the column, and the `auto` connector restarts in text and
//! delivers the row as text mode does.
//!
//! A second test takes the initial snapshot of the same rows twice: read
//! with binary COPY, it makes the records text COPY makes.

mod common;

use std::collections::BTreeMap;

use common::process::run_binary;
use common::{
    consume_raw, read_raw_from, topics_matching, RawRecord, ReadUntil, Scenario, TIMEOUT,
};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres};

const DDL: &[&str] = &[
    "CREATE TYPE mood AS ENUM ('sad', 'happy')",
    "CREATE DOMAIN price AS numeric(6,2)",
    "CREATE DOMAIN tag AS varchar(8)",
    "CREATE TABLE every_type (
        id int PRIMARY KEY,
        b bool, i2 int2, i4 int4, i8 int8, o oid, f4 float4, f8 float8,
        n numeric, n2 numeric(10,2), n0 numeric(20,0), n6 numeric(12,6),
        t text, vc varchar(10), c char(5), nm name, bt bytea, u uuid, j json, jb jsonb,
        d date, tm time, tm3 time(3), ttz timetz, ttz0 timetz(0),
        ts timestamp, ts3 timestamp(3), tstz timestamptz, tstz0 timestamptz(0),
        iv interval,
        ia int4[], ta text[], na numeric(8,3)[], da date[], tsa timestamptz[],
        e mood, p price, b1 bit(1), b10 bit(10), vb varbit,
        ch \"char\", m money, ip inet, cn cidr, mac macaddr, mac8 macaddr8,
        tv tsvector, r4 int4range, r8 int8range, rn numrange, rd daterange,
        rts tsrange, rtz tstzrange, tg tag,
        fa float8[], iva interval[], ipa inet[], ma money[], ra int4range[],
        ea mood[], pa price[], tga tag[], ba bytea[], cha \"char\"[],
        maca macaddr[], ua uuid[], tza timetz[], bla bool[]
    )",
];

const CHANGES: &[&str] = &[
    "INSERT INTO every_type VALUES (1,
        true, -32768, 2147483647, -9223372036854775808, 4294967295, 'NaN', '-Infinity',
        'NaN', -0.50, 12345678901234567890, -0.000001,
        E'h\u{e9}llo \"q\" \\\\ end', 'abc', 'ab', 'name', '\\x00ff10',
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', '{\"b\": null, \"a\": 1}',
        '-infinity', '24:00:00', '13:14:15.123', '03:04:05.12+02', '23:59:59.6-00:30',
        '1900-01-01 00:00:00.5', 'infinity', '2040-02-29 23:59:59.999999+05:30', '-infinity',
        '1 year 2 mons -3 days -04:05:06.5',
        '{1,NULL,3}', '{\"a,b\",NULL,\"\"}', '{1.5,-0.001,0}', '{2000-01-01,infinity}',
        '{\"1970-01-01 00:00:00+00\",\"1969-12-31 23:59:59.999999+00\"}',
        'happy', 12.3, B'1', B'1010010111', B'000000001',
        'a', '-92233720368547758.08',
        '2001:db8::ff00:42:8329/64', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
        $t$'a''b':1A,3 'c\\\\d':2B simple$t$, '[1,10)', '(,5]', '[-1.50,2.250]',
        '[2000-01-01,infinity)', '[\"0044-03-15 12:00:00 BC\",\"1999-12-31 23:59:59.5\"]',
        '(-infinity,\"2040-02-29 23:59:59.999999+05:30\"]', 'x y,z',
        '{NaN,Infinity,-Infinity,-0,1e-300}', '{\"1 day\",NULL,\"-00:00:00.000001\"}',
        '{{192.168.0.1,::1},{NULL,::ffff:1.2.3.4}}', '{1.5,-0.01}', '{\"[1,2)\",empty}',
        '{happy,NULL}', '{1.10,NULL}', '{\"a b\",\"\"}', '{\"\\\\x00\",NULL}', '{a,b}',
        '{08:00:2b:01:02:03}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '{00:00:00+14}', '{}')",
    "INSERT INTO every_type VALUES (2,
        false, 32767, -2147483648, 9223372036854775807, 0, 3.4028235e+38, 1e-300,
        'Infinity', 99999999.99, -1, 0,
        '', '', '', '', '', '00000000-0000-0000-0000-000000000000', '[]', '{}',
        '4713-01-01 BC', '00:00:00', '23:59:59.999', '00:00:00-15:59', '24:00:00+15:59',
        '0001-01-01 00:00:00 BC', '2262-04-11 23:47:16.854775', '1969-07-20 20:17:40+00', 'infinity',
        '-178000 years 1 mon',
        '{{1,2},{3,4}}', '{}', '{NULL}', '{-infinity}', '{}',
        'sad', -9999.99, B'0', B'0000000000', B'',
        '', '92233720368547758.07',
        '::ffff:1.2.3.4', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00:00:00',
        '', 'empty', '[-9223372036854775808,9223372036854775807)', '(,)',
        '[4713-01-01 BC,294276-12-31)', '[infinity,infinity]', 'empty', '',
        '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
        '{{t,f},{NULL,t}}')",
    "INSERT INTO every_type (id) VALUES (3)",
    "UPDATE every_type SET n = '-Infinity', n2 = 0, n6 = 123456.000100, f4 = -0, f8 = 'NaN',
        iv = '-1 mons 2 days 00:00:00.000001', ts = '2038-01-19 03:14:08', d = '1969-12-31',
        m = 0, ip = '0.0.0.0/0', ch = E'\\\\', rn = '[0,0]', tv = ''
     WHERE id = 2",
    "DELETE FROM every_type WHERE id = 3",
];

/// 3 inserts, an update, a delete and its tombstone.
const RECORDS: usize = 6;

/// Types a server may lack, each kind in its own table.
struct Optional {
    /// Statements that fail on a server without the types.
    needs: &'static [&'static str],
    /// `CREATE TABLE <name> ...`.
    ddl: &'static str,
    changes: &'static [&'static str],
    /// The records `changes` make.
    records: usize,
}

const OPTIONAL: &[Optional] = &[
    // hstore, ltree and citext ship with postgresql-contrib.
    Optional {
        needs: &[
            "CREATE EXTENSION IF NOT EXISTS hstore",
            "CREATE EXTENSION IF NOT EXISTS ltree",
            "CREATE EXTENSION IF NOT EXISTS citext",
        ],
        ddl: "CREATE TABLE extension_types (
            id int PRIMARY KEY, hs hstore, lt ltree, ci citext,
            hsa hstore[], lta ltree[], cia citext[]
        )",
        changes: &[
            "INSERT INTO extension_types VALUES (1,
                $h$\"a\"=>\"1\", \"b\"=>NULL, \"q\\\"uote\"=>\"back\\\\slash\", \"\"=>\"\"$h$,
                'Top.Science.Astronomy', 'MiXeD \u{e9}',
                ARRAY['a=>b'::hstore, NULL, ''::hstore], '{a.b,c}', '{A,NULL}')",
            "INSERT INTO extension_types VALUES (2, '', '', '', '{}', '{}', '{}')",
            "INSERT INTO extension_types (id) VALUES (3)",
        ],
        records: 3,
    },
    // xml needs a server built with libxml.
    Optional {
        needs: &["SELECT '<a/>'::xml"],
        ddl: "CREATE TABLE xml_types (id int PRIMARY KEY, x xml, xa xml[])",
        changes: &[
            "INSERT INTO xml_types VALUES (1, '<a b=\"1\">t &amp; \u{fc}</a>', '{\"<r/>\",NULL}')",
            "INSERT INTO xml_types VALUES (2, '<?xml version=\"1.0\" standalone=\"yes\"?><r/>', '{}')",
            "INSERT INTO xml_types VALUES (3, 'text only', NULL)",
        ],
        records: 3,
    },
];

// NUMERIC NaN / ±Infinity as null (Debezium's way), so precise decimals
// stay on and the special values still travel through both decoders.
const COMPAT: &[&str] = &["--debezium-compat", "numeric-nan-infinity"];

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

/// The value without the first element of `source.sequence`, the LSN of
/// the last commit the session saw before this change: a run that
/// restarted has seen none yet.
fn last_commit_cut(value: String) -> String {
    const SEQUENCE: &str = "\"sequence\":\"[";
    match value.find(SEQUENCE).map(|at| at + SEQUENCE.len()) {
        Some(start) => match value[start..].find(',') {
            Some(end) => format!("{}_{}", &value[..start], &value[start + end..]),
            None => value,
        },
        None => value,
    }
}

/// `binary` (prefix `binary_prefix`) holds record for record what `text`
/// (prefix `text_prefix`) holds, `expected` of them; `restarted`: the
/// binary side restarted since the text side's last commit.
fn assert_same(
    text: &[RawRecord],
    binary: &[RawRecord],
    (text_prefix, binary_prefix): (&str, &str),
    expected: usize,
    restarted: bool,
) {
    let cut = |value: String| match restarted {
        true => last_commit_cut(value),
        false => value,
    };
    assert_eq!(text.len(), expected, "text records");
    assert_eq!(binary.len(), expected, "{binary_prefix} records");
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
            cut(processed_at_cut(swapped(
                &b.value,
                binary_prefix,
                text_prefix,
            ))),
            cut(processed_at_cut(swapped(&t.value, "", ""))),
        );
        if let Some(at) = bv.bytes().zip(tv.bytes()).position(|(x, y)| x != y) {
            let around = |v: &str| v[at.saturating_sub(120)..(at + 80).min(v.len())].to_owned();
            panic!(
                "{binary_prefix}: value of record {i} differs at byte {at}:\n binary ...{}\n text   ...{}",
                around(&bv),
                around(&tv)
            );
        }
        assert_eq!(bv, tv, "{binary_prefix}: value of record {i}");
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

/// The high watermarks of `topic`, one per partition.
async fn marks(bootstrap: &str, topic: &str) -> Vec<i64> {
    let wanted = topic.to_owned();
    let mut topics: BTreeMap<String, Vec<i64>> =
        topics_matching(bootstrap, move |t| t == wanted).await;
    topics.remove(topic).expect("the topic exists")
}

/// A scenario in a new database holding the tables above: `every_type`,
/// and the optional tables whose types the server has. Without what one
/// needs, it is left out (and said so) rather than failing the test.
fn scenario_with_tables(name: &str) -> (Scenario, Vec<&'static Optional>) {
    let s = Scenario::new(Postgres::shared(), name);
    for ddl in DDL {
        s.sql(ddl);
    }
    let optional: Vec<&Optional> = OPTIONAL
        .iter()
        .filter(|o| {
            o.needs.iter().all(|sql| {
                s.try_query_one(sql)
                    .map_err(|e| eprintln!("{sql} failed, its table left out: {e}"))
                    .is_ok()
            })
        })
        .collect();
    for o in &optional {
        s.sql(o.ddl);
    }
    (s, optional)
}

/// Runs the changes of `every_type` and of the `optional` tables; returns
/// each table with the records a reader should find, `every_type` with
/// `every_type_records`.
fn make_changes(
    s: &Scenario,
    optional: &[&Optional],
    every_type_records: usize,
) -> Vec<(String, usize)> {
    for change in CHANGES {
        s.sql(change);
    }
    let mut tables = vec![("every_type".to_owned(), every_type_records)];
    for o in optional {
        for change in o.changes {
            s.sql(change);
        }
        tables.push((table_of(o.ddl), o.records));
    }
    tables
}

/// A connector beside `s`'s: the same database and publication, its own
/// slot and a topic prefix of its own.
fn beside(s: &Scenario, name: &str) -> Scenario {
    Scenario {
        slot: unique_name("slot"),
        prefix: unique_name(name),
        ..s.clone()
    }
}

/// The table `ddl` (`CREATE TABLE <name> ...`) creates.
fn table_of(ddl: &str) -> String {
    ddl.split_whitespace()
        .nth(2)
        .expect("CREATE TABLE name")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_values_make_the_same_records_as_text() {
    let (text, optional) = scenario_with_tables("pgoutput_binary");
    let (binary, auto) = (beside(&text, "binary"), beside(&text, "auto"));
    let bootstrap = Kafka::shared().bootstrap_servers();
    let flags = [COMPAT, &["--snapshot-mode", "never"]].concat();
    let text_flags = [&flags[..], &["--pgoutput-binary", "off"]].concat();
    let binary_flags = [&flags[..], &["--pgoutput-binary"]].concat();
    // The first run creates the publication the others then find.
    let text_run = text.started(&bootstrap, &text_flags).await;
    let (binary_run, auto_run) = tokio::join!(
        binary.started(&bootstrap, &binary_flags),
        auto.started(&bootstrap, &flags),
    );
    for (table, count) in make_changes(&text, &optional, RECORDS) {
        let topics = [&text, &binary, &auto].map(|s| s.topic(&table));
        let (from_text, from_binary, from_auto) = tokio::join!(
            consume_raw(&bootstrap, &topics[0], count, TIMEOUT),
            consume_raw(&bootstrap, &topics[1], count, TIMEOUT),
            consume_raw(&bootstrap, &topics[2], count, TIMEOUT),
        );
        assert_same(
            &from_text,
            &from_binary,
            (&text.prefix, &binary.prefix),
            count,
            false,
        );
        assert_same(
            &from_text,
            &from_auto,
            (&text.prefix, &auto.prefix),
            count,
            false,
        );
        if table == "every_type" {
            // Not vacuous: the edge values reached the records.
            let first = String::from_utf8_lossy(from_text[0].value.as_deref().expect("a value"))
                .into_owned();
            for expected in [
                "\"n\":null",
                "\"f4\":\"NaN\"",
                "2040-02-29T18:29:59.999999Z",
                "\"ia\":[1,null,3]",
                "\"ip\":\"2001:db8::ff00:42:8329/64\"",
                "\"ipa\":[\"192.168.0.1\",\"::1\",null,\"::ffff:1.2.3.4\"]",
                "\"tv\":\"'a''b':1A,3 'c\\\\\\\\d':2B 'simple'\"",
                "\"rts\":\"[\\\"0044-03-15 12:00:00 BC\\\",\\\"1999-12-31 23:59:59.5\\\"]\"",
            ] {
                assert!(first.contains(expected), "{expected} in {first}");
            }
        }
    }

    // A type without a binary decoder. The `on` connector stops on it, and
    // a new `on` run is refused before streaming, naming the column; the
    // `auto` connector restarts in text from where it confirmed.
    auto.await_confirmed_past_now("the auto run confirmed the changes so far")
        .await;
    let (text_topic, auto_topic) = (text.topic("every_type"), auto.topic("every_type"));
    let (text_marks, auto_marks) = tokio::join!(
        marks(&bootstrap, &text_topic),
        marks(&bootstrap, &auto_topic)
    );
    text.sql("ALTER TABLE every_type ADD COLUMN pt point");
    text.sql("INSERT INTO every_type (id, pt, ip) VALUES (4, '(1.5,-2)', '::1')");
    let error = pgcdc_kafka::error_chain(&binary_run.wait_for_error().await);
    assert!(
        error.contains("values of type unknown type")
            && error.contains("cannot be read in binary form")
            && error.contains("--pgoutput-binary auto"),
        "{error}"
    );
    let one = ReadUntil::count(1, TIMEOUT);
    let (from_text, from_auto) = tokio::join!(
        read_raw_from(&bootstrap, &text_topic, text_marks, one),
        read_raw_from(&bootstrap, &auto_topic, auto_marks, one),
    );
    assert_same(
        &from_text,
        &from_auto,
        (&text.prefix, &auto.prefix),
        1,
        true,
    );
    let row = String::from_utf8_lossy(from_auto[0].value.as_deref().expect("a value")).into_owned();
    assert!(row.contains("\"pt\":\"(1.5,-2)\""), "{row}");
    let auto_summary = auto_run.stop().await;
    assert!(
        auto_summary.restarts >= 1,
        "auto fell back by restarting: {auto_summary:?}"
    );
    let summary = text_run.stop().await;
    assert!(
        summary.acked_lsn > pgcdc_kafka::lsn::Lsn::ZERO,
        "{summary:?}"
    );
    let refused = binary.start(&bootstrap, &binary_flags);
    let error = pgcdc_kafka::error_chain(&refused.wait_for_error().await);
    assert!(
        error.contains("public.every_type.pt (point)") && error.contains("--pgoutput-binary"),
        "{error}"
    );
}

/// A record's key and value as text, with `prefix` swapped for `to`, and
/// without what differs between two snapshots of the same rows: when each
/// was read (`ts_*`, in the envelope and in `source`) and the slot each
/// run made (`source.lsn`, `txId`, `sequence`).
fn snapshot_record(record: &RawRecord, prefix: &str, to: &str) -> (String, String) {
    let key = swapped(&record.key, prefix, to).unwrap_or_default();
    let value = swapped(&record.value, prefix, to).expect("a value");
    let mut value: serde_json::Value = serde_json::from_str(&value).expect("JSON");
    let payload = value["payload"].as_object_mut().expect("a payload");
    for field in ["ts_ms", "ts_us", "ts_ns"] {
        payload.remove(field).expect("the envelope's time");
    }
    let source = payload["source"].as_object_mut().expect("a source block");
    for field in ["ts_ms", "ts_us", "ts_ns", "lsn", "txId", "sequence"] {
        source.remove(field).expect("a source field");
    }
    (key, value.to_string())
}

/// The initial snapshot read with binary COPY makes the records text COPY
/// makes, for every type of the tables above; the binary run says it read
/// its page ranges in binary, and the text run that it did not.
#[tokio::test(flavor = "multi_thread")]
async fn a_binary_snapshot_makes_the_same_records_as_text() {
    let (text, optional) = scenario_with_tables("binary_snapshot");
    // Rows 1 and 2 of `every_type`: 3 was deleted.
    let tables = make_changes(&text, &optional, 2);
    let binary = beside(&text, "binary");
    let bootstrap = Kafka::shared().bootstrap_servers();
    for (run, mode, chunks) in [
        (&text, "off", "binary_chunks=0"),
        (&binary, "on", "binary_chunks="),
    ] {
        let flags = [
            COMPAT,
            &["--snapshot-mode", "initial_only", "--snapshot-workers", "1"],
            &["--pgoutput-binary", mode],
        ]
        .concat();
        let mut args = vec!["run".to_owned()];
        args.extend(run.args(&bootstrap, &flags));
        let (code, _, stderr) = run_binary(args).await;
        assert_eq!(code, Some(0), "{stderr}");
        let started = stderr
            .lines()
            .find(|line| line.contains("snapshot started"))
            .unwrap_or_else(|| panic!("a start line in {stderr}"));
        assert!(started.contains(chunks), "{mode}: {started}");
        if mode == "on" {
            assert!(!started.contains("binary_chunks=0"), "{started}");
        }
    }
    for (table, count) in tables {
        let topics = [&text, &binary].map(|s| s.topic(&table));
        let (from_text, from_binary) = tokio::join!(
            consume_raw(&bootstrap, &topics[0], count, TIMEOUT),
            consume_raw(&bootstrap, &topics[1], count, TIMEOUT),
        );
        assert_eq!(from_text.len(), count, "{table}: text records");
        assert_eq!(from_binary.len(), count, "{table}: binary records");
        for (i, (t, b)) in from_text.iter().zip(&from_binary).enumerate() {
            let (t, b) = (
                snapshot_record(t, "", ""),
                snapshot_record(b, &binary.prefix, &text.prefix),
            );
            assert_eq!(b.0, t.0, "{table}: key of record {i}");
            assert_eq!(b.1, t.1, "{table}: value of record {i}");
            assert!(t.1.contains("\"op\":\"r\""), "{}", t.1);
        }
    }
}
