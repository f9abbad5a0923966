//! Each decoder against the bytes PostgreSQL's `*send` functions produce
//! (the layouts of `int4send`, `numeric_send`, `timestamp_send`, ...), checked
//! against the text decoder on the text `*out` prints for the same value,
//! under every value handling mode. `tests/pgoutput_binary.rs` proves the same
//! end to end on a live server.

use super::{decode_binary, supports_binary};
use crate::event::value::Value;
use crate::source::types::{
    decode_text, BinaryHandling, DecimalHandling, IntervalHandling, PgType, TimePrecision,
    ValueOptions,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vectors are hex"))
        .collect()
}

/// Every combination of modes that changes a value's form.
fn all_options() -> Vec<ValueOptions> {
    let mut out = Vec::new();
    for decimal in [
        DecimalHandling::Precise,
        DecimalHandling::Double,
        DecimalHandling::String,
    ] {
        for (time, interval, binary) in [
            (
                TimePrecision::Adaptive,
                IntervalHandling::Numeric,
                BinaryHandling::Bytes,
            ),
            (
                TimePrecision::Connect,
                IntervalHandling::String,
                BinaryHandling::Hex,
            ),
        ] {
            let mut opts = ValueOptions {
                decimal_handling: decimal,
                time_precision: time,
                interval_handling: interval,
                binary_handling: binary,
                ..ValueOptions::default()
            };
            out.push(opts.clone());
            opts.compat.date_infinity = true;
            out.push(opts);
        }
    }
    out
}

/// Binary `bytes` decode to what text `text` decodes to (errors compared by message).
fn same(ty: PgType, type_modifier: i32, bytes: &str, text: &str) {
    assert!(supports_binary(&ty), "{ty:?} should be supported");
    for opts in all_options() {
        let binary =
            decode_binary(&ty, type_modifier, &hex(bytes), &opts).map_err(|e| e.to_string());
        let from_text = decode_text(&ty, type_modifier, text, &opts).map_err(|e| e.to_string());
        let (binary, from_text) = (bits(binary), bits(from_text));
        assert_eq!(
            binary, from_text,
            "{ty:?}({type_modifier}) {text:?} under {opts:?}"
        );
    }
}

/// Floats compared by bits, so NaN equals itself and -0 differs from 0.
fn bits(value: Result<Value, String>) -> Result<String, String> {
    value.map(|v| match v {
        Value::Float32(f) => format!("f32 {:x}", f.to_bits()),
        Value::Float64(f) => format!("f64 {:x}", f.to_bits()),
        other => format!("{other:?}"),
    })
}

/// NUMERIC(p,s)'s type modifier.
fn numeric(p: i32, s: i32) -> i32 {
    ((p << 16) | s) + 4
}

#[test]
fn booleans_and_integers() {
    same(PgType::Bool, -1, "01", "t");
    same(PgType::Bool, -1, "00", "f");
    same(PgType::Int2, -1, "8000", "-32768");
    same(PgType::Int4, -1, "0000002a", "42");
    same(PgType::Int8, -1, "8000000000000000", "-9223372036854775808");
    same(PgType::Oid, -1, "ffffffff", "4294967295");
}

#[test]
fn floats_keep_their_bits_and_specials() {
    same(PgType::Float4, -1, "3f8ccccd", "1.1");
    same(PgType::Float4, -1, "7f7fffff", "3.4028235e+38");
    same(PgType::Float4, -1, "7fc00000", "NaN");
    same(PgType::Float4, -1, "ff800000", "-Infinity");
    same(PgType::Float8, -1, "3fb999999999999a", "0.1");
    same(PgType::Float8, -1, "8000000000000000", "-0");
    same(PgType::Float8, -1, "7ff8000000000000", "NaN");
    same(PgType::Float8, -1, "7ff0000000000000", "Infinity");
}

