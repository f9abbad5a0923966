//! Decoding Postgres's binary send format (pgoutput's `binary 'true'`,
//! PostgreSQL 14+) into Kafka Connect values.
//!
//! The invariant: for every type [`supports_binary`] accepts, [`decode_binary`]
//! of a value's send bytes equals [`decode_text`](super::decode_text) of the
//! same value's text output, for every [`ValueOptions`]. To keep that true by
//! construction, the binary side only reads the wire layout and hands the
//! numbers to the very functions the text side ends in (`timestamp_value`,
//! `zoned_timestamp`, `decode_numeric`, `decode_money`, `hstore_value`, ...).
//! Where text mode carries Postgres's text as is (`inet`, ranges,
//! `tsvector`, `"char"`, ...), the binary side rebuilds exactly the text the
//! type's `*_out` function prints under the session's settings
//! (`network`, `range`, `tsvector` submodules). `tests/pgoutput_binary.rs`
//! proves it end to end against a real server, text slot against binary
//! slot, over every type text mode models. Types text mode does not model
//! ([`PgType::Unknown`]: composites, geometric types, multiranges) have no
//! binary decoder: their text cannot be rebuilt from the send form.
//!
//! With `binary 'true'` the server sends *every* column whose type has a send
//! function in binary (`logicalrep_write_tuple` in `proto.c`), so there is no
//! per-column text fallback within a connection: a run asks for binary only
//! when every published column's type is supported (checked before streaming;
//! a column added later that is not is refused with
//! [`ValueError::BinaryUnsupported`], naming the way out).
//!
//! Layouts, from PostgreSQL's `*send` functions (all big-endian):
//! `boolsend` one byte; `int2/4/8send`, `oidsend`, `float4/8send` the machine
//! value; `textsend` (text, varchar, bpchar, name, json, citext) and
//! `enum_send` the bytes of the text; `jsonb_send` version byte 1 then the
//! text; `byteasend` the bytes; `bit_send` int32 length in bits, then the
//! bits, most significant first; `uuid_send` 16 bytes; `date_send` int32 days
//! since 2000-01-01 (`INT_MAX`/`INT_MIN` the infinities); `time_send` int64
//! µs; `timetz_send` int64 µs then int32 zone in seconds *west* of UTC;
//! `timestamp(tz)_send` int64 µs since 2000-01-01 (`INT64_MAX`/`INT64_MIN`
//! the infinities); `interval_send` int64 µs, int32 days, int32 months (all
//! three at their maximum / minimum: the 17+ infinities); `numeric_send`
//! int16 ndigits, int16 weight, uint16 sign, uint16 dscale, then ndigits
//! base-10000 digits; `array_send` int32 ndim, int32 has-nulls flag, element
//! OID, (int32 length, int32 lower bound) per dimension, then each element as
//! int32 length (-1 for NULL) and its bytes, in row-major order;
//! `charsend` the byte; `cash_send` int64 cents; `xml_send` the text (an
//! encoding declaration only for a non-UTF8 client encoding);
//! `ltree_send` version byte 1 then the text; `hstore_send` int32 count,
//! then per pair int32 length and key, int32 length (-1 for NULL) and value.

use super::text::{
    decimal_bytes, decode_bits, decode_money, decode_numeric, encode_binary, hstore_value,
    interval_value, timestamp_value, zoned_time, zoned_timestamp, Fault, IntervalFields, Parsed,
};
use super::{
    bit_length, compat, decimal_precision_scale, temporal_unit, DecimalHandling, PgType,
    TemporalUnit, ValueError, ValueOptions,
};
use crate::event::value::Value;

mod network;
mod numeric;
mod range;
#[cfg(test)]
mod tests;
mod tsvector;

/// Days from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
const PG_EPOCH_MICROS: i128 = 946_684_800_000_000;

/// Whether [`decode_binary`] reads values of `ty`. A type outside this set must
/// not be published while `--pgoutput-binary` is on.
pub fn supports_binary(ty: &PgType) -> bool {
    use PgType::*;
    match ty {
        Bool
        | Int2
        | Int4
        | Int8
        | Oid
        | Float4
        | Float8
        | Numeric
        | Text
        | Varchar
        | Bpchar
        | Name
        | Citext
        | Json
        | Jsonb
        | Bytea
        | Uuid
        | Date
        | Time
        | Timetz
        | Timestamp
        | Timestamptz
        | Interval
        | Bit
        | Varbit
        | Enum { .. }
        | Char
        | Xml
        | Money
        | Inet
        | Cidr
        | Macaddr
        | Macaddr8
        | Tsvector
        | Hstore
        | Ltree => true,
        Range { oid } => range::is_supported(*oid),
        Array(element) => supports_binary(element),
        Modified { base, .. } => supports_binary(base),
        // Composites, geometric types, multiranges, user ranges...: text
        // mode passes their text through, which their send forms cannot
        // give back.
        Unknown { .. } => false,
    }
}

