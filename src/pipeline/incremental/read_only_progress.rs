//! Read-only incremental snapshots under at-least-once: their progress
//! kept in the progress topic, so a restart resumes them where Kafka's
//! acknowledgements stopped instead of from the start.
//!
//! The read-write mode keeps the progress (tables left, the last key of the
//! current table) in the signal table's progress row; exactly-once also
//! commits it in every Kafka transaction's progress record
//! ([`super::committed`]), which is how a read-only snapshot resumes under
//! exactly-once. Debezium keeps it in the connector's offsets. A read-only
//! source cannot hold it, so under at-least-once it goes where
//! at-least-once keeps its other durable state in Kafka: the progress
//! topic (`--progress-topic`, compacted, keyed by the connector name),
//! whose record an interrupted initial snapshot resumes from too
//! (docs/SNAPSHOTS.md).
//!
//! # Never ahead of Kafka
//!
//! The record is written whenever the progress changed, after the step
//! that changed it: a chunk acknowledged (its end becomes the last key
//! only once Kafka acknowledged every row of it), a table or the snapshot
//! finished, a signal applied. Writing it waits for Kafka to acknowledge
//! everything sent before, then for the record itself
//! ([`crate::sink::Delivery::checkpoint`]), so the newest record never
//! claims a chunk Kafka does not have. A crash re-reads at most one chunk
//! (sent again, never lost): the one in flight, or the one acknowledged
//! whose record was not written yet (the next chunk is emitted only after
//! that record). A signal from the kafka channel is recorded before its
//! offset is committed, so the `execute-snapshot` that started the
//! snapshot is not read again once its progress is durable.
//!
//! On start the newest record of the connector is read; when it holds a
//! snapshot with tables left, the snapshot goes on from there. Its `lsn` is
//! the position acknowledged when it was written; it does not bound the
//! resume: the chunks in Kafka are consistent with any later stream
//! position (a chunk is emitted after every change its rows contain), and
//! the changes the slot replays after a crash are at-least-once's usual
//! repetition.

use std::time::Duration;

use super::Incremental;
use crate::config::Delivery as DeliveryMode;
use crate::pipeline::stream::Stream;
use crate::pipeline::PipelineError;
use crate::sink::transactional::{self, ProgressRecord};
use crate::sink::SinkError;
use crate::source::signal::Progress;

/// How long writing a record may wait for Kafka's acknowledgements.
const RECORD_TIMEOUT: Duration = Duration::from_secs(300);

impl Incremental {
    /// `progress` is in the progress topic now (a resumed initial
    /// snapshot's tables, recorded before its slot was promoted).
    pub(in crate::pipeline) fn recorded_in_kafka(&mut self, progress: Progress) {
        if let Some(streamed) = self.read_only.as_mut() {
            streamed.recorded = Some(progress);
        }
    }

    /// The progress to record, when it differs from the one recorded last
    /// (`None`: unchanged, or not a read-only snapshot).
    fn unrecorded_progress(&self) -> Option<Progress> {
        let streamed = self.read_only.as_ref()?;
        let progress = Progress {
            chunk: None,
            ..self.progress.clone()
        };
        (streamed.recorded.as_ref() != Some(&progress)).then_some(progress)
    }
}