#[test]
fn numerics_keep_the_display_scale() {
    // ndigits, weight, sign, dscale, then base-10000 digits.
    same(PgType::Numeric, -1, "0000 0000 0000 0000", "0");
    same(
        PgType::Numeric,
        numeric(5, 2),
        "0000 0000 0000 0002",
        "0.00",
    );
    same(
        PgType::Numeric,
        -1,
        "0002 0000 4000 0004 007b 1194",
        "-123.4500",
    );
    same(
        PgType::Numeric,
        numeric(10, 4),
        "0002 0000 4000 0004 007b 1194",
        "-123.4500",
    );
    same(
        PgType::Numeric,
        -1,
        "0003 0001 0000 0001 04d2 162e 2328",
        "12345678.9",
    );
    same(PgType::Numeric, -1, "0001 ffff 0000 0004 0001", "0.0001");
    same(
        PgType::Numeric,
        -1,
        "0001 fffe 0000 0008 0001",
        "0.00000001",
    );
    same(PgType::Numeric, -1, "0001 0001 0000 0000 0001", "10000");
    same(PgType::Numeric, -1, "0000 0000 c000 0000", "NaN");
    same(PgType::Numeric, -1, "0000 0000 d000 0000", "Infinity");
    same(
        PgType::Numeric,
        numeric(6, 2),
        "0000 0000 f000 0000",
        "-Infinity",
    );
}

#[test]
fn text_like_types_uuid_and_bytea() {
    same(PgType::Text, -1, "68c3a96c6c6f", "héllo");
    same(PgType::Varchar, 10, "", "");
    same(PgType::Bpchar, 7, "61622020", "ab  ");
    same(PgType::Json, -1, "7b2261223a317d", "{\"a\":1}");
    same(PgType::Jsonb, -1, "01 7b2261223a20317d", "{\"a\": 1}");
    same(
        PgType::Uuid,
        -1,
        "a0eebc999c0b4ef8bb6d6bb9bd380a11",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    );
    same(PgType::Bytea, -1, "00ff10", "\\x00ff10");
    same(PgType::Bytea, -1, "", "\\x");
    same(PgType::Bit, 1, "00000001 80", "1");
    same(PgType::Bit, 10, "0000000a a5c0", "1010010111");
    same(PgType::Varbit, -1, "00000000", "");
    same(PgType::Varbit, 12, "00000009 0080", "000000001");
}

#[test]
fn dates_times_and_timestamps() {
    same(PgType::Date, -1, "00000000", "2000-01-01");
    same(PgType::Date, -1, "ffffd532", "1969-12-31");
    same(PgType::Date, -1, "7fffffff", "infinity");
    same(PgType::Date, -1, "80000000", "-infinity");
    same(PgType::Time, -1, "0000000b18777a00", "13:14:15.123456");
    same(PgType::Time, 3, "000000141dd76000", "24:00:00");
    same(
        PgType::Timetz,
        -1,
        "0000000292572800ffffe3e0",
        "03:04:05.12+02",
    );
    same(
        PgType::Timestamp,
        -1,
        "fff4c9ee7c132120",
        "1900-01-01 00:00:00.5",
    );
    same(
        PgType::Timestamp,
        3,
        "fff4c9ee7c132120",
        "1900-01-01 00:00:00.5",
    );
    same(
        PgType::Timestamp,
        -1,
        "000480c60bff3fff",
        "2040-02-29 23:59:59.999999",
    );
    same(
        PgType::Timestamp,
        -1,
        "ff1fe2ffc59c6000",
        "0001-01-01 00:00:00",
    );
    same(PgType::Timestamp, -1, "7fffffffffffffff", "infinity");
    same(PgType::Timestamp, 2, "8000000000000000", "-infinity");
    same(
        PgType::Timestamptz,
        -1,
        "fff4c9ee7c132120",
        "1900-01-01 00:00:00.5+00",
    );
    same(
        PgType::Timestamptz,
        0,
        "000480c60bff3fff",
        "2040-02-29 23:59:59.999999+00",
    );
    same(PgType::Timestamptz, -1, "7fffffffffffffff", "infinity");
}

#[test]
fn intervals_split_as_interval_out_prints_them() {
    same(
        PgType::Interval,
        -1,
        "fffffffc936c9e60 fffffffd 0000000e",
        "1 year 2 mons -3 days -04:05:06.5",
    );
    same(
        PgType::Interval,
        -1,
        "0000000000000000 00000000 00000000",
        "00:00:00",
    );
    same(
        PgType::Interval,
        -1,
        "7fffffffffffffff 7fffffff 7fffffff",
        "infinity",
    );
}

#[test]
fn arrays_are_flattened_like_the_text_form() {
    // ndim 1, has nulls, int4, 3 elements from 1: 1, NULL, 3.
    same(
        PgType::Array(Box::new(PgType::Int4)),
        -1,
        "00000001 00000001 00000017 00000003 00000001 \
         00000004 00000001 ffffffff 00000004 00000003",
        "{1,NULL,3}",
    );
    same(
        PgType::Array(Box::new(PgType::Date)),
        -1,
        "00000000 00000000 0000043a",
        "{}",
    );
}

