//! Decoding Postgres's text output into Kafka Connect values.
//!
//! pgoutput (without `binary`) sends every column in its type's text output format, so
//! this module parses those formats into the value matching
//! [`column_schema`](super::column_schema). The formats depend on session
//! settings, which the replication connection must pin: `DateStyle=ISO`,
//! `IntervalStyle=postgres`, `TimeZone=UTC`, `bytea_output=hex`, `extra_float_digits`
//! at its default, and `lc_monetary=C` (MONEY prints as `-$1,234.56`). Other settings
//! make the text unparseable ([`ValueError::Malformed`]) rather than silently wrong,
//! except `lc_monetary`, whose symbols are skipped.
//!
//! NULL never reaches here (pgoutput marks it apart); the caller maps it to
//! [`Value::Null`]. Decoding is total over what Postgres prints and never panics.
//!
//! Representations where Debezium is wrong or silent, chosen here:
//! - DATE `infinity` / `-infinity` are `i32::MAX` / `i32::MIN` (Postgres dates span
//!   about ±2.1e6 years from 1970, far inside that range). Debezium emits -2147472693 and
//!   -2147472692.
//! - TIMESTAMP `±infinity` keep Debezium's sentinels (pgjdbc's `DATE_POSITIVE_INFINITY`
//!   and `DATE_NEGATIVE_INFINITY`): 9223372036825200000 / -9223372036832400000 µs, or
//!   9223372036825200 / -9223372036832400 ms for precision ≤ 3. TIMESTAMPTZ `±infinity`
//!   stay the strings `infinity` / `-infinity`, as Debezium writes them.
//! - INTERVAL `±infinity` (Postgres 17) is `i64::MAX` / `i64::MIN` µs, or the strings
//!   `infinity` / `-infinity` in string mode. Debezium fails on them.
//! - INTERVAL microseconds are computed exactly in integers; Debezium's double arithmetic
//!   truncates about 2% of values with fractional seconds to 1 µs less.
//! - NUMERIC `NaN` / `±Infinity` follow [`SpecialNumeric`] in precise mode, never a
//!   silent null.
//! - Multi-dimensional arrays are flattened in row-major order (Debezium emits a null per
//!   sub-array); array bounds decorations (`[0:1]={...}`) are dropped.
//! - TIMETZ with `24:00:00` and a non-zero offset is shifted like any other time
//!   (Debezium fails); offsets with seconds are honoured.

use std::fmt::Write as _;

use base64::Engine as _;

use super::{
    bit_length, decimal_precision_scale, temporal_unit, time_precision, BinaryHandling,
    DecimalHandling, IntervalHandling, PgType, SpecialNumeric, SpecialValue, TemporalUnit,
    ValueError, ValueOptions,
};
use crate::event::value::Value;

mod hstore;

use hstore::decode_hstore;

const MICROS_PER_DAY: i64 = 86_400_000_000;
/// A month in Debezium's `MicroDuration`: 365.25 / 12 = 30.4375 days, in µs.
const MICROS_PER_MONTH: i64 = 2_629_800_000_000;
/// pgjdbc's `PGStatement.DATE_POSITIVE_INFINITY`, Debezium's timestamp `infinity`, in µs.
const TIMESTAMP_POSITIVE_INFINITY_MICROS: i64 = 9_223_372_036_825_200_000;
/// pgjdbc's `PGStatement.DATE_NEGATIVE_INFINITY`, Debezium's timestamp `-infinity`, in µs.
const TIMESTAMP_NEGATIVE_INFINITY_MICROS: i64 = -9_223_372_036_832_400_000;

/// Why a text did not decode, before the type is attached. Never the text itself.
#[derive(Clone, Copy)]
enum Fault {
    Malformed(&'static str),
    OutOfRange(&'static str),
    Special(SpecialValue),
}

type Parsed<T> = Result<T, Fault>;

/// Decodes the text form of a non-NULL value of type `ty` (column modifier
/// `type_modifier`) into the [`Value`] matching `column_schema(ty, type_modifier, opts)`.
pub fn decode_text(
    ty: &PgType,
    type_modifier: i32,
    text: &str,
    opts: &ValueOptions,
) -> Result<Value, ValueError> {
    decode(ty, type_modifier, text, opts).map_err(|fault| {
        let type_name = ty.display(type_modifier);
        match fault {
            Fault::Malformed(reason) => ValueError::Malformed { type_name, reason },
            Fault::OutOfRange(target) => ValueError::OutOfRange { type_name, target },
            Fault::Special(special) => ValueError::SpecialNumeric { type_name, special },
        }
    })
}

fn decode(ty: &PgType, type_modifier: i32, text: &str, opts: &ValueOptions) -> Parsed<Value> {
    use PgType::*;
    let int = |reason| Fault::Malformed(reason);
    Ok(match ty {
        Bool => match text {
            "t" | "true" => Value::Boolean(true),
            "f" | "false" => Value::Boolean(false),
            _ => return Err(Fault::Malformed("expected t or f")),
        },
        Int2 => Value::Int16(text.parse().map_err(|_| int("expected a 16-bit integer"))?),
        Int4 => Value::Int32(text.parse().map_err(|_| int("expected a 32-bit integer"))?),
        Int8 => Value::Int64(text.parse().map_err(|_| int("expected a 64-bit integer"))?),
        Oid => Value::Int64(
            text.parse::<u32>()
                .map_err(|_| int("expected an unsigned 32-bit integer"))?
                .into(),
        ),
        Float4 => Value::Float32(parse_float(text)?),
        Float8 => Value::Float64(parse_float(text)?),
        Bytea => encode_binary(parse_bytea(text)?, opts.binary_handling),
        Bit | Varbit => decode_bits(text, bit_length(ty, type_modifier) == 1)?,
        Numeric => decode_numeric(text, type_modifier, opts)?,
        Money => decode_money(text, opts)?,
        Date => Value::Int32(parse_date(text)?),
        Time => {
            let micros = parse_time(text)?;
            match temporal_unit(ty, type_modifier, opts.time_precision) {
                // Whole milliseconds, the rest dropped (time of day is never negative).
                Some(TemporalUnit::Millis) => Value::Int32((micros / 1000) as i32),
                _ => Value::Int64(micros),
            }
        }
        Timetz => Value::String(decode_timetz(text)?),
        Timestamp => decode_timestamp(
            text,
            temporal_unit(ty, type_modifier, opts.time_precision) == Some(TemporalUnit::Millis),
        )?,
        Timestamptz => Value::String(decode_timestamptz(text, type_modifier)?),
        Interval => decode_interval(text, opts.interval_handling)?,
        Hstore => decode_hstore(text, opts.hstore_handling)?,
        Array(element) => Value::Array(
            parse_array(text)?
                .into_iter()
                .map(|item| match item {
                    None => Ok(Value::Null),
                    Some(item) => decode(element, type_modifier, &item, opts),
                })
                .collect::<Parsed<_>>()?,
        ),
        Modified {
            base,
            type_modifier,
        } => decode(base, *type_modifier, text, opts)?,
        // Text-like types, enums and unknown types: Postgres's text is the value.
        _ => Value::String(text.to_owned()),
    })
}

/// Postgres prints `NaN`, `Infinity`, `-Infinity` and shortest-exact decimals.
fn parse_float<F: std::str::FromStr + From<f32>>(text: &str) -> Parsed<F> {
    match text {
        "NaN" => Ok(F::from(f32::NAN)),
        "Infinity" => Ok(F::from(f32::INFINITY)),
        "-Infinity" => Ok(F::from(f32::NEG_INFINITY)),
        _ if text
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            text.parse()
                .map_err(|_| Fault::Malformed("expected a floating-point number"))
        }
        _ => Err(Fault::Malformed("expected a floating-point number")),
    }
}

/// BYTEA in its `binary.handling.mode`: Connect bytes, or a string in the encoding
/// Debezium uses (Java's `Base64` encoders, padded; `HexConverter`, lowercase).
fn encode_binary(bytes: Vec<u8>, mode: BinaryHandling) -> Value {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    match mode {
        BinaryHandling::Bytes => Value::Bytes(bytes),
        BinaryHandling::Base64 => Value::String(STANDARD.encode(bytes)),
        BinaryHandling::Base64UrlSafe => Value::String(URL_SAFE.encode(bytes)),
        BinaryHandling::Hex => Value::String(bytes.iter().fold(
            String::with_capacity(bytes.len() * 2),
            |mut hex, b| {
                let _ = write!(hex, "{b:02x}");
                hex
            },
        )),
    }
}

fn parse_bytea(text: &str) -> Parsed<Vec<u8>> {
    let bad = Fault::Malformed("expected \\x and an even number of hex digits (bytea_output=hex)");
    let hex = text.strip_prefix("\\x").ok_or(bad)?.as_bytes();
    let nibble = |c: u8| (c as char).to_digit(16);
    if hex.len() % 2 != 0 {
        return Err(Fault::Malformed("odd number of hex digits"));
    }
    hex.chunks_exact(2)
        .map(|p| Some((nibble(p[0])? * 16 + nibble(p[1])?) as u8))
        .collect::<Option<_>>()
        .ok_or(Fault::Malformed("expected hex digits after \\x"))
}

/// BIT(1) is a boolean; longer bit strings are Debezium's `Bits`: the string read as a
/// binary number, in minimal little-endian bytes (Java's `BitSet.toByteArray`).
fn decode_bits(text: &str, single: bool) -> Parsed<Value> {
    if !text.bytes().all(|b| b == b'0' || b == b'1') {
        return Err(Fault::Malformed("expected a string of 0 and 1"));
    }
    if single {
        return Ok(Value::Boolean(text.contains('1')));
    }
    let mut bytes = vec![0u8; text.len().div_ceil(8)];
    for (i, bit) in text.bytes().rev().enumerate() {
        if bit == b'1' {
            bytes[i / 8] |= 1 << (i % 8);
        }
    }
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    Ok(Value::Bytes(bytes))
}

/// A decimal as Postgres prints it: `-123.4500`, `NaN`, `Infinity`, `-Infinity`.
enum DecimalText<'a> {
    Finite {
        negative: bool,
        int: &'a str,
        frac: &'a str,
    },
    NaN,
    Infinity,
    NegativeInfinity,
}

