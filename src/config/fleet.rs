//! Fleet mode's settings (`run --fleet NAME`) and how a pipeline's record
//! from the fleet's configs topic becomes a [`RunConfig`].
//!
//! An instance's own command line, environment and `--config` file are
//! the shared layer of every pipeline it runs, exactly as a file's
//! top-level keys are for its `[pipelines.<name>]` tables: the record
//! (TOML, one pipeline's keys) is layered on top of them, above flags
//! and environment ([`super::pipelines`]). So a record carries what tells
//! the pipeline apart (`pg_url`, `slot`, `topic_prefix`, tables, format)
//! and the instances carry where Kafka is and how to log in.
//!
//! Records hold secrets by reference only (see [`crate::fleet::secrets`]):
//! each string value's `${env:VAR}` and `${file:/path}` are resolved on
//! the instance that runs the pipeline, before the record is layered.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Args, Command};

use super::layers::{self, Resolved};
use super::setting::{ArgIndex, LoadError, Origin, Origins, Problem, Setting};
use super::{file, pipelines, ConfigSources, RunConfig};
use crate::http::HealthPolicy;

/// The `run` flags of fleet mode.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Operations")]
pub struct FleetOptions {
    /// Join fleet NAME: run the pipelines the fleet's Kafka consumer group
    /// assigns to this instance, from the configs `pgcdc-kafka fleet apply`
    /// wrote (docs/FLEET.md). --pg-url, --slot and the rest then come from
    /// each pipeline's record.
    #[arg(long, env = "PGCDC_FLEET")]
    pub fleet: Option<String>,

    /// This instance's stable id in the fleet (Kafka static membership,
    /// group.instance.id): restarted within --fleet-session-timeout it
    /// keeps its pipelines, so a rolling restart moves none. Unique per
    /// instance; unset: a new member at each start.
    #[arg(long, env = "PGCDC_FLEET_INSTANCE")]
    pub fleet_instance: Option<String>,

    /// How long the fleet waits for an instance it no longer hears from
    /// before its pipelines move to the others (session.timeout.ms; the
    /// broker allows 6s to 300s by default). An instance cut off from Kafka
    /// for this long stops its pipelines itself.
    #[arg(long, env = "PGCDC_FLEET_SESSION_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub fleet_session_timeout: Duration,
}

/// The keys of a fleet instance rather than of a pipeline: a record may
/// not set them.
pub const INSTANCE_KEYS: &[&str] = &[
    "fleet",
    "fleet_instance",
    "fleet_session_timeout",
    "metrics_addr",
];

/// `run`'s arguments as fleet mode reads them.
#[derive(Debug, clap::Parser)]
#[command(name = "pgcdc-kafka run")]
struct InstanceArgs {
    #[command(flatten)]
    sources: ConfigSources,
    #[command(flatten)]
    run: RunConfig,
    #[command(flatten)]
    fleet: FleetOptions,
    #[command(flatten)]
    health: HealthPolicy,
}

/// A fleet instance's own settings, and what each pipeline record is
/// layered over.
#[derive(Debug, Clone)]
pub struct Instance {
    pub fleet: FleetOptions,
    /// The fleet's name, from --fleet.
    pub name: String,
    /// The instance's settings as a `run` configuration without a pipeline:
    /// Kafka (bootstrap servers, security) for the fleet's own clients.
    /// Its pipeline fields are placeholders and never used.
    pub shared: RunConfig,
    pub health: HealthPolicy,
    /// `run`'s command, and the command line's matches under it (from
    /// [`layers::relax`]), under which each record is layered.
    cmd: Command,
    matches: ArgMatches,
}

/// Placeholders for the pipeline settings `run` requires, to parse an
/// instance's settings that have none.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("pg_url", "postgres://fleet@localhost/fleet"),
    ("topic_prefix", "fleet"),
];

/// `Some` when `matches` (of [`layers::relax`]`(cmd)`, `cmd` being `run`'s
/// command) asks for fleet mode, by flag, environment or `--config` key:
/// the instance's settings, or every problem with them.
pub fn instance(cmd: &Command, matches: &ArgMatches) -> Option<Result<Instance, LoadError>> {
    let resolved = layers::resolve(cmd, matches);
    resolved.origins.by_id.get("fleet")?;
    let declares_pipelines = pipelines::declared(cmd, matches, None).is_some();
    let placeholders: Vec<Setting> = PLACEHOLDERS
        .iter()
        .filter(|(id, _)| !resolved.origins.by_id.contains_key(*id))
        .map(|(id, value)| Setting {
            id: (*id).to_owned(),
            values: vec![(*value).to_owned()],
            origin: Origin::Default,
        })
        .collect();
    let resolved = layers::resolve_pipeline(cmd, matches, None, &placeholders);
    Some(
        load(cmd, resolved).and_then(|(args, origins, mut problems)| {
            if declares_pipelines {
                problems.push(Problem {
                    field: pipelines::PIPELINES_KEY.to_owned(),
                    value: None,
                    message: "is not read in fleet mode: a fleet's pipelines live in its configs \
                          topic; load them with `pgcdc-kafka fleet apply <file>`"
                        .to_owned(),
                    origin: None,
                });
            }
            let name = args.fleet.fleet.clone().unwrap_or_default();
            if let Err(message) = FleetName::check(&name) {
                problems.push(Problem {
                    field: "fleet".to_owned(),
                    value: Some(name.clone()),
                    message,
                    origin: Some(origins.of("fleet")),
                });
            }
            layers::finish(cmd, &origins, problems, Ok(()))?;
            Ok(Instance {
                name,
                fleet: args.fleet,
                shared: args.run,
                health: args.health,
                cmd: cmd.clone(),
                matches: matches.clone(),
            })
        }),
    )
}

