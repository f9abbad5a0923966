//! The `pgcdc-kafka` command.
//!
//! Parses the command line, through the configuration layers for the
//! subcommands that take `run`'s flags, and hands each subcommand to its
//! module in [`pgcdc_kafka::command`], which also lists the exit codes.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use pgcdc_kafka::command::fleet::FleetCommand;
use pgcdc_kafka::command::run::Launch;
use pgcdc_kafka::command::{self, check::CheckArgs, snapshot::SnapshotArgs, status::StatusArgs};
use pgcdc_kafka::config::fleet::{FleetOptions, Instance};
use pgcdc_kafka::config::pipelines::{self, PipelineName};
use pgcdc_kafka::config::{layers, show, ConfigSources, LogFormat, Origins, Problem, RunConfig};
use pgcdc_kafka::http::HealthPolicy;
use pgcdc_kafka::supervisor::PipelineSpec;
use tracing_subscriber::EnvFilter;

/// jemalloc serves every allocation of the process: Rust's through this,
/// and C's (librdkafka's) because the crate exports `malloc` and `free`
/// unprefixed. See the dependency's comment in Cargo.toml.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// PostgreSQL change data capture into Kafka, Debezium-compatible.
#[derive(Debug, Parser)]
#[command(name = "pgcdc-kafka", version = pgcdc_kafka::build_info::version_line(), about)]
struct Cli {
    /// Log format.
    #[arg(
        long,
        global = true,
        env = "PGCDC_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Stream changes from a replication slot into Kafka until stopped.
    Run(Box<RunArgs>),
    /// Check PostgreSQL, Kafka and the registry for what `run` needs; exit 0
    /// when nothing fails (warnings allowed).
    Check(Box<CheckArgs>),
    /// Show the replication slot's state and a running connector's progress.
    Status(Box<StatusArgs>),
    /// Ask a running connector for an incremental snapshot of tables (or,
    /// with --stop, to stop one) by inserting a signal into its
    /// --signal-data-collection table.
    Snapshot(Box<SnapshotArgs>),
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Manage a fleet's pipelines (instances run with `run --fleet NAME`;
    /// docs/FLEET.md).
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Print a shell completion script, generated from this binary's flags:
    /// e.g. `pgcdc-kafka completions bash > /etc/bash_completion.d/pgcdc-kafka`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff), generated from this binary's flags: of
    /// pgcdc-kafka, or of one subcommand (`pgcdc-kafka man run | man -l -`).
    Man {
        /// The subcommand whose page to print, e.g. run.
        subcommand: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the configuration `run` would use with the same flags, as a
    /// TOML file for --config, each value followed by where it came from
    /// (flag, env, file, debezium, default); secrets redacted.
    Show(Box<RunArgs>),
}

/// `run`'s flags: the configuration files, the connector's configuration
/// and the readiness policy of its --metrics-addr endpoint.
#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    sources: ConfigSources,
    #[command(flatten)]
    config: RunConfig,
    #[command(flatten)]
    health: HealthPolicy,
    #[command(flatten)]
    fleet: FleetOptions,
}

/// The subcommands that take `run`'s flags and so read `--config` and
/// `--debezium-config`.
const LAYERED: &[&[&str]] = &[
    &["run"],
    &["check"],
    &["config", "show"],
    &["status"],
    &["snapshot"],
];

/// The layered subcommands that share some of `run`'s settings only: they
/// read `run`'s `--config` file, skipping the keys they lack.
const SHARING: &[&[&str]] = &[&["status"], &["snapshot"]];

/// The layered subcommands that run each pipeline of a `--config` file
/// declaring several (`[pipelines.<name>]`, see `config::pipelines`).
const PIPELINED: &[&[&str]] = &[&["run"], &["check"], &["config", "show"], &["status"]];

/// One parsed command line: of the whole configuration, or (`pipeline`) of
/// one pipeline of a file that declares several.
struct Parsed {
    pipeline: Option<PipelineName>,
    cli: Cli,
    layered: Option<Layered>,
}

/// A parsed command line whose configuration came through the layers.
struct Layered {
    /// The subcommand's own command, for naming its arguments.
    cmd: clap::Command,
    /// Its final matches, defaults included.
    matches: ArgMatches,
    origins: Origins,
    /// Problems of the layers that still let the command line parse.
    problems: Vec<Problem>,
    /// Debezium properties accepted without effect, with the reason.
    ignored: Vec<(String, String)>,
}

/// Applies `f` to the subcommand at `path`.
fn map_subcommand(
    cmd: clap::Command,
    path: &[&str],
    f: fn(clap::Command) -> clap::Command,
) -> clap::Command {
    match path {
        [] => f(cmd),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |c| map_subcommand(c, rest, f)),
    }
}

