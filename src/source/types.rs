//! Postgres column types and the Kafka Connect schema Debezium gives each of them.
//!
//! pgoutput describes a column by `(type_oid, atttypmod)`. [`TypeRegistry::resolve`]
//! turns the OID into a [`PgType`] (built-in OIDs are known statically; enums, domains,
//! arrays of those and extension types such as `hstore` come from [`CATALOG_QUERY`]), and
//! [`column_schema`] gives the schema Debezium 3.x declares for the column under the
//! value handling modes of [`ValueOptions`] (`time.precision.mode`,
//! `decimal.handling.mode`, `interval.handling.mode`, `hstore.handling.mode`,
//! `binary.handling.mode`; the `options` submodule documents each). The values
//! themselves are decoded by [`decode_text`] (in the `text` submodule), which always
//! produces a value of the schema given here for the same options.
//!
//! Errors ([`ValueError`]) name the type and what was wrong with the value, never the
//! value: they reach logs and the health endpoint.
//!
//! Invariants: a domain resolves to its base type (its type modifier, if any, travels in
//! [`PgType::Modified`]); the resolution terminates on malformed catalogs (cycles resolve
//! to [`PgType::Unknown`]); `column_schema` never marks the column optional except for
//! unknown types, whose text is passed through.
//!
//! Where this module departs from Debezium, on purpose:
//! - Arrays Debezium drops (`money[]`, `name[]`, `interval[]`, `varbit[]`, `xml[]`) and
//!   arrays of domains are emitted as arrays of their element schema.
//! - Enum arrays carry their labels, with optional elements (Debezium writes null and
//!   declares required elements, yet Postgres allows NULL elements); a `name` column
//!   carries its text (Debezium writes null).
//! - `time[]` and `timetz[]` elements are decoded as the scalars are (Debezium, going
//!   through pgjdbc's `java.sql.Time`, writes `24:00:00` as 0 and drops a `timetz[]`
//!   element's fraction).
//! - Unknown types are a string carrying Postgres's text (Debezium drops the column by
//!   default, or sends bytes with `include.unknown.datatypes`).
//! - NUMERIC with a negative scale (Postgres 15+) is declared with scale 0 and the
//!   precision widened accordingly; Debezium reads the typmod as a huge positive scale.
//! - The unchanged-TOAST placeholder is [`Value::Null`] where the column's type cannot
//!   carry it (see [`unavailable_value`]); Debezium emits character codes or an invalid value
//!   (`--debezium-compat unchanged-toast-numeric-array` brings the codes back, see [`compat`]).
//! - An unchanged TOASTed BYTEA under `binary.handling.mode=base64` / `base64-url-safe`
//!   is the placeholder string (as in `hex` mode); Debezium writes null there.

use std::fmt::Write as _;

use crate::event::value::{ConnectSchema, ConnectType, Field, Value};

mod binary;
pub mod compat;
mod defaults;
mod options;
mod registry;
mod text;

pub use binary::{decode_binary, decode_binary_into, supports_binary};
pub use defaults::column_default;
pub use options::{
    BinaryHandling, DecimalHandling, HstoreHandling, IntervalHandling, SpecialNumeric,
    TimePrecision, ValueOptions,
};
pub use registry::{CatalogError, CatalogRow, TypeRegistry, UserType, CATALOG_QUERY};
pub(crate) use text::java_big_decimal_string;
pub use text::{decode_text, decode_text_into};

/// The one value a `*_into` decoder pushes, for the callers that want it
/// alone rather than in a row.
fn one_value(
    decode_into: impl FnOnce(&mut Vec<Value>) -> Result<(), ValueError>,
) -> Result<Value, ValueError> {
    let mut value = Vec::with_capacity(1);
    decode_into(&mut value)?;
    Ok(value.pop().unwrap_or(Value::Null))
}

/// Debezium's default `unavailable.value.placeholder`.
pub const DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER: &str = "__debezium_unavailable_value";

/// Postgres's `VARHDRSZ`, the offset added to NUMERIC and character type modifiers.
const VARHDRSZ: i32 = 4;

