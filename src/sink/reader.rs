//! A consumer the connector reads its own topics with (the tails of the
//! data topics, the progress topic), closed quickly when dropped.

use std::ops::Deref;
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;

use super::client_log::LoggingContext;

/// How long a dropped reader waits for its consumer to close (it is
/// assigned partitions and never joins a group, so the close is local).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// A [`BaseConsumer`] that closes itself in 1 ms polls when dropped:
/// rust-rdkafka's own drop polls in 100 ms steps for a close that takes a
/// few, which cost every run a tenth of a second at its exit.
pub struct Reader(BaseConsumer<LoggingContext>);

impl From<BaseConsumer<LoggingContext>> for Reader {
    fn from(consumer: BaseConsumer<LoggingContext>) -> Self {
        Reader(consumer)
    }
}

impl Deref for Reader {
    type Target = BaseConsumer<LoggingContext>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if self.0.close_queue().is_err() {
            return;
        }
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while !self.0.closed() && Instant::now() < deadline {
            let _ = self.0.poll(Duration::from_millis(1));
        }
    }
}
