//! Column DEFAULTs as the `default` of the column's Connect schema, the way
//! Debezium 3.6 declares them (`PostgresDefaultValueConverter`, applied by
//! `TableSchemaBuilder.addField` to key and value fields alike).
//!
//! The input is the catalog's expression (`pg_get_expr(adbin, adrelid)`:
//! `42`, `'dflt'::text`, `'2020-01-01'::date`, `nextval('t_id_seq'::regclass)`)
//! and the output is a value of the column's schema under the same
//! [`ValueOptions`], or `None` where Debezium declares no default:
//! - Only built-in types Debezium has a parser for (boolean, the integer and
//!   floating-point types, numeric, character types, json/jsonb/xml, uuid,
//!   date/time/timestamp/timestamptz/interval, bit/varbit) and enums; never
//!   a domain, an array or any other type.
//! - The literal is the text between the first pair of single quotes (a
//!   doubled quote inside ends it early, as in Debezium), else the whole
//!   expression; `NULL::<type>` is no default.
//! - An expression that calls a function (`nextval(...)`, `now()`) or is one
//!   of the SQL date/time keywords (`CURRENT_TIMESTAMP`) cannot be evaluated:
//!   Debezium declares a per-type placeholder instead (`0` for a serial
//!   column, `1970-01-01` for a date), and so do we.
//! - A literal that does not parse as the type, and a value that is a struct
//!   (a NUMERIC without scale in precise mode), give no default.

use crate::event::value::Value;

use super::{decode_text, PgType, ValueOptions};

/// The SQL keywords Debezium treats like a function call.
const CURRENT_DATE_TIMES: [&str; 5] = [
    "current_timestamp",
    "current_time",
    "current_date",
    "localtime",
    "localtimestamp",
];

/// The schema default of a column of type `ty` (built in, or an enum: the
/// caller passes no domain) whose DEFAULT is `expression`.
pub fn column_default(
    ty: &PgType,
    type_modifier: i32,
    expression: &str,
    opts: &ValueOptions,
) -> Option<Value> {
    let parser = Parser::for_type(ty)?;
    let expression = match parser.trims {
        true => expression.trim(),
        false => expression,
    };
    let literal = match parser.placeholder {
        Some(placeholder) if is_generated(expression) => placeholder,
        _ => literal(expression, ty)?,
    };
    let value = match ty {
        // Java's Boolean.parseBoolean: anything but "true" is false.
        PgType::Bool => Value::Boolean(literal.eq_ignore_ascii_case("true")),
        _ => decode_text(ty, type_modifier, literal, opts).ok()?,
    };
    // Kafka Connect cannot hold a struct default (KAFKA-12694).
    (!matches!(value, Value::Struct(_))).then_some(value)
}

/// How Debezium reads a type's default expression.
struct Parser {
    /// Leading and trailing blanks are dropped first.
    trims: bool,
    /// The literal declared for a value computed by a function; `None` for
    /// an enum, whose generated default is no default.
    placeholder: Option<&'static str>,
}

impl Parser {
    fn for_type(ty: &PgType) -> Option<Parser> {
        use PgType::*;
        let (trims, placeholder) = match ty {
            Bpchar | Varchar | Text | Xml => (false, ""),
            Json | Jsonb => (false, "{}"),
            Bool => (true, "false"),
            Numeric | Float4 | Float8 => (true, "0.0"),
            Int2 | Int4 | Int8 => (true, "0"),
            Uuid => (true, "00000000-0000-0000-0000-000000000000"),
            Date => (true, "1970-01-01"),
            Time => (true, "00:00:00"),
            Timestamp => (true, "1970-01-01 00:00:00"),
            Timestamptz => (true, "1970-01-01 00:00:00+00"),
            // pgjdbc's PGInterval reads Debezium's placeholder "epoch" as zero.
            Interval => (true, "00:00:00"),
            // Debezium's "00" reads as false for BIT(1).
            Bit => (true, "00"),
            Varbit => (true, "0"),
            Enum { .. } => {
                return Some(Parser {
                    trims: false,
                    placeholder: None,
                })
            }
            _ => return None,
        };
        Some(Parser {
            trims,
            placeholder: Some(placeholder),
        })
    }
}

