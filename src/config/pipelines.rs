//! Several pipelines in one `--config` file: each `[pipelines.<name>]`
//! table is one pipeline (its own PostgreSQL URL, slot, publication, topic
//! prefix, tables, format and options), layered over the file's top-level
//! keys, which every pipeline shares (Kafka, the registry, defaults).
//!
//! ```toml
//! bootstrap_servers = "kafka:9092"      # shared by every pipeline
//! [kafka]
//! "linger.ms" = 10                      # shared librdkafka properties
//!
//! [pipelines.orders]
//! pg_url = "postgres://cdc@db1/shop"
//! slot = "orders"
//! topic_prefix = "shop"
//!
//! [pipelines.billing]
//! pg_url = "postgres://cdc@db2/billing"
//! slot = "billing"
//! topic_prefix = "billing"
//! [pipelines.billing.kafka]
//! "linger.ms" = 50                      # this pipeline's override
//! ```
//!
//! A pipeline's table is above every other layer, flags and environment
//! included: it is the one place that tells the pipelines apart, so a
//! `PGCDC_SLOT` in the environment cannot make two pipelines share a slot.
//! `[kafka]` and `[topic_config]` merge per property, the pipeline's last.
//!
//! A file without a `pipelines` table is one pipeline, named
//! [`DEFAULT_PIPELINE`], exactly as before pipelines existed.
//!
//! Invariants checked before anything connects ([`distinct`]): names are
//! safe as a metric label and inside slot and transactional ids; no two
//! pipelines share a slot (on one server), a topic prefix on one database,
//! or a connector name (it keys the transactional id and the progress
//! record, so two would fence each other).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use clap::{ArgMatches, Command};
use toml::Value;

use super::file;
use super::layers::{self, Resolved};
use super::setting::{self, ArgIndex, Origin, Problem, CONFIG_ID};
use super::RunConfig;

/// The file's key of the pipelines' tables.
pub const PIPELINES_KEY: &str = "pipelines";

/// The name of the one pipeline of a configuration that declares none.
pub const DEFAULT_PIPELINE: &str = "default";

/// Longest pipeline name: it is part of metric labels, log lines and,
/// in derived names, of identifiers PostgreSQL caps at 63 bytes.
const MAX_NAME_LEN: usize = 48;

/// Settings of the process rather than of one pipeline: a pipeline's table
/// may not set them.
const PROCESS_KEYS: &[&str] = super::fleet::INSTANCE_KEYS;

/// A pipeline's name: lowercase letters, digits and '_', starting with a
/// letter, at most 48 characters; safe as a Prometheus label value, in a
/// replication slot name and in a Kafka transactional id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct PipelineName(String);

