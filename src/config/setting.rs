//! The vocabulary of layered configuration: one `Setting` a layer sets,
//! where it came from ([`Origin`]), what the layers know of one argument
//! (`ArgInfo`, `ArgIndex`) and a rejected value ([`Problem`]). The layers
//! themselves ([`super::layers`], `file`, [`super::debezium`]) build on
//! these and never on each other's internals.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::{ArgAction, Command};

/// Argument ids of [`ConfigSources`]: where layers come from, not settings.
pub const CONFIG_ID: &str = "config";
pub const DEBEZIUM_CONFIG_ID: &str = "debezium_config";

/// Repeatable `key=value` flags: a table in the file, merged per key across
/// layers. The first names the file's table (`[kafka]`).
const KEY_VALUE_FLAGS: &[(&str, &str)] = &[
    ("kafka-property", "kafka"),
    ("topic-config", "topic_config"),
];

/// Words that make a flag or a `key=value` entry secret: never printed.
const SECRET_WORDS: &[&str] = &["password", "secret", "sasl.jaas", "basic_auth", "token"];

/// The files a configuration is read from; flattened into every command
/// that takes `run`'s flags.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Configuration files")]
pub struct ConfigSources {
    /// TOML configuration file: keys are the flags' long names with '_'
    /// (`topic_prefix = "app"`), `[kafka]` holds librdkafka properties.
    /// Flags and environment variables override it. `[pipelines.<name>]`
    /// tables run several pipelines in one process (docs/CONFIGURATION.md).
    #[arg(long = "config", env = "PGCDC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// A Debezium PostgreSQL connector configuration to import: Kafka
    /// Connect JSON (`{"name", "config"}` or the bare config) or a Debezium
    /// Server `.properties` file. Below --config, the environment and flags.
    #[arg(
        long = "debezium-config",
        env = "PGCDC_DEBEZIUM_CONFIG",
        value_name = "FILE"
    )]
    pub debezium_config: Option<PathBuf>,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag,
    /// The environment variable's name.
    Env(String),
    /// The `--config` file.
    File(PathBuf),
    /// A pipeline's table in the `--config` file (`[pipelines.<name>]`).
    Pipeline {
        path: PathBuf,
        name: String,
    },
    /// The Debezium properties it was mapped from.
    Debezium(String),
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => f.write_str("flag"),
            Origin::Env(name) => write!(f, "env {name}"),
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Pipeline { path, name } => {
                write!(f, "file {} [pipelines.{name}]", path.display())
            }
            Origin::Debezium(property) => write!(f, "debezium {property}"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// Per argument id (and per key of `key=value` lists), where its value came from.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    pub(crate) by_id: BTreeMap<String, Origin>,
    pub(crate) by_entry: BTreeMap<(String, String), Origin>,
}

impl Origins {
    /// The origin of an argument's value ([`Origin::Default`] when unset).
    pub fn of(&self, id: &str) -> Origin {
        self.by_id.get(id).cloned().unwrap_or(Origin::Default)
    }

    /// The origin of one key of a `key=value` list such as `--kafka-property`.
    pub fn of_entry(&self, id: &str, key: &str) -> Origin {
        self.by_entry
            .get(&(id.to_owned(), key.to_owned()))
            .cloned()
            .unwrap_or_else(|| self.of(id))
    }

    /// The origin of the argument whose long flag is `long` (as `validate()` names fields).
    pub fn of_long(&self, cmd: &Command, long: &str) -> Origin {
        cmd.get_arguments()
            .find(|a| a.get_long() == Some(long))
            .map_or(Origin::Default, |a| self.of(a.get_id().as_str()))
    }
}

/// One bad setting: where it is, what it is, why it is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The setting: a flag's file key, a Debezium property, a file key.
    pub field: String,
    /// The offending value, unless it is secret or there is none.
    pub value: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
    /// Where the setting came from, when that helps.
    pub origin: Option<Origin>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.field)?;
        if let Some(value) = &self.value {
            write!(f, " = {value:?}")?;
        }
        if let Some(origin) = &self.origin {
            write!(f, " (from {origin})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem of a configuration, all layers together.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:{}", .0.iter().map(|p| format!("\n  {p}")).collect::<String>())]
