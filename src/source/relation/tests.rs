use super::*;
use crate::config::RunConfig;

fn cache(args: &[&str]) -> RelationCache {
    let mut argv = vec!["--pg-url", "postgres://u@h/d", "--topic-prefix", "app"];
    argv.extend_from_slice(args);
    let config = RunConfig::from_args(argv).expect("flags");
    let (selection, router) = config.selection().expect("selection");
    RelationCache::new("app", config.value_options(), TypeRegistry::default())
        .with_selection(Arc::new(selection), Arc::new(router))
}

/// `public.c` under REPLICA IDENTITY DEFAULT: `id int4` (primary key),
/// then NOT NULL `name text`, `d date`, `a int4[]`, `y numeric`, and a
/// nullable `x numeric`.
fn compat_relation() -> (Relation, Vec<CatalogColumn>) {
    let columns = [
        ("id", 23, true),
        ("name", 25, false),
        ("d", 1082, false),
        ("a", 1007, false),
        ("y", 1700, false),
        ("x", 1700, false),
    ];
    let relation = Relation {
        id: 8,
        namespace: "public".into(),
        name: "c".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|&(name, type_oid, is_key)| Column {
                is_key,
                name: name.into(),
                type_oid,
                type_modifier: -1,
            })
            .collect(),
    };
    let catalog = columns
        .iter()
        .map(|&(name, _, is_key)| CatalogColumn {
            name: name.into(),
            not_null: name != "x",
            primary_key_position: is_key.then_some(1),
            default_expression: None,
        })
        .collect();
    (relation, catalog)
}

/// Which columns of `table` are optional, by name.
fn optional(table: &TableSchema) -> Vec<&str> {
    table
        .columns
        .iter()
        .filter(|c| c.schema.optional)
        .map(|c| c.name.as_str())
        .collect()
}

#[test]
fn compat_before_images_carry_debeziums_zeros() {
    let (relation, catalog) = compat_relation();
    // The old key tuple of a delete: the key, every other column null.
    let old = Tuple::new([
        text("1"),
        Datum::Null,
        Datum::Null,
        Datum::Null,
        Datum::Null,
        Datum::Null,
    ]);

    let mut ours = cache(&[]);
    let table = ours.update(&relation, &catalog).expect("schema");
    assert_eq!(optional(&table), ["name", "d", "a", "y", "x"]);
    let row = ours.decode_row(&table, &old, Lsn::ZERO).expect("row");
    assert!(row[1..].iter().all(|v| *v == Value::Null), "{row:?}");

    let mut compat = cache(&["--debezium-compat", "before-image-unknown-columns"]);
    let table = compat.update(&relation, &catalog).expect("schema");
    assert_eq!(
        optional(&table),
        ["a", "y", "x"],
        "NOT NULL is required, except where the TOAST placeholder is null"
    );
    let row = compat.decode_row(&table, &old, Lsn::ZERO).expect("row");
    assert_eq!(
        row,
        [
            Value::Int32(1),
            Value::String(String::new()),
            Value::Int32(0),
            Value::Null,
            Value::Null,
            Value::Null,
        ]
    );

    let mut all = cache(&["--debezium-compat", "all"]);
    let table = all.update(&relation, &catalog).expect("schema");
    assert_eq!(
        optional(&table),
        ["y", "x"],
        "int4[] carries the placeholder codes"
    );
    let row = all.decode_row(&table, &old, Lsn::ZERO).expect("row");
    assert_eq!(row[3], Value::Array(Vec::new()));
}