impl PipelineName {
    /// The name of a configuration without pipelines.
    pub fn single() -> Self {
        PipelineName(DEFAULT_PIPELINE.to_owned())
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PipelineName {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        let mut chars = name.chars();
        let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if starts_with_letter && rest_ok && name.len() <= MAX_NAME_LEN {
            Ok(PipelineName(name.to_owned()))
        } else {
            Err(format!(
                "is not a valid pipeline name: use 1-{MAX_NAME_LEN} lowercase letters, digits \
                 or '_', starting with a letter (it becomes a metric label and part of \
                 slot and transactional ids), e.g. [pipelines.orders_eu]"
            ))
        }
    }
}

impl fmt::Display for PipelineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The pipelines a `--config` file declares, each resolved through the
/// layers, and the problems of the `pipelines` table itself.
#[derive(Debug, Default)]
pub struct Declared {
    /// In the file's order (TOML tables keep it sorted by name).
    pub each: Vec<(PipelineName, Resolved)>,
    /// Bad names, a `pipelines` that is not a table of tables, process keys.
    pub problems: Vec<Problem>,
}

/// The pipelines declared by the `--config` file that `matches` (from
/// [`layers::relax`]`(cmd)`) names, each layered like [`layers::resolve`]
/// with its table on top; `None` when there is no file, it cannot be read,
/// or it has no `pipelines` table (then it is one pipeline, and the shared
/// layers report any problem with the file). `run` is `run`'s command for
/// a command that shares `run`'s file (see [`layers::resolve_shared`]).
pub fn declared(cmd: &Command, matches: &ArgMatches, run: Option<&Command>) -> Option<Declared> {
    let path = matches
        .try_get_raw(CONFIG_ID)
        .ok()
        .flatten()
        .and_then(|mut v| v.next())
        .map(PathBuf::from)?;
    let text = setting::read_file(&path, "--config").ok()?;
    let mut table: toml::Table = text.parse().ok()?;
    let pipelines = table.remove(PIPELINES_KEY)?;
    let index = ArgIndex::new(cmd);
    let shared = run.map(ArgIndex::new);
    let mut declared = Declared::default();
    let problem = |field: String, message: String| Problem {
        field,
        value: None,
        message,
        origin: Some(Origin::File(path.clone())),
    };
    let Value::Table(pipelines) = pipelines else {
        declared.problems.push(problem(
            PIPELINES_KEY.to_owned(),
            "expects one table per pipeline, e.g. [pipelines.orders] with its pg_url, \
             slot and topic_prefix"
                .to_owned(),
        ));
        return Some(declared);
    };
    if pipelines.is_empty() {
        declared.problems.push(problem(
            PIPELINES_KEY.to_owned(),
            "declares no pipeline; add a [pipelines.<name>] table, or remove the empty \
             [pipelines] table to run the top-level settings as one pipeline"
                .to_owned(),
        ));
    }
    for (name, body) in &pipelines {
        let field = format!("{PIPELINES_KEY}.{name}");
        let parsed: Result<PipelineName, String> = name.parse();
        let name = match parsed {
            Ok(name) => name,
            Err(message) => {
                declared.problems.push(problem(field, message));
                continue;
            }
        };
        let Value::Table(body) = body else {
            declared.problems.push(problem(
                field,
                "expects a table of this pipeline's settings ([pipelines.<name>] with \
                 key = value lines)"
                    .to_owned(),
            ));
            continue;
        };
        for key in PROCESS_KEYS.iter().filter(|k| body.contains_key(**k)) {
            declared.problems.push(problem(
                format!("{field}.{key}"),
                "is a setting of the process, shared by every pipeline; set it at the top \
                 of the file (or as a flag)"
                    .to_owned(),
            ));
        }
        let origin = Origin::Pipeline {
            path: path.clone(),
            name: name.to_string(),
        };
        let own = body
            .iter()
            .filter(|(k, _)| !PROCESS_KEYS.contains(&k.as_str()));
        let (settings, problems) = file::parse_table(own, &origin, &index, shared.as_ref());
        declared.problems.extend(problems);
        let resolved = layers::resolve_pipeline(cmd, matches, run, &settings);
        declared.each.push((name, resolved));
    }
    Some(declared)
}

/// Every pipeline's problems as one list: a problem every pipeline has
/// (a shared setting) once, as is; one that only some have, once per
/// pipeline, named with it unless its origin already names it.
pub fn merge_problems(per_pipeline: &[(PipelineName, Vec<Problem>)]) -> Vec<Problem> {
    let mut merged: Vec<Problem> = Vec::new();
    for (name, problems) in per_pipeline {
        for p in problems {
            let everywhere = per_pipeline.iter().all(|(_, ps)| ps.contains(p));
            let p = if everywhere || matches!(p.origin, Some(Origin::Pipeline { .. })) {
                p.clone()
            } else {
                Problem {
                    field: format!("{PIPELINES_KEY}.{name}: {}", p.field),
                    ..p.clone()
                }
            };
            if !merged.contains(&p) {
                merged.push(p);
            }
        }
    }
    merged
}

/// What no two pipelines of one process may share, as problems naming
/// both: a slot (slots are per server), a topic prefix on one database
/// (both would write the same topics from the same tables), a connector
/// name (the transactional id and the progress record's key).
pub fn distinct<'a>(
    pipelines: impl IntoIterator<Item = (&'a PipelineName, &'a RunConfig)>,
) -> Vec<Problem> {
    let mut slots: BTreeMap<(String, u16, String), &PipelineName> = BTreeMap::new();
    let mut prefixes: BTreeMap<(String, u16, String, String), &PipelineName> = BTreeMap::new();
    let mut connectors: BTreeMap<String, &PipelineName> = BTreeMap::new();
    let mut problems = Vec::new();
    let clash = |field: &str, name: &PipelineName, other: &PipelineName, message: String| Problem {
        field: format!("{PIPELINES_KEY}.{name}.{field}"),
        value: None,
        message: format!(
            "{message} as pipeline {:?} does; {}",
            other.as_str(),
            hint(field)
        ),
        origin: None,
    };
    for (name, config) in pipelines {
        let pg = &config.pg_url;
        let server = (pg.host(), pg.port());
        let slot = (server.0.clone(), server.1, config.slot_name.clone());
        if let Some(other) = slots.insert(slot, name) {
            problems.push(clash(
                "slot",
                name,
                other,
                format!(
                    "uses replication slot {:?} on {}:{}",
                    config.slot_name, server.0, server.1
                ),
            ));
        }
        let prefix = (
            server.0.clone(),
            server.1,
            pg.dbname(),
            config.topic_prefix.clone(),
        );
        if let Some(other) = prefixes.insert(prefix, name) {
            problems.push(clash(
                "topic_prefix",
                name,
                other,
                format!(
                    "streams database {:?} on {}:{} to topic prefix {:?}",
                    pg.dbname(),
                    server.0,
                    server.1,
                    config.topic_prefix
                ),
            ));
        }
        if let Some(other) = connectors.insert(config.names().connector_name(), name) {
            problems.push(clash(
                "connector_name",
                name,
                other,
                format!(
                    "has connector name {:?} (by default the topic prefix)",
                    config.names().connector_name()
                ),
            ));
        }
    }
    problems
}