pub struct LoadError(pub Vec<Problem>);

/// A value a layer sets, by argument id.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    pub id: String,
    pub values: Vec<String>,
    pub origin: Origin,
}

/// How an argument takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A presence flag (`SetTrue`, `SetFalse`, `Count`).
    Switch,
    /// One value.
    Single,
    /// A list (repeatable, or delimited).
    List,
    /// A repeatable `key=value` list; the file key names a table.
    KeyValue,
}

/// What the layers need to know about one argument.
#[derive(Debug, Clone)]
pub(crate) struct ArgInfo {
    pub id: String,
    pub long: String,
    /// The key in the file: the long name with '-' -> '_' (or the table name).
    pub key: String,
    pub shape: Shape,
    pub secret: bool,
    pub env: Option<String>,
    pub required: bool,
}

/// The arguments of one command that the layers can set.
#[derive(Debug, Clone)]
pub(crate) struct ArgIndex {
    pub args: Vec<ArgInfo>,
}

impl ArgIndex {
    pub fn new(cmd: &Command) -> Self {
        let args = cmd
            .get_arguments()
            .filter(|a| {
                !matches!(
                    a.get_id().as_str(),
                    "help" | "version" | CONFIG_ID | DEBEZIUM_CONFIG_ID
                )
            })
            .filter_map(|a| {
                let long = a.get_long()?.to_owned();
                let table = KEY_VALUE_FLAGS.iter().find(|(flag, _)| *flag == long);
                let shape = match a.get_action() {
                    _ if table.is_some() => Shape::KeyValue,
                    ArgAction::Append => Shape::List,
                    action if !action.takes_values() => Shape::Switch,
                    _ if a.get_value_delimiter().is_some()
                        || a.get_num_args().is_some_and(|n| n.max_values() > 1) =>
                    {
                        Shape::List
                    }
                    _ => Shape::Single,
                };
                let id = a.get_id().as_str().to_owned();
                let secret = id == "pg_url" || is_secret_name(&id);
                Some(ArgInfo {
                    key: table.map_or_else(|| long.replace('-', "_"), |(_, t)| (*t).to_owned()),
                    id,
                    long,
                    shape,
                    secret,
                    env: a.get_env().map(|e| e.to_string_lossy().into_owned()),
                    required: a.is_required_set(),
                })
            })
            .collect();
        ArgIndex { args }
    }

    pub fn by_key(&self, key: &str) -> Option<&ArgInfo> {
        self.args.iter().find(|a| a.key == key)
    }

    /// By file key, or by long name with '_' (`kafka_property` as well as `kafka`).
    pub fn by_name(&self, name: &str) -> Option<&ArgInfo> {
        self.by_key(name)
            .or_else(|| self.args.iter().find(|a| a.long.replace('-', "_") == name))
    }

    pub fn by_id(&self, id: &str) -> Option<&ArgInfo> {
        self.args.iter().find(|a| a.id == id)
    }

    /// The known key closest to `key`, if any is close.
    pub fn suggest(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .map(|a| (strsim::levenshtein(key, &a.key), a.key.as_str()))
            .filter(|(d, k)| *d <= (k.len() / 3).max(2))
            .min()
            .map(|(_, k)| k)
    }
}

impl ArgInfo {
    /// The setting named the way it was given: `--flag`, `PGCDC_...`, the
    /// file's key, the Debezium properties.
    pub fn name_from(&self, origin: &Origin) -> String {
        match origin {
            Origin::Flag | Origin::Default => format!("--{}", self.long),
            Origin::Env(name) => name.clone(),
            Origin::File(_) => self.key.clone(),
            Origin::Pipeline { name, .. } => format!("pipelines.{name}.{}", self.key),
            Origin::Debezium(properties) => properties.clone(),
        }
    }
}

/// Whether a setting or `key=value` name holds a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// Reads a layer's file, naming it in the error.
pub(crate) fn read_file(path: &Path, what: &str) -> Result<String, Problem> {
    std::fs::read_to_string(path).map_err(|e| Problem {
        field: what.to_owned(),
        value: Some(path.display().to_string()),
        message: format!("cannot read the file: {e}"),
        origin: None,
    })
}
