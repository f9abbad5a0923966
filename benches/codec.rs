//! Micro-benchmarks of the per-change work, events per second on one core:
//! decoding a pgoutput Insert, turning its text values into Connect values,
//! and encoding the Debezium envelope and key as JSON (with and without
//! embedded schemas) and as Avro (the binary body; the registry is not on
//! the hot path). The row is workload (a)'s of the end-to-end benchmark:
//! bigint, 64 characters of text, int, timestamptz; and workload (e)'s
//! 50 columns in binary form (pgoutput's `binary` option, the default),
//! to Connect values and to an Avro body.
//!
//! `cargo bench --bench codec`

use std::hint::black_box;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pgcdc_kafka::config::AvroLogicalTypes;
use pgcdc_kafka::encode::avro::write::{write_envelope, write_value};
use pgcdc_kafka::encode::json::JsonEncoder;
use pgcdc_kafka::event::envelope::{key_value, ConnectorInfo};
use pgcdc_kafka::event::{ChangeEvent, Op, SnapshotMarker, SourceInfo, TableSchema};
use pgcdc_kafka::lsn::Lsn;
use pgcdc_kafka::source::pgoutput::{self, Column, LogicalMessage, Relation, ReplicaIdentity};
use pgcdc_kafka::source::relation::{CatalogColumn, RelationCache};
use pgcdc_kafka::source::types::{TypeRegistry, ValueOptions};

const RELATION_ID: u32 = 16_384;
const LSN: Lsn = Lsn::new(0x1_6B37_4D48);

fn relation() -> Relation {
    let column = |name: &str, type_oid, is_key| Column {
        is_key,
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
    };
    Relation {
        id: RELATION_ID,
        namespace: "public".into(),
        name: "bench".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column("id", 20, true),
            column("payload", 25, false),
            column("n", 23, false),
            column("ts", 1184, false),
        ],
    }
}

/// An Insert message as the walsender sends it (text format values).
fn insert_message() -> Bytes {
    let values: [&[u8]; 4] = [
        b"123456",
        b"e10adc3949ba59abbe56e057f20f883ef7c6b7a19bbd1a2c5ba0c9d8c1e4f7a2",
        b"456",
        b"2026-12-04 11:19:51.123456+00",
    ];
    let mut m = BytesMut::new();
    m.put_u8(b'I');
    m.put_u32(RELATION_ID);
    m.put_u8(b'N');
    m.put_u16(values.len() as u16);
    for v in values {
        m.put_u8(b't');
        m.put_u32(v.len() as u32);
        m.put_slice(v);
    }
    m.freeze()
}

/// Workload (e)'s table: an id, 16 `numeric(12,2)`, 16 `timestamptz`,
/// 9 `int` and 8 `text` columns.
fn wide_relation() -> Relation {
    let column = |name: String, type_oid, type_modifier| Column {
        is_key: name == "id",
        name,
        type_oid,
        type_modifier,
    };
    let mut columns = vec![column("id".into(), 20, -1)];
    let numeric_12_2 = ((12 << 16) | 2) + 4;
    columns.extend((0..16).map(|i| column(format!("d{i}"), 1700, numeric_12_2)));
    columns.extend((0..16).map(|i| column(format!("t{i}"), 1184, -1)));
    columns.extend((0..9).map(|i| column(format!("n{i}"), 23, -1)));
    columns.extend((0..8).map(|i| column(format!("s{i}"), 25, -1)));
    Relation {
        id: RELATION_ID + 1,
        namespace: "public".into(),
        name: "wide".into(),
        replica_identity: ReplicaIdentity::Default,
        columns,
    }
}

/// An Insert of a wide row, every value in its binary send format.
fn wide_insert_message() -> Bytes {
    let mut values: Vec<Vec<u8>> = vec![123_456i64.to_be_bytes().to_vec()];
    // numeric_send of 12345.67: 2 base-10000 digits before the point, 1 after.
    let numeric = [3u16, 1, 0, 2, 1, 2345, 6700];
    let numeric: Vec<u8> = numeric.iter().flat_map(|g| g.to_be_bytes()).collect();
    values.extend((0..16).map(|_| numeric.clone()));
    // 2026-12-04 11:19:51.123456 UTC, in µs since 2000-01-01.
    values.extend((0..16i64).map(|i| (838_207_191_123_456 + i).to_be_bytes().to_vec()));
    values.extend((0..9i32).map(|i| (456 + i).to_be_bytes().to_vec()));
    values.extend((0..8).map(|_| b"a line of text, thirty-odd bytes".to_vec()));
    let mut m = BytesMut::new();
    m.put_u8(b'I');
    m.put_u32(RELATION_ID + 1);
    m.put_u8(b'N');
    m.put_u16(values.len() as u16);
    for v in values {
        m.put_u8(b'b');
        m.put_u32(v.len() as u32);
        m.put_slice(&v);
    }
    m.freeze()
}

