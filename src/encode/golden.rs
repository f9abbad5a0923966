//! Byte-exact records of a fixed set of events, as JSON (with and without
//! schemas) and as Avro bodies: the bytes consumers parse, pinned so that a
//! change in how the envelope is walked or written cannot go unnoticed.
//!
//! The expected payloads were produced by the encoders before the envelope
//! had one walker; each case names the event kind it covers.

use std::sync::Arc;

use super::avro::write as avro_write;
use super::json::{schema_json, JsonEncoder};
use super::options::AvroLogicalTypes;
use crate::event::envelope::{self, ConnectorInfo};
use crate::event::metadata::TransactionBlock;
use crate::event::value::{ConnectSchema, ConnectType, Value};
use crate::event::{
    ChangeEvent, ColumnSchema, MessageEvent, Op, SnapshotMarker, SourceInfo, TableSchema,
};
use crate::lsn::Lsn;

const NOW: i64 = 1_700_000_000_123_456;

pub(crate) fn info() -> ConnectorInfo {
    ConnectorInfo {
        name: "app\"x".into(),
        db: "shop".into(),
        run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
    }
}

fn block() -> TransactionBlock {
    TransactionBlock {
        id: "7:100".into(),
        total_order: 3,
        data_collection_order: 2,
    }
}

fn table(routed: bool) -> Arc<TableSchema> {
    let column = |name: &str, schema: ConnectSchema| ColumnSchema {
        name: name.to_owned(),
        type_oid: 0,
        type_modifier: -1,
        schema,
    };
    let columns = vec![
        column("id", ConnectSchema::primitive(ConnectType::Int64)),
        column(
            "naïve \"quoted\"",
            ConnectSchema::primitive(ConnectType::String).optional(),
        ),
        column(
            "raw",
            ConnectSchema::primitive(ConnectType::Bytes).optional(),
        ),
        column(
            "ratio",
            ConnectSchema::primitive(ConnectType::Float64).optional(),
        ),
    ];
    let topic = "app.public.t";
    let row = envelope::row_schema(topic, &columns);
    Arc::new(TableSchema {
        relation_id: 1,
        schema: "public".into(),
        table: "t\"ü".into(),
        qualified_name: "public.t\"ü".into(),
        topic: topic.into(),
        key_schema: Some(envelope::key_schema(topic, &[&columns[0]])),
        envelope_schema: envelope::envelope_schema(topic, &row),
        row_schema: row,
        key_columns: vec![0],
        routed_key_field: routed.then(|| {
            (
                "__dbz__physicalTableIdentifier".into(),
                "app.public.t_1".into(),
            )
        }),
        columns,
    })
}

fn row(id: i64) -> Vec<Value> {
    vec![
        Value::Int64(id),
        Value::String("line\nbreak \u{1}".into()),
        Value::Bytes(vec![1, 2, 255]),
        Value::Float64(if id < 0 { f64::NAN } else { 0.25 }),
    ]
}

/// The events, each with its transaction block.
pub(crate) fn events() -> Vec<(&'static str, ChangeEvent, Option<TransactionBlock>)> {
    let source = |lsn: u64, last: Option<u64>, snapshot| SourceInfo {
        origin: None,
        commit_time_micros: 1_699_999_999_000_001,
        xid: 4_000_000_000,
        lsn: Lsn::new(lsn),
        last_commit_lsn: last.map(Lsn::new),
        snapshot,
    };
    let event = |op, before, after, routed, source| ChangeEvent {
        table: table(routed),
        op,
        before,
        after,
        source,
        unmapped_key: Default::default(),
    };
    vec![
        (
            "create in a transaction",
            event(
                Op::Create,
                None,
                Some(row(1)),
                false,
                source(5000, Some(4000), SnapshotMarker::False),
            ),
            Some(block()),
        ),
        (
            "update",
            event(
                Op::Update,
                Some(row(1)),
                Some(row(-2)),
                false,
                source(5001, None, SnapshotMarker::False),
            ),
            None,
        ),
        (
            "delete, routed key",
            event(
                Op::Delete,
                Some(row(3)),
                None,
                true,
                source(u64::MAX - 3, Some(1), SnapshotMarker::False),
            ),
            None,
        ),
        (
            "truncate",
            event(
                Op::Truncate,
                None,
                None,
                false,
                source(6000, Some(5999), SnapshotMarker::False),
            ),
            None,
        ),
        (
            "snapshot read",
            event(
                Op::Read,
                None,
                Some(row(4)),
                false,
                source(7000, None, SnapshotMarker::LastInDataCollection),
            ),
            None,
        ),
    ]
}