/// A column type, resolved from its OID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgType {
    Bool,
    Bytea,
    /// The one-byte `"char"` type (OID 18).
    Char,
    Name,
    Int2,
    Int4,
    Int8,
    Oid,
    Text,
    Json,
    Jsonb,
    Xml,
    Float4,
    Float8,
    Money,
    Numeric,
    Inet,
    Cidr,
    Macaddr,
    Macaddr8,
    Bpchar,
    Varchar,
    Date,
    Time,
    Timetz,
    Timestamp,
    Timestamptz,
    Interval,
    Bit,
    Varbit,
    Uuid,
    Tsvector,
    /// A built-in range type (`int4range`, `tstzrange`, ...), sent as its text.
    Range {
        oid: u32,
    },
    /// A user enum; `labels` in `enumsortorder`.
    Enum {
        name: String,
        labels: Vec<String>,
    },
    /// The `hstore` extension type, sent as a JSON object string.
    Hstore,
    /// The `citext` extension type, sent as a string.
    Citext,
    /// The `ltree` extension type (`io.debezium.data.Ltree`).
    Ltree,
    /// An array of `element`; the column's type modifier applies to the elements.
    Array(Box<PgType>),
    /// A domain over a type with a modifier (`CREATE DOMAIN price AS numeric(10,2)`).
    /// The domain's modifier replaces the column's, which is -1 for domain columns.
    Modified {
        base: Box<PgType>,
        type_modifier: i32,
    },
    /// A type this connector does not model; its text is passed through as a string.
    Unknown {
        oid: u32,
    },
}

/// Built-in types: `(oid, array oid, type, name)`, OIDs from `pg_type.dat`.
static BUILTINS: [(u32, u32, PgType, &str); 38] = {
    use PgType::*;
    [
        (16, 1000, Bool, "bool"),
        (17, 1001, Bytea, "bytea"),
        (18, 1002, Char, "\"char\""),
        (19, 1003, Name, "name"),
        (20, 1016, Int8, "int8"),
        (21, 1005, Int2, "int2"),
        (23, 1007, Int4, "int4"),
        (25, 1009, Text, "text"),
        (26, 1028, Oid, "oid"),
        (114, 199, Json, "json"),
        (142, 143, Xml, "xml"),
        (650, 651, Cidr, "cidr"),
        (700, 1021, Float4, "float4"),
        (701, 1022, Float8, "float8"),
        (774, 775, Macaddr8, "macaddr8"),
        (790, 791, Money, "money"),
        (829, 1040, Macaddr, "macaddr"),
        (869, 1041, Inet, "inet"),
        (1042, 1014, Bpchar, "bpchar"),
        (1043, 1015, Varchar, "varchar"),
        (1082, 1182, Date, "date"),
        (1083, 1183, Time, "time"),
        (1114, 1115, Timestamp, "timestamp"),
        (1184, 1185, Timestamptz, "timestamptz"),
        (1186, 1187, Interval, "interval"),
        (1266, 1270, Timetz, "timetz"),
        (1560, 1561, Bit, "bit"),
        (1562, 1563, Varbit, "varbit"),
        (1700, 1231, Numeric, "numeric"),
        (2950, 2951, Uuid, "uuid"),
        (3614, 3643, Tsvector, "tsvector"),
        (3802, 3807, Jsonb, "jsonb"),
        (3904, 3905, Range { oid: 3904 }, "int4range"),
        (3906, 3907, Range { oid: 3906 }, "numrange"),
        (3908, 3909, Range { oid: 3908 }, "tsrange"),
        (3910, 3911, Range { oid: 3910 }, "tstzrange"),
        (3912, 3913, Range { oid: 3912 }, "daterange"),
        (3926, 3927, Range { oid: 3926 }, "int8range"),
    ]
};

/// `pg_type.typname` of a built-in type or of an array of one (`int4`,
/// `_int4`, `char` for `"char"`), as Debezium names column types.
pub fn builtin_typname(oid: u32) -> Option<String> {
    BUILTINS.iter().find_map(|(scalar, array, _, name)| {
        let name = name.trim_matches('"');
        match oid {
            o if o == *scalar => Some(name.to_owned()),
            o if o == *array => Some(format!("_{name}")),
            _ => None,
        }
    })
}

