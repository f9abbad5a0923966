//! `pgcdc-kafka run`: the connector itself. Starts the operations endpoint
//! (`--metrics-addr`), turns SIGINT/SIGTERM into a graceful stop of every
//! pipeline, runs the pipelines until all have stopped, and reports each
//! run on stdout.
//!
//! With several pipelines, each stops on its own (a bounded run when it
//! caught up, a failure when it failed) and the process ends when the last
//! has; the exit code is the worst of theirs: 1 if any stopped on an
//! error, else [`EXIT_INCOMPLETE`] if any bounded run did not drain, else 0.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{signal, Signal, SignalKind};

use super::{print_named_report, print_report, EXIT_INCOMPLETE};
use crate::build_info;
use crate::config::LogFormat;
use crate::http::{HttpServer, Served};
use crate::supervisor::{Finished, PipelineSpec, Supervisor};

/// One pipeline to run, with what is logged about it at start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub spec: PipelineSpec,
    /// Its settings on one line, secrets redacted
    /// ([`crate::config::show::one_line`]), logged once at start.
    pub settings: String,
    /// Debezium properties the import accepted without effect, logged once.
    pub ignored: Vec<(String, String)>,
}

/// Runs the validated `pipelines` until every one has stopped; `named`
/// when they come from a file that declares pipelines (each report line
/// then names its pipeline). The endpoint listens on `metrics_addr`.
pub async fn execute(
    pipelines: Vec<Launch>,
    metrics_addr: Option<SocketAddr>,
    named: bool,
    format: LogFormat,
) -> ExitCode {
    // Where streaming starts is the slot's confirmed position, known once
    // connected: the "starting replication" line gives it.
    for launch in &pipelines {
        tracing::info!(
            version = build_info::VERSION,
            commit = build_info::COMMIT,
            librdkafka = build_info::librdkafka_version(),
            pipeline = %launch.spec.name,
            slot = %launch.spec.config.slot_name,
            settings = launch.settings,
            "starting pgcdc-kafka; streaming starts at the slot's confirmed position"
        );
        for (property, reason) in &launch.ignored {
            tracing::info!(pipeline = %launch.spec.name, %property, %reason, "debezium property accepted without effect");
        }
    }
    let served = Arc::new(Served::labelled());
    if let Some(addr) = metrics_addr {
        match HttpServer::bind_served(addr, Arc::clone(&served)).await {
            Ok(server) => {
                tokio::spawn(server.serve(std::future::pending()));
            }
            Err(error) => {
                tracing::error!(error = %crate::error_chain(&error), "cannot start the metrics endpoint");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut supervisor = Supervisor::new(served);
    for launch in pipelines {
        if let Err(error) = supervisor.start(launch.spec) {
            // Names are unique by construction (one TOML table each).
            tracing::error!(%error, "cannot start a pipeline");
            return ExitCode::FAILURE;
        }
    }
    let mut signals = StopSignals::new();
    let mut stops = 0;
    let mut code = 0u8;
    let mut forced = false;
    loop {
        tokio::select! {
            () = signals.next() => {
                stops += 1;
                if stops == 1 {
                    tracing::info!(
                        "stop requested: finishing the current transaction and waiting for \
                         Kafka's acknowledgements; a second SIGINT/SIGTERM stops without waiting"
                    );
                    supervisor.stop_all();
                } else {
                    supervisor.force_all();
                    tokio::spawn(exit_after_grace());
                }
            }
            finished = supervisor.next_finished() => {
                let Some(finished) = finished else { break };
                let (worse, was_forced) = report(finished, named, format);
                code = worst(code, worse);
                forced |= was_forced;
            }
        }
    }
    if forced {
        // A delivery wait abandoned by the forced stop may still be
        // blocked on librdkafka, and the runtime would wait for it.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(i32::from(code));
    }
    ExitCode::from(code)
}

/// The worse of two pipelines' exit codes: an error (1) over an
/// incomplete drain ([`EXIT_INCOMPLETE`]) over success (0).
fn worst(a: u8, b: u8) -> u8 {
    let rank = |code: u8| match code {
        0 => 0,
        EXIT_INCOMPLETE => 1,
        _ => 2,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// The forced stop confirms what was acknowledged and returns at once;
/// should anything else hold it up, the process ends anyway.
async fn exit_after_grace() {
    tokio::time::sleep(FORCED_EXIT_GRACE).await;
    tracing::error!(
        "the forced stop did not finish within {FORCED_EXIT_GRACE:?}; exiting now \
         (the slot keeps the position last confirmed, which Kafka acknowledged)"
    );
    std::process::exit(1);
}

/// Reports one pipeline's end; its exit code (0, 1 or [`EXIT_INCOMPLETE`],
/// worst wins) and whether its stop was forced.
fn report(finished: Finished, named: bool, format: LogFormat) -> (u8, bool) {
    let Finished { name, result } = finished;
    match result {
        Ok(summary) => {
            // The run's report, on stdout: one human line, or one JSON object.
            match (format, named) {
                (LogFormat::Text, false) => println!("pgcdc-kafka: {summary}"),
                (LogFormat::Text, true) => println!("pgcdc-kafka: pipeline {name}: {summary}"),
                (LogFormat::Json, false) => print_report(format, &summary),
                (LogFormat::Json, true) => print_named_report(format, &name, &summary, true),
            }
            let mut code = 0;
            if summary.is_incomplete() {
                tracing::error!(
                    pipeline = %name,
                    confirmed_lsn = ?summary.confirmed_lsn,
                    exit_code = EXIT_INCOMPLETE,
                    "the run caught up, but Kafka did not acknowledge every record it read \
                     before the drain ended (a delivery failed, or --shutdown-timeout \
                     passed); the slot is confirmed only up to the last acknowledged \
                     transaction, so the next run sends the rest again"
                );
                code = EXIT_INCOMPLETE;
            }
            (code, summary.forced)
        }
        Err(error) => {
            tracing::error!(pipeline = %name, error = %crate::error_chain(&error), "stopped on error");
            (1, false)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_outranks_an_incomplete_drain() {
        assert_eq!(worst(0, EXIT_INCOMPLETE), EXIT_INCOMPLETE);
        assert_eq!(worst(EXIT_INCOMPLETE, 1), 1);
        assert_eq!(worst(1, EXIT_INCOMPLETE), 1);
        assert_eq!(worst(1, 0), 1);
        assert_eq!(worst(0, 0), 0);
    }
}
