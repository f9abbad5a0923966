//! The workload both connectors decode: the tables (created before the
//! slots), then the changes, ending with the stop message.
//!
//! Every column type `tests/types.rs` covers, with edge values (extremes,
//! special floats, BC dates, infinities, `24:00:00`, unicode and quoting,
//! NULLs, an explicit NULL in a column with a DEFAULT); updates and deletes
//! under REPLICA IDENTITY DEFAULT, FULL and USING INDEX; primary key changes;
//! keyless tables; unchanged TOAST values under both identities; a column
//! added while streaming; truncates of one and of two tables; transactional
//! and non-transactional logical decoding messages; a partitioned table
//! (a row moving between partitions); a multi-table transaction; outbox rows.
//! NUMERIC `NaN` is left out: pgcdc-kafka stops on it under the default
//! `decimal.handling.mode` (by design, `tests/types.rs`).

/// The prefix of the logical decoding message that ends the workload.
pub const STOP_PREFIX: &str = "dbz-diff-end";

/// One column per supported type (names as in `tests/types.rs`).
const COLUMNS: &[(&str, &str)] = &[
    ("c_bool", "boolean"),
    ("c_int2", "int2"),
    ("c_int4", "int4 DEFAULT 42"),
    ("c_int8", "int8"),
    ("c_float4", "float4"),
    ("c_float8", "float8"),
    ("c_numeric", "numeric(12,3) DEFAULT 1.5"),
    ("c_numeric_var", "numeric"),
    ("c_money", "money"),
    ("c_text", "text DEFAULT 'dflt'"),
    ("c_varchar", "varchar(10)"),
    ("c_char", "char(5)"),
    ("c_bytea", "bytea"),
    ("c_uuid", "uuid"),
    ("c_json", "json"),
    ("c_jsonb", "jsonb"),
    ("c_xml", "xml"),
    ("c_date", "date"),
    ("c_time", "time"),
    ("c_time3", "time(3)"),
    ("c_timetz", "timetz"),
    ("c_timestamp", "timestamp"),
    ("c_timestamp3", "timestamp(3)"),
    ("c_timestamptz", "timestamptz"),
    ("c_timestamptz3", "timestamptz(3)"),
    ("c_timestamptz0", "timestamptz(0)"),
    ("c_interval", "interval"),
    ("c_inet", "inet"),
    ("c_cidr", "cidr"),
    ("c_macaddr", "macaddr"),
    ("c_macaddr8", "macaddr8"),
    ("c_enum", "mood"),
    ("c_price", "price"),
    ("c_email", "email"),
    ("c_bit", "bit(1)"),
    ("c_bit8", "bit(8)"),
    ("c_varbit", "bit varying"),
    ("c_numeric_neg", "numeric(3,-2)"),
    ("c_char1", "\"char\""),
    ("c_name", "name"),
    ("c_oid", "oid"),
    ("c_tsvector", "tsvector"),
    ("c_int4range", "int4range"),
    ("c_tstzrange", "tstzrange"),
    ("c_int4_arr", "int4[]"),
    ("c_text_arr", "text[]"),
    ("c_numeric_arr", "numeric[]"),
    ("c_numeric62_arr", "numeric(6,2)[]"),
    ("c_date_arr", "date[]"),
    ("c_uuid_arr", "uuid[]"),
    ("c_bool_arr", "bool[]"),
    ("c_float8_arr", "float8[]"),
    ("c_bytea_arr", "bytea[]"),
    ("c_jsonb_arr", "jsonb[]"),
    ("c_timestamptz_arr", "timestamptz[]"),
    ("c_timetz_arr", "timetz[]"),
    ("c_time3_arr", "time(3)[]"),
    ("c_enum_arr", "mood[]"),
    ("c_price_arr", "price[]"),
    ("c_interval_arr", "interval[]"),
];

