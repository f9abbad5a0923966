//! A publication the connector checks but does not manage: one that must
//! exist (`--publication-autocreate-mode disabled`, or an existing one the
//! selection narrows), and every publication under `--read-only`.
//!
//! `--read-only` promises no writes to the source, and CREATE or ALTER
//! PUBLICATION is DDL: a read-only run never creates nor alters the
//! publication, whatever the role could do. A missing one, or one that
//! lacks a selected table, stops the run at start with the statement an
//! admin runs, and `check --read-only` reports the same
//! ([`missing_publication`]). The replication slot is created as always:
//! over the replication connection, which REPLICATION allows and which
//! writes no table; Debezium's `read.only` creates its slot too.

use tokio_postgres::Client;

use super::{qualified, query_error, quote_ident, selected_tables, SetupError};
use crate::select::Selection;
use crate::source::options::PublicationOptions;

/// The error for a missing `publication` under `--read-only`, with the
/// statement an admin runs: FOR TABLE the tables the selection matches
/// (every table of the database without one), with `options`' WITH clause.
pub async fn missing_publication(
    client: &Client,
    publication: &str,
    options: &PublicationOptions,
    selection: &Selection,
) -> Result<SetupError, SetupError> {
    let tables = selected_tables(client, selection, options.publish_via_partition_root).await?;
    let list = match tables.is_empty() {
        true => "schema.table, ...".to_owned(),
        false => tables.join(", "),
    };
    Ok(SetupError::ReadOnlyPublicationMissing {
        publication: publication.to_owned(),
        statement: format!(
            "CREATE PUBLICATION {} FOR TABLE {list}{};",
            quote_ident(publication),
            options.with_clause()
        ),
    })
}

/// An existing publication that the connector does not manage must carry
/// every table the selection matches, and the selection must match one:
/// otherwise the slot would stream nothing of them, silently, while it
/// holds WAL back.
pub async fn check_published(
    client: &Client,
    publication: &str,
    selection: &Selection,
    all_tables: bool,
    via_root: bool,
) -> Result<(), SetupError> {
    let selected = selected_tables(client, selection, via_root).await?;
    if selected.is_empty() {
        return Err(SetupError::SelectsNothing);
    }
    if all_tables {
        return Ok(());
    }
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(query_error(format!(
            "listing the tables of publication {publication:?}"
        )))?;
    let published: std::collections::BTreeSet<String> =
        rows.iter().map(|r| qualified(r.get(0), r.get(1))).collect();
    let missing: Vec<String> = selected
        .into_iter()
        .filter(|t| !published.contains(t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(", ");
    Err(SetupError::NotPublished {
        publication: publication.to_owned(),
        statement: format!(
            "ALTER PUBLICATION {} ADD TABLE {list};",
            quote_ident(publication)
        ),
        them: if missing.len() == 1 { "it" } else { "them" },
        tables: list,
    })
}
