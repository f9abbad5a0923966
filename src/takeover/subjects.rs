//! The takeover's dry run of the schemas (`--format avro`): before the
//! first record, every `<topic>-key` / `<topic>-value` subject that Debezium
//! left in the registry is asked whether the schema pgcdc-kafka would
//! register next is accepted under the subject's compatibility level
//! (nothing is registered). A refusal stops the run before anything is
//! sent, naming the subject, its level and the settings that fix it; `check`
//! runs the same and reports it.
//!
//! The schemas are those the Avro encoder registers for each published
//! table, derived from the catalog as pgoutput's Relation message would
//! describe the table (the snapshot's [`relation_from_catalog`]).

use std::sync::Arc;

use tokio_postgres::Client;

use super::TakeoverError;
use crate::config::{RunConfig, SubjectNameStrategy};
use crate::encode::avro::schema::avro_schema;
use crate::encode::options::Format;
use crate::encode::registry::{Compatibility, SchemaRegistry};
use crate::encode::RecordPart;
use crate::event::value::{ConnectSchema, ConnectType};
use crate::pipeline::PipelineError;
use crate::source::relation::RelationCache;
use crate::source::setup;
use crate::source::snapshot::relation_from_catalog;
use crate::transform::EnvelopeMode;

/// What the fix of a refused subject is, for the error.
pub const FIX: &str = "--debezium-compat all writes Debezium's own schemas (see docs/CONFIGURATION.md for the single behaviours), or set the subject's compatibility to one the change meets (PUT /config/<subject>, e.g. BACKWARD)";

/// One subject that exists in the registry, and what it says of the schema.
#[derive(Debug, Clone)]
pub struct Checked {
    pub subject: String,
    pub verdict: Compatibility,
}

/// The dry run: every existing subject of the published tables' topics,
/// with the registry's verdict. Empty without `--format avro`; with a
/// transform (`--envelope unwrap`, `--outbox-table`) whose schemas are not
/// the tables', only a log line says it was not run.
pub async fn dry_run(config: &RunConfig, sql: &Client) -> Result<Vec<Checked>, PipelineError> {
    if config.encode.format != Format::Avro {
        return Ok(Vec::new());
    }
    if config.transform.envelope != EnvelopeMode::Debezium
        || !config.transform.outbox_tables.is_empty()
    {
        tracing::info!("the schema dry run covers Debezium's envelope only; a transform's schemas are checked by the registry as they are registered");
        return Ok(Vec::new());
    }
    let Some(url) = config.encode.schema_registry_url.as_deref() else {
        return Ok(Vec::new());
    };
    let registry_error = |source| TakeoverError::Registry { source };
    let registry = SchemaRegistry::new(
        url,
        config.encode.schema_registry_auth(),
        config.encode.schema_registry_ca.as_deref(),
    )
    .await
    .map_err(registry_error)?;
    let (selection, router) = config.selection()?;
    let types = setup::load_types(sql).await?;
    let mut relations = RelationCache::new(&config.topic_prefix, config.value_options(), types)
        .with_selection(Arc::new(selection), Arc::new(router))
        .with_mappers(Arc::new(config.column_mappers()?))
        .with_schema_names(config.schema_name_adjustment_mode);
    let renames = config.topic_renames()?;
    let by_record = config.encode.subject_name_strategy == SubjectNameStrategy::Record;
    let mut checked = Vec::new();
    for oid in published_tables(sql, &config.publication_name).await? {
        let relation = relation_from_catalog(sql, oid, &config.publication_name).await?;
        if !relations.admits(&relation) {
            continue;
        }
        let catalog = setup::catalog_columns(sql, oid).await?;
        let table = relations.update(&relation, &catalog)?;
        let topic = renames.apply(Arc::clone(&table.topic));
        let parts = [
            (RecordPart::Value, Some(&table.envelope_schema)),
            (RecordPart::Key, table.key_schema.as_ref()),
        ];
        for (part, connect) in parts {
            let Some(connect) = connect else { continue };
            let subject = subject(by_record, &topic, part, connect);
            let avro = avro_schema(connect, config.encode.avro_logical_types).map_err(|e| {
                TakeoverError::Schema {
                    subject: subject.clone(),
                    reason: e.to_string(),
                }
            })?;
            let verdict = registry
                .compatibility(&subject, &avro.json)
                .await
                .map_err(registry_error)?;
            if verdict != Compatibility::NoSubject {
                checked.push(Checked { subject, verdict });
            }
        }
    }
    Ok(checked)
}

/// Runs [`dry_run`] and stops at the first refusal, naming every refused
/// subject.
pub async fn require_accepted(config: &RunConfig, sql: &Client) -> Result<(), PipelineError> {
    let checked = dry_run(config, sql).await?;
    let refused: Vec<String> = checked.iter().filter_map(refusal).collect();
    if !refused.is_empty() {
        return Err(TakeoverError::Incompatible {
            refused: refused.join("; "),
        }
        .into());
    }
    if !checked.is_empty() {
        tracing::info!(
            subjects = checked.len(),
            "the registry accepts the schemas for every existing subject"
        );
    }
    Ok(())
}

/// `subject (compatibility LEVEL): reasons` for a refused subject.
pub fn refusal(checked: &Checked) -> Option<String> {
    let Compatibility::Incompatible { level, reasons } = &checked.verdict else {
        return None;
    };
    let mut text = format!("subject {:?} (compatibility {level})", checked.subject);
    if !reasons.is_empty() {
        let shown: Vec<&str> = reasons.iter().take(3).map(String::as_str).collect();
        text.push_str(": ");
        text.push_str(&shown.join(", "));
    }
    Some(text)
}

/// The subject a schema is registered under, as the encoder names it.
fn subject(by_record: bool, topic: &str, part: RecordPart, connect: &ConnectSchema) -> String {
    let record = connect
        .name
        .as_deref()
        .filter(|_| connect.kind == ConnectType::Struct);
    crate::naming::subject(by_record, topic, part, record)
}

/// The publication's tables, by oid.
async fn published_tables(sql: &Client, publication: &str) -> Result<Vec<u32>, PipelineError> {
    let rows = sql
        .query(
            "SELECT c.oid FROM pg_publication_tables p \
             JOIN pg_namespace n ON n.nspname = p.schemaname \
             JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
             WHERE p.pubname = $1 ORDER BY c.oid",
            &[&publication],
        )
        .await
        .map_err(|error| setup::SetupError::Query {
            action: "listing the publication's tables".to_owned(),
            error,
        })?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
