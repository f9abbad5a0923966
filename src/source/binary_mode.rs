//! The start-time gate of `--pgoutput-binary`.
//!
//! With pgoutput's `binary 'true'` the server sends every column whose type
//! has a send function in that binary form (`logicalrep_write_tuple` in
//! PostgreSQL's `proto.c`): one connection cannot take some columns as text
//! and others as binary. So binary mode is all or nothing for a publication,
//! and this check, run before `START_REPLICATION`, refuses it while any
//! published column's type lacks a binary decoder
//! ([`supports_binary`](crate::source::types::supports_binary)), naming every
//! such column. A column added after the start is caught by the value
//! decoder instead, with the same advice.

use tokio_postgres::Client;

use crate::source::setup::SetupError;
use crate::source::types::{supports_binary, TypeRegistry};

/// Every column of the tables publication `publication` carries, with its
/// type OID and modifier, in table and column order. Columns outside a
/// column list (15+) are included: stricter than needed, never looser.
const PUBLISHED_COLUMNS: &str = "\
    SELECT p.schemaname::text, p.tablename::text, a.attname::text, a.atttypid, a.atttypmod \
    FROM pg_publication_tables p \
    JOIN pg_namespace n ON n.nspname = p.schemaname \
    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
    WHERE p.pubname = $1 \
    ORDER BY 1, 2, a.attnum";

/// Refuses binary mode when a column of `publication` has a type without a
/// binary decoder; `types` resolves user-defined types.
pub async fn require_binary_decodable(
    client: &Client,
    publication: &str,
    types: &TypeRegistry,
) -> Result<(), SetupError> {
    let rows = client
        .query(PUBLISHED_COLUMNS, &[&publication])
        .await
        .map_err(|error| SetupError::Query {
            action: format!("reading the column types of publication {publication:?}"),
            error,
        })?;
    let unsupported: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let (oid, type_modifier): (u32, i32) = (row.get(3), row.get(4));
            let ty = types.resolve(oid, type_modifier);
            (!supports_binary(&ty)).then(|| {
                let (schema, table, column): (&str, &str, &str) =
                    (row.get(0), row.get(1), row.get(2));
                format!("{schema}.{table}.{column} ({})", ty.display(type_modifier))
            })
        })
        .collect();
    if unsupported.is_empty() {
        return Ok(());
    }
    Err(SetupError::BinaryUnsupportedColumns {
        publication: publication.to_owned(),
        columns: unsupported.join(", "),
    })
}
