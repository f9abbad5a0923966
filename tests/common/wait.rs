//! Waiting in tests: poll an observable condition until it holds or a
//! deadline passes, never sleep and hope. [`TIMEOUT`] bounds every wait for
//! something a test expects to happen; a passing test never reaches it.

use std::future::Future;
use std::time::{Duration, Instant};

/// The bound on any one wait for an expected outcome (a record to arrive, the
/// slot to move, a process to exit). Generous because it is only reached when
/// a test fails, and on a loaded two-core machine the slowest legitimate waits
/// are long: an incremental snapshot of 100,000 rows in small chunks, or a
/// recovery through the connector's restart backoff, which doubles from 1 s
/// with every failed attempt (up to 60 s), where one fault can cost several.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// How often a condition is looked at again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Polls `condition` every [`POLL_INTERVAL`] until it holds; panics, naming
/// `what`, if `timeout` passes first.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_for(timeout, what, || {
        let check = condition();
        async move { check.await.then_some(()).ok_or_else(String::new) }
    })
    .await;
}

/// Polls `probe` every [`POLL_INTERVAL`] until it returns `Ok(value)` and
/// returns the value; panics if `timeout` passes first, naming `what` and
/// what the last probe saw instead (its `Err`, when not empty).
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match probe().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            match seen.is_empty() {
                true => panic!("timed out after {timeout:?} waiting for {what}"),
                false => {
                    panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}")
                }
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Runs `check` (which asserts what must stay true) every 100 ms for the
/// whole of `window`: the counterpart of [`wait_until`] for proving that
/// something does *not* happen while a fault lasts. The window is the point
/// here, so it is a fixed length of time rather than a condition.
pub async fn hold_for<F, Fut>(window: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let until = Instant::now() + window;
    loop {
        check().await;
        if Instant::now() >= until {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`wait_for`] for blocking code (a consumer or child process on its own
/// thread): polls `probe` every 100 ms until it returns `Some` or `deadline`
/// passes, then returns `None`, leaving what a timeout means to the caller.
pub fn poll_blocking<T>(deadline: Instant, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
