//! Streamed in-progress transactions (pgoutput protocol 2, `streaming
//! 'on'`, `--stream-in-progress`): the read loop's side of Stream Start,
//! Stop, Commit and Abort.
//!
//! A transaction whose changes pass the server's
//! `logical_decoding_work_mem` is sent in blocks while it runs, instead of
//! being spilled to the server's disk and sent after its commit
//! ([PostgreSQL: streaming of large transactions](https://www.postgresql.org/docs/current/logicaldecoding-streaming.html)).
//! Blocks of several transactions interleave, and whole (unstreamed)
//! transactions come between them. Every message of a block goes to the
//! [`Spool`] of its transaction as it arrives; nothing is decoded, encoded
//! or produced before the Stream Commit. The commit then reads the spool
//! back and runs each message through the same path as an unstreamed
//! transaction (a Begin and a Commit built from the Stream Commit's
//! positions, [`StreamCommit::begin`] and [`StreamCommit::commit`]), so
//! Kafka receives exactly what protocol 1 would have sent, in commit order,
//! with the same `source.lsn` of every change (the server gives a streamed
//! change the WAL position it gives it unstreamed). A Stream Abort drops the
//! spool, or a subtransaction's changes in it. Why nothing goes to Kafka
//! earlier, exactly-once included, is in [`super::spool`].
//!
//! # What may be confirmed while a streamed transaction is open
//!
//! A streamed transaction is not in the ack tracker before its Stream
//! Commit, so the confirmed position moves on with the transactions that
//! commit meanwhile (and with keepalives between transactions), past the
//! open transaction's first change. That is safe, for the reason the ack
//! tracker's rule is ([`crate::checkpoint`]): on a new connection the
//! server skips a transaction only when its *commit record* is before the
//! confirmed position (`DecodeTXNNeedSkip`, `SnapBuildXactNeedsSkip`), and
//! decodes from the slot's `restart_lsn`, which it keeps before the start of
//! every transaction still running. An open transaction commits after
//! everything confirmed so far, so after a restart (a `kill -9` in the
//! middle of its blocks, say) the server sends it again from its first
//! block (or, while it re-reads WAL before the confirmed position, whole
//! after its commit). Holding the position back to the start of the oldest
//! open transaction would add nothing but re-sent transactions. The spool
//! of an attempt is dropped with the attempt, for the same reason.

use bytes::Bytes;

use super::spool::{Spool, SpoolError};
use super::{PipelineError, Stream};
use crate::config::RunConfig;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::source::pgoutput::{self, BlockEntry, StreamAbort, StreamCommit, StreamStart};

/// A streamed transaction the read loop could not follow.
#[derive(Debug, thiserror::Error)]
pub enum StreamedError {
    #[error(transparent)]
    Spool(#[from] SpoolError),
    /// A stream message although the run asked for protocol 1.
    #[error(
        "the server streamed an in-progress transaction ({message}) although this run asked for \
         protocol version 1; is another client's option list in use? (--stream-in-progress)"
    )]
    NotRequested { message: &'static str },
    /// A message about a transaction whose first block was not received.
    #[error(
        "a {message} for transaction {xid}, whose first stream block this connection did not \
         receive; reconnecting, so that the server streams it again from its start"
    )]
    UnknownTransaction { message: &'static str, xid: u32 },
    /// A stream message where the protocol has none.
    #[error("a {message} arrived {place}; the server's pgoutput and the connector disagree")]
    OutOfPlace {
        message: &'static str,
        place: &'static str,
    },
}

impl StreamedError {
    /// Whether a restart may succeed (the server streams the transaction
    /// again from its start).
    pub fn is_retryable(&self) -> bool {
        match self {
            StreamedError::Spool(e) => e.is_retryable(),
            StreamedError::UnknownTransaction { .. } => true,
            StreamedError::NotRequested { .. } | StreamedError::OutOfPlace { .. } => false,
        }
    }
}

/// The read loop's streaming state: the spool and the open block.
#[derive(Debug)]
pub(super) struct Streamed {
    spool: Spool,
    /// The transaction whose block is open (between Start and Stop).
    block: Option<u32>,
}

