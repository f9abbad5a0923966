//! Kafka Connect values as Avro values of the schemas [`super::schema`]
//! derives, for apache-avro to write.
//!
//! The walk follows the Connect schema, so each value lands in the union
//! branch its schema was given (`null` first unless the schema has a
//! default) and decimals become Avro decimals exactly where the schema
//! declares the logical type. In native mode the Debezium representations
//! are converted: days, milliseconds and microseconds stay numbers (only
//! the schema changes); ZonedTimestamp strings become microseconds since
//! the epoch. A value that does not fit its schema is a broken invariant of
//! the event model and is reported, never written.

use apache_avro::types::Value as AvroValue;

use super::schema::{is_avro_decimal, null_first, NativeType};
use crate::encode::options::AvroLogicalTypes;
use crate::event::value::{ConnectSchema, ConnectType, Value};

/// Debezium's TIMESTAMP `infinity` sentinel (pgjdbc's `DATE_POSITIVE_INFINITY`), µs.
const POSITIVE_INFINITY_MICROS: i64 = 9_223_372_036_825_200_000;
/// Debezium's TIMESTAMP `-infinity` sentinel (pgjdbc's `DATE_NEGATIVE_INFINITY`), µs.
const NEGATIVE_INFINITY_MICROS: i64 = -9_223_372_036_832_400_000;
const MICROS_PER_DAY: i128 = 86_400_000_000;

/// A value that cannot be written with its schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} at {}", if .path.is_empty() { "the top level" } else { .path.as_str() })]
pub struct ValueError {
    /// Dotted path of struct fields (and `[i]` array positions) to the value.
    pub path: String,
    /// What is wrong there.
    pub problem: Problem,
}

/// What is wrong with a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error(
        "a {found} value where the schema says {expected}; this is a bug in pgcdc-kafka, please \
         report it"
    )]
    Mismatch {
        expected: &'static str,
        found: &'static str,
    },
    /// The value's text is deliberately not kept: row values never reach logs.
    #[error(
        "a ZonedTimestamp value is not an ISO-8601 UTC timestamp in microsecond range; use \
         --avro-logical-types debezium to keep it a string"
    )]
    Timestamp,
}

impl ValueError {
    fn new(problem: Problem) -> Self {
        ValueError {
            path: String::new(),
            problem,
        }
    }

    fn within(mut self, step: &str) -> Self {
        self.path = match (self.path.is_empty(), self.path.starts_with('[')) {
            (true, _) => step.to_owned(),
            (false, true) => format!("{step}{}", self.path),
            (false, false) => format!("{step}.{}", self.path),
        };
        self
    }
}

/// The Avro value of `value`, described by `schema`.
///
/// # Errors
/// When the value does not fit the schema, or (native mode) a
/// ZonedTimestamp string does not parse.
pub fn avro_value(
    schema: &ConnectSchema,
    value: Value,
    logical: AvroLogicalTypes,
) -> Result<AvroValue, ValueError> {
    if !schema.optional {
        return required(schema, value, logical);
    }
    let null_index = u32::from(!null_first(schema));
    Ok(match value {
        Value::Null => AvroValue::Union(null_index, Box::new(AvroValue::Null)),
        value => AvroValue::Union(1 - null_index, Box::new(required(schema, value, logical)?)),
    })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int8(_) => "int8",
        Value::Int16(_) => "int16",
        Value::Int32(_) => "int32",
        Value::Int64(_) => "int64",
        Value::Float32(_) => "float32",
        Value::Float64(_) => "float64",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Array(_) => "array",
        Value::Map(_) => "map",
        Value::Struct(_) => "struct",
    }
}

