//! Every column type the value layer supports, end to end against real
//! Postgres and Kafka: a table with one column per type, rows of edge values
//! (NULLs, extremes, special floats, BC dates, infinities, `24:00:00`,
//! non-UTC offsets, unicode, quoting, empty and NULL-holding arrays), each
//! value and each column's Connect schema compared with what Debezium 3.x
//! writes in its default modes (`/work/shared/DEBEZIUM_FORMAT.md`) or, where
//! Debezium is wrong, with the representation `src/source/types.rs` and
//! `src/source/types/text.rs` document.
//!
//! Every expected value here is worked out from the inserted literal by hand
//! (or by the small reference helpers at the top, which share no code with the
//! connector), never copied from the connector's output.
//!
//! Also: NUMERIC `NaN` under the default `--decimal-handling precise` stops the
//! connector with an error naming the column and the fix, without confirming
//! the failing change (a restart with `--decimal-handling string` delivers
//! it); the `double` / `string` decimal modes; a `timestamp(3)` near
//! Postgres's maximum; and types created or changed while streaming (a new
//! enum and domain, `ALTER COLUMN ... TYPE`, `ALTER TYPE ... ADD VALUE`).

mod common;

use std::time::Duration;

use base64::Engine;
use common::{consume, wait_until, Record, Running, Scenario, TIMEOUT};
use pgcdc_kafka::lsn::Lsn;
use pgcdc_kafka::pipeline::PipelineError;
use pgcdc_kafka::source::relation::RowErrorKind;
use pgcdc_kafka::source::types::ValueError;
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

// ---------------------------------------------------------------------------
// Reference helpers (independent of the connector's code).
// ---------------------------------------------------------------------------

/// Base64 (standard alphabet, padded), as Kafka Connect's JsonConverter writes bytes.
fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes of a Connect `Decimal`'s unscaled value: Java's
/// `BigInteger.toByteArray()`, i.e. the minimal big-endian two's complement,
/// of the signed decimal integer `signed_digits` (e.g. `"-1500"`).
///
/// Computed digit by digit on big-endian base-256 bytes (multiply by ten, add
/// the digit), then, for a negative number, complemented over one extra sign
/// byte (invert every bit, add one); finally leading bytes that only repeat the
/// sign are dropped. Worked by hand, for instance:
/// - `150` = 0x96: the top bit is set, so a 0x00 sign byte goes in front:
///   `00 96`, base64 of 00000000 10010110 = `000000 001001 0110(00)` = `AJY=`;
/// - `-1` = 0xFF = `/w==`; `-128` = 0x80 = `gA==`; `128` = `00 80` = `AIA=`;
/// - `1500` = 0x05DC = `000001 011101 1100(00)` = `Bdw=`; `0` = `00` = `AA==`.
///
/// (`decimal_reference_helpers_match_hand_computed_values` checks these.)
fn unscaled_bytes(signed_digits: &str) -> Vec<u8> {
    let (negative, digits) = match signed_digits.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, signed_digits),
    };
    assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    let mut bytes: Vec<u8> = vec![0];
    for d in digits.bytes() {
        let mut carry = u32::from(d - b'0');
        for byte in bytes.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            bytes.insert(0, carry as u8);
            carry >>= 8;
        }
    }
    bytes.insert(0, 0); // room for the sign bit
    if negative {
        for b in bytes.iter_mut() {
            *b = !*b;
        }
        for b in bytes.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
    }
    while bytes.len() > 1
        && ((bytes[0] == 0x00 && bytes[1] & 0x80 == 0)
            || (bytes[0] == 0xff && bytes[1] & 0x80 != 0))
    {
        bytes.remove(0);
    }
    bytes
}

/// Minimal two's complement of an `i128`, a second, independent route to the
/// same bytes (used to cross-check [`unscaled_bytes`]).
fn i128_bytes(v: i128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let mut start = 0;
    while start < 15
        && ((b[start] == 0x00 && b[start + 1] & 0x80 == 0)
            || (b[start] == 0xff && b[start + 1] & 0x80 != 0))
    {
        start += 1;
    }
    b[start..].to_vec()
}

/// A Connect `Decimal` in JSON: base64 of the unscaled value's bytes. The
/// scale is in the schema, so `unscaled` is the value times 10^scale.
fn dec(unscaled: &str) -> Json {
    Json::from(b64(&unscaled_bytes(unscaled)))
}

/// A `io.debezium.data.VariableScaleDecimal` value.
fn vsd(scale: i32, unscaled: &str) -> Json {
    json!({"scale": scale, "value": b64(&unscaled_bytes(unscaled))})
}

/// A JSON number parsed from its text by serde_json, so that the expected and
/// the received value go through the same float parser.
fn num(text: &str) -> Json {
    let n: Json = serde_json::from_str(text).expect("a JSON number");
    assert!(n.is_number(), "{text} is a number");
    n
}

/// A SQL string literal (standard_conforming_strings: only `'` is special).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// Debezium's MicroDuration month: 365.25 / 12 = 30.4375 days = 2,629,800 s.
const MICROS_PER_MONTH: i64 = 2_629_800 * MICROS_PER_SECOND;

/// Days since 1970-01-01, worked out by hand:
/// - 2024-02-29: 1970..2024 is 54 years with 13 leap days (1972..=2020), so
///   2024-01-01 is 54 * 365 + 13 = 19,723; then 31 (January) + 28 days = 19,782.
const DAYS_2024_02_29: i64 = 19_782;
/// - 0001-01-01 BC is the proleptic year 0: years 0..=1969 are 1970 years with
///   493 multiples of 4, less the 15 century years not divisible by 400
///   = 478 leap days: 1970 * 365 + 478 = 719,528 days before the epoch.
const DAYS_1_BC_01_01: i64 = -719_528;
/// - 4714-11-24 BC is Julian Day 0, Postgres's earliest date; the epoch is
///   Julian Day 2,440,588.
const DAYS_JULIAN_ZERO: i64 = -2_440_588;

fn hms_micros(h: i64, m: i64, s: i64, micros: i64) -> i64 {
    ((h * 60 + m) * 60 + s) * MICROS_PER_SECOND + micros
}

// ---------------------------------------------------------------------------
// Connect schemas as the JsonConverter writes them (a column's field schema
// without its "field" key). Every column of the test table is nullable, so
// every one is optional.
// ---------------------------------------------------------------------------

fn prim(kind: &str) -> Json {
    json!({"type": kind, "optional": true})
}

/// `schema` with the column DEFAULT Debezium declares (its JSON form).
fn with_default(mut schema: Json, default: Json) -> Json {
    schema["default"] = default;
    schema
}

/// A Debezium / Connect logical type: a primitive with `name` and version 1.
fn logical(kind: &str, name: &str) -> Json {
    json!({"type": kind, "optional": true, "name": name, "version": 1})
}

fn decimal_schema(scale: u32, precision: Option<u32>) -> Json {
    let mut parameters = json!({"scale": scale.to_string()});
    if let Some(p) = precision {
        parameters["connect.decimal.precision"] = Json::from(p.to_string());
    }
    json!({
        "type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1, "parameters": parameters,
    })
}

/// Debezium's VariableScaleDecimal, with its `"doc"`.
fn vsd_schema() -> Json {
    json!({
        "type": "struct",
        "fields": [
            {"type": "int32", "optional": false, "field": "scale"},
            {"type": "bytes", "optional": false, "field": "value"},
        ],
        "optional": true,
        "name": "io.debezium.data.VariableScaleDecimal",
        "version": 1,
        "doc": "Variable scaled decimal",
    })
}

fn array_of(items: Json) -> Json {
    json!({"type": "array", "items": items, "optional": true})
}

// ---------------------------------------------------------------------------
// Running the connector in-process with access to its result.
// ---------------------------------------------------------------------------

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

/// The fields of the row struct (`after`) in a record's value schema.
fn after_fields(record: &Record) -> &Vec<Json> {
    let schema = &record.value.as_ref().expect("not a tombstone")["schema"];
    schema["fields"]
        .as_array()
        .expect("envelope fields")
        .iter()
        .find(|f| f["field"] == "after")
        .expect("after field")["fields"]
        .as_array()
        .expect("row fields")
}

