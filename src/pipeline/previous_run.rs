//! Evidence of an earlier run when the slot is missing.
//!
//! The slot is the connector's only record of how far it got. When it is
//! missing at start, either this is the first run, or the slot was dropped
//! (by hand, by a failover to a server without it, by `slot.drop.on.stop`
//! elsewhere) and every change since the last confirmed position is gone
//! from the WAL's point of view. Taking a fresh snapshot over topics that
//! already hold a history would quietly paper over that gap, so under
//! `--snapshot-mode initial` a missing slot with non-empty `<prefix>.` topics
//! stops with an error that says what happened and how to go on.

use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;

use super::PipelineError;
use crate::config::RunConfig;
use crate::sink::login::{self, Interrupted};
use crate::sink::{transactional, SinkError};

/// How long the metadata and watermark requests may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Topics named in the error, at most.
const SHOWN: usize = 5;

/// An earlier run's topics were found although the slot is missing.
#[derive(Debug, thiserror::Error)]
#[error(
    "replication slot {slot:?} does not exist, but topics of prefix {prefix:?} already hold \
     events ({topics}): the slot of an earlier run was dropped, so changes made since it last \
     confirmed cannot be streamed. Restart with --snapshot-mode when_needed to take a new \
     snapshot into the same topics (consumers see every row again as op \"r\"), or use a new \
     --topic-prefix for a fresh start"
)]
pub struct SlotLost {
    pub slot: String,
    pub prefix: String,
    pub topics: String,
}

/// The topics under `<prefix>.` that hold at least one record (empty on a
/// first run). A Kafka that cannot be asked is an error: the answer decides
/// whether a snapshot may be taken. Retried, unless the broker refused the
/// login (see [`crate::sink::login`]).
pub(super) async fn topics_with_records(config: &RunConfig) -> Result<Vec<String>, PipelineError> {
    let client_config = transactional::client_config(&config.producer_config());
    let prefix = format!("{}{}", config.topic_prefix, config.select.topic_delimiter);
    let probe = tokio::task::spawn_blocking(move || -> Result<Vec<String>, Interrupted<String>> {
        let failed = |e: KafkaError| Interrupted::Failed(e.to_string());
        let (client, metadata) =
            login::watched_metadata(&client_config, TIMEOUT).map_err(|interrupted| {
                match interrupted {
                    Interrupted::Refused(refused) => Interrupted::Refused(refused),
                    Interrupted::Failed(e) => failed(e),
                }
            })?;
        let mut found = Vec::new();
        for topic in metadata.topics() {
            if topic.error().is_some() || !topic.name().starts_with(&prefix) {
                continue;
            }
            for partition in topic.partitions() {
                let (low, high) = client
                    .fetch_watermarks(topic.name(), partition.id(), TIMEOUT)
                    .map_err(failed)?;
                if high > low || high > 0 {
                    found.push(topic.name().to_owned());
                    break;
                }
            }
        }
        found.sort();
        Ok(found)
    });
    match probe.await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(Interrupted::Refused(refused))) => Err(SinkError::from(refused).into()),
        Ok(Err(Interrupted::Failed(reason))) => Err(PipelineError::PreviousRun(format!(
            "{reason} (brokers of --bootstrap-servers: {})",
            config.bootstrap_servers
        ))),
        Err(_) => Err(PipelineError::PreviousRun(
            "the Kafka probe task panicked".into(),
        )),
    }
}

/// The error for a missing slot whose topics hold `topics`.
pub(super) fn slot_lost(config: &RunConfig, topics: &[String]) -> SlotLost {
    let mut shown = topics
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if topics.len() > SHOWN {
        shown.push_str(&format!(" and {} more", topics.len() - SHOWN));
    }
    SlotLost {
        slot: config.slot_name.clone(),
        prefix: config.topic_prefix.clone(),
        topics: shown,
    }
}
