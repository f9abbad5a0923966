//! The pipeline's side of `--delivery exactly-once` (see
//! [`crate::sink::transactional`] for the scheme): where the stream starts
//! from the progress topic, and the incremental snapshot's progress
//! committed with each Kafka transaction. (The recovery of a snapshot that Kafka
//! committed before the slot was promoted is in `snapshot::resume`.)

use super::stream::Stream;
use super::{fault, PipelineError};
use crate::lsn::Lsn;
use crate::sink::{InKafka, SinkError};
use crate::source::{identity, setup};

/// Once the stream holds the slot: initializes the delivery (for
/// exactly-once, the transactional producer, fencing any other instance
/// with the same transactional.id and aborting what a crashed one left
/// open) and reads the progress record, so that the stream drops every
/// transaction Kafka already has.
///
/// Done after the replication connection is up so that a second instance
/// with the same slot stops at the busy slot instead of fencing the first.
///
/// A record written from another server than `observed` is judged as a
/// reconnect would be ([`identity::judge`]): its position skips
/// transactions only within the same history, so this also holds across
/// restarts of the process, which forget the server they streamed from.
pub(super) async fn start_streaming(
    stream: &mut Stream<'_>,
    start: Lsn,
    observed: &identity::Observed,
) -> Result<(), PipelineError> {
    let InKafka::Recorded(recorded) = stream.delivery.init().await? else {
        return Ok(());
    };
    if let Some(record) = &recorded {
        if let Some(server) = record.server {
            let known = identity::Known {
                identity: Some(identity::ServerIdentity {
                    system_identifier: server.system_identifier,
                    timeline: server.timeline,
                }),
                acknowledged: record.lsn,
                slot: &stream.config.slot_name,
                slot_exists: true,
            };
            identity::judge(&known, observed)?;
        }
        let server = setup::current_wal_lsn(&stream.sql).await?;
        if record.lsn > server {
            return Err(SinkError::ProgressAhead {
                topic: stream.config.names().progress_topic(),
                connector: stream.config.names().connector_name(),
                recorded: record.lsn,
                server,
            }
            .into());
        }
        if record.lsn > start {
            tracing::info!(slot_confirmed = %start, recorded = %record.lsn, "kafka already holds transactions the slot did not confirm; they are skipped");
        }
    }
    stream.resume_incremental_from_kafka(recorded.as_ref(), start);
    stream
        .delivery
        .skip_before(recorded.map_or(start, |r| r.lsn).max(start));
    Ok(())
}

impl Stream<'_> {
    /// Commits the open Kafka transaction, if the delivery writes them (see
    /// [`Delivery::commit_batch`]). Its progress record carries the
    /// incremental snapshot's progress as of its last Postgres transaction:
    /// called only between Postgres transactions, so every chunk emitted so
    /// far is in this Kafka transaction or an earlier one, and a chunk whose
    /// watermarks the stream has not passed yet is in none.
    pub(super) async fn commit_kafka_batch(&mut self, snapshot: bool) -> Result<(), SinkError> {
        let incremental = self.incremental.as_ref();
        let progress = incremental.map(|i| i.progress_in_kafka());
        let chunk = incremental
            .and_then(|i| i.emitted_chunk_commit())
            .filter(|&lsn| self.delivery.acked() < lsn);
        let signal = (self.kafka_signals.as_ref()).is_some_and(|s| s.in_open_batch());
        if signal && self.delivery.batch_deadline().is_some() {
            fault::signal_commit_due().await;
        }
        let committed = self.delivery.commit_batch(snapshot, progress).await?;
        if committed {
            if let Some(signals) = &mut self.kafka_signals {
                signals.batch_committed();
            }
        }
        if committed && chunk.is_some_and(|lsn| self.delivery.acked() >= lsn) {
            fault::chunk_committed().await;
        }
        Ok(())
    }
}
