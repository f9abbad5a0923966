//! The types Postgres defines at run time (enums, domains, their arrays,
//! extension types such as `hstore`), loaded once per connection with
//! [`CATALOG_QUERY`], and [`TypeRegistry`], which resolves any column's OID
//! to a [`PgType`].

use std::collections::HashMap;

use super::PgType;

/// A non-built-in type, as loaded by [`CATALOG_QUERY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserType {
    /// An enum and its labels in sort order.
    Enum { name: String, labels: Vec<String> },
    /// A domain over `base_oid` with the domain's `typtypmod` (-1 for none).
    Domain {
        name: String,
        base_oid: u32,
        base_type_modifier: i32,
    },
    /// An array of `element_oid`.
    Array { name: String, element_oid: u32 },
    /// Anything else (extension base types such as `hstore`, composites, ranges), by name.
    Other { name: String },
}

impl UserType {
    /// The type's `pg_type.typname`.
    pub fn name(&self) -> &str {
        match self {
            UserType::Enum { name, .. }
            | UserType::Domain { name, .. }
            | UserType::Array { name, .. }
            | UserType::Other { name } => name,
        }
    }
}

/// Loads every type with an OID at or above `FirstNormalObjectId` (16384), i.e. every type
/// that is not built in: enums with their labels (a JSON array in sort order), domains
/// with their base type and modifier, arrays with their element, and other types by name.
/// All columns are text; feed each row to [`TypeRegistry::add_catalog_row`] in order.
/// Run it at startup and again when a relation references an OID that
/// [`TypeRegistry::is_known`] does not know.
pub const CATALOG_QUERY: &str = "\
SELECT t.oid::text AS oid,
       n.nspname::text AS namespace,
       t.typname::text AS name,
       CASE WHEN t.typtype = 'e' THEN 'enum'
            WHEN t.typtype = 'd' THEN 'domain'
            WHEN t.typcategory = 'A' AND t.typelem <> 0 THEN 'array'
            ELSE 'other' END AS kind,
       t.typbasetype::text AS base_oid,
       t.typtypmod::text AS base_type_modifier,
       t.typelem::text AS element_oid,
       (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder)::text
          FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) AS enum_labels
  FROM pg_catalog.pg_type t
  JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
 WHERE t.oid >= 16384
 ORDER BY t.oid";

/// One row of [`CATALOG_QUERY`], column by column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogRow<'a> {
    pub oid: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// `enum`, `domain`, `array` or `other`.
    pub kind: &'a str,
    pub base_oid: &'a str,
    pub base_type_modifier: &'a str,
    pub element_oid: &'a str,
    /// A JSON array of labels; NULL for non-enums.
    pub enum_labels: Option<&'a str>,
}

/// A [`CatalogRow`] that did not come from [`CATALOG_QUERY`] as expected.
#[derive(Debug, thiserror::Error)]
#[error("type catalog row for oid {oid:?} has an invalid {field} {value:?}; load types with CATALOG_QUERY unchanged")]
pub struct CatalogError {
    pub oid: String,
    pub field: &'static str,
    pub value: String,
}

/// User-defined types by OID; built-in types need no entry.
#[derive(Debug, Clone, Default)]
pub struct TypeRegistry {
    types: HashMap<u32, UserType>,
}

/// Resolution depth past which a catalog is taken to be cyclic.
const MAX_RESOLVE_DEPTH: u32 = 16;

impl TypeRegistry {
    /// An empty registry, which resolves built-in types only.
    pub fn new() -> Self {
        TypeRegistry::default()
    }

    /// Adds or replaces a user type, returning the one it replaced.
    pub fn insert(&mut self, oid: u32, ty: UserType) -> Option<UserType> {
        self.types.insert(oid, ty)
    }

    /// The user type with this OID.
    pub fn get(&self, oid: u32) -> Option<&UserType> {
        self.types.get(&oid)
    }

    /// Whether `oid` is built in or registered; if not, reload the catalog.
    pub fn is_known(&self, oid: u32) -> bool {
        PgType::from_builtin_oid(oid).is_some() || self.types.contains_key(&oid)
    }

    /// Parses one row of [`CATALOG_QUERY`] and registers the type.
    pub fn add_catalog_row(&mut self, row: &CatalogRow<'_>) -> Result<(), CatalogError> {
        let invalid = |field: &'static str, value: &str| CatalogError {
            oid: row.oid.to_owned(),
            field,
            value: value.to_owned(),
        };
        let oid: u32 = row.oid.parse().map_err(|_| invalid("oid", row.oid))?;
        let name = row.name.to_owned();
        let ty = match row.kind {
            "enum" => {
                let text = row.enum_labels.unwrap_or("[]");
                let labels =
                    serde_json::from_str(text).map_err(|_| invalid("enum_labels", text))?;
                UserType::Enum { name, labels }
            }
            "domain" => UserType::Domain {
                name,
                base_oid: row
                    .base_oid
                    .parse()
                    .map_err(|_| invalid("base_oid", row.base_oid))?,
                base_type_modifier: row
                    .base_type_modifier
                    .parse()
                    .map_err(|_| invalid("base_type_modifier", row.base_type_modifier))?,
            },
            "array" => UserType::Array {
                name,
                element_oid: row
                    .element_oid
                    .parse()
                    .map_err(|_| invalid("element_oid", row.element_oid))?,
            },
            "other" => UserType::Other { name },
            kind => return Err(invalid("kind", kind)),
        };
        self.insert(oid, ty);
        Ok(())
    }

    /// The type of a column from its Relation message (`atttypid`, `atttypmod`). Domains
    /// resolve to their base, arrays of domains and enums to arrays of the resolved
    /// element; an OID that is neither built in nor registered (or a cyclic catalog) is
    /// `Unknown`. Resolution depends on the OID alone: the column's modifier is applied
    /// by [`column_schema`](super::column_schema) and [`decode_text`](super::decode_text), and a domain's own modifier travels in
    /// [`PgType::Modified`] (a domain-typed column has none, its atttypmod is -1).
    pub fn resolve(&self, type_oid: u32, _type_modifier: i32) -> PgType {
        self.resolve_at(type_oid, 0)
    }

    fn resolve_at(&self, oid: u32, depth: u32) -> PgType {
        if let Some(ty) = PgType::from_builtin_oid(oid) {
            return ty;
        }
        if depth > MAX_RESOLVE_DEPTH {
            return PgType::Unknown { oid };
        }
        match self.types.get(&oid) {
            Some(UserType::Enum { name, labels }) => PgType::Enum {
                name: name.clone(),
                labels: labels.clone(),
            },
            Some(UserType::Domain {
                base_oid,
                base_type_modifier,
                ..
            }) => match (self.resolve_at(*base_oid, depth + 1), *base_type_modifier) {
                (PgType::Unknown { .. }, _) => PgType::Unknown { oid },
                (base, m) if m >= 0 => PgType::Modified {
                    base: Box::new(base),
                    type_modifier: m,
                },
                (base, _) => base,
            },
            Some(UserType::Array { element_oid, .. }) => {
                PgType::Array(Box::new(self.resolve_at(*element_oid, depth + 1)))
            }
            Some(UserType::Other { name }) => match name.as_str() {
                "hstore" => PgType::Hstore,
                "citext" => PgType::Citext,
                "ltree" => PgType::Ltree,
                _ => PgType::Unknown { oid },
            },
            None => PgType::Unknown { oid },
        }
    }
}