#[test]
fn malformed_and_unsupported_values_are_errors_not_panics() {
    let opts = ValueOptions::default();
    for (ty, bytes) in [
        (PgType::Int4, "0001"),
        (PgType::Bool, "02"),
        (PgType::Numeric, "0002 0000 0000 0000 0001"),
        (PgType::Numeric, "0001 0000 0000 0000 2710"),
        (PgType::Jsonb, "02 7b7d"),
        (PgType::Array(Box::new(PgType::Int4)), "00000001 00000000"),
        (PgType::Text, "ff"),
    ] {
        let error = decode_binary(&ty, -1, &hex(bytes), &opts).expect_err("malformed");
        assert!(
            error.to_string().contains("--pgoutput-binary"),
            "{ty:?}: {error}"
        );
    }
    let point = PgType::Unknown { oid: 600 };
    let error = decode_binary(&point, -1, &hex("3ff0000000000000 4000000000000000"), &opts)
        .expect_err("unmodelled types have no binary decoder");
    assert!(matches!(
        error,
        crate::source::types::ValueError::BinaryUnsupported { .. }
    ));
    assert!(!supports_binary(&PgType::Array(Box::new(point))));
    assert!(
        !supports_binary(&PgType::Range { oid: 4451 }),
        "a multirange"
    );
}

#[test]
fn network_money_char_and_other_text_forms() {
    use PgType::*;
    same(Inet, -1, "02 20 00 04 c0a80001", "192.168.0.1");
    same(Inet, -1, "02 18 00 04 c0a80001", "192.168.0.1/24");
    same(Cidr, -1, "02 18 01 04 c0a80000", "192.168.0.0/24");
    same(
        Inet,
        -1,
        "03 80 00 10 00000000 00000000 0000ffff 01020304",
        "::ffff:1.2.3.4",
    );
    same(Macaddr, -1, "08002b010203", "08:00:2b:01:02:03");
    same(Macaddr8, -1, "08002b0102030405", "08:00:2b:01:02:03:04:05");
    same(Money, -1, "000000000001e240", "$1,234.56");
    same(Money, -1, "fffffffffffe1dc0", "-$1,234.56");
    same(Money, -1, "8000000000000000", "-$92,233,720,368,547,758.08");
    same(Money, -1, "7fffffffffffffff", "$92,233,720,368,547,758.07");
    same(Money, -1, "0000000000000005", "$0.05");
    same(Char, -1, "61", "a");
    same(Char, -1, "00", "");
    same(Char, -1, "e9", "\\351");
    same(Xml, -1, "3c612f3e", "<a/>");
    same(Ltree, -1, "01 612e62", "a.b");
    same(Tsvector, -1, "00000001 6100 0001 c001", "'a':1A");
    same(
        Hstore,
        -1,
        "00000002 00000001 61 00000001 31 00000001 62 ffffffff",
        "\"a\"=>\"1\", \"b\"=>NULL",
    );
    same(Hstore, -1, "00000000", "");
    same(
        Range { oid: 3904 },
        -1,
        "02 00000004 00000001 00000004 0000000a",
        "[1,10)",
    );
    same(Range { oid: 3906 }, -1, "01", "empty");
    same(
        Array(Box::new(Inet)),
        -1,
        "00000001 00000001 00000365 00000002 00000001 00000008 02200004c0a80001 ffffffff",
        "{192.168.0.1,NULL}",
    );
}

/// `numeric_send`'s bytes for `±int.frac` (ASCII digits; `frac.len()` is the
/// display scale), grouped in base-10000 digits around the point as Postgres
/// stores them, leading and trailing zero groups dropped.
fn numeric_send(negative: bool, int: &str, frac: &str) -> Vec<u8> {
    let int = format!("{}{int}", "0".repeat((4 - int.len() % 4) % 4));
    let padded_frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
    let groups: Vec<u16> = int
        .as_bytes()
        .chunks(4)
        .chain(padded_frac.as_bytes().chunks(4))
        .map(|g| std::str::from_utf8(g).unwrap().parse().unwrap())
        .collect();
    let mut weight = (int.len() / 4) as i16 - 1;
    let first = groups.iter().position(|g| *g != 0);
    let last = groups.iter().rposition(|g| *g != 0);
    let digits = match (first, last) {
        (Some(first), Some(last)) => {
            weight -= first as i16;
            &groups[first..=last]
        }
        _ => {
            weight = 0;
            &[][..]
        }
    };
    let sign: u16 = if negative && !digits.is_empty() {
        0x4000
    } else {
        0
    };
    let mut out = Vec::new();
    out.extend((digits.len() as i16).to_be_bytes());
    out.extend(weight.to_be_bytes());
    out.extend(sign.to_be_bytes());
    out.extend((frac.len() as u16).to_be_bytes());
    for d in digits {
        out.extend(d.to_be_bytes());
    }
    out
}

