//! The translation of each pgoutput message of a transaction into Kafka
//! records: row changes (with key changes split into a delete and a create,
//! TOASTed unchanged values taken from the old row when it has them, else
//! marked), truncates, logical messages and signal-table rows, as records
//! (Debezium's or a transform's) through the encode step into the sink.
//! The read loop ([`super`]) calls [`Stream::handle_message`] for each one.

use std::sync::Arc;

use super::super::{PipelineError, NEW_KEY_HEADER, OLD_KEY_HEADER, UNCHANGED_COLUMNS_HEADER};
use super::{now_micros, Stream};
use crate::checkpoint::TxnId;
use crate::event::envelope::Stamp;
use crate::event::record::{Header, Record, RecordKey};
use crate::event::value::{ConnectSchema, ConnectType, Value};
use crate::event::{
    ChangeEvent, MessageEvent, Op, SnapshotMarker, SourceInfo, SourceOrigin, TableSchema,
    UnmappedKey,
};
use crate::lsn::Lsn;
use crate::source::pgoutput::{LogicalMessage, OldTuple, Tuple};
use crate::source::relation::{RelationCache, RowError};
use crate::source::setup;

impl Stream<'_> {
    /// Turns one decoded message of the open transaction (`lsn`: where it
    /// is in the WAL) into records, or into the relation cache's state.
    pub(super) async fn handle_message(
        &mut self,
        message: LogicalMessage,
        lsn: Lsn,
    ) -> Result<(), PipelineError> {
        let skipped = self.config.skipped_operations;
        // Incremental snapshots see every change first: signals, watermarks,
        // and the keys that leave a chunk's buffer. Signal-table rows are
        // then emitted like any captured table's, as Debezium does.
        let mut signal = None;
        if let Some(incremental) = &mut self.incremental {
            match &message {
                // pgoutput sends a relation again, unchanged, whenever the
                // server's cache of it was invalidated (ANALYZE, autovacuum,
                // a GRANT): only a definition that differs from the known
                // one makes a chunk read meanwhile suspect. (Dropping it on
                // every Relation message re-read chunks again and again on
                // a table under autovacuum.)
                LogicalMessage::Relation(relation)
                    if !incremental.is_signal_relation(relation)
                        && self.relations.relation(relation.id) != Some(relation) =>
                {
                    incremental.relation_changed(relation.id);
                }
                LogicalMessage::Insert(i) if incremental.is_signal(i.relation_id) => {
                    signal = Some(i.new.clone());
                }
                LogicalMessage::Update(u) if incremental.is_signal(u.relation_id) => {
                    signal = Some(u.new.clone());
                }
                LogicalMessage::Insert(i) => incremental.observe(i.relation_id, &[&i.new]),
                LogicalMessage::Update(u) => match &u.old {
                    Some(old) => incremental.observe(u.relation_id, &[old.tuple(), &u.new]),
                    None => incremental.observe(u.relation_id, &[&u.new]),
                },
                LogicalMessage::Delete(d) => incremental.observe(d.relation_id, &[d.old.tuple()]),
                LogicalMessage::Truncate(t) => {
                    for &relation_id in &t.relation_ids {
                        incremental.truncated(relation_id);
                    }
                }
                _ => {}
            }
        }
        if let Some(tuple) = signal {
            self.signal_change(&tuple, lsn).await?;
        }
        if self.produced_by_debezium(&message, lsn) {
            return Ok(());
        }
        if self.takeover.is_some() {
            let place = self.txn.as_ref().and_then(|t| t.debezium_place);
            let change = is_change(&message).then_some(place).flatten();
            self.delivery.debezium_change(change.map(|p| (p, lsn)));
        }
        let (op, relation_id, before, after) = match message {
            LogicalMessage::Relation(relation) => {
                if !self.relations.admits(&relation) {
                    tracing::debug!(
                        relation_id = relation.id,
                        "relation not selected; its changes are skipped"
                    );
                    return Ok(());
                }
                if !self.relations.knows_types_of(&relation) {
                    *self.relations.types_mut() = setup::load_types(&self.sql).await?;
                }
                let catalog = setup::catalog_columns(&self.sql, relation.id).await?;
                let table = self.relations.update(&relation, &catalog)?;
                self.ensure_topic(&table.topic).await?;
                tracing::debug!(topic = %table.topic, relation_id = relation.id, "relation");
                return Ok(());
            }
            LogicalMessage::Insert(i) if !skipped.inserts => {
                (Op::Create, i.relation_id, None, Some(i.new))
            }
            LogicalMessage::Update(u) if !skipped.updates => {
                let old = u.old.map(OldTuple::into_tuple);
                let mut new = u.new;
                // Unchanged TOASTed values the old row holds (REPLICA
                // IDENTITY FULL) go into `after`, as Debezium fills them.
                if let Some(old) = &old {
                    new.fill_unchanged_from(old);
                }
                (Op::Update, u.relation_id, old, Some(new))
            }
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
            LogicalMessage::Origin(origin) => {
                if let Some(txn) = &mut self.txn {
                    txn.origin = Some(SourceOrigin {
                        name: origin.name.into(),
                        commit_lsn: origin.commit_lsn,
                    });
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

    /// `--takeover-debezium`: whether Debezium produced the change
    /// `message` at `lsn` of the open transaction (asked once per change).
    fn produced_by_debezium(&mut self, message: &LogicalMessage, lsn: Lsn) -> bool {
        let through = self.txn.as_mut().and_then(|t| t.debezium_through.as_mut());
        is_change(message) && through.is_some_and(|through| through.produced(lsn))
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
        if txn.delivered || self.relations.is_excluded(relation_id) {
            return Ok(());
        }
        let txn_id = txn.id;
        let source = SourceInfo {
            origin: txn.origin.clone(),
            commit_time_micros: txn.commit_time_micros,
            xid: txn.xid,
            lsn,
            last_commit_lsn: self.last_commit_lsn,
            snapshot: SnapshotMarker::False,
        };
        let table = Arc::clone(self.relations.get(relation_id, lsn)?);
        // Columns whose value was not sent because it is TOASTed and unchanged.
        let unchanged: Vec<&str> = after
            .as_ref()
            .map(|t| self.relations.unchanged_columns(&table, t))
            .unwrap_or_default();
        let unchanged_header = (!unchanged.is_empty()).then(|| {
            let names = unchanged.iter().map(|&c| Value::String(c.to_owned()));
            let schema = ConnectSchema::array(ConnectSchema::primitive(ConnectType::String));
            let names = Value::Array(names.collect());
            Header::value(UNCHANGED_COLUMNS_HEADER, names, Arc::new(schema))
        });
        let mut table = table;
        let decode = |relations: &RelationCache, table: &TableSchema| {
            let before_row = before
                .as_ref()
                .map(|t| relations.decode_row(table, t, lsn))
                .transpose()?;
            let after_row = after
                .as_ref()
                .map(|t| relations.decode_row(table, t, lsn))
                .transpose()?;
            Ok::<_, RowError>((before_row, after_row))
        };
        let unmapped_key = |relations: &RelationCache, table: &TableSchema| {
            Ok::<_, RowError>(UnmappedKey {
                before: relations.unmapped_key(table, before.as_ref(), lsn)?,
                after: relations.unmapped_key(table, after.as_ref(), lsn)?,
            })
        };
        let (mut before_row, mut after_row) = decode(&self.relations, &table)?;
        let stale = |relations: &RelationCache, row: &Option<Vec<_>>| {
            row.as_ref()
                .is_some_and(|r| relations.has_unknown_enum_label(relation_id, r))
        };
        if stale(&self.relations, &before_row) || stale(&self.relations, &after_row) {
            tracing::info!(topic = %table.topic, "an enum gained a value; reloading types");
            let types = setup::load_types(&self.sql).await?;
            self.relations.replace_types(types)?;
            table = Arc::clone(self.relations.get(relation_id, lsn)?);
            (before_row, after_row) = decode(&self.relations, &table)?;
        }
        let unmapped_key = unmapped_key(&self.relations, &table)?;
        let event = ChangeEvent {
            table,
            op,
            before: before_row,
            after: after_row,
            source,
            unmapped_key,
        };
        // Debezium compares the two row structs (captured columns, after
        // masking); without the old row (not FULL) an update always counts.
        if op == Op::Update
            && self.config.skip_messages_without_change
            && event.before.is_some()
            && event.before == event.after
        {
            return Ok(());
        }

        if op == Op::Update && event.key_changed() {
            return self.emit_key_change(event, unchanged_header, txn_id).await;
        }
        let headers = unchanged_header.into_iter().collect();
        let tombstone = op == Op::Delete && self.config.tombstones_on_delete;
        self.send_event(&event, headers, tombstone, txn_id).await
    }

    /// A change of the signal table, inside the open transaction.
    async fn signal_change(&mut self, tuple: &Tuple, lsn: Lsn) -> Result<(), PipelineError> {
        let Some(txn) = self.txn.as_ref().filter(|txn| !txn.delivered) else {
            return Ok(());
        };
        let (id, xid, commit_time) = (txn.id, txn.xid, txn.commit_time_micros);
        self.handle_signal(tuple, lsn, id, xid, commit_time).await
    }

    /// An update that changes the key: a delete of the old key (and its
    /// tombstone) then a create of the new one, as Debezium emits it, each
    /// pointing at the other key in a header.
    async fn emit_key_change(
        &mut self,
        event: ChangeEvent,
        unchanged_header: Option<Header<'static>>,
        txn: TxnId,
    ) -> Result<(), PipelineError> {
        let delete = event.clone_as(Op::Delete);
        let create = ChangeEvent {
            before: None,
            ..event.clone_as(Op::Create)
        };
        let tombstone = self.config.tombstones_on_delete;
        let new_key = Header::key(NEW_KEY_HEADER, RecordKey::Table(&create));
        self.send_event(&delete, vec![new_key], tombstone, txn)
            .await?;
        let mut headers = vec![Header::key(OLD_KEY_HEADER, RecordKey::Table(&delete))];
        headers.extend(unchanged_header);
        self.send_event(&create, headers, false, txn).await
    }

    pub(in crate::pipeline) async fn send_event(
        &mut self,
        event: &ChangeEvent,
        headers: Vec<Header<'_>>,
        tombstone: bool,
        txn: TxnId,
    ) -> Result<(), PipelineError> {
        // Debezium's context headers follow the emitter's own on every
        // change record (transforms see them as Debezium's SMTs would).
        let mut headers = headers;
        if self.config.extended_headers {
            headers.extend(Header::context());
        }
        // Counted for the transaction block whether or not a transform then
        // rewrites the event, as Debezium counts before its transforms.
        let transaction = self.metadata.event(&event.table);
        let stamp = Stamp {
            now_micros: now_micros(),
            transaction: transaction.as_ref(),
        };
        if self.transforms.applies_to(&event.table) {
            return self
                .send_transformed(event, headers, tombstone, txn, stamp)
                .await;
        }
        let record = Record::change(event, stamp, headers);
        let record = self
            .encoder
            .encode(super::renamed(&self.renames, record), txn)
            .await?;
        self.send_written(&event.table.qualified_name, event.op, record, tombstone)
            .await
    }

    /// The records a transform (outbox, unwrap) makes of `event`, all in
    /// transaction `txn`, so the slot still waits for each of them.
    async fn send_transformed(
        &mut self,
        event: &ChangeEvent,
        headers: Vec<Header<'_>>,
        tombstone: bool,
        txn: TxnId,
        stamp: Stamp<'_>,
    ) -> Result<(), PipelineError> {
        let records = self.transforms.records(event, headers, tombstone, stamp)?;
        if records.is_empty() {
            return Ok(());
        }
        // All encoded before any is sent, so a failure sends none of them.
        let mut encoded = Vec::with_capacity(records.len());
        for record in records {
            encoded.push(
                self.encoder
                    .encode(super::renamed(&self.renames, record), txn)
                    .await?,
            );
        }
        let mut bytes = 0;
        for record in encoded {
            bytes +=
                record.key.as_ref().map_or(0, Vec::len) + record.value.as_ref().map_or(0, Vec::len);
            self.delivery.send(record).await?;
        }
        self.summary.events += 1;
        self.metrics
            .event(&event.table.qualified_name, event.op.code(), bytes);
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
        // Filtered where Debezium's decoder drops it: as if never sent.
        if !self.relations.selection().includes_message(&prefix) {
            return Ok(());
        }
        if !transactional {
            // As Debezium: no Commit follows it, so its own position is the
            // last commit, already in its own `source.sequence`.
            self.last_commit_lsn = Some(lsn);
            if self.takeover.as_ref().is_some_and(|t| t.message(lsn)) {
                return Ok(());
            }
        }
        let in_kafka = match &self.txn {
            Some(open) => open.delivered,
            None => self.delivery.already_delivered(lsn),
        };
        if in_kafka {
            return Ok(());
        }
        let (txn, own) = match &self.txn {
            Some(open) => (open.id, false),
            None => {
                let txn = self.delivery.begin();
                self.delivery.anchor(txn, lsn);
                (txn, true)
            }
        };
        let transaction = if own {
            None
        } else {
            self.metadata.message_event()
        };
        let source = SourceInfo {
            origin: self.txn.as_ref().and_then(|t| t.origin.clone()),
            commit_time_micros: match &self.txn {
                Some(open) => open.commit_time_micros,
                // The last transaction's, as Debezium repeats it (the start
                // time before any: Debezium's offset context begins with it).
                None => self.last_commit_time_micros.unwrap_or_else(now_micros),
            },
            xid: self.txn.as_ref().map_or(0, |t| t.xid),
            lsn,
            last_commit_lsn: self.last_commit_lsn,
            snapshot: SnapshotMarker::False,
        };
        let message = MessageEvent {
            transactional,
            prefix,
            content,
            source,
        };
        let topic = Arc::clone(&self.message_topic);
        self.ensure_topic(&topic).await?;
        let stamp = Stamp {
            now_micros: now_micros(),
            transaction: transaction.as_ref(),
        };
        let record = Record::message(topic, &message, stamp);
        let record = self
            .encoder
            .encode(super::renamed(&self.renames, record), txn)
            .await?;
        let bytes =
            record.key.as_ref().map_or(0, Vec::len) + record.value.as_ref().map_or(0, Vec::len);
        self.delivery.send(record).await?;
        self.summary.events += 1;
        self.metrics.event("", "m", bytes);
        if own {
            self.delivery.commit(txn, Lsn::new(lsn.as_u64() + 1));
        }
        Ok(())
    }
}

/// A message Debezium makes records of, in a transaction: a row change, a
/// truncate, a transactional logical message.
fn is_change(message: &LogicalMessage) -> bool {
    match message {
        LogicalMessage::Insert(_)
        | LogicalMessage::Update(_)
        | LogicalMessage::Delete(_)
        | LogicalMessage::Truncate(_) => true,
        LogicalMessage::Message(m) => m.transactional,
        _ => false,
    }
}
