//! One attempt of the pipeline, from the slot to the end of streaming:
//! where it starts (the slot's position, or a new slot and its snapshot,
//! per `--snapshot-mode`), which delivery it writes through, the snapshot
//! if one is due, then the read loop ([`Stream`]) until a stop or an error.
//! [`super::run`] supervises attempts.

use std::future::Future;
use std::sync::Arc;

use super::snapshot::{self, Interrupted};
use super::stream::{client_status_interval, Stream};
use super::{exactly_once, previous_run};
use super::{PipelineError, RunSummary, Shutdown, StopReason, SESSION_OPTIONS};
use crate::config::{Delivery as DeliveryMode, RunConfig, SnapshotMode};
use crate::lsn::Lsn;
use crate::metrics::{Metrics, Phase};
use crate::select::{Selection, TopicRouter};
use crate::sink::kafka::InFlightLimits;
use crate::sink::transactional::{InitialSnapshotProgress, RecordedServer};
use crate::sink::{AtLeastOnce, Dedupe, Delivery, KafkaSink, SinkError, Transactional};
use crate::source::identity::{self, ServerIdentity, Verdict};
use crate::source::pgoutput::Form;
use crate::source::relation::RowErrorKind;
use crate::source::replication::{
    PgoutputBinary, PluginOptions, PluginRequest, ProtoVersion, ReplicationConfig, Session,
    SlotSnapshot, StartReplication,
};
use crate::source::setup::{self, SetupError, SlotStatus};
use crate::source::types::ValueError;
use crate::source::version::{Feature, ServerVersion};
use crate::source::{binary_mode, catalog};
use crate::takeover::{self, DebeziumOffset, Resume, TakeoverError};

