//! Readiness: whether the connector is doing its job, as `/readyz`,
//! [`names::READY`](crate::metrics::names::READY) and `check` report it.
//!
//! `/readyz` answers 200 while the connector is streaming (or taking its
//! snapshot) and both of these hold:
//!
//! - the server was heard from (a keepalive or data on the replication
//!   connection) within [`HealthPolicy::max_silence`], so the connection is
//!   not silently stalled;
//! - Kafka is making progress: when records are in flight, a delivery report
//!   arrived within [`HealthPolicy::max_ack_wait`]. With Kafka down the
//!   connector does not fail at once: librdkafka keeps retrying until
//!   `message.timeout.ms` and reading pauses at the in-flight bound. That
//!   wait is what "not ready" reports; an idle connector with nothing in
//!   flight does not probe Kafka and stays ready.
//!
//! Otherwise it answers 503 with the reason: connecting, restarting after a
//! failure (with the error), stopped (on an error, with it), silent server,
//! or stalled deliveries.

use std::time::Duration;

use crate::metrics::{Metrics, Phase};

/// When `/readyz` reports not ready; flags of `pgcdc-kafka run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "Operations")]
pub struct HealthPolicy {
    /// /readyz: longest time without a keepalive or data from PostgreSQL
    /// while streaming. Keep it above wal_sender_timeout: the server pings
    /// at half of it when the connection is otherwise quiet.
    #[arg(long = "ready-max-silence", env = "PGCDC_READY_MAX_SILENCE", default_value = "120s", value_parser = humantime::parse_duration)]
    pub max_silence: Duration,

    /// /readyz: longest time without any Kafka delivery report while records
    /// are in flight (Kafka unreachable or stalled).
    #[arg(long = "ready-max-ack-wait", env = "PGCDC_READY_MAX_ACK_WAIT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_ack_wait: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            max_silence: Duration::from_secs(120),
            max_ack_wait: Duration::from_secs(30),
        }
    }
}

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// One line: what the connector is doing, or why it is not ready.
    pub reason: String,
}

impl HealthPolicy {
    /// Whether the connector behind `metrics` is ready now, and why.
    pub fn evaluate(&self, metrics: &Metrics) -> Readiness {
        let s = metrics.snapshot();
        let not_ready = |reason: String| Readiness {
            ready: false,
            reason,
        };
        match &s.phase {
            Phase::Streaming => {
                if let Some(silence) = s.since_server_message.filter(|d| *d > self.max_silence) {
                    return not_ready(format!(
                        "no keepalive or data from PostgreSQL for {}s (limit {}); \
                         the replication connection may be stalled",
                        silence.as_secs(),
                        humantime::format_duration(self.max_silence)
                    ));
                }
            }
            Phase::Snapshotting => {}
            other => return not_ready(other.to_string()),
        }
        if s.in_flight_records > 0 {
            if let Some(wait) = s.since_delivery_progress.filter(|d| *d > self.max_ack_wait) {
                return not_ready(format!(
                    "Kafka has acknowledged nothing for {}s with {} records in flight \
                     (limit {}); check that the brokers in --bootstrap-servers are up and reachable",
                    wait.as_secs(),
                    s.in_flight_records,
                    humantime::format_duration(self.max_ack_wait)
                ));
            }
        }
        Readiness {
            ready: true,
            reason: s.phase.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn readiness_reports_each_phase() {
        let metrics = Metrics::new();
        let policy = HealthPolicy {
            max_silence: Duration::from_secs(60),
            max_ack_wait: Duration::ZERO,
        };
        assert!(!policy.evaluate(&metrics).ready);
        metrics.set_phase(Phase::Restarting {
            error: "replication stream failed: connection reset".into(),
            retry_in: Duration::from_secs(4),
        });
        let r = policy.evaluate(&metrics);
        assert!(!r.ready);
        assert!(r.reason.contains("restarting") && r.reason.contains("connection reset"));
        assert!(r.reason.contains("4s"), "{}", r.reason);
        metrics.set_phase(Phase::Failed {
            error: "slot invalidated".into(),
        });
        assert!(policy
            .evaluate(&metrics)
            .reason
            .contains("stopped on an error"));
        metrics.set_phase(Phase::Snapshotting);
        assert!(policy.evaluate(&metrics).ready);
        metrics.set_phase(Phase::Streaming);
        assert!(policy.evaluate(&metrics).ready);

        // A record outstanding longer than max_ack_wait (zero here).
        metrics.record_enqueued(10);
        std::thread::sleep(Duration::from_millis(5));
        let r = policy.evaluate(&metrics);
        assert!(!r.ready && r.reason.contains("Kafka"), "{}", r.reason);
        metrics.record_delivered(10, Duration::from_millis(1), Instant::now());
        assert!(policy.evaluate(&metrics).ready);
    }
}