impl Stream<'_> {
    /// Whether this run keeps a read-only snapshot's progress in the
    /// progress topic (read-only under at-least-once).
    fn records_read_only_progress(&self) -> bool {
        self.config.signal_channels.read_only && self.config.delivery != DeliveryMode::ExactlyOnce
    }

    /// Writes `inc`'s progress to the progress topic if it changed since
    /// it was last written (see the module docs).
    pub(in crate::pipeline) async fn record_read_only_progress(
        &mut self,
        inc: &mut Incremental,
    ) -> Result<(), PipelineError> {
        self.record_read_only_progress_within(inc, RECORD_TIMEOUT)
            .await
    }

    /// [`Self::record_read_only_progress`], waiting at most `timeout` for
    /// Kafka.
    async fn record_read_only_progress_within(
        &mut self,
        inc: &mut Incremental,
        timeout: Duration,
    ) -> Result<(), PipelineError> {
        if !self.records_read_only_progress() {
            return Ok(());
        }
        let Some(progress) = inc.unrecorded_progress() else {
            return Ok(());
        };
        let names = self.config.names();
        let record = ProgressRecord {
            lsn: self.delivery.acked(),
            snapshot: false,
            transactions: 0,
            written_at_ms: transactional::now_ms(),
            incremental_snapshot: Some(progress.clone()),
            initial_snapshot: None,
            server: None,
        };
        self.delivery
            .checkpoint(
                &names.progress_topic(),
                &names.connector_name(),
                record,
                timeout,
            )
            .await?;
        if let Some(failure) = self.delivery.failure() {
            return Err(PipelineError::Delivery(failure));
        }
        tracing::debug!(tables = ?progress.tables, last_key = ?progress.last_key, "read-only incremental snapshot progress recorded in kafka");
        if let Some(streamed) = inc.read_only.as_mut() {
            streamed.recorded = Some(progress);
        }
        Ok(())
    }

    /// [`Self::record_read_only_progress`] of the stream's snapshot,
    /// waiting at most `timeout` for Kafka (`None`: as long as a chunk's).
    pub(in crate::pipeline) async fn record_read_only_progress_now(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<(), PipelineError> {
        let Some(mut inc) = self.incremental.take() else {
            return Ok(());
        };
        let timeout = timeout.unwrap_or(RECORD_TIMEOUT);
        let result = self
            .record_read_only_progress_within(&mut inc, timeout)
            .await;
        self.incremental = Some(inc);
        result
    }

    /// On a graceful stop, once everything sent is acknowledged: records
    /// the last acknowledged chunk, so the next start does not read it
    /// again. Not after a drain Kafka did not finish: it would not take
    /// the record either.
    pub(in crate::pipeline) async fn record_read_only_progress_on_stop(&mut self) {
        if !self.delivery.is_drained() {
            return;
        }
        let timeout = Some(self.config.shutdown_timeout);
        if let Err(error) = self.record_read_only_progress_now(timeout).await {
            tracing::warn!(error = %crate::error_chain(&error), "the read-only incremental snapshot's last chunk is not recorded in kafka; it is read again on restart");
        }
    }

    /// Before streaming: makes sure the progress topic exists, and resumes
    /// the read-only snapshot its newest record holds, if any (see the
    /// module docs).
    pub(in crate::pipeline) async fn resume_read_only_progress(
        &mut self,
    ) -> Result<(), PipelineError> {
        if !self.records_read_only_progress() || self.incremental.is_none() {
            return Ok(());
        }
        let client = self.config.producer_config();
        let names = self.config.names();
        let (topic, connector) = (names.progress_topic(), names.connector_name());
        transactional::ensure_progress_topic(&client, &topic).await?;
        let read = tokio::task::spawn_blocking(move || {
            transactional::read_progress(&client, &topic, &connector)
        })
        .await
        .map_err(|_| SinkError::FlushTimeout(Duration::from_secs(60)))??;
        let progress = read.and_then(|record| record.incremental_snapshot);
        let Some(inc) = self.incremental.as_mut() else {
            return Ok(());
        };
        if let Some(streamed) = inc.read_only.as_mut() {
            streamed.recorded.clone_from(&progress);
        }
        let Some(progress) = progress.filter(|p| !p.tables.is_empty()) else {
            return Ok(());
        };
        tracing::info!(tables = ?progress.tables, last_key = ?progress.last_key, "resuming the read-only incremental snapshot recorded in kafka");
        if progress.signal_id.is_some() {
            inc.correlation_id.clone_from(&progress.signal_id);
        }
        inc.progress = progress;
        inc.tally.begin();
        inc.count_tables_remaining();
        Ok(())
    }
}
