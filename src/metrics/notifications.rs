//! The snapshot notifications counted by kind ([`crate::notification`]):
//! `pgcdc_snapshot_notifications_total{aggregate_type, type}`. The label
//! values are Debezium's fixed names (two aggregate types, seven types), so
//! the family holds at most fourteen series.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{names, Metrics};

/// The counter family; clones share the series.
#[derive(Debug, Default, Clone)]
pub(super) struct Notifications(Family<Vec<(&'static str, String)>, Counter>);

impl Notifications {
    /// Registers the family (prometheus-client appends `_total`).
    pub(super) fn register(&self, r: &mut Registry) {
        let name = names::SNAPSHOT_NOTIFICATIONS;
        r.register(
            name.strip_suffix("_total").unwrap_or(name),
            "Snapshot notifications sent, by aggregate_type and type (Debezium's)",
            self.0.clone(),
        );
    }
}

impl Metrics {
    /// A notification of `aggregate_type` and `kind` was sent.
    pub fn notification(&self, aggregate_type: &str, kind: &str) {
        self.exposition
            .notifications
            .0
            .get_or_create(&vec![
                ("aggregate_type", aggregate_type.to_owned()),
                ("type", kind.to_owned()),
            ])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_are_counted_by_kind() {
        let metrics = Metrics::new();
        metrics.notification("Incremental Snapshot", "STARTED");
        metrics.notification("Incremental Snapshot", "STARTED");
        metrics.notification("Initial Snapshot", "COMPLETED");
        let page = metrics.render(true);
        assert!(
            page.contains(
                "pgcdc_snapshot_notifications_total{aggregate_type=\"Incremental Snapshot\",type=\"STARTED\"} 2"
            ),
            "{page}"
        );
        assert!(page.contains("type=\"COMPLETED\"} 1"), "{page}");
    }
}
