//! The run phase: what the connector is doing, for `/readyz`, `status`
//! and [`names::PHASE`](super::names::PHASE).

use std::time::Duration;

/// What the connector is doing, for `/readyz` and [`names::PHASE`](super::names::PHASE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Connecting to Postgres, preparing the slot, starting replication.
    Connecting,
    /// Taking an initial snapshot.
    Snapshotting,
    /// Streaming changes.
    Streaming,
    /// An attempt failed with a transient error; the next starts after `retry_in`.
    Restarting {
        /// The failure, with its sources.
        error: String,
        /// The backoff before the next attempt.
        retry_in: Duration,
    },
    /// Stopped on request or caught up.
    Stopped,
    /// Stopped on a definite error; it will not restart by itself.
    Failed {
        /// The failure, with its sources.
        error: String,
    },
}

impl Phase {
    /// Every phase's label value, in a fixed order.
    pub const LABELS: [&'static str; 6] = [
        "connecting",
        "snapshotting",
        "streaming",
        "restarting",
        "stopped",
        "failed",
    ];

    /// The `phase` label value.
    pub fn label(&self) -> &'static str {
        match self {
            Phase::Connecting => "connecting",
            Phase::Snapshotting => "snapshotting",
            Phase::Streaming => "streaming",
            Phase::Restarting { .. } => "restarting",
            Phase::Stopped => "stopped",
            Phase::Failed { .. } => "failed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Connecting => f.write_str("connecting to PostgreSQL and starting replication"),
            Phase::Snapshotting => f.write_str("taking the initial snapshot"),
            Phase::Streaming => f.write_str("streaming"),
            Phase::Restarting { error, retry_in } => write!(
                f,
                "restarting after a failure (next attempt in {}): {error}",
                humantime::format_duration(*retry_in)
            ),
            Phase::Stopped => f.write_str("stopped"),
            Phase::Failed { error } => write!(f, "stopped on an error: {error}"),
        }
    }
}
