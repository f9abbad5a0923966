//! Unit tests of the text decoder, with hand-worked and reference values.

use super::*;
use crate::source::types::{
    numeric_precision_scale, IntervalHandling, TimePrecision, TypeRegistry,
};
use proptest::prelude::*;

fn opts() -> ValueOptions {
    ValueOptions::default()
}

fn ok(ty: &PgType, typmod: i32, text: &str) -> Value {
    decode_text(ty, typmod, text, &opts()).unwrap_or_else(|e| panic!("{text:?} should decode: {e}"))
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

mod temporal;

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
    fn decimal_bytes_match_twos_complement(negative in any::<bool>(), digits in "[0-9]{1,38}") {
        let unscaled: i128 = digits.parse().expect("38 digits fit an i128");
        prop_assert_eq!(decimal_bytes(negative, unscaled), twos_complement(negative, &digits));
    }

    #[test]
    fn unscaled_digits_match_the_padded_text(int in "[0-9]{0,40}", frac in "[0-9]{0,20}", extra in 0usize..20) {
        let scale = frac.len() + extra;
        match unscaled_digits(&int, &frac, scale) {
            Some(value) => {
                let padded = format!("{int}{frac}{}", "0".repeat(extra));
                let expected = if padded.is_empty() { 0 } else { padded.parse::<i128>().expect("fits") };
                prop_assert_eq!(value, expected);
            }
            None => prop_assert!(int.len() + scale > 38),
        }
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

    #[test]
    fn utc_timestamptz_shortcut_equals_the_general_path(
        days in -800_000i64..=2_932_896,
        micros in 0i64..86_400_000_000,
        shown in 0usize..=6,
        typmod in -1i32..=6,
    ) {
        // Postgres's UTC output: years 1-9999 (others BC or 5 digits),
        // up to six fraction digits, trailing zeros trimmed.
        let (y, m, d) = civil_from_days(days);
        let mut time = String::new();
        push_time(&mut time, micros, None);
        let (hms, frac) = time.split_once('.').unwrap_or((&time, ""));
        let frac = &frac[..frac.len().min(shown)];
        let frac = frac.trim_end_matches('0');
        let dot = if frac.is_empty() { "" } else { "." };
        let era = if y <= 0 { " BC" } else { "" };
        let year = if y <= 0 { 1 - y } else { y };
        let text = format!("{year:04}-{m:02}-{d:02} {hms}{dot}{frac}+00{era}");
        let general = any_timestamptz(&text, typmod).expect("valid");
        match utc_timestamptz(&text, typmod) {
            Some(short) => prop_assert_eq!(short, general),
            None => prop_assert!(y <= 0 || y > 9999, "{} took the general path", text),
        }
    }

    #[test]
    fn utc_timestamptz_shortcut_refuses_what_it_cannot_vouch_for(text in "[0-9 :.+-]{19,30}", typmod in -1i32..=6) {
        if let Some(short) = utc_timestamptz(&text, typmod) {
            prop_assert_eq!(Ok(short), any_timestamptz(&text, typmod));
        }
    }
}
