//! The COPY BOTH phase: a reader task owns the connection, cuts CopyData
//! messages off a buffered socket and hands them over in batches; it also
//! writes every standby status update. [`ReplicationStream`] is the
//! consumer's end.
//!
//! # Why a reader task, and batches
//!
//! The stream loop waits on Kafka when the in-flight bound is reached,
//! sometimes for minutes. PostgreSQL ends a walsender that hears nothing
//! for `wal_sender_timeout`, so status updates must keep flowing while the
//! loop waits: a task that owns the socket sends them on its own cadence.
//! The cost of a task is a cross-thread wake-up per hand-over; handing over
//! one message at a time cost about a fifth of the connector's CPU while
//! draining a backlog (futex wake-ups and context switches, see
//! BENCHMARKS.md). So the reader hands over everything a read brought, up
//! to [`BATCH`] messages per channel slot: one wake-up per batch, and the
//! consumer takes the messages of a batch without synchronization
//! ([`ReplicationStream::try_recv`]). When the channel is full the reader
//! stops reading (TCP then holds the server back) and waits for several
//! free slots ([`RESUME_AFTER`], thousands of messages consumed), still sending
//! status updates.
//!
//! The alternative, reading the socket from the stream loop itself (a
//! cancel-safe `recv` over the buffered socket), saves the hand-over but
//! leaves nobody to write status updates while the loop is parked in a
//! Kafka send deep inside a transaction; it would need a second task
//! sharing the socket's write half for those, and the loop would have to
//! take care never to hold the reader while it awaits anything else.
//!
//! # Invariants
//!
//! - The position in every status update is the one the stream loop handed
//!   over with [`ReplicationStream::update_applied_lsn`] (the ack tracker's
//!   acknowledged position, see [`crate::checkpoint`]), never a received
//!   one; it only moves forward.
//! - A status goes out at least every `status_interval` while messages
//!   flow or the reader is held back by a full channel, at once when a
//!   keepalive asks for a reply, within `status_interval` of a raised
//!   position, and every [`IDLE_STATUS`] when idle.
//! - [`ReplicationStream::request_reply`] sends a status at once with its
//!   "reply requested" byte set: the walsender answers with a keepalive
//!   carrying its sent position, the end of the last WAL record it
//!   decoded (`ProcessStandbyReplyMessage` calls `WalSndKeepalive`, which
//!   sends `sentPtr`). That is how a consumer waiting to learn that the
//!   stream passed a position (a read-only snapshot chunk's high mark)
//!   learns it on an idle server without waiting for the walsender's own
//!   keepalive, sent after half of `wal_sender_timeout` without a reply.
//! - Messages reach the consumer in the order the server sent them; an
//!   error ends the stream after the messages that preceded it.
//! - [`ReplicationStream::stop`] reports the last position if it was not
//!   yet reported, sends CopyDone, and reads until the server ends the copy
//!   (so it has processed that last status), for at most [`DRAIN_TIMEOUT`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::conn::{server_error, Conn};
use super::error::ReplicationError;
use super::frame::{self, CopyData};
use super::pace::{self, Pace};
use crate::lsn::Lsn;

/// Messages per hand-over at most.
pub const BATCH: usize = 256;
/// Batches the channel holds: with [`BATCH`], up to 8,192 messages read ahead.
const BATCHES_QUEUED: usize = 32;
/// Free slots a reader held back by a full channel waits for before it
/// hands over again: a quarter of the channel, so the consumer still has
/// three quarters queued when the reader resumes.
const RESUME_AFTER: usize = BATCHES_QUEUED / 4;
/// Status cadence of an idle stream whose position did not move.
pub const IDLE_STATUS: Duration = Duration::from_secs(10);
/// How long a stop waits for the server to end the copy.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What `START_REPLICATION` needs, and the status cadence.
#[derive(Debug, Clone)]
pub struct StartReplication {
    /// The logical slot to stream from.
    pub slot: String,
    /// The publication pgoutput filters by.
    pub publication: String,
    /// Where streaming starts.
    pub lsn: Lsn,
    /// The acknowledged position reported until the stream loop hands over
    /// another (normally `lsn`).
    pub acknowledged: Lsn,
    /// Status cadence while messages flow or a raised position waits.
    pub status_interval: Duration,
    /// What to ask of pgoutput beyond the defaults (checked against the
    /// server's version in [`super::PluginOptions::for_server`]).
    pub plugin: super::PluginRequest,
}