fn field_schema<'a>(record: &'a Record, column: &str) -> &'a Json {
    after_fields(record)
        .iter()
        .find(|f| f["field"] == column)
        .unwrap_or_else(|| panic!("no field {column} in the row schema"))
}

/// Equal as JSON, and for floats also in sign (so -0.0 is not 0.0).
fn same(expected: &Json, actual: &Json) -> bool {
    match (expected, actual) {
        (Json::Number(e), Json::Number(a)) if e.is_f64() || a.is_f64() => {
            e.is_f64() == a.is_f64()
                && e.as_f64() == a.as_f64()
                && e.as_f64().map(f64::is_sign_negative) == a.as_f64().map(f64::is_sign_negative)
        }
        (Json::Array(e), Json::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| same(e, a))
        }
        _ => expected == actual,
    }
}

/// Records of a topic sorted by their key's `id`.
fn by_id(mut records: Vec<Record>) -> Vec<Record> {
    records.sort_by_key(|r| payload(r)["after"]["id"].as_i64());
    records
}

// ---------------------------------------------------------------------------
// The table of every type.
// ---------------------------------------------------------------------------

/// One column: its name, its type as declared, and its expected field schema.
struct Column {
    name: &'static str,
    ddl: &'static str,
    schema: Json,
}

/// One inserted row: `(column, SQL expression, expected JSON value)` for the
/// columns it sets; every other column is inserted as an explicit NULL and
/// expected as null.
struct Row {
    id: i32,
    cells: Vec<(&'static str, String, Json)>,
}

impl Row {
    fn new(id: i32) -> Self {
        Row {
            id,
            cells: Vec::new(),
        }
    }

