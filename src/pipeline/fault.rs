//! Fault injection for tests, compiled into debug builds only (the test
//! suite runs the debug binary; a release build has none of it).
//!
//! `PGCDC_TEST_PAUSE_AFTER_CHUNK_COMMIT=<n>:<marker file>` makes the stream
//! stop dead right after the Kafka commit of the `n`-th Kafka transaction
//! that carried an incremental snapshot chunk (counted from 1, per process),
//! before anything else happens: in particular before the signal table's
//! progress row records that chunk. It creates the marker file and waits
//! forever, so a test can `kill -9` the process in exactly that window,
//! which no timing can hit reliably.

/// The variable that arms the pause (see the module docs).
pub const PAUSE_AFTER_CHUNK_COMMIT: &str = "PGCDC_TEST_PAUSE_AFTER_CHUNK_COMMIT";

/// A Kafka transaction carrying a chunk was committed.
#[cfg(debug_assertions)]
pub(super) async fn chunk_committed() {
    use std::sync::atomic::{AtomicU64, Ordering};

    static COMMITTED: AtomicU64 = AtomicU64::new(0);
    let count = COMMITTED.fetch_add(1, Ordering::Relaxed) + 1;
    let Ok(armed) = std::env::var(PAUSE_AFTER_CHUNK_COMMIT) else {
        return;
    };
    let Some((n, marker)) = armed.split_once(':') else {
        return;
    };
    if n.parse() != Ok(count) {
        return;
    }
    tracing::warn!(chunk_commits = count, %marker, "fault injection: paused after a chunk's kafka commit");
    if let Err(error) = std::fs::write(marker, count.to_string()) {
        tracing::warn!(%error, %marker, "fault injection: cannot write the marker file");
    }
    std::future::pending::<()>().await;
}

/// A Kafka transaction carrying a chunk was committed (no faults in release builds).
#[cfg(not(debug_assertions))]
pub(super) async fn chunk_committed() {}