/// Parses the command line; for the subcommands that take `run`'s flags,
/// through the configuration layers (flags > env > --config > --debezium-config
/// > defaults). Exits on `--help` and on command-line errors, as clap does.
fn parse() -> Result<Vec<Parsed>, ExitCode> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let relaxed = LAYERED.iter().fold(Cli::command(), |cmd, path| {
        map_subcommand(cmd, path, layers::relax)
    });
    // Whatever the relaxed pass rejects (help, unknown flags) clap reports
    // from the real command.
    let unlayered = |argv| {
        Ok(vec![Parsed {
            pipeline: None,
            cli: Cli::parse_from(argv),
            layered: None,
        }])
    };
    let Ok(first) = relaxed.try_get_matches_from(&argv) else {
        return unlayered(argv);
    };
    let mut path: Vec<&str> = Vec::new();
    let mut leaf = &first;
    while let Some((name, sub)) = leaf.subcommand() {
        path.push(name);
        leaf = sub;
    }
    if !LAYERED.contains(&path.as_slice()) {
        return unlayered(argv);
    }
    let root = Cli::command();
    let cmd = path
        .iter()
        .try_fold(&root, |cmd, name| cmd.find_subcommand(name))
        .expect("the layered subcommand exists")
        .clone();
    let run = SHARING
        .contains(&path.as_slice())
        .then(|| root.find_subcommand("run").expect("run exists"));
    if PIPELINED.contains(&path.as_slice()) {
        if let Some(declared) = pipelines::declared(&cmd, leaf, run) {
            return parse_pipelines(&argv, &root, &first, leaf, &path, &cmd, declared);
        }
    }
    let resolved = match run {
        Some(run) => layers::resolve_shared(&cmd, leaf, run),
        None => layers::resolve(&cmd, leaf),
    };
    if resolved.incomplete {
        let mut problems = resolved.problems;
        if pipelines::declared(&cmd, leaf, run).is_some() {
            // `snapshot` does not pick a pipeline of the file (yet).
            problems.push(Problem {
                field: "--config".to_owned(),
                value: None,
                message: format!(
                    "declares pipelines, and `{}` works on one: pass that pipeline's \
                     --pg-url and --slot (and --signal-data-collection) as flags",
                    path.join(" ")
                ),
                origin: None,
            });
        }
        eprintln!("error: {}", pgcdc_kafka::config::LoadError(problems));
        return Err(ExitCode::from(2));
    }
    let (cli, layered) = parse_resolved(&argv, &root, &first, leaf, &path, cmd, resolved);
    Ok(vec![Parsed {
        pipeline: None,
        cli,
        layered: Some(layered),
    }])
}

/// [`parse`] of a command line whose `--config` file declares pipelines:
/// one [`Parsed`] per pipeline, or every problem of every pipeline.
fn parse_pipelines(
    argv: &[OsString],
    root: &clap::Command,
    first: &ArgMatches,
    leaf: &ArgMatches,
    path: &[&str],
    cmd: &clap::Command,
    declared: pipelines::Declared,
) -> Result<Vec<Parsed>, ExitCode> {
    let mut per_pipeline = Vec::new();
    let mut incomplete = false;
    let mut parsed = Vec::new();
    for (name, mut resolved) in declared.each {
        // Problems of the `pipelines` table itself go with every pipeline
        // (reported once), and with what `pipelined` finds.
        resolved.problems.extend(declared.problems.iter().cloned());
        per_pipeline.push((name.clone(), resolved.problems.clone()));
        if resolved.incomplete {
            incomplete = true;
            continue;
        }
        let (cli, layered) = parse_resolved(argv, root, first, leaf, path, cmd.clone(), resolved);
        parsed.push(Parsed {
            pipeline: Some(name),
            cli,
            layered: Some(layered),
        });
    }
    if incomplete || parsed.is_empty() {
        let mut all = pipelines::merge_problems(&per_pipeline);
        if all.is_empty() {
            all = declared.problems;
        }
        eprintln!("error: {}", pgcdc_kafka::config::LoadError(all));
        return Err(ExitCode::from(2));
    }
    Ok(parsed)
}

