//! `--debezium-compat`: Debezium 3.6's own values where pgcdc-kafka is
//! deliberately different, for a pipeline taken over from Debezium whose
//! consumers or registry subjects depend on them.
//!
//! By default pgcdc-kafka keeps what Debezium loses (see
//! `tests/debezium/deviations.toml`); each behaviour named here brings back
//! Debezium's bytes and schemas for one of those differences, and `all`
//! brings back every one. What each does, and where Debezium does it:
//!
//! - `numeric-nan-infinity`: a NUMERIC `NaN` / `±Infinity` under
//!   `--decimal-handling precise` is null (with a WARN naming the column).
//!   Debezium's `SpecialValueDecimal.fromLogical` throws for them in precise
//!   mode; `TableSchemaBuilder`'s value generator catches the exception
//!   (`event.converting.failure.handling.mode=warn`) and leaves the field
//!   unset. In a NOT NULL column that unset field fails Debezium's record, so
//!   there pgcdc-kafka still stops with its error.
//! - `date-infinity`: DATE `infinity` / `-infinity` are the day numbers
//!   Debezium writes. Streamed, `DateTimeFormat.date` parses them as the
//!   `LocalDate`s -5877611-06-21 / -5877611-06-22 (`PostgresValueConverter`'s
//!   `POSITIVE_INFINITY_LOCAL_DATE` / `NEGATIVE_INFINITY_LOCAL_DATE`), whose
//!   epoch days `io.debezium.time.Date.toEpochDay` casts to `int`; read by a
//!   snapshot, `PostgresConnection.getColumnValue` takes pgjdbc's
//!   `java.sql.Date` of `PGStatement.DATE_POSITIVE_INFINITY` /
//!   `DATE_NEGATIVE_INFINITY`, whose day numbers differ (and depend on the
//!   JVM's time zone: these are UTC's). Elements of a `date[]` are not
//!   changed.
//! - `unchanged-toast-numeric-array`: an unchanged TOASTed `int4[]` or
//!   `date[]` is the placeholder's bytes as int32 elements, an `int8[]` as
//!   int64 elements (`UnchangedToastedPlaceholder`, chosen by type name in
//!   `UnchangedToastedReplicationMessageColumn`); such a NOT NULL column is
//!   then required in the schema, as Debezium declares it.
//! - `before-image-unknown-columns`: NOT NULL columns are required in the
//!   schema even where a before-image does not carry them (REPLICA IDENTITY
//!   DEFAULT / INDEX), and the before-image fills them with the fallback of
//!   Debezium's converter for the type (`JdbcValueConverters.convertValue`:
//!   a null in a non-optional column becomes the fallback): zero, `false`,
//!   `""`, the epoch, an empty array ([`unknown_column_value`]).
//!
//! - `explicit-null-with-default`: a NULL in a column whose schema has a
//!   default (the column's DEFAULT, see `types::defaults`) is that default.
//!   Debezium's record holds the null, but Kafka Connect's `Struct.get`
//!   answers a null field with its schema's default, so every converter
//!   writes the default (JsonConverter's `replace.null.with.default`, on by
//!   default; Avro likewise): a consumer cannot tell an explicit NULL from
//!   the default.

use clap::ValueEnum;

use super::{decode_text, DecimalHandling, HstoreHandling, IntervalHandling, PgType, ValueOptions};
use crate::event::value::Value;

/// Debezium's streamed day number of DATE `infinity`: the epoch day of
/// -5877611-06-21, cast to `int`.
pub const DATE_POSITIVE_INFINITY_DAYS: i32 = -2_147_472_692;
/// Debezium's streamed day number of DATE `-infinity` (-5877611-06-22).
pub const DATE_NEGATIVE_INFINITY_DAYS: i32 = -2_147_472_691;

/// Debezium's snapshot day number of DATE `infinity`: pgjdbc reads it as
/// `new java.sql.Date(PGStatement.DATE_POSITIVE_INFINITY)`, whose
/// `toLocalDate()` (year 292278994, in a JVM whose time zone is UTC) has an
/// epoch day that `io.debezium.time.Date.toEpochDay` casts to `int`.
pub const SNAPSHOT_DATE_POSITIVE_INFINITY_DAYS: i32 = -622_191_234;
/// Debezium's snapshot day number of DATE `-infinity`
/// (`PGStatement.DATE_NEGATIVE_INFINITY`, likewise).
pub const SNAPSHOT_DATE_NEGATIVE_INFINITY_DAYS: i32 = -625_821_272;

/// Turns the streamed day number of a DATE `±infinity` into the one
/// Debezium's snapshot writes; other values stay (no real date is near
/// either number: PostgreSQL's dates end in 5874897 AD).
pub fn snapshot_date(value: &mut Value) {
    match value {
        Value::Int32(DATE_POSITIVE_INFINITY_DAYS) => {
            *value = Value::Int32(SNAPSHOT_DATE_POSITIVE_INFINITY_DAYS);
        }
        Value::Int32(DATE_NEGATIVE_INFINITY_DAYS) => {
            *value = Value::Int32(SNAPSHOT_DATE_NEGATIVE_INFINITY_DAYS);
        }
        _ => {}
    }
}