fn messages() -> Vec<(&'static str, MessageEvent, Option<TransactionBlock>)> {
    let message = |transactional, xid| MessageEvent {
        transactional,
        prefix: "audit \"p\"".into(),
        content: b"hello \x00\xff".to_vec(),
        source: SourceInfo {
            origin: None,
            commit_time_micros: 1_699_999_999_000_001,
            xid,
            lsn: Lsn::new(8000),
            last_commit_lsn: Some(Lsn::new(7999)),
            snapshot: SnapshotMarker::False,
        },
    };
    vec![
        ("transactional message", message(true, 42), Some(block())),
        ("non-transactional message", message(false, 0), None),
    ]
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("JSON is UTF-8")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every output: (case, what, rendering).
fn outputs() -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    let mut bare = JsonEncoder::uniform(info(), false);
    let mut framed = JsonEncoder::uniform(info(), true);
    for (case, event, block) in events() {
        let key = bare.key(&event).map(text).unwrap_or_default();
        let value = text(bare.value(&event, block.as_ref(), NOW));
        let schema = schema_json(&event.table.envelope_schema, None).to_string();
        assert_eq!(
            text(framed.value(&event, block.as_ref(), NOW)),
            format!("{{\"schema\":{schema},\"payload\":{value}}}"),
            "{case}: the schema wraps the same payload"
        );
        let key_schema = schema_json(event.table.key_schema.as_ref().expect("key"), None);
        assert_eq!(
            framed.key(&event).map(text),
            bare.key(&event)
                .map(|key| format!("{{\"schema\":{key_schema},\"payload\":{}}}", text(key))),
            "{case}: the key schema wraps the same key"
        );
        out.push((case.to_owned(), "json key", key));
        out.push((case.to_owned(), "json value", value));
        for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
            let mut body = Vec::new();
            avro_write::write_envelope(
                &mut body,
                &event.table.envelope_schema,
                &event,
                &info(),
                block.as_ref(),
                NOW,
                logical,
            )
            .expect("fits");
            out.push((format!("{case} {logical:?}"), "avro value", hex(&body)));
        }
    }
    for (case, message, block) in messages() {
        out.push((
            case.to_owned(),
            "json key",
            text(bare.message_key(&message)),
        ));
        let value = text(bare.message_value(&message, block.as_ref(), NOW));
        let schema = schema_json(&envelope::message_value_schema(), None).to_string();
        assert_eq!(
            text(framed.message_value(&message, block.as_ref(), NOW)),
            format!("{{\"schema\":{schema},\"payload\":{value}}}"),
            "{case}: the schema wraps the same payload"
        );
        out.push((case.to_owned(), "json value", value));
        let mut body = Vec::new();
        let tree = envelope::message_value(&message, &info(), block.as_ref(), NOW);
        avro_write::write_value(
            &mut body,
            &envelope::message_value_schema(),
            &tree,
            AvroLogicalTypes::Debezium,
        )
        .expect("fits");
        out.push((case.to_owned(), "avro value", hex(&body)));
    }
    out
}

