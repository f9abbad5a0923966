//! Layered configuration, generic over a clap [`Command`]: flags >
//! `PGCDC_*` environment variables > the `--config` TOML file > an imported
//! `--debezium-config` > defaults.
//!
//! Nothing here names a field of [`RunConfig`](super::RunConfig): the layers
//! are matched to the command's arguments by their long names, so a flag
//! added to `RunConfig` is at once a key of the file, a line of `config
//! show` and a possible target of the Debezium mapping.
//!
//! How a command line is resolved:
//! 1. it is parsed by a *relaxed* copy of the command (nothing required,
//!    every value read as a plain string), which tells, per argument, whether
//!    it came from a flag, the environment or a default
//!    ([`ArgMatches::value_source`]);
//! 2. the file and the Debezium import fill the arguments that flags and
//!    environment left unset; `key=value` lists (`--kafka-property`) merge
//!    per key instead;
//! 3. every value from every layer is checked by the argument's own value
//!    parser, one argument at a time, so that all bad values are reported
//!    together rather than clap's first one;
//! 4. the caller parses the resolved argument list with the real command,
//!    without environment variables (they are already in the list).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

use super::{debezium, file};

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
pub struct ConfigSources {
    /// TOML configuration file: keys are the flags' long names with '_'
    /// (`topic_prefix = "app"`), `[kafka]` holds librdkafka properties.
    /// Flags and environment variables override it.
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
            Origin::Debezium(property) => write!(f, "debezium {property}"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// Per argument id (and per key of `key=value` lists), where its value came from.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    by_id: BTreeMap<String, Origin>,
    by_entry: BTreeMap<(String, String), Origin>,
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
pub(super) struct Setting {
    pub id: String,
    pub values: Vec<String>,
    pub origin: Origin,
}

/// How an argument takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
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
pub(super) struct ArgInfo {
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
pub(super) struct ArgIndex {
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
            .map(|a| (edit_distance(key, &a.key), a.key.as_str()))
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
            Origin::Debezium(properties) => properties.clone(),
        }
    }
}

/// Whether a setting or `key=value` name holds a secret.
pub(super) fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// A copy of `cmd` for the first pass: nothing required, every value a
/// plain string, so that only the shape of the command line is checked.
pub fn relax(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let a = a.required(false);
        if a.get_action().takes_values() {
            a.value_parser(clap::builder::ValueParser::os_string())
        } else {
            a
        }
    })
}

