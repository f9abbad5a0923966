//! Unit tests of type resolution, schemas and placeholders.

use super::*;

fn opts() -> ValueOptions {
    ValueOptions::default()
}

fn schema(oid: u32, typmod: i32) -> ConnectSchema {
    column_schema(&TypeRegistry::new().resolve(oid, -1), typmod, &opts())
}

fn numeric_typmod(p: i32, s: i32) -> i32 {
    ((p << 16) | (s & 0x7ff)) + 4
}

#[test]
fn primitive_types_map_like_debezium() {
    let cases: [(u32, ConnectType); 9] = [
        (16, ConnectType::Boolean),
        (21, ConnectType::Int16),
        (23, ConnectType::Int32),
        (20, ConnectType::Int64),
        (26, ConnectType::Int64),
        (700, ConnectType::Float32),
        (701, ConnectType::Float64),
        (17, ConnectType::Bytes),
        (25, ConnectType::String),
    ];
    for (oid, kind) in cases {
        let s = schema(oid, -1);
        assert_eq!(
            (s.kind, s.name.as_deref(), s.optional),
            (kind, None, false),
            "oid {oid}"
        );
    }
    for oid in [18, 19, 1042, 1043, 869, 650, 829, 774, 3904, 3910] {
        assert_eq!(
            schema(oid, -1),
            ConnectSchema::primitive(ConnectType::String),
            "oid {oid}"
        );
    }
}

#[test]
fn logical_names_and_versions() {
    let cases: [(u32, i32, ConnectType, &str); 14] = [
        (2950, -1, ConnectType::String, "io.debezium.data.Uuid"),
        (114, -1, ConnectType::String, "io.debezium.data.Json"),
        (3802, -1, ConnectType::String, "io.debezium.data.Json"),
        (142, -1, ConnectType::String, "io.debezium.data.Xml"),
        (3614, -1, ConnectType::String, "io.debezium.data.Tsvector"),
        (1082, -1, ConnectType::Int32, "io.debezium.time.Date"),
        (1083, 3, ConnectType::Int32, "io.debezium.time.Time"),
        (1083, 4, ConnectType::Int64, "io.debezium.time.MicroTime"),
        (1083, -1, ConnectType::Int64, "io.debezium.time.MicroTime"),
        (1114, 0, ConnectType::Int64, "io.debezium.time.Timestamp"),
        (
            1114,
            -1,
            ConnectType::Int64,
            "io.debezium.time.MicroTimestamp",
        ),
        (
            1184,
            3,
            ConnectType::String,
            "io.debezium.time.ZonedTimestamp",
        ),
        (1266, -1, ConnectType::String, "io.debezium.time.ZonedTime"),
        (
            1186,
            -1,
            ConnectType::Int64,
            "io.debezium.time.MicroDuration",
        ),
    ];
    for (oid, typmod, kind, name) in cases {
        let s = schema(oid, typmod);
        assert_eq!(
            (s.kind, s.name.as_deref(), s.version),
            (kind, Some(name), Some(1)),
            "oid {oid}({typmod})"
        );
        assert!(s.parameters.is_empty());
    }
    let interval = column_schema(
        &PgType::Interval,
        -1,
        &ValueOptions {
            interval_handling: IntervalHandling::String,
            ..opts()
        },
    );
    assert_eq!(interval.name.as_deref(), Some("io.debezium.time.Interval"));
    assert_eq!(interval.kind, ConnectType::String);
}

