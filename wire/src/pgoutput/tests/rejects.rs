//! Malformed messages: each is refused with an error naming the field, the
//! offset and what was wrong, never a panic or a huge allocation.

use super::*;

#[test]
fn bad_tuple_kind_names_the_field_and_offset() {
    let e = err(&concat(&[b"I", &16384u32.to_be_bytes(), b"N\x00\x05nunnz"]));
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::InvalidValue {
            what: "tuple data kind 'n', 'u', 't' or 'b'",
            found: b'z',
        }
    );
    assert_eq!(e.tag(), Some(b'I'));
    assert_eq!(e.offset(), 12);
    assert_eq!(
        e.to_string(),
        "malformed pgoutput message at LSN 0/16B3748 (tag 'I'): expected tuple data kind \
         'n', 'u', 't' or 'b', found 0x7a at offset 12"
    );
    assert!(!e.is_retryable());
}

#[test]
fn rejects_unknown_and_empty_messages() {
    let e = err(b"Z");
    assert_eq!(e.kind(), &DecodeErrorKind::UnknownTag(b'Z'));
    assert_eq!(e.offset(), 0);
    assert_eq!(err(b"\x00").kind(), &DecodeErrorKind::UnknownTag(0));
    assert!(err(b"\x00").to_string().contains("(tag 0x00)"));

    let e = err(b"");
    assert_eq!(e.tag(), None);
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::Truncated {
            needed: 1,
            remaining: 0,
            what: "message tag",
        }
    );
    assert!(e.to_string().contains("(empty message)"), "{e}");
}

#[test]
fn rejects_two_phase_messages() {
    for tag in [b'p', b'b', b'P', b'K', b'r'] {
        assert_eq!(
            err(&[tag]).kind(),
            &DecodeErrorKind::UnsupportedMessage(tag)
        );
    }
    assert_eq!(
        err(b"K").to_string(),
        "unsupported pgoutput message at LSN 0/16B3748 (tag 'K'): received a commit prepared \
         message but two-phase commit decoding is not enabled; start replication with \
         proto_version '1' or '2' and without the 'two_phase' option"
    );
}

#[test]
fn rejects_negative_lengths_and_counts() {
    let rel: &[u8] = &16384u32.to_be_bytes();
    let negative_value = concat(&[b"I", rel, b"N\x00\x01t\xff\xff\xff\xff"]);
    let e = err(&negative_value);
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::NegativeLength {
            what: "column value length",
            found: -1,
        }
    );
    assert_eq!(e.offset(), 9);

    let negative_columns = concat(&[b"I", rel, b"N\x80\x00"]);
    assert_eq!(
        err(&negative_columns).kind(),
        &DecodeErrorKind::NegativeLength {
            what: "tuple column count",
            found: i32::from(i16::MIN),
        }
    );
    let negative_relation_columns = concat(&[b"R", rel, b"\0t\0d\xff\xff"]);
    assert!(matches!(
        err(&negative_relation_columns).kind(),
        DecodeErrorKind::NegativeLength {
            what: "relation column count",
            found: -1
        }
    ));
    assert!(matches!(
        err(b"T\x80\0\0\0\x00").kind(),
        DecodeErrorKind::NegativeLength {
            found: i32::MIN,
            ..
        }
    ));
    let negative_content = concat(&[b"M\x01", &[0; 8], b"p\0\xff\xff\xff\xfe"]);
    assert!(matches!(
        err(&negative_content).kind(),
        DecodeErrorKind::NegativeLength {
            what: "message content length",
            found: -2
        }
    ));
}

#[test]
fn rejects_huge_lengths_without_allocating() {
    let rel: &[u8] = &16384u32.to_be_bytes();
    let e = err(&concat(&[b"I", rel, b"N\x00\x01t\x7f\xff\xff\xff"]));
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::Truncated {
            needed: i32::MAX as usize,
            remaining: 0,
            what: "column value",
        }
    );
    assert!(matches!(
        err(b"T\x7f\xff\xff\xff\x00").kind(),
        DecodeErrorKind::Truncated {
            needed: 4,
            remaining: 0,
            ..
        }
    ));
    assert!(matches!(
        err(&concat(&[b"I", rel, b"N\x7f\xff"])).kind(),
        DecodeErrorKind::Truncated {
            needed: 1,
            remaining: 0,
            ..
        }
    ));
}

#[test]
fn rejects_bad_markers_and_identities() {
    let rel: &[u8] = &16384u32.to_be_bytes();
    assert!(matches!(
        err(&concat(&[b"I", rel, b"K\x00\x00"])).kind(),
        DecodeErrorKind::InvalidValue {
            what: "new tuple marker 'N'",
            found: b'K'
        }
    ));
    assert!(matches!(
        err(&concat(&[b"U", rel, b"X\x00\x00"])).kind(),
        DecodeErrorKind::InvalidValue { found: b'X', .. }
    ));
    // An old tuple must be followed by 'N', not by a second old tuple.
    assert!(matches!(
        err(&concat(&[b"U", rel, b"K\x00\x00K\x00\x00"])).kind(),
        DecodeErrorKind::InvalidValue {
            what: "new tuple marker 'N'",
            found: b'K'
        }
    ));
    let e = err(&concat(&[b"D", rel, b"N\x00\x00"]));
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::InvalidValue {
            what: "old tuple marker 'K' or 'O'",
            found: b'N',
        }
    );
    assert_eq!(e.offset(), 5);
    assert!(matches!(
        err(&concat(&[b"R", rel, b"s\0t\0x\x00\x00"])).kind(),
        DecodeErrorKind::InvalidValue { found: b'x', .. }
    ));
}

#[test]
fn rejects_invalid_utf8_names() {
    let e = err(&concat(&[b"Y", &1u32.to_be_bytes(), b"ok\0\xff\xfe\0"]));
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::InvalidUtf8 { what: "type name" }
    );
    assert_eq!(e.offset(), 8);
}

#[test]
fn rejects_trailing_bytes() {
    let mut data = hex(CAPTURED_BEGIN).to_vec();
    data.extend_from_slice(b"xyz");
    let e = err(&data);
    assert_eq!(e.kind(), &DecodeErrorKind::TrailingBytes(3));
    assert_eq!(e.offset(), 21);
    assert!(e.to_string().contains("3 unexpected bytes"), "{e}");
}

#[test]
fn converts_commit_times_to_unix_micros() {
    assert_eq!(pg_epoch_micros_to_unix_micros(0), 946_684_800_000_000);
    // 2024-01-01T00:00:00Z is 1_704_067_200 s after the Unix epoch.
    let begin = Begin {
        final_lsn: Lsn::ZERO,
        commit_time_micros: (1_704_067_200 - 946_684_800) * 1_000_000 + 1,
        xid: 1,
    };
    assert_eq!(begin.commit_time_unix_micros(), 1_704_067_200_000_001);
    let commit = Commit {
        flags: 0,
        commit_lsn: Lsn::ZERO,
        end_lsn: Lsn::ZERO,
        commit_time_micros: i64::MAX,
    };
    assert_eq!(commit.commit_time_unix_micros(), i64::MAX);
    assert_eq!(
        pg_epoch_micros_to_unix_micros(i64::MIN),
        i64::MIN + PG_EPOCH_UNIX_MICROS
    );
}