/// Whether Debezium takes `expression` for a computed value: a function
/// call (`^[(]?[A-Za-z0-9_.]+\(.*\)`) or a date/time keyword.
fn is_generated(expression: &str) -> bool {
    let call = expression.strip_prefix('(').unwrap_or(expression);
    let name_len = call
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
        .count();
    let is_call = name_len > 0
        && call[name_len..]
            .strip_prefix('(')
            .is_some_and(|args| args.contains(')'));
    is_call
        || CURRENT_DATE_TIMES
            .iter()
            .any(|k| expression.eq_ignore_ascii_case(k))
}

/// A type name without its schema and quotes.
fn unqualified(type_name: &str) -> &str {
    let name = type_name.rsplit('.').next().unwrap_or(type_name);
    name.trim_matches('"')
}

/// The literal of a constant DEFAULT: what the first pair of quotes holds,
/// or the whole expression when it has none. For an enum, only a quoted
/// label cast to the column's own type.
fn literal<'e>(expression: &'e str, ty: &PgType) -> Option<&'e str> {
    if let PgType::Enum { name, .. } = ty {
        let (quoted, cast) = expression.rsplit_once("::")?;
        if unqualified(cast) != unqualified(name) {
            return None;
        }
        return quoted.strip_prefix('\'')?.strip_suffix('\'');
    }
    if expression.starts_with("NULL::") {
        return None;
    }
    match expression.split_once('\'') {
        None => Some(expression),
        Some((_, rest)) => rest.split_once('\'').map(|(quoted, _)| quoted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_of(ty: PgType, type_modifier: i32, expression: &str) -> Option<Value> {
        column_default(&ty, type_modifier, expression, &ValueOptions::default())
    }

    #[test]
    fn constants_take_the_column_value_representation() {
        use PgType::*;
        assert_eq!(default_of(Int4, -1, "42"), Some(Value::Int32(42)));
        assert_eq!(default_of(Int8, -1, "'-7'::bigint"), Some(Value::Int64(-7)));
        assert_eq!(
            default_of(Text, -1, "'dflt'::text"),
            Some(Value::String("dflt".into()))
        );
        assert_eq!(
            default_of(Date, -1, "'2020-01-01'::date"),
            Some(Value::Int32(18262)),
            "days since the epoch, like a DATE value"
        );
        assert_eq!(default_of(Bool, -1, "true"), Some(Value::Boolean(true)));
        // numeric(12,3): the unscaled value at the column's scale.
        let numeric_12_3 = ((12 << 16) | 3) + 4;
        assert_eq!(
            default_of(Numeric, numeric_12_3, "1.5"),
            Some(Value::Bytes(vec![0x05, 0xdc])),
            "1500 at scale 3"
        );
    }

    #[test]
    fn computed_defaults_get_debeziums_placeholders() {
        use PgType::*;
        assert_eq!(
            default_of(Int4, -1, "nextval('t_id_seq'::regclass)"),
            Some(Value::Int32(0)),
            "a serial column"
        );
        assert_eq!(
            default_of(Timestamptz, -1, "CURRENT_TIMESTAMP"),
            Some(Value::String("1970-01-01T00:00:00.000000Z".into()))
        );
        assert_eq!(
            default_of(Text, -1, "(gen_random_uuid())::text"),
            Some(Value::String(String::new()))
        );
    }

    #[test]
    fn no_default_where_debezium_declares_none() {
        use PgType::*;
        assert_eq!(default_of(Int4, -1, "NULL::integer"), None);
        assert_eq!(default_of(Bytea, -1, "'\\x00'::bytea"), None, "no parser");
        assert_eq!(
            default_of(Array(Box::new(Int4)), -1, "'{1}'::integer[]"),
            None
        );
        assert_eq!(
            default_of(Numeric, -1, "1.5"),
            None,
            "VariableScaleDecimal is a struct"
        );
        assert_eq!(default_of(Int4, -1, "(1 + 2)"), None, "not evaluated");
    }

    #[test]
    fn enum_defaults_are_labels_cast_to_the_type() {
        let mood = PgType::Enum {
            name: "mood".into(),
            labels: vec!["sad".into(), "ok".into()],
        };
        assert_eq!(
            default_of(mood.clone(), -1, "'ok'::mood"),
            Some(Value::String("ok".into()))
        );
        assert_eq!(default_of(mood.clone(), -1, "'ok'::other"), None);
        assert_eq!(default_of(mood, -1, "first_mood()"), None);
    }

    #[test]
    fn a_doubled_quote_ends_the_literal_as_in_debezium() {
        assert_eq!(
            default_of(PgType::Text, -1, "'it''s'::text"),
            Some(Value::String("it".into()))
        );
    }
}