fn parse_decimal(text: &str) -> Parsed<DecimalText<'_>> {
    match text {
        "NaN" => return Ok(DecimalText::NaN),
        "Infinity" => return Ok(DecimalText::Infinity),
        "-Infinity" => return Ok(DecimalText::NegativeInfinity),
        _ => {}
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
        return Err(Fault::Malformed("expected a decimal number"));
    }
    Ok(DecimalText::Finite {
        negative,
        int,
        frac,
    })
}

fn decode_numeric(text: &str, type_modifier: i32, opts: &ValueOptions) -> Parsed<Value> {
    let parsed = parse_decimal(text)?;
    match opts.decimal_handling {
        DecimalHandling::Double => Ok(Value::Float64(match parsed {
            DecimalText::NaN => f64::NAN,
            DecimalText::Infinity => f64::INFINITY,
            DecimalText::NegativeInfinity => f64::NEG_INFINITY,
            DecimalText::Finite { .. } => text
                .parse()
                .map_err(|_| Fault::Malformed("expected a decimal number"))?,
        })),
        DecimalHandling::String => Ok(Value::String(match parsed {
            DecimalText::NaN => "NAN".to_owned(),
            DecimalText::Infinity => "POSITIVE_INFINITY".to_owned(),
            DecimalText::NegativeInfinity => "NEGATIVE_INFINITY".to_owned(),
            DecimalText::Finite {
                negative,
                int,
                frac,
            } => {
                // Debezium sets a constrained column's scale (an unconstrained one keeps
                // the digits Postgres printed), then writes BigDecimal.toString().
                let scale = decimal_precision_scale(type_modifier)
                    .map_or(frac.len(), |(_, scale)| scale as usize);
                if frac.len() > scale && frac[scale..].bytes().any(|b| b != b'0') {
                    return Err(Fault::Malformed(
                        "more fraction digits than the column's scale",
                    ));
                }
                let frac = &frac[..frac.len().min(scale)];
                let unscaled = format!("{int}{frac}{}", "0".repeat(scale - frac.len()));
                java_big_decimal_string(negative, &unscaled, scale)
            }
        })),
        DecimalHandling::Precise => {
            let special = match parsed {
                DecimalText::Finite {
                    negative,
                    int,
                    frac,
                } => Ok((negative, int, frac)),
                DecimalText::NaN => Err(SpecialValue::NaN),
                DecimalText::Infinity => Err(SpecialValue::Infinity),
                DecimalText::NegativeInfinity => Err(SpecialValue::NegativeInfinity),
            };
            let (negative, int, frac) = match (special, opts.special_numeric) {
                (Ok(finite), _) => finite,
                (Err(special), SpecialNumeric::Fail) => return Err(Fault::Special(special)),
                (Err(_), SpecialNumeric::Null) => return Ok(Value::Null),
            };
            match decimal_precision_scale(type_modifier) {
                Some((_, scale)) => {
                    let scale = scale as usize;
                    if frac.len() > scale && frac[scale..].bytes().any(|b| b != b'0') {
                        return Err(Fault::Malformed(
                            "more fraction digits than the column's scale",
                        ));
                    }
                    let frac = &frac[..frac.len().min(scale)];
                    let unscaled = format!("{int}{frac}{}", "0".repeat(scale - frac.len()));
                    Ok(Value::Bytes(twos_complement(negative, &unscaled)))
                }
                None => {
                    // Debezium strips trailing zeros, never below scale 0.
                    let frac = frac.trim_end_matches('0');
                    let scale = i32::try_from(frac.len())
                        .map_err(|_| Fault::OutOfRange("an int32 scale"))?;
                    Ok(Value::Struct(vec![
                        ("scale".to_owned(), Value::Int32(scale)),
                        (
                            "value".to_owned(),
                            Value::Bytes(twos_complement(negative, &format!("{int}{frac}"))),
                        ),
                    ]))
                }
            }
        }
    }
}

/// Java's `BigDecimal.toString()` of `±unscaled × 10^-scale` (`unscaled` is ASCII
/// digits, leading zeros allowed): plain when the scale is 0, or positive with an
/// adjusted exponent of at least -6; otherwise scientific (`1E-7`, `1.5E-9`, `0E-10`).
/// A zero never carries a sign, as `BigDecimal` has no negative zero.
pub(crate) fn java_big_decimal_string(negative: bool, unscaled: &str, scale: usize) -> String {
    let digits = match unscaled.trim_start_matches('0') {
        "" => "0",
        digits => digits,
    };
    let sign = if negative && digits != "0" { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    // The exponent of the leading digit; i64 as `scale` may exceed the digits.
    let adjusted = digits.len() as i64 - 1 - scale as i64;
    if adjusted >= -6 {
        return match digits.len().checked_sub(scale) {
            Some(0) | None => format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len())),
            Some(point) => format!("{sign}{}.{}", &digits[..point], &digits[point..]),
        };
    }
    let (first, rest) = digits.split_at(1);
    let point = if rest.is_empty() { "" } else { "." };
    format!("{sign}{first}{point}{rest}E{adjusted}")
}

/// MONEY as Debezium parses it: a leading `-` or `(` makes it negative, everything but
/// digits and the decimal point (currency symbol, grouping) is dropped; precise mode
/// rounds half-up to `money_fraction_digits`.
fn decode_money(text: &str, opts: &ValueOptions) -> Parsed<Value> {
    let bad = Fault::Malformed("expected a monetary amount such as -$1,234.56 (lc_monetary=C)");
    let negative = text.starts_with('-') || text.starts_with('(');
    let plain: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if !plain.bytes().any(|b| b.is_ascii_digit()) || plain.matches('.').count() > 1 {
        return Err(bad);
    }
    let sign = if negative { "-" } else { "" };
    match opts.decimal_handling {
        DecimalHandling::Double => Ok(Value::Float64(
            format!("{sign}0{plain}").parse().map_err(|_| bad)?,
        )),
        DecimalHandling::String => Ok(Value::String(format!("{sign}{plain}"))),
        DecimalHandling::Precise => {
            let (int, frac) = plain.split_once('.').unwrap_or((&plain, ""));
            let scale = opts.money_fraction_digits as usize;
            let kept = format!("0{int}{:0<scale$}", &frac[..frac.len().min(scale)]);
            let round_up = frac.as_bytes().get(scale).is_some_and(|d| *d >= b'5');
            let unscaled = kept.parse::<u128>().map_err(|_| bad)? + u128::from(round_up);
            Ok(Value::Bytes(twos_complement(
                negative,
                &unscaled.to_string(),
            )))
        }
    }
}

