//! Fault injection for tests, compiled into debug builds only (the test
//! suite runs the debug binary; a release build has none of it). Each hook
//! is armed by a variable `<n>:<marker file>`: at its `n`-th passage
//! (counted from 1, per process) it creates the marker file and waits
//! forever, so a test can `kill -9` the process in exactly that window,
//! which no timing can hit reliably.
//!
//! - [`PAUSE_AFTER_CHUNK_COMMIT`]: right after the Kafka commit of a
//!   transaction that carried an incremental snapshot chunk, before
//!   anything else happens: in particular before the signal table's
//!   progress row records that chunk.
//! - [`PAUSE_BEFORE_SIGNAL_COMMIT`]: right before the Kafka commit of a
//!   transaction that holds the effect of a kafka-channel signal (the
//!   snapshot's progress it changed): a signal's offset committed before
//!   that point would be lost with the transaction.
//! - [`PAUSE_BEFORE_SNAPSHOT_CHECKPOINT`]: right before a checkpoint of a
//!   resumable initial snapshot makes the rows sent since the last one
//!   durable (exactly-once: before their Kafka transaction commits, so a
//!   kill there leaves it open with a chunk's rows in it).

/// The variable that arms the pause after a chunk's commit.
pub const PAUSE_AFTER_CHUNK_COMMIT: &str = "PGCDC_TEST_PAUSE_AFTER_CHUNK_COMMIT";

/// The variable that arms the pause before a signal's commit.
pub const PAUSE_BEFORE_SIGNAL_COMMIT: &str = "PGCDC_TEST_PAUSE_BEFORE_SIGNAL_COMMIT";

/// The variable that arms the pause before an initial snapshot's checkpoint.
pub const PAUSE_BEFORE_SNAPSHOT_CHECKPOINT: &str = "PGCDC_TEST_PAUSE_BEFORE_SNAPSHOT_CHECKPOINT";

/// A Kafka transaction carrying a chunk was committed.
#[cfg(debug_assertions)]
pub(super) async fn chunk_committed() {
    use std::sync::atomic::{AtomicU64, Ordering};

    static COMMITTED: AtomicU64 = AtomicU64::new(0);
    let count = COMMITTED.fetch_add(1, Ordering::Relaxed) + 1;
    pause_if_armed(PAUSE_AFTER_CHUNK_COMMIT, count).await;
}

/// A Kafka transaction holding a kafka-channel signal's effect is about
/// to commit.
#[cfg(debug_assertions)]
pub(super) async fn signal_commit_due() {
    use std::sync::atomic::{AtomicU64, Ordering};

    static DUE: AtomicU64 = AtomicU64::new(0);
    let count = DUE.fetch_add(1, Ordering::Relaxed) + 1;
    pause_if_armed(PAUSE_BEFORE_SIGNAL_COMMIT, count).await;
}

/// An initial snapshot's checkpoint is about to make its rows durable.
#[cfg(debug_assertions)]
pub(super) async fn snapshot_checkpoint_due() {
    use std::sync::atomic::{AtomicU64, Ordering};

    static DUE: AtomicU64 = AtomicU64::new(0);
    let count = DUE.fetch_add(1, Ordering::Relaxed) + 1;
    pause_if_armed(PAUSE_BEFORE_SNAPSHOT_CHECKPOINT, count).await;
}

/// Waits forever, after creating the marker file, if `variable` arms this
/// hook for its `count`-th passage.
#[cfg(debug_assertions)]
async fn pause_if_armed(variable: &str, count: u64) {
    let Ok(armed) = std::env::var(variable) else {
        return;
    };
    let Some((n, marker)) = armed.split_once(':') else {
        return;
    };
    if n.parse() != Ok(count) {
        return;
    }
    tracing::warn!(hook = variable, passage = count, %marker, "fault injection: paused");
    if let Err(error) = std::fs::write(marker, count.to_string()) {
        tracing::warn!(%error, %marker, "fault injection: cannot write the marker file");
    }
    std::future::pending::<()>().await;
}

/// A Kafka transaction carrying a chunk was committed (no faults in release builds).
#[cfg(not(debug_assertions))]
pub(super) async fn chunk_committed() {}

/// A signal's Kafka transaction is about to commit (no faults in release builds).
#[cfg(not(debug_assertions))]
pub(super) async fn signal_commit_due() {}

/// An initial snapshot's checkpoint is due (no faults in release builds).
#[cfg(not(debug_assertions))]
pub(super) async fn snapshot_checkpoint_due() {}