/// A copy of `cmd` that reads no environment variables: for parsing a
/// resolved argument list, where the environment is already folded in.
pub fn without_env(cmd: Command) -> Command {
    cmd.mut_args(|a| a.env(None::<&'static str>))
}

/// The outcome of layering one command line.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The command's arguments, flags and environment and layers together,
    /// to be parsed with [`without_env`] of the real command.
    pub args: Vec<OsString>,
    pub origins: Origins,
    /// Everything wrong with it, all at once.
    pub problems: Vec<Problem>,
    /// A required argument has no value (or an invalid one): the command
    /// line cannot be parsed, report [`Resolved::problems`] only.
    pub incomplete: bool,
    /// Debezium properties accepted without effect, each with the reason.
    pub ignored: Vec<(String, String)>,
}

/// Layers the `--config` file and `--debezium-config` under what `matches`
/// (from [`relax`]`(cmd)`) took from flags and the environment.
pub fn resolve(cmd: &Command, matches: &ArgMatches) -> Resolved {
    let index = ArgIndex::new(cmd);
    let mut resolved = Resolved::default();
    let path = |id: &str| {
        matches
            .try_get_raw(id)
            .ok()
            .flatten()
            .and_then(|mut v| v.next())
            .map(PathBuf::from)
    };
    let mut layers: Vec<Vec<Setting>> = Vec::new();
    if let Some(path) = path(DEBEZIUM_CONFIG_ID) {
        let (settings, problems, ignored) = debezium::read(&path, &index);
        layers.push(settings);
        resolved.problems.extend(problems);
        resolved.ignored = ignored;
    }
    if let Some(path) = path(CONFIG_ID) {
        let (settings, problems) = file::read(&path, &index);
        layers.push(settings);
        resolved.problems.extend(problems);
    }

    let mut probe = without_env(relax_required(cmd.clone())).no_binary_name(true);
    for info in &index.args {
        let from_command_line = explicit(matches, info);
        let (values, origin) = if info.shape == Shape::KeyValue {
            let mut merged: BTreeMap<String, (String, Origin)> = BTreeMap::new();
            let layered = layers.iter().flatten().filter(|s| s.id == info.id);
            let given = from_command_line
                .iter()
                .flat_map(|(values, origin)| values.iter().map(move |v| (v, origin)));
            for (entry, origin) in layered
                .flat_map(|s| s.values.iter().map(move |v| (v, &s.origin)))
                .chain(given)
            {
                let key = entry
                    .split_once('=')
                    .map_or(entry.as_str(), |(k, _)| k.trim());
                merged.insert(key.to_owned(), (entry.clone(), origin.clone()));
            }
            for (key, (_, origin)) in &merged {
                resolved
                    .origins
                    .by_entry
                    .insert((info.id.clone(), key.clone()), origin.clone());
            }
            let origin = merged.values().last().map(|(_, o)| o.clone());
            (merged.into_values().map(|(v, _)| v).collect(), origin)
        } else if let Some((values, origin)) = from_command_line {
            (values, Some(origin))
        } else if let Some(setting) = layers.iter().rev().flatten().find(|s| s.id == info.id) {
            (setting.values.clone(), Some(setting.origin.clone()))
        } else {
            (Vec::new(), None)
        };
        let Some(origin) = origin else {
            if info.required {
                resolved.incomplete = true;
                resolved.problems.push(Problem {
                    field: info.key.clone(),
                    value: None,
                    message: format!(
                        "is required: pass --{}{}, or set {} in the --config file",
                        info.long,
                        info.env
                            .as_ref()
                            .map(|e| format!(", set {e}"))
                            .unwrap_or_default(),
                        info.key
                    ),
                    origin: None,
                });
            }
            continue;
        };
        let args = to_args(info, &values);
        if let Some(problem) = check_values(&mut probe, info, &args, &values, &origin) {
            resolved.incomplete |= info.required;
            resolved.problems.push(problem);
            continue;
        }
        resolved.origins.by_id.insert(info.id.clone(), origin);
        resolved.args.extend(args);
    }
    resolved
}

/// The value an argument got from a flag or the environment, if any.
fn explicit(matches: &ArgMatches, info: &ArgInfo) -> Option<(Vec<String>, Origin)> {
    let origin = match matches.value_source(&info.id)? {
        ValueSource::CommandLine => Origin::Flag,
        ValueSource::EnvVariable => Origin::Env(info.env.clone().unwrap_or_default()),
        _ => return None,
    };
    let values = if info.shape == Shape::Switch {
        // A presence flag counts: one "true" per occurrence.
        match matches.try_get_one::<u8>(&info.id) {
            Ok(Some(n)) => vec!["true".to_owned(); usize::from(*n)],
            _ => raw_values(matches, &info.id),
        }
    } else {
        raw_values(matches, &info.id)
    };
    Some((values, origin))
}

/// An argument's values as given, before its value parser.
pub(super) fn raw_values(matches: &ArgMatches, id: &str) -> Vec<String> {
    matches
        .try_get_raw(id)
        .ok()
        .flatten()
        .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

fn relax_required(cmd: Command) -> Command {
    cmd.mut_args(|a| a.required(false))
}

/// The command-line form of an argument's values.
fn to_args(info: &ArgInfo, values: &[String]) -> Vec<OsString> {
    match info.shape {
        Shape::Switch => values
            .iter()
            .filter(|v| v.as_str() == "true")
            .map(|_| OsString::from(format!("--{}", info.long)))
            .collect(),
        _ => values
            .iter()
            .map(|v| OsString::from(format!("--{}={v}", info.long)))
            .collect(),
    }
}

/// Parses one argument's values with its own value parser; the problem, if
/// they do not parse.
fn check_values(
    probe: &mut Command,
    info: &ArgInfo,
    args: &[OsString],
    values: &[String],
    origin: &Origin,
) -> Option<Problem> {
    if info.shape == Shape::Switch {
        if let Some(bad) = values
            .iter()
            .find(|v| !matches!(v.as_str(), "true" | "false"))
        {
            return Some(Problem {
                field: info.name_from(origin),
                value: Some(bad.clone()),
                message: "expects true or false".to_owned(),
                origin: Some(origin.clone()),
            });
        }
    }
    let error = probe.try_get_matches_from_mut(args).err()?;
    if matches!(
        error.kind(),
        ErrorKind::MissingRequiredArgument | ErrorKind::ArgumentConflict
    ) {
        return None;
    }
    let mut message = clap_message(&error);
    let mut value = Some(values.join(","));
    if info.secret {
        for v in values {
            message = message.replace(v.as_str(), "<redacted>");
        }
        value = None;
    }
    Some(Problem {
        field: info.name_from(origin),
        value,
        message,
        origin: Some(origin.clone()),
    })
}

/// Clap's message without its "error:" prefix and its usage hint.
fn clap_message(error: &clap::Error) -> String {
    error
        .render()
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A command line for one command, resolved, parsed and ready to use.
#[derive(Debug)]
pub struct Loaded<T> {
    pub value: T,
    pub origins: Origins,
    /// Problems found while layering that did not prevent parsing (report
    /// them together with the value's own validation).
    pub problems: Vec<Problem>,
    /// The final matches, defaults included: for `config show`.
    pub matches: ArgMatches,
    /// Debezium properties accepted without effect, each with the reason.
    pub ignored: Vec<(String, String)>,
}

/// Resolves and parses `args` (without the program name) for a command
/// without subcommands.
pub fn load<T: clap::FromArgMatches>(
    cmd: Command,
    args: impl IntoIterator<Item = impl Into<OsString>>,
) -> Result<Loaded<T>, LoadError> {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cmd = cmd.no_binary_name(true);
    let relaxed = relax(cmd.clone())
        .try_get_matches_from(&args)
        .map_err(|e| clap_problem(&e))?;
    let resolved = resolve(&cmd, &relaxed);
    if resolved.incomplete {
        return Err(LoadError(resolved.problems));
    }
    let matches = without_env(cmd)
        .try_get_matches_from(&resolved.args)
        .map_err(|e| clap_problem(&e))?;
    let value = T::from_arg_matches(&matches).map_err(|e| clap_problem(&e))?;
    Ok(Loaded {
        value,
        origins: resolved.origins,
        problems: resolved.problems,
        matches,
        ignored: resolved.ignored,
    })
}

fn clap_problem(error: &clap::Error) -> LoadError {
    LoadError(vec![Problem {
        field: "command line".to_owned(),
        value: None,
        message: clap_message(error),
        origin: None,
    }])
}

/// Adds `validate()`'s findings (fields named by long flag) to the layering
/// problems; `Err` with all of them when there is any.
pub fn finish(
    cmd: &Command,
    origins: &Origins,
    mut problems: Vec<Problem>,
    validation: Result<(), super::ConfigError>,
) -> Result<(), LoadError> {
    if let Err(invalid) = validation {
        let index = ArgIndex::new(cmd);
        for i in invalid.0 {
            let info = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(i.field))
                .and_then(|a| index.by_id(a.get_id().as_str()));
            let origin = origins.of_long(cmd, i.field);
            problems.push(Problem {
                field: info.map_or_else(|| i.field.to_owned(), |a| a.name_from(&origin)),
                value: (!info.is_some_and(|a| a.secret)).then_some(i.value),
                message: i.constraint,
                origin: Some(origin),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(LoadError(problems))
    }
}

/// Reads a layer's file, naming it in the error.
pub(super) fn read_file(path: &Path, what: &str) -> Result<String, Problem> {
    std::fs::read_to_string(path).map_err(|e| Problem {
        field: what.to_owned(),
        value: Some(path.display().to_string()),
        message: format!("cannot read the file: {e}"),
        origin: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_pick_the_closest_key() {
        assert_eq!(edit_distance("topc_prefix", "topic_prefix"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("slot", "slot"), 0);
    }

    #[test]
    fn run_config_load_layers_the_file_under_flags() {
        let dir = std::env::temp_dir().join(format!("pgcdc_layers_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "topic_prefix = \"from_file\"\nslot = \"file_slot\"\nskipped_operations = \"none\"\n[kafka]\n\"linger.ms\" = 9\n",
        )
        .expect("write");
        let (config, origins) = super::super::RunConfig::load([
            "--config",
            file.to_str().expect("utf-8"),
            "--pg-url",
            "postgres://u@h/d",
            "--slot",
            "flag_slot",
        ])
        .expect("valid");
        assert_eq!(config.topic_prefix, "from_file");
        assert_eq!(config.slot_name, "flag_slot");
        assert_eq!(config.skipped_operations, Default::default());
        assert_eq!(
            config.kafka_properties,
            [("linger.ms".to_owned(), "9".to_owned())]
        );
        assert_eq!(origins.of("topic_prefix"), Origin::File(file.clone()));
        assert_eq!(origins.of("slot_name"), Origin::Flag);
        assert_eq!(origins.of("publication_name"), Origin::Default);

        std::fs::write(&file, "slot = \"Bad-Slot\"\nno_such_key = 1\n").expect("write");
        let error = super::super::RunConfig::load([
            "--config",
            file.to_str().expect("utf-8"),
            "--pg-url",
            "postgres://u@h/d",
            "--topic-prefix",
            "app",
        ])
        .expect_err("invalid");
        let fields: Vec<&str> = error.0.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["no_such_key", "slot"]);
    }

    #[test]
    fn secret_names() {
        assert!(is_secret_name("sasl.password"));
        assert!(is_secret_name("sasl.jaas.config"));
        assert!(is_secret_name("schema_registry_basic_auth"));
        assert!(!is_secret_name("linger.ms"));
    }
}