/// Columns of the contrib extensions, each used when it installs.
const EXTENSION_COLUMNS: &[(&str, &str, &str)] = &[
    ("citext", "c_citext", "citext"),
    ("ltree", "c_ltree", "ltree"),
    ("hstore", "c_hstore", "hstore"),
];

/// Rows of edge values for `all_types`: (id, [(column, SQL literal)]); a
/// column not named is NULL.
fn type_rows() -> Vec<(u32, Vec<(&'static str, &'static str)>)> {
    vec![
        (
            1,
            vec![
                ("c_bool", "true"),
                ("c_int2", "32767"),
                ("c_int4", "2147483647"),
                ("c_int8", "9223372036854775807"),
                ("c_float4", "'3.4028235e38'"),
                ("c_float8", "'1.7976931348623157e308'"),
                ("c_numeric", "123456789.123"),
                (
                    "c_numeric_var",
                    "'12345678901234567890123456789012345678901234567890.0123456789'",
                ),
                ("c_money", "'92233720368547758.07'"),
                (
                    "c_text",
                    "'emoji 😀👍🏽 CJK 漢字かな combining é ZWJ 👨‍👩‍👧'",
                ),
                ("c_varchar", "'ab😀cd漢字éx!'"),
                ("c_char", "'ab'"),
                ("c_bytea", "'\\xdeadbeef'"),
                ("c_uuid", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'"),
                ("c_json", r#"'{"b": 1,  "a": [1, 2.50, "x"]}'"#),
                ("c_jsonb", r#"'{"b": 1,  "a": [1, 2.50, "x"]}'"#),
                ("c_xml", r#"'<a b="1">text &amp; more</a>'"#),
                ("c_date", "'1970-01-02'"),
                ("c_time", "'23:59:59.999999'"),
                ("c_time3", "'23:59:59.999'"),
                ("c_timetz", "'03:04:05.123+02'"),
                ("c_timestamp", "'2024-02-29 12:34:56.789012'"),
                ("c_timestamp3", "'2024-02-29 12:34:56.789'"),
                ("c_timestamptz", "'2024-03-10 02:30:00-08'"),
                ("c_timestamptz3", "'2024-01-02 03:04:05.12+01'"),
                ("c_timestamptz0", "'2024-01-02 03:04:05.6+00'"),
                ("c_interval", "'1 year 2 mons 3 days 04:05:06.789'"),
                ("c_inet", "'192.168.0.1/24'"),
                ("c_cidr", "'10'"),
                ("c_macaddr", "'08-00-2B-01-02-03'"),
                ("c_macaddr8", "'08:00:2b:01:02:03'"),
                ("c_enum", "'ok'"),
                ("c_price", "12345678.9"),
                ("c_email", "'a@b.c'"),
                ("c_bit", "B'1'"),
                ("c_bit8", "B'10000001'"),
                ("c_varbit", "B'101'"),
                ("c_numeric_neg", "12345"),
                ("c_char1", "'a'"),
                ("c_name", "'some_name'"),
                ("c_oid", "4294967295"),
                ("c_tsvector", "'a fat cat'"),
                ("c_int4range", "'(1,10]'"),
                ("c_tstzrange", "'[2024-01-01 00:00:00+05,infinity)'"),
                ("c_int4_arr", "'{1,-2,2147483647,NULL}'"),
                (
                    "c_text_arr",
                    r#"ARRAY[$$a,b$$, $$c}d$$, $${e}$$, $$q"uote$$, $$back\slash$$, NULL, 'NULL', '', ' spaced ', '😀']::text[]"#,
                ),
                ("c_numeric_arr", "'{1.50,-2,NULL,0}'"),
                ("c_numeric62_arr", "'{1.5,-0.01}'"),
                (
                    "c_date_arr",
                    "ARRAY['1970-01-01', '2024-02-29', 'infinity', '-infinity', NULL, '0001-01-01 BC']::date[]",
                ),
                (
                    "c_uuid_arr",
                    "ARRAY['A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', NULL]::uuid[]",
                ),
                ("c_bool_arr", "'{t,f,NULL}'"),
                ("c_float8_arr", "'{1.5,NaN,-Infinity,NULL,-0}'"),
                (
                    "c_bytea_arr",
                    r"ARRAY['\x00ff'::bytea, '\x'::bytea, NULL]",
                ),
                (
                    "c_jsonb_arr",
                    r#"ARRAY['{"a": "x,}\"y"}'::jsonb, 'null'::jsonb, NULL]"#,
                ),
                (
                    "c_timestamptz_arr",
                    "ARRAY['2024-03-10 02:30:00-08', 'infinity', NULL]::timestamptz[]",
                ),
                ("c_timetz_arr", "'{03:04:05.123+02,NULL}'"),
                ("c_time3_arr", "'{12:34:56.789,24:00:00}'"),
                ("c_enum_arr", r#"'{sad,"very happy",NULL}'"#),
                ("c_price_arr", "'{1.5,NULL}'"),
                ("c_interval_arr", r#"'{"1 day",-00:00:01}'"#),
                ("c_citext", "'MiXeD'"),
                ("c_ltree", "'Top.Science.Astronomy'"),
                ("c_hstore", r#"'"k\"q"=>"v\\w", "é"=>"😀", "n"=>NULL'"#),
            ],
        ),
        (
            2,
            vec![
                ("c_bool", "false"),
                ("c_int2", "-32768"),
                ("c_int4", "-2147483648"),
                ("c_int8", "-9223372036854775808"),
                ("c_float4", "'-1.17549435e-38'"),
                ("c_float8", "'-2.2250738585072014e-308'"),
                ("c_numeric", "-0.001"),
                (
                    "c_numeric_var",
                    "'-98765432109876543210.98765432109876543210'",
                ),
                ("c_money", "'-92233720368547758.08'"),
                (
                    "c_text",
                    r#"E'it''s "quoted" \\ back\\\\slash\ttab\nnewline\r\x07bell'"#,
                ),
                ("c_varchar", "'x'"),
                ("c_char", "'漢字'"),
                ("c_bytea", "'\\x'"),
                ("c_uuid", "'00000000-0000-0000-0000-000000000000'"),
                ("c_json", r#"'"unicode \u00e9 😀"'"#),
                ("c_jsonb", "'[]'"),
                ("c_xml", "'<empty/>'"),
                ("c_date", "'0001-01-01 BC'"),
                ("c_time", "'24:00:00'"),
                ("c_time3", "'00:00:00'"),
                ("c_timetz", "'00:00:00-12'"),
                ("c_timestamp", "'4713-01-01 00:00:00 BC'"),
                ("c_timestamp3", "'1969-12-31 23:59:59.999'"),
                ("c_timestamptz", "'0001-01-01 00:00:00+00 BC'"),
                ("c_timestamptz3", "'1970-01-01 00:00:00+00'"),
                ("c_timestamptz0", "'2000-01-01 00:00:00.4+14'"),
                ("c_interval", "'-1 year -2 mons -3 days -04:05:06.789'"),
                ("c_inet", "'::ffff:1.2.3.4'"),
                ("c_cidr", "'2001:db8::/32'"),
                ("c_macaddr", "'ff:ff:ff:ff:ff:ff'"),
                ("c_macaddr8", "'00:00:00:00:00:00:00:00'"),
                ("c_enum", "'very happy'"),
                ("c_price", "-0.01"),
                ("c_email", "''"),
                ("c_bit", "B'0'"),
                ("c_bit8", "B'00000000'"),
                ("c_varbit", "B''"),
                ("c_numeric_neg", "-99949"),
                ("c_char1", "'\"'"),
                ("c_name", "''"),
                ("c_oid", "0"),
                ("c_tsvector", "''"),
                ("c_int4range", "'empty'"),
                ("c_tstzrange", "'(,)'"),
                ("c_int4_arr", "'{}'"),
                ("c_text_arr", "'{}'"),
                ("c_numeric_arr", "'{}'"),
                ("c_date_arr", "'{}'"),
                ("c_float8_arr", "'{Infinity}'"),
                ("c_interval_arr", "'{}'"),
                ("c_citext", "''"),
                ("c_hstore", "''"),
            ],
        ),
        (
            3,
            vec![
                ("c_float4", "'NaN'"),
                ("c_float8", "'-Infinity'"),
                ("c_date", "'infinity'"),
                ("c_timestamp", "'infinity'"),
                ("c_timestamp3", "'-infinity'"),
                ("c_timestamptz", "'-infinity'"),
                ("c_numeric_var", "0"),
                ("c_numeric", "0"),
            ],
        ),
        (
            4,
            vec![
                ("c_float4", "'Infinity'"),
                ("c_float8", "'NaN'"),
                ("c_date", "'-infinity'"),
                ("c_timestamp", "'-infinity'"),
                ("c_timestamptz", "'infinity'"),
                ("c_numeric_var", "'0.0000001'"),
            ],
        ),
    ]
}

/// The DDL, run before the slots are created: types, extensions (those
/// that install), tables with their replica identities and storage.
/// Returns the statements and the extensions used.
pub fn schema(has_extension: impl Fn(&str) -> bool) -> (Vec<String>, Vec<&'static str>) {
    let extensions: Vec<&str> = EXTENSION_COLUMNS
        .iter()
        .map(|(ext, _, _)| *ext)
        .filter(|ext| has_extension(ext))
        .collect();
    let mut columns: Vec<String> = COLUMNS.iter().map(|(n, t)| format!("{n} {t}")).collect();
    columns.extend(
        EXTENSION_COLUMNS
            .iter()
            .filter(|(ext, _, _)| extensions.contains(ext))
            .map(|(_, n, t)| format!("{n} {t}")),
    );
    let mut ddl: Vec<String> = [
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'very happy')",
        "CREATE DOMAIN price AS numeric(10,2)",
        "CREATE DOMAIN email AS text",
    ]
    .map(str::to_owned)
    .to_vec();
    ddl.push(format!(
        "CREATE TABLE all_types (id int PRIMARY KEY, {})",
        columns.join(", ")
    ));
    ddl.extend(
        [
            // NOT NULL columns under FULL: every event has their values.
            "CREATE TABLE required_types (id int PRIMARY KEY, n numeric(10,2) NOT NULL, \
             v numeric NOT NULL, t text NOT NULL, ts timestamptz NOT NULL, a int4[] NOT NULL, \
             e mood NOT NULL, nn int4)",
            "ALTER TABLE required_types REPLICA IDENTITY FULL",
            // A composite key of typed columns, declared out of column order.
            "CREATE TABLE typed_keys (k_uuid uuid, k_num numeric(5,2), k_ts timestamptz, v int, \
             PRIMARY KEY (k_num, k_uuid, k_ts))",
            "CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance int NOT NULL, \
             opened date NOT NULL DEFAULT '2020-01-01')",
            "CREATE TABLE audit (id int PRIMARY KEY, note text NOT NULL, amount numeric(8,2))",
            "ALTER TABLE audit REPLICA IDENTITY FULL",
            "CREATE TABLE by_index (a int NOT NULL, code text NOT NULL, v int)",
            "CREATE UNIQUE INDEX by_index_code ON by_index (code)",
            "ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_code",
            "CREATE TABLE nokey (a int, b text)",
            "CREATE TABLE nokey_full (a int, b text)",
            "ALTER TABLE nokey_full REPLICA IDENTITY FULL",
            "CREATE TABLE docs (id int PRIMARY KEY, body text, tags int4[], blob bytea, \
             j jsonb, words text[], counter int)",
            "CREATE TABLE docs_full (id int PRIMARY KEY, body text, tags int4[], blob bytea, \
             j jsonb, words text[], counter int)",
            "ALTER TABLE docs_full REPLICA IDENTITY FULL",
            "CREATE TABLE measurements (id int, region text, v int, PRIMARY KEY (id, region)) \
             PARTITION BY LIST (region)",
            "CREATE TABLE measurements_eu PARTITION OF measurements FOR VALUES IN ('eu')",
            "CREATE TABLE measurements_us PARTITION OF measurements FOR VALUES IN ('us')",
            "CREATE TABLE trunc_a (id int PRIMARY KEY, v text)",
            "CREATE TABLE trunc_b (id int PRIMARY KEY, v text)",
            "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, \
             aggregateid text NOT NULL, type text NOT NULL, payload jsonb)",
        ]
        .map(str::to_owned),
    );
    for table in ["docs", "docs_full"] {
        for column in ["body", "tags", "blob", "j", "words"] {
            ddl.push(format!(
                "ALTER TABLE {table} ALTER COLUMN {column} SET STORAGE EXTERNAL"
            ));
        }
    }
    (ddl, extensions)
}

/// The changes, in order, each a statement or a transaction; `outbox_type`
/// is the outbox rows' aggregate type (their topic is
/// `outbox.event.<outbox_type>`).
pub fn changes(extensions: &[&str], outbox_type: &str) -> Vec<String> {
    let mut sql = Vec::new();
    let ext_columns: Vec<&str> = EXTENSION_COLUMNS
        .iter()
        .filter(|(ext, _, _)| !extensions.contains(ext))
        .map(|(_, column, _)| *column)
        .collect();
    for (id, cells) in type_rows() {
        let cells: Vec<_> = cells
            .into_iter()
            .filter(|(c, _)| !ext_columns.contains(c))
            .collect();
        let names: Vec<&str> = cells.iter().map(|(c, _)| *c).collect();
        let values: Vec<&str> = cells.iter().map(|(_, v)| *v).collect();
        sql.push(format!(
            "INSERT INTO all_types (id, {}) VALUES ({id}, {})",
            names.join(", "),
            values.join(", ")
        ));
    }
    // An explicit NULL in the columns with a DEFAULT, then the defaults.
    sql.push(
        "INSERT INTO all_types (id, c_int4, c_numeric, c_text) VALUES (5, NULL, NULL, NULL)".into(),
    );
    sql.push("INSERT INTO all_types (id) VALUES (6)".into());
    sql.extend(
        [
            "UPDATE all_types SET c_text = 'changed', c_float4 = 1.1 WHERE id = 1",
            "DELETE FROM all_types WHERE id = 2",
            "UPDATE all_types SET id = 7 WHERE id = 6",
            "INSERT INTO required_types VALUES (1, 1.5, 2.25, 't', '2024-01-01 00:00:00+00', '{1}', \
             'ok', NULL)",
            "UPDATE required_types SET t = 'u', nn = 3 WHERE id = 1",
            "DELETE FROM required_types WHERE id = 1",
            "INSERT INTO typed_keys VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', -1.5, \
             '2024-03-10 02:30:00-08', 1)",
            "UPDATE typed_keys SET v = 2",
            "UPDATE typed_keys SET k_num = 2.25",
            "DELETE FROM typed_keys",
            // REPLICA IDENTITY DEFAULT: key-only before-images.
            "INSERT INTO accounts VALUES (1, 'ann', 10), (2, 'bob', 20)",
            "UPDATE accounts SET balance = 11 WHERE id = 1",
            "DELETE FROM accounts WHERE id = 2",
            "UPDATE accounts SET id = 100 WHERE id = 1",
            // A column added while streaming.
            "ALTER TABLE accounts ADD COLUMN note text DEFAULT 'n'",
            "INSERT INTO accounts VALUES (3, 'cy', 30, '2021-02-03', 'hello')",
            "UPDATE accounts SET note = NULL WHERE id = 100",
            // REPLICA IDENTITY FULL: whole before-images, and a key change.
            "INSERT INTO audit VALUES (1, 'first', 1.5), (2, 'second', NULL)",
            "UPDATE audit SET note = 'first, again' WHERE id = 1",
            "UPDATE audit SET id = 10 WHERE id = 2",
            "DELETE FROM audit WHERE id = 1",
            // REPLICA IDENTITY USING INDEX, no primary key.
            "INSERT INTO by_index VALUES (1, 'a', 1)",
            "UPDATE by_index SET v = 2 WHERE code = 'a'",
            "UPDATE by_index SET code = 'b' WHERE code = 'a'",
            "DELETE FROM by_index WHERE code = 'b'",
            // No key: inserts only under DEFAULT; everything under FULL.
            "INSERT INTO nokey VALUES (1, 'x'), (1, 'x'), (NULL, NULL)",
            "INSERT INTO nokey_full VALUES (1, 'x'), (2, 'y')",
            "UPDATE nokey_full SET b = 'z' WHERE a = 1",
            "DELETE FROM nokey_full WHERE a = 2",
        ]
        .map(str::to_owned),
    );
    // TOAST: values stored out of line, then updates that leave them alone.
    for table in ["docs", "docs_full"] {
        sql.push(format!(
            "INSERT INTO {table} SELECT 1, repeat('x', 10000), \
             array(SELECT generate_series(1, 3000)), decode(repeat('ab', 5000), 'hex'), \
             jsonb_build_object('k', repeat('j', 5000)), array_fill('w'::text || repeat('v', 30), ARRAY[300]), 0"
        ));
        sql.push(format!("UPDATE {table} SET counter = 1 WHERE id = 1"));
        sql.push(format!(
            "UPDATE {table} SET body = repeat('y', 9000), counter = 2 WHERE id = 1"
        ));
        sql.push(format!("DELETE FROM {table} WHERE id = 1"));
    }
    sql.extend(
        [
            // A partitioned table; an update moving a row to the other partition.
            "INSERT INTO measurements VALUES (1, 'eu', 10), (2, 'us', 20)",
            "UPDATE measurements SET v = 11 WHERE id = 1",
            "UPDATE measurements SET region = 'us' WHERE id = 1",
            "DELETE FROM measurements WHERE id = 2",
            // Truncates: of one table, then of two in one statement.
            "INSERT INTO trunc_a VALUES (1, 'a')",
            "INSERT INTO trunc_b VALUES (1, 'b')",
            "TRUNCATE trunc_a",
            "TRUNCATE trunc_a, trunc_b",
            // Logical decoding messages, in and outside a transaction.
            "SELECT pg_logical_emit_message(true, 'audit', 'in a transaction')",
            "SELECT pg_logical_emit_message(false, 'heartbeat', '\\x00ff'::bytea)",
            "SELECT pg_logical_emit_message(true, 'empty', '')",
            // One transaction over several tables and a message.
            "BEGIN; INSERT INTO accounts VALUES (4, 'dee', 40, '2022-01-01', NULL); \
             UPDATE audit SET amount = 99.99 WHERE id = 10; \
             SELECT pg_logical_emit_message(true, 'in-tx', 'between rows'); \
             DELETE FROM accounts WHERE id = 3; COMMIT",
        ]
        .map(str::to_owned),
    );
    sql.push(format!(
        "INSERT INTO outbox VALUES \
         ('11111111-1111-1111-1111-111111111111', '{outbox_type}', 'o-1', 'OrderCreated', \
          '{{\"id\": 1, \"items\": [\"a\", \"b\"]}}'), \
         ('22222222-2222-2222-2222-222222222222', '{outbox_type}', 'o-2', 'OrderCreated', NULL)"
    ));
    sql.push("DELETE FROM outbox".into());
    sql.push(format!(
        "SELECT pg_logical_emit_message(true, '{STOP_PREFIX}', 'end')"
    ));
    sql
}