impl PgType {
    /// Whether values of this type are, or hold, enum labels.
    pub fn holds_enum(&self) -> bool {
        match self {
            PgType::Enum { .. } => true,
            PgType::Modified { base, .. } => base.holds_enum(),
            PgType::Array(element) => element.holds_enum(),
            _ => false,
        }
    }

    /// Whether values of this type are variable-length (`typlen = -1`), and
    /// so may be TOASTed and arrive as "unchanged" in an update.
    pub fn is_varlena(&self) -> bool {
        match self {
            PgType::Bool
            | PgType::Char
            | PgType::Name
            | PgType::Int2
            | PgType::Int4
            | PgType::Int8
            | PgType::Oid
            | PgType::Float4
            | PgType::Float8
            | PgType::Money
            | PgType::Macaddr
            | PgType::Macaddr8
            | PgType::Date
            | PgType::Time
            | PgType::Timetz
            | PgType::Timestamp
            | PgType::Timestamptz
            | PgType::Interval
            | PgType::Uuid
            | PgType::Enum { .. } => false,
            PgType::Modified { base, .. } => base.is_varlena(),
            _ => true,
        }
    }

    /// Whether TOAST can move a value of this type (column modifier `type_modifier`)
    /// out of line, so that an update leaving it alone sends it as "unchanged".
    /// Postgres only moves a value longer than the pointer that would replace it
    /// (`toast_tuple_find_biggest_attribute` skips anything up to
    /// `MAXALIGN(TOAST_POINTER_SIZE)`, 24 bytes), so a NUMERIC(p,s) small enough
    /// never is, although NUMERIC is variable-length.
    pub fn can_be_toasted(&self, type_modifier: i32) -> bool {
        match self {
            PgType::Modified {
                base,
                type_modifier,
            } => base.can_be_toasted(*type_modifier),
            PgType::Numeric => numeric_precision_scale(type_modifier)
                .is_none_or(|(p, s)| numeric_max_size(p, s) > TOAST_POINTER_ALIGNED_SIZE),
            other => other.is_varlena(),
        }
    }

    /// The built-in type with this OID, if there is one.
    pub fn from_builtin_oid(oid: u32) -> Option<PgType> {
        BUILTINS
            .iter()
            .find_map(|(scalar, array, ty, _)| match oid {
                o if o == *scalar => Some(ty.clone()),
                o if o == *array => Some(PgType::Array(Box::new(ty.clone()))),
                _ => None,
            })
    }

    /// The type as Postgres would name it, with its modifier, for error messages
    /// (`numeric(10,2)`, `timestamptz(3)`, `varchar(20)`, `int4[]`).
    pub fn display(&self, type_modifier: i32) -> String {
        use PgType::*;
        let name = match self {
            Enum { name, .. } => name.as_str(),
            Array(element) => return format!("{}[]", element.display(type_modifier)),
            Modified {
                base,
                type_modifier,
            } => return base.display(*type_modifier),
            Unknown { oid } => return format!("unknown type (oid {oid})"),
            Hstore => "hstore",
            Citext => "citext",
            Ltree => "ltree",
            builtin => BUILTINS
                .iter()
                .find(|b| b.2 == *builtin)
                .map_or("?", |b| b.3),
        };
        let modifier = match self {
            Numeric => numeric_precision_scale(type_modifier).map(|(p, s)| format!("{p},{s}")),
            Time | Timetz | Timestamp | Timestamptz | Bit | Varbit if type_modifier >= 0 => {
                Some(type_modifier.to_string())
            }
            Bpchar | Varchar if type_modifier >= VARHDRSZ => {
                Some((type_modifier - VARHDRSZ).to_string())
            }
            _ => None,
        };
        match modifier {
            Some(m) => format!("{name}({m})"),
            None => name.to_owned(),
        }
    }
}

