//! The vocabulary every stage's options share: a [`Secret`] (parsed like a
//! string, never printed) and [`Invalid`], one rejected value, so that each
//! stage validates its own options and the configuration reports every
//! problem of every stage at once ([`ConfigError`]).

use std::fmt;

/// A secret: parsed like a string, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for handing to a client.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Reads a secret from a file, without its trailing newline: the value
/// parser of every `--*-file` secret flag.
pub fn read_secret_file(path: &str) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secret file {path}: {e}"))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(format!("the secret file {path} is empty"));
    }
    Ok(secret.parse().unwrap_or_else(|never| match never {}))
}

/// A configuration value that fails validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: &'static str,
    pub value: String,
    pub constraint: String,
}

/// Every invalid field at once.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:{}", .0.iter().map(|i| format!("\n  {}: {:?} {}", i.field, i.value, i.constraint)).collect::<String>())]
pub struct ConfigError(pub Vec<Invalid>);

/// The problems a stage's options have, in the order they are found.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Invalid>);

impl Problems {
    /// Records `field` = `value` as violating `constraint` unless `ok`.
    pub fn check(
        &mut self,
        ok: bool,
        field: &'static str,
        value: impl Into<String>,
        constraint: impl Into<String>,
    ) {
        if !ok {
            self.0.push(Invalid {
                field,
                value: value.into(),
                constraint: constraint.into(),
            });
        }
    }
}

/// Separates the entries of a `key=value` list given in one environment
/// variable (`PGCDC_KAFKA_PROPERTY`, `PGCDC_TOPIC_CONFIG`): a newline, which
/// no librdkafka or topic configuration key holds, and unlike `,` or `;` no
/// value either (`cleanup.policy=compact,delete`, JAAS and OAUTHBEARER
/// strings). Blank lines are skipped, so a trailing newline is harmless.
pub const PROPERTY_SEPARATOR: char = '\n';

/// Parses `key=value` (both trimmed): the value parser of the repeatable
/// property flags (`--kafka-property`, `--topic-config`).
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected key=value, got {s:?}"))?;
    Ok((k.trim().to_owned(), v.trim().to_owned()))
}
