//! `pgcdc-kafka fleet apply | status | remove`: managing a fleet's
//! pipelines through its configs topic, while it runs.
//!
//! `apply` checks everything before it writes anything: the file's shape,
//! every pipeline's settings (layered and validated as `run` would, with
//! each secret reference standing in for its value), no literal secret,
//! and nothing two pipelines of the fleet may share (a slot, a topic prefix
//! on one database, a connector name). Then it creates or grows the
//! fleet's topics and writes the changed records; the instances pick them
//! up within a few seconds. Concurrent applies to one fleet are not
//! coordinated: run one at a time.

use std::collections::BTreeMap;

use serde::Serialize;

use super::record::{self, Change, ConfigRecord};
use super::status::{self, StatusRecord};
use super::{configs, secrets, FleetError, FleetKafka, FleetName};
use crate::config::pipelines::{self, PipelineName};
use crate::config::setting::is_secret_name;
use crate::config::RunConfig;

/// Why an admin command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The file or its pipelines are invalid: every problem, one a line.
    #[error("{}", .0.join("\n  "))]
    Invalid(Vec<String>),
    #[error("pipeline {0:?} is not in the fleet; `pgcdc-kafka fleet status` lists its pipelines")]
    NoSuchPipeline(String),
    #[error(transparent)]
    Fleet(#[from] FleetError),
}

/// What `apply` did, per pipeline.
#[derive(Debug, Serialize)]
pub struct Applied {
    pub pipelines: Vec<AppliedPipeline>,
}

#[derive(Debug, Serialize)]
pub struct AppliedPipeline {
    pub pipeline: String,
    pub index: i32,
    /// added, changed or unchanged.
    pub change: &'static str,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.pipelines {
            writeln!(f, "{}: {} (partition {})", p.pipeline, p.change, p.index)?;
        }
        Ok(())
    }
}

/// Applies the pipelines of the file `text` (named `path` in errors) to
/// `fleet`.
pub async fn apply(
    kafka: &FleetKafka,
    fleet: &FleetName,
    path: &str,
    text: &str,
) -> Result<Applied, AdminError> {
    let declared = record::from_file(text).map_err(|ps| {
        AdminError::Invalid(ps.into_iter().map(|p| format!("{path}: {p}")).collect())
    })?;
    let mut problems = Vec::new();
    let mut checked: Vec<(PipelineName, RunConfig)> = Vec::new();
    for (name, config) in &declared {
        match check(name, config, std::path::Path::new(path)) {
            Ok(run) => checked.push((name.clone(), run)),
            Err(ps) => problems.extend(ps),
        }
    }
    if !problems.is_empty() {
        return Err(AdminError::Invalid(problems));
    }
    let existing = {
        let kafka = kafka.clone();
        let fleet = fleet.clone();
        tokio::task::spawn_blocking(move || match configs::read_to_end(&kafka, &fleet) {
            Err(FleetError::NoSuchFleet { .. }) => Ok(BTreeMap::new()),
            other => other,
        })
        .await
        .expect("the configs reader does not panic")?
    };
    // What no two pipelines of the whole fleet may share.
    let mut all: BTreeMap<PipelineName, RunConfig> = BTreeMap::new();
    for (name, existing) in &existing {
        if declared.iter().any(|(n, _)| n == name) {
            continue;
        }
        let topic = std::path::PathBuf::from(format!("the fleet's configs topic, {fleet}"));
        if let Ok(run) = check(name, &existing.config, &topic) {
            all.insert(name.clone(), run);
        }
    }
    all.extend(checked);
    let clashes = pipelines::distinct(all.iter());
    if !clashes.is_empty() {
        return Err(AdminError::Invalid(
            clashes
                .into_iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect(),
        ));
    }
    let planned = record::plan(&existing, &declared);
    let partitions =
        record::partitions_needed(existing.values().chain(planned.iter().map(|(_, r, _)| r)));
    configs::ensure_topics(kafka, fleet, partitions).await?;
    let writes: Vec<(PipelineName, Option<ConfigRecord>)> = planned
        .iter()
        .filter(|(_, _, change)| !matches!(change, Change::Unchanged(_)))
        .map(|(name, record, _)| (name.clone(), Some(record.clone())))
        .collect();
    {
        let kafka = kafka.clone();
        let fleet = fleet.clone();
        tokio::task::spawn_blocking(move || configs::write(&kafka, &fleet, &writes))
            .await
            .expect("the configs writer does not panic")?;
    }
    Ok(Applied {
        pipelines: planned
            .into_iter()
            .map(|(name, record, change)| AppliedPipeline {
                pipeline: name.to_string(),
                index: record.index,
                change: match change {
                    Change::Added(_) => "added",
                    Change::Changed(_) => "changed",
                    Change::Unchanged(_) => "unchanged",
                },
            })
            .collect(),
    })
}

