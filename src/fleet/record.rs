//! A pipeline's record in the fleet's configs topic, and the sans-IO
//! rules of `fleet apply`: which partition index a pipeline gets, and what
//! a file's pipelines change.
//!
//! Key: the pipeline's name. Value: `{"index": p, "config": "<TOML>"}`,
//! the pipeline's settings as one TOML table (the apply file's top-level
//! keys with the pipeline's table over them). A tombstone (no value)
//! removes the pipeline and frees its index.
//!
//! Indexes are stable: a pipeline keeps its index for as long as it
//! exists, since the index is its partition and a new index would move it.
//! A new pipeline takes the lowest free index, so holes left by removed
//! pipelines are filled before the assignment topic grows.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::config::pipelines::PipelineName;

/// A pipeline's record: its partition index and its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRecord {
    /// The assignment topic's partition that stands for this pipeline.
    pub index: i32,
    /// The pipeline's settings, a TOML table (secrets by reference only).
    pub config: String,
}

impl ConfigRecord {
    /// The record as the topic's value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record serializes")
    }

    /// A topic value as a record, or why it is not one.
    pub fn decode(value: &[u8]) -> Result<Self, String> {
        let record: ConfigRecord = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        if record.index < 0 {
            return Err(format!("index {} is negative", record.index));
        }
        Ok(record)
    }
}

/// The fleet's pipelines as the configs topic holds them.
pub type Configs = BTreeMap<PipelineName, ConfigRecord>;

/// What `fleet apply` does to one pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new pipeline, at this index.
    Added(i32),
    /// Its settings changed; it keeps its index (and restarts where it runs).
    Changed(i32),
    /// The same settings as the topic holds: nothing is written.
    Unchanged(i32),
}

/// The records `applied` pipelines make over `existing` ones, with what
/// each change is: existing pipelines keep their index, new ones take the
/// lowest free indexes in order.
pub fn plan(
    existing: &Configs,
    applied: &[(PipelineName, String)],
) -> Vec<(PipelineName, ConfigRecord, Change)> {
    let mut taken: BTreeSet<i32> = existing.values().map(|r| r.index).collect();
    let mut out = Vec::new();
    for (name, config) in applied {
        let (index, change) = match existing.get(name) {
            Some(old) if old.config == *config => (old.index, Change::Unchanged(old.index)),
            Some(old) => (old.index, Change::Changed(old.index)),
            None => {
                let index = lowest_free(&taken);
                taken.insert(index);
                (index, Change::Added(index))
            }
        };
        out.push((
            name.clone(),
            ConfigRecord {
                index,
                config: config.clone(),
            },
            change,
        ));
    }
    out
}

/// The lowest index not in `taken`.
fn lowest_free(taken: &BTreeSet<i32>) -> i32 {
    (0..).find(|i| !taken.contains(i)).expect("an i32 is free")
}

/// How many partitions the assignment topic needs for `configs`: one past
/// the highest index, at least one (a topic has one).
pub fn partitions_needed<'a>(records: impl IntoIterator<Item = &'a ConfigRecord>) -> i32 {
    records
        .into_iter()
        .map(|r| r.index + 1)
        .max()
        .unwrap_or(1)
        .max(1)
}

/// A file's pipelines as record texts: each `[pipelines.<name>]` table
/// over the file's other top-level keys (`kafka` and `topic_config`
/// merged per property, the pipeline's last), as TOML.
pub fn from_file(text: &str) -> Result<Vec<(PipelineName, String)>, Vec<String>> {
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| vec![format!("not valid TOML: {}", e.message().trim())])?;
    let Some(toml::Value::Table(pipelines)) = table.remove(crate::config::pipelines::PIPELINES_KEY)
    else {
        return Err(vec![
            "declares no pipeline: a fleet's file declares each as [pipelines.<name>] \
             with its pg_url, slot and topic_prefix (the top-level keys are shared by all)"
                .to_owned(),
        ]);
    };
    let mut problems = Vec::new();
    let mut out = Vec::new();
    for (name, body) in pipelines {
        let parsed: Result<PipelineName, String> = name.parse();
        let name = match parsed {
            Ok(name) => name,
            Err(message) => {
                problems.push(format!("pipelines.{name} {message}"));
                continue;
            }
        };
        let toml::Value::Table(body) = body else {
            problems.push(format!(
                "pipelines.{name} expects a table of the pipeline's settings"
            ));
            continue;
        };
        let mut merged = table.clone();
        for (key, value) in body {
            match (merged.get_mut(&key), value) {
                (Some(toml::Value::Table(shared)), toml::Value::Table(own)) => {
                    shared.extend(own);
                }
                (_, value) => {
                    merged.insert(key, value);
                }
            }
        }
        out.push((
            name,
            toml::to_string(&merged).expect("a TOML table serializes"),
        ));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> PipelineName {
        n.parse().expect("valid name")
    }

    #[test]
    fn new_pipelines_fill_the_lowest_free_indexes_and_old_ones_keep_theirs() {
        let mut existing = Configs::new();
        existing.insert(
            name("a"),
            ConfigRecord {
                index: 0,
                config: "x".into(),
            },
        );
        existing.insert(
            name("c"),
            ConfigRecord {
                index: 2,
                config: "y".into(),
            },
        );
        let planned = plan(
            &existing,
            &[
                (name("a"), "x".into()),
                (name("c"), "changed".into()),
                (name("d"), "z".into()),
                (name("e"), "w".into()),
            ],
        );
        let changes: Vec<_> = planned
            .iter()
            .map(|(n, _, c)| (n.as_str(), c.clone()))
            .collect();
        assert_eq!(
            changes,
            [
                ("a", Change::Unchanged(0)),
                ("c", Change::Changed(2)),
                ("d", Change::Added(1)),
                ("e", Change::Added(3)),
            ]
        );
        assert_eq!(partitions_needed(planned.iter().map(|(_, r, _)| r)), 4);
        assert_eq!(partitions_needed([]), 1);
    }

    #[test]
    fn records_round_trip_and_bad_values_are_named() {
        let record = ConfigRecord {
            index: 3,
            config: "slot = \"s\"\n".into(),
        };
        assert_eq!(ConfigRecord::decode(&record.encode()), Ok(record));
        assert!(ConfigRecord::decode(b"{\"index\":-1,\"config\":\"\"}")
            .expect_err("negative")
            .contains("negative"));
        assert!(ConfigRecord::decode(b"nope").is_err());
    }

    #[test]
    fn a_file_pipeline_is_its_table_over_the_shared_keys() {
        let file = "format = \"json\"\n[kafka]\n\"linger.ms\" = 10\n\"acks\" = \"all\"\n\
                    [pipelines.orders]\nslot = \"o\"\n[pipelines.orders.kafka]\n\"linger.ms\" = 50\n";
        let out = from_file(file).expect("valid");
        assert_eq!(out.len(), 1);
        let table: toml::Table = out[0].1.parse().expect("toml");
        assert_eq!(table["format"].as_str(), Some("json"));
        assert_eq!(table["slot"].as_str(), Some("o"));
        assert_eq!(table["kafka"]["linger.ms"].as_integer(), Some(50));
        assert_eq!(table["kafka"]["acks"].as_str(), Some("all"));
        let none = from_file("slot = \"x\"\n").expect_err("no pipelines");
        assert!(none[0].contains("[pipelines.<name>]"), "{none:?}");
        let bad = from_file("[pipelines.Bad]\nslot = \"x\"\n").expect_err("bad name");
        assert!(bad[0].starts_with("pipelines.Bad"), "{bad:?}");
    }
}