/// Facts about the stream for [`crate::metrics`]: relaxed atomics, read
/// from the metrics endpoint while the reader writes them.
#[derive(Debug, Default)]
pub struct ReplicationMetrics {
    last_applied_lsn: AtomicU64,
    last_wal_end: AtomicU64,
    status_updates: AtomicU64,
    replies_requested: AtomicU64,
    low_water_waits: AtomicU64,
    low_water_fallbacks: AtomicU64,
}

impl ReplicationMetrics {
    /// The position last reported to the server in a status update.
    pub fn last_applied_lsn(&self) -> Lsn {
        Lsn::new(self.last_applied_lsn.load(Ordering::Relaxed))
    }

    /// The server's WAL end, from its last XLogData or keepalive.
    pub fn last_wal_end(&self) -> Lsn {
        Lsn::new(self.last_wal_end.load(Ordering::Relaxed))
    }

    /// Status updates sent.
    pub fn status_updates(&self) -> u64 {
        self.status_updates.load(Ordering::Relaxed)
    }

    /// Status updates sent with "reply requested" set.
    pub fn replies_requested(&self) -> u64 {
        self.replies_requested.load(Ordering::Relaxed)
    }

    /// Waits on the socket begun with its receive low-water mark raised
    /// (inside a stream block, over TCP: see `pace`), and those of them
    /// that ended by lowering it again after `pace::FALLBACK`.
    pub fn low_water_waits(&self) -> (u64, u64) {
        (
            self.low_water_waits.load(Ordering::Relaxed),
            self.low_water_fallbacks.load(Ordering::Relaxed),
        )
    }
}

/// What the consumer and the reader share.
#[derive(Debug)]
struct Shared {
    /// The position to report (raw [`Lsn`]); only raised.
    acknowledged: AtomicU64,
    /// Wakes an idle reader when `acknowledged` rises.
    raised: Notify,
    /// The next status asks the server for a reply.
    reply_wanted: AtomicBool,
    /// Wakes the reader to send that status at once.
    reply: Notify,
    metrics: Arc<ReplicationMetrics>,
}

impl Shared {
    fn acknowledged(&self) -> Lsn {
        Lsn::new(self.acknowledged.load(Ordering::Acquire))
    }
}

/// The consumer's end of a streaming replication session.
pub struct ReplicationStream {
    batches: mpsc::Receiver<Vec<CopyData>>,
    batch: std::vec::IntoIter<CopyData>,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    reader: Option<JoinHandle<Result<(), ReplicationError>>>,
}

impl ReplicationStream {
    pub(super) fn spawn(mut conn: Conn, start: StartReplication) -> Self {
        let shared = Arc::new(Shared {
            acknowledged: AtomicU64::new(start.acknowledged.as_u64()),
            raised: Notify::new(),
            reply_wanted: AtomicBool::new(false),
            reply: Notify::new(),
            metrics: Arc::default(),
        });
        let (tx, rx) = mpsc::channel(BATCHES_QUEUED);
        let (stop, stopped) = oneshot::channel();
        let reader = Reader {
            pace: Pace::new(conn.low_water.take()),
            conn,
            shared: Arc::clone(&shared),
            tx,
            stopped,
            interval: start.status_interval,
            sent: None,
            // Due at once: the first status confirms where streaming started.
            sent_at: Instant::now()
                .checked_sub(start.status_interval)
                .unwrap_or_else(Instant::now),
        };
        ReplicationStream {
            batches: rx,
            batch: Vec::new().into_iter(),
            shared,
            stop: Some(stop),
            reader: Some(tokio::spawn(reader.run())),
        }
    }