/// The minimal big-endian two's complement bytes of the integer `±digits`, as Java's
/// `BigInteger.toByteArray` gives them (zero is one zero byte). `digits` are ASCII digits.
pub(crate) fn twos_complement(negative: bool, digits: &str) -> Vec<u8> {
    // Little-endian base-2^32 limbs, fed nine decimal digits at a time.
    let mut limbs: Vec<u32> = Vec::new();
    let digits = digits.trim_start_matches('0').as_bytes();
    let head = digits.len() % 9;
    let chunks = (head > 0)
        .then(|| &digits[..head])
        .into_iter()
        .chain(digits[head..].chunks(9));
    for chunk in chunks {
        let mut carry = chunk
            .iter()
            .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
        let factor = 10u64.pow(chunk.len() as u32);
        for limb in limbs.iter_mut() {
            let v = u64::from(*limb) * factor + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
    }
    let mut magnitude: Vec<u8> = limbs
        .iter()
        .rev()
        .flat_map(|l| l.to_be_bytes())
        .skip_while(|b| *b == 0)
        .collect();
    if magnitude.is_empty() {
        return vec![0];
    }
    if !negative {
        if magnitude[0] & 0x80 != 0 {
            magnitude.insert(0, 0);
        }
        return magnitude;
    }
    // Two's complement of the magnitude over its own width: invert, add one.
    let mut carry = true;
    for b in magnitude.iter_mut().rev() {
        let (v, c) = (!*b).overflowing_add(u8::from(carry));
        *b = v;
        carry = c;
    }
    if magnitude[0] & 0x80 == 0 {
        magnitude.insert(0, 0xff);
    }
    magnitude
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year 0 is 1 BC), after Howard
/// Hinnant's `days_from_civil`.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if month <= 2 { y + 1 } else { y }, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// A run of ASCII digits as a number, with its length bounded.
fn digits(s: &str, len: std::ops::RangeInclusive<usize>) -> Parsed<i64> {
    if !len.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Fault::Malformed("malformed number field"));
    }
    s.parse()
        .map_err(|_| Fault::Malformed("malformed number field"))
}

/// `YYYY-MM-DD` (year of era, at least four digits), `bc` for the ` BC` suffix.
fn parse_ymd(s: &str, bc: bool) -> Parsed<i64> {
    let mut parts = s.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Fault::Malformed("expected YYYY-MM-DD"));
    };
    let (y, m, d) = (
        digits(y, 1..=9)?,
        digits(m, 2..=2)? as u32,
        digits(d, 2..=2)? as u32,
    );
    let year = if bc { 1 - y } else { y };
    let month_days = [
        31,
        if is_leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[m as usize - 1] {
        return Err(Fault::Malformed("no such calendar date"));
    }
    Ok(days_from_civil(year, m, d))
}

fn strip_bc(s: &str) -> (&str, bool) {
    match s.strip_suffix(" BC") {
        Some(body) => (body, true),
        None => (s, false),
    }
}

fn parse_date(text: &str) -> Parsed<i32> {
    match text {
        "infinity" => Ok(i32::MAX),
        "-infinity" => Ok(i32::MIN),
        _ => {
            let (body, bc) = strip_bc(text);
            i32::try_from(parse_ymd(body, bc)?)
                .map_err(|_| Fault::OutOfRange("int32 days since 1970-01-01"))
        }
    }
}

/// `HH:MM:SS[.ffffff]` as microseconds since midnight; `24:00:00` is one whole day.
fn parse_time(s: &str) -> Parsed<i64> {
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut parts = hms.split(':');
    let (Some(h), Some(m), Some(sec), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Fault::Malformed("expected HH:MM:SS"));
    };
    let (h, m, sec) = (digits(h, 2..=2)?, digits(m, 2..=2)?, digits(sec, 2..=2)?);
    let frac = if frac.is_empty() && !s.contains('.') {
        0
    } else {
        fraction_micros(frac)?
    };
    let micros = ((h * 60 + m) * 60 + sec) * 1_000_000 + frac;
    if m > 59 || sec > 59 || micros > MICROS_PER_DAY {
        return Err(Fault::Malformed("time of day out of range"));
    }
    Ok(micros)
}

/// One to six fractional-second digits as microseconds.
fn fraction_micros(frac: &str) -> Parsed<i64> {
    let value =
        digits(frac, 1..=6).map_err(|_| Fault::Malformed("expected 1 to 6 fractional digits"))?;
    Ok(value * 10i64.pow(6 - frac.len() as u32))
}

/// `[+-]HH[:MM[:SS]]` as seconds east of UTC.
fn parse_offset(s: &str) -> Parsed<i64> {
    let sign = match s.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err(Fault::Malformed("expected a UTC offset")),
    };
    let mut seconds = 0;
    for (i, part) in s[1..].split(':').enumerate() {
        let unit = [3600, 60, 1]
            .get(i)
            .ok_or(Fault::Malformed("expected a UTC offset"))?;
        seconds += digits(part, 2..=2)? * unit;
    }
    Ok(sign * seconds)
}

/// Splits `HH:MM:SS[.ffffff]±offset` at the offset's sign.
fn split_offset(s: &str) -> Parsed<(&str, &str)> {
    let at = s
        .rfind(['+', '-'])
        .ok_or(Fault::Malformed("missing UTC offset"))?;
    Ok((&s[..at], &s[at..]))
}

fn decode_timestamp(text: &str, millis: bool) -> Parsed<Value> {
    let micros = match text {
        "infinity" => i128::from(TIMESTAMP_POSITIVE_INFINITY_MICROS),
        "-infinity" => i128::from(TIMESTAMP_NEGATIVE_INFINITY_MICROS),
        _ => {
            let (body, bc) = strip_bc(text);
            let (date, time) = body
                .split_once(' ')
                .ok_or(Fault::Malformed("expected YYYY-MM-DD HH:MM:SS"))?;
            i128::from(parse_ymd(date, bc)?) * i128::from(MICROS_PER_DAY)
                + i128::from(parse_time(time)?)
        }
    };
    // Scale first: a millisecond timestamp near Postgres's maximum fits in
    // int64 even where its microseconds would not.
    // Milliseconds round toward the past, as java.time's toEpochMilli does.
    let (value, unit) = match millis {
        true => (
            micros.div_euclid(1000),
            "int64 milliseconds since the epoch",
        ),
        false => (micros, "int64 microseconds since the epoch"),
    };
    i64::try_from(value)
        .map(Value::Int64)
        .map_err(|_| Fault::OutOfRange(unit))
}

/// TIMESTAMPTZ as Debezium's `ZonedTimestamp`: ISO-8601 in UTC with exactly as many
/// fraction digits as the column's precision (6 by default; none for precision 0).
fn decode_timestamptz(text: &str, type_modifier: i32) -> Parsed<String> {
    if text == "infinity" || text == "-infinity" {
        return Ok(text.to_owned());
    }
    let (body, bc) = strip_bc(text);
    let (date, rest) = body
        .split_once(' ')
        .ok_or(Fault::Malformed("expected YYYY-MM-DD HH:MM:SS+TZ"))?;
    let (time, offset) = split_offset(rest)?;
    let local = i128::from(parse_ymd(date, bc)?) * i128::from(MICROS_PER_DAY)
        + i128::from(parse_time(time)?);
    let utc = local - i128::from(parse_offset(offset)?) * 1_000_000;
    let days = i64::try_from(utc.div_euclid(i128::from(MICROS_PER_DAY)))
        .map_err(|_| Fault::OutOfRange("a date"))?;
    let (year, month, day) = civil_from_days(days);
    let year = match year {
        y if y > 9999 => format!("+{y}"),
        y if y < 0 => format!("-{:04}", -y),
        y => format!("{y:04}"),
    };
    let mut out = format!("{year}-{month:02}-{day:02}T");
    let digits = Some(time_precision(type_modifier)).filter(|p| *p > 0);
    push_time(
        &mut out,
        utc.rem_euclid(i128::from(MICROS_PER_DAY)) as i64,
        digits,
    );
    out.push('Z');
    Ok(out)
}

