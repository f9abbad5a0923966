//! `pgcdc-kafka run --fleet NAME` (an instance of a fleet) and
//! `pgcdc-kafka fleet apply | status | remove` (managing its pipelines);
//! see [`crate::fleet`] and docs/FLEET.md.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::print_report;
use crate::config::fleet::Instance;
use crate::config::LogFormat;
use crate::fleet::{admin, FleetKafka, FleetName};
use crate::http::{HttpServer, Served};
use crate::options::parse_key_value;

/// `fleet`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Add or change the pipelines a file declares ([pipelines.<name>]
    /// tables over shared top-level keys, as `run --config`): checked,
    /// then written to the fleet's configs topic; the instances start them.
    /// Secrets by reference only: ${env:VAR} or ${file:/path}, resolved on
    /// each instance.
    Apply {
        #[command(flatten)]
        fleet: FleetArgs,
        /// The TOML file of pipelines.
        file: std::path::PathBuf,
    },
    /// The fleet's pipelines: partition, owning instance, last state.
    Status {
        #[command(flatten)]
        fleet: FleetArgs,
    },
    /// Remove a pipeline from the fleet: its instance stops it (its slot
    /// stays on the server).
    Remove {
        #[command(flatten)]
        fleet: FleetArgs,
        /// The pipeline's name.
        pipeline: String,
    },
}

/// Which fleet, and how to reach its Kafka.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The fleet's name (as the instances' --fleet).
    #[arg(long, env = "PGCDC_FLEET")]
    pub fleet: String,
    /// Kafka bootstrap servers, comma separated (default: the --config
    /// file's, else 127.0.0.1:9092).
    #[arg(long, env = "PGCDC_BOOTSTRAP_SERVERS")]
    pub bootstrap_servers: Option<String>,
    /// An instance's --config file: connect to Kafka as the instances do
    /// (its bootstrap_servers, Kafka security settings and [kafka]
    /// security properties).
    #[arg(long = "config", env = "PGCDC_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// librdkafka properties for this command's clients (security.protocol,
    /// sasl.*, ssl.*), key=value, repeatable.
    #[arg(long = "kafka-property", value_parser = parse_key_value)]
    pub kafka_properties: Vec<(String, String)>,
}

impl FleetArgs {
    fn parts(&self) -> Result<(FleetKafka, FleetName), ExitCode> {
        let fleet = self.fleet.parse().map_err(|message: String| {
            eprintln!("error: --fleet {:?} {message}", self.fleet);
            ExitCode::from(2)
        })?;
        let mut kafka = match &self.config {
            Some(path) => match crate::config::fleet::instance_file(path) {
                Ok(shared) => FleetKafka::of(&shared),
                Err(error) => {
                    eprintln!("error: {error}");
                    return Err(ExitCode::from(2));
                }
            },
            None => FleetKafka {
                bootstrap_servers: "127.0.0.1:9092".to_owned(),
                properties: Vec::new(),
            },
        };
        if let Some(servers) = &self.bootstrap_servers {
            kafka.bootstrap_servers.clone_from(servers);
        }
        kafka
            .properties
            .extend(self.kafka_properties.iter().cloned());
        Ok((kafka, fleet))
    }
}

/// Runs a `fleet` subcommand.
pub async fn execute(command: FleetCommand, format: LogFormat) -> ExitCode {
    let outcome = match &command {
        FleetCommand::Apply { fleet, file } => {
            let (kafka, name) = match fleet.parts() {
                Ok(parts) => parts,
                Err(code) => return code,
            };
            let text = match std::fs::read_to_string(file) {
                Ok(text) => text,
                Err(error) => {
                    eprintln!("error: cannot read {}: {error}; pass the TOML file of the fleet's pipelines", file.display());
                    return ExitCode::from(2);
                }
            };
            admin::apply(&kafka, &name, &file.display().to_string(), &text)
                .await
                .map(|applied| print_report(format, &applied))
        }
        FleetCommand::Status { fleet } => {
            let (kafka, name) = match fleet.parts() {
                Ok(parts) => parts,
                Err(code) => return code,
            };
            admin::status(&kafka, &name)
                .await
                .map(|status| print_report(format, &status))
        }
        FleetCommand::Remove { fleet, pipeline } => {
            let (kafka, name) = match fleet.parts() {
                Ok(parts) => parts,
                Err(code) => return code,
            };
            admin::remove(&kafka, &name, pipeline).await.map(|record| {
                println!("{pipeline}: removed (partition {} is free)", record.index);
            })
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(admin::AdminError::Invalid(problems)) => {
            eprintln!(
                "error: invalid fleet configuration:\n  {}",
                problems.join("\n  ")
            );
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("error: {}", crate::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}

/// `run --fleet NAME`: serves the endpoint, runs the instance until
/// SIGINT/SIGTERM, then stops its pipelines and leaves the fleet.
pub async fn run(instance: Instance) -> ExitCode {
    let served = Arc::new(Served::labelled());
    if let Some(addr) = instance.shared.metrics_addr {
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
    tracing::info!(
        version = crate::build_info::VERSION,
        commit = crate::build_info::COMMIT,
        fleet = %instance.name,
        "starting pgcdc-kafka as a fleet instance"
    );
    let stop = async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term = async {
            match terminate.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    };
    match crate::fleet::instance::run(instance, served, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %crate::error_chain(&error), "the fleet instance stopped on an error");
            ExitCode::FAILURE
        }
    }
}
