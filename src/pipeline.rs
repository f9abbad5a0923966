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
use crate::encode::{EncodeError, Encoder};
use crate::event::envelope::ConnectorInfo;
use crate::event::{ChangeEvent, MessageEvent, Op, SourceInfo};
use crate::lsn::Lsn;
use crate::sink::kafka::InFlightLimits;
use crate::sink::{EncodedRecord, KafkaSink, Progress, SinkError};
use crate::source::pgoutput::{self, Datum, DecodeError, LogicalMessage, OldTuple, Tuple};
use crate::source::relation::{RelationCache, RowError};
use crate::source::setup::{self, SetupError};

/// Session settings pinned on the replication connection so that pgoutput's
/// text values render in the one format the value decoder parses.
pub const SESSION_OPTIONS: &str = "-c datestyle=ISO -c intervalstyle=postgres -c timezone=UTC \
                                   -c extra_float_digits=3 -c bytea_output=hex \
                                   -c client_encoding=UTF8 -c lc_monetary=C";

/// Header on the delete half of a key-changing update: the new key.
pub const NEW_KEY_HEADER: &str = "__debezium.newkey";
/// Header on the create half of a key-changing update: the old key.
pub const OLD_KEY_HEADER: &str = "__debezium.oldkey";
/// Header listing (as a JSON array) the columns whose value was TOASTed and
/// unchanged, so carries the placeholder (or null) instead of the value.
pub const UNCHANGED_COLUMNS_HEADER: &str = "pgcdc.unchanged.columns";

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
    Encode(#[from] EncodeError),
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
            PipelineError::Encode(e) => e.is_retryable(),
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
    encoder: Encoder,
    sink: Arc<KafkaSink>,
    txn: Option<OpenTxn>,
    message_topic: Arc<str>,
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
        relations: RelationCache::new(&config.topic_prefix, config.value_options(), types),
        encoder: Encoder::from_config(&config, info).await?,
        sink: Arc::new(sink),
        txn: None,
        message_topic: format!("{}.message", config.topic_prefix).into(),
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
            ReplicationEvent::Message {
                transactional,
                lsn,
                prefix,
                content,
            } => {
                self.emit_message(transactional, prefix, content.to_vec(), lsn.into())
                    .await?;
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
        let skipped = self.config.skipped_operations;
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
            LogicalMessage::Insert(i) if !skipped.inserts => {
                (Op::Create, i.relation_id, None, Some(i.new))
            }
            LogicalMessage::Update(u) if !skipped.updates => (
                Op::Update,
                u.relation_id,
                u.old.map(OldTuple::into_tuple),
                Some(u.new),
            ),
            LogicalMessage::Delete(d) if !skipped.deletes => {
                (Op::Delete, d.relation_id, Some(d.old.into_tuple()), None)
            }
            LogicalMessage::Truncate(t) if !skipped.truncates => {
                for relation_id in t.relation_ids {
                    self.emit_row_change(Op::Truncate, relation_id, None, None, lsn)
                        .await?;
                }
                return Ok(());
            }
            LogicalMessage::Message(m) => {
                return self
                    .emit_message(m.transactional, m.prefix, m.content.to_vec(), m.lsn)
                    .await;
            }
            other => {
                tracing::trace!(tag = %char::from(other.tag()), "message skipped");
                return Ok(());
            }
        };
        self.emit_row_change(op, relation_id, before, after, lsn)
            .await
    }

    async fn emit_row_change(
        &mut self,
        op: Op,
        relation_id: u32,
        before: Option<Tuple>,
        after: Option<Tuple>,
        lsn: Lsn,
    ) -> Result<(), PipelineError> {
        let Some(txn) = self.txn.as_ref() else {
            tracing::warn!(%lsn, "row change outside a transaction ignored");
            return Ok(());
        };
        let txn_id = txn.id;
        let source = SourceInfo {
            commit_time_micros: txn.commit_time_micros,
            xid: txn.xid,
            lsn,
            last_commit_lsn: self.last_commit_lsn,
        };
        let table = Arc::clone(self.relations.get(relation_id, lsn)?);
        // Columns whose value was not sent because it is TOASTed and unchanged.
        let unchanged: Vec<&str> = after
            .iter()
            .flat_map(|t| t.0.iter().zip(&table.columns))
            .filter(|(datum, _)| matches!(datum, Datum::UnchangedToast))
            .map(|(_, column)| column.name.as_str())
            .collect();
        let unchanged_header = (!unchanged.is_empty()).then(|| {
            (
                UNCHANGED_COLUMNS_HEADER,
                serde_json::to_vec(&unchanged).unwrap_or_default(),
            )
        });
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
            source,
        };

        if op == Op::Update && event.before.is_some() && !event.table.key_columns.is_empty() {
            let old_key = event.clone_as(Op::Delete).key();
            if old_key != event.key() {
                return self.emit_key_change(event, unchanged_header, txn_id).await;
            }
        }
        let headers = unchanged_header.into_iter().collect();
        let tombstone = op == Op::Delete && self.config.tombstones_on_delete;
        self.send_event(&event, headers, tombstone, txn_id).await
    }

    /// An update that changes the key: a delete of the old key (and its
    /// tombstone) then a create of the new one, as Debezium emits it, each
    /// pointing at the other key in a header.
    async fn emit_key_change(
        &mut self,
        event: ChangeEvent,
        unchanged_header: Option<(&'static str, Vec<u8>)>,
        txn: TxnId,
    ) -> Result<(), PipelineError> {
        let delete = event.clone_as(Op::Delete);
        let create = ChangeEvent {
            before: None,
            ..event.clone_as(Op::Create)
        };
        let old_key = self.encoder.key(&delete).await?.unwrap_or_default();
        let new_key = self.encoder.key(&create).await?.unwrap_or_default();
        let tombstone = self.config.tombstones_on_delete;
        self.send_event(&delete, vec![(NEW_KEY_HEADER, new_key)], tombstone, txn)
            .await?;
        let mut headers = vec![(OLD_KEY_HEADER, old_key)];
        headers.extend(unchanged_header);
        self.send_event(&create, headers, false, txn).await
    }

    async fn send_event(
        &mut self,
        event: &ChangeEvent,
        headers: Vec<(&'static str, Vec<u8>)>,
        tombstone: bool,
        txn: TxnId,
    ) -> Result<(), PipelineError> {
        let topic = Arc::clone(&event.table.topic);
        let key = self.encoder.key(event).await?;
        let value = self.encoder.value(event, now_micros()).await?;
        self.sink
            .send(EncodedRecord {
                topic: Arc::clone(&topic),
                key: key.clone(),
                value: Some(value),
                headers,
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

    /// A `pg_logical_emit_message` message. A transactional one belongs to its
    /// transaction; a non-transactional one arrives between transactions and
    /// is tracked as a transaction of its own, confirmed just past its LSN so
    /// a restart does not repeat it.
    async fn emit_message(
        &mut self,
        transactional: bool,
        prefix: String,
        content: Vec<u8>,
        lsn: Lsn,
    ) -> Result<(), PipelineError> {
        let (txn, own) = match &self.txn {
            Some(open) => (open.id, false),
            None => (self.sink.begin(), true),
        };
        let source = SourceInfo {
            commit_time_micros: self
                .txn
                .as_ref()
                .map_or_else(now_micros, |t| t.commit_time_micros),
            xid: self.txn.as_ref().map_or(0, |t| t.xid),
            lsn,
            last_commit_lsn: self.last_commit_lsn,
        };
        let message = MessageEvent {
            transactional,
            prefix,
            content,
            source,
        };
        let record = EncodedRecord {
            topic: Arc::clone(&self.message_topic),
            key: Some(self.encoder.message_key(&message).await?),
            value: Some(self.encoder.message_value(&message, now_micros()).await?),
            headers: Vec::new(),
            txn,
        };
        self.sink.send(record).await?;
        self.summary.events += 1;
        if own {
            self.sink.commit(txn, Lsn::new(lsn.as_u64() + 1));
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
