//! The `pgcdc-kafka` command.
//!
//! Exit codes: 0 success (a stop on request or at `--max-run`, a caught-up
//! bounded run that delivered everything, a check that passed); 1 an error
//! that stopped it (or a failed check); 2 invalid flags or configuration;
//! [`EXIT_INCOMPLETE`] (3) a `--stop-when-caught-up` run that reached its
//! target but stopped before Kafka acknowledged all it had read.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use pgcdc_kafka::check::CheckArgs;
use pgcdc_kafka::config::{layers, show, ConfigSources, LogFormat, Origins, Problem, RunConfig};
use pgcdc_kafka::http::{HealthPolicy, HttpServer};
use pgcdc_kafka::metrics::Metrics;
use pgcdc_kafka::pipeline::Shutdown;
use pgcdc_kafka::source::signal::SnapshotArgs;
use pgcdc_kafka::status::StatusArgs;
use tracing_subscriber::EnvFilter;

/// A bounded run that reached its target with records Kafka had not
/// acknowledged when the drain ended (a failed delivery, or
/// `--shutdown-timeout` spent waiting): not a success for a scheduler, though
/// nothing is lost (the slot stays before them and the next run sends them).
const EXIT_INCOMPLETE: u8 = 3;

/// PostgreSQL change data capture into Kafka, Debezium-compatible.
#[derive(Debug, Parser)]
#[command(name = "pgcdc-kafka", version, about)]
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
const LAYERED: &[&[&str]] = &[&["run"], &["check"], &["config", "show"]];

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
    let resolved = layers::resolve(&cmd, leaf);
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

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_env("PGCDC_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops gracefully");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Prints a `check` or `status` report on stdout: as text, or as one JSON
/// object with --log-format json.
fn print_report<R: std::fmt::Display + serde::Serialize>(format: LogFormat, report: &R) {
    match format {
        LogFormat::Text => println!("{report}"),
        LogFormat::Json => match serde_json::to_string(report) {
            Ok(json) => println!("{json}"),
            Err(error) => tracing::warn!(%error, "cannot serialize the report"),
        },
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
        Command::Config(ConfigCommand::Show(args)) => {
            if let Some(l) = &layered {
                print!("{}", show::render(&l.cmd, &l.matches, &l.origins));
                if !l.ignored.is_empty() {
                    println!("\n# Debezium properties accepted without effect:");
                    for (property, reason) in &l.ignored {
                        println!("#   {property}: {reason}");
                    }
                }
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
            let report = pgcdc_kafka::check::run(&args).await;
            print_report(cli.log_format, &report);
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Status(args) => {
            let report = pgcdc_kafka::status::run(&args).await;
            print_report(cli.log_format, &report);
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Snapshot(args) => match pgcdc_kafka::source::signal::send(&args).await {
            Ok(sent) => {
                print_report(cli.log_format, &sent);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {}", pgcdc_kafka::error_chain(&error));
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => {
            let RunArgs { config, health, .. } = *args;
            if !configuration_is_valid(layered.as_ref(), &config) {
                return ExitCode::from(2);
            }
            for (property, reason) in layered.iter().flat_map(|l| &l.ignored) {
                tracing::info!(%property, %reason, "debezium property accepted without effect");
            }
            let (stop, shutdown) = Shutdown::new();
            let metrics = Arc::new(Metrics::new());
            if let Some(addr) = config.metrics_addr {
                match HttpServer::bind(addr, Arc::clone(&metrics), health).await {
                    Ok(server) => {
                        tokio::spawn(server.serve(std::future::pending()));
                    }
                    Err(error) => {
                        tracing::error!(error = %pgcdc_kafka::error_chain(&error), "cannot start the metrics endpoint");
                        return ExitCode::FAILURE;
                    }
                }
            }
            tokio::spawn(async move {
                shutdown_signal().await;
                let _ = stop.send(true);
            });
            match pgcdc_kafka::pipeline::run_with_metrics(config, shutdown, metrics).await {
                Ok(summary) => {
                    // The run's report, on stdout: one human line, or one JSON object.
                    match cli.log_format {
                        LogFormat::Text => println!("pgcdc-kafka: {summary}"),
                        LogFormat::Json => match serde_json::to_string(&summary) {
                            Ok(json) => println!("{json}"),
                            Err(error) => {
                                tracing::warn!(%error, "cannot serialize the run summary")
                            }
                        },
                    }
                    if summary.is_incomplete() {
                        tracing::error!(
                            confirmed_lsn = %summary.confirmed_lsn,
                            exit_code = EXIT_INCOMPLETE,
                            "the run caught up, but Kafka did not acknowledge every record it read \
                             before the drain ended (a delivery failed, or --shutdown-timeout \
                             passed); the slot is confirmed only up to the last acknowledged \
                             transaction, so the next run sends the rest again"
                        );
                        return ExitCode::from(EXIT_INCOMPLETE);
                    }
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    tracing::error!(error = %pgcdc_kafka::error_chain(&error), "stopped on error");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