/// Decodes the binary send form of a non-NULL value of type `ty` (column
/// modifier `type_modifier`) into the [`Value`] [`decode_text`](super::decode_text)
/// gives for its text form.
pub fn decode_binary(
    ty: &PgType,
    type_modifier: i32,
    bytes: &[u8],
    opts: &ValueOptions,
) -> Result<Value, ValueError> {
    super::one_value(|out| decode_binary_into(ty, type_modifier, bytes, opts, out))
}

/// [`decode_binary`], with the value pushed onto `out`: a row's decoder
/// writes each value into its place instead of moving it up through a
/// `Result` at every layer (BENCHMARKS.md, "Wide rows").
pub fn decode_binary_into(
    ty: &PgType,
    type_modifier: i32,
    bytes: &[u8],
    opts: &ValueOptions,
    out: &mut Vec<Value>,
) -> Result<(), ValueError> {
    let type_name = || ty.display(type_modifier);
    if !supports_binary(ty) {
        return Err(ValueError::BinaryUnsupported {
            type_name: type_name(),
        });
    }
    // As in `decode_text`: a scalar DATE only.
    if opts.compat.date_infinity && matches!(ty, PgType::Date) {
        let days = match be::<4>(bytes).map(i32::from_be_bytes) {
            Ok(i32::MAX) => Some(compat::DATE_POSITIVE_INFINITY_DAYS),
            Ok(i32::MIN) => Some(compat::DATE_NEGATIVE_INFINITY_DAYS),
            _ => None,
        };
        if let Some(days) = days {
            out.push(Value::Int32(days));
            return Ok(());
        }
    }
    decode_into(ty, type_modifier, bytes, opts, out).map_err(|fault| match fault {
        Fault::Malformed(reason) => ValueError::BinaryMalformed {
            type_name: type_name(),
            reason,
        },
        Fault::OutOfRange(target) => ValueError::OutOfRange {
            type_name: type_name(),
            target,
        },
        Fault::Special(special) => ValueError::SpecialNumeric {
            type_name: type_name(),
            special,
        },
    })
}

/// Exactly `N` bytes, or why not.
fn be<const N: usize>(bytes: &[u8]) -> Parsed<[u8; N]> {
    bytes
        .try_into()
        .map_err(|_| Fault::Malformed("unexpected length for the type's binary form"))
}

fn utf8(bytes: &[u8]) -> Parsed<String> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| Fault::Malformed("text is not valid UTF-8"))
}