#[test]
fn numeric_schemas_follow_decimal_handling() {
    let s = schema(1700, numeric_typmod(10, 2));
    assert_eq!(s.kind, ConnectType::Bytes);
    assert_eq!(
        s.name.as_deref(),
        Some("org.apache.kafka.connect.data.Decimal")
    );
    assert_eq!(s.version, Some(1));
    assert_eq!(s.parameters.get("scale").map(String::as_str), Some("2"));
    assert_eq!(
        s.parameters
            .get("connect.decimal.precision")
            .map(String::as_str),
        Some("10")
    );

    let negative = schema(1700, numeric_typmod(3, -2));
    assert_eq!(
        negative.parameters.get("scale").map(String::as_str),
        Some("0")
    );
    assert_eq!(
        negative
            .parameters
            .get("connect.decimal.precision")
            .map(String::as_str),
        Some("5")
    );

    let variable = schema(1700, -1);
    assert_eq!(variable.kind, ConnectType::Struct);
    assert_eq!(
        variable.name.as_deref(),
        Some("io.debezium.data.VariableScaleDecimal")
    );
    assert_eq!(variable.version, Some(1));
    let fields: Vec<_> = variable
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.schema.kind))
        .collect();
    assert_eq!(
        fields,
        [("scale", ConnectType::Int32), ("value", ConnectType::Bytes)]
    );

    for (mode, kind) in [
        (DecimalHandling::Double, ConnectType::Float64),
        (DecimalHandling::String, ConnectType::String),
    ] {
        let o = ValueOptions {
            decimal_handling: mode,
            ..opts()
        };
        for typmod in [-1, numeric_typmod(10, 2)] {
            assert_eq!(
                column_schema(&PgType::Numeric, typmod, &o),
                ConnectSchema::primitive(kind)
            );
        }
        assert_eq!(
            column_schema(&PgType::Money, -1, &o),
            ConnectSchema::primitive(kind)
        );
    }

    let money = schema(790, -1);
    assert_eq!(
        money.name.as_deref(),
        Some("org.apache.kafka.connect.data.Decimal")
    );
    assert_eq!(money.parameters.len(), 1);
    assert_eq!(money.parameters.get("scale").map(String::as_str), Some("2"));
}

#[test]
fn bit_schemas() {
    assert_eq!(
        schema(1560, 1),
        ConnectSchema::primitive(ConnectType::Boolean)
    );
    assert_eq!(
        schema(1562, 1),
        ConnectSchema::primitive(ConnectType::Boolean)
    );
    let bits = schema(1560, 12);
    assert_eq!(bits.name.as_deref(), Some("io.debezium.data.Bits"));
    assert_eq!(
        bits.parameters.get("length").map(String::as_str),
        Some("12")
    );
    let varbit = schema(1562, -1);
    assert_eq!(
        varbit.parameters.get("length").map(String::as_str),
        Some("2147483647")
    );
}

#[test]
fn arrays_have_optional_elements_with_the_column_modifier() {
    let s = schema(1007, -1);
    assert_eq!(s.kind, ConnectType::Array);
    assert_eq!(
        s.items.as_deref(),
        Some(&ConnectSchema::primitive(ConnectType::Int32).optional())
    );
    let decimals = schema(1231, numeric_typmod(8, 3));
    let items = decimals.items.expect("numeric[] has items");
    assert!(items.optional);
    assert_eq!(items.parameters.get("scale").map(String::as_str), Some("3"));
    let times = schema(1183, 2);
    assert_eq!(
        times.items.and_then(|i| i.name).as_deref(),
        Some("io.debezium.time.Time")
    );
}

