//! Floating-point numbers as Java prints them: `Float.toString` and
//! `Double.toString` of JDK 19 and later, which is what Debezium on Java 21
//! or 25 writes through Kafka Connect's JsonConverter (Jackson prints a
//! `FloatNode` / `DoubleNode` with `Float.toString` / `Double.toString`) and
//! `SimpleHeaderConverter` (`String.valueOf`).
//!
//! The digits: JDK 19's algorithm (Raffaello Giulietti's) takes the shortest
//! decimals that read back as the value and, of those, the one closest to
//! it, as Rust's shortest formatting does; except that a one-digit result is
//! replaced by the closest two-digit decimal that still reads back
//! (`Float.MIN_VALUE` is `1.4E-45`, not `1.0E-45`), so those are taken from
//! the exactly rounded two-digit form.
//!
//! The layout: for 10^-3 <= |x| < 10^7 plain decimal with at least one
//! digit after the point (`100.0`, `0.001`, `1234.5678`); otherwise
//! computerized scientific notation `d.ddd` + `E` + exponent, at least one
//! digit after the point and no `+` (`1.0E7`, `1.0E-4`, `-1.1754944E-38`).
//! Zero is `0.0` / `-0.0`; the non-finite values are `NaN`, `Infinity`,
//! `-Infinity` (JsonConverter writes those as strings, see the callers).
//!
//! The table `tests/data/java_float_to_string.tsv` holds Java 25's own
//! output for edge and random values (`tests/data/JavaFloats.java` makes
//! it); the tests compare every line.

use std::fmt::{LowerExp, Write as _};
use std::str::FromStr;

/// `Float.toString(x)`.
pub fn f32_text(x: f32) -> String {
    java_text(x)
}

/// `Double.toString(x)`.
pub fn f64_text(x: f64) -> String {
    java_text(x)
}

/// A JSON tree as text, with every non-integer number as `Double.toString`
/// prints it: the text of a Connect value's JSON form
/// ([`crate::event::value::Value`]'s `Serialize`, which holds a `float32`
/// as the double of its Java digits) as Jackson writes it.
pub fn json_text(tree: &serde_json::Value) -> String {
    let mut out = String::new();
    write_json(&mut out, tree);
    out
}

