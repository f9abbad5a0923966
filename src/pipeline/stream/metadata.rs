//! Transaction metadata and heartbeats in the read loop.
//!
//! # Transaction metadata (`--provide-transaction-metadata`)
//!
//! Like Debezium, every transaction the stream delivers gets a `BEGIN`
//! record when its Begin is read and an `END` record when its Commit is
//! read, even when all its changes were skipped (`--skipped-operations`) and
//! it produced no event (`END` then says `event_count: 0`). PostgreSQL 15's
//! pgoutput does not send transactions that touched no published table, so
//! those get none. A non-transactional logical decoding message belongs to no
//! transaction: no `BEGIN`/`END`, a null `transaction` block. Snapshot
//! records also carry a null block.
//!
//! `BEGIN` and `END` are records of the transaction they describe in the ack
//! tracker, like its data: the slot is confirmed past the transaction only
//! once Kafka acknowledged both as well, so a crash never loses an `END`
//! whose data made it (a restart sends the whole transaction again,
//! `BEGIN` to `END`).
//!
//! # Heartbeats (`--heartbeat-interval`)
//!
//! When the interval has elapsed and the stream is between transactions,
//! the action query (if any) runs on the SQL connection, then a heartbeat
//! record goes to the heartbeat topic, tracked as a transaction of its own
//! that ends at `received`: the end of the last commit or the WAL end of a
//! keepalive that arrived between transactions, before which everything has
//! been read. The tracker confirms transactions in order, so the heartbeat
//! moves the slot only after it and every earlier transaction were
//! acknowledged; on a database whose published tables are idle, or whose
//! writes all go to unpublished tables, the slot then follows the server's
//! WAL position and downstream sees that the connector is alive.
//!
//! A failing action query is handled as Debezium's PostgreSQL connector
//! handles it: a missing table (SQLSTATE `42P01`) stops the connector (the
//! operator must create it); a lost connection or a server shutting down
//! restarts the stream with backoff; any other error is logged as a warning
//! (SQLSTATE and message only: the detail may quote row values) and the
//! heartbeat is sent anyway.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;

use super::{now_micros, PipelineError, Stream};
use crate::checkpoint::TxnId;
use crate::event::metadata::{
    Heartbeat, MetadataRecord, OpenTransaction, TransactionBlock, MESSAGE_DATA_COLLECTION,
};
use crate::event::options::MetadataOptions;
use crate::event::record::Record;
use crate::event::TableSchema;
use crate::lsn::Lsn;
use crate::naming::Names;

/// `--heartbeat-action-query` failed in a way that stops this attempt.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The table the query writes does not exist: a definite stop.
    #[error(
        "--heartbeat-action-query failed: {message} (SQLSTATE 42P01); create the heartbeat \
         table or correct the query, then restart"
    )]
    MissingTable { message: String },
    /// The SQL connection was lost or the server is shutting down: retried.
    #[error("the SQL connection failed while running --heartbeat-action-query")]
    Connection(#[source] tokio_postgres::Error),
}

impl HeartbeatError {
    /// Whether restarting from the slot may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, HeartbeatError::Connection(_))
    }
}

/// When and where heartbeats go.
struct Schedule {
    interval: Duration,
    due: Instant,
    topic: Arc<str>,
    server_name: Arc<str>,
    action_query: Option<String>,
}

/// The state of transaction metadata and heartbeats for one attempt.
pub(super) struct Metadata {
    /// `Some` with `--provide-transaction-metadata`.
    transaction_topic: Option<Arc<str>>,
    /// Counters of the transaction being read, when metadata is on.
    open: Option<OpenTransaction>,
    heartbeat: Option<Schedule>,
}

impl Metadata {
    pub(super) fn new(options: &MetadataOptions, names: &Names) -> Self {
        let heartbeat = (!options.heartbeat_interval.is_zero()).then(|| Schedule {
            interval: options.heartbeat_interval,
            due: Instant::now() + options.heartbeat_interval,
            topic: names.heartbeat_topic().into(),
            server_name: names.prefix.as_str().into(),
            action_query: options.heartbeat_action_query.clone(),
        });
        Metadata {
            transaction_topic: options
                .provide_transaction_metadata
                .then(|| names.transaction_topic().into()),
            open: None,
            heartbeat,
        }
    }

    /// The `transaction` block of the next event of `table` in the open
    /// transaction; `None` when metadata is off or no transaction is open.
    pub(super) fn event(&mut self, table: &TableSchema) -> Option<TransactionBlock> {
        let open = self.open.as_mut()?;
        Some(open.event(&table.qualified_name))
    }