/// One attempt: runs until `shutdown` resolves (graceful: in-flight messages
/// are acknowledged and confirmed first) or an error stops it.
///
/// `summary` accumulates across attempts. `target` is the server's WAL
/// position when a bounded run (`--stop-when-caught-up`) began, fixed by the
/// first attempt that reached the server.
pub async fn run_once(
    config: &RunConfig,
    stop: impl Future<Output = StopReason>,
    shutdown: &Shutdown,
    summary: &mut RunSummary,
    target: &mut Option<Lsn>,
    metrics: &Arc<Metrics>,
) -> Result<(), PipelineError> {
    // Checked here for the publication; the stream derives its own.
    let (selection, router) = config.selection()?;
    let sql = setup::connect(&config.pg()).await?;
    metrics.postgres_answered();
    let facts = setup::preflight(&sql, config.metadata.heartbeat_action_query.is_some()).await?;
    // Refused here, before a slot is made, if the server is too old for it.
    let plugin = PluginRequest {
        origin: config.origin_filter,
        // Protocol 2, never 4's `streaming 'parallel'`: its only change on
        // the wire (an abort's LSN and time) serves subscribers that apply
        // blocks before the commit, which Kafka's commit order rules out
        // here (stream/spool.rs).
        proto_version: if config.streaming.stream_in_progress {
            ProtoVersion::V2
        } else {
            ProtoVersion::V1
        },
        // `on` is refused here on a server without binary; `auto` decides below.
        binary: config.pgoutput_binary == PgoutputBinary::On,
    };
    let version = ServerVersion::from_num(facts.version_num);
    PluginOptions::for_server(version, &config.publication_name, &plugin)
        .map_err(SetupError::from)?;
    let observed = check_server(config, &sql, summary).await?;
    let server = observed.identity;
    let publication = setup::Publication {
        name: &config.publication_name,
        options: &config.publication,
        tables: &config.tables,
        read_only: config.signal_channels.read_only,
        captured: setup::shape::Operations::captured(&config.skipped_operations),
        snapshots: config.may_snapshot(),
    };
    let status = setup::prepare(&sql, &facts, &config.slot_name, &publication, &selection).await?;
    let debezium = takeover_offset(config, &status).await?;
    if debezium.is_some() {
        takeover::subjects::require_accepted(config, &sql).await?;
    }
    let types = setup::load_types(&sql).await?;
    // `auto` never asks a server without binary for it.
    let binary_request = match config.pgoutput_binary {
        PgoutputBinary::Auto if !version.has(Feature::Binary) => PgoutputBinary::Off,
        mode => mode,
    };
    let binary = binary_mode::choose(
        binary_request,
        &sql,
        &config.publication_name,
        &types,
        // Incremental snapshots read streamed keys as text, with a signal
        // table or read-only alike.
        config.takes_incremental_snapshots(),
    )
    .await?;
    let plugin = PluginRequest { binary, ..plugin };
    let Some(Start {
        lsn: start,
        exported,
        temporary,
        resume,
    }) = choose_start(config, &sql, &status, summary, metrics).await?
    else {
        return Ok(());
    };
    if exported.is_some() || !matches!(status, SlotStatus::Ready { .. }) {
        // A new slot: what an earlier attempt acknowledged was for the old one.
        summary.acked_lsn = Lsn::ZERO;
    }
    // The first attempt that got this far says where the run started.
    summary.start_lsn.get_or_insert(start);
    summary.confirmed_lsn = Some(start);
    if config.stop_when_caught_up.is_some() && target.is_none() {
        // Everything committed before the run began is behind this: a bounded
        // run (either kind) may call itself caught up only once past it.
        *target = Some(setup::current_wal_lsn(&sql).await?);
    }

    let dedupe = if config.skips_delivered() {
        Some(Dedupe {
            horizon: setup::current_wal_lsn(&sql).await?,
            resend_through: summary.resend_through,
            fingerprint: config.output_fingerprint(),
            partition_keys: config.partitions_keys_by_murmur2(),
        })
    } else {
        None
    };
    let ahead = match dedupe {
        Some(_) => tail_topics(config, &sql, &selection, &router).await,
        None => Vec::new(),
    };
    let (delivery, producer) = delivery_for(config, start, dedupe, ahead, server, metrics)?;
    let mut stream = Stream::new(config, sql, types, delivery, summary, start, metrics).await?;
    stream.resume_read_only_progress().await?;
    stream.target = *target;
    stream.takeover = debezium.map(|offset| Resume::new(&offset, start));
    stream.shutdown = Some(shutdown.clone());
    if binary {
        stream.values_form = Form::Binary;
    }
    // Declared after `stream`, so dropped before it (see `watch_producer_queue`).
    let probed = Arc::downgrade(&producer);
    drop(producer);
    let _queue_probe =
        metrics.watch_producer_queue(move || probed.upgrade().map(|s| s.in_flight() as u64));

    if let Some(progress) = resume {
        snapshot::resume(&mut stream, start, progress).await?;
    }
    let mut stop = std::pin::pin!(stop);
    // Under `auto`, a value binary cannot read ends the attempt for one in
    // text: in the stream, and in the snapshot's page ranges, which are
    // read in binary with the stream's values.
    let fall_back = |error| match binary_request {
        PgoutputBinary::Auto if binary => fall_back_to_text(error),
        _ => error,
    };
    let snapshot_taken = exported.is_some();
    if let Some(exported) = exported {
        let taken = snapshot::take(&mut stream, exported, start, stop.as_mut())
            .await
            .map_err(fall_back)?;
        if !taken {
            return Ok(());
        }
    }
    tracing::info!(slot = %config.slot_name, publication = %config.publication_name, lsn = %start, "starting replication");

    let session = match temporary {
        // The session that created the slot is the one that can stream it.
        Some(session) => session,
        None => {
            let mut session = Session::connect(&replication_config(stream.config))
                .await
                .map_err(PipelineError::Stream)?;
            // A multi-host URL may have moved on since the checks above.
            let (now, _) = session.identify().await.map_err(PipelineError::Stream)?;
            if now != server {
                return Err(PipelineError::ServerMoved {
                    checked: server,
                    now,
                });
            }
            if stream.config.slot_failover {
                setup::ensure_failover(&stream.sql, &mut session, &stream.config.slot_name).await?;
            }
            session
        }
    };
    let mut client = session
        .start(StartReplication {
            slot: stream.config.slot_name.clone(),
            publication: stream.config.publication_name.clone(),
            lsn: start,
            acknowledged: start,
            status_interval: client_status_interval(stream.config),
            plugin,
        })
        .await
        .map_err(PipelineError::Stream)?;
    if !snapshot_taken {
        exactly_once::start_streaming(&mut stream, start, &observed).await?;
    }
    metrics.streaming_started(&client.metrics());
    metrics.set_phase(Phase::Streaming);

    let result = stream
        .stream(&mut client, stop.as_mut())
        .await
        .map_err(fall_back);
    let reason = result.as_ref().ok().copied();
    stream.finish(&mut client, reason).await;
    result.map(|reason| {
        stream.summary.stopped = reason;
    })
}