    fn set(mut self, column: &'static str, sql: impl Into<String>, expected: Json) -> Self {
        assert!(
            self.cells.iter().all(|c| c.0 != column),
            "row {}: {column} set twice",
            self.id
        );
        self.cells.push((column, sql.into(), expected));
        self
    }
}

/// Which contrib extensions could be created (postgresql-contrib ships them;
/// a missing one leaves its column out, and says so, rather than failing).
#[derive(Clone, Copy)]
struct Extensions {
    hstore: bool,
    citext: bool,
    ltree: bool,
}

fn columns(ext: Extensions) -> Vec<Column> {
    let c = |name, ddl, schema| Column { name, ddl, schema };
    let mut cols = vec![
        c("c_bool", "boolean", prim("boolean")),
        c("c_int2", "int2", prim("int16")),
        // A DEFAULT: the schema declares it (as Debezium does), and an
        // explicit NULL must still arrive as null.
        c(
            "c_int4",
            "int4 DEFAULT 42",
            with_default(prim("int32"), json!(42)),
        ),
        c("c_int8", "int8", prim("int64")),
        c("c_float4", "float4", prim("float")),
        c("c_float8", "float8", prim("double")),
        c(
            "c_numeric",
            "numeric(12,3) DEFAULT 1.5",
            with_default(decimal_schema(3, Some(12)), json!("Bdw=")),
        ),
        c("c_numeric_var", "numeric", vsd_schema()),
        // money.fraction.digits = 2; Debezium declares no precision for MONEY.
        c("c_money", "money", decimal_schema(2, None)),
        c(
            "c_text",
            "text DEFAULT 'dflt'",
            with_default(prim("string"), json!("dflt")),
        ),
        c("c_varchar", "varchar(10)", prim("string")),
        c("c_char", "char(5)", prim("string")),
        c("c_bytea", "bytea", prim("bytes")),
        c("c_uuid", "uuid", logical("string", "io.debezium.data.Uuid")),
        c("c_json", "json", logical("string", "io.debezium.data.Json")),
        c(
            "c_jsonb",
            "jsonb",
            logical("string", "io.debezium.data.Json"),
        ),
        c("c_xml", "xml", logical("string", "io.debezium.data.Xml")),
        c("c_date", "date", logical("int32", "io.debezium.time.Date")),
        // time.precision.mode=adaptive: TIME(4-6) and plain TIME are µs ...
        c(
            "c_time",
            "time",
            logical("int64", "io.debezium.time.MicroTime"),
        ),
        // ... TIME(0-3) ms.
        c(
            "c_time3",
            "time(3)",
            logical("int32", "io.debezium.time.Time"),
        ),
        c(
            "c_timetz",
            "timetz",
            logical("string", "io.debezium.time.ZonedTime"),
        ),
        c(
            "c_timestamp",
            "timestamp",
            logical("int64", "io.debezium.time.MicroTimestamp"),
        ),
        c(
            "c_timestamp3",
            "timestamp(3)",
            logical("int64", "io.debezium.time.Timestamp"),
        ),
        c(
            "c_timestamptz",
            "timestamptz",
            logical("string", "io.debezium.time.ZonedTimestamp"),
        ),
        c(
            "c_interval",
            "interval",
            logical("int64", "io.debezium.time.MicroDuration"),
        ),
        c("c_inet", "inet", prim("string")),
        c("c_cidr", "cidr", prim("string")),
        c("c_macaddr", "macaddr", prim("string")),
        c("c_enum", "mood", {
            let mut s = logical("string", "io.debezium.data.Enum");
            // The labels in enumsortorder, joined by commas.
            s["parameters"] = json!({"allowed": "sad,ok,very happy"});
            s
        }),
        // A domain takes its base type's schema, with the domain's modifier.
        c("c_price", "price", decimal_schema(2, Some(10))),
        c("c_email", "email", prim("string")),
        // BIT(1) is a boolean; longer or unconstrained bit strings are Bits,
        // with pgjdbc's unknown length 2^31-1 for an unconstrained VARBIT.
        c("c_bit", "bit(1)", prim("boolean")),
        c("c_varbit", "bit varying", {
            let mut s = logical("bytes", "io.debezium.data.Bits");
            s["parameters"] = json!({"length": "2147483647"});
            s
        }),
    ];
    if ext.hstore {
        // hstore.handling.mode=json
        cols.push(c(
            "c_hstore",
            "hstore",
            logical("string", "io.debezium.data.Json"),
        ));
    }
    cols.extend([
        // Postgres 15's negative scale: rounded to hundreds. Declared with
        // scale 0 and the precision widened to 5 (documented departure;
        // Debezium misreads the modifier).
        c("c_numeric_neg", "numeric(3,-2)", decimal_schema(0, Some(5))),
        c(
            "c_timestamptz3",
            "timestamptz(3)",
            logical("string", "io.debezium.time.ZonedTimestamp"),
        ),
        c(
            "c_timestamptz0",
            "timestamptz(0)",
            logical("string", "io.debezium.time.ZonedTimestamp"),
        ),
        c("c_char1", "\"char\"", prim("string")),
        c("c_name", "name", prim("string")),
        c("c_oid", "oid", prim("int64")),
        c("c_macaddr8", "macaddr8", prim("string")),
        c(
            "c_tsvector",
            "tsvector",
            logical("string", "io.debezium.data.Tsvector"),
        ),
        c("c_int4range", "int4range", prim("string")),
        c("c_tstzrange", "tstzrange", prim("string")),
    ]);
    if ext.citext {
        cols.push(c("c_citext", "citext", prim("string")));
    }
    if ext.ltree {
        cols.push(c(
            "c_ltree",
            "ltree",
            logical("string", "io.debezium.data.Ltree"),
        ));
    }
    cols.extend([
        // Array elements are always optional.
        c("c_int4_arr", "int4[]", array_of(prim("int32"))),
        c("c_text_arr", "text[]", array_of(prim("string"))),
        c("c_numeric_arr", "numeric[]", array_of(vsd_schema())),
        c(
            "c_numeric62_arr",
            "numeric(6,2)[]",
            array_of(decimal_schema(2, Some(6))),
        ),
        c(
            "c_date_arr",
            "date[]",
            array_of(logical("int32", "io.debezium.time.Date")),
        ),
        c(
            "c_uuid_arr",
            "uuid[]",
            array_of(logical("string", "io.debezium.data.Uuid")),
        ),
        c("c_bool_arr", "bool[]", array_of(prim("boolean"))),
        c("c_float8_arr", "float8[]", array_of(prim("double"))),
        c("c_bytea_arr", "bytea[]", array_of(prim("bytes"))),
        c(
            "c_jsonb_arr",
            "jsonb[]",
            array_of(logical("string", "io.debezium.data.Json")),
        ),
        c(
            "c_timestamptz_arr",
            "timestamptz[]",
            array_of(logical("string", "io.debezium.time.ZonedTimestamp")),
        ),
        c(
            "c_timetz_arr",
            "timetz[]",
            array_of(logical("string", "io.debezium.time.ZonedTime")),
        ),
        // The column's modifier applies to the elements: ms for time(3).
        c(
            "c_time3_arr",
            "time(3)[]",
            array_of(logical("int32", "io.debezium.time.Time")),
        ),
        // Documented departures: enum elements optional (Debezium declares
        // them required although Postgres allows NULL elements); arrays of
        // domains and interval[] are emitted (Debezium drops the column).
        c("c_enum_arr", "mood[]", {
            let mut s = logical("string", "io.debezium.data.Enum");
            s["parameters"] = json!({"allowed": "sad,ok,very happy"});
            array_of(s)
        }),
        c(
            "c_price_arr",
            "price[]",
            array_of(decimal_schema(2, Some(10))),
        ),
        c(
            "c_interval_arr",
            "interval[]",
            array_of(logical("int64", "io.debezium.time.MicroDuration")),
        ),
    ]);
    cols
}

fn rows(ext: Extensions) -> Vec<Row> {
    let s = |v: &str| Json::from(v);
    let i = |v: i64| Json::from(v);
    let unicode = "emoji 😀👍🏽 CJK 漢字かな combining e\u{301} ZWJ \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
    let nasty = "it's \"quoted\" \\ back\\\\slash\ttab\nnewline\r\u{7}bell";
    let all_bytes: Vec<u8> = (0..=255).collect();

    let mut r1 = Row::new(1)
        .set("c_bool", "true", json!(true))
        .set("c_int2", "32767", i(32_767))
        .set("c_int4", "2147483647", i(2_147_483_647))
        .set("c_int8", "9223372036854775807", json!(i64::MAX))
        // Postgres prints float4 max as 3.4028235e+38 (shortest exact).
        .set("c_float4", lit("3.4028235e38"), num("3.4028235e38"))
        .set(
            "c_float8",
            lit("1.7976931348623157e308"),
            num("1.7976931348623157e308"),
        )
        // 12 digits, scale 3: unscaled 123456789123.
        .set("c_numeric", "123456789.123", dec("123456789123"))
        // Trailing zeros stripped (Debezium's stripTrailingZeros): scale 10.
        .set(
            "c_numeric_var",
            lit("12345678901234567890123456789012345678901234567890.0123456789"),
            vsd(
                10,
                "123456789012345678901234567890123456789012345678900123456789",
            ),
        )
        // MONEY's maximum: unscaled i64::MAX = 7F FF FF FF FF FF FF FF.
        .set("c_money", lit("92233720368547758.07"), s("f/////////8="))
        .set("c_text", lit(unicode), s(unicode))
        .set("c_varchar", lit("ab😀cd漢字éx!"), s("ab😀cd漢字éx!"))
        // CHAR(n) is blank-padded to n characters.
        .set("c_char", lit("ab"), s("ab   "))
        // DE AD BE EF = 110111 101010 110110 111110 111011 11(0000) = 3q2+7w==
        .set("c_bytea", lit("\\xdeadbeef"), s("3q2+7w=="))
        .set(
            "c_uuid",
            lit("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            s("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        )
        // json keeps its input text verbatim; jsonb normalizes it.
        .set(
            "c_json",
            lit(r#"{"b": 1,  "a": [1, 2.50, "x"]}"#),
            s(r#"{"b": 1,  "a": [1, 2.50, "x"]}"#),
        )
        .set(
            "c_jsonb",
            lit(r#"{"b": 1,  "a": [1, 2.50, "x"]}"#),
            s(r#"{"a": [1, 2.50, "x"], "b": 1}"#),
        )
        .set(
            "c_xml",
            lit(r#"<a b="1">text &amp; more</a>"#),
            s(r#"<a b="1">text &amp; more</a>"#),
        )
        .set("c_date", lit("1970-01-02"), i(1))
        .set(
            "c_time",
            lit("23:59:59.999999"),
            i(hms_micros(23, 59, 59, 999_999)),
        )
        .set("c_time3", lit("23:59:59.999"), i(86_399_999))
        // ZonedTime: shifted to UTC, fraction as ISO_LOCAL_TIME prints it.
        .set("c_timetz", lit("03:04:05.123+02"), s("01:04:05.123Z"))
        .set(
            "c_timestamp",
            lit("2024-02-29 12:34:56.789012"),
            i(DAYS_2024_02_29 * MICROS_PER_DAY + hms_micros(12, 34, 56, 789_012)),
        )
        .set(
            "c_timestamp3",
            lit("2024-02-29 12:34:56.789"),
            i((DAYS_2024_02_29 * MICROS_PER_DAY + hms_micros(12, 34, 56, 789_000)) / 1000),
        )
        // 02:30 at UTC-8 is 10:30 UTC; six fraction digits.
        .set(
            "c_timestamptz",
            lit("2024-03-10 02:30:00-08"),
            s("2024-03-10T10:30:00.000000Z"),
        )
        // 14 months, 3 days, 4:05:06.789; a month is 30.4375 days.
        .set(
            "c_interval",
            lit("1 year 2 mons 3 days 04:05:06.789"),
            i(14 * MICROS_PER_MONTH + 3 * MICROS_PER_DAY + hms_micros(4, 5, 6, 789_000)),
        )
        .set("c_inet", lit("192.168.0.1/24"), s("192.168.0.1/24"))
        // Abbreviated classful cidr input.
        .set("c_cidr", lit("10"), s("10.0.0.0/8"))
        .set("c_macaddr", lit("08-00-2B-01-02-03"), s("08:00:2b:01:02:03"))
        .set("c_enum", lit("ok"), s("ok"))
        // numeric(10,2): 12345678.90, unscaled 1234567890.
        .set("c_price", "12345678.9", dec("1234567890"))
        .set("c_email", lit("a@b.c"), s("a@b.c"))
        .set("c_bit", "B'1'", json!(true))
        // Bits: the string as a binary number, little-endian bytes: 101 = 05.
        .set("c_varbit", "B'101'", s("BQ=="))
        .set(
            "c_int4_arr",
            lit("{1,-2,2147483647,NULL}"),
            json!([1, -2, 2_147_483_647, null]),
        )
        .set(
            "c_text_arr",
            r#"ARRAY[$$a,b$$, $$c}d$$, $${e}$$, $$q"uote$$, $$back\slash$$, NULL, 'NULL', '', ' spaced ', '😀']::text[]"#,
            json!(["a,b", "c}d", "{e}", "q\"uote", "back\\slash", null, "NULL", "", " spaced ", "😀"]),
        )
        // 1.50 -> scale 1, unscaled 15 = 0F = Dw==; -2 = FE = /g==; 0 = AA==.
        .set(
            "c_numeric_arr",
            lit("{1.50,-2,NULL,0}"),
            json!([vsd(1, "15"), vsd(0, "-2"), null, vsd(0, "0")]),
        )
        .set(
            "c_numeric62_arr",
            lit("{1.5,-0.01}"),
            json!([s("AJY="), s("/w==")]),
        )
        .set(
            "c_date_arr",
            "ARRAY['1970-01-01', '2024-02-29', 'infinity', '-infinity', NULL, '0001-01-01 BC']::date[]",
            json!([0, DAYS_2024_02_29, i32::MAX, i32::MIN, null, DAYS_1_BC_01_01]),
        )
        .set(
            "c_uuid_arr",
            "ARRAY['A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', NULL]::uuid[]",
            json!(["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", null]),
        )
        // 12345 rounds to 12300, unscaled at scale 0.
        .set("c_numeric_neg", "12345", dec("12300"))
        // Exactly as many fraction digits as the column's precision.
        .set(
            "c_timestamptz3",
            lit("2024-01-02 03:04:05.12+01"),
            s("2024-01-02T02:04:05.120Z"),
        )
        // Precision 0: Debezium's ISO_OFFSET_DATE_TIME, no fraction; Postgres
        // rounds .6 up to the next second.
        .set(
            "c_timestamptz0",
            lit("2024-01-02 03:04:05.6+00"),
            s("2024-01-02T03:04:06Z"),
        )
        .set("c_char1", lit("a"), s("a"))
        .set("c_name", lit("some_name"), s("some_name"))
        .set("c_oid", "4294967295", i(4_294_967_295))
        // A 6-byte address widened to EUI-64 by Postgres.
        .set(
            "c_macaddr8",
            lit("08:00:2b:01:02:03"),
            s("08:00:2b:ff:fe:01:02:03"),
        )
        .set("c_tsvector", lit("a fat cat"), s("'a' 'cat' 'fat'"))
        // Ranges are Postgres's canonical text.
        .set("c_int4range", lit("(1,10]"), s("[2,11)"))
        .set(
            "c_tstzrange",
            lit("[2024-01-01 00:00:00+05,infinity)"),
            s(r#"["2023-12-31 19:00:00+00",infinity)"#),
        )
        .set("c_bool_arr", lit("{t,f,NULL}"), json!([true, false, null]))
        .set(
            "c_float8_arr",
            lit("{1.5,NaN,-Infinity,NULL,-0}"),
            json!([num("1.5"), "NaN", "-Infinity", null, num("-0.0")]),
        )
        // 00 FF = 000000 001111 1111(00) = AP8=.
        .set(
            "c_bytea_arr",
            r"ARRAY['\x00ff'::bytea, '\x'::bytea, NULL]",
            json!(["AP8=", "", null]),
        )
        // An element with quotes, a backslash, a comma and a brace.
        .set(
            "c_jsonb_arr",
            r#"ARRAY['{"a": "x,}\"y"}'::jsonb, 'null'::jsonb, NULL]"#,
            json!([r#"{"a": "x,}\"y"}"#, "null", null]),
        )
        .set(
            "c_timestamptz_arr",
            "ARRAY['2024-03-10 02:30:00-08', 'infinity', NULL]::timestamptz[]",
            json!(["2024-03-10T10:30:00.000000Z", "infinity", null]),
        )
        .set(
            "c_timetz_arr",
            lit("{03:04:05.123+02,NULL}"),
            json!(["01:04:05.123Z", null]),
        )
        .set(
            "c_time3_arr",
            lit("{12:34:56.789,24:00:00}"),
            json!([hms_micros(12, 34, 56, 789_000) / 1000, 86_400_000]),
        )
        .set(
            "c_enum_arr",
            lit(r#"{sad,"very happy",NULL}"#),
            json!(["sad", "very happy", null]),
        )
        .set("c_price_arr", lit("{1.5,NULL}"), json!(["AJY=", null]))
        .set(
            "c_interval_arr",
            lit(r#"{"1 day",-00:00:01}"#),
            json!([MICROS_PER_DAY, -MICROS_PER_SECOND]),
        );
    if ext.citext {
        r1 = r1.set("c_citext", lit("MiXeD"), s("MiXeD"));
    }
    if ext.ltree {
        r1 = r1.set(
            "c_ltree",
            lit("Top.Science.Astronomy"),
            s("Top.Science.Astronomy"),
        );
    }
    if ext.hstore {
        // Debezium builds a java.util.HashMap and writes it with Jackson, so the
        // keys come in bucket order (16 buckets, String.hashCode spread by
        // h ^ h>>>16): "é" = 233 -> bucket 9; "k\"q" = (107*31+34)*31+113 =
        // 103994, ^1 = 103995 -> bucket 11; "n" = 110 -> bucket 14.
        r1 = r1.set(
            "c_hstore",
            lit(r#""k\"q"=>"v\\w", "é"=>"😀", "n"=>NULL"#),
            s(r#"{"é":"😀","k\"q":"v\\w","n":null}"#),
        );
    }

    let mut r2 = Row::new(2)
        .set("c_bool", "false", json!(false))
        .set("c_int2", "-32768", i(-32_768))
        .set("c_int4", "-2147483648", i(-2_147_483_648))
        .set("c_int8", "-9223372036854775808", json!(i64::MIN))
        // The smallest normal floats, negated; Postgres prints float4's as -1.1754944e-38.
        .set("c_float4", lit("-1.17549435e-38"), num("-1.1754944e-38"))
        .set(
            "c_float8",
            lit("-2.2250738585072014e-308"),
            num("-2.2250738585072014e-308"),
        )
        .set("c_numeric", "-0.001", s("/w=="))
        // Trailing zero dropped: 19 fraction digits; 39 digits, beyond i128.
        .set(
            "c_numeric_var",
            lit("-98765432109876543210.98765432109876543210"),
            vsd(19, "-987654321098765432109876543210987654321"),
        )
        // MONEY's minimum: unscaled i64::MIN = 80 00 00 00 00 00 00 00.
        .set("c_money", lit("-92233720368547758.08"), s("gAAAAAAAAAA="))
        .set("c_text", lit(nasty), s(nasty))
        .set("c_varchar", lit("x"), s("x"))
        .set("c_char", lit("漢字"), s("漢字   "))
        .set("c_bytea", lit("\\x"), s(""))
        .set(
            "c_uuid",
            lit("00000000-0000-0000-0000-000000000000"),
            s("00000000-0000-0000-0000-000000000000"),
        )
        .set(
            "c_json",
            lit(r#""unicode \u00e9 😀""#),
            s(r#""unicode \u00e9 😀""#),
        )
        .set("c_jsonb", lit(r#"{"k": "\u00e9"}"#), s(r#"{"k": "é"}"#))
        .set("c_xml", lit("<r>é😀</r>"), s("<r>é😀</r>"))
        .set("c_date", lit("4714-11-24 BC"), i(DAYS_JULIAN_ZERO))
        .set("c_time", lit("00:00:00"), i(0))
        .set("c_time3", lit("00:00:00"), i(0))
        // Wraps around midnight.
        .set("c_timetz", lit("23:30:00-01"), s("00:30:00Z"))
        .set(
            "c_timestamp",
            lit("0001-01-01 00:00:00 BC"),
            i(DAYS_1_BC_01_01 * MICROS_PER_DAY),
        )
        .set(
            "c_timestamp3",
            lit("0001-01-01 00:00:00.5 BC"),
            i(DAYS_1_BC_01_01 * 86_400_000 + 500),
        )
        // ISO-8601 year -43 is 44 BC.
        .set(
            "c_timestamptz",
            lit("0044-03-15 12:00:00+00 BC"),
            s("-0043-03-15T12:00:00.000000Z"),
        )
        // Postgres folds -1 year 2 mons into -10 mons.
        .set(
            "c_interval",
            lit("-1 year 2 mons -3 days 04:05:06.789"),
            i(-10 * MICROS_PER_MONTH - 3 * MICROS_PER_DAY + hms_micros(4, 5, 6, 789_000)),
        )
        .set("c_inet", lit("::1"), s("::1"))
        .set("c_cidr", lit("192.168.100.128/25"), s("192.168.100.128/25"))
        .set(
            "c_macaddr",
            lit("ff:ff:ff:ff:ff:ff"),
            s("ff:ff:ff:ff:ff:ff"),
        )
        .set("c_enum", lit("very happy"), s("very happy"))
        .set("c_price", "-0.01", s("/w=="))
        .set("c_email", lit("ÄÖ@例え.jp"), s("ÄÖ@例え.jp"))
        .set("c_bit", "B'0'", json!(false))
        // 1_0000_0000 = 256: little-endian 00 01 = AAE=.
        .set("c_varbit", "B'100000000'", s("AAE="))
        .set("c_int4_arr", lit("{}"), json!([]))
        .set("c_text_arr", lit("{}"), json!([]))
        .set("c_numeric_arr", lit("{}"), json!([]))
        .set("c_numeric62_arr", lit("{}"), json!([]))
        .set("c_date_arr", lit("{}"), json!([]))
        .set("c_uuid_arr", lit("{}"), json!([]))
        .set("c_numeric_neg", "-50", dec("-100"))
        // Postgres rounds .1239 to .124.
        .set(
            "c_timestamptz3",
            lit("2024-01-02 03:04:05.1239+00"),
            s("2024-01-02T03:04:05.124Z"),
        )
        .set(
            "c_timestamptz0",
            lit("2024-03-10 02:30:00+05:45"),
            s("2024-03-09T20:45:00Z"),
        )
        .set("c_oid", "0", i(0))
        .set(
            "c_macaddr8",
            lit("08:00:2b:01:02:03:04:05"),
            s("08:00:2b:01:02:03:04:05"),
        )
        .set("c_tsvector", lit(""), s(""))
        .set("c_int4range", lit("empty"), s("empty"))
        .set("c_bool_arr", lit("{}"), json!([]))
        .set("c_float8_arr", lit("{}"), json!([]))
        .set("c_bytea_arr", lit("{}"), json!([]))
        .set("c_jsonb_arr", lit("{}"), json!([]))
        .set("c_enum_arr", lit("{}"), json!([]))
        .set("c_price_arr", lit("{}"), json!([]))
        .set("c_interval_arr", lit("{}"), json!([]));
    if ext.hstore {
        r2 = r2.set("c_hstore", lit(""), s("{}"));
    }

    // Row 3: NULL in every nullable column, including those with a DEFAULT.
    let r3 = Row::new(3);

    let mut r4 = Row::new(4)
        .set("c_int2", "0", i(0))
        .set("c_int4", "0", i(0))
        .set("c_int8", "0", i(0))
        .set("c_float4", lit("NaN"), s("NaN"))
        .set("c_float8", lit("NaN"), s("NaN"))
        .set("c_numeric", "0", s("AA=="))
        .set("c_numeric_var", "0", vsd(0, "0"))
        .set("c_money", "0", s("AA=="))
        .set("c_text", lit(""), s(""))
        .set("c_varchar", lit(""), s(""))
        .set("c_char", lit(""), s("     "))
        .set("c_bytea", lit("\\x00"), s("AA=="))
        // JSON null and an empty array, not SQL NULLs.
        .set("c_json", lit("null"), s("null"))
        .set("c_jsonb", lit("[]"), s("[]"))
        // Dates: i32::MAX / i32::MIN, the connector's documented choice
        // (Debezium overflows to nonsense day numbers).
        .set("c_date", lit("infinity"), i(i64::from(i32::MAX)))
        .set("c_time", lit("24:00:00"), i(MICROS_PER_DAY))
        .set("c_time3", lit("24:00:00"), i(86_400_000))
        .set("c_timetz", lit("24:00:00+00"), s("24:00:00Z"))
        // Timestamps: Debezium's (pgjdbc's DATE_POSITIVE_INFINITY) sentinels.
        .set("c_timestamp", lit("infinity"), i(9_223_372_036_825_200_000))
        .set("c_timestamp3", lit("infinity"), i(9_223_372_036_825_200))
        .set("c_timestamptz", lit("infinity"), s("infinity"))
        .set("c_interval", lit("0"), i(0))
        .set("c_inet", lit("10.0.0.1"), s("10.0.0.1"))
        .set("c_cidr", lit("2001:db8::/32"), s("2001:db8::/32"))
        .set("c_enum", lit("sad"), s("sad"))
        // 0.50, unscaled 50 = 32 = Mg==.
        .set("c_price", "0.5", s("Mg=="))
        .set("c_email", lit(""), s(""))
        // No bit set: no bytes at all.
        .set("c_varbit", "B'0000'", s(""))
        // Multi-dimensional arrays are flattened (documented departure).
        .set("c_int4_arr", lit("{{1,2},{3,4}}"), json!([1, 2, 3, 4]))
        .set("c_text_arr", "ARRAY[NULL]::text[]", json!([null]));
    if ext.hstore {
        // "a" = 97 -> bucket 1, "b" = 98 -> bucket 2.
        r4 = r4.set(
            "c_hstore",
            lit(r#""b"=>"2", "a"=>"1""#),
            s(r#"{"a":"1","b":"2"}"#),
        );
    }

    let r5 = Row::new(5)
        .set("c_float4", lit("Infinity"), s("Infinity"))
        .set("c_float8", lit("Infinity"), s("Infinity"))
        // Needs rescaling to the column's scale: stored and printed as 1.500.
        .set("c_numeric", "1.5", s("Bdw="))
        // 100.500 -> 100.5: scale 1, unscaled 1005 = 03 ED = A+0=.
        .set("c_numeric_var", lit("100.500"), vsd(1, "1005"))
        // $1,234.50: unscaled 123450.
        .set("c_money", "1234.5", dec("123450"))
        .set("c_bytea", all_bytes_sql(), Json::from(b64(&all_bytes)))
        .set("c_date", lit("-infinity"), i(i64::from(i32::MIN)))
        .set(
            "c_time",
            lit("12:34:56.789012"),
            i(hms_micros(12, 34, 56, 789_012)),
        )
        // Postgres rounds to the column's 3 digits: .789.
        .set(
            "c_time3",
            lit("12:34:56.7894"),
            i(hms_micros(12, 34, 56, 789_000) / 1000),
        )
        .set("c_timetz", lit("12:00:00.5+05:45"), s("06:15:00.5Z"))
        .set(
            "c_timestamp",
            lit("-infinity"),
            i(-9_223_372_036_832_400_000),
        )
        .set("c_timestamp3", lit("-infinity"), i(-9_223_372_036_832_400))
        .set("c_timestamptz", lit("-infinity"), s("-infinity"))
        .set("c_interval", lit("-0.000001 seconds"), i(-1))
        .set("c_inet", lit("2001:db8::/32"), s("2001:db8::/32"))
        .set("c_varbit", "B''", s(""))
        .set("c_numeric62_arr", lit("{NULL}"), json!([null]));

    let r6 = Row::new(6)
        .set("c_float4", lit("-Infinity"), s("-Infinity"))
        .set("c_float8", lit("-Infinity"), s("-Infinity"))
        // 128 needs a 00 sign byte: 00 80 = AIA=.
        .set("c_numeric", "0.128", s("AIA="))
        // 1000: no trailing zeros are stripped below scale 0.
        .set("c_numeric_var", "1000", vsd(0, "1000"))
        .set("c_money", "-1234.5", dec("-123450"))
        .set("c_date", lit("2024-02-29"), i(DAYS_2024_02_29))
        // 24:00 at +05:45 is 18:15 UTC (the connector's documented choice;
        // Debezium fails on it).
        .set("c_timetz", lit("24:00:00+05:45"), s("18:15:00Z"))
        .set("c_timestamp", lit("1969-12-31 23:59:59.999999"), i(-1))
        // Floor, not truncation, before the epoch.
        .set("c_timestamp3", lit("1969-12-31 23:59:59.999"), i(-1))
        // 02:30 at +05:45 is 20:45 UTC the day before.
        .set(
            "c_timestamptz",
            lit("2024-03-10 02:30:00+05:45"),
            s("2024-03-09T20:45:00.000000Z"),
        )
        .set(
            "c_interval",
            lit("1000 years"),
            i(12_000 * MICROS_PER_MONTH),
        )
        .set("c_varbit", "B'1111111111111111'", s("//8="));

    let r7 = Row::new(7)
        .set("c_float4", lit("-0"), num("-0.0"))
        .set("c_float8", lit("-0"), num("-0.0"))
        // -128 fits one byte: 80 = gA==.
        .set("c_numeric", "-0.128", s("gA=="))
        .set("c_numeric_var", lit("0.000001"), vsd(6, "1"))
        .set("c_date", lit("1969-12-31"), i(-1))
        .set("c_timetz", lit("00:00:00.000001-08"), s("08:00:00.000001Z"))
        .set("c_timestamp", lit("1970-01-01 00:00:00"), i(0))
        .set(
            "c_timestamptz",
            lit("2024-01-01 00:00:00.123456+14"),
            s("2023-12-31T10:00:00.123456Z"),
        )
        .set("c_interval", lit("-04:05:06"), i(-hms_micros(4, 5, 6, 0)))
        // Unconstrained VARBIT of length 1 is still Bits (length 2^31-1).
        .set("c_varbit", "B'1'", s("AQ=="));

    let r8 = Row::new(8)
        // The smallest subnormals, as Java's Float/Double.toString print them
        // (JDK 19+: two digits where one would do), so as Debezium writes them.
        .set("c_float4", lit("1e-45"), num("1.4E-45"))
        .set("c_float8", lit("5e-324"), num("4.9E-324"))
        .set("c_numeric", "-999999999.999", dec("-999999999999"))
        .set("c_date", lit("0001-01-01 BC"), i(DAYS_1_BC_01_01))
        .set(
            "c_timestamptz",
            lit("1969-12-31 23:59:59.999999+00"),
            s("1969-12-31T23:59:59.999999Z"),
        );

    let r9 = Row::new(9)
        .set("c_float4", lit("0.1"), num("0.1"))
        .set("c_float8", lit("0.1"), num("0.1"))
        // Postgres's latest date: Julian Day 2,147,483,493 (its DATE_END_JULIAN,
        // 5874898-01-01, less one), less the epoch's 2,440,588.
        .set("c_date", lit("5874897-12-31"), i(2_145_042_905))
        // Postgres's latest and earliest timestamptz: years past 9999 get a
        // sign, as java.time's ISO_LOCAL_DATE writes them.
        .set(
            "c_timestamptz",
            lit("294276-12-31 23:59:59.999999+00"),
            s("+294276-12-31T23:59:59.999999Z"),
        )
        .set(
            "c_timestamptz3",
            lit("4714-11-24 00:00:00+00 BC"),
            s("-4713-11-24T00:00:00.000Z"),
        );

    vec![r1, r2, r3, r4, r5, r6, r7, r8, r9]
}

/// Bytes 00..FF as a bytea expression.
fn all_bytes_sql() -> String {
    "(SELECT decode(string_agg(lpad(to_hex(b), 2, '0'), '' ORDER BY b), 'hex') \
     FROM generate_series(0, 255) AS b)"
        .to_owned()
}

#[test]
fn decimal_reference_helpers_match_hand_computed_values() {
    // The values worked by hand in `unscaled_bytes`'s documentation.
    let cases = [
        ("150", "AJY="),
        ("-1", "/w=="),
        ("-128", "gA=="),
        ("128", "AIA="),
        ("1500", "Bdw="),
        ("0", "AA=="),
        ("-0", "AA=="),
        ("15", "Dw=="),
        ("-2", "/g=="),
        ("1005", "A+0="),
        ("1000", "A+g="),
        ("50", "Mg=="),
        ("9223372036854775807", "f/////////8="),
        ("-9223372036854775808", "gAAAAAAAAAA="),
    ];
    for (digits, expected) in cases {
        assert_eq!(b64(&unscaled_bytes(digits)), expected, "{digits}");
    }
    // And against i128's own two's complement over a spread of values.
    for v in [
        0i128,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        255,
        256,
        -256,
        -257,
        32_767,
        32_768,
        -32_768,
        -32_769,
        123_456_789_123,
        -999_999_999_999,
        i128::from(i64::MAX),
        i128::from(i64::MIN),
        i128::MAX,
        i128::MIN + 1,
    ] {
        assert_eq!(unscaled_bytes(&v.to_string()), i128_bytes(v), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_in_default_modes() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "types");
    // hstore, citext and ltree ship with postgresql-contrib; without one,
    // its column is left out (and said so) rather than failing the test.
    let extension = |name: &str| match s
        .pg
        .execute(&s.db, &format!("CREATE EXTENSION IF NOT EXISTS {name}"))
    {
        Ok(()) => true,
        Err(e) => {
            eprintln!("extension {name} unavailable, skipping its column: {e}");
            false
        }
    };
    let ext = Extensions {
        hstore: extension("hstore"),
        citext: extension("citext"),
        ltree: extension("ltree"),
    };
    s.sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'very happy')");
    s.sql("CREATE DOMAIN price AS numeric(10,2)");
    s.sql("CREATE DOMAIN email AS text");
    let cols = columns(ext);
    let ddl: Vec<String> = cols
        .iter()
        .map(|c| format!("{} {}", c.name, c.ddl))
        .collect();
    s.sql(&format!(
        "CREATE TABLE all_types (id int PRIMARY KEY, {})",
        ddl.join(", ")
    ));
    // REPLICA IDENTITY FULL with NOT NULL columns: required exactly where
    // every event can carry a value (see relation.rs).
    s.sql(
        "CREATE TABLE required_types (id int PRIMARY KEY, t text NOT NULL, d date NOT NULL, \
         n numeric(10,2) NOT NULL, a int4[] NOT NULL, ta text[] NOT NULL, b bytea NOT NULL, \
         ts timestamptz NOT NULL, e mood NOT NULL, nn int4)",
    );
    s.sql("ALTER TABLE required_types REPLICA IDENTITY FULL");
    // A composite key of typed columns, declared out of column order.
    s.sql(
        "CREATE TABLE typed_keys (k_uuid uuid, k_num numeric(5,2), k_ts timestamptz, v int, \
         PRIMARY KEY (k_num, k_uuid, k_ts))",
    );

    let bootstrap = kafka.bootstrap_servers();
    let running = s.start(&bootstrap, &[]);
    s.await_slot().await;

    let rows = rows(ext);
    for row in &rows {
        for (column, _, _) in &row.cells {
            assert!(
                cols.iter().any(|c| c.name == *column),
                "row {} sets unknown column {column}",
                row.id
            );
        }
        let values: Vec<String> = cols
            .iter()
            .map(|c| {
                row.cells
                    .iter()
                    .find(|cell| cell.0 == c.name)
                    .map_or_else(|| "NULL".to_owned(), |cell| cell.1.clone())
            })
            .collect();
        let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
        s.sql(&format!(
            "INSERT INTO all_types (id, {}) VALUES ({}, {})",
            names.join(", "),
            row.id,
            values.join(", ")
        ));
    }
    s.sql(
        "INSERT INTO required_types VALUES (1, 't', '2024-01-01', 1.5, '{1}', '{x}', '\\x01', \
         '2024-01-01 00:00:00+00', 'ok', NULL)",
    );
    s.sql(
        "INSERT INTO typed_keys VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', -1.5, \
         '2024-03-10 02:30:00-08', 1)",
    );

    let records = by_id(consume(&bootstrap, &s.topic("all_types"), rows.len(), TIMEOUT).await);
    assert_eq!(records.len(), rows.len(), "one create per row");
    let required = consume(&bootstrap, &s.topic("required_types"), 1, TIMEOUT).await;
    assert_eq!(required.len(), 1);
    let keyed = consume(&bootstrap, &s.topic("typed_keys"), 1, TIMEOUT).await;
    assert_eq!(keyed.len(), 1);

    let mut mismatches: Vec<String> = Vec::new();

    // Schemas: the row struct has id then every column in table order, each
    // with its type, logical name, version, parameters and optional flag.
    let first = &records[0];
    let names: Vec<&str> = after_fields(first)
        .iter()
        .map(|f| f["field"].as_str().unwrap_or("?"))
        .collect();
    let expected_names: Vec<&str> = std::iter::once("id")
        .chain(cols.iter().map(|c| c.name))
        .collect();
    assert_eq!(names, expected_names, "row fields in column order");
    assert_eq!(
        field_schema(first, "id"),
        &json!({"type": "int32", "optional": false, "field": "id"}),
        "the key column is required"
    );
    for c in &cols {
        let mut expected = c.schema.clone();
        expected["field"] = Json::from(c.name);
        let actual = field_schema(first, c.name);
        if actual != &expected {
            mismatches.push(format!(
                "schema of {} ({}):\n  expected {expected}\n  actual   {actual}",
                c.name, c.ddl
            ));
        }
    }
    let value_schema = &first.value.as_ref().unwrap()["schema"];
    assert_eq!(
        value_schema["name"],
        format!("{}.public.all_types.Envelope", s.prefix)
    );
    let after = value_schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap();
    assert_eq!(
        after["name"],
        format!("{}.public.all_types.Value", s.prefix)
    );
    assert_eq!(after["optional"], true);
    assert_eq!(
        first.key.as_ref().expect("keyed")["schema"],
        json!({
            "type": "struct",
            "fields": [{"type": "int32", "optional": false, "field": "id"}],
            "optional": false,
            "name": format!("{}.public.all_types.Key", s.prefix),
        })
    );

    // Values, column by column.
    for (row, record) in rows.iter().zip(&records) {
        let p = payload(record);
        assert_eq!(p["op"], "c");
        assert_eq!(p["before"], Json::Null);
        assert_eq!(
            record.key.as_ref().map(|k| &k["payload"]),
            Some(&json!({"id": row.id}))
        );
        let after = &p["after"];
        assert_eq!(after["id"], row.id, "rows sorted by id");
        let object = after.as_object().expect("after is an object");
        assert_eq!(object.len(), cols.len() + 1, "row {}: every column", row.id);
        for c in &cols {
            let cell = row.cells.iter().find(|cell| cell.0 == c.name);
            let expected = cell.map_or(Json::Null, |cell| cell.2.clone());
            let actual = &after[c.name];
            if !same(&expected, actual) {
                mismatches.push(format!(
                    "row {} column {} ({}) inserted as {}:\n  expected {expected}\n  actual   {actual}",
                    row.id,
                    c.name,
                    c.ddl,
                    cell.map_or("NULL", |cell| cell.1.as_str()),
                ));
            }
        }
    }

    // NOT NULL under REPLICA IDENTITY FULL: required, numeric and int4[]
    // too (an unchanged TOASTed value is filled in from the old row there,
    // so never lacks its value).
    let r = &required[0];
    for (column, optional) in [
        ("id", false),
        ("t", false),
        ("d", false),
        ("n", false),
        ("a", false),
        ("ta", false),
        ("b", false),
        ("ts", false),
        ("e", false),
        ("nn", true),
    ] {
        let actual = &field_schema(r, column)["optional"];
        if actual != &Json::Bool(optional) {
            mismatches.push(format!(
                "required_types.{column}: optional expected {optional}, actual {actual}"
            ));
        }
    }
    assert_eq!(
        payload(r)["after"],
        json!({
            "id": 1, "t": "t", "d": 19_723, "n": "AJY=", "a": [1], "ta": ["x"], "b": "AQ==",
            "ts": "2024-01-01T00:00:00.000000Z", "e": "ok", "nn": null,
        })
    );

    // The key struct: primary-key order, every field required, each in its
    // column's Connect type.
    let key = keyed[0].key.as_ref().expect("keyed");
    assert_eq!(
        key["schema"],
        json!({
            "type": "struct",
            "fields": [
                {"type": "bytes", "optional": false, "name": "org.apache.kafka.connect.data.Decimal",
                 "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "5"},
                 "field": "k_num"},
                {"type": "string", "optional": false, "name": "io.debezium.data.Uuid", "version": 1,
                 "field": "k_uuid"},
                {"type": "string", "optional": false, "name": "io.debezium.time.ZonedTimestamp",
                 "version": 1, "field": "k_ts"},
            ],
            "optional": false,
            "name": format!("{}.public.typed_keys.Key", s.prefix),
        })
    );
    // -1.50: unscaled -150 = FF 6A.
    assert_eq!(
        key["payload"],
        json!({
            "k_num": dec("-150"),
            "k_uuid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "k_ts": "2024-03-10T10:30:00.000000Z",
        })
    );
    assert_eq!(key["payload"]["k_num"], "/2o=");
    let names: Vec<&str> = after_fields(&keyed[0])
        .iter()
        .map(|f| f["field"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        names,
        ["k_uuid", "k_num", "k_ts", "v"],
        "row fields in column order"
    );

    running.stop().await;
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_nan_stops_the_default_mode_without_losing_the_row() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "nan");
    s.sql("CREATE TABLE prices (id int PRIMARY KEY, amount numeric(10,2))");
    let connector = s.start(&bootstrap, &["--status-interval", "200ms"]);
    s.await_slot().await;

    s.sql("INSERT INTO prices VALUES (1, 1.5)");
    let after_first = s.current_lsn();
    let first = consume(&bootstrap, &s.topic("prices"), 1, TIMEOUT).await;
    assert_eq!(first.len(), 1);
    assert_eq!(
        payload(&first[0])["after"],
        json!({"id": 1, "amount": "AJY="})
    );
    wait_until(TIMEOUT, "the first row confirmed", || async {
        s.confirmed_flush_lsn().is_some_and(|c| c >= after_first)
    })
    .await;

    s.sql("INSERT INTO prices VALUES (2, 'NaN')");
    let error = connector.wait_for_error().await;
    let text = pgcdc_kafka::error_chain(&error);
    assert!(
        !error.is_retryable(),
        "a NaN does not go away on retry: {text}"
    );
    for needle in [
        "column \"amount\"",
        "public.prices",
        "numeric(10,2)",
        "is NaN",
        "--decimal-handling double or --decimal-handling string",
    ] {
        assert!(text.contains(needle), "error names {needle}: {text}");
    }
    assert!(
        !text.contains("\"NaN\""),
        "the error names the kind of value, it does not quote it: {text}"
    );
    let PipelineError::Row(row_error) = &error else {
        panic!("a row error expected: {text}");
    };
    let RowErrorKind::Value {
        lsn: change_lsn,
        column,
        error: ValueError::SpecialNumeric { .. },
        ..
    } = row_error.kind()
    else {
        panic!("a special-numeric value error expected: {text}");
    };
    assert_eq!(column, "amount");
    let change_lsn: Lsn = *change_lsn;

    // The failing change is neither sent nor confirmed. The slot may have
    // reached the change's own LSN (when idle it follows the WAL end, which
    // was the start of this transaction's first record), but not passed it:
    // Postgres replays every transaction whose commit record starts at or
    // after confirmed_flush_lsn, and this one's commit follows the change.
    let confirmed = s.confirmed_flush_lsn().expect("slot");
    assert!(
        confirmed <= change_lsn,
        "confirmed_flush_lsn {confirmed} must not pass the failing change at {change_lsn}"
    );
    let sent = consume(&bootstrap, &s.topic("prices"), 2, Duration::from_secs(5)).await;
    assert_eq!(sent.len(), 1, "nothing sent for the failing row: {sent:#?}");

    // Restarted with the fix the error names, the row arrives: nothing was lost.
    let fixed = s.start(&bootstrap, &["--decimal-handling", "string"]);
    let records = consume(&bootstrap, &s.topic("prices"), 2, TIMEOUT).await;
    assert_eq!(records.len(), 2, "the NaN row after the restart");
    assert_eq!(
        payload(&records[1])["after"],
        json!({"id": 2, "amount": "NAN"}),
        "string mode writes NaN as Debezium's NAN"
    );
    assert_eq!(
        field_schema(&records[1], "amount"),
        &json!({"type": "string", "optional": true, "field": "amount"})
    );
    fixed.stop().await;
    assert!(s.confirmed_flush_lsn().expect("slot") > change_lsn);
}

/// Runs a connector in `--decimal-handling <mode>` over one table of decimal
/// columns and returns the rows' records, sorted by id.
async fn decimal_mode_records(mode: &str) -> Vec<Record> {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), &format!("dec_{mode}"));
    s.sql(
        "CREATE TABLE decimals (id int PRIMARY KEY, n numeric(10,2), v numeric, m money, \
         arr numeric[])",
    );
    let connector = s.start(&bootstrap, &["--decimal-handling", mode]);
    s.await_slot().await;
    s.sql("INSERT INTO decimals VALUES (1, 1.5, '100.500', 1234.5, '{1.50,NaN,NULL}')");
    s.sql("INSERT INTO decimals VALUES (2, 'NaN', 'Infinity', -1234.5, '{}')");
    s.sql("INSERT INTO decimals VALUES (3, -0.01, '-Infinity', NULL, '{Infinity,-Infinity}')");
    s.sql("INSERT INTO decimals VALUES (4, NULL, '0.0000001', 0, NULL)");
    let records = by_id(consume(&bootstrap, &s.topic("decimals"), 4, TIMEOUT).await);
    assert_eq!(records.len(), 4);
    connector.stop().await;
    records
}

fn assert_rows(records: &[Record], expected: &[Json]) {
    let mut mismatches = Vec::new();
    for (record, expected) in records.iter().zip(expected) {
        let actual = &payload(record)["after"];
        for (column, e) in expected.as_object().unwrap() {
            if !same(e, &actual[column]) {
                mismatches.push(format!(
                    "id {} column {column}: expected {e}, actual {}",
                    expected["id"], actual[column]
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_handling_double() {
    let records = decimal_mode_records("double").await;
    for column in ["n", "v", "m"] {
        assert_eq!(
            field_schema(&records[0], column),
            &json!({"type": "double", "optional": true, "field": column}),
            "{column}"
        );
    }
    assert_eq!(
        field_schema(&records[0], "arr"),
        &json!({"type": "array", "items": {"type": "double", "optional": true},
                "optional": true, "field": "arr"})
    );
    // NaN and ±Infinity become the doubles, written as JsonConverter writes them.
    assert_rows(
        &records,
        &[
            json!({"id": 1, "n": num("1.5"), "v": num("100.5"), "m": num("1234.5"),
                   "arr": [num("1.5"), "NaN", null]}),
            json!({"id": 2, "n": "NaN", "v": "Infinity", "m": num("-1234.5"), "arr": []}),
            json!({"id": 3, "n": num("-0.01"), "v": "-Infinity", "m": null,
                   "arr": ["Infinity", "-Infinity"]}),
            json!({"id": 4, "n": null, "v": num("1e-7"), "m": num("0.0"), "arr": null}),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_handling_string() {
    let records = decimal_mode_records("string").await;
    for column in ["n", "v", "m"] {
        assert_eq!(
            field_schema(&records[0], column),
            &json!({"type": "string", "optional": true, "field": column}),
            "{column}"
        );
    }
    assert_eq!(
        field_schema(&records[0], "arr"),
        &json!({"type": "array", "items": {"type": "string", "optional": true},
                "optional": true, "field": "arr"})
    );
    // Debezium's SpecialValueDecimal names for the special values; the
    // decimal's text as Postgres prints it otherwise (numeric(10,2) 1.5 prints
    // as 1.50; MONEY $1,234.50 without symbol and grouping).
    assert_rows(
        &records,
        &[
            json!({"id": 1, "n": "1.50", "v": "100.500", "m": "1234.50",
                   "arr": ["1.50", "NAN", null]}),
            json!({"id": 2, "n": "NAN", "v": "POSITIVE_INFINITY", "m": "-1234.50", "arr": []}),
            json!({"id": 3, "n": "-0.01", "v": "NEGATIVE_INFINITY", "m": null,
                   "arr": ["POSITIVE_INFINITY", "NEGATIVE_INFINITY"]}),
            // Debezium writes BigDecimal.toString(): 0.0000001 (unscaled 1,
            // scale 7) has the adjusted exponent 0 - 7 = -7 < -6, so it is
            // written in scientific notation, "1E-7".
            json!({"id": 4, "n": null, "v": "1E-7", "m": "0.00", "arr": null}),
        ],
    );
}

/// Waits for `count` records of `topic`, failing with the connector's own
/// error if it stopped instead.
async fn consume_or_connector_error(
    connector: Running,
    bootstrap: &str,
    topic: &str,
    count: usize,
) -> (Running, Vec<Record>) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let records = consume(bootstrap, topic, count, Duration::from_secs(3)).await;
        if records.len() >= count {
            return (connector, records);
        }
        if connector.is_finished() {
            let error = connector.wait_for_error().await;
            panic!(
                "connector stopped after {} of {count} records: {}",
                records.len(),
                pgcdc_kafka::error_chain(&error)
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out: {} of {count} records on {topic}",
            records.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp3_near_the_maximum_fits_in_milliseconds() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "ts_max");
    s.sql("CREATE TABLE ts_max (id int PRIMARY KEY, ms timestamp(3))");
    let connector = s.start(&bootstrap, &[]);
    s.await_slot().await;
    // Postgres's latest timestamp. In microseconds since 1970 it exceeds
    // int64 (294277-01-01 is day 106,762,940: Postgres's END_TIMESTAMP,
    // 9,223,371,331,200,000,000 us after 2000-01-01, is day 106,751,983 of
    // that epoch, which is day 10,957 of ours), but io.debezium.time.Timestamp
    // counts milliseconds, where it fits: 106,762,939 days * 86,400,000 ms +
    // 86,399,999 ms.
    s.sql("INSERT INTO ts_max VALUES (1, '294276-12-31 23:59:59.999')");
    let (connector, records) =
        consume_or_connector_error(connector, &bootstrap, &s.topic("ts_max"), 1).await;
    assert_eq!(
        payload(&records[0])["after"],
        json!({"id": 1, "ms": 106_762_939i64 * 86_400_000 + 86_399_999})
    );
    connector.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_created_or_changed_while_streaming() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "late_types");
    let connector = s.start(&bootstrap, &[]);
    s.await_slot().await;
    // Types the connector's startup catalog load did not see.
    s.sql("CREATE TYPE late_mood AS ENUM ('meh', 'yay')");
    s.sql("CREATE DOMAIN late_price AS numeric(8,3)");
    s.sql(
        "CREATE TABLE late (id int PRIMARY KEY, m late_mood, p late_price, ms late_mood[], \
         n numeric(10,2))",
    );
    s.sql("INSERT INTO late VALUES (1, 'yay', 1.5, '{meh,NULL}', 1.5)");
    // A column's modifier changes: Postgres sends a new Relation message.
    s.sql("ALTER TABLE late ALTER COLUMN n TYPE numeric(12,4)");
    s.sql("INSERT INTO late VALUES (2, 'meh', -0.001, '{}', 1.5)");
    // An enum label added to a type already in use.
    s.sql("ALTER TYPE late_mood ADD VALUE 'wow'");
    s.sql("INSERT INTO late VALUES (3, 'wow', NULL, '{wow}', NULL)");

    let (connector, records) =
        consume_or_connector_error(connector, &bootstrap, &s.topic("late"), 3).await;
    let records = by_id(records);
    let mood = |allowed: &str| {
        json!({"type": "string", "optional": true, "name": "io.debezium.data.Enum", "version": 1,
               "parameters": {"allowed": allowed}})
    };
    let with_field = |mut schema: Json, field: &str| {
        schema["field"] = Json::from(field);
        schema
    };
    let mut mismatches = Vec::new();
    let mut check = |what: &str, expected: Json, actual: &Json| {
        if !same(&expected, actual) {
            mismatches.push(format!(
                "{what}:\n  expected {expected}\n  actual   {actual}"
            ));
        }
    };
    let r1 = &records[0];
    check(
        "1: m schema",
        with_field(mood("meh,yay"), "m"),
        field_schema(r1, "m"),
    );
    check(
        "1: p schema",
        with_field(decimal_schema(3, Some(8)), "p"),
        field_schema(r1, "p"),
    );
    check(
        "1: ms schema",
        with_field(array_of(mood("meh,yay")), "ms"),
        field_schema(r1, "ms"),
    );
    check(
        "1: n schema",
        with_field(decimal_schema(2, Some(10)), "n"),
        field_schema(r1, "n"),
    );
    check(
        "1: after",
        json!({"id": 1, "m": "yay", "p": dec("1500"), "ms": ["meh", null], "n": dec("150")}),
        &payload(r1)["after"],
    );
    let r2 = &records[1];
    check(
        "2: n schema after ALTER COLUMN TYPE",
        with_field(decimal_schema(4, Some(12)), "n"),
        field_schema(r2, "n"),
    );
    check(
        "2: after",
        json!({"id": 2, "m": "meh", "p": dec("-1"), "ms": [], "n": dec("15000")}),
        &payload(r2)["after"],
    );
    let r3 = &records[2];
    check(
        "3: after",
        json!({"id": 3, "m": "wow", "p": null, "ms": ["wow"], "n": null}),
        &payload(r3)["after"],
    );
    // The schema must admit the value it describes.
    check(
        "3: m schema after ALTER TYPE ADD VALUE",
        with_field(mood("meh,yay,wow"), "m"),
        field_schema(r3, "m"),
    );
    check(
        "3: ms schema after ALTER TYPE ADD VALUE",
        with_field(array_of(mood("meh,yay,wow")), "ms"),
        field_schema(r3, "ms"),
    );
    connector.stop().await;
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
