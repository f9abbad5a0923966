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
    let mut out = String::with_capacity(32);
    if year > 9999 {
        out.push('+');
    } else if year < 0 {
        out.push('-');
    }
    push_padded(&mut out, year.unsigned_abs(), 4);
    out.push('-');
    push_padded(&mut out, u64::from(month), 2);
    out.push('-');
    push_padded(&mut out, u64::from(day), 2);
    out.push('T');
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
    let micros = micros.unsigned_abs();
    let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
    push_padded(out, secs / 3600, 2);
    out.push(':');
    push_padded(out, secs / 60 % 60, 2);
    out.push(':');
    push_padded(out, secs % 60, 2);
    // The fraction's leading `width` of its 6 digits: as many as asked, or
    // all but the trailing zeros.
    let (mut value, mut width) = (frac, 6);
    match digits {
        Some(n) => {
            width = n.min(6);
            value = frac / 10u64.pow(6 - width);
        }
        None => {
            while width > 0 && value % 10 == 0 {
                (value, width) = (value / 10, width - 1);
            }
        }
    }
    if digits.is_some() || width > 0 {
        out.push('.');
    }
    if width > 0 {
        push_padded(out, value, width as usize);
    }
}

/// Appends `value` in decimal, zero-padded to at least `width` digits
/// (`format!("{value:0width$}")` without the formatting machinery, which
/// was a visible share of decoding a row with timestamps).
fn push_padded(out: &mut String, value: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for _ in (digits.len() - at)..width {
        out.push('0');
    }
    out.extend(digits[at..].iter().map(|d| char::from(*d)));
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
mod tests;
