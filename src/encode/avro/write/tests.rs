use std::sync::Arc;

use super::*;
use crate::encode::avro::schema::{avro_schema, DECIMAL_NAME};
use crate::encode::avro::value::avro_value;
use crate::event::value::Field;
use crate::event::{Op, SnapshotMarker, SourceInfo, TableSchema, UnmappedKey};
use crate::lsn::Lsn;

/// The bytes apache-avro writes for `value` (the tree path).
fn reference(schema: &ConnectSchema, value: &Value, logical: AvroLogicalTypes) -> Vec<u8> {
    let avro = avro_schema(schema, logical).expect("schema translates");
    let tree = avro_value(schema, value.clone(), logical).expect("value fits");
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&avro.parsed)
        .build()
        .expect("writer");
    let mut out = Vec::new();
    writer
        .write_value_ref(&mut out, &tree)
        .expect("apache-avro writes it");
    out
}

fn direct(
    schema: &ConnectSchema,
    value: &Value,
    logical: AvroLogicalTypes,
) -> Result<Vec<u8>, Unfit> {
    let mut out = Vec::new();
    write_value(&mut out, schema, value, logical).map(|()| out)
}

fn field(name: &str, schema: ConnectSchema) -> Field {
    Field {
        name: name.to_owned(),
        schema,
    }
}

fn named(kind: ConnectType, name: &str) -> ConnectSchema {
    ConnectSchema::named(kind, name)
}

/// A row with every kind of column, each required and optional.
fn row_schema() -> ConnectSchema {
    use ConnectType as C;
    let decimal = named(C::Bytes, DECIMAL_NAME)
        .with_parameter("scale", "2")
        .with_parameter("connect.decimal.precision", "10");
    let mut with_default = ConnectSchema::primitive(C::String).optional();
    with_default.default = Some(Value::String("d".into()));
    let kinds = vec![
        ("b", ConnectSchema::primitive(C::Boolean)),
        ("i8", ConnectSchema::primitive(C::Int8)),
        ("i16", ConnectSchema::primitive(C::Int16)),
        ("i32", ConnectSchema::primitive(C::Int32)),
        ("i64", ConnectSchema::primitive(C::Int64)),
        ("f32", ConnectSchema::primitive(C::Float32)),
        ("f64", ConnectSchema::primitive(C::Float64)),
        ("s", ConnectSchema::primitive(C::String)),
        ("bytes", ConnectSchema::primitive(C::Bytes)),
        ("dec", decimal),
        ("date", named(C::Int32, "io.debezium.time.Date")),
        ("time", named(C::Int32, "io.debezium.time.Time")),
        ("micro_time", named(C::Int64, "io.debezium.time.MicroTime")),
        ("ts", named(C::Int64, "io.debezium.time.Timestamp")),
        (
            "micro_ts",
            named(C::Int64, "io.debezium.time.MicroTimestamp"),
        ),
        ("zoned", named(C::String, "io.debezium.time.ZonedTimestamp")),
        ("uuid", named(C::String, "io.debezium.data.Uuid")),
        (
            "tags",
            ConnectSchema::array(ConnectSchema::primitive(C::Int32).optional()),
        ),
        (
            "attrs",
            ConnectSchema::map(
                ConnectSchema::primitive(C::String),
                ConnectSchema::primitive(C::String).optional(),
            ),
        ),
    ];
    let mut fields = Vec::new();
    for (name, schema) in kinds {
        fields.push(field(&format!("{name}_opt"), schema.clone().optional()));
        fields.push(field(name, schema));
    }
    fields.push(field("defaulted", with_default));
    ConnectSchema::structure("app.public.t.Value", fields)
}

fn row(seed: i64, nulls: bool) -> Value {
    let values = vec![
        Value::Boolean(seed % 2 == 0),
        Value::Int8(seed as i8),
        Value::Int16(-(seed as i16)),
        Value::Int32(seed as i32 * 1000),
        Value::Int64(seed.wrapping_mul(1 << 40)),
        Value::Float32(seed as f32 / 3.0),
        Value::Float64(-(seed as f64) / 7.0),
        Value::String(format!("naïve {seed} 😀")),
        Value::Bytes(vec![seed as u8, 0, 255]),
        Value::Bytes(vec![0xff, 0x38u8.wrapping_add(seed as u8)]),
        Value::Int32(-719_528 + seed as i32),
        Value::Int32(86_399_999),
        Value::Int64(86_399_999_999),
        Value::Int64(-1_000 * seed),
        Value::Int64(1_700_000_000_000_000 + seed),
        Value::String(if seed % 2 == 0 {
            "2024-02-29T23:59:59.123456Z".into()
        } else {
            "infinity".into()
        }),
        Value::String("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
        Value::Array(
            (0..seed % 4)
                .map(|i| Value::Int32(i as i32))
                .chain([Value::Null])
                .collect(),
        ),
        // One entry: apache-avro writes a map's entries in hash order.
        Value::Map(vec![("k".into(), Value::String("v".into()))]),
    ];
    let schema = row_schema();
    let mut fields = Vec::new();
    let mut names = schema.fields.iter().map(|f| f.name.clone());
    for value in values {
        let optional = if nulls { Value::Null } else { value.clone() };
        fields.push((names.next().unwrap(), optional));
        fields.push((names.next().unwrap(), value));
    }
    fields.push((
        names.next().unwrap(),
        if nulls {
            Value::Null
        } else {
            Value::String("x".into())
        },
    ));
    Value::Struct(fields)
}

#[test]
fn rows_are_the_bytes_apache_avro_writes() {
    let schema = row_schema();
    for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
        for seed in [0, 1, 2, 3, 63, 64, 127, -5] {
            for nulls in [false, true] {
                let value = row(seed, nulls);
                assert_eq!(
                    direct(&schema, &value, logical),
                    Ok(reference(&schema, &value, logical)),
                    "{logical:?} seed {seed} nulls {nulls}"
                );
                let optional = schema.clone().optional();
                assert_eq!(
                    direct(&optional, &value, logical),
                    Ok(reference(&optional, &value, logical))
                );
                assert_eq!(
                    direct(&optional, &Value::Null, logical),
                    Ok(reference(&optional, &Value::Null, logical))
                );
            }
        }
    }
}

