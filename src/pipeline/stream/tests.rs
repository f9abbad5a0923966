//! The read loop driven without services: a scripted replication stream
//! (real pgoutput frames through the real decoder), a fake delivery that
//! acknowledges or fails records when a test says so (its position kept by
//! the real [`AckTracker`]), and a SQL connection whose server only logs in.
//! What they check is what the slot would be told: only positions Kafka
//! acknowledged, in read order, through restarts, failures and stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::source::replication::{Keepalive, XLogData};

/// How long a condition may take before a test fails.
const WAIT: Duration = Duration::from_secs(10);

mod fakes;
mod streamed;

use fakes::FakeKafka;

/// Messages of the pgoutput stream, framed as the server sends them.
struct Wal(mpsc::Sender<Vec<CopyData>>);

impl Wal {
    async fn send(&self, message: CopyData) {
        self.0.send(vec![message]).await.expect("the stream reads");
    }

    async fn xlog(&self, lsn: u64, data: BytesMut) {
        self.send(CopyData::XLogData(XLogData {
            wal_start: Lsn::new(lsn),
            wal_end: Lsn::new(lsn),
            send_time_micros: 0,
            data: data.freeze(),
        }))
        .await;
    }

    async fn begin(&self, final_lsn: u64, xid: u32) {
        let mut b = BytesMut::new();
        b.put_u8(b'B');
        b.put_u64(final_lsn);
        b.put_i64(0);
        b.put_u32(xid);
        self.xlog(final_lsn, b).await;
    }

    /// `pg_logical_emit_message(transactional, 'test', content)` at `lsn`.
    async fn message(&self, lsn: u64, transactional: bool, content: &str) {
        let mut b = BytesMut::new();
        b.put_u8(b'M');
        b.put_u8(u8::from(transactional));
        b.put_u64(lsn);
        b.put_slice(b"test\0");
        b.put_u32(u32::try_from(content.len()).expect("short"));
        b.put_slice(content.as_bytes());
        self.xlog(lsn, b).await;
    }

    async fn commit(&self, commit_lsn: u64, end_lsn: u64) {
        let mut b = BytesMut::new();
        b.put_u8(b'C');
        b.put_u8(0);
        b.put_u64(commit_lsn);
        b.put_u64(end_lsn);
        b.put_i64(0);
        self.xlog(commit_lsn, b).await;
    }

    /// A whole transaction with one message: Begin at `at`, the message,
    /// Commit ending at `at + 0x10`.
    async fn transaction(&self, at: u64, content: &str) {
        self.begin(at, u32::try_from(at).expect("small")).await;
        self.message(at + 1, true, content).await;
        self.commit(at + 2, at + 0x10).await;
    }

    async fn keepalive(&self, wal_end: u64) {
        self.send(CopyData::Keepalive(Keepalive {
            wal_end: Lsn::new(wal_end),
            send_time_micros: 0,
            reply_requested: false,
        }))
        .await;
    }
}

/// A `tokio_postgres::Client` whose server only logs it in, then answers
/// every query with an error: the loop asks it nothing while messages
/// carry no relations, and the end of an attempt falls back to its own
/// positions when the catalog cannot be read.
async fn client_without_server() -> tokio_postgres::Client {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve_errors(server_io));
    let (client, connection) = tokio_postgres::Config::new()
        .user("test")
        .dbname("test")
        .connect_raw(client_io, tokio_postgres::NoTls)
        .await
        .expect("the fake server logs in");
    tokio::spawn(connection);
    client
}

async fn serve_errors(mut io: DuplexStream) -> std::io::Result<()> {
    let startup = usize::try_from(io.read_i32().await?).unwrap_or(4);
    io.read_exact(&mut vec![0; startup.saturating_sub(4)])
        .await?;
    // AuthenticationOk, ReadyForQuery (idle).
    io.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0, b'Z', 0, 0, 0, 5, b'I'])
        .await?;
    let mut error = BytesMut::new();
    for (field, value) in [(b'S', "ERROR"), (b'C', "58000"), (b'M', "no server here")] {
        error.put_u8(field);
        error.put_slice(value.as_bytes());
        error.put_u8(0);
    }
    error.put_u8(0);
    loop {
        let tag = io.read_u8().await?;
        let len = usize::try_from(io.read_i32().await?).unwrap_or(4);
        io.read_exact(&mut vec![0; len.saturating_sub(4)]).await?;
        match tag {
            // Sync or a simple query: the error, then ready again.
            b'S' | b'Q' => {
                let mut reply = BytesMut::new();
                reply.put_u8(b'E');
                reply.put_i32(i32::try_from(error.len() + 4).unwrap_or(i32::MAX));
                reply.put_slice(&error);
                reply.put_slice(&[b'Z', 0, 0, 0, 5, b'I']);
                io.write_all(&reply).await?;
            }
            b'X' => return Ok(()),
            _ => {}
        }
    }
}

