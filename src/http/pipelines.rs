//! What the endpoint serves: the pipelines of the process, each with its
//! metrics and its readiness policy. A supervisor adds a pipeline when it
//! starts it and may remove it when it stops for good; a scrape reads the
//! set as it is at that moment.
//!
//! Labelled ([`Served::labelled`], what the binary serves): every
//! pipeline's series carry `pipeline="<name>"`
//! ([`crate::metrics::labelled`]), and `/readyz` is ready only when every
//! pipeline is, its body one line per pipeline. Unlabelled
//! ([`Served::single`], one embedded connector): its series and `/readyz`
//! exactly as they were before pipelines existed.

use std::sync::{Arc, PoisonError, RwLock};

use super::{HealthPolicy, Readiness};
use crate::metrics::{labelled, Metrics};

/// One pipeline as the endpoint sees it.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    metrics: Arc<Metrics>,
    policy: HealthPolicy,
}

/// The pipelines an endpoint serves.
#[derive(Debug)]
pub struct Served {
    labelled: bool,
    entries: RwLock<Vec<Entry>>,
    /// A fleet instance's own series, and its readiness with no pipeline.
    fleet: std::sync::OnceLock<Arc<crate::metrics::fleet::FleetMetrics>>,
}

impl Served {
    /// One connector, served unlabelled.
    pub fn single(metrics: Arc<Metrics>, policy: HealthPolicy) -> Self {
        Served {
            labelled: false,
            entries: RwLock::new(vec![Entry {
                name: String::new(),
                metrics,
                policy,
            }]),
            fleet: std::sync::OnceLock::new(),
        }
    }

    /// No pipeline yet; each added one is served with its `pipeline` label.
    pub fn labelled() -> Self {
        Served {
            labelled: true,
            entries: RwLock::new(Vec::new()),
            fleet: std::sync::OnceLock::new(),
        }
    }

    /// Serves a fleet instance's series after the pipelines'; an instance
    /// the fleet assigned no pipeline is ready (it stands by).
    pub fn serve_fleet(&self, metrics: Arc<crate::metrics::fleet::FleetMetrics>) {
        let _ = self.fleet.set(metrics);
    }

    /// Serves `metrics` as pipeline `name` (replacing one of that name).
    pub fn add(&self, name: &str, metrics: Arc<Metrics>, policy: HealthPolicy) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| e.name != name);
        entries.push(Entry {
            name: name.to_owned(),
            metrics,
            policy,
        });
        entries.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Stops serving pipeline `name`.
    pub fn remove(&self, name: &str) {
        self.entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|e| e.name != name);
    }

    fn entries(&self) -> Vec<Entry> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Each pipeline's readiness, by name.
    pub fn each(&self) -> Vec<(String, Readiness)> {
        self.entries()
            .into_iter()
            .map(|e| {
                let readiness = e.policy.evaluate(&e.metrics);
                (e.name, readiness)
            })
            .collect()
    }

    /// What `/readyz` answers: ready when every pipeline is (and there is
    /// one); the body says why, one line per pipeline when labelled.
    pub fn readiness(&self) -> Readiness {
        let each = self.each();
        if !self.labelled {
            return each.into_iter().next().map_or_else(none, |(_, r)| r);
        }
        if each.is_empty() {
            if self.fleet.get().is_some() {
                return Readiness {
                    ready: true,
                    reason: "fleet instance: no pipeline assigned to it now".to_owned(),
                };
            }
            return none();
        }
        let ready = each.iter().filter(|(_, r)| r.ready).count();
        let mut reason = format!("{ready} of {} pipelines ready", each.len());
        for (name, r) in &each {
            let state = if r.ready { "ready" } else { "not ready" };
            reason.push_str(&format!("\n{name}: {state}: {}", r.reason));
        }
        Readiness {
            ready: ready == each.len(),
            reason,
        }
    }

    /// The `/metrics` page.
    pub fn render(&self) -> String {
        let entries = self.entries();
        if !self.labelled {
            return entries.first().map_or_else(String::new, |e| {
                e.metrics.render(e.policy.evaluate(&e.metrics).ready)
            });
        }
        let pages: Vec<(String, String)> = entries
            .into_iter()
            .map(|e| {
                let page = e.metrics.render(e.policy.evaluate(&e.metrics).ready);
                (e.name, page)
            })
            .collect();
        let mut page = labelled::merge(&pages);
        if let Some(fleet) = self.fleet.get() {
            page.push_str(&fleet.render());
        }
        page
    }
}

fn none() -> Readiness {
    Readiness {
        ready: false,
        reason: "no pipeline is running".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Phase;

    #[test]
    fn ready_only_when_every_pipeline_is() {
        let served = Served::labelled();
        assert!(!served.readiness().ready);
        let (a, b) = (Arc::new(Metrics::new()), Arc::new(Metrics::new()));
        served.add("b", Arc::clone(&b), HealthPolicy::default());
        served.add("a", Arc::clone(&a), HealthPolicy::default());
        a.set_phase(Phase::Streaming);
        let r = served.readiness();
        assert!(!r.ready);
        assert_eq!(
            r.reason,
            "1 of 2 pipelines ready\na: ready: streaming\n\
             b: not ready: connecting to PostgreSQL and starting replication"
        );
        b.set_phase(Phase::Snapshotting);
        assert!(served.readiness().ready);
        served.remove("a");
        assert_eq!(
            served.readiness().reason,
            "1 of 1 pipelines ready\nb: ready: taking the initial snapshot"
        );
    }
}