/// Decodes a value of `ty` onto the end of `out` (in place, like
/// [`decode_binary_into`]).
fn decode_into(
    ty: &PgType,
    type_modifier: i32,
    bytes: &[u8],
    opts: &ValueOptions,
    out: &mut Vec<Value>,
) -> Parsed<()> {
    use PgType::*;
    let value = match ty {
        Bool => match be::<1>(bytes)? {
            [0] => Value::Boolean(false),
            [1] => Value::Boolean(true),
            _ => return Err(Fault::Malformed("expected a boolean byte 0 or 1")),
        },
        Int2 => Value::Int16(i16::from_be_bytes(be(bytes)?)),
        Int4 => Value::Int32(i32::from_be_bytes(be(bytes)?)),
        Int8 => Value::Int64(i64::from_be_bytes(be(bytes)?)),
        Oid => Value::Int64(u32::from_be_bytes(be(bytes)?).into()),
        // One NaN, as the text side's `f32::NAN`: Avro writes a float's bits.
        Float4 => Value::Float32(match f32::from_be_bytes(be(bytes)?) {
            f if f.is_nan() => f32::NAN,
            f => f,
        }),
        Float8 => Value::Float64(match f64::from_be_bytes(be(bytes)?) {
            f if f.is_nan() => f64::from(f32::NAN),
            f => f,
        }),
        Bytea => encode_binary(bytes.to_vec(), opts.binary_handling),
        Numeric => {
            match precise_scale(type_modifier, opts).and_then(|s| numeric::unscaled(bytes, s)) {
                Some((negative, unscaled)) => Value::Bytes(decimal_bytes(negative, unscaled)),
                None => decode_numeric(&numeric::to_text(bytes)?, type_modifier, opts)?,
            }
        }
        Bit | Varbit => decode_bits(&bit_text(bytes)?, bit_length(ty, type_modifier) == 1)?,
        Date => Value::Int32(match i32::from_be_bytes(be(bytes)?) {
            i32::MAX => i32::MAX,
            i32::MIN => i32::MIN,
            days => i32::try_from(i64::from(days) + PG_EPOCH_DAYS)
                .map_err(|_| Fault::OutOfRange("int32 days since 1970-01-01"))?,
        }),
        Time => {
            let micros = i64::from_be_bytes(be(bytes)?);
            match temporal_unit(ty, type_modifier, opts.time_precision) {
                Some(TemporalUnit::Millis) => Value::Int32((micros / 1000) as i32),
                _ => Value::Int64(micros),
            }
        }
        Timetz => {
            let [t0, t1, t2, t3, t4, t5, t6, t7, z0, z1, z2, z3] = be::<12>(bytes)?;
            let local = i64::from_be_bytes([t0, t1, t2, t3, t4, t5, t6, t7]);
            let west = i32::from_be_bytes([z0, z1, z2, z3]);
            Value::String(zoned_time(local, -i64::from(west)))
        }
        Timestamp => {
            let millis =
                temporal_unit(ty, type_modifier, opts.time_precision) == Some(TemporalUnit::Millis);
            match i64::from_be_bytes(be(bytes)?) {
                i64::MAX => super::text::decode_timestamp_infinity(true, millis)?,
                i64::MIN => super::text::decode_timestamp_infinity(false, millis)?,
                micros => timestamp_value(i128::from(micros) + PG_EPOCH_MICROS, millis)?,
            }
        }
        Timestamptz => Value::String(match i64::from_be_bytes(be(bytes)?) {
            i64::MAX => "infinity".to_owned(),
            i64::MIN => "-infinity".to_owned(),
            micros => zoned_timestamp(i128::from(micros) + PG_EPOCH_MICROS, type_modifier)?,
        }),
        Interval => decode_interval(bytes, opts)?,
        Jsonb => match bytes.split_first() {
            Some((1, text)) => Value::String(utf8(text)?),
            _ => return Err(Fault::Malformed("expected jsonb binary version 1")),
        },
        Uuid => Value::String(uuid(be(bytes)?)),
        Array(element) => {
            let items = elements(bytes)?;
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    None => values.push(Value::Null),
                    Some(item) => decode_into(element, type_modifier, item, opts, &mut values)?,
                }
            }
            Value::Array(values)
        }
        Modified {
            base,
            type_modifier,
        } => return decode_into(base, *type_modifier, bytes, opts, out),
        // Text-like types and enums: the send form is the text. `xml_send`
        // adds an encoding declaration only for a client encoding other
        // than UTF8, which the session never uses.
        Text | Varchar | Bpchar | Name | Citext | Json | Xml | Enum { .. } => {
            Value::String(utf8(bytes)?)
        }
        Char => {
            let [byte] = be::<1>(bytes)?;
            Value::String(char_text(byte))
        }
        Ltree => match bytes.split_first() {
            Some((1, text)) => Value::String(utf8(text)?),
            _ => return Err(Fault::Malformed("expected ltree binary version 1")),
        },
        Money => decode_money(&money_text(i64::from_be_bytes(be(bytes)?)), opts)?,
        Inet | Cidr => Value::String(network::inet_text(bytes, matches!(ty, Cidr))?),
        Macaddr => Value::String(network::mac_text(bytes, 6)?),
        Macaddr8 => Value::String(network::mac_text(bytes, 8)?),
        Tsvector => Value::String(tsvector::tsvector_text(bytes)?),
        Range { oid } => Value::String(range::range_text(*oid, bytes)?),
        Hstore => hstore_value(hstore_pairs(bytes)?, opts.hstore_handling),
        Unknown { .. } => return Err(Fault::Malformed("no binary decoder for the type")),
    };
    out.push(value);
    Ok(())
}

/// A bit string as `bit_out` prints it (`0101`), from `bit_send`'s int32
/// length in bits and the bits, most significant first.
fn bit_text(bytes: &[u8]) -> Parsed<String> {
    let bad = Fault::Malformed("malformed binary bit string");
    let (length, bits) = bytes.split_first_chunk::<4>().ok_or(bad)?;
    let length = usize::try_from(i32::from_be_bytes(*length)).map_err(|_| bad)?;
    if bits.len() != length.div_ceil(8) {
        return Err(bad);
    }
    Ok((0..length)
        .map(|i| match bits.get(i / 8).map(|b| b >> (7 - i % 8) & 1) {
            Some(1) => '1',
            _ => '0',
        })
        .collect())
}

/// `"char"` as `charout` prints it (15+): empty for the zero byte, the
/// byte itself below 0x80, else `\ooo` (14 sends such a byte as is, which
/// is not UTF-8 and fails in text mode).
fn char_text(byte: u8) -> String {
    match byte {
        0 => String::new(),
        b if b < 0x80 => char::from(b).to_string(),
        b => format!("\\{b:03o}"),
    }
}

