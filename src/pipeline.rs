//! The pipeline: replication stream -> pgoutput decoding -> change events ->
//! encoding -> Kafka producer -> delivery acks -> slot confirmation.
//!
//! One task reads the stream in order and hands records to the producer;
//! librdkafka's thread reports deliveries to the ack tracker; the same task
//! that reads also confirms, so confirmation and reading never race. Reading
//! pauses when the in-flight bound is reached (the replication client keeps
//! answering keepalives meanwhile, so `wal_sender_timeout` never fires).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgwire_replication::{PgWireError, ReplicationClient, ReplicationConfig, ReplicationEvent};
use tokio::sync::watch;

use crate::checkpoint::TxnId;
use crate::config::RunConfig;
use crate::encode::json::JsonEncoder;
use crate::event::envelope::ConnectorInfo;
use crate::event::{ChangeEvent, Op, SourceInfo};
use crate::lsn::Lsn;
use crate::sink::kafka::InFlightLimits;
use crate::sink::{EncodedRecord, KafkaSink, Progress, SinkError};
use crate::source::pgoutput::{self, DecodeError, LogicalMessage, OldTuple};
use crate::source::relation::{RelationCache, RowError};
use crate::source::setup::{self, SetupError};
use crate::source::types::ValueOptions;

/// Session settings pinned on the replication connection so that pgoutput's
/// text values render in the one format the value decoder parses.
pub const SESSION_OPTIONS: &str = "-c datestyle=ISO -c intervalstyle=postgres -c timezone=UTC \
                                   -c extra_float_digits=3 -c bytea_output=hex \
                                   -c client_encoding=UTF8 -c lc_monetary=C";

/// Why the pipeline stopped.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("replication stream failed")]
    Stream(#[source] PgWireError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Row(#[from] RowError),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("kafka delivery failed; the slot stays at the last fully acknowledged transaction")]
    Delivery(#[source] Arc<SinkError>),
    #[error("the replication stream ended unexpectedly")]
    StreamEnded,
}

impl PipelineError {
    /// Whether restarting from the slot may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            PipelineError::Setup(e) => e.is_retryable(),
            PipelineError::Stream(e) => e.is_transient() || e.is_io(),
            PipelineError::Sink(e) => e.is_retryable(),
            PipelineError::Delivery(e) => e.is_retryable(),
            PipelineError::StreamEnded => true,
            PipelineError::Decode(_) | PipelineError::Row(_) => false,
        }
    }
}

/// What a run did, reported when it ends.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub start_lsn: Lsn,
    pub confirmed_lsn: Lsn,
    pub transactions: u64,
    pub events: u64,
}

struct OpenTxn {
    id: TxnId,
    xid: u32,
    commit_time_micros: i64,
}

/// Microseconds between the Unix epoch and Postgres's (2000-01-01).
const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

struct Stream {
    config: RunConfig,
    sql: tokio_postgres::Client,
    relations: RelationCache,
    encoder: JsonEncoder,
    sink: Arc<KafkaSink>,
    txn: Option<OpenTxn>,
    last_commit_lsn: Option<Lsn>,
    summary: RunSummary,
}