/// `(precision, scale)` of a NUMERIC type modifier, `None` for an unconstrained NUMERIC.
/// The scale is sign-extended from 11 bits: Postgres 15+ allows negative scales.
pub(crate) fn numeric_precision_scale(type_modifier: i32) -> Option<(u32, i32)> {
    if type_modifier < VARHDRSZ {
        return None;
    }
    let t = type_modifier - VARHDRSZ;
    let precision = ((t >> 16) & 0xffff) as u32;
    let scale = ((t & 0x7ff) ^ 1024) - 1024;
    Some((precision, scale))
}

/// The schema of a `numeric(precision, scale)` column in the default modes.
#[cfg(test)]
pub(crate) fn numeric_column_schema(precision: i32, scale: i32) -> ConnectSchema {
    let type_modifier = ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ;
    column_schema(&PgType::Numeric, type_modifier, &ValueOptions::default())
}

/// `MAXALIGN(TOAST_POINTER_SIZE)` on 64-bit builds: a varlena datum this long or
/// shorter is never moved out of line.
const TOAST_POINTER_ALIGNED_SIZE: u32 = 24;

/// The largest datum a NUMERIC(p,s) value takes, as the toaster measures it: a
/// 4-byte varlena header, the 4-byte (long) numeric header, and two bytes per
/// base-10000 digit, counted on each side of the decimal point.
fn numeric_max_size(precision: u32, scale: i32) -> u32 {
    let integer_digits = (i64::from(precision) - i64::from(scale)).max(0) as u32;
    let fraction_digits = scale.max(0) as u32;
    let digit_groups = integer_digits.div_ceil(4) + fraction_digits.div_ceil(4);
    4 + 4 + 2 * digit_groups
}

/// `(precision, scale)` as declared in the Connect schema: a negative scale is widened
/// into the precision, since Avro decimals cannot have one.
pub(crate) fn decimal_precision_scale(type_modifier: i32) -> Option<(u32, u32)> {
    numeric_precision_scale(type_modifier).map(|(p, s)| match s {
        s if s < 0 => (p + s.unsigned_abs(), 0),
        s => (p, s as u32),
    })
}

/// Fractional-second digits of a time/timestamp type modifier (-1 means Postgres's 6).
pub(crate) fn time_precision(type_modifier: i32) -> u32 {
    match type_modifier {
        m if m < 0 => 6,
        m => (m as u32).min(6),
    }
}

/// The bit length Debezium reads for BIT/VARBIT: the modifier, or 2^31-1 for an
/// unconstrained VARBIT (pgjdbc's unknown length). BIT without a length is BIT(1).
pub(crate) fn bit_length(ty: &PgType, type_modifier: i32) -> i64 {
    match (ty, type_modifier) {
        (PgType::Varbit, m) if m < 0 => i64::from(i32::MAX),
        (_, m) if m < 0 => 1,
        (_, m) => i64::from(m),
    }
}

/// A string/int schema with a Debezium logical name, version 1.
fn logical(kind: ConnectType, name: &str) -> ConnectSchema {
    ConnectSchema::named(kind, name).with_version(1)
}

/// The Kafka Connect `Decimal` schema Debezium declares for NUMERIC(p,s).
fn decimal_schema(scale: u32) -> ConnectSchema {
    logical(ConnectType::Bytes, crate::event::value::DECIMAL_NAME)
        .with_parameter("scale", scale.to_string())
}

