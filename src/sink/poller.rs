//! The producer's polling thread, which serves delivery reports, and the
//! producer's teardown, both made quick to stop.
//!
//! rust-rdkafka's `ThreadedProducer` polls in 100 ms steps and looks for a
//! stop only between them, and its `BaseProducer` flushes on drop by polling
//! 100 ms at a time while anything is left in its queue (a statistics
//! report is enough): a bounded run's exit waited 100-200 ms for the two
//! (BENCHMARKS.md, "A bounded run's exit"). Here the thread polls in
//! `STEP`s, and `PolledProducer::stop` serves what is left itself
//! before the producer is dropped.
//!
//! Short steps need `vendor/patches/rdkafka/timeout-round-up.patch`:
//! rust-rdkafka truncated a poll's remaining time to whole milliseconds,
//! so the last fraction of every step was a zero wait that its poll loop
//! spun through, a twentieth of a core at 10 ms steps (BENCHMARKS.md, "The
//! producer's own polling thread, without the spin").

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, Producer, ProducerContext, PurgeConfig};

/// How long the thread waits for an event before looking at the stop flag:
/// what a stop waits at most. Idle, it wakes this often.
const STEP: Duration = Duration::from_millis(10);

/// Most events served while stopping (each poll serves one; the queue
/// holds delivery reports, errors and statistics).
const LEFT_AT_STOP: usize = 10_000;

/// A producer and the thread serving its events; both stop when dropped.
pub struct PolledProducer<C: ProducerContext + 'static> {
    producer: Arc<BaseProducer<C>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl<C: ProducerContext + 'static> PolledProducer<C> {
    /// Starts serving `producer`'s events on a thread of its own.
    pub fn start(producer: BaseProducer<C>) -> std::io::Result<Self> {
        let producer = Arc::new(producer);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("producer poll".to_owned())
            .spawn({
                let (producer, stop) = (Arc::clone(&producer), Arc::clone(&stop));
                move || {
                    while !stop.load(Ordering::Acquire) {
                        producer.poll(STEP);
                    }
                }
            })?;
        Ok(PolledProducer {
            producer,
            stop,
            thread: Some(thread),
        })
    }

    /// The producer, shared with the thread.
    pub fn shared(&self) -> &Arc<BaseProducer<C>> {
        &self.producer
    }

    /// Stops the thread, then purges what was never delivered (its
    /// reports say so) and serves the queue until it is empty, so that the
    /// producer's own drop finds nothing to wait for.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
        for _ in 0..LEFT_AT_STOP {
            // librdkafka's count of messages and of events not yet served.
            if self.producer.in_flight_count() == 0 {
                break;
            }
            self.producer.poll(Duration::ZERO);
        }
    }
}

impl<C: ProducerContext + 'static> Deref for PolledProducer<C> {
    type Target = BaseProducer<C>;

    fn deref(&self) -> &BaseProducer<C> {
        &self.producer
    }
}

impl<C: ProducerContext + 'static> Drop for PolledProducer<C> {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Mutex;

    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseRecord, DeliveryResult};
    use rdkafka::ClientContext;

    use super::*;

    /// Passes each delivery report's outcome on.
    struct Reports(Mutex<mpsc::Sender<bool>>);

    impl ClientContext for Reports {}

    impl ProducerContext for Reports {
        type DeliveryOpaque = ();

        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            let _ = self.0.lock().unwrap().send(result.is_ok());
        }
    }

    /// A polled producer of a broker nobody runs (nothing listens on port
    /// 1), and the outcomes of its delivery reports.
    fn unreachable(message_timeout_ms: &str) -> (PolledProducer<Reports>, mpsc::Receiver<bool>) {
        let (sender, reports) = mpsc::channel();
        let producer: BaseProducer<Reports> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("message.timeout.ms", message_timeout_ms)
            .set("log_level", "0")
            .create_with_context(Reports(Mutex::new(sender)))
            .expect("producer");
        (PolledProducer::start(producer).expect("thread"), reports)
    }

    fn send(producer: &PolledProducer<Reports>) {
        producer
            .send(BaseRecord::to("t").payload("v").key("k"))
            .map_err(|(e, _)| e)
            .expect("queued");
    }

    #[test]
    fn the_thread_serves_delivery_reports_without_anyone_polling() {
        // The record times out, and that report must reach the context
        // through the thread alone.
        let (producer, reports) = unreachable("200");
        send(&producer);
        let delivered = reports
            .recv_timeout(Duration::from_secs(30))
            .expect("a delivery report");
        assert!(!delivered, "nothing listens on port 1");
        drop(producer);
        assert!(reports.try_recv().is_err(), "one record, one report");
    }

    #[test]
    fn a_dropped_producer_reports_what_it_purged() {
        let (producer, reports) = unreachable("300000");
        for _ in 0..3 {
            send(&producer);
        }
        drop(producer);
        // Dropping it purged the three and served their reports before
        // the producer went: all three are here, none delivered (what the
        // stop's count of unacknowledged records stands on).
        let purged: Vec<bool> = reports.try_iter().collect();
        assert_eq!(purged, [false, false, false]);
    }
}
