//! The built-in range types from `range_send` back into the text
//! `range_out` prints, which text mode carries as is.
//!
//! `range_send`: a flags byte, then each bound present as int32 length and
//! the element type's send form. `range_out` (`range_deparse`): `empty`, or
//! `[`/`(`, the lower bound, `,`, the upper bound, `]`/`)`, each bound in its
//! element's text (`range_bound_escape`: double-quoted when empty or holding
//! `"\()[],` or white space, with `"` and `\` doubled inside). The element
//! texts are those of the session's settings (`DateStyle=ISO`,
//! `TimeZone=UTC`): `2024-01-02`, `2024-01-02 03:04:05.5`,
//! `2024-01-02 03:04:05.5+00`, with ` BC` for years before 1 and
//! `infinity` / `-infinity`.

use std::fmt::Write as _;

use super::{be, numeric, Fault, Parsed, PG_EPOCH_DAYS};
use crate::source::types::text::civil_from_days;

const RANGE_EMPTY: u8 = 0x01;
const RANGE_LB_INC: u8 = 0x02;
const RANGE_UB_INC: u8 = 0x04;
const RANGE_LB_INF: u8 = 0x08;
const RANGE_UB_INF: u8 = 0x10;
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The element type of a built-in range (its OID in `pg_type.dat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element {
    Int4,
    Int8,
    Numeric,
    Date,
    Timestamp,
    Timestamptz,
}

impl Element {
    fn of_range(oid: u32) -> Option<Element> {
        Some(match oid {
            3904 => Element::Int4,
            3926 => Element::Int8,
            3906 => Element::Numeric,
            3912 => Element::Date,
            3908 => Element::Timestamp,
            3910 => Element::Timestamptz,
            _ => return None,
        })
    }
}

/// Whether [`range_text`] reads the range type with this OID.
pub(super) fn is_supported(oid: u32) -> bool {
    Element::of_range(oid).is_some()
}

/// The text `range_out` prints for these `range_send` bytes of range type `oid`.
pub(super) fn range_text(oid: u32, bytes: &[u8]) -> Parsed<String> {
    let bad = Fault::Malformed("malformed binary range");
    let element =
        Element::of_range(oid).ok_or(Fault::Malformed("no binary decoder for the type"))?;
    let (&flags, mut rest) = bytes.split_first().ok_or(bad)?;
    if flags & RANGE_EMPTY != 0 {
        return if rest.is_empty() {
            Ok("empty".to_owned())
        } else {
            Err(bad)
        };
    }
    let mut bound = |infinite: bool| -> Parsed<Option<String>> {
        if infinite {
            return Ok(None);
        }
        let (length, tail) = rest.split_first_chunk::<4>().ok_or(bad)?;
        let length = usize::try_from(i32::from_be_bytes(*length)).map_err(|_| bad)?;
        if length > tail.len() {
            return Err(bad);
        }
        let (value, tail) = tail.split_at(length);
        rest = tail;
        element_text(element, value).map(Some)
    };
    let lower = bound(flags & RANGE_LB_INF != 0)?;
    let upper = bound(flags & RANGE_UB_INF != 0)?;
    if !rest.is_empty() {
        return Err(bad);
    }
    let mut out = String::new();
    out.push(if flags & RANGE_LB_INC != 0 { '[' } else { '(' });
    if let Some(lower) = lower {
        push_bound(&mut out, &lower);
    }
    out.push(',');
    if let Some(upper) = upper {
        push_bound(&mut out, &upper);
    }
    out.push(if flags & RANGE_UB_INC != 0 { ']' } else { ')' });
    Ok(out)
}

/// `range_bound_escape`.
fn push_bound(out: &mut String, value: &str) {
    let quote = value.is_empty()
        || value.chars().any(|c| {
            matches!(c, '"' | '\\' | '(' | ')' | '[' | ']' | ',')
                || c.is_ascii_whitespace()
                || c == '\u{b}'
        });
    if quote {
        out.push('"');
    }
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            out.push(c);
        }
        out.push(c);
    }
    if quote {
        out.push('"');
    }
}

/// A bound's text as the element type's output function prints it.
fn element_text(element: Element, bytes: &[u8]) -> Parsed<String> {
    Ok(match element {
        Element::Int4 => i32::from_be_bytes(be(bytes)?).to_string(),
        Element::Int8 => i64::from_be_bytes(be(bytes)?).to_string(),
        Element::Numeric => numeric::to_text(bytes)?,
        Element::Date => match i32::from_be_bytes(be(bytes)?) {
            i32::MAX => "infinity".to_owned(),
            i32::MIN => "-infinity".to_owned(),
            days => {
                let mut out = String::with_capacity(13);
                push_date(&mut out, i64::from(days) + PG_EPOCH_DAYS);
                out
            }
        },
        Element::Timestamp | Element::Timestamptz => match i64::from_be_bytes(be(bytes)?) {
            i64::MAX => "infinity".to_owned(),
            i64::MIN => "-infinity".to_owned(),
            micros => timestamp_text(micros, element == Element::Timestamptz),
        },
    })
}

/// `EncodeDateOnly` under `DateStyle=ISO`, without the era suffix: the year
/// of era zero-padded to four digits, then month and day.
fn push_date_part(out: &mut String, days_since_1970: i64) -> bool {
    let (year, month, day) = civil_from_days(days_since_1970);
    let bc = year <= 0;
    let year_of_era = if bc { 1 - year } else { year };
    let _ = write!(out, "{year_of_era:04}-{month:02}-{day:02}");
    bc
}

fn push_date(out: &mut String, days_since_1970: i64) {
    if push_date_part(out, days_since_1970) {
        out.push_str(" BC");
    }
}

/// `EncodeDateTime` under `DateStyle=ISO` in UTC: `YYYY-MM-DD HH:MM:SS`, the
/// fraction without trailing zeros, `+00` for TIMESTAMPTZ, ` BC` last.
fn timestamp_text(micros_since_2000: i64, zoned: bool) -> String {
    let days = micros_since_2000.div_euclid(MICROS_PER_DAY) + PG_EPOCH_DAYS;
    let time = micros_since_2000.rem_euclid(MICROS_PER_DAY);
    let mut out = String::with_capacity(32);
    let bc = push_date_part(&mut out, days);
    let secs = time / 1_000_000;
    let _ = write!(
        out,
        " {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    let mut fraction = format!("{:06}", time % 1_000_000);
    while fraction.ends_with('0') {
        fraction.pop();
    }
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(&fraction);
    }
    if zoned {
        out.push_str("+00");
    }
    if bc {
        out.push_str(" BC");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(bytes: &[u8]) -> Vec<u8> {
        [&(bytes.len() as i32).to_be_bytes()[..], bytes].concat()
    }

    #[test]
    fn ranges_print_as_range_out() {
        let int4 = |v: i32| bound(&v.to_be_bytes());
        assert_eq!(range_text(3904, &[RANGE_EMPTY]), Ok("empty".to_owned()));
        assert_eq!(
            range_text(3904, &[[RANGE_LB_INC].to_vec(), int4(-5), int4(7)].concat()),
            Ok("[-5,7)".to_owned())
        );
        assert_eq!(
            range_text(3904, &[RANGE_LB_INF | RANGE_UB_INF]),
            Ok("(,)".to_owned())
        );
        let ts = |micros: i64| bound(&micros.to_be_bytes());
        assert_eq!(
            range_text(
                3910,
                &[
                    [RANGE_LB_INC | RANGE_UB_INC].to_vec(),
                    ts(500_000),
                    ts(i64::MAX)
                ]
                .concat()
            ),
            Ok("[\"2000-01-01 00:00:00.5+00\",infinity]".to_owned())
        );
        // 0001-01-01 BC (year 0) is 2,000 years, five 400-year cycles of
        // 146,097 days, before 2000-01-01.
        let bc = -730_485 * MICROS_PER_DAY;
        assert_eq!(
            range_text(3908, &[[RANGE_UB_INF].to_vec(), ts(bc)].concat()),
            Ok("(\"0001-01-01 00:00:00 BC\",)".to_owned())
        );
        let date = |days: i32| bound(&days.to_be_bytes());
        assert_eq!(
            range_text(
                3912,
                &[[RANGE_LB_INC].to_vec(), date(i32::MIN), date(0)].concat()
            ),
            Ok("[-infinity,2000-01-01)".to_owned())
        );
        assert!(range_text(3904, &[RANGE_LB_INC, 0, 0, 0, 9]).is_err());
        assert!(range_text(3904, &[RANGE_EMPTY, 1]).is_err());
        assert!(range_text(4451, &[RANGE_EMPTY]).is_err());
    }

    #[test]
    fn bounds_are_quoted_as_range_bound_escape_does() {
        let quoted = |v: &str| {
            let mut out = String::new();
            push_bound(&mut out, v);
            out
        };
        assert_eq!(quoted("12"), "12");
        assert_eq!(quoted(""), "\"\"");
        assert_eq!(quoted("a b"), "\"a b\"");
        assert_eq!(quoted("a\"b\\"), "\"a\"\"b\\\\\"");
    }
}