#[test]
fn maps_read_back_whole() {
    let schema = ConnectSchema::map(
        ConnectSchema::primitive(ConnectType::String),
        ConnectSchema::primitive(ConnectType::Int64).optional(),
    );
    let entries: Vec<(String, Value)> = (0..70)
        .map(|i| {
            (
                format!("k{i}"),
                if i % 3 == 0 {
                    Value::Null
                } else {
                    Value::Int64(i)
                },
            )
        })
        .collect();
    let logical = AvroLogicalTypes::Debezium;
    let bytes = direct(&schema, &Value::Map(entries.clone()), logical).expect("fits");
    let avro = avro_schema(&schema, logical).expect("schema translates");
    let read = apache_avro::reader::datum::GenericDatumReader::builder(&avro.parsed)
        .build()
        .expect("reader")
        .read_value(&mut bytes.as_slice())
        .expect("apache-avro reads it");
    let expected = avro_value(&schema, Value::Map(entries), logical).expect("fits");
    assert_eq!(read, expected);
}

#[test]
fn longs_are_zigzag_varints() {
    let long = ConnectSchema::primitive(ConnectType::Int64);
    for n in [
        0,
        -1,
        1,
        63,
        -64,
        64,
        8191,
        -8192,
        i64::MAX,
        i64::MIN,
        1 << 35,
    ] {
        assert_eq!(
            direct(&long, &Value::Int64(n), AvroLogicalTypes::Debezium),
            Ok(reference(
                &long,
                &Value::Int64(n),
                AvroLogicalTypes::Debezium
            )),
            "{n}"
        );
    }
}

#[test]
fn values_that_do_not_fit_are_left_to_the_tree_path() {
    let schema = row_schema();
    let logical = AvroLogicalTypes::Native;
    assert_eq!(direct(&schema, &Value::Int32(1), logical), Err(Unfit));
    let Value::Struct(mut fields) = row(1, false) else {
        unreachable!()
    };
    fields.pop();
    assert_eq!(direct(&schema, &Value::Struct(fields), logical), Err(Unfit));
    let zoned = named(ConnectType::String, "io.debezium.time.ZonedTimestamp");
    assert_eq!(
        direct(&zoned, &Value::String("yesterday".into()), logical),
        Err(Unfit)
    );
    assert!(avro_value(&zoned, Value::String("yesterday".into()), logical).is_err());
}

/// A table of [`row_schema`]'s columns, keyed by `key` (column
/// indexes; a key column `nullable` keeps its optional schema, as a
/// chosen key column may), its key routed when `routed` names a field.
fn table(key: &[(usize, bool)], routed: Option<&str>) -> TableSchema {
    use crate::event::{envelope, ColumnSchema};

    let columns: Vec<ColumnSchema> = row_schema()
        .fields
        .iter()
        .map(|f| ColumnSchema {
            name: f.name.clone(),
            type_oid: 0,
            type_modifier: -1,
            schema: f.schema.clone(),
        })
        .collect();
    let topic = "app.public.t";
    let table_row = envelope::row_schema(topic, &columns);
    let key_schema = (!key.is_empty()).then(|| {
        let key_columns: Vec<&ColumnSchema> = key.iter().map(|&(i, _)| &columns[i]).collect();
        let mut schema = envelope::key_schema(topic, &key_columns);
        for (field, &(_, nullable)) in schema.fields.iter_mut().zip(key) {
            field.schema.optional = nullable;
        }
        if let Some(name) = routed {
            schema
                .fields
                .push(field(name, ConnectSchema::primitive(ConnectType::String)));
        }
        schema
    });
    TableSchema {
        relation_id: 1,
        schema: "public".into(),
        table: "t".into(),
        qualified_name: "public.t".into(),
        topic: topic.into(),
        key_schema,
        envelope_schema: envelope::envelope_schema(topic, &table_row),
        row_schema: table_row,
        key_columns: key.iter().map(|&(i, _)| i).collect(),
        routed_key_field: routed.map(|name| (name.to_owned(), "app.public.t_1".to_owned())),
        columns,
    }
}