/// What [`outputs`] must be; `{VERSION}` stands for the crate version (in
/// Avro, its length-prefixed bytes).
const EXPECTED: &[(&str, &str, &str)] = &[
    ("create in a transaction", "json key", "{\"id\":1}"),
    ("create in a transaction", "json value", "{\"before\":null,\"after\":{\"id\":1,\"naïve \\\"quoted\\\"\":\"line\\nbreak \\u0001\",\"raw\":\"AQL/\",\"ratio\":0.25},\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[\\\"4000\\\",\\\"5000\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"public\",\"table\":\"t\\\"ü\",\"txId\":4000000000,\"lsn\":5000,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":{\"id\":\"7:100\",\"total_order\":3,\"data_collection_order\":2},\"op\":\"c\",\"ts_ms\":1700000000123,\"ts_us\":1700000000123456,\"ts_ns\":1700000000123456000}"),
    ("create in a transaction Debezium", "avro value", "00020202186c696e650a627265616b200102060102ff02000000000000d03f{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2234303030222c2235303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02904e000000020a373a3130300604026302f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("create in a transaction Native", "avro value", "00020202186c696e650a627265616b200102060102ff02000000000000d03f{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2234303030222c2235303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02904e000000020a373a3130300604026302f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("update", "json key", "{\"id\":-2}"),
    ("update", "json value", "{\"before\":{\"id\":1,\"naïve \\\"quoted\\\"\":\"line\\nbreak \\u0001\",\"raw\":\"AQL/\",\"ratio\":0.25},\"after\":{\"id\":-2,\"naïve \\\"quoted\\\"\":\"line\\nbreak \\u0001\",\"raw\":\"AQL/\",\"ratio\":\"NaN\"},\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[null,\\\"5001\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"public\",\"table\":\"t\\\"ü\",\"txId\":4000000000,\"lsn\":5001,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":null,\"op\":\"u\",\"ts_ms\":1700000000123,\"ts_us\":1700000000123456,\"ts_ns\":1700000000123456000}"),
    ("update Debezium", "avro value", "020202186c696e650a627265616b200102060102ff02000000000000d03f020302186c696e650a627265616b200102060102ff02000000000000f87f{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021a5b6e756c6c2c2235303031225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02924e00000000027502f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("update Native", "avro value", "020202186c696e650a627265616b200102060102ff02000000000000d03f020302186c696e650a627265616b200102060102ff02000000000000f87f{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021a5b6e756c6c2c2235303031225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02924e00000000027502f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("delete, routed key", "json key", "{\"id\":3,\"__dbz__physicalTableIdentifier\":\"app.public.t_1\"}"),
    ("delete, routed key", "json value", "{\"before\":{\"id\":3,\"naïve \\\"quoted\\\"\":\"line\\nbreak \\u0001\",\"raw\":\"AQL/\",\"ratio\":0.25},\"after\":null,\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[\\\"1\\\",\\\"18446744073709551612\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"public\",\"table\":\"t\\\"ü\",\"txId\":4000000000,\"lsn\":-4,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":null,\"op\":\"d\",\"ts_ms\":1700000000123,\"ts_us\":1700000000123456,\"ts_ns\":1700000000123456000}"),
    ("delete, routed key Debezium", "avro value", "020602186c696e650a627265616b200102060102ff02000000000000d03f00{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f7002385b2231222c223138343436373434303733373039353531363132225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d020700000000026402f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("delete, routed key Native", "avro value", "020602186c696e650a627265616b200102060102ff02000000000000d03f00{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f7002385b2231222c223138343436373434303733373039353531363132225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d020700000000026402f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("truncate", "json key", ""),
    ("truncate", "json value", "{\"before\":null,\"after\":null,\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[\\\"5999\\\",\\\"6000\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"public\",\"table\":\"t\\\"ü\",\"txId\":4000000000,\"lsn\":6000,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":null,\"op\":\"t\",\"ts_ms\":1700000000123,\"ts_us\":1700000000123456,\"ts_ns\":1700000000123456000}"),
    ("truncate Debezium", "avro value", "0000{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2235393939222c2236303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02e05d00000000027402f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("truncate Native", "avro value", "0000{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2235393939222c2236303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02e05d00000000027402f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("snapshot read", "json key", "{\"id\":4}"),
    ("snapshot read", "json value", "{\"before\":null,\"after\":{\"id\":4,\"naïve \\\"quoted\\\"\":\"line\\nbreak \\u0001\",\"raw\":\"AQL/\",\"ratio\":0.25},\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"last_in_data_collection\",\"db\":\"shop\",\"sequence\":\"[null,\\\"7000\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"public\",\"table\":\"t\\\"ü\",\"txId\":4000000000,\"lsn\":7000,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":null,\"op\":\"r\",\"ts_ms\":1700000000123,\"ts_us\":1700000000123456,\"ts_ns\":1700000000123456000}"),
    ("snapshot read Debezium", "avro value", "00020802186c696e650a627265616b200102060102ff02000000000000d03f{VERSION}14706f737467726573716c0a6170702278b090abfef962002e6c6173745f696e5f646174615f636f6c6c656374696f6e0873686f70021a5b6e756c6c2c2237303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02b06d00000000027202f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("snapshot read Native", "avro value", "00020802186c696e650a627265616b200102060102ff02000000000000d03f{VERSION}14706f737467726573716c0a6170702278b090abfef962002e6c6173745f696e5f646174615f636f6c6c656374696f6e0873686f70021a5b6e756c6c2c2237303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0c7075626c6963087422c3bc0280a0d9e61d02b06d00000000027202f6a1abfef9620280898182838985060280a8aed8c7bfce972f"),
    ("transactional message", "json key", "{\"prefix\":\"audit \\\"p\\\"\"}"),
    ("transactional message", "json value", "{\"op\":\"m\",\"ts_ms\":1700000000123,\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[\\\"7999\\\",\\\"8000\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"\",\"table\":\"\",\"txId\":42,\"lsn\":8000,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":{\"id\":\"7:100\",\"total_order\":3,\"data_collection_order\":2},\"message\":{\"prefix\":\"audit \\\"p\\\"\",\"content\":\"aGVsbG8gAP8=\"}}"),
    ("transactional message", "avro value", "026d02f6a1abfef962{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2237393939222c2238303030225d0282f7f7808389850602d0e7f9a8bfbfce972f0000025402807d000000020a373a31303006040212617564697420227022021068656c6c6f2000ff"),
    ("non-transactional message", "json key", "{\"prefix\":\"audit \\\"p\\\"\"}"),
    ("non-transactional message", "json value", "{\"op\":\"m\",\"ts_ms\":1700000000123,\"source\":{\"version\":\"{VERSION}\",\"connector\":\"postgresql\",\"name\":\"app\\\"x\",\"ts_ms\":1699999999000,\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":\"[\\\"7999\\\",\\\"8000\\\"]\",\"ts_us\":1699999999000001,\"ts_ns\":1699999999000001000,\"schema\":\"\",\"table\":\"\",\"txId\":null,\"lsn\":8000,\"xmin\":null,\"origin\":null,\"origin_lsn\":null},\"transaction\":null,\"message\":{\"prefix\":\"audit \\\"p\\\"\",\"content\":\"aGVsbG8gAP8=\"}}"),
    ("non-transactional message", "avro value", "026d02f6a1abfef962{VERSION}14706f737467726573716c0a6170702278b090abfef962000a66616c73650873686f70021e5b2237393939222c2238303030225d0282f7f7808389850602d0e7f9a8bfbfce972f00000002807d000000000212617564697420227022021068656c6c6f2000ff"),
];

#[test]
fn records_are_the_pinned_bytes() {
    let version = crate::event::envelope::SOURCE_VERSION;
    let avro_version = {
        let mut prefixed = Vec::new();
        avro_write::write_value(
            &mut prefixed,
            &ConnectSchema::primitive(ConnectType::String),
            &Value::String(version.to_owned()),
            AvroLogicalTypes::Debezium,
        )
        .expect("a string");
        hex(&prefixed)
    };
    let outputs = outputs();
    assert_eq!(outputs.len(), EXPECTED.len());
    for ((case, what, rendering), (want_case, want_what, want)) in outputs.iter().zip(EXPECTED) {
        assert_eq!((case.as_str(), *what), (*want_case, *want_what));
        let want = if what.starts_with("avro") {
            want.replace("{VERSION}", &avro_version)
        } else {
            want.replace("{VERSION}", version)
        };
        assert_eq!(*rendering, want, "{case}: {what}");
    }
}

#[test]
#[ignore = "prints the outputs, to review a deliberate change"]
fn print_outputs() {
    for (case, what, rendering) in outputs() {
        println!("({case:?}, {what:?}, {rendering:?}),");
    }
}
