//! Debezium's column mappers: truncation (`column.truncate.to.N.chars`),
//! masking (`column.mask.with.N.chars`), hashing (`column.mask.hash.<ALG>.with.salt.<salt>`
//! and its `v2` form) and the source-type schema parameters
//! (`column.propagate.source.type`, `datatype.propagate.source.type`).
//!
//! They reproduce Debezium 3.6's `ColumnMappers` exactly, because consumers
//! join on hashed values and registries hold the schemas:
//! - Rules are tried in Debezium's order (every truncation, every mask, the
//!   column then the datatype propagation, hashing v1, hashing v2) and the
//!   **first** rule whose patterns match a column is its only mapper: a
//!   masked column gets no source-type parameters.
//! - Patterns are comma-separated regexes matching the whole
//!   `schema.table.column` (or `schema.table.typname` for the datatype
//!   rule), ignoring case, like every Debezium list.
//! - A mapper runs on the value *after* its conversion to the Connect
//!   value, on every row image (before and after, keys included): a mask
//!   therefore replaces a NULL too, a hash leaves it NULL.
//! - Masks and hashes apply to the string-like columns only (JDBC types
//!   CHAR/VARCHAR: `text`, `varchar`, `bpchar`, `"char"`, `name`, enums and
//!   domains over them); the `masked` parameter is added to whatever column
//!   matched. A hash is the lowercase hex digest of the salt's bytes then the
//!   value's bytes, cut to the column's length when it has one: v2 hashes
//!   the UTF-8 text, v1 Java's serialization of the `String` object
//!   (`ObjectOutputStream.writeObject`).
//! - Truncation cuts strings (in UTF-16 units, as `String.substring`) and
//!   byte values of columns whose length is unknown or larger than N.
//!
//! The column length and scale are pgjdbc's (`TypeInfoCache.getPrecision`,
//! `getDisplaySize`, `getScale`) as Debezium's pgoutput decoder reads them
//! from the Relation message's type modifier.

use clap::Args;
use md5::Md5;
use regex::Regex;
use sha2::Digest;

use super::types::{builtin_typname, PgType, TypeRegistry};
use crate::event::value::{ConnectSchema, Value};
use crate::options::{ConfigError, Invalid};
use crate::select::compile_list;

/// pgjdbc's "unknown length" (`Integer.MAX_VALUE`).
const UNKNOWN_LENGTH: i32 = i32::MAX;

/// The column mapper flags (Debezium's `column.truncate.*`, `column.mask.*`,
/// `*.propagate.source.type`). Flattened into `run`'s flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Selection and routing")]
pub struct ColumnMapperOptions {
    /// N=COLUMNS (repeatable): cut string and bytes values of the columns
    /// (regexes matching `schema.table.column`) to N characters
    /// (column.truncate.to.N.chars).
    #[arg(long)]
    pub column_truncate_to: Vec<String>,

    /// N=COLUMNS (repeatable): replace values of these string columns with N
    /// `*` (column.mask.with.N.chars).
    #[arg(long)]
    pub column_mask_with: Vec<String>,

    /// ALGORITHM:SALT=COLUMNS (repeatable): replace values of these string
    /// columns with the hex hash of their Java serialization
    /// (column.mask.hash.ALGORITHM.with.salt.SALT). MD5, SHA-224, SHA-256,
    /// SHA-384, SHA-512, SHA-512/224, SHA-512/256.
    #[arg(long)]
    pub column_mask_hash: Vec<String>,

    /// ALGORITHM:SALT=COLUMNS (repeatable): as --column-mask-hash, hashing
    /// the UTF-8 text itself (column.mask.hash.v2.ALGORITHM.with.salt.SALT).
    #[arg(long)]
    pub column_mask_hash_v2: Vec<String>,

    /// Columns (regexes matching `schema.table.column`) whose schemas carry
    /// `__debezium.source.column.type`/`length`/`scale`/`name` parameters
    /// (column.propagate.source.type).
    #[arg(long, env = "PGCDC_COLUMN_PROPAGATE_SOURCE_TYPE")]
    pub column_propagate_source_type: Option<String>,