fn config(extra: &[&str]) -> RunConfig {
    let mut args = vec![
        "--pg-url",
        "postgres://u@127.0.0.1/db",
        "--topic-prefix",
        "app",
        "--status-interval",
        "10ms",
        "--shutdown-timeout",
        "5s",
    ];
    args.extend_from_slice(extra);
    RunConfig::from_args(args).expect("flags")
}

/// Polls `condition` until it holds, failing the test after [`WAIT`].
async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One attempt of the loop from `start`, with `script` playing the server
/// A run whose first attempt starts at 0x10 with Kafka holding nothing
/// past it: its flags' config, its summary and its Kafka.
struct Run {
    config: RunConfig,
    summary: RunSummary,
    kafka: FakeKafka,
}

impl Run {
    fn new(flags: &[&str]) -> Self {
        Run {
            config: config(flags),
            summary: RunSummary::default(),
            kafka: FakeKafka::new(Lsn::new(0x10)),
        }
    }

    /// [`run_attempt`] from 0x10 on this run's Kafka.
    async fn attempt<F, Fut>(
        &mut self,
        target: Option<u64>,
        script: F,
    ) -> Result<StopReason, PipelineError>
    where
        F: FnOnce(Arc<Attempt>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let kafka = self.kafka.clone();
        run_attempt(&self.config, &mut self.summary, 0x10, kafka, target, script).await
    }
}

/// and Kafka. Returns how the attempt ended, once the script is done too.
struct Attempt {
    kafka: FakeKafka,
    wal: Wal,
    /// What the loop handed to the replication client for the server.
    applied: Arc<crate::source::replication::ReplicationMetrics>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    finished: AtomicBool,
}

impl Attempt {
    fn request_stop(&self) {
        if let Some(stop) = self.stop.lock().expect("lock").take() {
            let _ = stop.send(());
        }
    }

    fn applied(&self) -> Lsn {
        self.applied.last_applied_lsn()
    }

    async fn wait_applied(&self, lsn: u64) {
        wait_for(&format!("the slot told {}", Lsn::new(lsn)), || {
            self.applied() == Lsn::new(lsn)
        })
        .await;
    }

    /// Gives the loop time to act on what it was handed (several status
    /// intervals), for checks that something did not happen.
    async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run_attempt<F, Fut>(
    config: &RunConfig,
    summary: &mut RunSummary,
    start: u64,
    kafka: FakeKafka,
    target: Option<u64>,
    script: F,
) -> Result<StopReason, PipelineError>
where
    F: FnOnce(Arc<Attempt>) -> Fut,
    Fut: Future<Output = ()>,
{
    let start = Lsn::new(start);
    let metrics = Arc::new(Metrics::new());
    let (frames, batches) = mpsc::channel(64);
    let mut source = ReplicationStream::scripted(batches, start);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let attempt = Arc::new(Attempt {
        kafka: kafka.clone(),
        wal: Wal(frames),
        applied: source.metrics(),
        stop: Mutex::new(Some(stop_tx)),
        finished: AtomicBool::new(false),
    });
    let sql = client_without_server().await;
    let mut stream = Stream::new(
        config,
        sql,
        TypeRegistry::new(),
        kafka.delivery(),
        summary,
        start,
        &metrics,
    )
    .await
    .expect("a stream");
    stream.target = target.map(Lsn::new);
    let stop = async move {
        // A dropped sender is no request: the script ended without one.
        match stop_rx.await {
            Ok(()) => StopReason::Requested,
            Err(_) => std::future::pending().await,
        }
    };
    let mut stop = std::pin::pin!(stop);
    let looped = async {
        let result = stream.stream(&mut source, stop.as_mut()).await;
        attempt.finished.store(true, Ordering::SeqCst);
        stream
            .finish(&mut source, result.as_ref().ok().copied())
            .await;
        result
    };
    let (result, ()) = tokio::join!(looped, script(Arc::clone(&attempt)));
    result
}

#[tokio::test]
async fn confirms_only_what_kafka_acknowledged_in_read_order() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            a.wal.transaction(0x100, "one").await;
            a.wal.transaction(0x200, "two").await;
            wait_for("both records sent", || a.kafka.sent() == 2).await;
            // The second transaction's record is acknowledged first.
            a.kafka.ack(1);
            a.settle().await;
            assert_eq!(
                a.applied(),
                Lsn::new(0x10),
                "nothing confirmed past an unacknowledged transaction"
            );
            a.kafka.ack(0);
            a.wait_applied(0x210).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    assert_eq!(run.kafka.contents(), ["one", "two"]);
    assert_eq!((run.summary.transactions, run.summary.events), (2, 2));
    // The catalog could not be read: the summary reports what was acknowledged.
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x210)));
}

