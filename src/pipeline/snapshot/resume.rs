//! An initial snapshot interrupted after some of it reached Kafka: what the
//! progress topic says of it, and its resumption as an incremental snapshot.
//!
//! The exported snapshot died with its connection, so the rows still
//! missing cannot be read as of the consistent point any more. They are read
//! instead as an incremental snapshot (DBLog watermarks,
//! [`super::super::incremental`]) while the stream runs from the consistent
//! point, where the working slot still is: every change after the
//! consistent point is streamed, and each resumed chunk is reconciled with
//! the changes streamed during its window, so for every key the newest
//! version wins. The rows already in Kafka are the snapshot's, as of the
//! consistent point, and the stream carries every later change to them.
//!
//! Order of the steps, so that no crash loses the rest: the tables left are
//! written into the incremental snapshot's progress row first, and only
//! then is the working slot promoted. A crash in between resumes again from
//! the record (the same tables, once).
//!
//! With `--read-only` there is no progress row: the snapshot reads its
//! chunks read-only (`incremental/read_only.rs`) and keeps its progress in
//! Kafka. So the tables left are written to Kafka first, in a progress
//! record that is still the initial snapshot's (its consistent point, what
//! it has left) and also holds the incremental snapshot's progress
//! (under at-least-once in the progress topic, acknowledged; under
//! exactly-once committed in a Kafka transaction of its own), and only then
//! is the working slot promoted. A crash before the promotion finds that
//! record and resumes the same way; one after it finds the real slot, and
//! the stream resumes the incremental snapshot from the same record
//! (`incremental/read_only_progress.rs`, or `incremental/committed.rs`
//! under exactly-once).

use std::sync::Arc;
use std::time::Duration;

use super::super::stream::Stream;
use super::{promote_slot, records_progress, PipelineError, SnapshotError};
use crate::config::{Delivery as DeliveryMode, RunConfig};
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::sink::kafka::InFlightLimits;
use crate::sink::transactional::{self, InitialSnapshotProgress, ProgressRecord};
use crate::sink::{Delivery, InKafka, SinkError, Transactional};
use crate::source::setup;

/// What an earlier, interrupted initial snapshot left.
#[derive(Debug)]
pub(in crate::pipeline) enum Interrupted {
    /// Kafka committed all of it (exactly-once) before the working slot was
    /// promoted; it is promoted now. Streaming starts at this point.
    Committed(Lsn),
    /// Part of it is in Kafka: stream from this point and read the rest
    /// ([`resume`]).
    Resumable {
        point: Lsn,
        progress: InitialSnapshotProgress,
    },
}

/// Looks for an interrupted snapshot: a working slot, and in the progress
/// topic a record for its consistent point. Exactly-once first initializes
/// the transactional producer (fencing an older instance and aborting its
/// open transaction, which would hold the read back).
pub(in crate::pipeline) async fn interrupted(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
    metrics: &Arc<Metrics>,
) -> Result<Option<Interrupted>, PipelineError> {
    let exactly_once = config.delivery == DeliveryMode::ExactlyOnce;
    if !exactly_once && !records_progress(config) {
        return Ok(None);
    }
    let Some(point) = setup::confirmed_flush_lsn(sql, &config.names().snapshot_slot()).await?
    else {
        return Ok(None);
    };
    let Some(record) = recorded(config, point, metrics).await? else {
        return Ok(None);
    };
    if record.lsn != point {
        return Ok(None);
    }
    if record.snapshot {
        tracing::info!(lsn = %point, "kafka committed the snapshot before the slot was promoted; promoting it now");
        promote_slot(config, sql).await?;
        return Ok(Some(Interrupted::Committed(point)));
    }
    match record.initial_snapshot {
        Some(progress) if records_progress(config) => {
            Ok(Some(Interrupted::Resumable { point, progress }))
        }
        _ => Ok(None),
    }
}

/// A transactional producer of this connector's own, for a start that
/// reads or writes its progress record before the stream's delivery is
/// initialized; initializing it fences any other instance.
fn own_transactional(
    config: &RunConfig,
    point: Lsn,
    metrics: &Arc<Metrics>,
) -> Result<Transactional, SinkError> {
    Transactional::new(
        &config.producer_config(),
        &config.names(),
        &config.eos,
        InFlightLimits {
            messages: 16,
            bytes: 1 << 20,
        },
        point,
        Arc::clone(metrics),
    )
}

