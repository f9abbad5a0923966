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

/// This connector's latest progress record.
async fn recorded(
    config: &RunConfig,
    point: Lsn,
    metrics: &Arc<Metrics>,
) -> Result<Option<ProgressRecord>, PipelineError> {
    if config.delivery == DeliveryMode::ExactlyOnce {
        let mut delivery = Transactional::new(
            &config.producer_config(),
            &config.names(),
            &config.eos,
            InFlightLimits {
                messages: 1,
                bytes: 1024,
            },
            point,
            Arc::clone(metrics),
        )?;
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
/// that in the progress row, then promotes the working slot. The stream
/// then starts at the consistent point.
pub(in crate::pipeline) async fn resume(
    stream: &mut Stream<'_>,
    point: Lsn,
    progress: InitialSnapshotProgress,
) -> Result<(), PipelineError> {
    let writable = stream.incremental.as_mut().filter(|i| !i.is_read_only());
    let Some(incremental) = writable else {
        return Err(SnapshotError::ResumeWithoutSignalTable.into());
    };
    tracing::info!(
        lsn = %point,
        tables = ?progress.remaining,
        after = ?progress.after,
        "resuming the interrupted initial snapshot: its remaining chunks are read as an incremental snapshot while streaming from its consistent point"
    );
    incremental
        .adopt(progress.as_incremental(), &stream.metrics)
        .await?;
    promote_slot(stream.config, &stream.sql).await?;
    Ok(())
}