/// One value of `--debezium-compat`: the name of the deviation in
/// `tests/debezium/deviations.toml` whose Debezium form it brings back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum CompatBehaviour {
    /// NUMERIC NaN/Infinity become null in precise mode.
    NumericNanInfinity,
    /// DATE ±infinity become Debezium's overflowed day numbers.
    DateInfinity,
    /// Unchanged TOASTed int4[]/int8[]/date[] become the placeholder's character codes.
    UnchangedToastNumericArray,
    /// NOT NULL columns required; before-images fill unknown ones with zeros.
    BeforeImageUnknownColumns,
    /// A NULL in a column with a DEFAULT is written as the default.
    ExplicitNullWithDefault,
    /// Every behaviour above.
    All,
}

/// Which of Debezium's behaviours are on; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DebeziumCompat {
    pub numeric_nan_infinity: bool,
    pub date_infinity: bool,
    pub unchanged_toast_numeric_array: bool,
    pub before_image_unknown_columns: bool,
    pub explicit_null_with_default: bool,
}

impl DebeziumCompat {
    /// The behaviours `list` names (`all` names every one).
    pub fn of(list: &[CompatBehaviour]) -> Self {
        let on = |b| list.contains(&b) || list.contains(&CompatBehaviour::All);
        DebeziumCompat {
            numeric_nan_infinity: on(CompatBehaviour::NumericNanInfinity),
            date_infinity: on(CompatBehaviour::DateInfinity),
            unchanged_toast_numeric_array: on(CompatBehaviour::UnchangedToastNumericArray),
            before_image_unknown_columns: on(CompatBehaviour::BeforeImageUnknownColumns),
            explicit_null_with_default: on(CompatBehaviour::ExplicitNullWithDefault),
        }
    }
}

/// The unchanged-TOAST value Debezium writes for an array of `element`:
/// `Some` for `int4[]` / `date[]` (int32 codes) and `int8[]` (int64 codes)
/// of `placeholder`'s bytes, as Java's signed bytes widen.
pub fn toast_array_codes(element: &PgType, placeholder: &str) -> Option<Value> {
    let codes = placeholder.as_bytes().iter().map(|&b| b as i8);
    match element {
        PgType::Int4 | PgType::Date => Some(Value::Array(
            codes.map(|c| Value::Int32(i32::from(c))).collect(),
        )),
        PgType::Int8 => Some(Value::Array(
            codes.map(|c| Value::Int64(i64::from(c))).collect(),
        )),
        _ => None,
    }
}

