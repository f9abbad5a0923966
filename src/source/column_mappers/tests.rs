//! Expected hashes were computed by Java 25's `MessageDigest` over the salt's
//! bytes and either `String.getBytes()` (v2) or `ObjectOutputStream.writeObject`
//! of the string (v1), as Debezium's `MaskStrings` does.

use super::*;

fn options() -> ColumnMapperOptions {
    ColumnMapperOptions::default()
}

fn column(name: &str, oid: u32, modifier: i32) -> SourceColumn {
    let ty = PgType::from_builtin_oid(oid).expect("a built-in type");
    SourceColumn::new(name, oid, &ty, modifier, &TypeRegistry::new())
}

fn mapping(mappers: &ColumnMappers, c: SourceColumn) -> ColumnMapping {
    mappers
        .mapping_for("public", "t", c)
        .expect("a rule matches")
}

const TEXT: u32 = 25;
const VARCHAR: u32 = 1043;
const INT4: u32 = 23;
const BYTEA: u32 = 17;
const NUMERIC: u32 = 1700;

#[test]
fn hashes_match_javas_v1_and_v2() {
    let cases = [
        ("SHA-256", "CzQMA0cB5K", "hello",
         "b4d39ab0d198fb4cac8b2f023da74f670bcaf192dcc79b5d6361b7ae6b2fafdf",
         "c4bf2f9ebc99b7f64add45103e81eb4ca483649064e3e1398b21f41786360c7b"),
        ("SHA-256", "CzQMA0cB5K", "Zürich 🚀\u{0}x",
         "6831bafddeacbff5f76787d4a643f4a78059a52077d02192d5b40509276ef330",
         "672b68afec5ed8029eabe36098c24d591cfe5910342f307b7bbcff67a90b6a09"),
        ("MD5", "s", "abc", "036d80be85737468cd2dfe3fcb6a7cc7", "76381ab96651850f13177e1681a4048d"),
        ("sha-384", "x", "",
         "9e673ecbfa2d7cf4c4212375e1b8dfa20eaaae658cb1e5f217fdb08f11598d74dd563af8049f9b64e8578d2b108a51e4",
         "d752c2c51fba0e29aa190570a9d4253e44077a058d3297fa3a5630d5bd012622f97c28acaed313b5c83bb990caa7da85"),
    ];
    for (algorithm, salt, value, v1, v2) in cases {
        let mappers = ColumnMappers::new(&ColumnMapperOptions {
            column_mask_hash: vec![format!("{algorithm}:{salt}=public.t.v1")],
            column_mask_hash_v2: vec![format!("{algorithm}:{salt}=public.t.v2")],
            ..options()
        })
        .expect("valid hash rules");
        let hashed = |name: &str| {
            mapping(&mappers, column(name, TEXT, -1)).apply(Value::String(value.to_owned()))
        };
        assert_eq!(
            hashed("v1"),
            Value::String(v1.to_owned()),
            "{algorithm} v1 of {value:?}"
        );
        assert_eq!(
            hashed("v2"),
            Value::String(v2.to_owned()),
            "{algorithm} v2 of {value:?}"
        );
    }
}

#[test]
fn a_salt_may_hold_an_equals_sign() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        column_mask_hash_v2: vec!["SHA-512:pepper=1=public.t.c".to_owned()],
        ..options()
    })
    .expect("valid");
    assert_eq!(
        mapping(&mappers, column("c", TEXT, -1)).apply(Value::String("long".to_owned())),
        Value::String("65fbd82d3fc8236017a25e0c09dbbfc5c7f6c822814932a267678fc6738ea0b1de96b8fddc15d8ac6af45e749be57a3cc3b222e02a3e7b3ec06b291a3716a2e9".to_owned())
    );
}

#[test]
fn a_hash_is_cut_to_the_column_length_and_null_stays_null() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        column_mask_hash_v2: vec!["SHA-256:CzQMA0cB5K=public.t.c".to_owned()],
        ..options()
    })
    .expect("valid");
    let varchar10 = mapping(&mappers, column("c", VARCHAR, 10 + 4));
    assert_eq!(
        varchar10.apply(Value::String("hello".to_owned())),
        Value::String("c4bf2f9ebc".to_owned())
    );
    assert_eq!(varchar10.apply(Value::Null), Value::Null);
    let mut schema = ConnectSchema::primitive(crate::event::value::ConnectType::String);
    varchar10.alter_schema(&mut schema);
    assert_eq!(
        schema.parameters.get("masked").map(String::as_str),
        Some("true")
    );
}

