//! `pgcdc-kafka run`: the connector itself. Starts the operations endpoint
//! (`--metrics-addr`), turns SIGINT/SIGTERM into a graceful stop, runs the
//! pipeline until it stops, and reports the run on stdout.

use std::process::ExitCode;
use std::sync::Arc;

use super::{print_report, EXIT_INCOMPLETE};
use crate::build_info;
use crate::config::{LogFormat, RunConfig};
use crate::http::{HealthPolicy, HttpServer};
use crate::metrics::Metrics;
use crate::pipeline::Shutdown;

/// Runs the connector with a validated `config`; `settings` are its
/// settings on one line, secrets redacted
/// ([`crate::config::show::one_line`]), logged once at start with the
/// build; `ignored` are Debezium properties the import accepted without
/// effect, logged once.
pub async fn execute(
    config: RunConfig,
    health: HealthPolicy,
    settings: &str,
    ignored: &[(String, String)],
    format: LogFormat,
) -> ExitCode {
    // Where streaming starts is the slot's confirmed position, known once
    // connected: the "starting replication" line gives it.
    tracing::info!(
        version = build_info::VERSION,
        commit = build_info::COMMIT,
        librdkafka = build_info::librdkafka_version(),
        slot = %config.slot_name,
        settings,
        "starting pgcdc-kafka; streaming starts at the slot's confirmed position"
    );
    for (property, reason) in ignored {
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
                tracing::error!(error = %crate::error_chain(&error), "cannot start the metrics endpoint");
                return ExitCode::FAILURE;
            }
        }
    }
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    match crate::pipeline::run_with_metrics(config, shutdown, metrics).await {
        Ok(summary) => {
            // The run's report, on stdout: one human line, or one JSON object.
            match format {
                LogFormat::Text => println!("pgcdc-kafka: {summary}"),
                LogFormat::Json => print_report(format, &summary),
            }
            if summary.is_incomplete() {
                tracing::error!(
                    confirmed_lsn = ?summary.confirmed_lsn,
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
            tracing::error!(error = %crate::error_chain(&error), "stopped on error");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
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