fn load(
    cmd: &Command,
    resolved: Resolved,
) -> Result<(InstanceArgs, Origins, Vec<Problem>), LoadError> {
    let cmd = cmd.clone().no_binary_name(true);
    let loaded = layers::parse_resolved::<InstanceArgs>(cmd, resolved)?;
    Ok((loaded.value, loaded.origins, loaded.problems))
}

impl Instance {
    /// Pipeline `name`'s configuration from its record's TOML text (secret
    /// references already resolved), layered over this instance's
    /// settings and validated: every problem at once.
    pub fn pipeline(&self, name: &str, record: &str) -> Result<RunConfig, LoadError> {
        let topic = PathBuf::from(format!("the fleet's configs topic, {}", self.name));
        pipeline_over(&self.cmd, &self.matches, name, record, &topic)
    }
}

/// The Kafka settings of an instance's `--config` file (bootstrap servers,
/// security, `[kafka]`), for the `fleet` subcommands to connect as the
/// instances do; every problem of the file at once.
pub fn instance_file(path: &std::path::Path) -> Result<RunConfig, LoadError> {
    use clap::CommandFactory;
    let cmd = InstanceArgs::command().no_binary_name(true);
    let args = [OsString::from("--config"), path.as_os_str().to_owned()];
    let matches = layers::relax(layers::without_env(cmd.clone()))
        .try_get_matches_from(args)
        .map_err(|e| LoadError(vec![problem("--config", String::new(), e.to_string())]))?;
    let placeholders: Vec<Setting> = PLACEHOLDERS
        .iter()
        .map(|(id, value)| Setting {
            id: (*id).to_owned(),
            values: vec![(*value).to_owned()],
            origin: Origin::Default,
        })
        .collect();
    let resolved = layers::resolve_pipeline(&cmd, &matches, None, &placeholders);
    let (args, origins, problems) = load(&cmd, resolved)?;
    layers::finish(&cmd, &origins, problems, Ok(()))?;
    Ok(args.run)
}

/// [`Instance::pipeline`] over no instance at all (what `fleet apply`
/// checks a record from the file `path` with): `run`'s defaults and the
/// record only.
pub fn pipeline_alone(
    name: &str,
    record: &str,
    path: &std::path::Path,
) -> Result<RunConfig, LoadError> {
    use clap::CommandFactory;
    let cmd = InstanceArgs::command().no_binary_name(true);
    let none: [OsString; 0] = [];
    let matches = layers::relax(layers::without_env(cmd.clone()))
        .try_get_matches_from(none)
        .map_err(|e| LoadError(vec![problem(name, String::new(), e.to_string())]))?;
    pipeline_over(&cmd, &matches, name, record, path)
}

fn problem(name: &str, key: String, message: String) -> Problem {
    Problem {
        field: if key.is_empty() {
            format!("pipeline {name}")
        } else {
            format!("pipeline {name}: {key}")
        },
        value: None,
        message,
        origin: None,
    }
}

fn pipeline_over(
    cmd: &Command,
    matches: &ArgMatches,
    name: &str,
    record: &str,
    path: &std::path::Path,
) -> Result<RunConfig, LoadError> {
    let table: toml::Table = record.parse().map_err(|e: toml::de::Error| {
        LoadError(vec![problem(
            name,
            String::new(),
            format!("its record is not valid TOML: {}", e.message()),
        )])
    })?;
    let mut problems = Vec::new();
    for key in table.keys() {
        if INSTANCE_KEYS.contains(&key.as_str()) || key == pipelines::PIPELINES_KEY {
            problems.push(problem(
                name,
                key.clone(),
                "is a setting of each instance, not of a pipeline; set it on the \
                 instances (`run` flags or their --config file)"
                    .to_owned(),
            ));
        }
    }
    let origin = Origin::Pipeline {
        path: path.to_owned(),
        name: name.to_owned(),
    };
    let index = ArgIndex::new(cmd);
    let own = table
        .iter()
        .filter(|(k, _)| !INSTANCE_KEYS.contains(&k.as_str()) && *k != pipelines::PIPELINES_KEY);
    let (settings, parse_problems) = file::parse_table(own, &origin, &index, None);
    problems.extend(parse_problems);
    let resolved = layers::resolve_pipeline(cmd, matches, None, &settings);
    let cmd_nb = cmd.clone().no_binary_name(true);
    let (args, origins, more) = match load(&cmd_nb, resolved) {
        Ok(loaded) => loaded,
        Err(error) => {
            problems.extend(error.0);
            return Err(LoadError(problems));
        }
    };
    problems.extend(more);
    layers::finish(cmd, &origins, problems, args.run.validate())?;
    Ok(args.run)
}

