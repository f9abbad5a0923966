//! The `pgcdc-kafka` command.

use std::process::ExitCode;

use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use pgcdc_kafka::check::CheckArgs;
use pgcdc_kafka::config::{LogFormat, RunConfig};
use pgcdc_kafka::http::{HealthPolicy, HttpServer};
use pgcdc_kafka::metrics::Metrics;
use pgcdc_kafka::pipeline::Shutdown;
use pgcdc_kafka::status::StatusArgs;
use tracing_subscriber::EnvFilter;

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
}

/// `run`'s flags: the connector's configuration and the readiness policy of
/// its --metrics-addr endpoint.
#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    config: RunConfig,
    #[command(flatten)]
    health: HealthPolicy,
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
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Check(args) => {
            if let Err(error) = args.run.validate() {
                eprintln!("error: {error}");
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
        Command::Run(args) => {
            let RunArgs { config, health } = *args;
            if let Err(error) = config.validate() {
                eprintln!("error: {error}");
                return ExitCode::from(2);
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