    /// As --column-propagate-source-type, for columns whose
    /// `schema.table.typname` matches (datatype.propagate.source.type).
    #[arg(long, env = "PGCDC_DATATYPE_PROPAGATE_SOURCE_TYPE")]
    pub datatype_propagate_source_type: Option<String>,
}

/// The digest algorithms Java names and we implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Md5,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha512_224,
    Sha512_256,
}

impl Algorithm {
    /// `MessageDigest.getInstance`'s name, ignoring case as Java does.
    fn from_java(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "MD5" => Algorithm::Md5,
            "SHA-224" | "SHA224" => Algorithm::Sha224,
            "SHA-256" | "SHA256" => Algorithm::Sha256,
            "SHA-384" | "SHA384" => Algorithm::Sha384,
            "SHA-512" | "SHA512" => Algorithm::Sha512,
            "SHA-512/224" | "SHA512/224" => Algorithm::Sha512_224,
            "SHA-512/256" | "SHA512/256" => Algorithm::Sha512_256,
            _ => return None,
        })
    }

    fn digest(self, salt: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<D: Digest>(salt: &[u8], data: &[u8]) -> Vec<u8> {
            let mut d = D::new();
            d.update(salt);
            d.update(data);
            d.finalize().to_vec()
        }
        match self {
            Algorithm::Md5 => run::<Md5>(salt, data),
            Algorithm::Sha224 => run::<sha2::Sha224>(salt, data),
            Algorithm::Sha256 => run::<sha2::Sha256>(salt, data),
            Algorithm::Sha384 => run::<sha2::Sha384>(salt, data),
            Algorithm::Sha512 => run::<sha2::Sha512>(salt, data),
            Algorithm::Sha512_224 => run::<sha2::Sha512_224>(salt, data),
            Algorithm::Sha512_256 => run::<sha2::Sha512_256>(salt, data),
        }
    }
}

/// Whether `name` is a digest algorithm (as Java's `MessageDigest` names
/// it) that the hashing masks support.
pub fn is_supported_algorithm(name: &str) -> bool {
    Algorithm::from_java(name).is_some()
}

/// What one rule does to the columns it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mapper {
    Truncate(usize),
    Mask(String),
    Hash {
        algorithm: Algorithm,
        salt: Vec<u8>,
        v2: bool,
    },
    PropagateSourceType,
}

#[derive(Debug, Clone)]
struct Rule {
    /// Matches `schema.table.typname` instead of `schema.table.column`.
    by_datatype: bool,
    patterns: Vec<Regex>,
    mapper: Mapper,
}

/// Every rule, in the order Debezium tries them.
#[derive(Debug, Clone, Default)]
pub struct ColumnMappers {
    rules: Vec<Rule>,
}

/// A column as Debezium's mappers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceColumn {
    pub name: String,
    /// `pg_type.typname` (`int4`, `_text`, an enum's or domain's name).
    pub type_name: String,
    /// Debezium's `Column.length()` (pgjdbc's `Integer.MAX_VALUE` when unknown).
    pub length: i32,
    pub scale: i32,
    /// JDBC CHAR or VARCHAR: the columns masks and hashes change.
    pub string_like: bool,
}

impl SourceColumn {
    /// The column `name` of type `ty` (OID `oid`, modifier `type_modifier`
    /// from the Relation message).
    pub fn new(
        name: &str,
        oid: u32,
        ty: &PgType,
        type_modifier: i32,
        types: &TypeRegistry,
    ) -> Self {
        let type_name = builtin_typname(oid)
            .or_else(|| types.get(oid).map(|t| t.name().to_owned()))
            .unwrap_or_else(|| oid.to_string());
        let (root, modifier) = match (ty, type_modifier) {
            (
                PgType::Modified {
                    base,
                    type_modifier,
                },
                -1,
            ) => (base.as_ref(), *type_modifier),
            (PgType::Modified { base, .. }, m) => (base.as_ref(), m),
            (ty, m) => (ty, m),
        };
        // As pgjdbc's DatabaseMetaData.getColumns, which Debezium reads:
        // an array is measured as its element, with the column's modifier.
        let measured = match root {
            PgType::Array(element) => match element.as_ref() {
                PgType::Modified { base, .. } => base.as_ref(),
                element => element,
            },
            root => root,
        };
        let length = match precision(measured, modifier) {
            0 => display_size(measured, modifier),
            size => size,
        };
        SourceColumn {
            name: name.to_owned(),
            type_name,
            length,
            scale: scale(measured, modifier),
            string_like: matches!(
                root,
                PgType::Text
                    | PgType::Varchar
                    | PgType::Bpchar
                    | PgType::Char
                    | PgType::Name
                    | PgType::Enum { .. }
            ),
        }
    }
}