/// The value Debezium writes for a NOT NULL column a before-image does not
/// carry: its converter's fallback for a null in a non-optional column.
/// Where Debezium's fallback is a value of the type, it is decoded from
/// that value's Postgres text, so it takes the same form as real data in
/// every value mode.
pub fn unknown_column_value(ty: &PgType, type_modifier: i32, opts: &ValueOptions) -> Value {
    let decoded = |text: &str| decode_text(ty, type_modifier, text, opts).unwrap_or(Value::Null);
    match ty {
        PgType::Modified {
            base,
            type_modifier,
        } => unknown_column_value(base, *type_modifier, opts),
        PgType::Bool => Value::Boolean(false),
        PgType::Int2
        | PgType::Int4
        | PgType::Int8
        | PgType::Oid
        | PgType::Float4
        | PgType::Float8
        | PgType::Numeric => decoded("0"),
        PgType::Money => match (opts.decimal_handling, opts.money_fraction_digits) {
            // BigDecimal.ZERO.setScale(money.fraction.digits), as text or value.
            (DecimalHandling::String, 0) => Value::String("0".into()),
            (DecimalHandling::String, digits) => {
                Value::String(format!("0.{}", "0".repeat(digits as usize)))
            }
            _ => decoded("0"),
        },
        PgType::Date => decoded("1970-01-01"),
        PgType::Time => decoded("00:00:00"),
        PgType::Timestamp => decoded("1970-01-01 00:00:00"),
        // ZonedTimestamp.toIsoString / ZonedTime.toIsoString of the epoch
        // and of midnight in UTC: no fraction digits.
        PgType::Timestamptz => Value::String("1970-01-01T00:00:00Z".into()),
        PgType::Timetz => Value::String("00:00:00Z".into()),
        PgType::Interval => match opts.interval_handling {
            IntervalHandling::Numeric => Value::Int64(0),
            IntervalHandling::String => decoded("00:00:00"),
        },
        PgType::Hstore => match opts.hstore_handling {
            HstoreHandling::Json => Value::String("{}".into()),
            HstoreHandling::Map => Value::Map(Vec::new()),
        },
        // bit(1) is a boolean; longer bit strings and bytea are empty
        // bytes, or an empty string in bytea's string modes.
        PgType::Bit | PgType::Varbit => match decoded("0") {
            Value::Boolean(_) => Value::Boolean(false),
            _ => Value::Bytes(Vec::new()),
        },
        PgType::Bytea => match decoded("\\x") {
            Value::String(_) => Value::String(String::new()),
            _ => Value::Bytes(Vec::new()),
        },
        PgType::Array(_) => Value::Array(Vec::new()),
        _ => Value::String(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::types::{BinaryHandling, TimePrecision};

    #[test]
    fn all_names_every_behaviour() {
        let all = DebeziumCompat::of(&[CompatBehaviour::All]);
        assert!(
            all.numeric_nan_infinity
                && all.date_infinity
                && all.unchanged_toast_numeric_array
                && all.before_image_unknown_columns
                && all.explicit_null_with_default
        );
        let one = DebeziumCompat::of(&[CompatBehaviour::DateInfinity]);
        assert_eq!(
            one,
            DebeziumCompat {
                date_infinity: true,
                ..DebeziumCompat::default()
            }
        );
    }

    #[test]
    fn snapshot_dates_of_infinity() {
        let mut days = [
            Value::Int32(DATE_POSITIVE_INFINITY_DAYS),
            Value::Int32(DATE_NEGATIVE_INFINITY_DAYS),
            Value::Int32(0),
            Value::Null,
        ];
        days.iter_mut().for_each(snapshot_date);
        assert_eq!(
            days,
            [
                Value::Int32(-622_191_234),
                Value::Int32(-625_821_272),
                Value::Int32(0),
                Value::Null
            ]
        );
    }

    #[test]
    fn toast_placeholder_as_character_codes() {
        let codes = toast_array_codes(&PgType::Int4, "__d\u{e9}").expect("int4[]");
        assert_eq!(
            codes,
            Value::Array(
                [95, 95, 100, -61, -87]
                    .into_iter()
                    .map(Value::Int32)
                    .collect()
            ),
            "UTF-8 bytes widened as Java's signed bytes"
        );
        assert_eq!(
            toast_array_codes(&PgType::Int8, "_"),
            Some(Value::Array(vec![Value::Int64(95)]))
        );
        assert!(toast_array_codes(&PgType::Date, "_").is_some());
        assert_eq!(toast_array_codes(&PgType::Int2, "_"), None);
        assert_eq!(toast_array_codes(&PgType::Float8, "_"), None);
    }

    #[test]
    fn unknown_columns_take_debeziums_fallbacks() {
        let opts = ValueOptions::default();
        let v = |ty: PgType, modifier: i32| unknown_column_value(&ty, modifier, &opts);
        assert_eq!(v(PgType::Int4, -1), Value::Int32(0));
        assert_eq!(v(PgType::Int8, -1), Value::Int64(0));
        assert_eq!(v(PgType::Float4, -1), Value::Float32(0.0));
        assert_eq!(v(PgType::Bool, -1), Value::Boolean(false));
        assert_eq!(v(PgType::Text, -1), Value::String(String::new()));
        assert_eq!(v(PgType::Uuid, -1), Value::String(String::new()));
        assert_eq!(v(PgType::Date, -1), Value::Int32(0));
        assert_eq!(v(PgType::Timestamp, -1), Value::Int64(0));
        assert_eq!(v(PgType::Time, -1), Value::Int64(0));
        assert_eq!(
            v(PgType::Timestamptz, -1),
            Value::String("1970-01-01T00:00:00Z".into())
        );
        assert_eq!(v(PgType::Bytea, -1), Value::Bytes(Vec::new()));
        assert_eq!(
            v(PgType::Array(Box::new(PgType::Text)), -1),
            Value::Array(Vec::new())
        );
        // numeric(10,2): the zero at the column's scale, one zero byte unscaled.
        assert_eq!(
            v(PgType::Numeric, (10 << 16) + 2 + 4),
            Value::Bytes(vec![0])
        );
        let strings = ValueOptions {
            decimal_handling: DecimalHandling::String,
            binary_handling: BinaryHandling::Hex,
            time_precision: TimePrecision::Connect,
            ..ValueOptions::default()
        };
        let s = |ty: PgType, modifier: i32| unknown_column_value(&ty, modifier, &strings);
        assert_eq!(
            s(PgType::Numeric, (10 << 16) + 2 + 4),
            Value::String("0.00".into())
        );
        assert_eq!(s(PgType::Money, -1), Value::String("0.00".into()));
        assert_eq!(s(PgType::Bytea, -1), Value::String(String::new()));
        assert_eq!(s(PgType::Timestamp, -1), Value::Int64(0));
    }
}
