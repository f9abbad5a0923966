//! The `pgcdc-kafka` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pgcdc_kafka::config::{LogFormat, RunConfig};
use pgcdc_kafka::pipeline::Shutdown;
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
    Run(Box<RunConfig>),
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

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Run(config) => {
            if let Err(error) = config.validate() {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
            let (stop, shutdown) = Shutdown::new();
            tokio::spawn(async move {
                shutdown_signal().await;
                let _ = stop.send(true);
            });
            match pgcdc_kafka::pipeline::run(*config, shutdown).await {
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