#[test]
fn a_mask_replaces_strings_and_null_but_not_other_types() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        column_mask_with: vec!["5=public\\.t\\.(c|n)".to_owned()],
        ..options()
    })
    .expect("valid");
    let text = mapping(&mappers, column("c", TEXT, -1));
    assert_eq!(
        text.apply(Value::String("secret".into())),
        Value::String("*****".into())
    );
    assert_eq!(text.apply(Value::Null), Value::String("*****".into()));
    let int = mapping(&mappers, column("n", INT4, -1));
    assert_eq!(int.apply(Value::Int32(7)), Value::Int32(7));
    let mut schema = ConnectSchema::primitive(crate::event::value::ConnectType::Int32);
    int.alter_schema(&mut schema);
    assert_eq!(
        schema.parameters.get("masked").map(String::as_str),
        Some("true")
    );
}

#[test]
fn truncation_counts_utf16_units_and_cuts_bytes() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        column_truncate_to: vec!["3=public.t.*".to_owned()],
        ..options()
    })
    .expect("valid");
    let text = mapping(&mappers, column("c", TEXT, -1));
    assert_eq!(
        text.apply(Value::String("abcdef".into())),
        Value::String("abc".into())
    );
    assert_eq!(
        text.apply(Value::String("aé🚀x".into())),
        Value::String("aé".into())
    );
    assert_eq!(
        text.apply(Value::String("ab".into())),
        Value::String("ab".into())
    );
    let bytes = mapping(&mappers, column("b", BYTEA, -1));
    assert_eq!(
        bytes.apply(Value::Bytes(vec![1, 2, 3, 4])),
        Value::Bytes(vec![1, 2, 3])
    );
    // varchar(3) is never longer than the cut: no parameter, no change.
    let short = mapping(&mappers, column("s", VARCHAR, 3 + 4));
    let mut schema = ConnectSchema::primitive(crate::event::value::ConnectType::String);
    short.alter_schema(&mut schema);
    assert!(schema.parameters.is_empty());
    text.alter_schema(&mut schema);
    assert_eq!(
        schema.parameters.get("truncateLength").map(String::as_str),
        Some("3")
    );
}

#[test]
fn the_first_matching_rule_is_the_only_one() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        column_mask_with: vec!["2=public.t.c".to_owned()],
        column_propagate_source_type: Some(".*".to_owned()),
        ..options()
    })
    .expect("valid");
    let c = mapping(&mappers, column("c", TEXT, -1));
    let mut schema = ConnectSchema::primitive(crate::event::value::ConnectType::String);
    c.alter_schema(&mut schema);
    assert_eq!(schema.parameters.keys().collect::<Vec<_>>(), ["masked"]);
}

#[test]
fn source_types_carry_pgjdbcs_length_and_scale() {
    let mappers = ColumnMappers::new(&ColumnMapperOptions {
        datatype_propagate_source_type: Some(
            "public.t.(numeric|int4|text|varchar|_numeric)".to_owned(),
        ),
        ..options()
    })
    .expect("valid");
    let params = |c: SourceColumn| {
        let mut schema = ConnectSchema::primitive(crate::event::value::ConnectType::String);
        mapping(&mappers, c).alter_schema(&mut schema);
        schema.parameters
    };
    let numeric = params(column("price", NUMERIC, ((10 << 16) | 2) + 4));
    assert_eq!(numeric["__debezium.source.column.type"], "NUMERIC");
    assert_eq!(numeric["__debezium.source.column.length"], "10");
    assert_eq!(numeric["__debezium.source.column.scale"], "2");
    assert_eq!(numeric["__debezium.source.column.name"], "price");
    let int = params(column("n", INT4, -1));
    assert_eq!(int["__debezium.source.column.length"], "10");
    assert_eq!(int["__debezium.source.column.scale"], "0");
    let text = params(column("t", TEXT, -1));
    assert_eq!(
        text["__debezium.source.column.length"], "2147483647",
        "pgjdbc's unknown length"
    );
    let array = params(column("a", 1231, ((6 << 16) | 2) + 4));
    assert_eq!(array["__debezium.source.column.type"], "_NUMERIC");
    assert_eq!(
        array["__debezium.source.column.length"], "6",
        "an array is measured as its element"
    );
    assert_eq!(array["__debezium.source.column.scale"], "2");
    assert_eq!(
        params(column("v", VARCHAR, 24))["__debezium.source.column.length"],
        "20"
    );
    assert!(mappers
        .mapping_for("public", "t", column("b", BYTEA, -1))
        .is_none());
}

#[test]
fn bad_rules_are_named() {
    let error = ColumnMappers::new(&ColumnMapperOptions {
        column_truncate_to: vec!["0=public.t.c".to_owned(), "x".to_owned()],
        column_mask_hash: vec![
            "SHA3-256:s=public.t.c".to_owned(),
            "SHA-256=public.t.c".to_owned(),
        ],
        column_propagate_source_type: Some("public.t.(".to_owned()),
        ..options()
    })
    .expect_err("invalid rules");
    let text = error.to_string();
    for needle in [
        "column-truncate-to",
        "SHA3-256",
        "ALGORITHM:SALT=COLUMNS",
        "column-propagate-source-type",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    assert_eq!(error.0.len(), 5, "{text}");
}
