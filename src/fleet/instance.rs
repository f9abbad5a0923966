//! One fleet instance: it follows the configs topic, joins the fleet's
//! group, and keeps the pipelines it runs equal to those whose index is a
//! partition it owns ([`Coordinator::reconcile`]).
//!
//! Everything happens on one async loop that owns the [`Supervisor`]:
//! membership events (from the member's thread), config changes (from the
//! configs thread), pipelines finishing, and timers. So the rules are
//! easy to state:
//! - a pipeline runs here iff its record's index is owned here, the
//!   configs were read to their end, and it is neither failed (until its
//!   config changes or its partition is assigned anew) nor waiting out a
//!   backoff for its slot;
//! - a revoked partition is answered only once its pipelines have
//!   finished (graceful: flush and confirm; forced after
//!   [`GRACEFUL_REVOKE`]); a lost one forces the stop at once;
//! - a changed config stops the pipeline; it starts again with the new one
//!   once it has finished;
//! - a start that finds the slot held (the previous owner is still
//!   stopping, or is cut off but still connected to PostgreSQL) is retried
//!   after a backoff doubling from [`SLOT_BACKOFF_MIN`] to
//!   [`SLOT_BACKOFF_MAX`], each wait logged; it never runs beside the
//!   holder, since one slot has one reader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::configs::{self, ConfigEvent};
use super::membership::{Member, MemberSettings, Membership};
use super::record::{ConfigRecord, Configs};
use super::secrets;
use super::status::{now_ms, StatusRecord};
use super::{FleetError, FleetKafka, FleetName};
use crate::config::fleet::Instance;
use crate::config::pipelines::PipelineName;
use crate::http::Served;
use crate::metrics::fleet::FleetMetrics;
use crate::supervisor::{Finished, PipelineFailure, PipelineSpec, Supervisor};

/// How long the revoked pipelines may take to stop gracefully before
/// their stop is forced (within [`super::membership::REVOKE_WAIT`]).
pub const GRACEFUL_REVOKE: Duration = Duration::from_secs(35);
/// How long a forced stop may take before the partition is given up anyway.
const FORCED_REVOKE: Duration = Duration::from_secs(5);
/// First wait before starting again a pipeline whose slot was held.
pub const SLOT_BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between two tries of a held slot.
pub const SLOT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A pipeline running here: the index and config it was started with.
struct Running {
    index: i32,
    config: String,
}

/// A revocation waiting for its pipelines to finish.
struct Revoking {
    names: BTreeSet<PipelineName>,
    done: std_mpsc::SyncSender<()>,
    deadline: Instant,
    forced: bool,
}

/// A pipeline waiting to try its slot again.
struct SlotWait {
    until: Instant,
    backoff: Duration,
    attempts: u32,
}

/// The instance's state and what it drives.
struct Coordinator {
    instance: Instance,
    client_id: String,
    supervisor: Supervisor,
    served: Arc<Served>,
    metrics: Arc<FleetMetrics>,
    status: Option<ThreadedProducer<DefaultProducerContext>>,
    status_topic: String,
    /// `None` until the configs topic was read to its end.
    configs: Option<Configs>,
    owned: BTreeSet<i32>,
    running: BTreeMap<PipelineName, Running>,
    stopping: BTreeSet<PipelineName>,
    /// Failed or finished on their own, with the config they had: not
    /// started again until it changes or the partition is assigned anew.
    held: BTreeMap<PipelineName, String>,
    waiting: BTreeMap<PipelineName, SlotWait>,
    revoking: Vec<Revoking>,
    shutting_down: bool,
    /// Why the group put this instance out, if it did.
    fenced: Option<String>,
}