/// The schema Debezium declares for a column of type `ty` with modifier `type_modifier`
/// (`pg_attribute.atttypmod`, -1 for none). Not optional: the caller marks nullable
/// columns optional. Only [`PgType::Unknown`] comes back optional.
pub fn column_schema(ty: &PgType, type_modifier: i32, opts: &ValueOptions) -> ConnectSchema {
    use ConnectType as C;
    use PgType::*;
    match ty {
        Bool => ConnectSchema::primitive(C::Boolean),
        Int2 => ConnectSchema::primitive(C::Int16),
        Int4 => ConnectSchema::primitive(C::Int32),
        Int8 | Oid => ConnectSchema::primitive(C::Int64),
        Float4 => ConnectSchema::primitive(C::Float32),
        Float8 => ConnectSchema::primitive(C::Float64),
        Bytea => match opts.binary_handling {
            BinaryHandling::Bytes => ConnectSchema::primitive(C::Bytes),
            BinaryHandling::Base64 | BinaryHandling::Base64UrlSafe | BinaryHandling::Hex => {
                ConnectSchema::primitive(C::String)
            }
        },
        Uuid => logical(C::String, "io.debezium.data.Uuid"),
        Json | Jsonb => logical(C::String, "io.debezium.data.Json"),
        Hstore => match opts.hstore_handling {
            HstoreHandling::Json => logical(C::String, "io.debezium.data.Json"),
            // Keys are never NULL in an hstore; values may be.
            HstoreHandling::Map => ConnectSchema::map(
                ConnectSchema::primitive(C::String),
                ConnectSchema::primitive(C::String).optional(),
            ),
        },
        Xml => logical(C::String, "io.debezium.data.Xml"),
        Tsvector => logical(C::String, "io.debezium.data.Tsvector"),
        Ltree => logical(C::String, "io.debezium.data.Ltree"),
        Enum { labels, .. } => {
            logical(C::String, "io.debezium.data.Enum").with_parameter("allowed", labels.join(","))
        }
        Date | Time | Timestamp => temporal_schema(ty, type_modifier, opts.time_precision),
        Timestamptz => logical(C::String, "io.debezium.time.ZonedTimestamp"),
        Timetz => logical(C::String, "io.debezium.time.ZonedTime"),
        Interval => match opts.interval_handling {
            IntervalHandling::Numeric => logical(C::Int64, "io.debezium.time.MicroDuration"),
            IntervalHandling::String => logical(C::String, "io.debezium.time.Interval"),
        },
        Bit | Varbit => match bit_length(ty, type_modifier) {
            1 => ConnectSchema::primitive(C::Boolean),
            length => logical(C::Bytes, "io.debezium.data.Bits")
                .with_parameter("length", length.to_string()),
        },
        Numeric => match (
            opts.decimal_handling,
            decimal_precision_scale(type_modifier),
        ) {
            (DecimalHandling::Precise, Some((precision, scale))) => decimal_schema(scale)
                .with_parameter("connect.decimal.precision", precision.to_string()),
            (DecimalHandling::Precise, None) => ConnectSchema::structure(
                "io.debezium.data.VariableScaleDecimal",
                vec![
                    Field {
                        name: "scale".to_owned(),
                        schema: ConnectSchema::primitive(C::Int32),
                    },
                    Field {
                        name: "value".to_owned(),
                        schema: ConnectSchema::primitive(C::Bytes),
                    },
                ],
            )
            .with_version(1)
            .with_doc("Variable scaled decimal"),
            (DecimalHandling::Double, _) => ConnectSchema::primitive(C::Float64),
            (DecimalHandling::String, _) => ConnectSchema::primitive(C::String),
        },
        Money => match opts.decimal_handling {
            DecimalHandling::Precise => decimal_schema(opts.money_fraction_digits),
            DecimalHandling::Double => ConnectSchema::primitive(C::Float64),
            DecimalHandling::String => ConnectSchema::primitive(C::String),
        },
        Array(element) => {
            ConnectSchema::array(column_schema(element, type_modifier, opts).optional())
        }
        Modified {
            base,
            type_modifier,
        } => column_schema(base, *type_modifier, opts),
        Unknown { .. } => ConnectSchema::primitive(C::String).optional(),
        // text, varchar, bpchar, "char", name, inet, cidr, macaddr(8), ranges, citext
        Text
        | Varchar
        | Bpchar
        | Char
        | Name
        | Inet
        | Cidr
        | Macaddr
        | Macaddr8
        | Range { .. }
        | Citext => ConnectSchema::primitive(C::String),
    }
}

/// How a DATE, TIME or TIMESTAMP value is counted under a `time.precision.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TemporalUnit {
    /// DATE: int32 days since 1970-01-01.
    Days,
    /// TIME: int32 milliseconds since midnight; TIMESTAMP: int64 ms since the epoch.
    Millis,
    /// TIME: int64 microseconds since midnight; TIMESTAMP: int64 µs since the epoch.
    Micros,
}