    /// A stream fed by a test instead of a server: `batches` are what the
    /// reader task would hand over. Positions handed to
    /// [`Self::update_applied_lsn`] are reported at once, as a server that
    /// received the status update would see them, in [`Self::metrics`].
    #[cfg(test)]
    pub(crate) fn scripted(batches: mpsc::Receiver<Vec<CopyData>>, start: Lsn) -> Self {
        let shared = Arc::new(Shared {
            acknowledged: AtomicU64::new(start.as_u64()),
            raised: Notify::new(),
            reply_wanted: AtomicBool::new(false),
            reply: Notify::new(),
            metrics: Arc::default(),
        });
        shared
            .metrics
            .last_applied_lsn
            .store(start.as_u64(), Ordering::Relaxed);
        let reporter = Arc::clone(&shared);
        tokio::spawn(async move {
            loop {
                reporter.raised.notified().await;
                let applied = reporter.acknowledged().as_u64();
                reporter
                    .metrics
                    .last_applied_lsn
                    .store(applied, Ordering::Relaxed);
            }
        });
        ReplicationStream {
            batches,
            batch: Vec::new().into_iter(),
            shared,
            stop: None,
            reader: None,
        }
    }

    /// The next message; `Ok(None)` once the stream ended cleanly (after
    /// [`Self::stop`], or when the server ended the copy), the error that
    /// ended it otherwise (once; then `Ok(None)`). Cancel-safe.
    pub async fn recv(&mut self) -> Result<Option<CopyData>, ReplicationError> {
        loop {
            if let Some(message) = self.batch.next() {
                return Ok(Some(message));
            }
            match self.batches.recv().await {
                Some(batch) => self.batch = batch.into_iter(),
                None => return self.ended().await,
            }
        }
    }

    /// The next message already handed over, without waiting; `None` when
    /// there is none (or the stream ended: [`Self::recv`] then says how).
    pub fn try_recv(&mut self) -> Option<CopyData> {
        if let Some(message) = self.batch.next() {
            return Some(message);
        }
        self.batch = self.batches.try_recv().ok()?.into_iter();
        self.batch.next()
    }

    async fn ended(&mut self) -> Result<Option<CopyData>, ReplicationError> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(None);
        };
        let outcome = reader.await;
        self.reader = None;
        match outcome {
            Ok(Ok(())) => Ok(None),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(ReplicationError::ReaderGone),
        }
    }

    /// Hands over the acknowledged position for the next status updates.
    /// A position below one handed over before is ignored.
    pub fn update_applied_lsn(&self, lsn: Lsn) {
        let before = self
            .shared
            .acknowledged
            .fetch_max(lsn.as_u64(), Ordering::AcqRel);
        if lsn.as_u64() > before {
            self.shared.raised.notify_one();
        }
    }

    /// Asks the server for a keepalive now: the reader sends a status
    /// update with "reply requested" set (see the module doc). The
    /// keepalive comes back as a message like any other.
    pub fn request_reply(&self) {
        self.shared.reply_wanted.store(true, Ordering::Release);
        self.shared.reply.notify_one();
    }

    /// Ends the stream: see the module doc. [`Self::recv`] then drains what
    /// was handed over and answers `Ok(None)`.
    pub fn stop(&mut self) {
        match self.stop.take() {
            Some(stop) => {
                let _ = stop.send(());
            }
            // No reader (stopped before, or scripted): nothing more comes.
            None => self.batches.close(),
        }
    }

    /// The stream's metrics.
    pub fn metrics(&self) -> Arc<ReplicationMetrics> {
        Arc::clone(&self.shared.metrics)
    }
}