#[tokio::test]
async fn a_failed_delivery_ends_the_attempt_and_nothing_after_it_is_confirmed() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            a.wal.transaction(0x100, "one").await;
            a.wal.transaction(0x200, "two").await;
            a.wal.transaction(0x300, "three").await;
            wait_for("three records sent", || a.kafka.sent() == 3).await;
            a.kafka.ack(0);
            a.kafka.fail(1);
            // Delivered, but after the failed one: it must not move the slot.
            a.kafka.ack(2);
            wait_for("the loop to stop", || a.finished.load(Ordering::SeqCst)).await;
        })
        .await;
    assert!(
        matches!(result, Err(PipelineError::Delivery(_))),
        "the attempt fails with the delivery error: {result:?}"
    );
    assert!(
        run.kafka.state().purged,
        "what was in flight is dropped, not sent out of order"
    );
    assert_eq!(run.summary.acked_lsn, Lsn::new(0x110));
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x110)));
}

#[tokio::test]
async fn a_restart_resends_from_the_acknowledged_position() {
    let mut run = Run::new(&[]);
    let first = run
        .attempt(None, |a| async move {
            a.wal.transaction(0x100, "one").await;
            a.wal.transaction(0x200, "two").await;
            wait_for("two records sent", || a.kafka.sent() == 2).await;
            a.kafka.ack(0);
            a.wait_applied(0x110).await;
            a.kafka.fail(1);
        })
        .await;
    assert!(first.is_err(), "the first attempt fails: {first:?}");
    let restart_at = run.summary.acked_lsn.as_u64();
    assert_eq!(restart_at, 0x110);

    // The server replays from the slot: the unacknowledged transaction again.
    let again = FakeKafka::new(Lsn::new(restart_at));
    let second = run_attempt(
        &run.config,
        &mut run.summary,
        restart_at,
        again.clone(),
        None,
        |a| async move {
            a.wal.transaction(0x200, "two").await;
            a.wal.transaction(0x300, "three").await;
            wait_for("two records sent", || a.kafka.sent() == 2).await;
            a.kafka.ack(0);
            a.kafka.ack(1);
            a.wait_applied(0x310).await;
            a.request_stop();
        },
    )
    .await;
    assert_eq!(second.expect("a clean stop"), StopReason::Requested);
    assert_eq!(run.kafka.contents(), ["one", "two"]);
    assert_eq!(
        again.contents(),
        ["two", "three"],
        "nothing lost across the restart"
    );
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x310)));
}

#[tokio::test]
async fn transactions_kafka_already_holds_are_skipped_and_confirmed_past() {
    let mut run = Run::new(&[]);
    // Exactly-once after a crash: the progress record says Kafka holds
    // every transaction whose commit starts before 0x200.
    run.kafka.state().skip_before = Some(Lsn::new(0x200));
    let result = run
        .attempt(None, |a| async move {
            a.wal.transaction(0x100, "in kafka").await;
            a.wal.message(0x150, false, "in kafka too").await;
            a.wal.transaction(0x200, "new").await;
            wait_for("the new record sent", || a.kafka.sent() == 1).await;
            a.kafka.ack(0);
            a.wait_applied(0x210).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    assert_eq!(run.kafka.contents(), ["new"]);
    assert_eq!(
        run.summary.transactions, 1,
        "skipped transactions are not counted as delivered"
    );
}

#[tokio::test]
async fn a_stop_inside_a_transaction_waits_for_its_commit() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            a.wal.begin(0x100, 7).await;
            a.wal.message(0x101, true, "first half").await;
            wait_for("the first record sent", || a.kafka.sent() == 1).await;
            a.request_stop();
            a.settle().await;
            assert!(
                !a.finished.load(Ordering::SeqCst),
                "the loop waits for the Commit"
            );
            a.wal.message(0x102, true, "second half").await;
            a.wal.commit(0x103, 0x110).await;
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    assert_eq!(run.kafka.contents(), ["first half", "second half"]);
    // The drain on stop delivered both, so the whole transaction is confirmed.
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x110)));
    assert_eq!(run.summary.transactions, 1);
}

