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
use pgcdc_kafka::command::{self, check::CheckArgs, snapshot::SnapshotArgs, status::StatusArgs};
use pgcdc_kafka::config::{layers, show, ConfigSources, LogFormat, Origins, Problem, RunConfig};
use pgcdc_kafka::http::HealthPolicy;
use tracing_subscriber::EnvFilter;

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
fn parse() -> Result<(Cli, Option<Layered>), ExitCode> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let relaxed = LAYERED.iter().fold(Cli::command(), |cmd, path| {
        map_subcommand(cmd, path, layers::relax)
    });
    // Whatever the relaxed pass rejects (help, unknown flags) clap reports
    // from the real command.
    let Ok(first) = relaxed.try_get_matches_from(&argv) else {
        return Ok((Cli::parse_from(argv), None));
    };
    let mut path: Vec<&str> = Vec::new();
    let mut leaf = &first;
    while let Some((name, sub)) = leaf.subcommand() {
        path.push(name);
        leaf = sub;
    }
    if !LAYERED.contains(&path.as_slice()) {
        return Ok((Cli::parse_from(argv), None));
    }
    let root = Cli::command();
    let cmd = path
        .iter()
        .try_fold(&root, |cmd, name| cmd.find_subcommand(name))
        .expect("the layered subcommand exists")
        .clone();
    let resolved = if SHARING.contains(&path.as_slice()) {
        let run = root.find_subcommand("run").expect("run exists");
        layers::resolve_shared(&cmd, leaf, run)
    } else {
        layers::resolve(&cmd, leaf)
    };
    if resolved.incomplete {
        eprintln!(
            "error: {}",
            pgcdc_kafka::config::LoadError(resolved.problems)
        );
        return Err(ExitCode::from(2));
    }
    // The top-level flags as given, then the subcommand with its resolved flags.
    let mut args: Vec<OsString> = argv.iter().take(1).cloned().collect();
    for arg in root.get_arguments() {
        let id = arg.get_id().as_str();
        let given = [&first, leaf]
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
    let matches = map_subcommand(Cli::command(), &path, layers::without_env)
        .try_get_matches_from(&args)
        .unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let leaf = path
        .iter()
        .try_fold(&matches, |m, name| m.subcommand_matches(name))
        .expect("the layered subcommand matched")
        .clone();
    Ok((
        cli,
        Some(Layered {
            cmd,
            matches: leaf,
            origins: resolved.origins,
            problems: resolved.problems,
            ignored: resolved.ignored,
        }),
    ))
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

#[tokio::main]
async fn main() -> ExitCode {
    let (cli, layered) = match parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    init_logging(cli.log_format);
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "pgcdc-kafka", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { subcommand } => print_man_page(subcommand.as_deref()),
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
            command::run::execute(config, health, &settings, &ignored, cli.log_format).await
        }
    }
}
