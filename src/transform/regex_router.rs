//! Kafka Connect's `RegexRouter` (`org.apache.kafka.connect.transforms.RegexRouter`):
//! renames the topic of every record the connector writes (changes,
//! tombstones, logical messages, transaction and heartbeat records) whose
//! topic the regex matches as a whole (Java's `Matcher.matches()`, case
//! sensitive), to the replacement (Java's `$1` group syntax).
//!
//! It runs last, just before encoding, so registry subjects follow the new
//! topic (Connect's converters see the renamed record) while schema names
//! stay the table's (`<prefix>.<schema>.<table>.Value`), as RegexRouter
//! leaves them. Several renames chain in order, each on the topic the one
//! before produced, as several listed RegexRouters do.

use std::sync::Arc;

use clap::Args;
use regex::Regex;

use crate::options::{ConfigError, Invalid};
use crate::select::java_replacement;

/// `--topic-rename` (Kafka Connect's RegexRouter). Flattened into `run`'s flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Transforms")]
pub struct RegexRouterOptions {
    /// REGEX=REPLACEMENT (repeatable, applied in order): every record whose
    /// topic the regex matches whole goes to the replacement, `$1` naming
    /// groups (Kafka Connect's RegexRouter regex / replacement).
    #[arg(long)]
    pub topic_rename: Vec<String>,
}

/// The compiled renames.
#[derive(Debug, Clone, Default)]
pub struct TopicRenames {
    renames: Vec<(Regex, String)>,
}

impl TopicRenames {
    /// The renames of `options`, or every one that is wrong.
    pub fn new(options: &RegexRouterOptions) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut renames = Vec::new();
        for spec in &options.topic_rename {
            let invalid = |constraint: String| Invalid {
                field: "topic-rename",
                value: spec.clone(),
                constraint,
            };
            let Some((pattern, replacement)) = spec.split_once('=') else {
                problems.push(invalid("must be REGEX=REPLACEMENT".to_owned()));
                continue;
            };
            let regex = match Regex::new(&format!("^(?:{pattern})$")) {
                Ok(regex) => regex,
                Err(e) => {
                    let message = e.to_string().lines().last().unwrap_or_default().to_owned();
                    problems.push(invalid(format!(
                        "{pattern:?} is not a valid regular expression: {message}"
                    )));
                    continue;
                }
            };
            match java_replacement(replacement, regex.captures_len() - 1) {
                Ok(replacement) => renames.push((regex, replacement)),
                Err(problem) => problems.push(invalid(format!("the replacement {problem}"))),
            }
        }
        match problems.is_empty() {
            true => Ok(TopicRenames { renames }),
            false => Err(ConfigError(problems)),
        }
    }

    /// The topic a record of `topic` goes to: `None` when no rename matches.
    pub fn rename(&self, topic: &str) -> Option<Arc<str>> {
        let mut current: Option<String> = None;
        for (regex, replacement) in &self.renames {
            let name = current.as_deref().unwrap_or(topic);
            if let Some(captures) = regex.captures(name) {
                let mut renamed = String::new();
                captures.expand(replacement, &mut renamed);
                current = Some(renamed);
            }
        }
        current.map(Arc::from)
    }

    /// `topic`, renamed if a rename matches.
    pub fn apply(&self, topic: Arc<str>) -> Arc<str> {
        self.rename(&topic).unwrap_or(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renames(specs: &[&str]) -> Result<TopicRenames, ConfigError> {
        TopicRenames::new(&RegexRouterOptions {
            topic_rename: specs.iter().map(|s| (*s).to_owned()).collect(),
        })
    }

    #[test]
    fn whole_topic_matches_are_renamed_with_java_groups() {
        let r = renames(&["app\\.public\\.(.*)=cdc.$1"]).expect("valid");
        assert_eq!(r.rename("app.public.orders").as_deref(), Some("cdc.orders"));
        // Matcher.matches(): a partial match is no match, and case counts.
        assert_eq!(r.rename("xapp.public.orders"), None);
        assert_eq!(r.rename("APP.public.orders"), None);
        assert_eq!(r.apply("app.message".into()).as_ref(), "app.message");
    }

    #[test]
    fn renames_chain_in_order() {
        let r = renames(&["a\\.(.*)=b.$1", "b\\.(x)=c-$1"]).expect("valid");
        assert_eq!(r.rename("a.x").as_deref(), Some("c-x"));
        assert_eq!(r.rename("a.y").as_deref(), Some("b.y"));
    }

    #[test]
    fn bad_renames_are_named() {
        let e = renames(&["no-equals", "(=x", "a(.*)=$2"]).expect_err("invalid");
        assert_eq!(e.0.len(), 3, "{e}");
        assert!(e.0.iter().all(|i| i.field == "topic-rename"));
    }
}