/// [`row`]'s values, as a row.
fn values(seed: i64, nulls: bool) -> Vec<Value> {
    match row(seed, nulls) {
        Value::Struct(fields) => fields.into_iter().map(|(_, v)| v).collect(),
        _ => unreachable!("a struct"),
    }
}

/// A change of `table`, streamed (transaction 9, at 0/1092), without a
/// previous commit and with the rows' own key values.
fn change(
    table: &Arc<TableSchema>,
    op: Op,
    before: Option<Vec<Value>>,
    after: Option<Vec<Value>>,
) -> ChangeEvent {
    ChangeEvent {
        table: Arc::clone(table),
        op,
        before,
        after,
        source: SourceInfo {
            origin: None,
            commit_time_micros: 1_700_000_000_000_000,
            xid: 9,
            lsn: Lsn::new(4242),
            last_commit_lsn: None,
            snapshot: SnapshotMarker::False,
        },
        unmapped_key: UnmappedKey::default(),
    }
}

#[test]
fn envelopes_are_the_bytes_of_the_tree_path() {
    use crate::event::envelope::envelope_value;

    let table = Arc::new(table(&[], None));
    let info = ConnectorInfo {
        name: "app".into(),
        db: "shop".into(),
        run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
    };
    let block = TransactionBlock {
        id: "7:100".into(),
        total_order: 3,
        data_collection_order: 2,
    };
    for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
        for (op, before, after, transaction) in [
            (Op::Create, None, Some(values(1, false)), None),
            (
                Op::Update,
                Some(values(2, true)),
                Some(values(3, false)),
                Some(&block),
            ),
            (Op::Delete, Some(values(4, false)), None, None),
            (Op::Truncate, None, None, None),
        ] {
            let mut event = change(&table, op, before, after);
            event.source.last_commit_lsn = transaction.map(|_| Lsn::new(4000));
            let schema = &table.envelope_schema;
            let mut out = Vec::new();
            write_envelope(
                &mut out,
                schema,
                &event,
                &info,
                transaction,
                1_700_000_000_500_000,
                logical,
            )
            .expect("fits");
            let tree = envelope_value(&event, &info, transaction, 1_700_000_000_500_000);
            assert_eq!(out, reference(schema, &tree, logical), "{logical:?} {op:?}");
        }
    }
}

#[test]
fn keys_are_the_bytes_of_the_tree_path() {
    use crate::event::envelope::key_value;

    // A bigint and a text key; one with a nullable column (null in the
    // rows with nulls) and a routed field; one of a single column. (The
    // row's odd columns are required, the even ones optional.)
    let tables = [
        table(&[(9, false), (15, false)], None),
        table(
            &[(15, false), (4, true)],
            Some("__dbz__physicalTableIdentifier"),
        ),
        table(&[(1, false)], None),
    ];
    for table in tables {
        let table = Arc::new(table);
        let schema = table.key_schema.clone().expect("a key");
        for logical in [AvroLogicalTypes::Debezium, AvroLogicalTypes::Native] {
            for (op, before, after, unmapped) in [
                (Op::Create, None, Some(values(1, false)), None),
                (
                    Op::Update,
                    Some(values(2, true)),
                    Some(values(3, true)),
                    None,
                ),
                (Op::Delete, Some(values(4, false)), None, None),
                // A column mapper changed the key columns in the row.
                (Op::Create, None, Some(values(5, false)), Some(6)),
            ] {
                let key_of = |seed| {
                    let row = values(seed, false);
                    table.key_columns.iter().map(|&i| row[i].clone()).collect()
                };
                let mut event = change(&table, op, before, after);
                event.unmapped_key.after = unmapped.map(key_of);
                let mut out = Vec::new();
                assert_eq!(write_key(&mut out, &schema, &event, logical), Ok(true));
                let tree = key_value(&event).expect("a key");
                assert_eq!(
                    out,
                    reference(&schema, &tree, logical),
                    "{logical:?} {op:?}"
                );
                // Rows 2 and 3 differ in every key column.
                assert_eq!(event.key_changed(), op == Op::Update);
            }
        }
        // No row, no key; a schema that is not the table's key is left
        // to the tree path.
        let none = change(&table, Op::Truncate, None, None);
        assert_eq!(
            write_key(&mut Vec::new(), &schema, &none, AvroLogicalTypes::Debezium),
            Ok(false)
        );
        let created = change(&table, Op::Create, None, Some(values(1, false)));
        assert_eq!(
            write_key(
                &mut Vec::new(),
                &row_schema(),
                &created,
                AvroLogicalTypes::Debezium
            ),
            Err(Unfit)
        );
    }
}