/// What the mappers do to one column: its schema is changed once, each of
/// its values by [`ColumnMapping::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMapping {
    mapper: Mapper,
    column: SourceColumn,
}

impl ColumnMappers {
    /// Compiles the rules of `options`, or names every flag value that is wrong.
    pub fn new(options: &ColumnMapperOptions) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut rules = Vec::new();
        let mut add = |flag: &'static str,
                       spec: &str,
                       list: &str,
                       by_datatype: bool,
                       mapper: Result<Mapper, String>,
                       problems: &mut Vec<Invalid>| {
            let patterns = compile_list(flag, list, problems);
            match mapper {
                Ok(mapper) => rules.push(Rule {
                    by_datatype,
                    patterns,
                    mapper,
                }),
                Err(constraint) => problems.push(Invalid {
                    field: flag,
                    value: spec.to_owned(),
                    constraint,
                }),
            }
        };
        for (flag, specs) in [
            ("column-truncate-to", &options.column_truncate_to),
            ("column-mask-with", &options.column_mask_with),
        ] {
            for spec in specs {
                let (n, list) = spec.split_once('=').unwrap_or((spec, ""));
                let mapper = match n.trim().parse::<usize>() {
                    Ok(n) if n > 0 && flag == "column-truncate-to" => Ok(Mapper::Truncate(n)),
                    Ok(n) if flag == "column-mask-with" => Ok(Mapper::Mask("*".repeat(n))),
                    _ => Err(format!(
                        "must be N=COLUMNS, N a {}number of characters and COLUMNS regexes matching schema.table.column",
                        if flag == "column-truncate-to" { "positive " } else { "" }
                    )),
                };
                let mapper = mapper.and_then(|m| match list.trim().is_empty() {
                    true => Err("names no columns: give N=COLUMNS".to_owned()),
                    false => Ok(m),
                });
                add(flag, spec, list, false, mapper, &mut problems);
            }
        }
        for (flag, list, by_datatype) in [
            (
                "column-propagate-source-type",
                &options.column_propagate_source_type,
                false,
            ),
            (
                "datatype-propagate-source-type",
                &options.datatype_propagate_source_type,
                true,
            ),
        ] {
            if let Some(list) = list.as_deref().filter(|l| !l.trim().is_empty()) {
                add(
                    flag,
                    list,
                    list,
                    by_datatype,
                    Ok(Mapper::PropagateSourceType),
                    &mut problems,
                );
            }
        }
        for (flag, specs, v2) in [
            ("column-mask-hash", &options.column_mask_hash, false),
            ("column-mask-hash-v2", &options.column_mask_hash_v2, true),
        ] {
            for spec in specs {
                let (mapper, list) = parse_hash(spec, v2);
                add(flag, spec, list, false, mapper, &mut problems);
            }
        }
        if problems.is_empty() {
            Ok(ColumnMappers { rules })
        } else {
            Err(ConfigError(problems))
        }
    }

    /// Whether no rule is configured.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The mapping of `column` of `schema.table`: the first rule matching it.
    pub fn mapping_for(
        &self,
        schema: &str,
        table: &str,
        column: SourceColumn,
    ) -> Option<ColumnMapping> {
        let by_name = format!("{schema}.{table}.{}", column.name);
        let by_type = format!("{schema}.{table}.{}", column.type_name);
        let rule = self.rules.iter().find(|rule| {
            let name = if rule.by_datatype { &by_type } else { &by_name };
            rule.patterns.iter().any(|p| p.is_match(name))
        })?;
        Some(ColumnMapping {
            mapper: rule.mapper.clone(),
            column,
        })
    }
}

