//! Streamed transactions through the read loop: the records of a streamed
//! transaction (interleaved with a whole one, with a rolled-back
//! subtransaction) are those of the same transactions sent whole, and the
//! protocol surprises stop the attempt with the right kind of error.

use super::*;

/// A transactional `pg_logical_emit_message` at `lsn`, made by `xid` inside
/// a stream block when `xid` is given.
fn message(xid: Option<u32>, lsn: u64, content: &str) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(b'M');
    if let Some(xid) = xid {
        b.put_u32(xid);
    }
    b.put_u8(1);
    b.put_u64(lsn);
    b.put_slice(b"test\0");
    b.put_u32(u32::try_from(content.len()).expect("short"));
    b.put_slice(content.as_bytes());
    b
}

fn stream_start(xid: u32, first: bool) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(b'S');
    b.put_u32(xid);
    b.put_u8(u8::from(first));
    b
}

fn stream_stop() -> BytesMut {
    BytesMut::from(&b"E"[..])
}

fn stream_abort(xid: u32, subxid: u32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(b'A');
    b.put_u32(xid);
    b.put_u32(subxid);
    b
}

fn stream_commit(xid: u32, commit_lsn: u64, end_lsn: u64) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(b'c');
    b.put_u32(xid);
    b.put_u8(0);
    b.put_u64(commit_lsn);
    b.put_u64(end_lsn);
    b.put_i64(0);
    b
}

/// Kafka acknowledges every record not settled yet.
fn ack_all(kafka: &FakeKafka) {
    let outstanding: Vec<usize> = (kafka.state().sent.iter().enumerate())
        .filter(|(_, (_, settled))| !settled)
        .map(|(n, _)| n)
        .collect();
    for n in outstanding {
        kafka.ack(n);
    }
}

/// The records' values without the envelope's processing time.
fn comparable(kafka: &FakeKafka) -> Vec<serde_json::Value> {
    kafka
        .values()
        .into_iter()
        .map(|mut value| {
            let payload = value["payload"].as_object_mut().expect("a payload");
            for field in ["ts_ms", "ts_us", "ts_ns"] {
                payload.remove(field);
            }
            value
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_transaction_sends_what_it_would_have_sent_whole() {
    // Transaction 8 (one message) commits at 0x200 while 9 runs; 9 has a
    // subtransaction 10 that is rolled back, and commits at 0x300.
    let mut whole = Run::new(&["--stream-in-progress", "false"]);
    let result = whole
        .attempt(None, |a| async move {
            a.wal.begin(0x200, 8).await;
            a.wal.xlog(0x150, message(None, 0x150, "small")).await;
            a.wal.commit(0x200, 0x210).await;
            a.wal.begin(0x300, 9).await;
            for (lsn, content) in [(0x101, "a1"), (0x103, "a2"), (0x180, "a3")] {
                a.wal.xlog(lsn, message(None, lsn, content)).await;
            }
            a.wal.commit(0x300, 0x310).await;
            wait_for("four records", || a.kafka.sent() == 4).await;
            ack_all(&a.kafka);
            a.wait_applied(0x310).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);

    let dir = std::env::temp_dir().join(format!("pgcdc-stream-test-{}", std::process::id()));
    let dir_flag = dir.display().to_string();
    let mut streamed = Run::new(&["--spool-dir", &dir_flag, "--spool-memory-bytes", "40"]);
    let result = streamed
        .attempt(None, |a| async move {
            a.wal.xlog(0x101, stream_start(9, true)).await;
            a.wal.xlog(0x101, message(Some(9), 0x101, "a1")).await;
            a.wal
                .xlog(0x102, message(Some(10), 0x102, "rolled back"))
                .await;
            a.wal.xlog(0x102, stream_stop()).await;
            // The whole transaction in between goes first, and may be
            // confirmed past 9's start.
            a.wal.begin(0x200, 8).await;
            a.wal.xlog(0x150, message(None, 0x150, "small")).await;
            a.wal.commit(0x200, 0x210).await;
            wait_for("the small one", || a.kafka.sent() == 1).await;
            ack_all(&a.kafka);
            a.wait_applied(0x210).await;
            a.wal.xlog(0x103, stream_start(9, false)).await;
            a.wal.xlog(0x103, message(Some(9), 0x103, "a2")).await;
            a.wal.xlog(0x103, stream_stop()).await;
            a.wal.xlog(0x104, stream_abort(9, 10)).await;
            a.wal.xlog(0x180, stream_start(9, false)).await;
            a.wal.xlog(0x180, message(Some(9), 0x180, "a3")).await;
            a.wal.xlog(0x180, stream_stop()).await;
            a.settle().await;
            assert_eq!(a.kafka.sent(), 1, "nothing of 9 before its commit");
            a.wal.xlog(0x310, stream_commit(9, 0x300, 0x310)).await;
            wait_for("four records", || a.kafka.sent() == 4).await;
            ack_all(&a.kafka);
            a.wait_applied(0x310).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    assert_eq!(streamed.kafka.contents(), ["small", "a1", "a2", "a3"]);
    assert_eq!(comparable(&streamed.kafka), comparable(&whole.kafka));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_aborted_streamed_transaction_sends_nothing() {
    let mut run = Run::new(&[]);
    let result = run
        .attempt(None, |a| async move {
            a.wal.xlog(0x101, stream_start(9, true)).await;
            a.wal.xlog(0x101, message(Some(9), 0x101, "gone")).await;
            a.wal.xlog(0x101, stream_stop()).await;
            a.wal.xlog(0x102, stream_abort(9, 9)).await;
            a.wal.transaction(0x200, "kept").await;
            wait_for("the record", || a.kafka.sent() == 1).await;
            ack_all(&a.kafka);
            a.wait_applied(0x210).await;
            a.request_stop();
        })
        .await;
    assert_eq!(result.expect("a clean stop"), StopReason::Requested);
    assert_eq!(run.kafka.contents(), ["kept"]);
}

#[tokio::test]
async fn stream_messages_out_of_place_stop_the_attempt() {
    // Streaming not asked for: definite.
    let mut run = Run::new(&["--stream-in-progress", "false"]);
    let error = run
        .attempt(None, |a| async move {
            a.wal.xlog(0x101, stream_start(9, true)).await;
        })
        .await
        .expect_err("not requested");
    assert!(!error.is_retryable(), "{error}");
    assert!(
        error.to_string().contains("--stream-in-progress"),
        "{error}"
    );
    // A later block of a transaction whose start this connection missed:
    // a reconnect makes the server send it from its start.
    let mut run = Run::new(&[]);
    let error = run
        .attempt(None, |a| async move {
            a.wal.xlog(0x101, stream_start(9, false)).await;
        })
        .await
        .expect_err("unknown transaction");
    assert!(error.is_retryable(), "{error}");
    assert!(error.to_string().contains("transaction 9"), "{error}");
    // A stop outside a block.
    let mut run = Run::new(&[]);
    let error = run
        .attempt(None, |a| async move {
            a.wal.xlog(0x101, stream_stop()).await;
        })
        .await
        .expect_err("out of place");
    assert!(!error.is_retryable(), "{error}");
}