fn same_bytes(ty: &PgType, type_modifier: i32, bytes: &[u8], text: &str) -> Result<(), String> {
    for opts in all_options() {
        let binary =
            bits(decode_binary(ty, type_modifier, bytes, &opts).map_err(|e| e.to_string()));
        let from_text =
            bits(decode_text(ty, type_modifier, text, &opts).map_err(|e| e.to_string()));
        if binary != from_text {
            return Err(format!(
                "{text}: {binary:?} != {from_text:?} under {opts:?}"
            ));
        }
    }
    Ok(())
}

fn supported_types() -> Vec<PgType> {
    use PgType::*;
    let scalars = [
        Bool,
        Int2,
        Int4,
        Int8,
        Oid,
        Float4,
        Float8,
        Numeric,
        Text,
        Jsonb,
        Bytea,
        Uuid,
        Date,
        Time,
        Timetz,
        Timestamp,
        Timestamptz,
        Interval,
        Bit,
        Varbit,
        Char,
        Xml,
        Money,
        Inet,
        Cidr,
        Macaddr,
        Macaddr8,
        Tsvector,
        Hstore,
        Ltree,
        Range { oid: 3904 },
        Range { oid: 3906 },
        Range { oid: 3908 },
        Range { oid: 3910 },
        Range { oid: 3912 },
        Range { oid: 3926 },
    ];
    scalars
        .iter()
        .cloned()
        .chain(scalars.iter().map(|t| Array(Box::new(t.clone()))))
        .collect()
}