/// The task that owns the connection while it streams.
struct Reader {
    conn: Conn,
    /// The socket's receive low-water mark, raised inside stream blocks.
    pace: Pace,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<CopyData>>,
    /// Resolves on [`ReplicationStream::stop`] or when the consumer is gone.
    stopped: oneshot::Receiver<()>,
    interval: Duration,
    /// The position in the last status update sent.
    sent: Option<Lsn>,
    sent_at: Instant,
}

/// How a read of buffered messages ended.
enum Parsed {
    /// No whole message left in the buffer.
    Drained,
    /// The batch is full; more may be buffered.
    Full,
    /// The server ended the stream.
    Ended,
    /// The server reported an error.
    Failed(ReplicationError),
}

impl Reader {
    async fn run(mut self) -> Result<(), ReplicationError> {
        let result = self.stream().await;
        if let Err(error) = &result {
            tracing::debug!(error = %crate::error_chain(error), "replication reader stopped");
        }
        result
    }

    async fn stream(&mut self) -> Result<(), ReplicationError> {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            let parsed = self.parse_buffered(&mut batch).await?;
            if Instant::now() >= self.sent_at + self.interval {
                self.send_status().await?;
            }
            if !batch.is_empty() {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if !self.hand_over(full).await? {
                    return self.end_copy().await;
                }
            }
            match parsed {
                Parsed::Ended => return Ok(()),
                Parsed::Failed(error) => return Err(error),
                // More whole messages may be buffered.
                Parsed::Full => continue,
                Parsed::Drained => {}
            }
            // Nothing buffered: wait for the socket, a stop, or a status due.
            let pending = self.sent != Some(self.shared.acknowledged());
            let wake = self.sent_at + if pending { self.interval } else { IDLE_STATUS };
            let paced = self.pace.before_wait()?;
            let metrics = &self.shared.metrics;
            if paced {
                metrics.low_water_waits.fetch_add(1, Ordering::Relaxed);
            }
            tokio::select! {
                biased;
                _ = &mut self.stopped => return self.end_copy().await,
                () = tokio::time::sleep_until(wake) => self.send_status().await?,
                () = self.shared.raised.notified(), if !pending => {}
                () = self.shared.reply.notified() => self.send_status().await?,
                () = tokio::time::sleep(pace::FALLBACK), if paced => {
                    metrics.low_water_fallbacks.fetch_add(1, Ordering::Relaxed);
                    self.pace.fall_back()?;
                }
                read = self.conn.fill("streaming") => {
                    read?;
                    self.pace.read();
                }
            }
        }
    }

    /// Moves the whole messages buffered into `batch` (up to [`BATCH`]),
    /// answering keepalives that ask for a reply.
    async fn parse_buffered(
        &mut self,
        batch: &mut Vec<CopyData>,
    ) -> Result<Parsed, ReplicationError> {
        while batch.len() < BATCH {
            let Some(frame) = self.conn.buffered_frame()? else {
                return Ok(Parsed::Drained);
            };
            match frame.tag {
                b'd' => {
                    let message = frame::parse_copy_data(&frame.body)?;
                    let (wal_end, reply) = match &message {
                        CopyData::XLogData(x) => {
                            self.pace.saw(&x.data);
                            (x.wal_end, false)
                        }
                        CopyData::Keepalive(k) => (k.wal_end, k.reply_requested),
                    };
                    self.shared
                        .metrics
                        .last_wal_end
                        .store(wal_end.as_u64(), Ordering::Relaxed);
                    if reply {
                        self.send_status().await?;
                    }
                    batch.push(message);
                }
                // The server ended the stream: CopyDone, or (a walsender
                // shutting down, WalSndDone) CommandComplete straight away.
                b'c' | b'C' | b'Z' => return Ok(Parsed::Ended),
                b'E' => {
                    return Ok(Parsed::Failed(ReplicationError::Server(server_error(
                        &frame,
                    )?)))
                }
                b'N' => {
                    let notice = frame::parse_error_fields(&frame.body)?;
                    tracing::info!(severity = %notice.severity, code = %notice.code, "server notice: {}", notice.message);
                }
                // ParameterStatus may arrive at any time.
                b'S' => {}
                tag => {
                    return Err(ReplicationError::Unexpected {
                        tag,
                        during: "streaming",
                    })
                }
            }
        }
        Ok(Parsed::Full)
    }

    /// Hands `batch` to the consumer; waits for room while the channel is
    /// full, still sending status updates. `false` when stopped meanwhile
    /// or the consumer is gone.
    async fn hand_over(&mut self, batch: Vec<CopyData>) -> Result<bool, ReplicationError> {
        match self.tx.try_reserve() {
            Ok(permit) => {
                permit.send(batch);
                return Ok(true);
            }
            Err(mpsc::error::TrySendError::Closed(())) => return Ok(false),
            Err(mpsc::error::TrySendError::Full(())) => {}
        }
        loop {
            let due = self.sent_at + self.interval;
            tokio::select! {
                biased;
                _ = &mut self.stopped => return Ok(false),
                // Resume only once several slots are free: waiting for one
                // would wake this task for every batch the consumer takes.
                // The unused permits go back to the channel when dropped.
                permits = self.tx.reserve_many(RESUME_AFTER) => {
                    return Ok(match permits.map(|mut permits| permits.next()) {
                        Ok(Some(permit)) => {
                            permit.send(batch);
                            true
                        }
                        Ok(None) | Err(_) => false,
                    });
                }
                () = tokio::time::sleep_until(due) => {}
            }
            self.send_status().await?;
        }
    }

    /// Reports the acknowledged position; asks for a reply when
    /// [`ReplicationStream::request_reply`] wanted one since the last status.
    async fn send_status(&mut self) -> Result<(), ReplicationError> {
        let position = self.shared.acknowledged();
        let reply = self.shared.reply_wanted.swap(false, Ordering::AcqRel);
        frame::standby_status_update(position, frame::pg_now_micros(), reply, &mut self.conn.out);
        self.conn.flush().await?;
        self.sent = Some(position);
        self.sent_at = Instant::now();
        let metrics = &self.shared.metrics;
        metrics
            .last_applied_lsn
            .store(position.as_u64(), Ordering::Relaxed);
        metrics.status_updates.fetch_add(1, Ordering::Relaxed);
        if reply {
            metrics.replies_requested.fetch_add(1, Ordering::Relaxed);
        }
        tracing::trace!(lsn = %position, reply, "status update sent");
        Ok(())
    }

    /// The client ends the copy: the last position, CopyDone, then reads
    /// until the server is done (its CopyDone and ReadyForQuery), and says
    /// goodbye.
    async fn end_copy(&mut self) -> Result<(), ReplicationError> {
        // The server's last messages are small: they must not wait for more.
        self.pace.lower()?;
        if self.sent != Some(self.shared.acknowledged()) {
            self.send_status().await?;
        }
        frame::copy_done(&mut self.conn.out);
        self.conn.flush().await?;
        let drain = async {
            loop {
                let frame = self.conn.read_frame("ending the stream").await?;
                match frame.tag {
                    b'Z' => return Ok(()),
                    b'E' => return Err(ReplicationError::Server(server_error(&frame)?)),
                    // CopyData still in flight, the server's CopyDone, CommandComplete.
                    _ => {}
                }
            }
        };
        match tokio::time::timeout(DRAIN_TIMEOUT, drain).await {
            Ok(Ok(())) => {
                postgres_protocol::message::frontend::terminate(&mut self.conn.out);
                let _ = self.conn.flush().await;
            }
            Ok(Err(error)) => {
                tracing::debug!(error = %crate::error_chain(&error), "the server did not end the copy cleanly");
            }
            Err(_) => {
                tracing::debug!(timeout = ?DRAIN_TIMEOUT, "the server did not end the copy in time")
            }
        }
        Ok(())
    }
}