#[test]
fn compat_values_of_special_dates_numerics_and_toasted_arrays() {
    let (relation, catalog) = compat_relation();
    let tuple = |d: &str, a: Datum, y: &str, x: &str| {
        Tuple::new([text("1"), text("n"), text(d), a, text(y), text(x)])
    };
    let infinite = tuple("infinity", text("{1}"), "1", "NaN");

    let mut ours = cache(&[]);
    let table = ours.update(&relation, &catalog).expect("schema");
    assert!(
        ours.decode_row(&table, &infinite, Lsn::ZERO).is_err(),
        "precise mode stops on NaN by default"
    );
    let row = ours
        .decode_row(
            &table,
            &tuple("-infinity", Datum::UnchangedToast, "1", "1"),
            Lsn::ZERO,
        )
        .expect("row");
    assert_eq!(row[2], Value::Int32(i32::MIN));
    assert_eq!(row[3], Value::Null, "the TOASTed int4[] is null");

    let mut compat = cache(&[
        "--debezium-compat",
        "numeric-nan-infinity,date-infinity",
        "--debezium-compat",
        "unchanged-toast-numeric-array",
    ]);
    let table = compat.update(&relation, &catalog).expect("schema");
    let row = compat
        .decode_row(&table, &infinite, Lsn::ZERO)
        .expect("NaN in an optional column");
    assert_eq!(row[2], Value::Int32(-2_147_472_692));
    assert_eq!(row[5], Value::Null, "Debezium's null for NaN");
    let read = compat
        .decode_read_row(&table, &infinite, Lsn::ZERO)
        .expect("a snapshot read");
    assert_eq!(read[2], Value::Int32(-622_191_234), "pgjdbc's infinity");
    let read = ours
        .decode_read_row(&table, &tuple("infinity", text("{1}"), "1", "1"), Lsn::ZERO)
        .expect("a snapshot read");
    assert_eq!(read[2], Value::Int32(i32::MAX), "ours whatever reads it");
    let row = compat
        .decode_row(
            &table,
            &tuple("-infinity", Datum::UnchangedToast, "1", "Infinity"),
            Lsn::ZERO,
        )
        .expect("row");
    assert_eq!(row[2], Value::Int32(-2_147_472_691));
    let Value::Array(codes) = &row[3] else {
        panic!("the placeholder's codes: {:?}", row[3]);
    };
    assert_eq!(codes.len(), DEFAULT_PLACEHOLDER_LEN);
    assert_eq!(codes[0], Value::Int32(i32::from(b'_')));

    // Under FULL a NOT NULL numeric is required.
    let mut full = relation.clone();
    full.replica_identity = ReplicaIdentity::Full;
    let mut all = cache(&["--debezium-compat", "all"]);
    let table = all.update(&full, &catalog).expect("schema");
    assert!(
        all.decode_row(
            &table,
            &tuple("1970-01-02", text("{}"), "NaN", "1"),
            Lsn::ZERO
        )
        .is_err(),
        "NaN in a required column fails, as Debezium's record does"
    );
}

const DEFAULT_PLACEHOLDER_LEN: usize = types::DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER.len();

/// `public.<name>` with int4 `id` (primary key), text `secret`, int4 `v`.
fn relation(name: &str) -> (Relation, Vec<CatalogColumn>) {
    let column = |name: &str, type_oid, is_key| Column {
        is_key,
        name: name.into(),
        type_oid,
        type_modifier: -1,
    };
    let relation = Relation {
        id: 7,
        namespace: "public".into(),
        name: name.into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column("id", 23, true),
            column("secret", 25, false),
            column("v", 23, false),
        ],
    };
    let catalog = vec![
        CatalogColumn {
            name: "id".into(),
            not_null: true,
            primary_key_position: Some(1),
            default_expression: None,
        },
        CatalogColumn {
            name: "secret".into(),
            not_null: false,
            primary_key_position: None,
            default_expression: None,
        },
        CatalogColumn {
            name: "v".into(),
            not_null: false,
            primary_key_position: None,
            default_expression: None,
        },
    ];
    (relation, catalog)
}

fn text(s: &str) -> Datum<'_> {
    Datum::Text(s.as_bytes())
}

#[test]
fn excluded_columns_leave_schema_and_rows() {
    let mut cache = cache(&["--column-exclude-list", "public\\.t\\.secret"]);
    let (relation, catalog) = relation("t");
    let table = cache.update(&relation, &catalog).expect("schema");
    let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "v"]);
    let tuple = Tuple::new([text("1"), Datum::UnchangedToast, text("5")]);
    let row = cache.decode_row(&table, &tuple, Lsn::ZERO).expect("row");
    assert_eq!(row, [Value::Int32(1), Value::Int32(5)]);
    assert!(
        cache.unchanged_columns(&table, &tuple).is_empty(),
        "an excluded TOASTed column is not reported"
    );
    let short = Tuple::new([text("1"), text("5")]);
    assert!(
        cache.decode_row(&table, &short, Lsn::ZERO).is_err(),
        "the tuple is checked against the wire width"
    );
}

#[test]
fn a_key_column_cannot_be_excluded() {
    let mut cache = cache(&["--column-include-list", "public\\.t\\.(secret|v)"]);
    let (relation, catalog) = relation("t");
    assert_eq!(
        cache.update(&relation, &catalog),
        Err(SelectionError::ExcludedKeyColumn {
            table: "public.t".into(),
            column: "id".into()
        })
    );
}

