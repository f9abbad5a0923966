//! Fleet mode: many pipelines on many instances, coordinated by Kafka's
//! consumer-group protocol, as Kafka Connect's distributed mode is.
//!
//! ```text
//!   fleet apply ──► <fleet>.configs  (compacted; key = pipeline, value = {index, config})
//!                         │ every instance reads it to the end, then follows it
//!                         ▼
//!   instance A ─┐   consumer group  pgcdc-fleet.<fleet>, cooperative-sticky,
//!   instance B ─┼─► subscribed to   <fleet>.assignment  (partition p = the pipelines of index p)
//!   instance C ─┘                    │
//!                                    ▼ owning partition p = running the pipelines with index p
//!                              supervisor.start / stop
//! ```
//!
//! | Kafka Connect (distributed)        | pgcdc-kafka fleet                           |
//! |------------------------------------|---------------------------------------------|
//! | worker group (`group.id`)          | consumer group `pgcdc-fleet.<fleet>`        |
//! | `config.storage.topic`             | `pgcdc-fleet.<fleet>.configs` (compacted)   |
//! | `status.storage.topic`             | `pgcdc-fleet.<fleet>.status` (compacted)    |
//! | connector task                     | pipeline                                    |
//! | incremental cooperative rebalancing| `partition.assignment.strategy=cooperative-sticky` |
//!
//! librdkafka has no pluggable assignor, so the assignment is expressed in
//! what the built-in one balances: partitions. Each pipeline's record
//! carries a partition index (`fleet apply` gives a new pipeline the lowest
//! free one and adds partitions when needed); the sticky assignor balances
//! partition counts, and a cooperative rebalance moves only the partitions
//! that must move. A partition without a pipeline (an index freed by
//! `fleet remove`) is owned like any other and runs nothing: the next
//! `fleet apply` fills the lowest free index first.
//!
//! Ownership never makes two writers:
//! - on a revoke, the instance stops the partition's pipelines (flush,
//!   confirm) before it gives the partition up, on its own thread, so that
//!   rdkafka's poll loop is blocked only for a bounded time
//!   ([`membership::REVOKE_WAIT`], under `max.poll.interval.ms`);
//! - at-least-once: a new owner whose slot is still held by the old
//!   walsender waits, retrying with capped backoff ([`instance`]); one slot
//!   has one reader, so two instances never stream the same pipeline;
//! - exactly-once: the transactional id is the pipeline's connector name
//!   ([`crate::naming::Names::transactional_id`]), the same on every
//!   instance, so the new owner's producer fences a zombie's;
//! - an instance cut off from Kafka for the session timeout loses its
//!   assignment (librdkafka reports the partitions as lost) and stops its
//!   pipelines at once, releasing their slots.

pub mod admin;
pub mod configs;
pub mod instance;
pub mod membership;
pub mod record;
pub mod secrets;
pub mod status;

use std::time::Duration;

use rdkafka::config::ClientConfig;

pub use crate::config::fleet::FleetName;
use crate::config::RunConfig;

/// What can go wrong with the fleet's own Kafka clients and topics.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot create a Kafka client for the fleet; check --bootstrap-servers and the Kafka security settings")]
    Client(#[source] rdkafka::error::KafkaError),
    #[error("cannot read the fleet's topic {topic}; check that the brokers of --bootstrap-servers are up and this principal may read it")]
    Read {
        topic: String,
        #[source]
        error: rdkafka::error::KafkaError,
    },
    #[error("cannot write to the fleet's topic {topic}; check that the brokers are up and this principal may write it")]
    Write {
        topic: String,
        #[source]
        error: rdkafka::error::KafkaError,
    },
    #[error("cannot create or grow the fleet's topic {topic}: {reason}; check that this principal may create topics and add partitions")]
    Topic { topic: String, reason: String },
    #[error("fleet {fleet:?} has no configs topic ({topic}) yet; load its pipelines with `pgcdc-kafka fleet apply <file>` first")]
    NoSuchFleet { fleet: String, topic: String },
    #[error("this instance was put out of the fleet's group: {reason}; another instance runs with the same --fleet-instance: give each instance its own")]
    Fenced { reason: String },
    #[error("cannot describe the fleet's consumer group {group}")]
    Group {
        group: String,
        #[source]
        error: rdkafka::error::KafkaError,
    },
}

impl FleetError {
    /// Whether trying again later may succeed (brokers down, a leader
    /// moving) rather than needing the operator.
    pub fn is_retryable(&self) -> bool {
        match self {
            FleetError::Read { .. } | FleetError::Write { .. } | FleetError::Group { .. } => true,
            FleetError::Client(_)
            | FleetError::Topic { .. }
            | FleetError::NoSuchFleet { .. }
            | FleetError::Fenced { .. } => false,
        }
    }
}

/// How long a single request of the fleet's clients may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the fleet's own clients (configs reader, group member, status
/// writer, admin) connect: bootstrap servers and the Kafka security
/// properties, none of the producer tuning of the pipelines.
#[derive(Debug, Clone)]
pub struct FleetKafka {
    pub bootstrap_servers: String,
    pub properties: Vec<(String, String)>,
}

impl FleetKafka {
    /// An instance's: its `--bootstrap-servers` and typed security settings.
    pub fn of(shared: &RunConfig) -> Self {
        FleetKafka {
            bootstrap_servers: shared.bootstrap_servers.clone(),
            properties: crate::config::fleet::connection_properties(shared),
        }
    }

    /// A client configuration with `client.id` set.
    pub fn client(&self, client_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", client_id);
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
    }
}