/// This connector's latest progress record.
async fn recorded(
    config: &RunConfig,
    point: Lsn,
    metrics: &Arc<Metrics>,
) -> Result<Option<ProgressRecord>, PipelineError> {
    if config.delivery == DeliveryMode::ExactlyOnce {
        let mut delivery = own_transactional(config, point, metrics)?;
        let InKafka::Recorded(record) = delivery.init().await? else {
            return Ok(None);
        };
        return Ok(record);
    }
    let client = config.producer_config();
    let names = config.names();
    let (topic, connector) = (names.progress_topic(), names.connector_name());
    tokio::task::spawn_blocking(move || transactional::read_progress(&client, &topic, &connector))
        .await
        .map_err(|_| SinkError::FlushTimeout(Duration::from_secs(60)))?
        .map_err(PipelineError::from)
}

/// Resumes the interrupted snapshot `progress` left: hands its remaining
/// tables (each from its recorded key) to the incremental snapshot, records
/// that (in the progress row; read-only: in Kafka), then promotes the
/// working slot. The stream then starts at the consistent point.
pub(in crate::pipeline) async fn resume(
    stream: &mut Stream<'_>,
    point: Lsn,
    progress: InitialSnapshotProgress,
) -> Result<(), PipelineError> {
    let Some(incremental) = stream.incremental.as_mut() else {
        return Err(SnapshotError::ResumeWithoutSignalTable.into());
    };
    let read_only = incremental.is_read_only();
    tracing::info!(
        lsn = %point,
        tables = ?progress.remaining,
        after = ?progress.after,
        read_only,
        "resuming the interrupted initial snapshot: its remaining chunks are read as an incremental snapshot while streaming from its consistent point"
    );
    incremental.adopt(progress.as_incremental()).await?;
    if read_only {
        record_in_kafka(stream, point, progress).await?;
    }
    promote_slot(stream.config, &stream.sql).await?;
    Ok(())
}

/// Read-only: makes the adopted tables durable in Kafka before the working
/// slot is promoted (see the module docs), in a record at the consistent
/// `point` that still says what the initial snapshot has left (`initial`).
async fn record_in_kafka(
    stream: &mut Stream<'_>,
    point: Lsn,
    initial: InitialSnapshotProgress,
) -> Result<(), PipelineError> {
    let Some(incremental) = stream.incremental.as_mut() else {
        return Ok(());
    };
    let progress = incremental.progress_in_kafka();
    let record = ProgressRecord {
        lsn: point,
        snapshot: false,
        transactions: 0,
        written_at_ms: transactional::now_ms(),
        incremental_snapshot: Some(progress.clone()),
        initial_snapshot: Some(initial),
        server: None,
    };
    let config = stream.config;
    let names = config.names();
    let (topic, key) = (names.progress_topic(), names.connector_name());
    if config.delivery == DeliveryMode::ExactlyOnce {
        // The stream's producer is initialized only once streaming starts:
        // a Kafka transaction of a producer of its own, fencing (as the
        // look-up of the interrupted snapshot did) and fenced in turn.
        let mut delivery = own_transactional(config, point, &stream.metrics)?;
        delivery.init().await?;
        delivery
            .checkpoint(&topic, &key, record, RECORD_TIMEOUT)
            .await?;
    } else {
        // The progress topic exists: the interrupted snapshot's record is there.
        (stream.delivery)
            .checkpoint(&topic, &key, record, RECORD_TIMEOUT)
            .await?;
        if let Some(failure) = stream.delivery.failure() {
            return Err(PipelineError::Delivery(failure));
        }
        if let Some(incremental) = stream.incremental.as_mut() {
            incremental.recorded_in_kafka(progress);
        }
    }
    tracing::info!(lsn = %point, "the resumed snapshot's tables are recorded in kafka; promoting the working slot");
    Ok(())
}

/// How long recording the resumed snapshot may wait for Kafka.
const RECORD_TIMEOUT: Duration = Duration::from_secs(60);