/// A shutdown request shared by every attempt of a supervised run.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A shutdown signal and the handle that triggers it (`send(true)`).
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown(rx))
    }

    /// Whether shutdown was requested.
    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once shutdown is requested (or its sender is gone).
    pub async fn requested(mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Runs the connector until `shutdown` is requested, restarting from the slot
/// with exponential backoff after transient failures (Postgres restarted,
/// connection dropped, Kafka unreachable past the delivery timeout). A
/// definite failure (bad configuration, invalidated slot, a message Kafka
/// will never accept) stops it with the error.
pub async fn run(config: RunConfig, shutdown: Shutdown) -> Result<RunSummary, PipelineError> {
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        match run_once(config.clone(), shutdown.clone().requested()).await {
            Ok(summary) => return Ok(summary),
            Err(error) if error.is_retryable() && !shutdown.is_requested() => {
                if started.elapsed() > MAX_BACKOFF {
                    backoff = Duration::from_secs(1);
                }
                tracing::warn!(error = %crate::error_chain(&error), retry_in = ?backoff, "pipeline failed; restarting from the slot");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = shutdown.clone().requested() => return Err(error),
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(error) => return Err(error),
        }
    }
}

/// One attempt: runs until `shutdown` resolves (graceful: in-flight messages
/// are acknowledged and confirmed first) or an error stops it.
pub async fn run_once(
    config: RunConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<RunSummary, PipelineError> {
    let sql = setup::connect(&config.pg_url).await?;
    let slot = setup::prepare(
        &sql,
        &config.slot_name,
        &config.publication_name,
        &config.tables,
    )
    .await?;
    let types = setup::load_types(&sql).await?;
    let start = slot.confirmed_flush;
    tracing::info!(slot = %config.slot_name, publication = %config.publication_name, lsn = %start, "starting replication");

    let (sink, progress) = KafkaSink::new(
        &config.producer_config(),
        InFlightLimits {
            messages: config.max_in_flight_messages,
            bytes: config.max_in_flight_bytes,
        },
        start,
    )?;
    let info = ConnectorInfo {
        name: config.topic_prefix.as_str().into(),
        db: config.pg_url.dbname().into(),
    };
    let mut stream = Stream {
        relations: RelationCache::new(&config.topic_prefix, ValueOptions::default(), types),
        encoder: JsonEncoder::new(info, config.json_schemas),
        sink: Arc::new(sink),
        txn: None,
        last_commit_lsn: None,
        summary: RunSummary {
            start_lsn: start,
            confirmed_lsn: start,
            ..RunSummary::default()
        },
        sql,
        config,
    };

    let repl_config = ReplicationConfig::new(
        stream.config.pg_url.host(),
        stream.config.pg_url.user(),
        stream.config.pg_url.password(),
        stream.config.pg_url.dbname(),
        stream.config.slot_name.clone(),
        stream.config.publication_name.clone(),
    )
    .with_port(stream.config.pg_url.port())
    .with_start_lsn(start.into())
    .with_ack_lsn(start.into())
    .with_status_interval(stream.config.status_interval)
    .with_options(SESSION_OPTIONS)
    .with_application_name(format!("pgcdc-kafka-{}", stream.config.topic_prefix));
    let mut client = ReplicationClient::connect(repl_config)
        .await
        .map_err(PipelineError::Stream)?;
    client.wait_started().await.map_err(PipelineError::Stream)?;

    let result = stream.stream(&mut client, progress, shutdown).await;
    let confirmed = stream.finish(&mut client).await;
    result.map(|()| RunSummary {
        confirmed_lsn: confirmed,
        ..stream.summary
    })
}

impl Stream {
    async fn stream(
        &mut self,
        client: &mut ReplicationClient,
        mut progress: watch::Receiver<Progress>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), PipelineError> {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    tracing::info!("shutdown requested; draining in-flight messages");
                    return Ok(());
                }
                changed = progress.changed() => {
                    if changed.is_err() {
                        return Err(PipelineError::StreamEnded);
                    }
                    let p = progress.borrow_and_update().clone();
                    if let Some(failure) = p.failure {
                        return Err(PipelineError::Delivery(failure));
                    }
                    client.update_applied_lsn(p.acked.into());
                    tracing::trace!(lsn = %p.acked, "confirming");
                }
                event = client.recv() => {
                    match event.map_err(PipelineError::Stream)? {
                        Some(event) => self.handle(event).await?,
                        None => return Err(PipelineError::StreamEnded),
                    }
                }
            }
        }
    }

    async fn handle(&mut self, event: ReplicationEvent) -> Result<(), PipelineError> {
        match event {
            ReplicationEvent::Begin {
                xid,
                commit_time_micros,
                ..
            } => {
                debug_assert!(self.txn.is_none(), "Begin inside a transaction");
                self.txn = Some(OpenTxn {
                    id: self.sink.begin(),
                    xid,
                    commit_time_micros: commit_time_micros.saturating_add(PG_EPOCH_OFFSET_MICROS),
                });
            }
            ReplicationEvent::Commit { lsn, end_lsn, .. } => {
                if let Some(txn) = self.txn.take() {
                    self.sink.commit(txn.id, end_lsn.into());
                    self.summary.transactions += 1;
                }
                self.last_commit_lsn = Some(lsn.into());
            }
            ReplicationEvent::XLogData {
                wal_start, data, ..
            } => {
                let lsn = Lsn::from(wal_start);
                let message = pgoutput::decode(&data, lsn)?;
                self.handle_message(message, lsn).await?;
            }
            ReplicationEvent::KeepAlive { wal_end, .. } => {
                if self.txn.is_none() {
                    self.sink.advance_idle(wal_end.into());
                }
            }
            ReplicationEvent::Message { .. } => {
                tracing::trace!("logical decoding message skipped");
            }
            ReplicationEvent::StoppedAt { .. } => {}
        }
        Ok(())
    }

    async fn handle_message(
        &mut self,
        message: LogicalMessage,
        lsn: Lsn,
    ) -> Result<(), PipelineError> {
        let (op, relation_id, before, after) = match message {
            LogicalMessage::Relation(relation) => {
                if !self.relations.knows_types_of(&relation) {
                    *self.relations.types_mut() = setup::load_types(&self.sql).await?;
                }
                let catalog = setup::catalog_columns(&self.sql, relation.id).await?;
                let table = self.relations.update(&relation, &catalog);
                tracing::debug!(topic = %table.topic, relation_id = relation.id, "relation");
                return Ok(());
            }
            LogicalMessage::Insert(i) => (Op::Create, i.relation_id, None, Some(i.new)),
            LogicalMessage::Update(u) => {
                let old = u.old.map(|o| match o {
                    OldTuple::Key(t) | OldTuple::Full(t) => t,
                });
                (Op::Update, u.relation_id, old, Some(u.new))
            }
            LogicalMessage::Delete(d) => {
                let (OldTuple::Key(t) | OldTuple::Full(t)) = d.old;
                (Op::Delete, d.relation_id, Some(t), None)
            }
            LogicalMessage::Truncate(_) => {
                tracing::trace!("truncate skipped (skipped.operations=t)");
                return Ok(());
            }
            other => {
                tracing::trace!(?other, "message ignored");
                return Ok(());
            }
        };
        let Some(txn) = self.txn.as_ref() else {
            tracing::warn!(%lsn, "row change outside a transaction ignored");
            return Ok(());
        };
        let table = Arc::clone(self.relations.get(relation_id, lsn)?);
        let before = before
            .map(|t| self.relations.decode_row(&table, &t, lsn))
            .transpose()?;
        let after = after
            .map(|t| self.relations.decode_row(&table, &t, lsn))
            .transpose()?;
        let event = ChangeEvent {
            table,
            op,
            before,
            after,
            source: SourceInfo {
                commit_time_micros: txn.commit_time_micros,
                xid: txn.xid,
                lsn,
                last_commit_lsn: self.last_commit_lsn,
            },
        };
        let txn_id = txn.id;
        self.emit(event, txn_id).await
    }

    async fn emit(&mut self, event: ChangeEvent, txn: TxnId) -> Result<(), PipelineError> {
        let topic = Arc::clone(&event.table.topic);
        let key = self.encoder.key(&event);
        let value = self.encoder.value(&event, now_micros());
        let tombstone = event.op == Op::Delete;
        self.sink
            .send(EncodedRecord {
                topic: Arc::clone(&topic),
                key: key.clone(),
                value: Some(value),
                headers: Vec::new(),
                txn,
            })
            .await?;
        self.summary.events += 1;
        if tombstone {
            self.sink
                .send(EncodedRecord {
                    topic,
                    key,
                    value: None,
                    headers: Vec::new(),
                    txn,
                })
                .await?;
        }
        Ok(())
    }

    /// Drains what is in flight and confirms it; returns the confirmed LSN.
    async fn finish(&mut self, client: &mut ReplicationClient) -> Lsn {
        if let Err(error) = self.sink.flush(self.config.shutdown_timeout).await {
            tracing::warn!(%error, "in-flight messages not all acknowledged; they will be sent again on restart");
        }
        let acked = self.acked();
        client.update_applied_lsn(acked.into());
        // The client reports on its status cadence; wait for it to tell the server.
        let deadline = Instant::now() + self.config.status_interval * 3 + Duration::from_secs(1);
        let metrics = client.metrics();
        while Lsn::from(metrics.last_applied_lsn()) < acked && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client.stop();
        while let Ok(Some(_)) = client.recv().await {}
        let confirmed = setup::confirmed_flush_lsn(&self.sql, &self.config.slot_name)
            .await
            .ok()
            .flatten()
            .unwrap_or(acked);
        tracing::info!(lsn = %confirmed, "replication stopped");
        confirmed
    }

    fn acked(&self) -> Lsn {
        self.sink.acked()
    }
}