fn setup() -> (RelationCache, Arc<TableSchema>) {
    setup_table(relation())
}

fn setup_table(relation: Relation) -> (RelationCache, Arc<TableSchema>) {
    let mut relations =
        RelationCache::new("bench", ValueOptions::default(), TypeRegistry::default());
    let catalog: Vec<CatalogColumn> = relation
        .columns
        .iter()
        .map(|c| CatalogColumn {
            name: c.name.clone(),
            not_null: true,
            primary_key_position: c.is_key.then_some(1),
            default_expression: None,
        })
        .collect();
    let table = relations
        .update(&relation, &catalog)
        .expect("the relation is valid");
    (relations, table)
}

fn event(relations: &RelationCache, table: &Arc<TableSchema>) -> ChangeEvent {
    event_of(relations, table, &insert_message())
}

fn event_of(relations: &RelationCache, table: &Arc<TableSchema>, message: &Bytes) -> ChangeEvent {
    let LogicalMessage::Insert(insert) = pgoutput::decode(message, LSN).expect("decodes") else {
        unreachable!("an insert")
    };
    ChangeEvent {
        table: Arc::clone(table),
        op: Op::Create,
        before: None,
        after: Some(relations.decode_row(table, &insert.new, LSN).expect("row")),
        source: SourceInfo {
            origin: None,
            commit_time_micros: 1_764_847_191_123_456,
            xid: 771,
            lsn: LSN,
            last_commit_lsn: Some(Lsn::new(0x1_6B37_4C00)),
            snapshot: SnapshotMarker::False,
        },
        unmapped_key: Default::default(),
    }
}

fn info() -> ConnectorInfo {
    ConnectorInfo {
        name: "bench".into(),
        db: "shop".into(),
        run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
    }
}

fn decode(c: &mut Criterion) {
    let message = insert_message();
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(1));
    group.bench_function("pgoutput insert", |b| {
        b.iter(|| pgoutput::decode(black_box(&message), LSN).expect("decodes"))
    });
    let rows = [
        ("row values (text to Connect)", setup(), message),
        (
            "wide row values (binary to Connect)",
            setup_table(wide_relation()),
            wide_insert_message(),
        ),
    ];
    for (name, (relations, table), message) in rows {
        let LogicalMessage::Insert(insert) = pgoutput::decode(&message, LSN).expect("decodes")
        else {
            unreachable!("an insert")
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                relations
                    .decode_row(&table, black_box(&insert.new), LSN)
                    .expect("row")
            })
        });
    }
    group.finish();
}

fn encode(c: &mut Criterion) {
    let (relations, table) = setup();
    let event = event(&relations, &table);
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(1));
    for (name, schemas) in [("json with schemas", true), ("json without schemas", false)] {
        let mut encoder = JsonEncoder::uniform(info(), schemas);
        group.bench_function(name, |b| {
            b.iter(|| {
                let key = encoder.key(black_box(&event));
                let value = encoder.value(black_box(&event), None, 1_764_847_191_200_000);
                (key, value)
            })
        });
    }
    let key_schema = table.key_schema.clone().expect("a key");
    let info = info();
    group.bench_function("avro body", |b| {
        b.iter(|| avro_body(&table, &key_schema, &event, &info))
    });
    let (relations, table) = setup_table(wide_relation());
    let event = event_of(&relations, &table, &wide_insert_message());
    let key_schema = table.key_schema.clone().expect("a key");
    group.bench_function("wide avro body", |b| {
        b.iter(|| avro_body(&table, &key_schema, &event, &info))
    });
    group.finish();
}

fn avro_body(
    table: &TableSchema,
    key_schema: &pgcdc_kafka::event::value::ConnectSchema,
    event: &ChangeEvent,
    info: &ConnectorInfo,
) -> (Vec<u8>, Vec<u8>) {
    let mut key = Vec::with_capacity(64);
    let tree = key_value(black_box(event)).expect("a key");
    write_value(&mut key, key_schema, &tree, AvroLogicalTypes::Debezium).expect("fits");
    let mut value = Vec::with_capacity(256);
    write_envelope(
        &mut value,
        &table.envelope_schema,
        black_box(event),
        info,
        None,
        1_764_847_191_200_000,
        AvroLogicalTypes::Debezium,
    )
    .expect("fits");
    (key, value)
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