/// The unit of a DATE, TIME or TIMESTAMP column; `None` for other types.
pub(crate) fn temporal_unit(
    ty: &PgType,
    type_modifier: i32,
    mode: TimePrecision,
) -> Option<TemporalUnit> {
    let millis = time_precision(type_modifier) <= 3;
    Some(match (ty, mode) {
        (PgType::Date, _) => TemporalUnit::Days,
        (PgType::Time | PgType::Timestamp, TimePrecision::Connect) => TemporalUnit::Millis,
        (PgType::Time, TimePrecision::AdaptiveTimeMicroseconds) => TemporalUnit::Micros,
        (PgType::Time | PgType::Timestamp, _) if millis => TemporalUnit::Millis,
        (PgType::Time | PgType::Timestamp, _) => TemporalUnit::Micros,
        _ => return None,
    })
}

/// DATE, TIME and TIMESTAMP as `time.precision.mode` declares them.
fn temporal_schema(ty: &PgType, type_modifier: i32, mode: TimePrecision) -> ConnectSchema {
    use ConnectType as C;
    use TemporalUnit::*;
    let unit = temporal_unit(ty, type_modifier, mode);
    let (kind, name) = match (ty, unit, mode) {
        (PgType::Date, _, TimePrecision::Connect) => {
            (C::Int32, "org.apache.kafka.connect.data.Date")
        }
        (PgType::Time, _, TimePrecision::Connect) => {
            (C::Int32, "org.apache.kafka.connect.data.Time")
        }
        (_, _, TimePrecision::Connect) => (C::Int64, "org.apache.kafka.connect.data.Timestamp"),
        (PgType::Date, _, _) => (C::Int32, "io.debezium.time.Date"),
        (PgType::Time, Some(Millis), _) => (C::Int32, "io.debezium.time.Time"),
        (PgType::Time, _, _) => (C::Int64, "io.debezium.time.MicroTime"),
        (_, Some(Millis), _) => (C::Int64, "io.debezium.time.Timestamp"),
        (_, _, _) => (C::Int64, "io.debezium.time.MicroTimestamp"),
    };
    logical(kind, name)
}

/// The value written for an unchanged TOAST column (pgoutput `u`), in the column's type:
/// the placeholder string for string-typed columns (so also `bytea` in the string
/// binary modes), its UTF-8 bytes for `bytea` and `Bits`, `{"<p>":"<p>"}` for `hstore`
/// (a JSON string, or a one-entry map), and for arrays a one-element list: the
/// placeholder (string elements), its bytes (`bytea[]`), or, as Debezium does for
/// `uuid[]`, the name-based UUID (version 3) of its bytes.
///
/// Where no value of the column's schema can carry the placeholder (NUMERIC in precise
/// or double mode, arrays of numbers, booleans, dates and times; fixed-length scalars are
/// never TOASTed) this is [`Value::Null`]: the caller must then declare the column
/// optional and list it among the unchanged columns (Debezium emits the placeholder's
/// character codes in `int4[]`/`int8[]`/`date[]`, or a value that violates the schema).
pub fn unavailable_value(ty: &PgType, type_modifier: i32, opts: &ValueOptions) -> Value {
    let placeholder = &opts.unavailable_value_placeholder;
    match ty {
        PgType::Modified {
            base,
            type_modifier,
        } => unavailable_value(base, *type_modifier, opts),
        PgType::Hstore => match opts.hstore_handling {
            HstoreHandling::Json => Value::String(hstore_placeholder(placeholder)),
            HstoreHandling::Map => Value::Map(vec![(
                placeholder.clone(),
                Value::String(placeholder.clone()),
            )]),
        },
        PgType::Array(element) => {
            if opts.compat.unchanged_toast_numeric_array {
                if let Some(codes) = compat::toast_array_codes(element, placeholder) {
                    return codes;
                }
            }
            let is_uuid = |t: &PgType| matches!(t, PgType::Uuid);
            let item = match element.as_ref() {
                PgType::Modified { base, .. } if is_uuid(base) => {
                    Value::String(name_uuid_from_bytes(placeholder.as_bytes()))
                }
                t if is_uuid(t) => Value::String(name_uuid_from_bytes(placeholder.as_bytes())),
                other => unavailable_value(other, type_modifier, opts),
            };
            match item {
                Value::Null => Value::Null,
                item => Value::Array(vec![item]),
            }
        }
        other => {
            let schema = column_schema(other, type_modifier, opts);
            match (schema.kind, schema.name.as_deref()) {
                (ConnectType::String, _) => Value::String(placeholder.clone()),
                (ConnectType::Bytes, None | Some("io.debezium.data.Bits")) => {
                    Value::Bytes(placeholder.as_bytes().to_vec())
                }
                _ => Value::Null,
            }
        }
    }
}

