//! Dates, times, timestamps and intervals as PostgreSQL prints them
//! (`DateStyle=ISO`, `IntervalStyle=postgres`, `TimeZone=UTC`), into the
//! numbers and strings Debezium's temporal types carry. Integer arithmetic
//! throughout: exact where Debezium's doubles are not.

use std::fmt::Write as _;

use super::super::{time_precision, IntervalHandling};
use super::fault::{Fault, Parsed};
use crate::event::value::Value;

pub(super) const MICROS_PER_DAY: i64 = 86_400_000_000;
/// A month in Debezium's `MicroDuration`: 365.25 / 12 = 30.4375 days, in µs.
const MICROS_PER_MONTH: i64 = 2_629_800_000_000;
/// pgjdbc's `PGStatement.DATE_POSITIVE_INFINITY`, Debezium's timestamp `infinity`, in µs.
const TIMESTAMP_POSITIVE_INFINITY_MICROS: i64 = 9_223_372_036_825_200_000;
/// pgjdbc's `PGStatement.DATE_NEGATIVE_INFINITY`, Debezium's timestamp `-infinity`, in µs.
const TIMESTAMP_NEGATIVE_INFINITY_MICROS: i64 = -9_223_372_036_832_400_000;

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

pub(super) fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// A run of ASCII digits as a number, with its length bounded.
pub(super) fn digits(s: &str, len: std::ops::RangeInclusive<usize>) -> Parsed<i64> {
    if !len.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Fault::Malformed("malformed number field"));
    }
    s.parse()
        .map_err(|_| Fault::Malformed("malformed number field"))
}