    /// As [`Metadata::event`], for a transactional logical decoding message.
    pub(super) fn message_event(&mut self) -> Option<TransactionBlock> {
        Some(self.open.as_mut()?.event(MESSAGE_DATA_COLLECTION))
    }

    /// When the next heartbeat is due, if heartbeats are on.
    pub(super) fn heartbeat_deadline(&self) -> Option<tokio::time::Instant> {
        self.heartbeat
            .as_ref()
            .map(|h| tokio::time::Instant::from_std(h.due))
    }
}

impl Stream<'_> {
    /// Begin was read: opens the transaction's counters and sends `BEGIN`
    /// as a record of `txn`.
    pub(super) async fn transaction_began(
        &mut self,
        txn: TxnId,
        xid: u32,
        commit_lsn: Lsn,
        commit_time_micros: i64,
    ) -> Result<(), PipelineError> {
        let Some(topic) = self.metadata.transaction_topic.clone() else {
            return Ok(());
        };
        let open = OpenTransaction::new(xid, commit_lsn, commit_time_micros);
        let begin = open.begin();
        self.metadata.open = Some(open);
        self.send_metadata(MetadataRecord::Transaction(&begin), topic, txn)
            .await
    }

    /// Commit was read: sends `END` with the counts as a record of `txn`,
    /// before the transaction is committed to the tracker.
    pub(super) async fn transaction_ending(&mut self, txn: TxnId) -> Result<(), PipelineError> {
        let (Some(topic), Some(open)) = (
            self.metadata.transaction_topic.clone(),
            self.metadata.open.take(),
        ) else {
            return Ok(());
        };
        let end = open.end();
        self.send_metadata(MetadataRecord::Transaction(&end), topic, txn)
            .await
    }

    /// The heartbeat interval elapsed between transactions: runs the action
    /// query, sends a heartbeat tracked as a transaction ending at
    /// `received`, and schedules the next one.
    pub(super) async fn send_heartbeat(&mut self) -> Result<(), PipelineError> {
        let Some(schedule) = &self.metadata.heartbeat else {
            return Ok(());
        };
        let (topic, server_name) = (
            Arc::clone(&schedule.topic),
            Arc::clone(&schedule.server_name),
        );
        if let Some(query) = schedule.action_query.clone() {
            run_action_query(&self.sql, &query).await?;
        }
        let heartbeat = Heartbeat {
            server_name,
            ts_ms: now_micros().div_euclid(1000),
        };
        let txn = self.delivery.begin();
        self.send_metadata(MetadataRecord::Heartbeat(&heartbeat), topic, txn)
            .await?;
        // Everything before `received` has been read and every transaction
        // read so far is registered before this one, so confirming it once
        // all of them are acknowledged skips nothing.
        self.delivery.commit(txn, self.received);
        tracing::debug!(lsn = %self.received, "heartbeat sent");
        if let Some(schedule) = &mut self.metadata.heartbeat {
            schedule.due = Instant::now() + schedule.interval;
        }
        Ok(())
    }

    async fn send_metadata(
        &mut self,
        record: MetadataRecord<'_>,
        topic: Arc<str>,
        txn: TxnId,
    ) -> Result<(), PipelineError> {
        // Created like the data topics when topic creation is configured
        // (cached: a lookup after the first time).
        self.ensure_topic(&topic).await?;
        let record = self
            .encoder
            .encode(
                super::renamed(&self.renames, Record::metadata(topic, record)),
                txn,
            )
            .await?;
        self.delivery.send(record).await?;
        Ok(())
    }
}

/// Runs `--heartbeat-action-query`; see the module docs for what a failure does.
async fn run_action_query(sql: &tokio_postgres::Client, query: &str) -> Result<(), HeartbeatError> {
    let Err(error) = sql.batch_execute(query).await else {
        return Ok(());
    };
    let code = error.code().cloned();
    let connection_lost = error.is_closed()
        || code.as_ref().is_some_and(|c| {
            c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
        })
        || error.as_db_error().is_none();
    if connection_lost {
        return Err(HeartbeatError::Connection(error));
    }
    // Only the primary message: the detail may quote row values.
    let message = error
        .as_db_error()
        .map(|db| db.message().to_owned())
        .unwrap_or_default();
    if code == Some(SqlState::UNDEFINED_TABLE) {
        return Err(HeartbeatError::MissingTable { message });
    }
    tracing::warn!(
        sqlstate = code.as_ref().map_or("", SqlState::code),
        %message,
        "--heartbeat-action-query failed; sending the heartbeat anyway"
    );
    Ok(())
}