fn write_json(out: &mut String, tree: &serde_json::Value) {
    use serde_json::Value as Json;
    match tree {
        Json::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => out.push_str(&f64_text(f)),
            None => out.push_str(&n.to_string()),
        },
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Json::Object(fields) => {
            out.push('{');
            for (i, (name, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Json::from(name.as_str()).to_string());
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// What both widths share: the digits from Rust's formatting, then Java's
/// layout.
trait JavaFloat: Copy + PartialEq + LowerExp + FromStr {
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn is_zero(self) -> bool;
    fn abs(self) -> Self;
}

macro_rules! java_float {
    ($t:ty) => {
        impl JavaFloat for $t {
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}
java_float!(f32);
java_float!(f64);

fn java_text<F: JavaFloat>(x: F) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x.is_infinite() {
        return format!("{sign}Infinity");
    }
    if x.is_zero() {
        return format!("{sign}0.0");
    }
    let magnitude = x.abs();
    let (mut digits, mut exponent) = scientific(&format!("{magnitude:e}"));
    if let Some(even) = even_of_tie(magnitude, &digits, exponent) {
        digits = even;
    }
    if digits.len() == 1 {
        // Java picks the closest two-digit decimal that reads back.
        let (two, two_exponent) = scientific(&format!("{magnitude:.1e}"));
        let reads_back = format!("{}.{}e{two_exponent}", &two[..1], &two[1..])
            .parse::<F>()
            .is_ok_and(|v| v == magnitude);
        if reads_back {
            (digits, exponent) = (two, two_exponent);
        }
    }
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    layout(&mut out, digits, exponent);
    out
}

/// Where `x` lies exactly halfway between two shortest decimals, Rust gives
/// the upper one and Java the one whose last digit is even: the lower one
/// when Rust's `digits` end in an odd digit and it still reads back.
fn even_of_tie<F: JavaFloat>(x: F, digits: &str, exponent: i32) -> Option<String> {
    let (&last, head) = digits.as_bytes().split_last()?;
    if head.is_empty() || last % 2 == 0 {
        return None;
    }
    let mut lower = digits.as_bytes().to_vec();
    *lower.last_mut()? -= 1;
    let lower = String::from_utf8(lower).ok()?;
    // The exact value to one more digit: the lower digits then a 5 ...
    let places = digits.len();
    let (closer, closer_exponent) = scientific(&format!("{x:.places$e}"));
    if closer_exponent != exponent || closer != format!("{lower}5") {
        return None;
    }
    // ... and nothing after it (a float's exact expansion is shorter than
    // 1100 digits).
    let (exact, _) = scientific(&format!("{x:.1100e}"));
    let tie = exact[places + 1..].bytes().all(|b| b == b'0');
    let reads_back = format!("{}.{}e{exponent}", &lower[..1], &lower[1..])
        .parse::<F>()
        .is_ok_and(|v| v == x);
    (tie && reads_back).then_some(lower)
}

/// The significant digits (without the point) and the decimal exponent of
/// Rust's `{:e}` text `d.ddde±n`.
fn scientific(text: &str) -> (String, i32) {
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text, "0"));
    let digits = mantissa.replace('.', "");
    (digits, exponent.parse().unwrap_or(0))
}

/// Writes `d1.d2d3... × 10^exponent` in Java's layout; `digits` has no
/// trailing zeros and at least one digit.
fn layout(out: &mut String, digits: &str, exponent: i32) {
    if (-3..7).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            // 0 <= exponent < 7: the integer part has exponent + 1 digits.
            let whole = exponent.unsigned_abs() as usize + 1;
            if digits.len() > whole {
                out.push_str(&digits[..whole]);
                out.push('.');
                out.push_str(&digits[whole..]);
            } else {
                out.push_str(digits);
                for _ in digits.len()..whole {
                    out.push('0');
                }
                out.push_str(".0");
            }
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        let _ = write!(out, "E{exponent}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java 25's `Float.toString` / `Double.toString` of the values in
    /// `tests/data/java_float_to_string.tsv`: `f32|f64`, raw bits in hex,
    /// Java's text.
    const JAVA: &str = include_str!("../../tests/data/java_float_to_string.tsv");

    #[test]
    fn every_value_of_the_java_table() {
        let mut checked = 0;
        let mut wrong = Vec::new();
        for line in JAVA.lines().filter(|l| !l.is_empty()) {
            let mut parts = line.split('\t');
            let (Some(width), Some(bits), Some(java)) = (parts.next(), parts.next(), parts.next())
            else {
                panic!("malformed line {line:?}");
            };
            let ours = match width {
                "f32" => f32_text(f32::from_bits(
                    u32::from_str_radix(bits, 16).expect("hex bits"),
                )),
                "f64" => f64_text(f64::from_bits(
                    u64::from_str_radix(bits, 16).expect("hex bits"),
                )),
                other => panic!("unknown width {other:?}"),
            };
            if ours != java {
                wrong.push(format!("{width} {bits}: java {java}, ours {ours}"));
            }
            checked += 1;
        }
        assert!(checked > 10_000, "the whole table: {checked} lines");
        assert!(
            wrong.is_empty(),
            "{} differ:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn json_trees_with_java_numbers() {
        let tree = serde_json::json!({"a": [1, 1e10, -0.0, 0.5], "b": {"c": 1e-4, "d": "x"}});
        assert_eq!(
            json_text(&tree),
            r#"{"a":[1,1.0E10,-0.0,0.5],"b":{"c":1.0E-4,"d":"x"}}"#
        );
    }

    #[test]
    fn the_layouts() {
        assert_eq!(f32_text(-1.175_494_4e-38), "-1.1754944E-38");
        assert_eq!(f64_text(1e10), "1.0E10");
        assert_eq!(f64_text(10_000_000.0), "1.0E7");
        assert_eq!(f64_text(9_999_999.0), "9999999.0");
        assert_eq!(f64_text(0.001), "0.001");
        assert_eq!(f64_text(0.0001), "1.0E-4");
        assert_eq!(f32_text(100.0), "100.0");
        assert_eq!(f32_text(f32::from_bits(1)), "1.4E-45");
        assert_eq!(f64_text(-0.0), "-0.0");
        assert_eq!(f64_text(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(f32_text(f32::NAN), "NaN");
    }
}
