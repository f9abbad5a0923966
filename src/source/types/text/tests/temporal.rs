//! Unit tests of the temporal decoders: dates, times, timestamps, intervals.

use super::*;

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