/// Appends `HH:MM:SS` and the fraction: `digits` fixed digits, or (None) Java's
/// `ISO_LOCAL_TIME` style, trailing zeros trimmed and nothing for zero.
fn push_time(out: &mut String, micros: i64, digits: Option<u32>) {
    let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    let frac = format!("{frac:06}");
    match digits {
        Some(n) => {
            out.push('.');
            out.push_str(&frac[..n as usize]);
        }
        None if micros % 1_000_000 != 0 => {
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        None => {}
    }
}

/// TIMETZ as Debezium's `ZonedTime`: shifted to UTC (wrapping around midnight), e.g.
/// `03:04:05.12+02` becomes `01:04:05.12Z`; `24:00:00+00` stays `24:00:00Z`.
fn decode_timetz(text: &str) -> Parsed<String> {
    let (time, offset) = split_offset(text)?;
    let local = parse_time(time)?;
    let offset = parse_offset(offset)?;
    let mut out = String::with_capacity(20);
    if local == MICROS_PER_DAY && offset == 0 {
        out.push_str("24:00:00");
    } else {
        push_time(
            &mut out,
            (local - offset * 1_000_000).rem_euclid(MICROS_PER_DAY),
            None,
        );
    }
    out.push('Z');
    Ok(out)
}

/// An interval's fields as IntervalStyle=postgres prints them, each signed.
#[derive(Default)]
struct IntervalFields {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
    micros: i64,
}

fn parse_interval(text: &str) -> Parsed<IntervalFields> {
    let mut f = IntervalFields::default();
    let bad = Fault::Malformed(
        "expected IntervalStyle=postgres output, e.g. 1 year 2 mons 3 days 04:05:06",
    );
    let signed = |s: &str| -> Parsed<i64> {
        let (sign, body) = match s.as_bytes().first() {
            Some(b'-') => (-1, &s[1..]),
            Some(b'+') => (1, &s[1..]),
            _ => (1, s),
        };
        Ok(sign * digits(body, 1..=18)?)
    };
    let mut tokens = text.split_whitespace();
    while let Some(token) = tokens.next() {
        if token.contains(':') {
            let (sign, body) = match token.as_bytes()[0] {
                b'-' => (-1, &token[1..]),
                b'+' => (1, &token[1..]),
                _ => (1, token),
            };
            let (hms, frac) = body
                .split_once('.')
                .map_or((body, None), |(a, b)| (a, Some(b)));
            let mut parts = hms.split(':');
            let (Some(h), Some(m), Some(s), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad);
            };
            f.hours = sign * digits(h, 1..=12)?;
            f.minutes = sign * digits(m, 2..=2)?;
            f.micros =
                sign * (digits(s, 2..=2)? * 1_000_000 + frac.map_or(Ok(0), fraction_micros)?);
            continue;
        }
        let value = signed(token)?;
        match tokens.next() {
            Some("year" | "years") => f.years = value,
            Some("mon" | "mons") => f.months = value,
            Some("day" | "days") => f.days = value,
            _ => return Err(bad),
        }
    }
    Ok(f)
}

fn decode_interval(text: &str, mode: IntervalHandling) -> Parsed<Value> {
    if let Some(negative) = match text {
        "infinity" => Some(false),
        "-infinity" => Some(true),
        _ => None,
    } {
        return Ok(match mode {
            IntervalHandling::Numeric => Value::Int64(if negative { i64::MIN } else { i64::MAX }),
            IntervalHandling::String => Value::String(text.to_owned()),
        });
    }
    let f = parse_interval(text)?;
    Ok(match mode {
        IntervalHandling::Numeric => {
            let total = (i128::from(f.years) * 12 + i128::from(f.months))
                * i128::from(MICROS_PER_MONTH)
                + i128::from(f.days) * i128::from(MICROS_PER_DAY)
                + (i128::from(f.hours) * 60 + i128::from(f.minutes)) * 60_000_000
                + i128::from(f.micros);
            Value::Int64(i64::try_from(total).map_err(|_| Fault::OutOfRange("int64 microseconds"))?)
        }
        IntervalHandling::String => {
            // Debezium's Interval.toIsoString: seconds as a plain decimal, trailing zeros stripped.
            let sign = if f.micros < 0 { "-" } else { "" };
            let (whole, frac) = (
                f.micros.unsigned_abs() / 1_000_000,
                f.micros.unsigned_abs() % 1_000_000,
            );
            let mut seconds = format!("{sign}{whole}");
            if frac != 0 {
                let _ = write!(seconds, ".{}", format!("{frac:06}").trim_end_matches('0'));
            }
            Value::String(format!(
                "P{}Y{}M{}DT{}H{}M{seconds}S",
                f.years, f.months, f.days, f.hours, f.minutes
            ))
        }
    })
}

/// Reads the double-quoted string `s` starts with, undoing backslash escapes. Returns it
/// and how many bytes of `s` it took.
fn quoted(s: &str) -> Parsed<(String, usize)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return Err(Fault::Malformed("expected a double-quoted string"));
    }
    let (mut out, mut i) = (Vec::new(), 1);
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Ok((utf8(out)?, i + 1)),
            b'\\' => {
                out.extend(b.get(i + 1));
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err(Fault::Malformed("unterminated quoted string"))
}

fn utf8(bytes: Vec<u8>) -> Parsed<String> {
    // Splits happen only at ASCII bytes, so slices of valid UTF-8 stay valid.
    String::from_utf8(bytes).map_err(|_| Fault::Malformed("invalid UTF-8"))
}

