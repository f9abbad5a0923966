//! Runs several pipelines in one process, each isolated from the others.
//!
//! A pipeline is a value: a [`PipelineName`] and its own [`RunConfig`]
//! ([`PipelineSpec`]). The [`Supervisor`] starts each as its own task with
//! its own [`Metrics`], its own stop and force handles, and the whole of
//! [`pipeline::run_with_metrics`] inside: its own replication slot and
//! connection, ack tracker, Kafka producer, restart backoff and failure.
//! Nothing is shared between pipelines but the runtime, the process and
//! the brokers, so one pipeline whose database is down restarts with its
//! own backoff while the others stream, and one that stops on a definite
//! error (an invalidated slot) stops alone: the others keep running, and
//! the endpoint reports it as not ready with its error.
//!
//! One producer per pipeline rather than one shared: a producer's
//! in-flight bound, delivery callbacks and fatal errors (a gapless
//! producer stops on any error that could leave a gap) belong to the
//! pipeline whose slot they confirm; exactly-once needs a transactional id
//! per pipeline anyway; and an idle producer costs little memory (see
//! `docs/CONFIGURATION.md`, "Several pipelines", for the measurement).
//!
//! Starting and stopping are per pipeline ([`Supervisor::start`],
//! [`Supervisor::stop`]): fleet mode assigns pipelines to instances and
//! starts or stops them one at a time through the same calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::config::pipelines::PipelineName;
use crate::config::RunConfig;
use crate::http::{HealthPolicy, Served};
use crate::metrics::{Metrics, Phase};
use crate::pipeline::{self, PipelineError, RunSummary, Shutdown};

/// One pipeline to run: its name, its configuration and its readiness policy.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub name: PipelineName,
    pub config: RunConfig,
    pub health: HealthPolicy,
}

/// How a pipeline's run ended.
#[derive(Debug)]
pub struct Finished {
    pub name: PipelineName,
    pub result: Result<RunSummary, PipelineFailure>,
}

/// Why a pipeline stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum PipelineFailure {
    /// It stopped on an error (see [`PipelineError`]).
    #[error(transparent)]
    Error(#[from] PipelineError),
    /// Its task panicked: a broken invariant of that pipeline; the others
    /// run on.
    #[error("the pipeline's task panicked ({0}); this is a bug, please report it with the log")]
    Panicked(String),
}

/// What the supervisor keeps of a running pipeline.
struct Handles {
    stop: watch::Sender<bool>,
    force: watch::Sender<bool>,
    task: tokio::task::Id,
    metrics: Arc<Metrics>,
}

/// Starts, stops and collects pipelines; serves their metrics and
/// readiness through the [`Served`] it was given.
pub struct Supervisor {
    served: Arc<Served>,
    running: BTreeMap<PipelineName, Handles>,
    tasks: JoinSet<Finished>,
}

/// Starting a pipeline whose name is already running.
#[derive(Debug, thiserror::Error)]
#[error("pipeline {0:?} is already running; stop it before starting it again")]
pub struct AlreadyRunning(pub PipelineName);

impl Supervisor {
    /// A supervisor with no pipeline, serving through `served`.
    pub fn new(served: Arc<Served>) -> Self {
        Supervisor {
            served,
            running: BTreeMap::new(),
            tasks: JoinSet::new(),
        }
    }

    /// Starts `spec` as a task of its own, every log line of it in a span
    /// that carries its name, slot and topic prefix.
    pub fn start(&mut self, spec: PipelineSpec) -> Result<(), AlreadyRunning> {
        if self.running.contains_key(&spec.name) {
            return Err(AlreadyRunning(spec.name));
        }
        let metrics = Arc::new(Metrics::new());
        self.served
            .add(spec.name.as_str(), Arc::clone(&metrics), spec.health);
        let (stop, force, shutdown) = Shutdown::forceable();
        let span = tracing::info_span!(
            "pipeline",
            pipeline = %spec.name,
            slot = %spec.config.slot_name,
            topic_prefix = %spec.config.topic_prefix,
        );
        let name = spec.name.clone();
        let recorded = Arc::clone(&metrics);
        let task = self.tasks.spawn(
            async move {
                let result = pipeline::run_with_metrics(spec.config, shutdown, recorded).await;
                Finished {
                    name,
                    result: result.map_err(PipelineFailure::from),
                }
            }
            .instrument(span),
        );
        let handles = Handles {
            stop,
            force,
            task: task.id(),
            metrics,
        };
        self.running.insert(spec.name, handles);
        Ok(())
    }

    /// Asks pipeline `name` to stop gracefully; `false` when it is not running.
    pub fn stop(&self, name: &PipelineName) -> bool {
        self.running
            .get(name)
            .is_some_and(|h| h.stop.send(true).is_ok())
    }

    /// Forces pipeline `name`'s stop (after [`Supervisor::stop`]): it no
    /// longer waits for Kafka; `false` when it is not running.
    pub fn force(&self, name: &PipelineName) -> bool {
        self.running
            .get(name)
            .is_some_and(|h| h.stop.send(true).is_ok() && h.force.send(true).is_ok())
    }

    /// Asks every pipeline to stop gracefully.
    pub fn stop_all(&self) {
        for handles in self.running.values() {
            let _ = handles.stop.send(true);
        }
    }

    /// Forces every pipeline's stop: none waits for Kafka any longer.
    pub fn force_all(&self) {
        for handles in self.running.values() {
            let _ = handles.force.send(true);
        }
    }

    /// The names of the pipelines running now.
    pub fn running(&self) -> impl Iterator<Item = &PipelineName> {
        self.running.keys()
    }

    /// The next pipeline to finish, or `None` when none is running. Its
    /// metrics stay served (a failed pipeline keeps reporting its error).
    ///
    /// Cancel-safe: a pipeline that finishes while this is dropped is
    /// returned by the next call.
    pub async fn next_finished(&mut self) -> Option<Finished> {
        loop {
            match self.tasks.join_next().await? {
                Ok(finished) => {
                    self.running.remove(&finished.name);
                    return Some(finished);
                }
                // A pipeline's panic is a broken invariant of its own: it
                // ends that pipeline, reported as failed; the others run on.
                Err(error) => {
                    let Some(name) = self
                        .running
                        .iter()
                        .find(|(_, h)| h.task == error.id())
                        .map(|(name, _)| name.clone())
                    else {
                        continue;
                    };
                    let failure = PipelineFailure::Panicked(error.to_string());
                    if let Some(handles) = self.running.remove(&name) {
                        handles.metrics.set_phase(Phase::Failed {
                            error: failure.to_string(),
                        });
                    }
                    return Some(Finished {
                        name,
                        result: Err(failure),
                    });
                }
            }
        }
    }
}
