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
//!
//! A file that declares several pipelines is resolved once per pipeline,
//! with the pipeline's table on top of every layer (see [`super::pipelines`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use super::setting::{ArgIndex, ArgInfo, Origin, Origins, Problem, Setting, Shape};
use super::setting::{LoadError, CONFIG_ID, DEBEZIUM_CONFIG_ID};
use super::{debezium, file};

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
    resolve_with(cmd, matches, None, &[])
}

/// [`resolve`] for a command that reads `run`'s `--config` file for the
/// settings it shares with `run` (`status`, `snapshot`): the file's keys
/// that are `run`'s but not `cmd`'s are skipped, so one file serves both;
/// a key neither knows is still an error.
pub fn resolve_shared(cmd: &Command, matches: &ArgMatches, run: &Command) -> Resolved {
    resolve_with(cmd, matches, Some(&ArgIndex::new(run)), &[])
}

/// [`resolve`] (or [`resolve_shared`], with `run`) for one pipeline of a
/// file that declares several: the pipeline's own table (`overlay`) is
/// above every other layer, flags included, since it is the one place
/// that tells the pipelines apart.
pub(super) fn resolve_pipeline(
    cmd: &Command,
    matches: &ArgMatches,
    run: Option<&Command>,
    overlay: &[Setting],
) -> Resolved {
    resolve_with(cmd, matches, run.map(ArgIndex::new).as_ref(), overlay)
}

fn resolve_with(
    cmd: &Command,
    matches: &ArgMatches,
    shared: Option<&ArgIndex>,
    overlay: &[Setting],
) -> Resolved {
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
        let (settings, problems) = file::read(&path, &index, shared);
        layers.push(settings);
        resolved.problems.extend(problems);
    }

    let mut probe = without_env(relax_required(cmd.clone())).no_binary_name(true);
    for info in &index.args {
        let own = overlay.iter().find(|s| s.id == info.id);
        let from_command_line = explicit(matches, info);
        let (values, origin) = if info.shape == Shape::KeyValue {
            let mut merged: BTreeMap<String, (String, Origin)> = BTreeMap::new();
            let layered = layers.iter().flatten().filter(|s| s.id == info.id);
            // A variable holding one entry per line may end in a newline
            // (or hold blank lines): those separate nothing.
            let given = from_command_line.iter().flat_map(|(values, origin)| {
                values
                    .iter()
                    .filter(|v| !v.trim().is_empty())
                    .map(move |v| (v, origin))
            });
            let own = own
                .into_iter()
                .flat_map(|s| s.values.iter().map(move |v| (v, &s.origin)));
            for (entry, origin) in layered
                .flat_map(|s| s.values.iter().map(move |v| (v, &s.origin)))
                .chain(given)
                .chain(own)
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
        } else if let Some(own) = own {
            (own.values.clone(), Some(own.origin.clone()))
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
    resolved.args.extend(positional_args(cmd, matches));
    resolved
}

/// The positional arguments (`snapshot`'s tables), after `--`: they come
/// from the command line only, never from a layer.
fn positional_args(cmd: &Command, matches: &ArgMatches) -> Vec<OsString> {
    let values: Vec<OsString> = cmd
        .get_positionals()
        .flat_map(|a| raw_values(matches, a.get_id().as_str()))
        .map(OsString::from)
        .collect();
    if values.is_empty() {
        return values;
    }
    std::iter::once(OsString::from("--"))
        .chain(values)
        .collect()
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
    parse_resolved(cmd, resolved)
}

/// Parses a [`Resolved`] command line of `cmd` (built with
/// `no_binary_name`); `Err` with its problems when it is incomplete.
pub fn parse_resolved<T: clap::FromArgMatches>(
    cmd: Command,
    resolved: Resolved,
) -> Result<Loaded<T>, LoadError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_pick_the_closest_key() {
        let index = ArgIndex::new(&<super::super::RunConfig as clap::Args>::augment_args(
            Command::new("run"),
        ));
        assert_eq!(index.suggest("topc_prefix"), Some("topic_prefix"));
        assert_eq!(index.suggest("slot"), Some("slot"));
        assert_eq!(index.suggest("entirely_unrelated_words"), None);
    }

    #[test]
    fn run_config_load_layers_the_file_under_flags() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("c.toml");
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
        use super::super::setting::is_secret_name;
        assert!(is_secret_name("sasl.password"));
        assert!(is_secret_name("sasl.jaas.config"));
        assert!(is_secret_name("schema_registry_basic_auth"));
        assert!(!is_secret_name("linger.ms"));
    }
}