fn registry() -> TypeRegistry {
    let mut r = TypeRegistry::new();
    let rows = [
        (
            "16400",
            "mood",
            "enum",
            "0",
            "-1",
            "0",
            Some(r#"["sad","ok","happy, very"]"#),
        ),
        ("16401", "_mood", "array", "0", "-1", "16400", None),
        ("16402", "price", "domain", "1700", "655366", "0", None),
        ("16403", "_price", "array", "0", "-1", "16402", None),
        ("16404", "email", "domain", "25", "-1", "0", None),
        ("16405", "strict_email", "domain", "16404", "-1", "0", None),
        ("16406", "hstore", "other", "0", "-1", "0", None),
        ("16407", "_hstore", "array", "0", "-1", "16406", None),
        ("16408", "loop_a", "domain", "16409", "-1", "0", None),
        ("16409", "loop_b", "domain", "16408", "-1", "0", None),
        ("16410", "point3d", "other", "0", "-1", "0", None),
    ];
    for (oid, name, kind, base_oid, base_type_modifier, element_oid, enum_labels) in rows {
        let row = CatalogRow {
            oid,
            namespace: "public",
            name,
            kind,
            base_oid,
            base_type_modifier,
            element_oid,
            enum_labels,
        };
        r.add_catalog_row(&row).expect("valid catalog row");
    }
    r
}

#[test]
fn registry_resolves_user_types() {
    let r = registry();
    let mood = PgType::Enum {
        name: "mood".into(),
        labels: vec!["sad".into(), "ok".into(), "happy, very".into()],
    };
    assert_eq!(r.resolve(16400, -1), mood);
    assert_eq!(r.resolve(16401, -1), PgType::Array(Box::new(mood.clone())));
    let price = PgType::Modified {
        base: Box::new(PgType::Numeric),
        type_modifier: 655366,
    };
    assert_eq!(r.resolve(16402, -1), price);
    assert_eq!(r.resolve(16403, -1), PgType::Array(Box::new(price)));
    assert_eq!(r.resolve(16405, -1), PgType::Text);
    assert_eq!(r.resolve(16406, -1), PgType::Hstore);
    assert_eq!(
        r.resolve(16407, -1),
        PgType::Array(Box::new(PgType::Hstore))
    );
    assert_eq!(r.resolve(16408, -1), PgType::Unknown { oid: 16408 });
    assert_eq!(r.resolve(16410, -1), PgType::Unknown { oid: 16410 });
    assert_eq!(r.resolve(99999, -1), PgType::Unknown { oid: 99999 });
    assert!(r.is_known(16400) && r.is_known(23) && !r.is_known(99999));

    let enum_schema = column_schema(&r.resolve(16400, -1), -1, &opts());
    assert_eq!(enum_schema.name.as_deref(), Some("io.debezium.data.Enum"));
    assert_eq!(
        enum_schema.parameters.get("allowed").map(String::as_str),
        Some("sad,ok,happy, very")
    );
    let price_schema = column_schema(&r.resolve(16403, -1), -1, &opts());
    let items = price_schema.items.expect("array items");
    assert_eq!(items.parameters.get("scale").map(String::as_str), Some("2"));
    assert_eq!(
        items
            .parameters
            .get("connect.decimal.precision")
            .map(String::as_str),
        Some("10")
    );
    assert_eq!(
        column_schema(&r.resolve(16406, -1), -1, &opts())
            .name
            .as_deref(),
        Some("io.debezium.data.Json")
    );
    let unknown = column_schema(&r.resolve(16410, -1), -1, &opts());
    assert_eq!(
        unknown,
        ConnectSchema::primitive(ConnectType::String).optional()
    );
}

#[test]
fn bad_catalog_rows_are_rejected() {
    let mut r = TypeRegistry::new();
    let row = CatalogRow {
        oid: "16400",
        namespace: "public",
        name: "mood",
        kind: "enum",
        base_oid: "0",
        base_type_modifier: "-1",
        element_oid: "0",
        enum_labels: Some("{sad,ok}"),
    };
    let err = r.add_catalog_row(&row).expect_err("labels must be JSON");
    assert_eq!(err.field, "enum_labels");
    assert!(err
        .to_string()
        .starts_with("type catalog row for oid \"16400\" has an invalid enum_labels"));
    let err = r
        .add_catalog_row(&CatalogRow {
            kind: "composite",
            enum_labels: None,
            ..row
        })
        .expect_err("bad kind");
    assert_eq!(err.field, "kind");
    let err = r
        .add_catalog_row(&CatalogRow { oid: "x", ..row })
        .expect_err("bad oid");
    assert_eq!(err.field, "oid");
}

#[test]
fn builtin_array_oids_resolve_to_their_elements() {
    let pairs = [
        (1000, 16),
        (1001, 17),
        (1005, 21),
        (1007, 23),
        (1016, 20),
        (1009, 25),
        (1015, 1043),
        (1014, 1042),
        (1021, 700),
        (1022, 701),
        (1231, 1700),
        (1182, 1082),
        (1183, 1083),
        (1115, 1114),
        (1185, 1184),
        (1187, 1186),
        (1270, 1266),
        (2951, 2950),
        (199, 114),
        (3807, 3802),
        (1041, 869),
        (651, 650),
        (143, 142),
        (791, 790),
        (3905, 3904),
        (3927, 3926),
    ];
    for (array, element) in pairs {
        let element = PgType::from_builtin_oid(element).expect("element is built in");
        assert_eq!(
            PgType::from_builtin_oid(array),
            Some(PgType::Array(Box::new(element))),
            "oid {array}"
        );
    }
}

#[test]
fn display_names_the_type_with_its_modifier() {
    assert_eq!(
        PgType::Numeric.display(numeric_typmod(10, 2)),
        "numeric(10,2)"
    );
    assert_eq!(PgType::Numeric.display(-1), "numeric");
    assert_eq!(PgType::Timestamptz.display(3), "timestamptz(3)");
    assert_eq!(PgType::Varchar.display(24), "varchar(20)");
    assert_eq!(PgType::Array(Box::new(PgType::Int4)).display(-1), "int4[]");
}

#[test]
fn name_uuid_matches_java() {
    // java.util.UUID.nameUUIDFromBytes("__debezium_unavailable_value".getBytes())
    assert_eq!(
        name_uuid_from_bytes(DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER.as_bytes()),
        "b68a35a7-17ad-35b3-af2a-ae46edb4545a"
    );
}

#[test]
fn unavailable_values_per_type() {
    let o = opts();
    let p = DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER;
    let string = Value::String(p.to_owned());
    let r = TypeRegistry::new();
    for oid in [25, 1043, 1042, 114, 3802, 142, 3614] {
        assert_eq!(
            unavailable_value(&r.resolve(oid, -1), -1, &o),
            string,
            "oid {oid}"
        );
    }
    assert_eq!(
        unavailable_value(&PgType::Bytea, -1, &o),
        Value::Bytes(p.as_bytes().to_vec())
    );
    assert_eq!(
        unavailable_value(&PgType::Varbit, -1, &o),
        Value::Bytes(p.as_bytes().to_vec())
    );
    for oid in [1009, 1015, 1014, 199, 3807] {
        assert_eq!(
            unavailable_value(&r.resolve(oid, -1), -1, &o),
            Value::Array(vec![string.clone()]),
            "oid {oid}"
        );
    }
    assert_eq!(
        unavailable_value(&r.resolve(1001, -1), -1, &o),
        Value::Array(vec![Value::Bytes(p.as_bytes().to_vec())])
    );
    assert_eq!(
        unavailable_value(&r.resolve(2951, -1), -1, &o),
        Value::Array(vec![Value::String(
            "b68a35a7-17ad-35b3-af2a-ae46edb4545a".into()
        )])
    );
    assert_eq!(
        unavailable_value(&PgType::Hstore, -1, &o),
        Value::String(format!("{{\"{p}\":\"{p}\"}}"))
    );
    for oid in [1007, 1016, 1182, 1231, 1700, 1000, 1021, 1115] {
        assert_eq!(
            unavailable_value(&r.resolve(oid, -1), -1, &o),
            Value::Null,
            "oid {oid}"
        );
    }
    let string_mode = ValueOptions {
        decimal_handling: DecimalHandling::String,
        ..opts()
    };
    assert_eq!(
        unavailable_value(&PgType::Numeric, -1, &string_mode),
        string
    );
    let custom = ValueOptions {
        unavailable_value_placeholder: "~".into(),
        ..opts()
    };
    assert_eq!(
        unavailable_value(&PgType::Text, -1, &custom),
        Value::String("~".into())
    );
}

#[test]
fn binary_handling_changes_bytea_schemas() {
    for (mode, kind) in [
        (BinaryHandling::Bytes, ConnectType::Bytes),
        (BinaryHandling::Base64, ConnectType::String),
        (BinaryHandling::Base64UrlSafe, ConnectType::String),
        (BinaryHandling::Hex, ConnectType::String),
    ] {
        let o = ValueOptions {
            binary_handling: mode,
            ..opts()
        };
        assert_eq!(
            column_schema(&PgType::Bytea, -1, &o),
            ConnectSchema::primitive(kind),
            "{mode:?}"
        );
        let array = column_schema(&PgType::Array(Box::new(PgType::Bytea)), -1, &o);
        assert_eq!(
            array.items.as_deref(),
            Some(&ConnectSchema::primitive(kind).optional())
        );
        let p = DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER;
        let unavailable = unavailable_value(&PgType::Bytea, -1, &o);
        match mode {
            BinaryHandling::Bytes => assert_eq!(unavailable, Value::Bytes(p.into())),
            _ => assert_eq!(unavailable, Value::String(p.into())),
        }
    }
    // Bits are not binary data: the mode leaves them alone.
    let hex = ValueOptions {
        binary_handling: BinaryHandling::Hex,
        ..opts()
    };
    assert_eq!(
        column_schema(&PgType::Bit, 8, &hex).kind,
        ConnectType::Bytes
    );
}

/// Long on purpose: one table of every temporal type under each
/// `--time-precision` mode, read as Debezium's documentation lists them.
#[test]
fn time_precision_changes_temporal_schemas() {
    let with = |mode| ValueOptions {
        time_precision: mode,
        ..opts()
    };
    let named = |ty: &PgType, typmod: i32, mode| {
        let s = column_schema(ty, typmod, &with(mode));
        assert_eq!(s.version, Some(1));
        (s.kind, s.name.expect("a logical name"))
    };
    use ConnectType::{Int32, Int64};
    use TimePrecision::*;
    let cases: [(PgType, i32, TimePrecision, ConnectType, &str); 15] = [
        (PgType::Date, -1, Adaptive, Int32, "io.debezium.time.Date"),
        (PgType::Time, 3, Adaptive, Int32, "io.debezium.time.Time"),
        (
            PgType::Time,
            -1,
            Adaptive,
            Int64,
            "io.debezium.time.MicroTime",
        ),
        (
            PgType::Timestamp,
            3,
            Adaptive,
            Int64,
            "io.debezium.time.Timestamp",
        ),
        (
            PgType::Timestamp,
            6,
            Adaptive,
            Int64,
            "io.debezium.time.MicroTimestamp",
        ),
        (
            PgType::Date,
            -1,
            AdaptiveTimeMicroseconds,
            Int32,
            "io.debezium.time.Date",
        ),
        (
            PgType::Time,
            0,
            AdaptiveTimeMicroseconds,
            Int64,
            "io.debezium.time.MicroTime",
        ),
        (
            PgType::Time,
            3,
            AdaptiveTimeMicroseconds,
            Int64,
            "io.debezium.time.MicroTime",
        ),
        (
            PgType::Time,
            -1,
            AdaptiveTimeMicroseconds,
            Int64,
            "io.debezium.time.MicroTime",
        ),
        (
            PgType::Timestamp,
            3,
            AdaptiveTimeMicroseconds,
            Int64,
            "io.debezium.time.Timestamp",
        ),
        (
            PgType::Timestamp,
            -1,
            AdaptiveTimeMicroseconds,
            Int64,
            "io.debezium.time.MicroTimestamp",
        ),
        (
            PgType::Date,
            -1,
            Connect,
            Int32,
            "org.apache.kafka.connect.data.Date",
        ),
        (
            PgType::Time,
            -1,
            Connect,
            Int32,
            "org.apache.kafka.connect.data.Time",
        ),
        (
            PgType::Timestamp,
            0,
            Connect,
            Int64,
            "org.apache.kafka.connect.data.Timestamp",
        ),
        (
            PgType::Timestamp,
            -1,
            Connect,
            Int64,
            "org.apache.kafka.connect.data.Timestamp",
        ),
    ];
    for (ty, typmod, mode, kind, name) in cases {
        assert_eq!(
            named(&ty, typmod, mode),
            (kind, name.to_owned()),
            "{ty:?}({typmod}) in {mode:?}"
        );
    }
    // Zoned types are strings in every mode; arrays follow the mode.
    for mode in [Adaptive, AdaptiveTimeMicroseconds, Connect] {
        assert_eq!(
            named(&PgType::Timestamptz, -1, mode).1,
            "io.debezium.time.ZonedTimestamp"
        );
        assert_eq!(
            named(&PgType::Timetz, -1, mode).1,
            "io.debezium.time.ZonedTime"
        );
    }
    let times = column_schema(&PgType::Array(Box::new(PgType::Time)), -1, &with(Connect));
    assert_eq!(
        times.items.and_then(|i| i.name).as_deref(),
        Some("org.apache.kafka.connect.data.Time")
    );
}

#[test]
fn hstore_handling_changes_the_schema_and_placeholder() {
    let map = ValueOptions {
        hstore_handling: HstoreHandling::Map,
        ..opts()
    };
    let s = column_schema(&PgType::Hstore, -1, &map);
    assert_eq!(s.kind, ConnectType::Map);
    assert_eq!(s.name, None);
    assert_eq!(
        s.map.as_deref(),
        Some(&(
            ConnectSchema::primitive(ConnectType::String),
            ConnectSchema::primitive(ConnectType::String).optional()
        ))
    );
    let array = column_schema(&PgType::Array(Box::new(PgType::Hstore)), -1, &map);
    assert_eq!(
        array.items.map(|i| (i.kind, i.optional)),
        Some((ConnectType::Map, true))
    );
    let p = DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER;
    assert_eq!(
        unavailable_value(&PgType::Hstore, -1, &map),
        Value::Map(vec![(p.into(), Value::String(p.into()))])
    );
    assert_eq!(
        column_schema(&PgType::Hstore, -1, &opts()).name.as_deref(),
        Some("io.debezium.data.Json")
    );
}

#[test]
fn value_error_messages_are_actionable() {
    let e = ValueError::SpecialNumeric {
        type_name: "numeric(10,2)".into(),
        special: SpecialValue::NaN,
    };
    assert_eq!(
        e.to_string(),
        "a value of type numeric(10,2) is NaN, which a Connect decimal cannot represent \
         (--decimal-handling precise); restart with --decimal-handling double or \
         --decimal-handling string"
    );
    assert!(!e.is_retryable());
}

#[test]
fn short_numerics_are_never_toasted() {
    let toastable = |typmod| PgType::Numeric.can_be_toasted(typmod);
    assert!(
        !toastable(numeric_typmod(10, 2)),
        "3 digit groups: 14 bytes"
    );
    assert!(
        !toastable(numeric_typmod(28, 0)),
        "7 digit groups: 22 bytes"
    );
    assert!(
        !toastable(numeric_typmod(3, -2)),
        "a negative scale adds integer digits"
    );
    assert!(
        toastable(numeric_typmod(40, 4)),
        "10 digit groups: 28 bytes, longer than a pointer"
    );
    assert!(toastable(-1), "an unconstrained NUMERIC has no bound");
    let price = PgType::Modified {
        base: Box::new(PgType::Numeric),
        type_modifier: numeric_typmod(10, 2),
    };
    assert!(!price.can_be_toasted(-1), "a domain's own modifier counts");
    assert!(PgType::Text.can_be_toasted(-1));
    assert!(!PgType::Int4.can_be_toasted(-1));
}

#[test]
fn enums_are_found_inside_arrays_and_domains() {
    let mood = PgType::Enum {
        name: "mood".into(),
        labels: vec!["ok".into()],
    };
    let domain = PgType::Modified {
        base: Box::new(mood.clone()),
        type_modifier: -1,
    };
    for ty in [&mood, &domain, &PgType::Array(Box::new(domain.clone()))] {
        assert!(ty.holds_enum(), "{ty:?}");
    }
    for ty in [PgType::Text, PgType::Array(Box::new(PgType::Int4))] {
        assert!(!ty.holds_enum(), "{ty:?}");
    }
}