/// Runs fleet instance `instance` until `stop` resolves, serving its
/// pipelines' metrics through `served`; then stops every pipeline
/// gracefully and leaves the group.
pub async fn run(
    instance: Instance,
    served: Arc<Served>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), FleetError> {
    let fleet: FleetName = instance
        .name
        .parse()
        .expect("the instance's fleet name was validated");
    let kafka = FleetKafka::of(&instance.shared);
    let client_id = instance
        .fleet
        .fleet_instance
        .clone()
        .unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id()));
    let exists = {
        let (kafka, fleet) = (kafka.clone(), fleet.clone());
        tokio::task::spawn_blocking(move || configs::exists(&kafka, &fleet))
            .await
            .expect("the metadata probe does not panic")?
    };
    if !exists {
        tracing::warn!(fleet = %fleet, topic = %fleet.configs_topic(), "the fleet has no configs topic yet; waiting for `pgcdc-kafka fleet apply`");
        ensure(&kafka, &fleet).await?;
    }
    let metrics = Arc::new(FleetMetrics::new(fleet.as_str()));
    served.serve_fleet(Arc::clone(&metrics));
    let (config_tx, mut config_rx) = mpsc::channel(64);
    let follower = configs::follow(
        kafka.clone(),
        fleet.clone(),
        format!("{client_id}.configs"),
        config_tx,
    );
    let (member_tx, mut member_rx) = mpsc::channel(16);
    let member = Member::join(
        MemberSettings {
            kafka: kafka.clone(),
            fleet: fleet.clone(),
            client_id: client_id.clone(),
            instance_id: instance.fleet.fleet_instance.clone(),
            session_timeout: instance.fleet.fleet_session_timeout,
        },
        member_tx,
    )?;
    tracing::info!(fleet = %fleet, instance = %client_id, group = %fleet.group(), static_member = instance.fleet.fleet_instance.is_some(), session_timeout = ?instance.fleet.fleet_session_timeout, "joined the fleet");
    let status = kafka
        .client(&format!("{client_id}.status"))
        .create()
        .map_err(|e| tracing::warn!(error = %e, "cannot create the status writer; `fleet status` will not show states"))
        .ok();
    let mut c = Coordinator {
        supervisor: Supervisor::new(Arc::clone(&served)),
        served,
        metrics,
        status,
        status_topic: fleet.status_topic(),
        client_id,
        instance,
        configs: None,
        owned: BTreeSet::new(),
        running: BTreeMap::new(),
        stopping: BTreeSet::new(),
        held: BTreeMap::new(),
        waiting: BTreeMap::new(),
        revoking: Vec::new(),
        shutting_down: false,
        fenced: None,
    };
    tokio::pin!(stop);
    let mut follower_done = false;
    loop {
        let wake = c.next_wake();
        let has_running = !c.running.is_empty();
        tokio::select! {
            () = &mut stop, if !c.shutting_down => {
                tracing::info!("stop requested: stopping this instance's pipelines, then leaving the fleet");
                c.shutting_down = true;
                c.supervisor.stop_all();
                c.stopping.extend(c.running.keys().cloned());
            }
            Some(event) = member_rx.recv() => c.on_membership(event),
            event = config_rx.recv(), if !follower_done => match event {
                Some(event) => c.on_config(event),
                None => {
                    follower_done = true;
                    if c.configs.is_none() {
                        // The configs thread ended before its first load.
                        c.shutting_down = true;
                        c.supervisor.stop_all();
                    }
                }
            },
            Some(finished) = c.supervisor.next_finished(), if has_running => c.on_finished(finished),
            () = tokio::time::sleep_until(wake) => {}
        }
        c.check_revokes();
        if c.shutting_down {
            if c.running.is_empty() {
                break;
            }
        } else {
            c.reconcile();
        }
        c.metrics.set_running(c.running.len());
    }
    for revoking in c.revoking.drain(..) {
        let _ = revoking.done.send(());
    }
    drop(config_rx);
    // Leaving polls rdkafka until it closed: off the runtime. A revoke that
    // comes meanwhile finds the channel closed and does not wait.
    drop(member_rx);
    tokio::task::spawn_blocking(move || member.leave())
        .await
        .map_err(|_| ())
        .ok();
    if let Some(status) = c.status.take() {
        tokio::task::spawn_blocking(move || {
            use rdkafka::producer::Producer;
            let _ = status.flush(Duration::from_secs(5));
        })
        .await
        .ok();
    }
    if let Some(reason) = c.fenced.take() {
        return Err(FleetError::Fenced { reason });
    }
    let result = tokio::task::spawn_blocking(move || follower.join()).await;
    match result {
        Ok(Ok(Err(error))) => Err(error),
        _ => Ok(()),
    }
}

/// Creates the fleet's topics for an instance that started first.
async fn ensure(kafka: &FleetKafka, fleet: &FleetName) -> Result<(), FleetError> {
    configs::ensure_topics(kafka, fleet, 1).await
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "pgcdc".to_owned())
}

impl Coordinator {
    /// The next time a timer needs the loop.
    fn next_wake(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        self.waiting
            .values()
            .map(|w| w.until)
            .chain(self.revoking.iter().map(|r| r.deadline))
            .min()
            .unwrap_or(far)
    }