/// `YYYY-MM-DD` (year of era, at least four digits), `bc` for the ` BC` suffix.
pub(super) fn parse_ymd(s: &str, bc: bool) -> Parsed<i64> {
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

pub(super) fn strip_bc(s: &str) -> (&str, bool) {
    match s.strip_suffix(" BC") {
        Some(body) => (body, true),
        None => (s, false),
    }
}

pub(super) fn parse_date(text: &str) -> Parsed<i32> {
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
pub(super) fn parse_time(s: &str) -> Parsed<i64> {
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
pub(super) fn fraction_micros(frac: &str) -> Parsed<i64> {
    let value =
        digits(frac, 1..=6).map_err(|_| Fault::Malformed("expected 1 to 6 fractional digits"))?;
    Ok(value * 10i64.pow(6 - frac.len() as u32))
}

/// `[+-]HH[:MM[:SS]]` as seconds east of UTC.
pub(super) fn parse_offset(s: &str) -> Parsed<i64> {
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
pub(super) fn split_offset(s: &str) -> Parsed<(&str, &str)> {
    let at = s
        .rfind(['+', '-'])
        .ok_or(Fault::Malformed("missing UTC offset"))?;
    Ok((&s[..at], &s[at..]))
}

pub(super) fn decode_timestamp(text: &str, millis: bool) -> Parsed<Value> {
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
    timestamp_value(micros, millis)
}

/// A TIMESTAMP of `micros` since 1970 (or an infinity's sentinel) in Debezium's unit.
pub(in crate::source::types) fn timestamp_value(micros: i128, millis: bool) -> Parsed<Value> {
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
pub(super) fn decode_timestamptz(text: &str, type_modifier: i32) -> Parsed<String> {
    match utc_timestamptz(text, type_modifier) {
        Some(zoned) => Ok(zoned),
        None => any_timestamptz(text, type_modifier),
    }
}

/// [`decode_timestamptz`] of any offset, era and infinity.
pub(super) fn any_timestamptz(text: &str, type_modifier: i32) -> Parsed<String> {
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
    zoned_timestamp(
        local - i128::from(parse_offset(offset)?) * 1_000_000,
        type_modifier,
    )
}

/// The shape a UTC session prints nearly every TIMESTAMPTZ in,
/// `YYYY-MM-DD HH:MM:SS[.f]+00` (years 1 to 9999), rearranged into
/// Debezium's `ZonedTimestamp` without the calendar arithmetic of
/// [`any_timestamptz`], whose output it equals; `None`
/// for any other shape or an invalid field, which that decides.
/// A snapshot's COPY rows arrive as text, so this is on its hot path.
pub(super) fn utc_timestamptz(text: &str, type_modifier: i32) -> Option<String> {
    let b = text.as_bytes().strip_suffix(b"+00")?;
    if b.len() < 19 {
        return None;
    }
    let (date_time, frac) = b.split_at(19);
    let frac = match frac {
        [] => &[][..],
        [b'.', digits @ ..] if (1..=6).contains(&digits.len()) => digits,
        _ => return None,
    };
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let field = &date_time[range];
        (field.iter().all(u8::is_ascii_digit))
            .then(|| (field.iter()).fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b' '), (13, b':'), (16, b':')];
    if !separators.iter().all(|&(at, c)| date_time[at] == c) || !frac.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let month_days = match month {
        2 if is_leap(i64::from(year)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if year == 0 || day == 0 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut out = String::with_capacity(32);
    // ASCII throughout: checked above.
    out.push_str(std::str::from_utf8(&date_time[..10]).ok()?);
    out.push('T');
    out.push_str(std::str::from_utf8(&date_time[11..]).ok()?);
    match time_precision(type_modifier) {
        // Java's ISO_LOCAL_TIME: trailing zeros trimmed, nothing for zero.
        0 => {
            let end = frac.iter().rposition(|d| *d != b'0').map_or(0, |i| i + 1);
            if end > 0 {
                out.push('.');
                out.push_str(std::str::from_utf8(&frac[..end]).ok()?);
            }
        }
        digits => {
            out.push('.');
            for i in 0..digits as usize {
                out.push(char::from(*frac.get(i).unwrap_or(&b'0')));
            }
        }
    }
    out.push('Z');
    Some(out)
}

/// A finite TIMESTAMPTZ of `utc` µs since 1970 as Debezium's `ZonedTimestamp`.
pub(in crate::source::types) fn zoned_timestamp(utc: i128, type_modifier: i32) -> Parsed<String> {
    // In i64 when it fits (every binary value does): 128-bit division is
    // a visible share of a row of timestamps.
    let (days, micros) = match i64::try_from(utc) {
        Ok(utc) => (
            utc.div_euclid(MICROS_PER_DAY),
            utc.rem_euclid(MICROS_PER_DAY),
        ),
        Err(_) => (
            i64::try_from(utc.div_euclid(i128::from(MICROS_PER_DAY)))
                .map_err(|_| Fault::OutOfRange("a date"))?,
            utc.rem_euclid(i128::from(MICROS_PER_DAY)) as i64,
        ),
    };
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
    push_time(&mut out, micros, digits);
    out.push('Z');
    Ok(out)
}

/// Appends `HH:MM:SS` and the fraction: `digits` fixed digits, or (None) Java's
/// `ISO_LOCAL_TIME` style, trailing zeros trimmed and nothing for zero.
pub(super) fn push_time(out: &mut String, micros: i64, digits: Option<u32>) {
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
#[inline]
pub(super) fn push_padded(out: &mut String, value: u64, width: usize) {
    let digit = |d: u64| char::from(b'0' + d as u8);
    // Most fields are two digits and most years four: no loop for them.
    match (width, value) {
        (2, 0..=99) => {
            out.push(digit(value / 10));
            out.push(digit(value % 10));
        }
        (4, 0..=9999) => {
            out.push(digit(value / 1000));
            out.push(digit(value / 100 % 10));
            out.push(digit(value / 10 % 10));
            out.push(digit(value % 10));
        }
        _ => push_padded_digits(out, value, width),
    }
}

fn push_padded_digits(out: &mut String, value: u64, width: usize) {
    let mut digits = [b'0'; 20];
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
    let start = at.min(digits.len().saturating_sub(width));
    out.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits"));
}

/// TIMETZ as Debezium's `ZonedTime`: shifted to UTC (wrapping around midnight), e.g.
/// `03:04:05.12+02` becomes `01:04:05.12Z`; `24:00:00+00` stays `24:00:00Z`.
pub(super) fn decode_timetz(text: &str) -> Parsed<String> {
    let (time, offset) = split_offset(text)?;
    Ok(zoned_time(parse_time(time)?, parse_offset(offset)?))
}

/// A TIMETZ of `local` µs since midnight at `offset` seconds east of UTC as
/// Debezium's `ZonedTime`.
pub(in crate::source::types) fn zoned_time(local: i64, offset: i64) -> String {
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
    out
}

/// An interval's fields as IntervalStyle=postgres prints them, each signed.
#[derive(Default)]
pub(in crate::source::types) struct IntervalFields {
    pub years: i64,
    pub months: i64,
    pub days: i64,
    pub hours: i64,
    pub minutes: i64,
    /// Seconds and their fraction.
    pub micros: i64,
}

pub(super) fn parse_interval(text: &str) -> Parsed<IntervalFields> {
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

pub(super) fn decode_interval(text: &str, mode: IntervalHandling) -> Parsed<Value> {
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
    interval_value(parse_interval(text)?, mode)
}

/// A finite interval's fields as `interval.handling.mode` writes them.
pub(in crate::source::types) fn interval_value(
    f: IntervalFields,
    mode: IntervalHandling,
) -> Parsed<Value> {
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