/// Under `--pgoutput-binary auto`, a value of a type without a binary
/// decoder (a column added while streaming) ends the attempt retryably: the
/// next one sees the column in the publication and reads text.
fn fall_back_to_text(error: PipelineError) -> PipelineError {
    match error {
        PipelineError::Row(row)
            if matches!(
                row.kind(),
                RowErrorKind::Value {
                    error: ValueError::BinaryUnsupported { .. },
                    ..
                }
            ) =>
        {
            PipelineError::BinaryFallback(row)
        }
        other => other,
    }
}

/// `--takeover-debezium`: the offset Debezium stored, read before
/// anything is created, so that a run without Debezium's slot stops
/// instead of making a new one (whatever Debezium had not read would be lost).
async fn takeover_offset(
    config: &RunConfig,
    status: &SlotStatus,
) -> Result<Option<DebeziumOffset>, PipelineError> {
    if config.takeover.takeover_debezium.is_none() {
        return Ok(None);
    }
    let state = match status {
        SlotStatus::Ready { .. } => None,
        SlotStatus::Missing => Some("does not exist"),
        SlotStatus::Invalidated => Some("was invalidated (it lost the WAL Debezium had not read)"),
    };
    if let Some(state) = state {
        let slot = config.slot_name.clone();
        return Err(TakeoverError::Slot { slot, state }.into());
    }
    let options = config.takeover.clone();
    let prefix = config.topic_prefix.clone();
    let producer = config.producer_config();
    let offset = tokio::task::spawn_blocking(move || takeover::load(&options, &prefix, &producer))
        .await
        .map_err(|e| TakeoverError::Kafka {
            topic: config
                .takeover
                .takeover_debezium
                .iter()
                .map(ToString::to_string)
                .collect(),
            reason: format!("the reader failed: {e}"),
        })??;
    if let Some(offset) = &offset {
        tracing::info!(
            lsn_commit = %offset.commit(),
            lsn_proc = ?offset.lsn_proc.map(Lsn::new),
            message_type = ?offset.message_type,
            tx_id = ?offset.tx_id,
            "taking over from Debezium: what it produced up to its stored offset is not sent again"
        );
    }
    Ok(offset)
}

/// Reads which server this attempt reached and compares it with the one
/// the run streamed from before ([`identity::judge`]); records it in
/// `summary` when streaming may go on, and returns what it found. Runs
/// before anything is created on the server, so a wrong one is left as it was.
async fn check_server(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
    summary: &mut RunSummary,
) -> Result<identity::Observed, PipelineError> {
    let observed = identity::observe(&replication_config(config))
        .await
        .map_err(PipelineError::Stream)?;
    let slot_exists = setup::slot_status(sql, &config.slot_name).await? != SlotStatus::Missing;
    let known = identity::Known {
        identity: summary.server,
        acknowledged: summary.acked_lsn,
        slot: &config.slot_name,
        slot_exists,
    };
    let now = observed.identity;
    match identity::judge(&known, &observed)? {
        Verdict::First => {
            tracing::info!(
                system_identifier = now.system_identifier,
                timeline = now.timeline,
                "connected to the server"
            )
        }
        Verdict::Same => {}
        Verdict::FollowedFailover {
            from_timeline,
            to_timeline,
            switch,
        } => tracing::warn!(
            slot = %config.slot_name,
            from_timeline,
            to_timeline,
            %switch,
            acknowledged = %summary.acked_lsn,
            "the server is a promoted standby that carries the slot and everything acknowledged; following the failover"
        ),
    }
    summary.server = Some(now);
    Ok(observed)
}