#[tokio::test]
async fn keepalives_confirm_the_wal_end_only_between_transactions() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            a.wal.keepalive(0x500).await;
            a.wait_applied(0x500).await;
            a.wal.begin(0x600, 8).await;
            a.wal.message(0x601, true, "open").await;
            a.wal.keepalive(0x700).await;
            wait_for("the record sent", || a.kafka.sent() == 1).await;
            a.settle().await;
            assert_eq!(
                a.applied(),
                Lsn::new(0x500),
                "an open transaction holds the position"
            );
            a.wal.commit(0x602, 0x610).await;
            a.settle().await;
            assert_eq!(
                a.applied(),
                Lsn::new(0x500),
                "its record is not acknowledged yet"
            );
            a.kafka.ack(0);
            a.wait_applied(0x610).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
}

#[tokio::test]
async fn a_bounded_run_stops_at_its_target_once_kafka_has_everything() {
    let mut run = Run::new(&["--stop-when-caught-up", "start-lsn"]);
    let result = run
        .attempt(Some(0x200), |a| async move {
            a.wal.transaction(0x100, "before").await;
            a.wal.transaction(0x200, "reaches the target").await;
            wait_for("the loop to stop", || a.finished.load(Ordering::SeqCst)).await;
        })
        .await;
    assert_eq!(result.expect("caught up"), StopReason::CaughtUp);
    assert!(run.summary.caught_up, "drained on stop, so caught up");
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x210)));
}

#[tokio::test]
async fn an_idle_run_stops_only_past_what_was_committed_before_it_began() {
    let mut run = Run::new(&["--stop-when-caught-up", "idle", "--idle-timeout", "50ms"]);
    // The server's WAL ended at 0x300 when the run began: the walsender is
    // still decoding towards it, and sends nothing meanwhile.
    let result = run
        .attempt(Some(0x300), |a| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                !a.finished.load(Ordering::SeqCst),
                "silence before the target is not idleness"
            );
            a.wal.transaction(0x200, "committed before the run").await;
            wait_for("the record sent", || a.kafka.sent() == 1).await;
            a.kafka.ack(0);
            // The walsender reached the WAL end it had when the run began.
            a.wal.keepalive(0x300).await;
            wait_for("the loop to stop", || a.finished.load(Ordering::SeqCst)).await;
        })
        .await;
    assert_eq!(result.expect("caught up"), StopReason::CaughtUp);
    assert_eq!(run.kafka.contents(), ["committed before the run"]);
    assert_eq!(run.summary.confirmed_lsn, Some(Lsn::new(0x300)));
}

#[tokio::test]
async fn the_idle_clock_starts_when_streaming_does() {
    let config = config(&["--stop-when-caught-up", "idle", "--idle-timeout", "200ms"]);
    let metrics = Arc::new(Metrics::new());
    let mut summary = RunSummary::default();
    let kafka = FakeKafka::new(Lsn::new(0x10));
    let mut stream = Stream::new(
        &config,
        client_without_server().await,
        TypeRegistry::new(),
        kafka.delivery(),
        &mut summary,
        Lsn::new(0x10),
        &metrics,
    )
    .await
    .expect("a stream");
    stream.target = Some(Lsn::new(0x10));
    // Start-up takes longer than the idle timeout (exactly-once's progress
    // read from a slow broker, say).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_frames, batches) = mpsc::channel(1);
    let mut source = ReplicationStream::scripted(batches, Lsn::new(0x10));
    let started = Instant::now();
    let stopped = stream
        .stream(&mut source, std::pin::pin!(std::future::pending()).as_mut())
        .await;
    assert_eq!(stopped.expect("idle"), StopReason::CaughtUp);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "idle for the whole timeout after streaming began, not counted from start-up"
    );
}

#[tokio::test]
async fn a_non_transactional_message_reports_debeziums_last_commit_and_time() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            // Begin's commit time is 0: 2000-01-01, Postgres's epoch.
            a.wal.transaction(0x100, "in a transaction").await;
            a.wal.transaction(0x200, "in another").await;
            a.wal.message(0x300, false, "alone").await;
            a.wal.transaction(0x400, "after it").await;
            wait_for("four records sent", || a.kafka.sent() == 4).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    let sources = run.kafka.sources();
    let sequences: Vec<&str> = sources
        .iter()
        .map(|s| s["sequence"].as_str().expect("a sequence"))
        .collect();
    assert_eq!(
        sequences,
        [
            r#"[null,"257"]"#,
            r#"["272","513"]"#,
            r#"["768","768"]"#,
            r#"["768","1025"]"#
        ],
        "the last commit is where the last transaction ended (0x110, not its \
         commit record's start 0x102), or a non-transactional message's own \
         position, itself included"
    );
    assert_eq!(
        sources[2]["ts_ms"], 946_684_800_000_i64,
        "the previous transaction's commit time, not the time it was read"
    );
}