impl Streamed {
    /// The state for `config`, `None` when it does not stream (protocol 1).
    pub(super) fn for_config(
        config: &RunConfig,
        metrics: &std::sync::Arc<Metrics>,
    ) -> Result<Option<Self>, StreamedError> {
        let options = &config.streaming;
        if !options.stream_in_progress {
            return Ok(None);
        }
        let dir = options.spool_dir_for(&config.pg_url.dbname(), &config.slot_name);
        let spool = Spool::new(
            dir,
            options.spool_memory_bytes,
            std::sync::Arc::clone(metrics),
        )?;
        Ok(Some(Streamed { spool, block: None }))
    }
}

impl Stream<'_> {
    /// The transaction whose stream block is open, if one is.
    pub(super) fn stream_block(&self) -> Option<u32> {
        self.streamed.as_ref().and_then(|s| s.block)
    }

    /// One message inside the open block of `xid` (`entry` says what it
    /// is): its end, or a message for the spool.
    pub(super) fn block_message(
        &mut self,
        xid: u32,
        entry: BlockEntry,
        data: &Bytes,
        lsn: Lsn,
    ) -> Result<(), StreamedError> {
        let Some(streamed) = &mut self.streamed else {
            return Ok(());
        };
        match entry {
            BlockEntry::Stop => streamed.block = None,
            BlockEntry::Change { xid: made_by } => {
                streamed.spool.append(xid, made_by, lsn, data)?;
            }
        }
        Ok(())
    }

    /// Stream Start: the messages until Stream Stop are `start.xid`'s.
    pub(super) fn stream_start(&mut self, start: StreamStart) -> Result<(), StreamedError> {
        let in_txn = self.txn.is_some();
        let streamed = self.streamed_for("stream start")?;
        if in_txn {
            return Err(out_of_place("stream start", "inside a transaction"));
        }
        if !streamed.spool.start(start.xid, start.first_segment) {
            return Err(StreamedError::UnknownTransaction {
                message: "stream start",
                xid: start.xid,
            });
        }
        streamed.block = Some(start.xid);
        Ok(())
    }

    /// Stream Stop outside a block.
    pub(super) fn stray_stream_stop(&mut self) -> Result<(), StreamedError> {
        self.streamed_for("stream stop")?;
        Err(out_of_place("stream stop", "outside a stream block"))
    }

    /// Stream Abort: the transaction, or one of its subtransactions, is void.
    pub(super) fn stream_abort(&mut self, abort: StreamAbort) -> Result<(), StreamedError> {
        let streamed = self.streamed_for("stream abort")?;
        if abort.is_top_level() {
            tracing::debug!(xid = abort.xid, "a streamed transaction aborted");
        }
        streamed.spool.abort(abort.xid, abort.subxid);
        Ok(())
    }

    /// Stream Commit: the transaction's spooled messages go through the
    /// unstreamed path, between the Begin and Commit it would have had.
    pub(super) async fn stream_commit(
        &mut self,
        commit: StreamCommit,
    ) -> Result<(), PipelineError> {
        let streamed = self.streamed_for("stream commit")?;
        let replay = streamed
            .spool
            .commit(commit.xid)
            .map_err(StreamedError::from)?;
        let Some(mut replay) = replay else {
            return Err(StreamedError::UnknownTransaction {
                message: "stream commit",
                xid: commit.xid,
            }
            .into());
        };
        tracing::debug!(xid = commit.xid, commit_lsn = %commit.commit_lsn, "a streamed transaction committed; sending it");
        self.begin(commit.begin()).await?;
        while let Some((lsn, data)) = replay.next().map_err(StreamedError::from)? {
            let message = pgoutput::decode_streamed(&data, lsn)?;
            self.handle_message(message, lsn).await?;
        }
        drop(replay);
        self.commit(commit.commit()).await
    }

    fn streamed_for(&mut self, message: &'static str) -> Result<&mut Streamed, StreamedError> {
        self.streamed
            .as_mut()
            .ok_or(StreamedError::NotRequested { message })
    }
}

fn out_of_place(message: &'static str, place: &'static str) -> StreamedError {
    StreamedError::OutOfPlace { message, place }
}
