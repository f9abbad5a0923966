//! The instance's membership of the fleet's consumer group, on a thread of
//! its own: it polls rdkafka (which runs the rebalance callbacks on the
//! polling thread) and turns assignments and revocations into
//! [`Membership`] events for the instance's async loop.
//!
//! A revocation must be acted on before the partition is given up: the
//! callback hands the instance the revoked partitions with a reply
//! channel and waits for the reply, at most [`REVOKE_WAIT`], which is
//! well under `max.poll.interval.ms` ([`MAX_POLL_INTERVAL`]) so the member
//! is never thrown out of the group for being slow to revoke. Heartbeats
//! go on meanwhile (librdkafka sends them from its own thread), and with
//! the cooperative protocol the other members keep their partitions and
//! their pipelines running during the whole rebalance.
//!
//! A lost assignment (`rd_kafka_assignment_lost`: the session timed out,
//! typically because this instance was cut off from the brokers) arrives as
//! a revocation marked `lost`: the partitions may already be someone
//! else's, so the instance stops those pipelines at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::TopicPartitionList;
use tokio::sync::mpsc;

use super::{FleetError, FleetKafka, FleetName};

/// Longest a revocation waits for the instance to stop the revoked
/// pipelines (their graceful stop is forced before this passes).
pub const REVOKE_WAIT: Duration = Duration::from_secs(45);

/// `max.poll.interval.ms`: above [`REVOKE_WAIT`].
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// What the group tells the instance.
#[derive(Debug)]
pub enum Membership {
    /// These partitions are this instance's now (incremental).
    Assigned(Vec<i32>),
    /// These partitions are taken away; reply on `done` once their
    /// pipelines stopped. `lost`: the session expired, they may run
    /// elsewhere already.
    Revoked {
        partitions: Vec<i32>,
        lost: bool,
        done: std_mpsc::SyncSender<()>,
    },
    /// The member hit a fatal error (another member with the same
    /// `group.instance.id` fenced it): it left; the instance must stop.
    Fatal(String),
}

/// The group member's settings.
#[derive(Debug, Clone)]
pub struct MemberSettings {
    pub kafka: FleetKafka,
    pub fleet: FleetName,
    pub client_id: String,
    /// `group.instance.id` (static membership), if any.
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
}

impl MemberSettings {
    /// The consumer's configuration.
    fn client(&self) -> rdkafka::ClientConfig {
        let mut config = self.kafka.client(&self.client_id);
        let heartbeat = (self.session_timeout / 10).max(Duration::from_millis(500));
        config
            .set("group.id", self.fleet.group())
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", millis(self.session_timeout))
            .set("heartbeat.interval.ms", millis(heartbeat))
            .set("max.poll.interval.ms", millis(MAX_POLL_INTERVAL))
            // New partitions (a pipeline added by `fleet apply`) are seen
            // within this, and rebalanced.
            .set("topic.metadata.refresh.interval.ms", "5000")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest");
        if let Some(id) = &self.instance_id {
            config.set("group.instance.id", id);
        }
        config
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

/// The rebalance callbacks.
struct Context {
    topic: String,
    events: mpsc::Sender<Membership>,
}

impl ClientContext for Context {}

impl Context {
    fn partitions(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .map(|e| e.partition())
            .collect()
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let partitions = self.partitions(tpl);
        if partitions.is_empty() {
            return;
        }
        let lost = consumer.assignment_lost();
        let (done, stopped) = std_mpsc::sync_channel(1);
        let event = Membership::Revoked {
            partitions: partitions.clone(),
            lost,
            done,
        };
        if self.events.blocking_send(event).is_err() {
            return;
        }
        if stopped.recv_timeout(REVOKE_WAIT).is_err() {
            tracing::warn!(?partitions, wait = ?REVOKE_WAIT, "the revoked pipelines did not confirm their stop in time; giving the partitions up anyway (a new owner waits for the slot, or fences the old producer)");
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let partitions = self.partitions(tpl);
                let _ = self.events.blocking_send(Membership::Assigned(partitions));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => {
                tracing::warn!(%error, "the fleet's rebalance failed; librdkafka rejoins the group");
            }
        }
    }
}

/// The member's thread; dropping [`Member::leave`]s the group.
pub struct Member {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Member {
    /// Joins the group and polls on a thread of its own, sending what the
    /// group decides to `events`.
    pub fn join(
        settings: MemberSettings,
        events: mpsc::Sender<Membership>,
    ) -> Result<Member, FleetError> {
        let topic = settings.fleet.assignment_topic();
        let context = Context {
            topic: topic.clone(),
            events,
        };
        let consumer: BaseConsumer<Context> = settings
            .client()
            .create_with_context(context)
            .map_err(FleetError::Client)?;
        consumer.subscribe(&[&topic]).map_err(FleetError::Client)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("fleet-member".to_owned())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    // The assignment topic carries no records: poll only
                    // serves the callbacks (rebalances, errors).
                    if let Some(Err(error)) = consumer.poll(Duration::from_millis(100)) {
                        tracing::debug!(%error, "fleet group member");
                    }
                    if let Some((_, reason)) = consumer.client().fatal_error() {
                        let _ = consumer
                            .context()
                            .events
                            .blocking_send(Membership::Fatal(reason));
                        break;
                    }
                }
                // Closing (on drop) revokes what is left, which the instance
                // has stopped by now. A dynamic member leaves the group; a
                // static one does not (no unsubscribe, which would leave):
                // the group keeps its partitions for it for the session
                // timeout, so that a restart gets them back unmoved.
                drop(consumer);
            })
            .expect("spawn the fleet member thread");
        Ok(Member {
            stop,
            thread: Some(thread),
        })
    }

    /// Closes the member (a dynamic one leaves the group; a static one
    /// does not, and the group keeps its partitions for it until the
    /// session timeout) and waits for the thread.
    pub fn leave(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
