//! A fleet instance's own series: its membership of the fleet's group and
//! what the group assigned it. They describe the instance, not one
//! pipeline, so they are written once, unlabelled by pipeline, after the
//! pipelines' series (labelled `fleet` with the fleet's name).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// 1 while the instance holds an assignment of the fleet's group (it may be
/// empty); 0 before the first and after a lost one.
pub const MEMBER: &str = "pgcdc_fleet_member";
/// Partitions of the assignment topic this instance owns.
pub const ASSIGNED_PARTITIONS: &str = "pgcdc_fleet_assigned_partitions";
/// Pipelines this instance runs now.
pub const PIPELINES_RUNNING: &str = "pgcdc_fleet_pipelines_running";
/// Partitions assigned to this instance, summed over rebalances.
pub const PARTITIONS_ASSIGNED_TOTAL: &str = "pgcdc_fleet_partitions_assigned_total";
/// Partitions revoked from this instance, summed over rebalances.
pub const PARTITIONS_REVOKED_TOTAL: &str = "pgcdc_fleet_partitions_revoked_total";
/// Partitions this instance lost (its session expired), summed.
pub const PARTITIONS_LOST_TOTAL: &str = "pgcdc_fleet_partitions_lost_total";
/// Starts of a pipeline that found its slot still held (by the previous
/// owner) and waited to retry.
pub const SLOT_WAITS_TOTAL: &str = "pgcdc_fleet_slot_waits_total";

/// The instance's fleet metrics.
#[derive(Debug)]
pub struct FleetMetrics {
    fleet: String,
    member: AtomicU64,
    assigned: AtomicU64,
    running: AtomicU64,
    assigned_total: AtomicU64,
    revoked_total: AtomicU64,
    lost_total: AtomicU64,
    slot_waits: AtomicU64,
}

impl FleetMetrics {
    /// The metrics of an instance of fleet `fleet`.
    pub fn new(fleet: &str) -> Self {
        FleetMetrics {
            fleet: fleet.to_owned(),
            member: AtomicU64::new(0),
            assigned: AtomicU64::new(0),
            running: AtomicU64::new(0),
            assigned_total: AtomicU64::new(0),
            revoked_total: AtomicU64::new(0),
            lost_total: AtomicU64::new(0),
            slot_waits: AtomicU64::new(0),
        }
    }

    /// `count` partitions were assigned; `owned` are owned now.
    pub fn assigned(&self, count: usize, owned: usize) {
        self.member.store(1, Ordering::Relaxed);
        self.assigned_total
            .fetch_add(count as u64, Ordering::Relaxed);
        self.assigned.store(owned as u64, Ordering::Relaxed);
    }

    /// `count` partitions were revoked (`lost`: the session expired).
    pub fn revoked(&self, count: usize, owned: usize, lost: bool) {
        let total = if lost {
            &self.lost_total
        } else {
            &self.revoked_total
        };
        total.fetch_add(count as u64, Ordering::Relaxed);
        self.assigned.store(owned as u64, Ordering::Relaxed);
        if lost {
            self.member.store(0, Ordering::Relaxed);
        }
    }

    /// How many pipelines run now.
    pub fn set_running(&self, running: usize) {
        self.running.store(running as u64, Ordering::Relaxed);
    }

    /// A start found the slot held.
    pub fn slot_waited(&self) {
        self.slot_waits.fetch_add(1, Ordering::Relaxed);
    }

    /// The series in the text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let series = [
            (
                MEMBER,
                "gauge",
                "1 while this instance holds an assignment of the fleet's group",
                load(&self.member),
            ),
            (
                ASSIGNED_PARTITIONS,
                "gauge",
                "Partitions of the fleet's assignment topic this instance owns",
                load(&self.assigned),
            ),
            (
                PIPELINES_RUNNING,
                "gauge",
                "Pipelines this instance runs",
                load(&self.running),
            ),
            (
                PARTITIONS_ASSIGNED_TOTAL,
                "counter",
                "Partitions assigned to this instance",
                load(&self.assigned_total),
            ),
            (
                PARTITIONS_REVOKED_TOTAL,
                "counter",
                "Partitions revoked from this instance",
                load(&self.revoked_total),
            ),
            (
                PARTITIONS_LOST_TOTAL,
                "counter",
                "Partitions this instance lost when its session expired",
                load(&self.lost_total),
            ),
            (
                SLOT_WAITS_TOTAL,
                "counter",
                "Pipeline starts that found the slot still held and waited",
                load(&self.slot_waits),
            ),
        ];
        for (name, kind, help, value) in series {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{fleet=\"{}\"}} {value}", self.fleet);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_series_once_with_the_fleet_label() {
        let m = FleetMetrics::new("prod");
        m.assigned(3, 3);
        m.revoked(1, 2, false);
        m.revoked(2, 0, true);
        m.set_running(0);
        let page = m.render();
        assert!(
            page.contains("pgcdc_fleet_member{fleet=\"prod\"} 0\n"),
            "{page}"
        );
        assert!(page.contains("pgcdc_fleet_partitions_assigned_total{fleet=\"prod\"} 3\n"));
        assert!(page.contains("pgcdc_fleet_partitions_lost_total{fleet=\"prod\"} 2\n"));
        assert_eq!(page.matches("# TYPE").count(), 7);
    }
}
