//! `run`'s takeover flags, flattened into [`crate::config::RunConfig`].

use std::path::PathBuf;
use std::str::FromStr;

use clap::Args;

use crate::config::help::OPERATIONS;

/// Where Debezium stored its offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetSource {
    /// Kafka Connect's offsets topic (the worker's `offset.storage.topic`).
    Topic(String),
    /// Debezium Server's `offset.storage.file.filename`.
    File(PathBuf),
}

impl FromStr for OffsetSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err("file: needs a path, e.g. file:data/offsets.dat".to_owned());
            }
            return Ok(OffsetSource::File(PathBuf::from(path)));
        }
        let valid = !text.is_empty()
            && text.len() <= 249
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        match valid {
            true => Ok(OffsetSource::Topic(text.to_owned())),
            false => Err(format!(
                "{text:?} is neither a Kafka topic name (letters, digits, '.', '_', '-') nor \
                 file:<path>; give Kafka Connect's offsets topic (e.g. connect-offsets) or \
                 file:<Debezium Server's offset.storage.file.filename>"
            )),
        }
    }
}

impl std::fmt::Display for OffsetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffsetSource::Topic(topic) => f.write_str(topic),
            OffsetSource::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// Taking over a Debezium connector (see [`crate::takeover`]).
#[derive(Debug, Clone, Default, Args)]
pub struct TakeoverOptions {
    /// Take over from a Debezium PostgreSQL connector: read the offset it
    /// stored, in Kafka Connect's offsets topic (its name) or Debezium
    /// Server's offset file (file:<path>), and send only what Debezium had
    /// not produced. Stop Debezium first, and give its slot, publication
    /// and topic prefix (or its config with --debezium-config). See
    /// docs/MIGRATION.md.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_TAKEOVER_DEBEZIUM", value_name = "TOPIC|file:PATH")]
    pub takeover_debezium: Option<OffsetSource>,

    /// The Kafka Connect connector name whose offset to take over (the
    /// first element of the offset key); needed only when several
    /// connectors stored offsets for the same topic prefix.
    #[arg(help_heading = OPERATIONS, long, env = "PGCDC_TAKEOVER_DEBEZIUM_NAME", value_name = "NAME")]
    pub takeover_debezium_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_a_topic_or_a_file() {
        assert_eq!(
            "connect-offsets".parse(),
            Ok(OffsetSource::Topic("connect-offsets".to_owned()))
        );
        assert_eq!(
            "file:data/offsets.dat".parse(),
            Ok(OffsetSource::File(PathBuf::from("data/offsets.dat")))
        );
        for bad in ["", "file:", "a topic", "x/y"] {
            let error = bad.parse::<OffsetSource>().unwrap_err();
            assert!(!error.is_empty(), "{bad:?}");
        }
    }
}