/// `ALGORITHM:SALT=COLUMNS`: the mapper and the column list. The salt ends
/// at the last `=` (a salt may hold `=`, a column regex hardly).
fn parse_hash(spec: &str, v2: bool) -> (Result<Mapper, String>, &str) {
    const FORM: &str = "must be ALGORITHM:SALT=COLUMNS (e.g. SHA-256:pepper=public.users.email)";
    let Some((head, list)) = spec.rsplit_once('=') else {
        return (Err(FORM.to_owned()), "");
    };
    let Some((algorithm, salt)) = head.split_once(':') else {
        return (Err(FORM.to_owned()), list);
    };
    let mapper = match Algorithm::from_java(algorithm.trim()) {
        _ if list.trim().is_empty() => Err(FORM.to_owned()),
        Some(algorithm) => Ok(Mapper::Hash {
            algorithm,
            salt: salt.as_bytes().to_vec(),
            v2,
        }),
        None => Err(format!(
            "hash algorithm {algorithm:?} is not supported: use MD5, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224 or SHA-512/256"
        )),
    };
    (mapper, list)
}

impl ColumnMapping {
    /// Whether Debezium's `TruncateColumn` applies: the length is unknown or
    /// larger than the cut.
    fn truncates(&self, n: usize) -> bool {
        self.column.length < 0 || usize::try_from(self.column.length).is_ok_and(|l| l > n)
    }

    /// Adds the parameters this mapper declares to the column's schema.
    pub fn alter_schema(&self, schema: &mut ConnectSchema) {
        let column = &self.column;
        let mut set = |k: &str, v: String| {
            schema.parameters.insert(k.to_owned(), v);
        };
        match &self.mapper {
            Mapper::Truncate(n) if self.truncates(*n) => set("truncateLength", n.to_string()),
            Mapper::Truncate(_) => {}
            Mapper::Mask(_) | Mapper::Hash { .. } => set("masked", "true".to_owned()),
            Mapper::PropagateSourceType => {
                set(
                    "__debezium.source.column.type",
                    column.type_name.to_uppercase(),
                );
                if column.length != -1 {
                    set("__debezium.source.column.length", column.length.to_string());
                }
                set("__debezium.source.column.scale", column.scale.to_string());
                set("__debezium.source.column.name", column.name.clone());
            }
        }
    }

    /// The value Debezium writes for `value`.
    pub fn apply(&self, value: Value) -> Value {
        match &self.mapper {
            Mapper::Truncate(n) if self.truncates(*n) => match value {
                Value::String(s) => Value::String(java_substring(s, *n)),
                Value::Bytes(mut b) => {
                    b.truncate(*n);
                    Value::Bytes(b)
                }
                other => other,
            },
            Mapper::Mask(mask) if self.column.string_like => Value::String(mask.clone()),
            Mapper::Hash {
                algorithm,
                salt,
                v2,
            } if self.column.string_like => match value {
                Value::String(s) => {
                    let data = if *v2 {
                        s.into_bytes()
                    } else {
                        java_serialized_string(&s)
                    };
                    let hex = to_hex(&algorithm.digest(salt, &data));
                    let cut = usize::try_from(self.column.length).unwrap_or(0);
                    Value::String(if cut > 0 {
                        java_substring(hex, cut)
                    } else {
                        hex
                    })
                }
                Value::Null => Value::Null,
                other => other,
            },
            _ => value,
        }
    }
}