proptest::proptest! {
    #[test]
    fn any_bytes_decode_or_fail_without_panicking(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        type_modifier in -1i32..20,
    ) {
        for ty in supported_types() {
            let _ = decode_binary(&ty, type_modifier, &bytes, &ValueOptions::default());
        }
    }

    #[test]
    fn numerics_match_their_text(
        negative in proptest::prelude::any::<bool>(),
        int in "(0|[1-9][0-9]{0,24})",
        frac in "[0-9]{0,20}",
        constrained in proptest::prelude::any::<bool>(),
    ) {
        let text = format!("{}{int}{}{frac}", if negative { "-" } else { "" }, if frac.is_empty() { "" } else { "." });
        // What numeric_out prints: no "-" on a zero.
        let zero = int == "0" && frac.bytes().all(|b| b == b'0');
        let text = if zero { text.trim_start_matches('-').to_owned() } else { text };
        let type_modifier = if constrained { numeric(38, frac.len() as i32) } else { -1 };
        let bytes = numeric_send(negative, &int, &frac);
        proptest::prop_assert_eq!(same_bytes(&PgType::Numeric, type_modifier, &bytes, &text), Ok(()));
    }

    #[test]
    fn numerics_at_any_scale_match_their_text(
        negative in proptest::prelude::any::<bool>(),
        int in "(0|[1-9][0-9]{0,24})",
        frac in "[0-9]{0,20}",
        scale in 0i32..=30,
    ) {
        // Digits beyond the column's scale are refused on both paths alike.
        let text = format!("{}{int}{}{frac}", if negative { "-" } else { "" }, if frac.is_empty() { "" } else { "." });
        let zero = int == "0" && frac.bytes().all(|b| b == b'0');
        let text = if zero { text.trim_start_matches('-').to_owned() } else { text };
        let bytes = numeric_send(negative, &int, &frac);
        let type_modifier = numeric(38, scale);
        for opts in all_options() {
            let binary = decode_binary(&PgType::Numeric, type_modifier, &bytes, &opts);
            let from_text = decode_text(&PgType::Numeric, type_modifier, &text, &opts);
            // The two errors name their form; the reason is the same.
            let reason = |e: String| e.split_once(": ").map(|(_, r)| r.split(';').next().unwrap_or(r).to_owned());
            let binary = bits(binary.map_err(|e| e.to_string())).map_err(reason);
            let from_text = bits(from_text.map_err(|e| e.to_string())).map_err(reason);
            proptest::prop_assert_eq!(binary, from_text, "{} under {:?}", text, opts);
        }
    }

    #[test]
    fn timestamps_match_their_text(
        micros in -211_813_488_000_000_000i64..=9_223_371_331_199_999_999,
        type_modifier in -1i32..=6,
    ) {
        // Postgres's range: 4713 BC to 294276 AD, in µs since 2000-01-01.
        let since_1970 = i128::from(micros) + 946_684_800_000_000;
        let days = since_1970.div_euclid(86_400_000_000) as i64;
        let of_day = since_1970.rem_euclid(86_400_000_000) as u64;
        let (y, m, d) = super::super::text::civil_from_days(days);
        let date = if y <= 0 { format!("{:04}-{m:02}-{d:02}", 1 - y) } else { format!("{y:04}-{m:02}-{d:02}") };
        let bc = if y <= 0 { " BC" } else { "" };
        let (s, f) = (of_day / 1_000_000, of_day % 1_000_000);
        let frac = if f == 0 { String::new() } else { format!(".{f:06}").trim_end_matches('0').to_owned() };
        let time = format!("{:02}:{:02}:{:02}{frac}", s / 3600, s / 60 % 60, s % 60);
        let bytes = micros.to_be_bytes();
        proptest::prop_assert_eq!(same_bytes(&PgType::Timestamp, type_modifier, &bytes, &format!("{date} {time}{bc}")), Ok(()));
        proptest::prop_assert_eq!(same_bytes(&PgType::Timestamptz, type_modifier, &bytes, &format!("{date} {time}+00{bc}")), Ok(()));
    }

    #[test]
    fn intervals_match_their_text(
        micros in -1_000_000_000_000_000i64..1_000_000_000_000_000,
        days in -100_000i32..100_000,
        months in -100_000i32..100_000,
    ) {
        // interval_out under IntervalStyle=postgres.
        let mut parts = Vec::new();
        let (years, mons) = (months / 12, months % 12);
        let unit = |n: i32, one: &str, many: &str| format!("{n} {}", if n == 1 || n == -1 { one } else { many });
        if years != 0 { parts.push(unit(years, "year", "years")); }
        if mons != 0 { parts.push(unit(mons, "mon", "mons")); }
        if days != 0 { parts.push(unit(days, "day", "days")); }
        if micros != 0 || parts.is_empty() {
            let negative = micros < 0;
            let a = micros.unsigned_abs();
            let (s, f) = (a / 1_000_000, a % 1_000_000);
            let frac = if f == 0 { String::new() } else { format!(".{f:06}").trim_end_matches('0').to_owned() };
            // A "+" when an earlier field was negative, as interval_out does.
            let sign = if negative { "-" } else if years < 0 || mons < 0 || days < 0 { "+" } else { "" };
            parts.push(format!("{sign}{:02}:{:02}:{:02}{frac}", s / 3600, s / 60 % 60, s % 60));
        }
        let mut bytes = micros.to_be_bytes().to_vec();
        bytes.extend(days.to_be_bytes());
        bytes.extend(months.to_be_bytes());
        proptest::prop_assert_eq!(same_bytes(&PgType::Interval, -1, &bytes, &parts.join(" ")), Ok(()));
    }
}

#[test]
fn constrained_numerics_skip_the_text() {
    use super::numeric::unscaled;
    assert_eq!(
        unscaled(&numeric_send(false, "12", "5"), 2),
        Some((false, 1250))
    );
    assert_eq!(
        unscaled(&numeric_send(true, "123456789", "0123"), 4),
        Some((true, 1_234_567_890_123))
    );
    assert_eq!(unscaled(&numeric_send(false, "0", ""), 3), Some((false, 0)));
    // Fraction digits beyond the scale that are zero: divided off, in 64
    // bits or (past them) in 128.
    assert_eq!(
        unscaled(&numeric_send(false, "12345", "6700"), 2),
        Some((false, 1_234_567))
    );
    assert_eq!(
        unscaled(&numeric_send(false, "123456789012345678901234", "5000"), 1),
        Some((false, 1_234_567_890_123_456_789_012_345))
    );
    // A digit beyond the scale, or more than an i128 holds: the text path's to decide.
    assert_eq!(unscaled(&numeric_send(false, "1", "25"), 1), None);
    assert_eq!(unscaled(&numeric_send(false, &"9".repeat(40), ""), 0), None);
    assert_eq!(unscaled(&hex("0000 0000 C000 0000"), 2), None, "NaN");
}