fn required(
    schema: &ConnectSchema,
    value: Value,
    logical: AvroLogicalTypes,
) -> Result<AvroValue, ValueError> {
    use ConnectType as C;
    let mismatch = |value: &Value| {
        ValueError::new(Problem::Mismatch {
            expected: schema.kind.as_str(),
            found: kind_of(value),
        })
    };
    if let Some(native) = NativeType::of(schema, logical) {
        return native_value(native, value).map_err(|e| e.unwrap_or_else(|v| mismatch(&v)));
    }
    Ok(match (schema.kind, value) {
        (C::Boolean, Value::Boolean(b)) => AvroValue::Boolean(b),
        (C::Int8, Value::Int8(i)) => AvroValue::Int(i32::from(i)),
        (C::Int16, Value::Int16(i)) => AvroValue::Int(i32::from(i)),
        (C::Int32, Value::Int32(i)) => AvroValue::Int(i),
        (C::Int64, Value::Int64(i)) => AvroValue::Long(i),
        (C::Float32, Value::Float32(f)) => AvroValue::Float(f),
        (C::Float64, Value::Float64(f)) => AvroValue::Double(f),
        (C::String, Value::String(s)) => AvroValue::String(s),
        (C::Bytes, Value::Bytes(b)) if is_avro_decimal(schema) => {
            AvroValue::Decimal(apache_avro::Decimal::from(b))
        }
        (C::Bytes, Value::Bytes(b)) => AvroValue::Bytes(b),
        (C::Array, Value::Array(items)) => {
            let Some(item_schema) = schema.items.as_deref() else {
                return Err(mismatch(&Value::Array(items)));
            };
            AvroValue::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        avro_value(item_schema, item, logical)
                            .map_err(|e| e.within(&format!("[{i}]")))
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
        (C::Map, Value::Map(entries)) => {
            let Some((_, value_schema)) = schema.map.as_deref() else {
                return Err(mismatch(&Value::Map(entries)));
            };
            AvroValue::Map(
                entries
                    .into_iter()
                    .map(|(key, value)| {
                        let value = avro_value(value_schema, value, logical)
                            .map_err(|e| e.within("[value]"))?;
                        Ok((key, value))
                    })
                    .collect::<Result<_, ValueError>>()?,
            )
        }
        (C::Struct, Value::Struct(values)) => {
            if values.len() != schema.fields.len() {
                return Err(mismatch(&Value::Struct(values)));
            }
            let mut fields = Vec::with_capacity(values.len());
            for (field, (name, value)) in schema.fields.iter().zip(values) {
                if field.name != name {
                    return Err(ValueError::new(Problem::Mismatch {
                        expected: "struct",
                        found: "struct with other fields",
                    })
                    .within(&field.name));
                }
                let value =
                    avro_value(&field.schema, value, logical).map_err(|e| e.within(&name))?;
                fields.push((name, value));
            }
            AvroValue::Record(fields)
        }
        (_, value) => return Err(mismatch(&value)),
    })
}

/// The native Avro value; `Err(Ok(e))` for a bad value, `Err(Err(v))` hands
/// back a value of the wrong kind.
fn native_value(native: NativeType, value: Value) -> Result<AvroValue, Result<ValueError, Value>> {
    Ok(match (native, value) {
        (NativeType::Date, Value::Int32(days)) => AvroValue::Date(days),
        (NativeType::TimeMillis, Value::Int32(ms)) => AvroValue::TimeMillis(ms),
        (NativeType::TimeMicros, Value::Int64(us)) => AvroValue::TimeMicros(us),
        (NativeType::TimestampMillis, Value::Int64(ms)) => AvroValue::TimestampMillis(ms),
        (NativeType::TimestampMicros, Value::Int64(us)) => AvroValue::TimestampMicros(us),
        (NativeType::ZonedTimestamp, Value::String(text)) => match zoned_timestamp_micros(&text) {
            Some(us) => AvroValue::TimestampMicros(us),
            None => return Err(Ok(ValueError::new(Problem::Timestamp))),
        },
        // Written as the string itself: apache-avro checks its length only.
        (NativeType::Uuid, Value::String(uuid)) => AvroValue::String(uuid),
        (_, value) => return Err(Err(value)),
    })
}

/// Microseconds since the epoch of a Debezium ZonedTimestamp:
/// `[+-]YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, or `infinity` / `-infinity` (as
/// Debezium's TIMESTAMP sentinels, so both timestamp kinds agree).
pub fn zoned_timestamp_micros(text: &str) -> Option<i64> {
    match text {
        "infinity" => return Some(POSITIVE_INFINITY_MICROS),
        "-infinity" => return Some(NEGATIVE_INFINITY_MICROS),
        _ => {}
    }
    let body = text.strip_suffix('Z')?;
    let (date, time) = body.split_once('T')?;
    let (negative, date) = match date.as_bytes().first()? {
        b'-' => (true, &date[1..]),
        b'+' => (false, &date[1..]),
        _ => (false, date),
    };
    let mut ymd = date.split('-');
    let (year, month, day) = (ymd.next()?, ymd.next()?, ymd.next()?);
    if ymd.next().is_some() || year.len() < 4 {
        return None;
    }
    let year = number(year)? * if negative { -1 } else { 1 };
    let (month, day) = (number_of_len(month, 2)?, number_of_len(day, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.split(':');
    let (h, m, s) = (
        number_of_len(hms.next()?, 2)?,
        number_of_len(hms.next()?, 2)?,
        number_of_len(hms.next()?, 2)?,
    );
    if hms.next().is_some() || h > 24 || m > 59 || s > 59 {
        return None;
    }
    let micros_of_second = if time.contains('.') {
        if fraction.is_empty() || fraction.len() > 9 {
            return None;
        }
        // Sub-microsecond digits (never produced: Postgres keeps µs) are cut.
        let digits = &fraction[..fraction.len().min(6)];
        number(digits)? * 10i128.pow(6 - digits.len() as u32)
    } else {
        0
    };
    let micros = days_from_civil(year, month, day) * MICROS_PER_DAY
        + ((h * 60 + m) * 60 + s) * 1_000_000
        + micros_of_second;
    i64::try_from(micros).ok()
}

fn number(digits: &str) -> Option<i128> {
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn number_of_len(digits: &str, len: usize) -> Option<i128> {
    (digits.len() == len).then(|| number(digits)).flatten()
}

fn days_in_month(year: i128, month: i128) -> i128 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`; year 0 is 1 BC, as ISO-8601 counts).
fn days_from_civil(year: i128, month: i128, day: i128) -> i128 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::value::Field;

    #[test]
    fn zoned_timestamps_to_micros() {
        assert_eq!(zoned_timestamp_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            zoned_timestamp_micros("2024-02-29T12:34:56.123456Z"),
            Some(1_709_210_096_123_456)
        );
        assert_eq!(
            zoned_timestamp_micros("1969-12-31T23:59:59.9Z"),
            Some(-100_000)
        );
        assert_eq!(
            zoned_timestamp_micros("1900-01-01T00:00:00Z"),
            Some(-2_208_988_800_000_000)
        );
        // 4713 BC is astronomical year -4712 (proleptic Gregorian, as Postgres counts).
        assert_eq!(
            zoned_timestamp_micros("-4712-01-01T00:00:00Z"),
            Some(-210_863_520_000_000_000)
        );
        // Postgres reaches 294276 AD; int64 microseconds end in 294247 AD.
        assert_eq!(
            zoned_timestamp_micros("+294276-12-31T23:59:59.999999Z"),
            None
        );
        assert_eq!(
            zoned_timestamp_micros("+10000-01-01T00:00:00Z"),
            Some(253_402_300_800_000_000)
        );
        assert_eq!(
            zoned_timestamp_micros("infinity"),
            Some(POSITIVE_INFINITY_MICROS)
        );
        for bad in [
            "",
            "2024-02-30T00:00:00Z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "24-01-01T00:00:00Z",
        ] {
            assert_eq!(zoned_timestamp_micros(bad), None, "{bad}");
        }
    }

    fn field(name: &str, schema: ConnectSchema) -> Field {
        Field {
            name: name.to_owned(),
            schema,
        }
    }

    #[test]
    fn unions_follow_the_schema() {
        let mut snapshot = ConnectSchema::primitive(ConnectType::String).optional();
        snapshot.default = Some(Value::String("false".into()));
        let schema = ConnectSchema::structure(
            "x.S",
            vec![
                field("a", ConnectSchema::primitive(ConnectType::Int16).optional()),
                field("snapshot", snapshot),
            ],
        );
        let value = Value::Struct(vec![
            ("a".into(), Value::Int16(7)),
            ("snapshot".into(), Value::Null),
        ]);
        assert_eq!(
            avro_value(&schema, value, AvroLogicalTypes::Debezium),
            Ok(AvroValue::Record(vec![
                ("a".into(), AvroValue::Union(1, Box::new(AvroValue::Int(7)))),
                (
                    "snapshot".into(),
                    AvroValue::Union(1, Box::new(AvroValue::Null))
                ),
            ]))
        );
    }

    #[test]
    fn maps_write_their_values_in_union_branches() {
        let schema = ConnectSchema::map(
            ConnectSchema::primitive(ConnectType::String),
            ConnectSchema::primitive(ConnectType::String).optional(),
        );
        let value = Value::Map(vec![
            ("a".into(), Value::String("1".into())),
            ("b".into(), Value::Null),
        ]);
        let AvroValue::Map(entries) =
            avro_value(&schema, value, AvroLogicalTypes::Debezium).expect("fits")
        else {
            panic!("an Avro map")
        };
        assert_eq!(
            entries.get("a"),
            Some(&AvroValue::Union(
                1,
                Box::new(AvroValue::String("1".into()))
            ))
        );
        assert_eq!(
            entries.get("b"),
            Some(&AvroValue::Union(0, Box::new(AvroValue::Null)))
        );
        let avro =
            super::super::schema::avro_schema(&schema, AvroLogicalTypes::Debezium).expect("schema");
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&avro.parsed)
            .build()
            .expect("writer");
        let mut datum = Vec::new();
        writer
            .write_value_ref(&mut datum, &AvroValue::Map(entries))
            .expect("writes");
        assert!(!datum.is_empty());
    }

    #[test]
    fn mismatches_name_the_path() {
        let schema = ConnectSchema::structure(
            "x.S",
            vec![field(
                "list",
                ConnectSchema::array(ConnectSchema::primitive(ConnectType::Int32)),
            )],
        );
        let value = Value::Struct(vec![(
            "list".into(),
            Value::Array(vec![Value::Int32(1), Value::String("x".into())]),
        )]);
        let error = avro_value(&schema, value, AvroLogicalTypes::Debezium).expect_err("mismatch");
        assert_eq!(error.path, "list[1]");
        assert!(error
            .to_string()
            .starts_with("a string value where the schema says int32"));
        let zoned = ConnectSchema::named(ConnectType::String, "io.debezium.time.ZonedTimestamp");
        let error = avro_value(
            &zoned,
            Value::String("soon".into()),
            AvroLogicalTypes::Native,
        )
        .expect_err("bad timestamp");
        assert_eq!(error.problem, Problem::Timestamp);
        assert!(
            !error.to_string().contains("soon"),
            "no row value in {error}"
        );
    }
}
