//! Blocking snapshots: Debezium's `execute-snapshot` signal with `"type":
//! "blocking"`. The stream stops where the signal is, the tables named are
//! read whole (each with its `additional-conditions` filter or its
//! `--snapshot-select-statement-override`), and the stream goes on.
//!
//! # Nothing lost, and why
//!
//! The rows are read in one REPEATABLE READ transaction taken when the
//! stream reaches the signal, so they are the tables as of a moment *after*
//! the signal's commit, and after every transaction streamed before it: a
//! transaction's commit can be streamed before it is visible (see
//! [`super::visibility`]), so a snapshot that does not see one of them yet
//! is dropped and taken again a little later, the stream waiting. They are
//! emitted as `op: "r"` records (`source.snapshot = "true"`) inside the
//! signal's own transaction: the ack tracker cannot confirm the slot past
//! the signal before Kafka has every row, so a crash replays the signal and
//! the snapshot is taken again (duplicates, never a gap). Then the stream
//! resumes at the signal: the changes committed between the signal and the
//! read are streamed after the rows that already contain them. For every
//! key the last record a consumer sees is therefore its newest version (or
//! its delete), as in Debezium, whose blocking snapshot also re-reads the
//! tables while its stream waits and then replays from the signal's
//! position.
//!
//! While the tables are read the stream does not advance: its lag grows
//! by what is written meanwhile. Under exactly-once every row is in the
//! signal's Kafka transaction, so `transaction.timeout.ms` bounds the time
//! a blocking snapshot may take.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;

use super::{Incremental, IncrementalError};
use crate::checkpoint::TxnId;
use crate::event::{SnapshotMarker, SourceInfo};
use crate::lsn::Lsn;
use crate::notification::{Kind, Notification, INITIAL_SNAPSHOT};
use crate::pipeline::stream::Stream;
use crate::pipeline::PipelineError;
use crate::source::pgoutput::Form;
use crate::source::setup::SetupError;
use crate::source::snapshot as reader;

/// Where the signal is: its LSN, its transaction (the rows join it), xid
/// and commit time.
pub(in crate::pipeline) type SignalSource = (Lsn, TxnId, u32, i64);

impl Stream<'_> {
    /// Reads `tables` whole and emits their rows in the signal's
    /// transaction (see the module docs); `id` is the signal's, the id of
    /// the notifications.
    pub(in crate::pipeline) async fn blocking_snapshot(
        &mut self,
        id: &str,
        tables: &[String],
        conditions: &BTreeMap<String, String>,
        source: SignalSource,
    ) -> Result<(), PipelineError> {
        let Some(mut inc) = self.incremental.take() else {
            return Ok(());
        };
        let notification = |kind| {
            Notification::new(INITIAL_SNAPSHOT, kind, Some(id))
                .with("data_collections", tables.join(","))
        };
        tracing::info!(
            ?tables,
            ?conditions,
            "blocking snapshot started; the stream waits"
        );
        self.notifier.notify(notification(Kind::Started));
        let started = std::time::Instant::now();
        let result = self
            .read_in_transaction(&mut inc, tables, conditions, source, &notification)
            .await;
        self.incremental = Some(inc);
        match &result {
            Ok(rows) => {
                tracing::info!(
                    rows,
                    secs = started.elapsed().as_secs_f64(),
                    "blocking snapshot completed; the stream goes on"
                );
                self.notifier.notify(notification(Kind::Completed));
            }
            Err(_) => self.notifier.notify(notification(Kind::Aborted)),
        }
        result.map(|_| ())
    }

    /// [`Self::read_tables`] in one REPEATABLE READ transaction that sees
    /// every transaction streamed before it, ended whatever happens
    /// (COMMIT, or ROLLBACK after a failure).
    async fn read_in_transaction(
        &mut self,
        inc: &mut Incremental,
        tables: &[String],
        conditions: &BTreeMap<String, String>,
        source: SignalSource,
        notification: &impl Fn(Kind) -> Notification,
    ) -> Result<u64, PipelineError> {
        let sql_error = |action: &str| {
            let action = action.to_owned();
            move |error| IncrementalError::from(SetupError::Query { action, error })
        };
        inc.begin_seeing_the_stream().await?;
        let read = self
            .read_tables(inc, tables, conditions, source, notification)
            .await;
        let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = inc.sql.batch_execute(end).await;
        let rows = read?;
        ended.map_err(sql_error("ending the blocking snapshot's transaction"))?;
        Ok(rows)
    }

    /// Reads and emits every table; returns the rows emitted.
    async fn read_tables(
        &mut self,
        inc: &Incremental,
        tables: &[String],
        conditions: &BTreeMap<String, String>,
        (lsn, txn, xid, _): SignalSource,
        notification: &impl Fn(Kind) -> Notification,
    ) -> Result<u64, PipelineError> {
        let select = self.config.snapshot_select.parse().unwrap_or_default();
        // A replay reads the tables again as they are then.
        self.delivery.unanchor();
        let mut total = 0;
        for table in tables {
            let relation = match self.snapshot_target(inc, table).await? {
                Ok((relation, _)) => relation,
                Err(status) => {
                    self.notifier.notify(
                        notification(Kind::TableScanCompleted)
                            .with("scanned_collection", table.as_str())
                            .with("total_rows_scanned", "0")
                            .with("status", status),
                    );
                    continue;
                }
            };
            self.notifier.notify(
                notification(Kind::InProgress)
                    .with("current_collection_in_progress", table.as_str()),
            );
            let schema = Arc::clone(self.relations.get(relation.id, lsn)?);
            let statement =
                select.copy_filtered(&relation, conditions.get(table).map(String::as_str));
            let rows = reader::copy_select(&inc.sql, &relation, statement, Form::Text)
                .await
                .map_err(IncrementalError::from)?;
            futures::pin_mut!(rows);
            let mut count = 0u64;
            while let Some(row) = rows.next().await {
                let tuple = row.map_err(super::super::snapshot::SnapshotError::from)?;
                let source = SourceInfo {
                    origin: None,
                    commit_time_micros: crate::event::now_micros(),
                    xid,
                    lsn,
                    last_commit_lsn: self.last_commit_lsn,
                    snapshot: SnapshotMarker::True,
                };
                let event = self.relations.read_event(&schema, &tuple, source)?;
                self.send_event(&event, Vec::new(), false, txn).await?;
                count += 1;
            }
            tracing::info!(%table, rows = count, "blocking snapshot of table done");
            self.notifier.notify(
                notification(Kind::TableScanCompleted)
                    .with("scanned_collection", table.as_str())
                    .with("total_rows_scanned", count.to_string())
                    .with("status", "SUCCEEDED"),
            );
            total += count;
        }
        Ok(total)
    }
}
