//! The value handling modes: how column values are represented, as Debezium's
//! PostgreSQL connector configures it (`decimal.handling.mode`,
//! `time.precision.mode`, `binary.handling.mode`, `hstore.handling.mode`,
//! `interval.handling.mode`, `unavailable.value.placeholder`,
//! `money.fraction.digits`). Each mode changes a column's Connect schema (see
//! [`column_schema`](super::column_schema)), hence the Avro schema derived from it,
//! and the values [`decode_text`](super::decode_text) produces, always together.
//! The defaults are Debezium's defaults.

use super::compat::DebeziumCompat;
use super::DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER;

/// How values are represented; the defaults are Debezium's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueOptions {
    /// Written for unchanged TOAST columns (`unavailable.value.placeholder`).
    pub unavailable_value_placeholder: String,
    /// `decimal.handling.mode`, for NUMERIC and MONEY.
    pub decimal_handling: DecimalHandling,
    /// What NUMERIC `NaN` / `±Infinity` become in [`DecimalHandling::Precise`] mode.
    pub special_numeric: SpecialNumeric,
    /// `interval.handling.mode`.
    pub interval_handling: IntervalHandling,
    /// `money.fraction.digits`: the scale of MONEY values (default 2).
    pub money_fraction_digits: u32,
    /// `binary.handling.mode`, for BYTEA (and BYTEA arrays).
    pub binary_handling: BinaryHandling,
    /// `time.precision.mode`, for DATE, TIME and TIMESTAMP (and their arrays).
    pub time_precision: TimePrecision,
    /// `hstore.handling.mode`.
    pub hstore_handling: HstoreHandling,
    /// `--debezium-compat`: Debezium's own values where we differ on purpose.
    pub compat: DebeziumCompat,
}

impl Default for ValueOptions {
    fn default() -> Self {
        ValueOptions {
            unavailable_value_placeholder: DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER.to_owned(),
            decimal_handling: DecimalHandling::Precise,
            special_numeric: SpecialNumeric::Fail,
            interval_handling: IntervalHandling::Numeric,
            money_fraction_digits: 2,
            binary_handling: BinaryHandling::Bytes,
            time_precision: TimePrecision::Adaptive,
            hstore_handling: HstoreHandling::Json,
            compat: DebeziumCompat::default(),
        }
    }
}

/// `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DecimalHandling {
    /// Connect `Decimal` bytes (or `VariableScaleDecimal` for unconstrained NUMERIC).
    #[default]
    Precise,
    /// `double`; `NaN` and `±Infinity` become the doubles.
    Double,
    /// The decimal as Java's `BigDecimal.toString()` writes it (what Debezium
    /// writes): plain digits at the column's scale (`1.50` in `numeric(10,2)`), but
    /// scientific notation below 10^-6 (`1E-7`, and `0E-10` for a zero at scale
    /// 10). `NaN`, `Infinity`, `-Infinity` become `NAN`, `POSITIVE_INFINITY`,
    /// `NEGATIVE_INFINITY`. MONEY is plain (`toPlainString`), as in Debezium.
    String,
}

/// What NUMERIC `NaN` / `Infinity` / `-Infinity` become in precise mode, where the
/// Connect decimal types cannot hold them. Debezium writes null and logs a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecialNumeric {
    /// Stop with [`ValueError::SpecialNumeric`](super::ValueError::SpecialNumeric),
    /// telling the operator to choose `--decimal-handling double` or `string`.
    #[default]
    Fail,
    /// Emit [`Value::Null`](crate::event::value::Value::Null), as Debezium does.
    /// Opt-in only: the value is lost, so a caller that gets a null for non-NULL
    /// text must log a WARN naming the column.
    Null,
}

/// `interval.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum IntervalHandling {
    /// int64 microseconds (`io.debezium.time.MicroDuration`), a month counted as 30.4375 days.
    #[default]
    Numeric,
    /// ISO-8601 string `PnYnMnDTnHnMnS` (`io.debezium.time.Interval`).
    String,
}

/// `binary.handling.mode`: BYTEA as Connect bytes or as a string in an encoding.
/// The string modes declare a plain Connect `string` (no logical name), as Debezium does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BinaryHandling {
    /// Connect `bytes` (Avro `bytes`; JSON writes them base64, as JsonConverter does).
    #[default]
    Bytes,
    /// Base64 with the standard alphabet and padding (Java's `Base64.getEncoder()`).
    Base64,
    /// Base64 with the URL-safe alphabet and padding (`Base64.getUrlEncoder()`).
    #[value(name = "base64-url-safe")]
    Base64UrlSafe,
    /// Lowercase hexadecimal, two digits per byte, no prefix.
    Hex,
}

/// `time.precision.mode`, for DATE, TIME and TIMESTAMP. TIMESTAMPTZ and TIMETZ are
/// ISO-8601 strings (`ZonedTimestamp` / `ZonedTime`) in every mode, as in Debezium.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimePrecision {
    /// Debezium's types at the column's precision: DATE `io.debezium.time.Date`
    /// (int32 days), TIME(0-3) `Time` (int32 ms), TIME(4-6) `MicroTime` (int64 µs),
    /// TIMESTAMP(0-3) `Timestamp` (int64 ms), TIMESTAMP(4-6) `MicroTimestamp` (int64 µs).
    #[default]
    Adaptive,
    /// As `adaptive`, except that TIME is always `io.debezium.time.MicroTime`.
    #[value(name = "adaptive_time_microseconds")]
    AdaptiveTimeMicroseconds,
    /// Kafka Connect's own logical types, always in milliseconds:
    /// `org.apache.kafka.connect.data.Date` (int32 days), `...Time` (int32 ms since
    /// midnight) and `...Timestamp` (int64 ms since the epoch). Digits below the
    /// millisecond are dropped (rounded toward the past), as Debezium does.
    Connect,
}

/// `hstore.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HstoreHandling {
    /// A JSON object in a string (`io.debezium.data.Json`), NULL values as `null`.
    #[default]
    Json,
    /// A Connect `map` of required string keys to optional string values (Avro `map`;
    /// JSON writes it as an object).
    Map,
}