/// Debezium's hstore placeholder: the JSON object `{"<p>":"<p>"}`.
fn hstore_placeholder(placeholder: &str) -> String {
    let quoted = json_quote(placeholder);
    format!("{{{quoted}:{quoted}}}")
}

/// A JSON string literal escaped as Jackson writes it (short escapes where JSON has
/// them, `\u00XX` in upper case for other control characters).
pub(crate) fn json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Java's `UUID.nameUUIDFromBytes`: an MD5-based (version 3) UUID, lowercase.
fn name_uuid_from_bytes(bytes: &[u8]) -> String {
    use md5::Digest;
    let mut h: [u8; 16] = md5::Md5::digest(bytes).into();
    h[6] = (h[6] & 0x0f) | 0x30;
    h[8] = (h[8] & 0x3f) | 0x80;
    crate::event::value::uuid_text(&h)
}

/// A column value that cannot be represented. Never retryable: the same text fails the
/// same way, so the operator has to act (change a setting, or exclude the column).
///
/// No variant carries the value or any part of it: these errors reach logs and the
/// `/readyz` body, where row data must never appear. The table, column and LSN are
/// added by the caller ([`RowErrorKind::Value`](crate::source::relation::RowErrorKind)),
/// which is enough to find the row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The text is not in the form Postgres prints for the type.
    #[error(
        "cannot decode a value of type {type_name}: {reason}; the replication session must use \
         DateStyle=ISO, IntervalStyle=postgres, TimeZone=UTC and bytea_output=hex"
    )]
    Malformed {
        type_name: String,
        reason: &'static str,
    },
    /// The value is valid in Postgres but outside what its Connect type can hold.
    #[error(
        "a value of type {type_name} does not fit {target}; exclude the column from the \
         publication or change the column's type"
    )]
    OutOfRange {
        type_name: String,
        target: &'static str,
    },
    /// The bytes are not the type's binary send form (`--pgoutput-binary`).
    #[error(
        "cannot decode the binary form of a value of type {type_name}: {reason}; restart \
         with --pgoutput-binary off to read values in text form"
    )]
    BinaryMalformed {
        type_name: String,
        reason: &'static str,
    },
    /// A binary value of a type with no binary decoder (`--pgoutput-binary`).
    #[error(
        "values of type {type_name} cannot be read in binary form; restart with \
         --pgoutput-binary auto (text values while such a column is published), or leave \
         the column out of the publication"
    )]
    BinaryUnsupported { type_name: String },
    /// The column's bytes are not UTF-8; pgoutput sends text in the database encoding.
    #[error("column value is not valid UTF-8; pgcdc-kafka requires a database with UTF8 encoding")]
    NotUtf8,
    /// NUMERIC `NaN` / `±Infinity` under `--decimal-handling precise`.
    #[error(
        "a value of type {type_name} is {special}, which a Connect decimal cannot represent \
         (--decimal-handling precise); restart with --decimal-handling double or \
         --decimal-handling string"
    )]
    SpecialNumeric {
        type_name: String,
        special: SpecialValue,
    },
}

/// Which special NUMERIC value was met: a kind of value, not the value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SpecialValue {
    #[error("NaN")]
    NaN,
    #[error("Infinity")]
    Infinity,
    #[error("-Infinity")]
    NegativeInfinity,
}

impl ValueError {
    /// Always false: decoding is deterministic.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