/// Parses a resolved command line with the real command.
fn parse_resolved(
    argv: &[OsString],
    root: &clap::Command,
    first: &ArgMatches,
    leaf: &ArgMatches,
    path: &[&str],
    cmd: clap::Command,
    resolved: layers::Resolved,
) -> (Cli, Layered) {
    // The top-level flags as given, then the subcommand with its resolved flags.
    let mut args: Vec<OsString> = argv.iter().take(1).cloned().collect();
    for arg in root.get_arguments() {
        let id = arg.get_id().as_str();
        let given = [first, leaf]
            .into_iter()
            .find(|m| m.value_source(id) == Some(ValueSource::CommandLine));
        if let (Some(long), Some(m)) = (arg.get_long(), given) {
            for value in m.get_raw(id).into_iter().flatten() {
                let mut flag = OsString::from(format!("--{long}="));
                flag.push(value);
                args.push(flag);
            }
        }
    }
    args.extend(path.iter().map(OsString::from));
    args.extend(resolved.args);
    let matches = map_subcommand(Cli::command(), path, layers::without_env)
        .try_get_matches_from(&args)
        .unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let leaf = path
        .iter()
        .try_fold(&matches, |m, name| m.subcommand_matches(name))
        .expect("the layered subcommand matched")
        .clone();
    (
        cli,
        Layered {
            cmd,
            matches: leaf,
            origins: resolved.origins,
            problems: resolved.problems,
            ignored: resolved.ignored,
        },
    )
}

/// Reports the layers' problems and `config`'s own together; `false` when
/// there was any.
fn configuration_is_valid(layered: Option<&Layered>, config: &RunConfig) -> bool {
    let result = match layered {
        Some(l) => layers::finish(&l.cmd, &l.origins, l.problems.clone(), config.validate()),
        None => layers::finish(
            &RunConfig::augment_args(clap::Command::new("run")),
            &Origins::default(),
            Vec::new(),
            config.validate(),
        ),
    };
    match result {
        Ok(()) => true,
        Err(error) => {
            eprintln!("error: {error}");
            false
        }
    }
}