#[test]
fn routed_tables_get_the_key_field_and_routed_schema_names() {
    let mut cache = cache(&["--topic-route", "app\\.public\\.(t)=app.all_$1"]);
    let (relation, catalog) = relation("t");
    let table = cache.update(&relation, &catalog).expect("schema");
    assert_eq!(&*table.topic, "app.all_t");
    assert_eq!(
        table.routed_key_field,
        Some((
            "__dbz__physicalTableIdentifier".into(),
            "app.public.t".into()
        ))
    );
    let key = table.key_schema.as_ref().expect("key schema");
    assert_eq!(key.name.as_deref(), Some("app.all_t.Key"));
    let fields: Vec<&str> = key.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(fields, ["id", "__dbz__physicalTableIdentifier"]);
    assert_eq!(
        table.envelope_schema.name.as_deref(),
        Some("app.all_t.Envelope")
    );
    assert_eq!(
        table.row_schema.name.as_deref(),
        Some("app.public.t.Value"),
        "the row keeps its table's name, as ByLogicalTableRouter leaves it"
    );
}

#[test]
fn a_dropped_table_is_keyed_by_its_replica_identity_unless_full() {
    let mut cache = cache(&[]);
    let (mut relation, _) = relation("gone");
    let table = cache.update(&relation, &[]).expect("schema");
    assert_eq!(table.key_columns, [0], "DEFAULT: the identity is the key");
    assert!(table.columns.iter().all(|c| c.schema.optional));

    relation.replica_identity = ReplicaIdentity::Full;
    for c in &mut relation.columns {
        c.is_key = true;
    }
    let table = cache.update(&relation, &[]).expect("schema");
    assert!(
        table.key_columns.is_empty(),
        "FULL flags every column: the key is unknown, so null"
    );
}

#[test]
fn message_key_columns_override_the_primary_key() {
    let mut cache = cache(&["--message-key-columns", "public\\.t:v"]);
    let (relation, catalog) = relation("t");
    let table = cache.update(&relation, &catalog).expect("schema");
    assert_eq!(table.key_columns, [2]);
    let key = table.key_schema.as_ref().expect("key schema");
    assert!(
        key.fields[0].schema.optional,
        "a nullable chosen key column stays optional"
    );
}

#[test]
fn a_not_null_numeric_key_too_short_to_toast_is_required() {
    // numeric(p,s) type modifier: ((p << 16) | s) + VARHDRSZ.
    let numeric = |p: i32, s: i32| (p << 16 | s) + 4;
    let mut cache = cache(&[]);
    let (mut relation, catalog) = relation("t");
    relation.columns[0].type_oid = 1700;
    relation.columns[0].type_modifier = numeric(5, 2);
    let table = cache.update(&relation, &catalog).expect("schema");
    assert!(
        !table.columns[0].schema.optional,
        "numeric(5,2) is never moved out of line: always in the new row"
    );
    relation.columns[0].type_modifier = numeric(1000, 2);
    let table = cache.update(&relation, &catalog).expect("schema");
    assert!(
        table.columns[0].schema.optional,
        "numeric(1000,2) may arrive as unchanged TOAST, which NUMERIC cannot carry"
    );
}

#[test]
fn column_defaults_are_the_schema_defaults_of_key_and_row() {
    let mut cache = cache(&[]);
    let (relation, mut catalog) = relation("t");
    catalog[0].default_expression = Some("nextval('t_id_seq'::regclass)".into());
    catalog[2].default_expression = Some("42".into());
    let table = cache.update(&relation, &catalog).expect("schema");
    let defaults: Vec<_> = table
        .columns
        .iter()
        .map(|c| c.schema.default.clone())
        .collect();
    assert_eq!(
        defaults,
        [Some(Value::Int32(0)), None, Some(Value::Int32(42))],
        "a serial column declares Debezium's placeholder 0"
    );
    let key = table.key_schema.as_ref().expect("key schema");
    assert_eq!(key.fields[0].schema.default, Some(Value::Int32(0)));
}

#[test]
fn filtered_tables_are_remembered_as_excluded() {
    let mut cache = cache(&["--table-include-list", "public\\.other"]);
    let (relation, _) = relation("t");
    assert!(!cache.admits(&relation));
    assert!(cache.is_excluded(relation.id));
}