/// MONEY's int64 count of cents as `cash_out` prints it under
/// `lc_monetary=C` (two fraction digits), less the currency symbol and
/// grouping that `decode_money` skips anyway.
fn money_text(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", cents / 100, cents % 100)
}

/// `hstore_send`: int32 pair count, then per pair the key (int32 length,
/// text) and the value (int32 length, -1 for NULL, then text), in the
/// order `hstore_out` prints them.
fn hstore_pairs(bytes: &[u8]) -> Parsed<Vec<(String, Option<String>)>> {
    let bad = Fault::Malformed("malformed binary hstore");
    let mut rest = bytes;
    let mut int = || -> Parsed<i32> {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        rest = tail;
        Ok(i32::from_be_bytes(*head))
    };
    let count = usize::try_from(int()?).map_err(|_| bad)?;
    let mut pairs = Vec::with_capacity(count.min(bytes.len() / 8));
    let text = |rest: &mut &[u8], length: i32| -> Parsed<String> {
        let length = usize::try_from(length).map_err(|_| bad)?;
        let (text, tail) = rest.split_at_checked(length).ok_or(bad)?;
        *rest = tail;
        utf8(text)
    };
    for _ in 0..count {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        rest = tail;
        let key = text(&mut rest, i32::from_be_bytes(*head))?;
        let (head, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        rest = tail;
        let value = match i32::from_be_bytes(*head) {
            -1 => None,
            length => Some(text(&mut rest, length)?),
        };
        pairs.push((key, value));
    }
    if !rest.is_empty() {
        return Err(bad);
    }
    Ok(pairs)
}

/// `8-4-4-4-12` lowercase hex, as `uuid_out` prints it.
fn uuid(bytes: [u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// INTERVAL as `interval_out` would split it under IntervalStyle=postgres:
/// years and months from the months, hours and minutes from the microseconds,
/// each carrying its own sign (truncating division gives exactly that).
fn decode_interval(bytes: &[u8], opts: &ValueOptions) -> Parsed<Value> {
    let [u0, u1, u2, u3, u4, u5, u6, u7, d0, d1, d2, d3, m0, m1, m2, m3] = be::<16>(bytes)?;
    let micros = i64::from_be_bytes([u0, u1, u2, u3, u4, u5, u6, u7]);
    let days = i32::from_be_bytes([d0, d1, d2, d3]);
    let months = i32::from_be_bytes([m0, m1, m2, m3]);
    match (micros, days, months) {
        (i64::MAX, i32::MAX, i32::MAX) => super::text::decode_interval_infinity(true, opts),
        (i64::MIN, i32::MIN, i32::MIN) => super::text::decode_interval_infinity(false, opts),
        _ => interval_value(
            IntervalFields {
                years: i64::from(months / 12),
                months: i64::from(months % 12),
                days: i64::from(days),
                hours: micros / 3_600_000_000,
                minutes: micros / 60_000_000 % 60,
                micros: micros % 60_000_000,
            },
            opts.interval_handling,
        ),
    }
}

/// An array's elements in row-major order (`None` for NULL), bounds dropped
/// as the text side drops them.
fn elements(bytes: &[u8]) -> Parsed<Vec<Option<&[u8]>>> {
    let bad = Fault::Malformed("malformed binary array");
    let mut rest = bytes;
    let mut int = || -> Parsed<i32> {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        rest = tail;
        Ok(i32::from_be_bytes(*head))
    };
    let ndim = int()?;
    let _has_nulls = int()?;
    let _element_oid = int()?;
    if !(0..=6).contains(&ndim) {
        return Err(bad);
    }
    let mut count: usize = usize::from(ndim > 0);
    for _ in 0..ndim {
        let len = usize::try_from(int()?).map_err(|_| bad)?;
        let _lower_bound = int()?;
        count = count.checked_mul(len).ok_or(bad)?;
    }
    let mut out = Vec::with_capacity(count.min(rest.len() / 4));
    for _ in 0..count {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        let len = i32::from_be_bytes(*head);
        rest = tail;
        if len < 0 {
            out.push(None);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| bad)?;
        if len > rest.len() {
            return Err(bad);
        }
        let (item, tail) = rest.split_at(len);
        out.push(Some(item));
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(bad);
    }
    Ok(out)
}

/// The scale a NUMERIC of `type_modifier` is written at as a precise
/// decimal, when it is (`None`: a string, a double, or an unconstrained
/// column's variable scale).
fn precise_scale(type_modifier: i32, opts: &ValueOptions) -> Option<u32> {
    let precise = matches!(opts.decimal_handling, DecimalHandling::Precise);
    precise
        .then(|| decimal_precision_scale(type_modifier))
        .flatten()
        .map(|(_, scale)| scale)
}