    fn on_membership(&mut self, event: Membership) {
        match event {
            Membership::Fatal(reason) => {
                tracing::error!(instance = %self.client_id, %reason, "this instance was put out of the fleet's group (another instance has the same --fleet-instance?): stopping every pipeline");
                for name in self.running.keys() {
                    self.supervisor.stop(name);
                    self.supervisor.force(name);
                }
                self.stopping.extend(self.running.keys().cloned());
                self.owned.clear();
                self.shutting_down = true;
                self.fenced = Some(reason);
            }
            Membership::Assigned(partitions) => {
                for p in &partitions {
                    self.owned.insert(*p);
                }
                // A fresh assignment is a fresh chance for a held pipeline.
                let indexes: BTreeSet<i32> = partitions.iter().copied().collect();
                if let Some(configs) = &self.configs {
                    self.held.retain(|name, _| {
                        configs
                            .get(name)
                            .is_none_or(|r| !indexes.contains(&r.index))
                    });
                }
                self.metrics.assigned(partitions.len(), self.owned.len());
                tracing::info!(instance = %self.client_id, ?partitions, owned = ?self.owned, "fleet partitions assigned");
            }
            Membership::Revoked {
                partitions,
                lost,
                done,
            } => {
                for p in &partitions {
                    self.owned.remove(p);
                }
                self.metrics
                    .revoked(partitions.len(), self.owned.len(), lost);
                let names: BTreeSet<PipelineName> = self
                    .running
                    .iter()
                    .filter(|(_, r)| partitions.contains(&r.index))
                    .map(|(name, _)| name.clone())
                    .collect();
                if lost {
                    tracing::warn!(instance = %self.client_id, ?partitions, pipelines = ?names, "this instance's session with the fleet's group expired (cut off from Kafka?): stopping those pipelines at once so that their new owners can take the slots");
                } else {
                    tracing::info!(instance = %self.client_id, ?partitions, pipelines = ?names, "fleet partitions revoked: stopping their pipelines before giving them up");
                }
                for name in &names {
                    self.supervisor.stop(name);
                    if lost {
                        self.supervisor.force(name);
                    }
                    self.stopping.insert(name.clone());
                }
                if let Some(configs) = &self.configs {
                    let gone = |name: &PipelineName| {
                        configs
                            .get(name)
                            .is_some_and(|r| partitions.contains(&r.index))
                    };
                    self.waiting.retain(|name, _| !gone(name));
                    self.held.retain(|name, _| !gone(name));
                }
                let deadline = Instant::now() + if lost { FORCED_REVOKE } else { GRACEFUL_REVOKE };
                if names.is_empty() {
                    let _ = done.send(());
                } else {
                    self.revoking.push(Revoking {
                        names,
                        done,
                        deadline,
                        forced: lost,
                    });
                }
            }
        }
    }

    fn on_config(&mut self, event: ConfigEvent) {
        match event {
            ConfigEvent::Loaded(configs) => {
                tracing::info!(pipelines = configs.len(), "read the fleet's configs");
                self.configs = Some(configs);
            }
            ConfigEvent::Changed(name, record) => {
                let Some(configs) = self.configs.as_mut() else {
                    return;
                };
                match record {
                    Some(record) => {
                        tracing::info!(pipeline = %name, index = record.index, "fleet config of the pipeline changed");
                        configs.insert(name.clone(), record);
                    }
                    None => {
                        tracing::info!(pipeline = %name, "pipeline removed from the fleet");
                        configs.remove(&name);
                    }
                }
                self.held.remove(&name);
                self.waiting.remove(&name);
            }
        }
    }

    fn on_finished(&mut self, finished: Finished) {
        let Finished { name, result } = finished;
        let Some(running) = self.running.remove(&name) else {
            return;
        };
        let requested = self.stopping.remove(&name);
        if requested {
            self.served.remove(name.as_str());
            self.report(&name, "stopped", None);
            match &result {
                Ok(summary) => tracing::info!(pipeline = %name, %summary, "pipeline stopped"),
                Err(error) => {
                    tracing::info!(pipeline = %name, error = %crate::error_chain(error), "pipeline stopped")
                }
            }
            return;
        }
        match result {
            Err(PipelineFailure::Error(error)) if error.is_slot_in_use() => {
                self.metrics.slot_waited();
                let now = Instant::now();
                let wait = self.waiting.entry(name.clone()).or_insert(SlotWait {
                    until: now,
                    backoff: SLOT_BACKOFF_MIN / 2,
                    attempts: 0,
                });
                wait.backoff = (wait.backoff * 2).min(SLOT_BACKOFF_MAX);
                wait.until = now + wait.backoff;
                wait.attempts += 1;
                tracing::warn!(pipeline = %name, attempt = wait.attempts, retry_in = ?wait.backoff, error = %crate::error_chain(&error), "the pipeline's slot is still held by another session (its previous owner stopping, or one cut off from Kafka that has not yet noticed); waiting for it to be released");
                self.report(&name, "waiting_for_slot", Some(crate::error_chain(&error)));
            }
            Err(error) => {
                tracing::error!(pipeline = %name, error = %crate::error_chain(&error), "pipeline failed; it stays stopped until its config changes (`fleet apply`) or it is assigned anew");
                self.report(&name, "failed", Some(crate::error_chain(&error)));
                self.held.insert(name, running.config);
            }
            Ok(summary) => {
                tracing::info!(pipeline = %name, %summary, "pipeline finished on its own; it stays stopped until its config changes");
                self.report(&name, "finished", None);
                self.held.insert(name, running.config);
            }
        }
    }

