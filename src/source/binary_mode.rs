//! `--pgoutput-binary auto|on|off`: whether pgoutput sends column values
//! in their types' binary send format, decided before `START_REPLICATION`.
//!
//! With pgoutput's `binary 'true'` the server sends every column whose type
//! has a send function in that binary form (`logicalrep_write_tuple` in
//! PostgreSQL's `proto.c`): one connection cannot take some columns as text
//! and others as binary. So binary mode is all or nothing for a publication:
//! [`choose`] reads the types of every published column and asks for binary
//! only when each has a binary decoder
//! ([`supports_binary`](crate::source::types::supports_binary)). `on`
//! refuses to start otherwise, naming every such column; `auto` (the
//! default) falls back to text with an INFO line naming them. Binary costs
//! the walsender and the connector less per change (BENCHMARKS.md) and gives
//! the same records (`tests/pgoutput_binary.rs`).
//!
//! A column added after the start is caught by the value decoder instead:
//! under `on` it stops the run with the same advice; under `auto` the
//! attempt ends with a retryable `PipelineError::BinaryFallback` and the
//! next one, choosing again, reads text.

use tokio_postgres::Client;

use crate::source::replication::PgoutputBinary;
use crate::source::setup::SetupError;
use crate::source::types::{supports_binary, TypeRegistry};

/// Every column of the tables publication `publication` carries, with its
/// type OID, modifier and name, in table and column order. Columns outside a
/// column list (15+) are included: stricter than needed, never looser.
const PUBLISHED_COLUMNS: &str = "\
    SELECT p.schemaname::text, p.tablename::text, a.attname::text, a.atttypid, a.atttypmod, \
           format_type(a.atttypid, a.atttypmod) \
    FROM pg_publication_tables p \
    JOIN pg_namespace n ON n.nspname = p.schemaname \
    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
    WHERE p.pubname = $1 \
    ORDER BY 1, 2, a.attnum";

/// Whether this run reads values in binary, per `mode`, for `publication`;
/// `types` resolves user-defined types. `signals` says incremental
/// snapshots may run (a signal table, or `--read-only`: their windows read
/// streamed keys as text, so `auto` keeps text; `on` is refused with them at
/// validation).
pub async fn choose(
    mode: PgoutputBinary,
    client: &Client,
    publication: &str,
    types: &TypeRegistry,
    signals: bool,
) -> Result<bool, SetupError> {
    match mode {
        PgoutputBinary::Off => Ok(false),
        PgoutputBinary::Auto if signals => {
            tracing::info!(
                publication,
                "reading values in text form: binary values cannot be combined with \
                 --signal-data-collection or --read-only yet"
            );
            Ok(false)
        }
        PgoutputBinary::Auto => {
            let unsupported = unsupported_columns(client, publication, types).await?;
            if unsupported.is_empty() {
                tracing::info!(publication, "reading values in binary form");
                return Ok(true);
            }
            tracing::info!(
                publication,
                columns = %unsupported.join(", "),
                "reading values in text form: these columns have types without a binary \
                 decoder (leave them out of the publication to read binary values)"
            );
            Ok(false)
        }
        PgoutputBinary::On => {
            let unsupported = unsupported_columns(client, publication, types).await?;
            if unsupported.is_empty() {
                return Ok(true);
            }
            Err(SetupError::BinaryUnsupportedColumns {
                publication: publication.to_owned(),
                columns: unsupported.join(", "),
            })
        }
    }
}

/// The published columns whose types have no binary decoder, as
/// `schema.table.column (type)`.
async fn unsupported_columns(
    client: &Client,
    publication: &str,
    types: &TypeRegistry,
) -> Result<Vec<String>, SetupError> {
    let rows = client
        .query(PUBLISHED_COLUMNS, &[&publication])
        .await
        .map_err(|error| SetupError::Query {
            action: format!("reading the column types of publication {publication:?}"),
            error,
        })?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let (oid, type_modifier): (u32, i32) = (row.get(3), row.get(4));
            let ty = types.resolve(oid, type_modifier);
            (!supports_binary(&ty)).then(|| {
                let (schema, table, column, type_name): (&str, &str, &str, &str) =
                    (row.get(0), row.get(1), row.get(2), row.get(5));
                format!("{schema}.{table}.{column} ({type_name})")
            })
        })
        .collect())
}
