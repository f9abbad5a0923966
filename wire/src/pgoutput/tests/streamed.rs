//! Protocol version 2's streamed transactions: the block framing messages,
//! captured and hand-built, and the xid-prefixed messages inside a block.

use super::*;

#[test]
fn decodes_captured_stream_start_stop_and_commit() {
    let [start, stop, commit] = CAPTURED_STREAM.map(hex);
    assert_eq!(
        ok(&start),
        LogicalMessage::StreamStart(StreamStart {
            xid: 742,
            first_segment: true,
        })
    );
    assert_eq!(ok(&stop), LogicalMessage::StreamStop);
    let LogicalMessage::StreamCommit(c) = ok(&commit) else {
        panic!("not a stream commit");
    };
    assert_eq!((c.xid, c.flags), (742, 0));
    assert_eq!(c.commit_lsn, Lsn::new(0x1560C08));
    assert_eq!(c.end_lsn, Lsn::new(0x1560C38));
    // The transaction sent whole would have begun and ended with these.
    assert_eq!(
        c.begin(),
        Begin {
            final_lsn: c.commit_lsn,
            commit_time_micros: c.commit_time_micros,
            xid: 742
        }
    );
    assert_eq!(
        (c.commit().commit_lsn, c.commit().end_lsn),
        (c.commit_lsn, c.end_lsn)
    );
    for captured in CAPTURED_STREAM {
        let data = hex(captured);
        assert_eq!(encode(&ok(&data)), data.to_vec(), "{captured} re-encodes");
        assert_exact_framing(&data);
    }
}

#[test]
fn decodes_stream_abort_with_and_without_the_parallel_fields() {
    let sub = LogicalMessage::StreamAbort(StreamAbort {
        xid: 742,
        subxid: 743,
        abort: None,
    });
    let data = Bytes::from(encode(&sub));
    assert_eq!(data.len(), 9);
    assert_eq!(ok(&data), sub);
    let LogicalMessage::StreamAbort(abort) = sub else {
        panic!("built as a stream abort")
    };
    assert!(!abort.is_top_level());
    let parallel = LogicalMessage::StreamAbort(StreamAbort {
        xid: 742,
        subxid: 742,
        abort: Some((Lsn::new(0x1560C08), 42)),
    });
    let data = Bytes::from(encode(&parallel));
    assert_eq!(ok(&data), parallel);
    // Part of the parallel fields is a truncated message, not a short one.
    let e = err(&data[..13]);
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::Truncated {
                what: "abort LSN",
                ..
            }
        ),
        "{e}"
    );
    let e = err(&data[..21]);
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::Truncated {
                what: "abort timestamp",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_bad_first_segment_flag_is_named() {
    let e = err(b"S\0\0\x02\xe6\x02");
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::InvalidValue {
            what: "first segment flag 0 or 1",
            found: 2
        }
    );
    assert_eq!(e.offset(), 5);
}

/// The messages a stream block may hold, each as [`decode`] reads it
/// outside a block.
fn block_messages() -> Vec<LogicalMessage> {
    [
        CAPTURED_TYPE,
        CAPTURED_RELATION,
        CAPTURED_INSERT,
        CAPTURED_UPDATE_KEY,
        CAPTURED_UPDATE_TOAST,
        CAPTURED_DELETE_FULL,
        CAPTURED_TRUNCATE,
        CAPTURED_MESSAGE,
        CAPTURED_ORIGIN,
    ]
    .map(|captured| ok(&hex(captured)))
    .to_vec()
}

#[test]
fn stream_block_messages_decode_as_their_unstreamed_selves() {
    for message in block_messages() {
        let data = Bytes::from(encode_streamed(&message, 0x0102_0304));
        let xid = (message.tag() != b'O').then_some(0x0102_0304);
        assert_eq!(
            stream_block_entry(&data, LSN),
            Ok(BlockEntry::Change { xid }),
            "{message:?}"
        );
        assert_eq!(decode_streamed(&data, LSN), Ok(message.clone()));
        // Every strict prefix fails with an end-of-input error, one more
        // byte with trailing bytes.
        for len in 0..data.len() {
            let e = decode_streamed(&data.slice(..len), LSN).expect_err("a prefix");
            assert!(
                matches!(
                    e.kind(),
                    DecodeErrorKind::Truncated { .. } | DecodeErrorKind::UnterminatedString { .. }
                ),
                "prefix of {len} bytes of {message:?}: {e}"
            );
        }
        let longer = Bytes::from([&data[..], &[0]].concat());
        assert_eq!(
            decode_streamed(&longer, LSN).map_err(|e| e.kind().clone()),
            Err(DecodeErrorKind::TrailingBytes(1))
        );
    }
}

#[test]
fn a_stream_block_holds_only_its_messages() {
    assert_eq!(stream_block_entry(b"E", LSN), Ok(BlockEntry::Stop));
    assert_eq!(
        stream_block_entry(b"E\0", LSN).map_err(|e| e.kind().clone()),
        Err(DecodeErrorKind::TrailingBytes(1))
    );
    for framing in [
        &hex(CAPTURED_BEGIN)[..],
        &hex(CAPTURED_COMMIT),
        &hex(CAPTURED_STREAM[0]),
    ] {
        let e = stream_block_entry(framing, LSN).expect_err("not inside a block");
        assert!(
            e.to_string()
                .contains("expected a message allowed inside a stream block"),
            "{e}"
        );
        let e = decode_streamed(&Bytes::copy_from_slice(framing), LSN).expect_err("nor here");
        assert_eq!(e.offset(), 0);
    }
    let e = stream_block_entry(b"I\0\0", LSN).expect_err("short xid");
    assert!(matches!(e.kind(), DecodeErrorKind::Truncated { .. }), "{e}");
    assert!(stream_block_entry(b"", LSN).is_err());
}

proptest! {
    #[test]
    fn stream_block_entry_never_panics(data in proptest::collection::vec(any::<u8>(), 0..16)) {
        let _ = stream_block_entry(&data, LSN);
        let _ = decode_streamed(&Bytes::from(data), LSN);
    }
}