/// The topics the publication's captured tables write to (routed and
/// renamed as their records are), whose partition tails an at-least-once
/// attempt that skips what Kafka has reads ahead. Best effort: a topic
/// missed here (a transform's) is read at its first record.
async fn tail_topics(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
    selection: &Selection,
    router: &TopicRouter,
) -> Vec<Arc<str>> {
    let tables = match catalog::published_tables(sql, &config.publication_name).await {
        Ok(tables) => tables,
        Err(error) => {
            tracing::debug!(%error, "cannot list the publication's tables; each topic's tails are read at its first record");
            return Vec::new();
        }
    };
    let renames = config.topic_renames().ok();
    let mut topics: Vec<Arc<str>> = tables
        .iter()
        .filter(|(schema, table)| selection.includes_table(schema, table))
        .map(|(schema, table)| {
            let topic = Arc::from(router.topic_for(schema, table));
            match &renames {
                Some(renames) => renames.apply(topic),
                None => topic,
            }
        })
        .collect();
    topics.sort();
    topics.dedup();
    topics
}

/// The delivery `--delivery` asks for, starting at the slot's position
/// `start` (at-least-once: skipping what `dedupe` allows, with the tails of
/// topics `ahead` read in the background; exactly-once: recording `server`
/// with its progress), and its producer (for the queue gauge).
fn delivery_for(
    config: &RunConfig,
    start: Lsn,
    dedupe: Option<Dedupe>,
    ahead: Vec<Arc<str>>,
    server: ServerIdentity,
    metrics: &Arc<Metrics>,
) -> Result<(Box<dyn Delivery>, Arc<KafkaSink>), SinkError> {
    let limits = InFlightLimits {
        messages: config.max_in_flight_messages,
        bytes: config.max_in_flight_bytes,
    };
    Ok(match config.delivery {
        DeliveryMode::AtLeastOnce => {
            let mut delivery = AtLeastOnce::new(
                &config.producer_config(),
                limits,
                start,
                dedupe,
                Arc::clone(metrics),
            )?;
            delivery.read_tails_ahead(ahead);
            let producer = Arc::clone(delivery.producer());
            (Box::new(delivery), producer)
        }
        DeliveryMode::ExactlyOnce => {
            let delivery = Transactional::new(
                &config.producer_config(),
                &config.names(),
                &config.eos,
                limits,
                start,
                Arc::clone(metrics),
            )?
            .with_server(RecordedServer {
                system_identifier: server.system_identifier,
                timeline: server.timeline,
            });
            let producer = Arc::clone(delivery.producer());
            (Box::new(delivery), producer)
        }
    })
}

/// Where an attempt starts streaming.
struct Start {
    lsn: Lsn,
    /// A new slot with its exported snapshot, to be read first.
    exported: Option<snapshot::ExportedSlot>,
    /// `--slot-temporary`: the session that made the slot, to stream it.
    temporary: Option<Session>,
    /// An interrupted initial snapshot to finish as an incremental one.
    resume: Option<InitialSnapshotProgress>,
}