/// The first `n` UTF-16 units of `s`, as Java's `substring(0, n)` when it is
/// longer. A surrogate pair cut in half is dropped whole: Java would keep a
/// lone surrogate, which no UTF-8 encoder writes either.
fn java_substring(s: String, n: usize) -> String {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > n {
            return s[..i].to_owned();
        }
    }
    s
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `new ObjectOutputStream(out).writeObject(s)`: the stream header, then
/// `TC_STRING` with a 2-byte length (or `TC_LONGSTRING` with 8 bytes past
/// 65535) and the string in Java's modified UTF-8.
fn java_serialized_string(s: &str) -> Vec<u8> {
    let mut utf = Vec::with_capacity(s.len());
    for unit in s.encode_utf16() {
        match unit {
            0x0001..=0x007f => utf.push(unit as u8),
            0x0000 | 0x0080..=0x07ff => {
                utf.push(0xc0 | (unit >> 6) as u8);
                utf.push(0x80 | (unit & 0x3f) as u8);
            }
            _ => {
                utf.push(0xe0 | (unit >> 12) as u8);
                utf.push(0x80 | ((unit >> 6) & 0x3f) as u8);
                utf.push(0x80 | (unit & 0x3f) as u8);
            }
        }
    }
    let mut out = vec![0xac, 0xed, 0x00, 0x05];
    match u16::try_from(utf.len()) {
        Ok(len) => {
            out.push(0x74);
            out.extend_from_slice(&len.to_be_bytes());
        }
        Err(_) => {
            out.push(0x7c);
            out.extend_from_slice(&(utf.len() as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&utf);
    out
}

/// Fractional-second characters pgjdbc counts for a time modifier.
fn second_size(type_modifier: i32) -> i32 {
    match type_modifier {
        -1 => 7,
        0 => 0,
        1 => 3,
        m => m + 1,
    }
}

/// pgjdbc's `TypeInfoCache.getPrecision`.
fn precision(ty: &PgType, m: i32) -> i32 {
    match ty {
        PgType::Int2 => 5,
        PgType::Int4 | PgType::Oid => 10,
        PgType::Int8 => 19,
        PgType::Float4 => 8,
        PgType::Float8 => 17,
        PgType::Numeric if m == -1 => 0,
        PgType::Numeric => ((m - 4) >> 16) & 0xffff,
        PgType::Char | PgType::Bool => 1,
        PgType::Bpchar | PgType::Varchar if m == -1 => UNKNOWN_LENGTH,
        PgType::Bpchar | PgType::Varchar => m - 4,
        PgType::Date
        | PgType::Time
        | PgType::Timetz
        | PgType::Interval
        | PgType::Timestamp
        | PgType::Timestamptz => display_size(ty, m),
        PgType::Bit => m,
        PgType::Varbit if m == -1 => UNKNOWN_LENGTH,
        PgType::Varbit => m,
        _ => UNKNOWN_LENGTH,
    }
}

/// pgjdbc's `TypeInfoCache.getDisplaySize`.
fn display_size(ty: &PgType, m: i32) -> i32 {
    match ty {
        PgType::Int2 => 6,
        PgType::Int4 => 11,
        PgType::Oid => 10,
        PgType::Int8 => 20,
        PgType::Float4 => 15,
        PgType::Float8 => 25,
        PgType::Char | PgType::Bool => 1,
        PgType::Date => 13,
        PgType::Time => 8 + second_size(m),
        PgType::Timetz => 8 + second_size(m) + 6,
        PgType::Timestamp => 13 + 1 + 8 + second_size(m),
        PgType::Timestamptz => 13 + 1 + 8 + second_size(m) + 6,
        PgType::Interval => 49,
        PgType::Bpchar | PgType::Varchar if m == -1 => UNKNOWN_LENGTH,
        PgType::Bpchar | PgType::Varchar => m - 4,
        PgType::Numeric if m == -1 => 131_089,
        PgType::Numeric => {
            let precision = ((m - 4) >> 16) & 0xffff;
            let scale = (m - 4) & 0xffff;
            1 + precision + i32::from(scale != 0)
        }
        PgType::Bit => m,
        PgType::Varbit if m == -1 => UNKNOWN_LENGTH,
        PgType::Varbit => m,
        _ => UNKNOWN_LENGTH,
    }
}

/// pgjdbc's `TypeInfoCache.getScale`.
fn scale(ty: &PgType, m: i32) -> i32 {
    match ty {
        PgType::Float4 => 8,
        PgType::Float8 => 17,
        PgType::Numeric if m == -1 => 0,
        PgType::Numeric => (m - 4) & 0xffff,
        PgType::Time | PgType::Timetz | PgType::Timestamp | PgType::Timestamptz if m == -1 => 6,
        PgType::Time | PgType::Timetz | PgType::Timestamp | PgType::Timestamptz => m,
        PgType::Interval if m == -1 => 6,
        PgType::Interval => m & 0xffff,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