/// Whether text logs may carry ANSI colour: only when stderr is a terminal
/// (a file or a pipe gets plain text) and `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
fn log_colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Reports the problems of the `--config` file of a subcommand that has no
/// validation of its own; `false` when there was any.
fn layers_are_valid(layered: Option<&Layered>) -> bool {
    let Some(l) = layered else { return true };
    match layers::finish(&l.cmd, &l.origins, l.problems.clone(), Ok(())) {
        Ok(()) => true,
        Err(error) => {
            eprintln!("error: {error}");
            false
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_env("PGCDC_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(log_colour())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// `pgcdc-kafka man [subcommand]`: the page of the whole command or of one
/// subcommand (named `pgcdc-kafka-<subcommand>`, as man sections name them).
fn print_man_page(subcommand: Option<&str>) -> ExitCode {
    let mut cmd = Cli::command();
    cmd.build();
    let page = match subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            // clap names are `&'static str` (without its `string` feature);
            // this one lives until the process exits a moment later anyway.
            Some(sub) => sub
                .clone()
                .name(&*format!("pgcdc-kafka-{name}").leak())
                .version(pgcdc_kafka::build_info::version_line()),
            None => {
                eprintln!("error: no subcommand {name:?}; `pgcdc-kafka --help` lists them");
                return ExitCode::from(2);
            }
        },
    };
    let mut out = std::io::stdout().lock();
    match clap_mangen::Man::new(page).render(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the man page: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `run` in fleet mode (`--fleet`, by flag, environment or `--config`
/// key): the instance's settings and the log format, or the exit code
/// after reporting its problems; `None` for any other command line.
fn fleet_instance() -> Option<Result<(Instance, LogFormat), ExitCode>> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let relaxed = LAYERED.iter().fold(Cli::command(), |cmd, path| {
        map_subcommand(cmd, path, layers::relax)
    });
    let first = relaxed.try_get_matches_from(&argv).ok()?;
    let leaf = first.subcommand_matches("run")?;
    let root = Cli::command();
    let cmd = root.find_subcommand("run")?.clone();
    let format = first
        .try_get_raw("log_format")
        .ok()
        .flatten()
        .and_then(|mut v| v.next())
        .map(|f| f.to_string_lossy().into_owned())
        .and_then(|f| <LogFormat as clap::ValueEnum>::from_str(&f, true).ok())
        .unwrap_or(LogFormat::Text);
    match pgcdc_kafka::config::fleet::instance(&cmd, leaf)? {
        Ok(instance) => Some(Ok((instance, format))),
        Err(error) => {
            eprintln!("error: {error}");
            Some(Err(ExitCode::from(2)))
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(fleet) = fleet_instance() {
        return match fleet {
            Ok((instance, format)) => {
                init_logging(format);
                command::fleet::run(instance).await
            }
            Err(code) => code,
        };
    }
    let parsed = match parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let Some(first) = parsed.first() else {
        eprintln!("error: the --config file declares no pipeline");
        return ExitCode::from(2);
    };
    init_logging(first.cli.log_format);
    if first.pipeline.is_some() {
        return pipelined(parsed).await;
    }
    let Some(Parsed { cli, layered, .. }) = parsed.into_iter().next() else {
        return ExitCode::from(2);
    };
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "pgcdc-kafka", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { subcommand } => print_man_page(subcommand.as_deref()),
        Command::Fleet(command) => command::fleet::execute(command, cli.log_format).await,
        Command::Config(ConfigCommand::Show(args)) => {
            if let Some(l) = &layered {
                print!(
                    "{}",
                    command::config::render(&l.cmd, &l.matches, &l.origins, &l.ignored)
                );
            }
            if configuration_is_valid(layered.as_ref(), &args.config) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Command::Check(args) => {
            if !configuration_is_valid(layered.as_ref(), &args.run) {
                return ExitCode::from(2);
            }
            command::check::execute(&args, cli.log_format).await
        }
        Command::Status(args) => {
            if !layers_are_valid(layered.as_ref()) {
                return ExitCode::from(2);
            }
            command::status::execute(&args, cli.log_format).await
        }
        Command::Snapshot(args) => {
            if !layers_are_valid(layered.as_ref()) {
                return ExitCode::from(2);
            }
            command::snapshot::execute(&args, cli.log_format).await
        }
        Command::Run(args) => {
            let RunArgs { config, health, .. } = *args;
            if !configuration_is_valid(layered.as_ref(), &config) {
                return ExitCode::from(2);
            }
            let settings = layered
                .as_ref()
                .map(|l| show::one_line(&l.cmd, &l.matches, &l.origins))
                .unwrap_or_default();
            let ignored = layered.map(|l| l.ignored).unwrap_or_default();
            let metrics_addr = config.metrics_addr;
            let spec = PipelineSpec {
                name: PipelineName::single(),
                config,
                health,
            };
            let launch = Launch {
                spec,
                settings,
                ignored,
            };
            command::run::execute(vec![launch], metrics_addr, false, cli.log_format).await
        }
    }
}

/// The `run`'s configuration a pipelined command line carries.
fn run_config(command: &Command) -> Option<&RunConfig> {
    match command {
        Command::Run(args) => Some(&args.config),
        Command::Check(args) => Some(&args.run),
        Command::Config(ConfigCommand::Show(args)) => Some(&args.config),
        _ => None,
    }
}

/// A command over each pipeline of a `--config` file that declares
/// several: every pipeline's problems are reported together (and what no
/// two may share), then the command runs for all of them.
async fn pipelined(parsed: Vec<Parsed>) -> ExitCode {
    let mut each = Vec::new();
    let mut per_pipeline = Vec::new();
    for Parsed {
        pipeline,
        cli,
        layered,
    } in parsed
    {
        let (Some(name), Some(layered)) = (pipeline, layered) else {
            continue;
        };
        let validation = run_config(&cli.command).map_or(Ok(()), RunConfig::validate);
        let problems = layers::finish(
            &layered.cmd,
            &layered.origins,
            layered.problems.clone(),
            validation,
        )
        .err()
        .map(|e| e.0)
        .unwrap_or_default();
        per_pipeline.push((name.clone(), problems));
        each.push((name, cli, layered));
    }
    let mut problems = pipelines::merge_problems(&per_pipeline);
    problems
        .extend(pipelines::distinct(each.iter().filter_map(
            |(name, cli, _)| Some((name, run_config(&cli.command)?)),
        )));
    let Some(format) = each.first().map(|(_, cli, _)| cli.log_format) else {
        return ExitCode::from(2);
    };
    let invalid = !problems.is_empty();
    if invalid {
        eprintln!("error: {}", pgcdc_kafka::config::LoadError(problems));
    }
    let mut launches = Vec::new();
    let mut failed = false;
    for (name, cli, layered) in each {
        match cli.command {
            Command::Config(ConfigCommand::Show(_)) => {
                println!("# [pipelines.{name}]");
                print!(
                    "{}",
                    command::config::render(
                        &layered.cmd,
                        &layered.matches,
                        &layered.origins,
                        &layered.ignored
                    )
                );
            }
            _ if invalid => {}
            Command::Run(args) => {
                let RunArgs { config, health, .. } = *args;
                let settings = show::one_line(&layered.cmd, &layered.matches, &layered.origins);
                launches.push(Launch {
                    spec: PipelineSpec {
                        name,
                        config,
                        health,
                    },
                    settings,
                    ignored: layered.ignored,
                });
            }
            Command::Check(args) => {
                let report = command::check::run(&args).await;
                failed |= !report.passed();
                command::print_named_report(format, &name, &report, false);
            }
            Command::Status(mut args) => {
                args.pipeline = Some(name.clone());
                let report = command::status::run(&args).await;
                failed |= !report.ok();
                command::print_named_report(format, &name, &report, false);
            }
            _ => {}
        }
    }
    if invalid {
        return ExitCode::from(2);
    }
    if let Some(first) = launches.first() {
        let metrics_addr = first.spec.config.metrics_addr;
        return command::run::execute(launches, metrics_addr, true, format).await;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