/// A record's settings checked as an instance would use them, with each
/// secret reference standing in for its value; literal secrets refused.
fn check(
    name: &PipelineName,
    config: &str,
    origin: &std::path::Path,
) -> Result<RunConfig, Vec<String>> {
    let origin_text = origin.display();
    let mut table: toml::Table = config.parse().map_err(|e: toml::de::Error| {
        vec![format!(
            "{origin_text}: pipeline {name}: not valid TOML: {}",
            e.message()
        )]
    })?;
    let mut problems: Vec<String> = secrets::literals(&table)
        .into_iter()
        .map(|(key, message)| format!("{origin_text}: pipelines.{name}.{key} {message}"))
        .collect();
    // A secret file's path is for the instances: it need not exist here.
    table.retain(|key, _| !(key.ends_with("_file") && is_secret_name(key)));
    let stand_in = |_: &secrets::Reference<'_>| Ok("reference".to_owned());
    problems.extend(
        secrets::resolve_table(&mut table, &stand_in)
            .into_iter()
            .map(|(key, message)| format!("{origin_text}: pipelines.{name}.{key} {message}")),
    );
    let text = toml::to_string(&table).expect("a TOML table serializes");
    match crate::config::fleet::pipeline_alone(name.as_str(), &text, origin) {
        Ok(run) if problems.is_empty() => Ok(run),
        Ok(_) => Err(problems),
        Err(error) => {
            problems.extend(error.0.into_iter().map(|p| p.to_string()));
            Err(problems)
        }
    }
}

/// Removes `pipeline` from `fleet` (a tombstone): the instance running it
/// stops it, and its index is free for the next `apply`. Its slot stays on
/// the server (drop it, or re-apply the pipeline to resume from it).
pub async fn remove(
    kafka: &FleetKafka,
    fleet: &FleetName,
    pipeline: &str,
) -> Result<ConfigRecord, AdminError> {
    let name: PipelineName = pipeline
        .parse()
        .map_err(|m: String| AdminError::Invalid(vec![format!("{pipeline:?} {m}")]))?;
    let kafka = kafka.clone();
    let fleet = fleet.clone();
    tokio::task::spawn_blocking(move || {
        let existing = configs::read_to_end(&kafka, &fleet)?;
        let Some(record) = existing.get(&name).cloned() else {
            return Err(AdminError::NoSuchPipeline(name.to_string()));
        };
        configs::write(&kafka, &fleet, &[(name, None)])?;
        Ok(record)
    })
    .await
    .expect("the configs writer does not panic")
}

/// One pipeline in `fleet status`.
#[derive(Debug, Serialize)]
pub struct PipelineStatus {
    pub pipeline: String,
    pub index: i32,
    /// The group member owning its partition now, if any.
    pub owner: Option<String>,
    /// Its state as last reported, and by whom.
    pub state: Option<StatusRecord>,
}

/// `fleet status`: the pipelines, who owns each, their states.
#[derive(Debug, Serialize)]
pub struct FleetStatus {
    pub fleet: String,
    pub instances: Vec<status::Owner>,
    pub pipelines: Vec<PipelineStatus>,
}

impl std::fmt::Display for FleetStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "fleet {}: {} instances, {} pipelines",
            self.fleet,
            self.instances.len(),
            self.pipelines.len()
        )?;
        for i in &self.instances {
            writeln!(
                f,
                "  instance {} ({}): partitions {:?}",
                i.client_id, i.host, i.partitions
            )?;
        }
        for p in &self.pipelines {
            let owner = p.owner.as_deref().unwrap_or("(unassigned)");
            let state = p.state.as_ref().map_or_else(
                || "no state reported".to_owned(),
                |s| match &s.error {
                    Some(e) => format!("{} on {}: {e}", s.state, s.instance),
                    None => format!("{} on {}", s.state, s.instance),
                },
            );
            writeln!(
                f,
                "  {} (partition {}): owner {owner}; {state}",
                p.pipeline, p.index
            )?;
        }
        Ok(())
    }
}

/// Reads the fleet's configs, group and status topic.
pub async fn status(kafka: &FleetKafka, fleet: &FleetName) -> Result<FleetStatus, AdminError> {
    let kafka = kafka.clone();
    let fleet = fleet.clone();
    tokio::task::spawn_blocking(move || {
        let configs = configs::read_to_end(&kafka, &fleet)?;
        let owners = status::owners(&kafka, &fleet)?;
        let states = configs::latest_by_key(&kafka, &fleet.status_topic())?;
        let pipelines = configs
            .into_iter()
            .map(|(name, record)| PipelineStatus {
                owner: owners
                    .iter()
                    .find(|o| o.partitions.contains(&record.index))
                    .map(|o| o.client_id.clone()),
                state: states
                    .get(name.as_str())
                    .and_then(|v| serde_json::from_slice(v).ok()),
                pipeline: name.to_string(),
                index: record.index,
            })
            .collect();
        Ok(FleetStatus {
            fleet: fleet.to_string(),
            instances: owners,
            pipelines,
        })
    })
    .await
    .expect("the status reader does not panic")
}