/// What to do about a setting two pipelines share.
fn hint(field: &str) -> &'static str {
    match field {
        "slot" => "give each pipeline its own slot (one slot has one reader)",
        "topic_prefix" => {
            "give each pipeline its own topic_prefix, or merge them into one pipeline with \
             both tables"
        }
        _ => {
            "set connector_name in one of them (it names the transactional id and keys \
             the progress record)"
        }
    }
}

/// One pipeline of a loaded configuration.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub name: PipelineName,
    pub config: RunConfig,
    pub origins: super::Origins,
}

/// [`RunConfig::load`] for a `--config` file that may declare several
/// pipelines: each resolved, parsed and validated, then checked against
/// the others ([`distinct`]); every problem of every pipeline at once. A
/// configuration without pipelines is one, named [`DEFAULT_PIPELINE`].
pub fn load<I, S>(args: I) -> Result<Vec<Pipeline>, super::LoadError>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString>,
{
    use clap::CommandFactory;
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cmd = super::LoadArgs::command().no_binary_name(true);
    let relaxed = layers::relax(cmd.clone()).try_get_matches_from(&args);
    let Some(declared) = relaxed.ok().and_then(|m| declared(&cmd, &m, None)) else {
        let (config, origins) = RunConfig::load(args)?;
        return Ok(vec![Pipeline {
            name: PipelineName::single(),
            config,
            origins,
        }]);
    };
    let mut per_pipeline = Vec::new();
    let mut pipelines = Vec::new();
    for (name, resolved) in declared.each {
        let loaded = layers::parse_resolved::<super::LoadArgs>(cmd.clone(), resolved);
        let problems = match loaded {
            Ok(loaded) => {
                let config = loaded.value.run;
                let problems =
                    match layers::finish(&cmd, &loaded.origins, loaded.problems, config.validate())
                    {
                        Ok(()) => Vec::new(),
                        Err(error) => error.0,
                    };
                pipelines.push(Pipeline {
                    name: name.clone(),
                    config,
                    origins: loaded.origins,
                });
                problems
            }
            Err(error) => error.0,
        };
        per_pipeline.push((name, problems));
    }
    let mut problems = declared.problems;
    problems.extend(merge_problems(&per_pipeline));
    problems.extend(distinct(pipelines.iter().map(|p| (&p.name, &p.config))));
    if problems.is_empty() {
        Ok(pipelines)
    } else {
        Err(super::LoadError(problems))
    }
}

#[cfg(test)]
mod tests;