    /// Answers the revocations whose pipelines finished; forces those past
    /// their deadline, and gives up waiting on a forced one past its own.
    fn check_revokes(&mut self) {
        let now = Instant::now();
        let running = &self.running;
        let mut kept = Vec::new();
        for mut r in self.revoking.drain(..) {
            r.names.retain(|n| running.contains_key(n));
            if r.names.is_empty() {
                let _ = r.done.send(());
            } else if now >= r.deadline && !r.forced {
                tracing::warn!(pipelines = ?r.names, "revoked pipelines did not stop within {GRACEFUL_REVOKE:?}; forcing their stop");
                for name in &r.names {
                    self.supervisor.force(name);
                }
                r.forced = true;
                r.deadline = now + FORCED_REVOKE;
                kept.push(r);
            } else if now >= r.deadline {
                tracing::error!(pipelines = ?r.names, "revoked pipelines did not stop even when forced; giving their partitions up (their new owners wait for the slots)");
                let _ = r.done.send(());
            } else {
                kept.push(r);
            }
        }
        self.revoking = kept;
    }

    /// Stops what must not run here (not owned, removed, changed) and
    /// starts what should.
    fn reconcile(&mut self) {
        let Some(configs) = &self.configs else { return };
        let mut to_stop = Vec::new();
        for (name, running) in &self.running {
            if self.stopping.contains(name) {
                continue;
            }
            let keep = configs
                .get(name)
                .is_some_and(|r| self.owned.contains(&r.index) && r.config == running.config);
            if !keep {
                to_stop.push(name.clone());
            }
        }
        for name in to_stop {
            tracing::info!(pipeline = %name, "stopping the pipeline: its config changed, it was removed, or its partition is no longer this instance's");
            self.supervisor.stop(&name);
            self.stopping.insert(name);
        }
        let now = Instant::now();
        let to_start: Vec<(PipelineName, ConfigRecord)> = configs
            .iter()
            .filter(|(name, r)| {
                self.owned.contains(&r.index)
                    && !self.running.contains_key(*name)
                    && self.held.get(*name) != Some(&r.config)
                    && self.waiting.get(*name).is_none_or(|w| w.until <= now)
            })
            .map(|(name, r)| (name.clone(), r.clone()))
            .collect();
        for (name, record) in to_start {
            self.start(name, record);
        }
    }

    fn start(&mut self, name: PipelineName, record: ConfigRecord) {
        let config = match self.pipeline_config(&name, &record.config) {
            Ok(config) => config,
            Err(message) => {
                tracing::error!(pipeline = %name, error = %message, "the pipeline's fleet config cannot be used on this instance; fix it with `fleet apply` (or the instance's environment and files)");
                self.report(&name, "failed", Some(message));
                self.held.insert(name, record.config);
                return;
            }
        };
        let spec = PipelineSpec {
            name: name.clone(),
            config,
            health: self.instance.health,
        };
        if let Err(error) = self.supervisor.start(spec) {
            tracing::error!(%error, "cannot start a fleet pipeline");
            return;
        }
        tracing::info!(pipeline = %name, index = record.index, instance = %self.client_id, "fleet pipeline started");
        self.report(&name, "running", None);
        self.running.insert(
            name,
            Running {
                index: record.index,
                config: record.config,
            },
        );
    }

    /// The pipeline's configuration on this instance: references resolved,
    /// layered over the instance's settings, validated.
    fn pipeline_config(
        &self,
        name: &PipelineName,
        text: &str,
    ) -> Result<crate::config::RunConfig, String> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.message().to_owned())?;
        let problems = secrets::resolve_table(&mut table, &secrets::resolve_here);
        if !problems.is_empty() {
            return Err(problems
                .into_iter()
                .map(|(key, message)| format!("{key} {message}"))
                .collect::<Vec<_>>()
                .join("; "));
        }
        let resolved = toml::to_string(&table).expect("a TOML table serializes");
        self.instance
            .pipeline(name.as_str(), &resolved)
            .map_err(|e| e.to_string())
    }

    /// Reports a pipeline's state to the status topic (best effort).
    fn report(&self, name: &PipelineName, state: &str, error: Option<String>) {
        let Some(producer) = &self.status else { return };
        let record = StatusRecord {
            instance: self.client_id.clone(),
            state: state.to_owned(),
            error,
            at_ms: now_ms(),
        };
        let value = serde_json::to_vec(&record).expect("a status serializes");
        let sent = producer.send(
            BaseRecord::to(&self.status_topic)
                .key(name.as_str())
                .payload(&value)
                .partition(0),
        );
        if let Err((error, _)) = sent {
            tracing::debug!(%error, "cannot queue a fleet status record");
        }
    }
}