/// The Kafka connection properties of `shared` that the fleet's own
/// clients use too: the typed security settings and the pass-through
/// `security.*`, `sasl.*` and `ssl.*` properties (not the producer tuning).
pub fn connection_properties(shared: &RunConfig) -> Vec<(String, String)> {
    let passed = shared
        .kafka_properties
        .iter()
        .filter(|(k, _)| {
            ["security.", "sasl.", "ssl."]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .cloned();
    let typed = shared
        .kafka_security
        .properties()
        .into_iter()
        .map(|t| (t.property.to_owned(), t.value));
    passed.chain(typed).collect()
}

/// A fleet's name: it names the group and the fleet's topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetName(String);

/// Longest fleet name: topic names are capped at 249 characters.
const MAX_NAME_LEN: usize = 200;

impl FleetName {
    /// Whether `name` can name a fleet, with the reason if not.
    pub fn check(name: &str) -> Result<(), String> {
        let ok = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            && name != "."
            && name != "..";
        if ok {
            Ok(())
        } else {
            Err(format!(
                "is not a valid fleet name: use 1-{MAX_NAME_LEN} letters, digits, '.', '_' \
                 or '-' (it names the consumer group and Kafka topics), e.g. --fleet prod-eu"
            ))
        }
    }

    /// The consumer group the instances join.
    pub fn group(&self) -> String {
        format!("pgcdc-fleet.{}", self.0)
    }

    /// The compacted topic of pipeline configs.
    pub fn configs_topic(&self) -> String {
        format!("pgcdc-fleet.{}.configs", self.0)
    }

    /// The topic whose partitions stand for pipelines.
    pub fn assignment_topic(&self) -> String {
        format!("pgcdc-fleet.{}.assignment", self.0)
    }

    /// The compacted topic where instances report their pipelines' states.
    pub fn status_topic(&self) -> String {
        format!("pgcdc-fleet.{}.status", self.0)
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for FleetName {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        FleetName::check(name).map(|()| FleetName(name.to_owned()))
    }
}

impl fmt::Display for FleetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_layered_validated_and_kept_from_instance_keys() {
        let file = std::path::Path::new("fleet.toml");
        let run = pipeline_alone(
            "orders",
            "pg_url = \"postgres://u@h/shop\"\ntopic_prefix = \"shop\"\nslot = \"orders\"\n\
             table = [\"public.orders\"]\n[kafka]\n\"linger.ms\" = 7\n",
            file,
        )
        .expect("valid record");
        assert_eq!(run.slot_name, "orders");
        assert_eq!(run.tables, ["public.orders"]);
        assert_eq!(
            run.kafka_properties,
            [("linger.ms".to_owned(), "7".to_owned())]
        );
        let error = pipeline_alone(
            "orders",
            "pg_url = \"postgres://u@h/shop\"\ntopic_prefix = \"shop\"\nslott = \"o\"\n\
             metrics_addr = \"127.0.0.1:1\"\nfleet = \"x\"\n",
            file,
        )
        .expect_err("bad keys")
        .to_string();
        assert!(
            error.contains("slott") && error.contains("did you mean \"slot\""),
            "{error}"
        );
        assert!(
            error.contains("pipeline orders: metrics_addr: is a setting of each instance"),
            "{error}"
        );
        assert!(error.contains("pipeline orders: fleet"), "{error}");
        let missing = pipeline_alone("orders", "slot = \"o\"\n", file)
            .expect_err("no pg_url")
            .to_string();
        assert!(
            missing.contains("pg_url") && missing.contains("required"),
            "{missing}"
        );
        let broken = pipeline_alone("orders", "slot = ", file)
            .expect_err("bad toml")
            .to_string();
        assert!(broken.contains("not valid TOML"), "{broken}");
    }

    #[test]
    fn names_are_topic_safe() {
        let name: FleetName = "prod-eu.1".parse().expect("valid");
        assert_eq!(name.group(), "pgcdc-fleet.prod-eu.1");
        assert_eq!(name.configs_topic(), "pgcdc-fleet.prod-eu.1.configs");
        assert!("".parse::<FleetName>().is_err());
        assert!("a b".parse::<FleetName>().is_err());
        assert!("..".parse::<FleetName>().is_err());
        let error = "x/y".parse::<FleetName>().expect_err("slash");
        assert!(error.contains("--fleet prod-eu"), "{error}");
    }
}