/// Decides from the slot's `status` where this attempt starts: the slot's
/// position, a new slot (with a snapshot to take, per `--snapshot-mode`),
/// or nothing to do (`None`: `initial_only` found its snapshot done, as
/// recorded in `summary`).
async fn choose_start(
    config: &RunConfig,
    sql: &tokio_postgres::Client,
    status: &SlotStatus,
    summary: &mut RunSummary,
    metrics: &Arc<Metrics>,
) -> Result<Option<Start>, PipelineError> {
    let snapshot_wanted = !matches!(
        config.snapshot_mode,
        SnapshotMode::Never | SnapshotMode::NoData
    );
    let mut resume = None;
    let (start, exported, temporary) = match *status {
        SlotStatus::Ready { .. } | SlotStatus::Invalidated if config.slot_temporary => {
            return Err(SetupError::TemporarySlotExists {
                slot: config.slot_name.clone(),
            }
            .into());
        }
        SlotStatus::Missing if config.slot_temporary => {
            let (session, lsn) = create_temporary_slot(config).await?;
            (lsn, None, Some(session))
        }
        SlotStatus::Ready { confirmed_flush } => {
            // A working slot left by a crash between promoting and dropping it.
            setup::drop_slot(sql, &config.names().snapshot_slot()).await?;
            if config.snapshot_mode == SnapshotMode::InitialOnly {
                tracing::info!(slot = %config.slot_name, "the slot exists, so its snapshot was taken; nothing to do");
                summary.stopped = StopReason::SnapshotCompleted;
                return Ok(None);
            }
            // After a server restart PG 15 can report an older confirmed
            // position than it was told (it persists it only with other slot
            // changes). What this run already had acknowledged need not be
            // sent again: starting past it skips those transactions.
            (confirmed_flush.max(summary.acked_lsn), None, None)
        }
        SlotStatus::Invalidated if config.snapshot_mode != SnapshotMode::WhenNeeded => {
            return Err(SetupError::Invalidated {
                slot: config.slot_name.clone(),
            }
            .into());
        }
        SlotStatus::Missing
            if config.snapshot_mode == SnapshotMode::Initial
                && setup::slot_status(sql, &config.names().snapshot_slot()).await?
                    == SlotStatus::Missing =>
        {
            // Not an interrupted snapshot (its working slot would exist): a
            // first run, unless the topics already hold an earlier run's events.
            let earlier = previous_run::topics_with_records(config).await?;
            if !earlier.is_empty() {
                return Err(previous_run::slot_lost(config, &earlier).into());
            }
            let exported = snapshot::export_slot(config, sql).await?;
            (exported.consistent_point, Some(exported), None)
        }
        SlotStatus::Invalidated | SlotStatus::Missing if snapshot_wanted => {
            if *status == SlotStatus::Invalidated {
                tracing::warn!(slot = %config.slot_name, "slot was invalidated; dropping it and taking a new snapshot (--snapshot-mode when_needed)");
                setup::drop_slot(sql, &config.slot_name).await?;
            }
            match snapshot::interrupted(config, sql, metrics).await? {
                Some(Interrupted::Committed(_))
                    if config.snapshot_mode == SnapshotMode::InitialOnly =>
                {
                    summary.stopped = StopReason::SnapshotCompleted;
                    return Ok(None);
                }
                Some(Interrupted::Committed(point)) => (point, None, None),
                Some(Interrupted::Resumable { point, progress }) => {
                    resume = Some(progress);
                    (point, None, None)
                }
                None => {
                    let exported = snapshot::export_slot(config, sql).await?;
                    (exported.consistent_point, Some(exported), None)
                }
            }
        }
        SlotStatus::Invalidated | SlotStatus::Missing => (
            setup::create_slot(sql, &config.slot_name).await?,
            None,
            None,
        ),
    };
    Ok(Some(Start {
        lsn: start,
        exported,
        temporary,
        resume,
    }))
}

/// `--slot-temporary`: opens the replication session and creates the slot
/// on it (`CREATE_REPLICATION_SLOT ... TEMPORARY`), so it lives exactly as
/// long as that session. Returns the session, not yet streaming, and the
/// slot's consistent point.
async fn create_temporary_slot(config: &RunConfig) -> Result<(Session, Lsn), PipelineError> {
    let failed = |error| SetupError::TemporarySlot {
        slot: config.slot_name.clone(),
        error,
    };
    let mut session = Session::connect(&replication_config(config))
        .await
        .map_err(failed)?;
    let rows = session
        .simple_query(&session.create_slot_command(
            &setup::quote_ident(&config.slot_name),
            true,
            SlotSnapshot::Nothing,
        ))
        .await
        .map_err(failed)?;
    let point = rows
        .first()
        .and_then(|r| r.get(1))
        .and_then(Option::as_ref)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.parse::<Lsn>().ok())
        .ok_or_else(|| SetupError::TemporarySlotReply {
            slot: config.slot_name.clone(),
        })?;
    tracing::warn!(slot = %config.slot_name, lsn = %point, "created a temporary slot: it ends with this connection, and changes made while no connector runs are not captured");
    Ok((session, point))
}

/// The streaming session's settings: the `--pg-url` connection, the
/// session options the value decoder relies on, and an application name
/// that says whose it is.
fn replication_config(config: &RunConfig) -> ReplicationConfig {
    config
        .pg()
        .replication_config()
        .with_options(SESSION_OPTIONS)
        .with_application_name(config.names().application_name())
}
