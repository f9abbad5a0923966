//! `pgcdc-kafka run`: the connector itself. Starts the operations endpoint
//! (`--metrics-addr`), turns SIGINT/SIGTERM into a graceful stop, runs the
//! pipeline until it stops, and reports the run on stdout.

use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{signal, Signal, SignalKind};

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
    let (stop, force, shutdown) = Shutdown::forceable();
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
    let mut signals = StopSignals::new();
    tokio::spawn(async move {
        signals.next().await;
        tracing::info!(
            "stop requested: finishing the current transaction and waiting for Kafka's \
             acknowledgements; a second SIGINT/SIGTERM stops without waiting"
        );
        let _ = stop.send(true);
        signals.next().await;
        let _ = force.send(true);
        // The forced stop confirms what was acknowledged and returns at
        // once; should anything else hold it up, the process ends anyway.
        tokio::time::sleep(FORCED_EXIT_GRACE).await;
        tracing::error!(
            "the forced stop did not finish within {FORCED_EXIT_GRACE:?}; exiting now \
             (the slot keeps the position last confirmed, which Kafka acknowledged)"
        );
        std::process::exit(1);
    });
    match crate::pipeline::run_with_metrics(config, shutdown, metrics).await {
        Ok(summary) => {
            // The run's report, on stdout: one human line, or one JSON object.
            match format {
                LogFormat::Text => println!("pgcdc-kafka: {summary}"),
                LogFormat::Json => print_report(format, &summary),
            }
            let mut code = 0;
            if summary.is_incomplete() {
                tracing::error!(
                    confirmed_lsn = ?summary.confirmed_lsn,
                    exit_code = EXIT_INCOMPLETE,
                    "the run caught up, but Kafka did not acknowledge every record it read \
                     before the drain ended (a delivery failed, or --shutdown-timeout \
                     passed); the slot is confirmed only up to the last acknowledged \
                     transaction, so the next run sends the rest again"
                );
                code = EXIT_INCOMPLETE;
            }
            if summary.forced {
                // A delivery wait abandoned by the forced stop may still be
                // blocked on librdkafka, and the runtime would wait for it.
                use std::io::Write;
                let _ = std::io::stdout().flush();
                std::process::exit(i32::from(code));
            }
            ExitCode::from(code)
        }
        Err(error) => {
            tracing::error!(error = %crate::error_chain(&error), "stopped on error");
            ExitCode::FAILURE
        }
    }
}

/// How long a forced stop (the second signal) may take before the process
/// exits regardless.
const FORCED_EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// SIGINT and SIGTERM, listened for from creation on, so that a second
/// signal right after the first is not missed.
struct StopSignals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl StopSignals {
    fn new() -> Self {
        let listen = |kind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}; it stops the connector at once");
                None
            }
        };
        StopSignals {
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// Resolves on the next SIGINT or SIGTERM.
    async fn next(&mut self) {
        tokio::select! {
            () = recv(self.interrupt.as_mut()) => {}
            () = recv(self.terminate.as_mut()) => {}
        }
    }
}

/// The next signal of `signal`; never without one.
async fn recv(signal: Option<&mut Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}