/// Parses an array literal (`{1,"a,b",NULL,{2,3}}`) into its elements' texts, NULL as
/// `None`, nested dimensions flattened in row-major order.
fn parse_array(text: &str) -> Parsed<Vec<Option<String>>> {
    let body = match text.strip_prefix('[') {
        Some(_) => {
            &text[text
                .find('=')
                .ok_or(Fault::Malformed("malformed array bounds"))?
                + 1..]
        }
        None => text,
    };
    let bad = || Fault::Malformed("malformed array literal");
    let b = body.as_bytes();
    let (mut out, mut depth, mut i) = (Vec::new(), 0usize, 0usize);
    // Whether an element (or a nested array) may come next, and whether `}` may.
    let (mut want_item, mut may_close) = (true, false);
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_whitespace() => i += 1,
            b'{' if want_item => {
                (depth, i, may_close) = (depth + 1, i + 1, true);
            }
            b'}' if depth > 0 && (may_close || !want_item) => {
                (depth, i, want_item, may_close) = (depth - 1, i + 1, false, false);
                if depth == 0 {
                    break;
                }
            }
            b',' if depth > 0 && !want_item => (want_item, may_close, i) = (true, false, i + 1),
            b'"' if depth > 0 && want_item => {
                let (item, used) = quoted(&body[i..])?;
                out.push(Some(item));
                (i, want_item, may_close) = (i + used, false, false);
            }
            c if depth > 0 && want_item && c != b',' && c != b'}' && c != b'{' => {
                let (mut item, mut escaped) = (Vec::new(), false);
                while i < b.len() && !matches!(b[i], b',' | b'}') {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        (escaped, i) = (true, i + 1);
                    }
                    item.push(b[i]);
                    i += 1;
                }
                while item.last().is_some_and(u8::is_ascii_whitespace) {
                    item.pop();
                }
                let null = !escaped && item.eq_ignore_ascii_case(b"NULL");
                out.push(if null { None } else { Some(utf8(item)?) });
                (want_item, may_close) = (false, false);
            }
            _ => return Err(bad()),
        }
    }
    if depth != 0 || i == 0 || !body[i..].trim().is_empty() {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::types::{numeric_precision_scale, TimePrecision, TypeRegistry};
    use proptest::prelude::*;

    fn opts() -> ValueOptions {
        ValueOptions::default()
    }

    fn ok(ty: &PgType, typmod: i32, text: &str) -> Value {
        decode_text(ty, typmod, text, &opts())
            .unwrap_or_else(|e| panic!("{text:?} should decode: {e}"))
    }

    fn with(o: &ValueOptions, ty: &PgType, typmod: i32, text: &str) -> Value {
        decode_text(ty, typmod, text, o).unwrap_or_else(|e| panic!("{text:?} should decode: {e}"))
    }

    fn fails(ty: &PgType, typmod: i32, text: &str) -> ValueError {
        decode_text(ty, typmod, text, &opts()).expect_err("text should be rejected")
    }

    fn s(v: &str) -> Value {
        Value::String(v.to_owned())
    }

    fn numeric(p: i32, s: i32) -> i32 {
        ((p << 16) | (s & 0x7ff)) + 4
    }

    fn array(t: PgType) -> PgType {
        PgType::Array(Box::new(t))
    }

    #[test]
    fn booleans_and_integers() {
        assert_eq!(ok(&PgType::Bool, -1, "t"), Value::Boolean(true));
        assert_eq!(ok(&PgType::Bool, -1, "f"), Value::Boolean(false));
        fails(&PgType::Bool, -1, "yes");
        assert_eq!(ok(&PgType::Int2, -1, "-32768"), Value::Int16(i16::MIN));
        assert_eq!(ok(&PgType::Int2, -1, "32767"), Value::Int16(i16::MAX));
        fails(&PgType::Int2, -1, "32768");
        assert_eq!(ok(&PgType::Int4, -1, "-2147483648"), Value::Int32(i32::MIN));
        assert_eq!(
            ok(&PgType::Int8, -1, "9223372036854775807"),
            Value::Int64(i64::MAX)
        );
        assert_eq!(
            ok(&PgType::Int8, -1, "-9223372036854775808"),
            Value::Int64(i64::MIN)
        );
        fails(&PgType::Int8, -1, "1.0");
        assert_eq!(
            ok(&PgType::Oid, -1, "4294967295"),
            Value::Int64(4_294_967_295)
        );
    }

    #[test]
    fn floats_with_special_values() {
        assert!(matches!(ok(&PgType::Float8, -1, "NaN"), Value::Float64(v) if v.is_nan()));
        assert_eq!(
            ok(&PgType::Float8, -1, "Infinity"),
            Value::Float64(f64::INFINITY)
        );
        assert_eq!(
            ok(&PgType::Float8, -1, "-Infinity"),
            Value::Float64(f64::NEG_INFINITY)
        );
        assert_eq!(
            ok(&PgType::Float8, -1, "1.7976931348623157e+308"),
            Value::Float64(f64::MAX)
        );
        assert_eq!(ok(&PgType::Float8, -1, "0.1"), Value::Float64(0.1));
        assert_eq!(ok(&PgType::Float8, -1, "-0"), Value::Float64(-0.0));
        assert!(matches!(ok(&PgType::Float4, -1, "NaN"), Value::Float32(v) if v.is_nan()));
        assert_eq!(
            ok(&PgType::Float4, -1, "-Infinity"),
            Value::Float32(f32::NEG_INFINITY)
        );
        assert_eq!(
            ok(&PgType::Float4, -1, "3.4028235e+38"),
            Value::Float32(f32::MAX)
        );
        assert_eq!(ok(&PgType::Float4, -1, "1e-45"), Value::Float32(1e-45));
        fails(&PgType::Float8, -1, "inf");
        fails(&PgType::Float4, -1, "");
    }

    #[test]
    fn numeric_precise_rescales_to_the_column_scale() {
        let n = PgType::Numeric;
        assert_eq!(
            ok(&n, numeric(10, 2), "123.45"),
            Value::Bytes(vec![0x30, 0x39])
        );
        assert_eq!(
            ok(&n, numeric(10, 2), "123.4"),
            Value::Bytes(vec![0x30, 0x34])
        );
        assert_eq!(ok(&n, numeric(10, 2), "-0.01"), Value::Bytes(vec![0xff]));
        assert_eq!(ok(&n, numeric(10, 2), "0.00"), Value::Bytes(vec![0]));
        assert_eq!(ok(&n, numeric(10, 2), "1.270"), Value::Bytes(vec![0x7f]));
        assert_eq!(
            ok(&n, numeric(10, 2), "1.28"),
            Value::Bytes(vec![0x00, 0x80])
        );
        assert_eq!(ok(&n, numeric(10, 2), "-1.28"), Value::Bytes(vec![0x80]));
        assert_eq!(
            ok(&n, numeric(10, 2), "-1.29"),
            Value::Bytes(vec![0xff, 0x7f])
        );
        assert_eq!(
            ok(&n, numeric(10, 0), "-256"),
            Value::Bytes(vec![0xff, 0x00])
        );
        assert_eq!(
            ok(&n, numeric(5, -2), "12300"),
            Value::Bytes(vec![0x30, 0x0c])
        );
        assert_eq!(numeric_precision_scale(numeric(5, -2)), Some((5, -2)));
        let e = fails(&n, numeric(10, 2), "1.234");
        assert!(e
            .to_string()
            .starts_with("cannot decode a value of type numeric(10,2): more fraction digits"));
        fails(&n, numeric(10, 2), "1e5");
        fails(&n, numeric(10, 2), ".");
        // BigInteger("-123456789012345678901234567890123456789").toByteArray()
        let big = ok(
            &n,
            numeric(39, 0),
            "-123456789012345678901234567890123456789",
        );
        assert_eq!(big, Value::Bytes(hex("a31f165a9fea013a55205cd751c67eeb")));
        let bigger = ok(
            &n,
            numeric(60, 13),
            "9876543210987654321098765432109876543.2109876543210",
        );
        assert_eq!(
            bigger,
            Value::Bytes(hex("4393fb25a23480e82908ce2957cfb667d751c67eea"))
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn variable(scale: i32, value: Vec<u8>) -> Value {
        Value::Struct(vec![
            ("scale".into(), Value::Int32(scale)),
            ("value".into(), Value::Bytes(value)),
        ])
    }

    #[test]
    fn unconstrained_numeric_is_variable_scale_without_trailing_zeros() {
        let n = PgType::Numeric;
        assert_eq!(ok(&n, -1, "1.500"), variable(1, vec![15]));
        assert_eq!(ok(&n, -1, "100"), variable(0, vec![100]));
        assert_eq!(ok(&n, -1, "0.000"), variable(0, vec![0]));
        assert_eq!(ok(&n, -1, "-12.340"), variable(2, vec![0xfb, 0x2e]));
        assert_eq!(ok(&n, -1, "0.0001"), variable(4, vec![1]));
    }

    #[test]
    fn numeric_special_values_follow_the_policy() {
        let n = PgType::Numeric;
        for text in ["NaN", "Infinity", "-Infinity"] {
            for typmod in [-1, numeric(10, 2)] {
                let e = fails(&n, typmod, text);
                assert!(matches!(e, ValueError::SpecialNumeric { .. }));
                assert!(e
                    .to_string()
                    .contains("--decimal-handling double or --decimal-handling string"));
                let null = ValueOptions {
                    special_numeric: SpecialNumeric::Null,
                    ..opts()
                };
                assert_eq!(with(&null, &n, typmod, text), Value::Null);
            }
        }
        let double = ValueOptions {
            decimal_handling: DecimalHandling::Double,
            ..opts()
        };
        assert!(matches!(with(&double, &n, -1, "NaN"), Value::Float64(v) if v.is_nan()));
        assert_eq!(
            with(&double, &n, -1, "-Infinity"),
            Value::Float64(f64::NEG_INFINITY)
        );
        assert_eq!(
            with(&double, &n, numeric(10, 2), "1234.56"),
            Value::Float64(1234.56)
        );
        let string = ValueOptions {
            decimal_handling: DecimalHandling::String,
            ..opts()
        };
        assert_eq!(with(&string, &n, -1, "NaN"), s("NAN"));
        assert_eq!(with(&string, &n, -1, "Infinity"), s("POSITIVE_INFINITY"));
        assert_eq!(with(&string, &n, -1, "-Infinity"), s("NEGATIVE_INFINITY"));
        assert_eq!(with(&string, &n, -1, "-1.500"), s("-1.500"));
    }

    #[test]
    fn money_in_each_mode() {
        let m = PgType::Money;
        assert_eq!(
            ok(&m, -1, "$1,234.56"),
            Value::Bytes(vec![0x01, 0xe2, 0x40])
        );
        assert_eq!(
            ok(&m, -1, "-$1,234.56"),
            Value::Bytes(vec![0xfe, 0x1d, 0xc0])
        );
        assert_eq!(ok(&m, -1, "($5.00)"), Value::Bytes(vec![0xfe, 0x0c]));
        assert_eq!(ok(&m, -1, "$0.00"), Value::Bytes(vec![0]));
        let one_digit = ValueOptions {
            money_fraction_digits: 1,
            ..opts()
        };
        assert_eq!(with(&one_digit, &m, -1, "$0.25"), Value::Bytes(vec![3]));
        let no_digits = ValueOptions {
            money_fraction_digits: 0,
            ..opts()
        };
        assert_eq!(with(&no_digits, &m, -1, "$9.99"), Value::Bytes(vec![10]));
        assert_eq!(with(&no_digits, &m, -1, "$99.5"), Value::Bytes(vec![100]));
        let double = ValueOptions {
            decimal_handling: DecimalHandling::Double,
            ..opts()
        };
        assert_eq!(
            with(&double, &m, -1, "-$1,234.56"),
            Value::Float64(-1234.56)
        );
        let string = ValueOptions {
            decimal_handling: DecimalHandling::String,
            ..opts()
        };
        assert_eq!(with(&string, &m, -1, "-$1,234.56"), s("-1234.56"));
        fails(&m, -1, "$");
    }

    #[test]
    fn bytea_hex_only() {
        assert_eq!(ok(&PgType::Bytea, -1, "\\x"), Value::Bytes(vec![]));
        assert_eq!(
            ok(&PgType::Bytea, -1, "\\x00ff10Ab"),
            Value::Bytes(vec![0, 255, 16, 0xab])
        );
        fails(&PgType::Bytea, -1, "a\\\\b\\001");
        fails(&PgType::Bytea, -1, "\\x0g");
        fails(&PgType::Bytea, -1, "\\x012");
        fails(&PgType::Bytea, -1, "\\9");
    }

    #[test]
    fn bit_strings() {
        assert_eq!(ok(&PgType::Bit, 1, "1"), Value::Boolean(true));
        assert_eq!(ok(&PgType::Bit, -1, "0"), Value::Boolean(false));
        assert_eq!(ok(&PgType::Varbit, 1, "1"), Value::Boolean(true));
        assert_eq!(
            ok(&PgType::Bit, 12, "000000000101"),
            Value::Bytes(vec![0x05])
        );
        assert_eq!(
            ok(&PgType::Bit, 12, "100000000000"),
            Value::Bytes(vec![0x00, 0x08])
        );
        assert_eq!(ok(&PgType::Bit, 4, "0000"), Value::Bytes(vec![]));
        assert_eq!(ok(&PgType::Varbit, -1, "101"), Value::Bytes(vec![0x05]));
        fails(&PgType::Bit, 4, "0102");
    }

    #[test]
    fn dates_including_bc_leap_days_and_infinity() {
        let d = |t| ok(&PgType::Date, -1, t);
        assert_eq!(d("1970-01-01"), Value::Int32(0));
        assert_eq!(d("1969-12-31"), Value::Int32(-1));
        assert_eq!(d("2000-02-29"), Value::Int32(11_016));
        assert_eq!(d("2024-02-29"), Value::Int32(19_782));
        assert_eq!(d("0044-03-15 BC"), Value::Int32(-735_160));
        assert_eq!(d("0001-01-01 BC"), Value::Int32(-719_528));
        assert_eq!(d("4714-11-24 BC"), Value::Int32(-2_440_588));
        assert_eq!(d("5874897-12-31"), Value::Int32(2_145_042_905));
        assert_eq!(d("infinity"), Value::Int32(i32::MAX));
        assert_eq!(d("-infinity"), Value::Int32(i32::MIN));
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-04-31",
            "2024-1-01",
            "24-01-01x",
            "",
            "-1-01-01",
        ] {
            fails(&PgType::Date, -1, bad);
        }
    }

    #[test]
    fn times_by_precision() {
        let t = PgType::Time;
        assert_eq!(ok(&t, -1, "00:00:00"), Value::Int64(0));
        assert_eq!(ok(&t, -1, "23:59:59.999999"), Value::Int64(86_399_999_999));
        assert_eq!(ok(&t, -1, "24:00:00"), Value::Int64(86_400_000_000));
        assert_eq!(ok(&t, 6, "12:34:56.7"), Value::Int64(45_296_700_000));
        assert_eq!(ok(&t, 3, "12:34:56.789"), Value::Int32(45_296_789));
        assert_eq!(ok(&t, 0, "24:00:00"), Value::Int32(86_400_000));
        for bad in [
            "25:00:00",
            "24:00:00.000001",
            "12:60:00",
            "12:00:60",
            "12:00",
            "12:00:00.",
            "12:00:00.1234567",
        ] {
            fails(&t, -1, bad);
        }
    }

    #[test]
    fn timestamps_with_and_without_fractions() {
        let ts = PgType::Timestamp;
        assert_eq!(ok(&ts, -1, "1970-01-01 00:00:00"), Value::Int64(0));
        assert_eq!(
            ok(&ts, -1, "2024-01-02 03:04:05.123456"),
            Value::Int64(1_704_164_645_123_456)
        );
        assert_eq!(
            ok(&ts, 3, "2024-01-02 03:04:05.123"),
            Value::Int64(1_704_164_645_123)
        );
        assert_eq!(
            ok(&ts, 0, "2024-01-02 03:04:05"),
            Value::Int64(1_704_164_645_000)
        );
        assert_eq!(ok(&ts, -1, "1969-12-31 23:59:59.999999"), Value::Int64(-1));
        assert_eq!(ok(&ts, 3, "1969-12-31 23:59:59.999"), Value::Int64(-1));
        assert_eq!(
            ok(&ts, -1, "0044-03-15 12:00:00 BC"),
            Value::Int64(-63_517_780_800_000_000)
        );
        assert_eq!(
            ok(&ts, 0, "10000-01-01 00:00:00"),
            Value::Int64(253_402_300_800_000)
        );
        assert_eq!(
            ok(&ts, -1, "infinity"),
            Value::Int64(9_223_372_036_825_200_000)
        );
        assert_eq!(
            ok(&ts, -1, "-infinity"),
            Value::Int64(-9_223_372_036_832_400_000)
        );
        assert_eq!(ok(&ts, 3, "infinity"), Value::Int64(9_223_372_036_825_200));
        assert_eq!(
            ok(&ts, 2, "-infinity"),
            Value::Int64(-9_223_372_036_832_400)
        );
        let e = fails(&ts, -1, "294277-01-01 00:00:00");
        assert!(matches!(e, ValueError::OutOfRange { .. }));
        fails(&ts, -1, "2024-01-02T03:04:05");
        fails(&ts, -1, "2024-01-02 03:04:05+00");
    }

    #[test]
    fn timestamptz_normalized_to_utc_with_six_digits() {
        let tz = |typmod, t| ok(&PgType::Timestamptz, typmod, t);
        assert_eq!(
            tz(-1, "2024-01-02 03:04:05.123456+00"),
            s("2024-01-02T03:04:05.123456Z")
        );
        assert_eq!(
            tz(-1, "2024-01-02 03:04:05+00"),
            s("2024-01-02T03:04:05.000000Z")
        );
        assert_eq!(
            tz(-1, "2024-01-02 03:04:05.1+05:30"),
            s("2024-01-01T21:34:05.100000Z")
        );
        assert_eq!(
            tz(-1, "2024-01-02 20:00:00-08"),
            s("2024-01-03T04:00:00.000000Z")
        );
        assert_eq!(
            tz(-1, "1900-01-01 00:00:00+05:53:28"),
            s("1899-12-31T18:06:32.000000Z")
        );
        assert_eq!(
            tz(3, "2024-01-02 03:04:05.12+00"),
            s("2024-01-02T03:04:05.120Z")
        );
        assert_eq!(tz(0, "2024-01-02 03:04:05+00"), s("2024-01-02T03:04:05Z"));
        assert_eq!(
            tz(-1, "0044-03-15 12:00:00+00 BC"),
            s("-0043-03-15T12:00:00.000000Z")
        );
        assert_eq!(
            tz(-1, "0001-12-31 23:00:00-02 BC"),
            s("0001-01-01T01:00:00.000000Z")
        );
        assert_eq!(
            tz(-1, "10000-01-01 00:00:00+00"),
            s("+10000-01-01T00:00:00.000000Z")
        );
        // Postgres 15's own output for the same instants under other TimeZone settings.
        assert_eq!(
            tz(0, "1899-12-31 23:27:42+05:21:10"),
            s("1899-12-31T18:06:32Z")
        );
        assert_eq!(
            tz(0, "0001-12-31 21:29:08-03:30:52 BC"),
            s("0001-01-01T01:00:00Z")
        );
        assert_eq!(
            tz(-1, "0044-03-15 17:53:28+05:53:28 BC"),
            s("-0043-03-15T12:00:00.000000Z")
        );
        assert_eq!(
            tz(-1, "2024-01-01 18:04:05.123456-03:30"),
            s("2024-01-01T21:34:05.123456Z")
        );
        assert_eq!(
            tz(3, "2024-01-02 12:04:05.12+01"),
            s("2024-01-02T11:04:05.120Z")
        );
        assert_eq!(tz(-1, "infinity"), s("infinity"));
        assert_eq!(tz(-1, "-infinity"), s("-infinity"));
        for bad in [
            "2024-01-02 03:04:05",
            "2024-01-02 03:04:05+5",
            "2024-01-02 03:04:05+05:30:00:00",
            "2024-01-02",
        ] {
            fails(&PgType::Timestamptz, -1, bad);
        }
    }

    #[test]
    fn timetz_normalized_to_utc() {
        let tt = |t| ok(&PgType::Timetz, -1, t);
        assert_eq!(tt("03:04:05.123+02"), s("01:04:05.123Z"));
        assert_eq!(tt("03:04:05.100000+02"), s("01:04:05.1Z"));
        assert_eq!(tt("01:00:00+02"), s("23:00:00Z"));
        assert_eq!(tt("23:30:00-01"), s("00:30:00Z"));
        assert_eq!(tt("12:00:00.5+05:30:15"), s("06:29:45.5Z"));
        assert_eq!(tt("00:00:00+00"), s("00:00:00Z"));
        assert_eq!(tt("24:00:00+00"), s("24:00:00Z"));
        assert_eq!(tt("24:00:00+02"), s("22:00:00Z"));
        fails(&PgType::Timetz, -1, "03:04:05");
    }

    #[test]
    fn intervals_numeric_and_iso() {
        let i = |t| ok(&PgType::Interval, -1, t);
        let month = 2_629_800_000_000i64;
        let day = 86_400_000_000i64;
        let hms = |h: i64, m: i64, s: i64, us: i64| ((h * 60 + m) * 60 + s) * 1_000_000 + us;
        assert_eq!(
            i("1 year 2 mons 3 days 04:05:06.789"),
            Value::Int64(14 * month + 3 * day + hms(4, 5, 6, 789_000))
        );
        assert_eq!(i("-1 days +02:03:00"), Value::Int64(-day + hms(2, 3, 0, 0)));
        assert_eq!(i("-04:05:06"), Value::Int64(-hms(4, 5, 6, 0)));
        assert_eq!(i("-1 years -2 mons"), Value::Int64(-14 * month));
        assert_eq!(i("1 mon"), Value::Int64(month));
        assert_eq!(i("00:00:00"), Value::Int64(0));
        assert_eq!(i("-00:00:00.5"), Value::Int64(-500_000));
        assert_eq!(i("1000000:00:00"), Value::Int64(hms(1_000_000, 0, 0, 0)));
        assert_eq!(i("3 days 00:00:00.000001"), Value::Int64(3 * day + 1));
        assert_eq!(i("infinity"), Value::Int64(i64::MAX));
        assert_eq!(i("-infinity"), Value::Int64(i64::MIN));
        for bad in [
            "1 fortnight",
            "P1Y",
            "1 year 2",
            "@ 1 year",
            "1:2:3",
            "01:02",
        ] {
            fails(&PgType::Interval, -1, bad);
        }
        let iso = ValueOptions {
            interval_handling: IntervalHandling::String,
            ..opts()
        };
        let j = |t| with(&iso, &PgType::Interval, -1, t);
        assert_eq!(
            j("1 year 2 mons 3 days 04:05:06.789"),
            s("P1Y2M3DT4H5M6.789S")
        );
        assert_eq!(j("-1 days +02:03:00"), s("P0Y0M-1DT2H3M0S"));
        assert_eq!(j("-04:05:06"), s("P0Y0M0DT-4H-5M-6S"));
        assert_eq!(j("-00:00:00.5"), s("P0Y0M0DT0H0M-0.5S"));
        assert_eq!(j("00:00:00"), s("P0Y0M0DT0H0M0S"));
        assert_eq!(j("infinity"), s("infinity"));
    }

    #[test]
    fn strings_pass_through() {
        let r = TypeRegistry::new();
        for oid in [
            25, 1043, 1042, 18, 19, 114, 3802, 142, 2950, 869, 650, 829, 774, 3904, 3614,
        ] {
            assert_eq!(
                ok(&r.resolve(oid, -1), -1, "héllo, wörld 🌍 \"x\""),
                s("héllo, wörld 🌍 \"x\""),
                "oid {oid}"
            );
        }
        assert_eq!(ok(&PgType::Bpchar, 9, "ab  "), s("ab  "));
        let mood = PgType::Enum {
            name: "mood".into(),
            labels: vec!["ok".into()],
        };
        assert_eq!(ok(&mood, -1, "ok"), s("ok"));
        assert_eq!(ok(&PgType::Unknown { oid: 600 }, -1, "(1,2)"), s("(1,2)"));
        let price = PgType::Modified {
            base: Box::new(PgType::Numeric),
            type_modifier: numeric(10, 2),
        };
        assert_eq!(ok(&price, -1, "1.5"), Value::Bytes(vec![0x00, 0x96]));
    }

    #[test]
    fn arrays_with_quoting_nulls_and_dimensions() {
        let ints = array(PgType::Int4);
        assert_eq!(
            ok(&ints, -1, "{1,2,3}"),
            Value::Array(vec![Value::Int32(1), Value::Int32(2), Value::Int32(3)])
        );
        assert_eq!(ok(&ints, -1, "{}"), Value::Array(vec![]));
        assert_eq!(
            ok(&ints, -1, "{NULL,1}"),
            Value::Array(vec![Value::Null, Value::Int32(1)])
        );
        assert_eq!(
            ok(&ints, -1, "{{1,2},{3,4}}"),
            Value::Array((1..=4).map(Value::Int32).collect())
        );
        assert_eq!(
            ok(&ints, -1, "[0:1]={5,6}"),
            Value::Array(vec![Value::Int32(5), Value::Int32(6)])
        );
        let text = array(PgType::Text);
        let literal = r#"{"a,b","c}d","e\\f","g\"h",NULL,"NULL",null,plain,"",héllo,"wörld 🌍"}"#;
        let expected = ["a,b", "c}d", "e\\f", "g\"h"]
            .map(s)
            .into_iter()
            .chain([
                Value::Null,
                s("NULL"),
                Value::Null,
                s("plain"),
                s(""),
                s("héllo"),
                s("wörld 🌍"),
            ])
            .collect();
        assert_eq!(ok(&text, -1, literal), Value::Array(expected));
        assert_eq!(
            ok(&array(PgType::Bpchar), 7, r#"{"a  ",b}"#),
            Value::Array(vec![s("a  "), s("b")])
        );
        assert_eq!(
            ok(&array(PgType::Numeric), numeric(5, 2), "{1.50,NULL}"),
            Value::Array(vec![Value::Bytes(vec![0x00, 0x96]), Value::Null])
        );
        assert_eq!(
            ok(&array(PgType::Bytea), -1, r#"{"\\x0102"}"#),
            Value::Array(vec![Value::Bytes(vec![1, 2])])
        );
        assert_eq!(
            ok(&array(PgType::Date), -1, "{2024-01-01,infinity}"),
            Value::Array(vec![Value::Int32(19_723), Value::Int32(i32::MAX)])
        );
        assert_eq!(
            ok(
                &array(PgType::Timestamptz),
                -1,
                r#"{"2024-01-02 03:04:05+00"}"#
            ),
            Value::Array(vec![s("2024-01-02T03:04:05.000000Z")])
        );
        for bad in [
            "{1,2", "{1,,2}", "1,2", "{1}x", "{,}", "{1,}", "", "{\"a}", "{{1},2}x",
        ] {
            fails(&text, -1, bad);
        }
        let e = fails(&ints, -1, "{1,x}");
        assert!(
            e.to_string()
                .starts_with("cannot decode a value of type int4[]: expected a 32-bit integer"),
            "{e}"
        );
    }

    #[test]
    fn bytea_in_each_binary_mode() {
        // 0xfb 0xff 0x00 0x3e: base64 "+/8APg==" standard, "-_8APg==" URL-safe.
        let text = "\\xfbff003e";
        let mode = |binary_handling| ValueOptions {
            binary_handling,
            ..opts()
        };
        let b = |m| with(&mode(m), &PgType::Bytea, -1, text);
        assert_eq!(
            b(BinaryHandling::Bytes),
            Value::Bytes(vec![0xfb, 0xff, 0, 0x3e])
        );
        assert_eq!(b(BinaryHandling::Base64), s("+/8APg=="));
        assert_eq!(b(BinaryHandling::Base64UrlSafe), s("-_8APg=="));
        assert_eq!(b(BinaryHandling::Hex), s("fbff003e"));
        let empty = |m| with(&mode(m), &PgType::Bytea, -1, "\\x");
        assert_eq!(empty(BinaryHandling::Base64), s(""));
        assert_eq!(empty(BinaryHandling::Hex), s(""));
        assert_eq!(
            with(
                &mode(BinaryHandling::Hex),
                &array(PgType::Bytea),
                -1,
                r#"{"\\x0A0b",NULL}"#
            ),
            Value::Array(vec![s("0a0b"), Value::Null])
        );
    }

    #[test]
    fn times_in_each_precision_mode() {
        let mode = |time_precision| ValueOptions {
            time_precision,
            ..opts()
        };
        let micro = mode(TimePrecision::AdaptiveTimeMicroseconds);
        let connect = mode(TimePrecision::Connect);
        let t = PgType::Time;
        // 12:34:56.789999 is 45,296,789,999 µs after midnight.
        assert_eq!(
            with(&micro, &t, 0, "12:34:56"),
            Value::Int64(45_296_000_000)
        );
        assert_eq!(
            with(&micro, &t, 3, "12:34:56.789"),
            Value::Int64(45_296_789_000)
        );
        assert_eq!(
            with(&micro, &t, -1, "12:34:56.789999"),
            Value::Int64(45_296_789_999)
        );
        assert_eq!(
            with(&connect, &t, -1, "12:34:56.789999"),
            Value::Int32(45_296_789)
        );
        assert_eq!(with(&connect, &t, 3, "00:00:00.001"), Value::Int32(1));
        assert_eq!(with(&connect, &t, -1, "24:00:00"), Value::Int32(86_400_000));
        let ts = PgType::Timestamp;
        // Sub-millisecond digits go, rounding toward the past on both sides of 1970.
        assert_eq!(
            with(&connect, &ts, -1, "2024-01-02 03:04:05.123999"),
            Value::Int64(1_704_164_645_123)
        );
        assert_eq!(
            with(&connect, &ts, -1, "1969-12-31 23:59:59.9995"),
            Value::Int64(-1)
        );
        assert_eq!(
            with(&connect, &ts, -1, "infinity"),
            Value::Int64(9_223_372_036_825_200)
        );
        assert_eq!(
            with(&micro, &ts, -1, "2024-01-02 03:04:05.123999"),
            Value::Int64(1_704_164_645_123_999)
        );
        assert_eq!(
            with(&connect, &PgType::Date, -1, "1970-01-02"),
            Value::Int32(1)
        );
        assert_eq!(
            with(
                &connect,
                &PgType::Timestamptz,
                -1,
                "2024-01-02 03:04:05.5+00"
            ),
            s("2024-01-02T03:04:05.500000Z")
        );
        // The longest timestamp Postgres has overflows µs but fits ms in connect mode.
        fails(&ts, -1, "294276-12-31 23:59:59.999999");
        assert!(matches!(
            with(&connect, &ts, -1, "294276-12-31 23:59:59.999999"),
            Value::Int64(_)
        ));
    }

    #[test]
    fn numeric_strings_as_java_big_decimal() {
        // Reference values are Java's: new BigDecimal(text).setScale(s).toString().
        let cases = [
            (false, "150", 2, "1.50"),
            (true, "1", 2, "-0.01"),
            (false, "0", 2, "0.00"),
            (false, "1", 7, "1E-7"),
            (false, "1", 6, "0.000001"),
            (false, "15", 7, "0.0000015"),
            (false, "15", 9, "1.5E-8"),
            (false, "0", 10, "0E-10"),
            (true, "0", 3, "0.000"),
            (true, "123456789", 10, "-0.0123456789"),
            (false, "12300", 0, "12300"),
            (false, "0012", 1, "1.2"),
        ];
        for (negative, unscaled, scale, java) in cases {
            assert_eq!(
                java_big_decimal_string(negative, unscaled, scale),
                java,
                "{negative} {unscaled} scale {scale}"
            );
        }
        let string = ValueOptions {
            decimal_handling: DecimalHandling::String,
            ..opts()
        };
        let n = |typmod, text| with(&string, &PgType::Numeric, typmod, text);
        assert_eq!(n(-1, "0.0000001"), s("1E-7"));
        assert_eq!(n(-1, "100.500"), s("100.500"));
        assert_eq!(n(numeric(10, 2), "1.5"), s("1.50"));
        assert_eq!(n(numeric(20, 10), "0.0000000000"), s("0E-10"));
        assert_eq!(n(numeric(20, 10), "-0.0000000012"), s("-1.2E-9"));
        assert_eq!(n(numeric(5, -2), "12300"), s("12300"));
        assert!(matches!(
            decode_text(&PgType::Numeric, numeric(10, 2), "1.239", &string),
            Err(ValueError::Malformed { .. })
        ));
    }

    #[test]
    fn errors_never_carry_the_value() {
        let secret = "sk_live_51HbQ9ZtopSecretValue";
        let cases: Vec<(PgType, i32, String)> = vec![
            (PgType::Int4, -1, secret.to_owned()),
            (PgType::Numeric, numeric(10, 2), "1.239".to_owned()),
            (PgType::Bytea, -1, format!("\\x{secret}")),
            (PgType::Date, -1, format!("{secret}-01-01")),
            (PgType::Timestamp, -1, "294277-01-01 00:00:00".to_owned()),
            (PgType::Hstore, -1, format!("\"{secret}\"=>1")),
            (array(PgType::Int4), -1, format!("{{1,{secret}}}")),
        ];
        for (ty, typmod, text) in cases {
            let e = decode_text(&ty, typmod, &text, &opts()).expect_err("rejected");
            let message = e.to_string();
            assert!(!message.contains(&text), "{message} repeats {text:?}");
            assert!(!message.contains("sk_live"), "{message}");
            assert!(
                !message.contains("1.239") && !message.contains("294277"),
                "{message}"
            );
            assert!(format!("{e:?}").find("sk_live").is_none(), "{e:?}");
        }
        let e = fails(&PgType::Int4, -1, "x");
        assert_eq!(
            e,
            ValueError::Malformed {
                type_name: "int4".into(),
                reason: "expected a 32-bit integer"
            }
        );
        assert!(e.to_string().contains("DateStyle=ISO"));
    }

    /// Days since 1970 by counting whole years and months, as a reference.
    fn naive_days(year: i64, month: u32, day: u32) -> i64 {
        let year_len = |y: i64| if is_leap(y) { 366 } else { 365 };
        let mut days: i64 = if year >= 1970 {
            (1970..year).map(year_len).sum()
        } else {
            -(year..1970).map(year_len).sum::<i64>()
        };
        let month_days = [
            31,
            if is_leap(year) { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        days += month_days[..month as usize - 1].iter().sum::<i64>();
        days + i64::from(day) - 1
    }

    /// Minimal two's complement bytes of a decimal digit string, computed digit by digit
    /// on base-256 bytes: a slow, independent reference.
    fn reference_bytes(negative: bool, digits: &str) -> Vec<u8> {
        let mut mag: Vec<u8> = vec![0]; // little-endian
        for d in digits.bytes() {
            let mut carry = u32::from(d - b'0');
            for b in mag.iter_mut() {
                let v = u32::from(*b) * 10 + carry;
                *b = v as u8;
                carry = v >> 8;
            }
            while carry > 0 {
                mag.push(carry as u8);
                carry >>= 8;
            }
        }
        mag.push(0); // room for the sign bit
        if negative {
            let mut carry = 1u16;
            for b in mag.iter_mut() {
                let v = u16::from(!*b) + carry;
                *b = v as u8;
                carry = v >> 8;
            }
        }
        let sign = if negative { 0xff } else { 0x00 };
        while mag.len() > 1
            && mag[mag.len() - 1] == sign
            && (mag[mag.len() - 2] & 0x80) == (sign & 0x80)
        {
            mag.pop();
        }
        mag.reverse();
        mag
    }

    fn i128_bytes(v: i128) -> Vec<u8> {
        let b = v.to_be_bytes();
        let mut start = 0;
        while start < 15
            && ((b[start] == 0 && b[start + 1] & 0x80 == 0)
                || (b[start] == 0xff && b[start + 1] & 0x80 != 0))
        {
            start += 1;
        }
        b[start..].to_vec()
    }

    proptest! {
        #[test]
        fn days_round_trip(days in -2_440_588i64..=2_145_042_905) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn civil_dates_match_naive_counting(year in -4713i64..6000, month in 1u32..=12, day in 1u32..=28) {
            let days = days_from_civil(year, month, day);
            prop_assert_eq!(days, naive_days(year, month, day));
            prop_assert_eq!(civil_from_days(days), (year, month, day));
        }

        #[test]
        fn date_text_round_trip(days in -2_440_588i64..=2_145_042_905) {
            let (y, m, d) = civil_from_days(days);
            let text = if y <= 0 { format!("{:04}-{m:02}-{d:02} BC", 1 - y) } else { format!("{y:04}-{m:02}-{d:02}") };
            prop_assert_eq!(ok(&PgType::Date, -1, &text), Value::Int32(days as i32));
        }

        #[test]
        fn twos_complement_matches_reference(negative in any::<bool>(), digits in "[0-9]{1,80}") {
            let trimmed = digits.trim_start_matches('0');
            let negative = negative && !trimmed.is_empty();
            prop_assert_eq!(twos_complement(negative, &digits), reference_bytes(negative, &digits));
        }

        #[test]
        fn twos_complement_matches_i128(v in any::<i128>()) {
            prop_assert_eq!(twos_complement(v < 0, &v.unsigned_abs().to_string()), i128_bytes(v));
        }

        #[test]
        fn numeric_text_decodes_at_column_scale(unscaled in any::<i64>(), scale in 0i32..=18, shown in 0usize..=18) {
            // Postgres prints up to `scale` digits; fewer are padded with zeros.
            let shown = shown.min(scale as usize);
            let magnitude = unscaled.unsigned_abs().to_string();
            let padded = format!("{magnitude:0>width$}", width = scale as usize + 1);
            let (int, frac) = padded.split_at(padded.len() - scale as usize);
            let dropped = &frac[shown..];
            prop_assume!(dropped.bytes().all(|b| b == b'0'));
            let sign = if unscaled < 0 { "-" } else { "" };
            let text = if shown > 0 { format!("{sign}{int}.{}", &frac[..shown]) } else { format!("{sign}{int}") };
            let value = ok(&PgType::Numeric, numeric(38, scale), &text);
            prop_assert_eq!(value, Value::Bytes(i128_bytes(i128::from(unscaled))));
        }
    }
}
