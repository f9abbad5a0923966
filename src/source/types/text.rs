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
    bit_length, compat, decimal_precision_scale, temporal_unit, BinaryHandling, DecimalHandling,
    PgType, SpecialNumeric, SpecialValue, TemporalUnit, ValueError, ValueOptions,
};
use crate::event::value::Value;

mod fault;
mod hstore;
mod temporal;

pub(super) use fault::{Fault, Parsed};
use hstore::decode_hstore;
pub(super) use hstore::hstore_value;
pub(super) use temporal::civil_from_days;
use temporal::*;
pub(super) use temporal::{
    interval_value, timestamp_value, zoned_time, zoned_timestamp, IntervalFields,
};

/// Decodes the text form of a non-NULL value of type `ty` (column modifier
/// `type_modifier`) into the [`Value`] matching `column_schema(ty, type_modifier, opts)`.
pub fn decode_text(
    ty: &PgType,
    type_modifier: i32,
    text: &str,
    opts: &ValueOptions,
) -> Result<Value, ValueError> {
    super::one_value(|out| decode_text_into(ty, type_modifier, text, opts, out))
}

/// [`decode_text`], with the value pushed onto `out`: a row's decoder
/// writes each value into its place instead of moving it up through a
/// `Result` at every layer (BENCHMARKS.md, "Wide rows").
pub fn decode_text_into(
    ty: &PgType,
    type_modifier: i32,
    text: &str,
    opts: &ValueOptions,
    out: &mut Vec<Value>,
) -> Result<(), ValueError> {
    // A scalar DATE only: Debezium reads array elements through pgjdbc,
    // which gives other (time zone dependent) numbers.
    if opts.compat.date_infinity && matches!(ty, PgType::Date) {
        let days = match text {
            "infinity" => Some(compat::DATE_POSITIVE_INFINITY_DAYS),
            "-infinity" => Some(compat::DATE_NEGATIVE_INFINITY_DAYS),
            _ => None,
        };
        if let Some(days) = days {
            out.push(Value::Int32(days));
            return Ok(());
        }
    }
    decode_into(ty, type_modifier, text, opts, out).map_err(|fault| {
        let type_name = ty.display(type_modifier);
        match fault {
            Fault::Malformed(reason) => ValueError::Malformed { type_name, reason },
            Fault::OutOfRange(target) => ValueError::OutOfRange { type_name, target },
            Fault::Special(special) => ValueError::SpecialNumeric { type_name, special },
        }
    })
}

/// Decodes a value of `ty` onto the end of `out` (in place, like
/// [`decode_text_into`]).
fn decode_into(
    ty: &PgType,
    type_modifier: i32,
    text: &str,
    opts: &ValueOptions,
    out: &mut Vec<Value>,
) -> Parsed<()> {
    use PgType::*;
    let int = |reason| Fault::Malformed(reason);
    let value = match ty {
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
        Array(element) => {
            let items = parse_array(text)?;
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    None => values.push(Value::Null),
                    Some(item) => decode_into(element, type_modifier, &item, opts, &mut values)?,
                }
            }
            Value::Array(values)
        }
        Modified {
            base,
            type_modifier,
        } => return decode_into(base, *type_modifier, text, opts, out),
        // Text-like types, enums and unknown types: Postgres's text is the value.
        _ => Value::String(text.to_owned()),
    };
    out.push(value);
    Ok(())
}

/// TIMESTAMP `infinity` (`positive`) or `-infinity`, as the text side writes it.
pub(super) fn decode_timestamp_infinity(positive: bool, millis: bool) -> Parsed<Value> {
    decode_timestamp(if positive { "infinity" } else { "-infinity" }, millis)
}

/// INTERVAL `infinity` (`positive`) or `-infinity` (17+), as the text side writes it.
pub(super) fn decode_interval_infinity(positive: bool, opts: &ValueOptions) -> Parsed<Value> {
    let text = if positive { "infinity" } else { "-infinity" };
    decode_interval(text, opts.interval_handling)
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
pub(super) fn encode_binary(bytes: Vec<u8>, mode: BinaryHandling) -> Value {
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
pub(super) fn decode_bits(text: &str, single: bool) -> Parsed<Value> {
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

pub(super) fn decode_numeric(text: &str, type_modifier: i32, opts: &ValueOptions) -> Parsed<Value> {
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
                    if let Some(unscaled) = unscaled_digits(int, frac, scale) {
                        return Ok(Value::Bytes(decimal_bytes(negative, unscaled)));
                    }
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
pub(super) fn decode_money(text: &str, opts: &ValueOptions) -> Parsed<Value> {
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

/// `int` and `frac` (ASCII digits, `frac` at most `scale` of them) as the
/// count of `10^-scale` they make, when it fits an `i128` (38 digits and
/// more may not: `None`, for [`twos_complement`]).
fn unscaled_digits(int: &str, frac: &str, scale: usize) -> Option<i128> {
    if int.len() + scale > 38 {
        return None;
    }
    let digits = int
        .bytes()
        .chain(frac.bytes())
        .map(|d| i128::from(d - b'0'));
    let value = digits.fold(0i128, |acc, d| acc * 10 + d);
    // At most 38 digits in all, so no step overflows.
    Some(value * 10i128.pow((scale - frac.len()) as u32))
}

/// What [`twos_complement`] makes of the magnitude `unscaled` (made negative
/// when `negative`): the shortest big-endian two's complement bytes, as
/// Java's `BigInteger.toByteArray()`.
pub(super) fn decimal_bytes(negative: bool, unscaled: i128) -> Vec<u8> {
    let value = if negative { -unscaled } else { unscaled };
    let bytes = value.to_be_bytes();
    let sign = if value < 0 { 0xff } else { 0 };
    // A leading byte is redundant while it only repeats the next one's sign bit.
    let redundant = |i: usize| bytes[i] == sign && (bytes[i + 1] & 0x80) == (sign & 0x80);
    let start = (0..bytes.len() - 1).take_while(|&i| redundant(i)).count();
    bytes[start..].to_vec()
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
