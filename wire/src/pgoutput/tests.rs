//! Unit and property tests of the pgoutput decoder: captured server
//! bytes, hand-built messages of every kind, and exact framing of random ones.

use bytes::BufMut;
use proptest::prelude::*;

use super::*;

const LSN: Lsn = Lsn::new(0x16B_3748);

fn concat(parts: &[&[u8]]) -> Bytes {
    Bytes::from(parts.concat())
}

fn hex(text: &str) -> Bytes {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
        .collect::<Vec<u8>>()
        .into()
}

fn ok(data: &Bytes) -> LogicalMessage {
    decode(data, LSN).unwrap_or_else(|e| panic!("decoding {data:?}: {e}"))
}

fn err(data: &[u8]) -> DecodeError {
    match decode(&Bytes::copy_from_slice(data), LSN) {
        Ok(message) => panic!("decoded {data:?} as {message:?}"),
        Err(e) => e,
    }
}

fn text(value: &'static [u8]) -> Datum<'static> {
    Datum::Text(value)
}

/// Encodes a message the way pgoutput (protocol version 1) does.
fn encode(message: &LogicalMessage) -> Vec<u8> {
    fn cstring(out: &mut Vec<u8>, s: &str) {
        out.put_slice(s.as_bytes());
        out.put_u8(0);
    }
    fn namespace(out: &mut Vec<u8>, s: &str) {
        cstring(out, if s == "pg_catalog" { "" } else { s });
    }
    fn tuple(out: &mut Vec<u8>, tuple: &Tuple) {
        out.put_i16(tuple.len().try_into().expect("column count fits i16"));
        for datum in tuple.iter() {
            let (kind, value) = match datum {
                Datum::Null => (b'n', None),
                Datum::UnchangedToast => (b'u', None),
                Datum::Text(value) => (b't', Some(value)),
                Datum::Binary(value) => (b'b', Some(value)),
            };
            out.put_u8(kind);
            if let Some(value) = value {
                out.put_i32(value.len().try_into().expect("value length fits i32"));
                out.put_slice(value);
            }
        }
    }
    fn old_tuple(out: &mut Vec<u8>, old: &OldTuple) {
        match old {
            OldTuple::Key(_) => out.put_u8(b'K'),
            OldTuple::Full(_) => out.put_u8(b'O'),
        }
        tuple(out, old.tuple());
    }

    let mut out = vec![message.tag()];
    match message {
        LogicalMessage::Begin(b) => {
            out.put_u64(b.final_lsn.as_u64());
            out.put_i64(b.commit_time_micros);
            out.put_u32(b.xid);
        }
        LogicalMessage::Commit(c) => {
            out.put_u8(c.flags);
            out.put_u64(c.commit_lsn.as_u64());
            out.put_u64(c.end_lsn.as_u64());
            out.put_i64(c.commit_time_micros);
        }
        LogicalMessage::Origin(o) => {
            out.put_u64(o.commit_lsn.as_u64());
            cstring(&mut out, &o.name);
        }
        LogicalMessage::Relation(r) => {
            out.put_u32(r.id);
            namespace(&mut out, &r.namespace);
            cstring(&mut out, &r.name);
            out.put_u8(r.replica_identity.as_byte());
            out.put_i16(r.columns.len().try_into().expect("column count fits i16"));
            for c in &r.columns {
                out.put_u8(u8::from(c.is_key));
                cstring(&mut out, &c.name);
                out.put_u32(c.type_oid);
                out.put_i32(c.type_modifier);
            }
        }
        LogicalMessage::Type(t) => {
            out.put_u32(t.oid);
            namespace(&mut out, &t.namespace);
            cstring(&mut out, &t.name);
        }
        LogicalMessage::Insert(i) => {
            out.put_u32(i.relation_id);
            out.put_u8(b'N');
            tuple(&mut out, &i.new);
        }
        LogicalMessage::Update(u) => {
            out.put_u32(u.relation_id);
            if let Some(old) = &u.old {
                old_tuple(&mut out, old);
            }
            out.put_u8(b'N');
            tuple(&mut out, &u.new);
        }
        LogicalMessage::Delete(d) => {
            out.put_u32(d.relation_id);
            old_tuple(&mut out, &d.old);
        }
        LogicalMessage::Truncate(t) => {
            out.put_i32(t.relation_ids.len().try_into().expect("count fits i32"));
            out.put_u8(u8::from(t.cascade) | (u8::from(t.restart_identity) << 1));
            for id in &t.relation_ids {
                out.put_u32(*id);
            }
        }
        LogicalMessage::Message(m) => {
            out.put_u8(u8::from(m.transactional));
            out.put_u64(m.lsn.as_u64());
            cstring(&mut out, &m.prefix);
            out.put_i32(m.content.len().try_into().expect("length fits i32"));
            out.put_slice(&m.content);
        }
        LogicalMessage::StreamStart(st) => {
            out.put_u32(st.xid);
            out.put_u8(u8::from(st.first_segment));
        }
        LogicalMessage::StreamStop => {}
        LogicalMessage::StreamCommit(c) => {
            out.put_u32(c.xid);
            out.put_u8(c.flags);
            out.put_u64(c.commit_lsn.as_u64());
            out.put_u64(c.end_lsn.as_u64());
            out.put_i64(c.commit_time_micros);
        }
        LogicalMessage::StreamAbort(a) => {
            out.put_u32(a.xid);
            out.put_u32(a.subxid);
            if let Some((lsn, time)) = a.abort {
                out.put_u64(lsn.as_u64());
                out.put_i64(time);
            }
        }
    }
    out
}

/// `message` as pgoutput sends it inside a stream block: `xid` after the
/// tag for the messages that carry one.
fn encode_streamed(message: &LogicalMessage, xid: u32) -> Vec<u8> {
    let mut out = encode(message);
    if message.tag() != b'O' {
        out.splice(1..1, xid.to_be_bytes());
    }
    out
}

/// Every strict prefix of a valid message must fail with an
/// end-of-input error, and one extra byte with `TrailingBytes`.
fn assert_exact_framing(data: &[u8]) {
    for len in 0..data.len() {
        let e = err(&data[..len]);
        assert!(
            matches!(
                e.kind(),
                DecodeErrorKind::Truncated { .. } | DecodeErrorKind::UnterminatedString { .. }
            ),
            "prefix of {len} bytes of {data:?}: {e}"
        );
        assert_eq!(e.lsn(), LSN);
    }
    let mut longer = data.to_vec();
    longer.push(0);
    let e = err(&longer);
    assert_eq!(e.kind(), &DecodeErrorKind::TrailingBytes(1), "{e}");
    assert_eq!(e.offset(), data.len());
}

// Captured from PostgreSQL 15 with pg_logical_slot_peek_binary_changes
// (pgoutput, proto_version '1'; the binary ones with binary 'true').
const CAPTURED_BEGIN: &str = "42000000000152e798000304b9aa9ebea9000002d9";
const CAPTURED_COMMIT: &str = "4300000000000152e798000000000152e7c8000304b9aa9ebea9";
const CAPTURED_TYPE: &str = "59000040017075626c6963006d6f6f6400";
const CAPTURED_RELATION: &str = "52000040057075626c69630074006400040169640000000017ffffffff\
    006e616d650000000019ffffffff006269670000000019ffffffff006d0000004001ffffffff";
const CAPTURED_RELATION_FULL: &str =
    "520000400c7075626c69630066006600020169640000000017ffffffff017600000006a4000a0006";
const CAPTURED_INSERT: &str = "49000040054e00047400000001316e74000000017874000000056861707079";
const CAPTURED_INSERT_BINARY: &str =
    "49000040054e00046200000004000000016e62000000017862000000056861707079";
const CAPTURED_UPDATE: &str =
    "55000040054e000474000000013174000000026e3174000000017874000000056861707079";
const CAPTURED_UPDATE_KEY: &str = "55000040054b00047400000001316e6e6e4e000474000000013274000000\
    026e3174000000017874000000056861707079";
const CAPTURED_UPDATE_TOAST: &str = "55000040054e00047400000001337400000006746f61737432756e";
const CAPTURED_UPDATE_FULL: &str = "550000400c4f00027400000001317400000004312e35304e0002740000\
    0001317400000004322e3235";
const CAPTURED_DELETE_KEY: &str = "44000040054b00047400000001326e6e6e";
const CAPTURED_DELETE_FULL: &str = "440000400c4f00027400000001317400000004322e3235";
const CAPTURED_TRUNCATE: &str = "5400000002030000400c00004005";
const CAPTURED_MESSAGE: &str = "4d010000000001531800706678000000000568656c6c6f";
const CAPTURED_MESSAGE_NONTX: &str = "4d0000000000015318706e6f6e7478000000000200ff";
const CAPTURED_ORIGIN: &str = "4f0000000000abcdef6f72696700";
// proto_version '2', streaming 'on': stream start, stream stop, stream commit.
const CAPTURED_STREAM: [&str; 3] = [
    "53000002e601",
    "45",
    "63000002e6000000000001560c080000000001560c38000304b9abdda857",
];

const ALL_CAPTURED: [&str; 17] = [
    CAPTURED_BEGIN,
    CAPTURED_COMMIT,
    CAPTURED_TYPE,
    CAPTURED_RELATION,
    CAPTURED_RELATION_FULL,
    CAPTURED_INSERT,
    CAPTURED_INSERT_BINARY,
    CAPTURED_UPDATE,
    CAPTURED_UPDATE_KEY,
    CAPTURED_UPDATE_TOAST,
    CAPTURED_UPDATE_FULL,
    CAPTURED_DELETE_KEY,
    CAPTURED_DELETE_FULL,
    CAPTURED_TRUNCATE,
    CAPTURED_MESSAGE,
    CAPTURED_MESSAGE_NONTX,
    CAPTURED_ORIGIN,
];

#[test]
fn decodes_captured_begin_and_commit() {
    assert_eq!(
        ok(&hex(CAPTURED_BEGIN)),
        LogicalMessage::Begin(Begin {
            final_lsn: Lsn::new(0x152_E798),
            commit_time_micros: 849_620_408_123_049,
            xid: 729,
        })
    );
    assert_eq!(
        ok(&hex(CAPTURED_COMMIT)),
        LogicalMessage::Commit(Commit {
            flags: 0,
            commit_lsn: Lsn::new(0x152_E798),
            end_lsn: Lsn::new(0x152_E7C8),
            commit_time_micros: 849_620_408_123_049,
        })
    );
}

#[test]
fn decodes_captured_relation_and_type() {
    let column = |is_key, name: &str, type_oid, type_modifier| Column {
        is_key,
        name: name.to_owned(),
        type_oid,
        type_modifier,
    };
    assert_eq!(
        ok(&hex(CAPTURED_RELATION)),
        LogicalMessage::Relation(Relation {
            id: 16389,
            namespace: "public".to_owned(),
            name: "t".to_owned(),
            replica_identity: ReplicaIdentity::Default,
            columns: vec![
                column(true, "id", 23, -1),
                column(false, "name", 25, -1),
                column(false, "big", 25, -1),
                column(false, "m", 16385, -1),
            ],
        })
    );
    let LogicalMessage::Relation(full) = ok(&hex(CAPTURED_RELATION_FULL)) else {
        panic!("not a relation");
    };
    assert_eq!(full.replica_identity, ReplicaIdentity::Full);
    // numeric(10,2): ((10 << 16) | 2) + VARHDRSZ.
    assert_eq!(full.columns[1], column(true, "v", 1700, (10 << 16 | 2) + 4));
    assert_eq!(
        ok(&hex(CAPTURED_TYPE)),
        LogicalMessage::Type(TypeInfo {
            oid: 16385,
            namespace: "public".to_owned(),
            name: "mood".to_owned(),
        })
    );
}

#[test]
fn decodes_captured_row_changes() {
    assert_eq!(
        ok(&hex(CAPTURED_INSERT)),
        LogicalMessage::Insert(Insert {
            relation_id: 16389,
            new: Tuple::new([text(b"1"), Datum::Null, text(b"x"), text(b"happy")]),
        })
    );
    let LogicalMessage::Insert(binary) = ok(&hex(CAPTURED_INSERT_BINARY)) else {
        panic!("not an insert");
    };
    assert_eq!(binary.new.to_vec()[0], Datum::Binary(&[0, 0, 0, 1]));
    assert_eq!(binary.new.to_vec()[1], Datum::Null);

    let new_row = Tuple::new([text(b"2"), text(b"n1"), text(b"x"), text(b"happy")]);
    assert_eq!(
        ok(&hex(CAPTURED_UPDATE_KEY)),
        LogicalMessage::Update(Update {
            relation_id: 16389,
            old: Some(OldTuple::Key(Tuple::new([
                text(b"1"),
                Datum::Null,
                Datum::Null,
                Datum::Null,
            ]))),
            new: new_row,
        })
    );
    let LogicalMessage::Update(plain) = ok(&hex(CAPTURED_UPDATE)) else {
        panic!("not an update");
    };
    assert_eq!(plain.old, None);
    assert_eq!(
        ok(&hex(CAPTURED_UPDATE_TOAST)),
        LogicalMessage::Update(Update {
            relation_id: 16389,
            old: None,
            new: Tuple::new([
                text(b"3"),
                text(b"toast2"),
                Datum::UnchangedToast,
                Datum::Null,
            ]),
        })
    );
    let LogicalMessage::Update(full) = ok(&hex(CAPTURED_UPDATE_FULL)) else {
        panic!("not an update");
    };
    assert_eq!(
        full.old,
        Some(OldTuple::Full(Tuple::new([text(b"1"), text(b"1.50")])))
    );
    assert_eq!(full.new, Tuple::new([text(b"1"), text(b"2.25")]));

    assert_eq!(
        ok(&hex(CAPTURED_DELETE_KEY)),
        LogicalMessage::Delete(Delete {
            relation_id: 16389,
            old: OldTuple::Key(Tuple::new([
                text(b"2"),
                Datum::Null,
                Datum::Null,
                Datum::Null,
            ])),
        })
    );
    let LogicalMessage::Delete(full) = ok(&hex(CAPTURED_DELETE_FULL)) else {
        panic!("not a delete");
    };
    assert!(matches!(full.old, OldTuple::Full(_)));
}

#[test]
fn decodes_captured_truncate_message_and_origin() {
    assert_eq!(
        ok(&hex(CAPTURED_TRUNCATE)),
        LogicalMessage::Truncate(Truncate {
            cascade: true,
            restart_identity: true,
            relation_ids: vec![16396, 16389],
        })
    );
    assert_eq!(
        ok(&hex(CAPTURED_MESSAGE)),
        LogicalMessage::Message(Message {
            transactional: true,
            lsn: Lsn::new(0x153_1800),
            prefix: "pfx".to_owned(),
            content: Bytes::from_static(b"hello"),
        })
    );
    let LogicalMessage::Message(nontx) = ok(&hex(CAPTURED_MESSAGE_NONTX)) else {
        panic!("not a message");
    };
    assert!(!nontx.transactional);
    assert_eq!(nontx.content, Bytes::from_static(&[0x00, 0xff]));
    assert_eq!(
        ok(&hex(CAPTURED_ORIGIN)),
        LogicalMessage::Origin(Origin {
            commit_lsn: Lsn::new(0xAB_CDEF),
            name: "orig".to_owned(),
        })
    );
}

#[test]
fn captured_messages_reencode_to_the_same_bytes() {
    for captured in ALL_CAPTURED {
        let data = hex(captured);
        assert_eq!(Bytes::from(encode(&ok(&data))), data, "{captured}");
    }
}

#[test]
fn captured_messages_are_exactly_framed() {
    for captured in ALL_CAPTURED {
        assert_exact_framing(&hex(captured));
    }
}

#[test]
fn values_are_slices_of_the_input() {
    let data = hex(CAPTURED_INSERT);
    let LogicalMessage::Insert(insert) = ok(&data) else {
        panic!("not an insert");
    };
    let Datum::Text(value) = &insert.new.to_vec()[3] else {
        panic!("not text");
    };
    let range = data.as_ptr_range();
    assert!(range.contains(&value.as_ptr()), "value was copied");
}

#[test]
fn decodes_hand_built_messages_of_every_kind() {
    let rel: &[u8] = &16384u32.to_be_bytes();
    let cases: Vec<(Bytes, LogicalMessage)> = vec![
        (
            concat(&[
                b"B",
                &7u64.to_be_bytes(),
                &(-1i64).to_be_bytes(),
                &u32::MAX.to_be_bytes(),
            ]),
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn::new(7),
                commit_time_micros: -1,
                xid: u32::MAX,
            }),
        ),
        (
            concat(&[
                b"C\x00",
                &1u64.to_be_bytes(),
                &2u64.to_be_bytes(),
                &3i64.to_be_bytes(),
            ]),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn::new(1),
                end_lsn: Lsn::new(2),
                commit_time_micros: 3,
            }),
        ),
        (
            concat(&[b"O", &9u64.to_be_bytes(), b"\0"]),
            LogicalMessage::Origin(Origin {
                commit_lsn: Lsn::new(9),
                name: String::new(),
            }),
        ),
        (
            concat(&[b"R", rel, b"\0pg_class\0n\x00\x00"]),
            LogicalMessage::Relation(Relation {
                id: 16384,
                namespace: "pg_catalog".to_owned(),
                name: "pg_class".to_owned(),
                replica_identity: ReplicaIdentity::Nothing,
                columns: vec![],
            }),
        ),
        (
            concat(&[
                b"R",
                rel,
                b"s\0t\0i\x00\x02",
                b"\x03k\0",
                &23u32.to_be_bytes(),
                &(-1i32).to_be_bytes(),
                b"\x00v\0",
                &1043u32.to_be_bytes(),
                &14i32.to_be_bytes(),
            ]),
            LogicalMessage::Relation(Relation {
                id: 16384,
                namespace: "s".to_owned(),
                name: "t".to_owned(),
                replica_identity: ReplicaIdentity::Index,
                columns: vec![
                    Column {
                        is_key: true,
                        name: "k".to_owned(),
                        type_oid: 23,
                        type_modifier: -1,
                    },
                    Column {
                        is_key: false,
                        name: "v".to_owned(),
                        type_oid: 1043,
                        type_modifier: 14,
                    },
                ],
            }),
        ),
        (
            concat(&[b"Y", &600u32.to_be_bytes(), b"\0point\0"]),
            LogicalMessage::Type(TypeInfo {
                oid: 600,
                namespace: "pg_catalog".to_owned(),
                name: "point".to_owned(),
            }),
        ),
        (
            concat(&[
                b"I",
                rel,
                b"N\x00\x04n",
                b"u",
                b"t\0\0\0\0",
                b"b\0\0\0\x02\xde\xad",
            ]),
            LogicalMessage::Insert(Insert {
                relation_id: 16384,
                new: Tuple::new([
                    Datum::Null,
                    Datum::UnchangedToast,
                    Datum::Text(b""),
                    Datum::Binary(&[0xde, 0xad]),
                ]),
            }),
        ),
        (
            concat(&[b"U", rel, b"N\x00\x00"]),
            LogicalMessage::Update(Update {
                relation_id: 16384,
                old: None,
                new: Tuple::new([]),
            }),
        ),
        (
            concat(&[b"U", rel, b"O\x00\x01n", b"N\x00\x01t\0\0\0\x01a"]),
            LogicalMessage::Update(Update {
                relation_id: 16384,
                old: Some(OldTuple::Full(Tuple::new([Datum::Null]))),
                new: Tuple::new([text(b"a")]),
            }),
        ),
        (
            concat(&[b"U", rel, b"K\x00\x01t\0\0\0\x01k", b"N\x00\x01u"]),
            LogicalMessage::Update(Update {
                relation_id: 16384,
                old: Some(OldTuple::Key(Tuple::new([text(b"k")]))),
                new: Tuple::new([Datum::UnchangedToast]),
            }),
        ),
        (
            concat(&[b"D", rel, b"K\x00\x01b\0\0\0\x01\x07"]),
            LogicalMessage::Delete(Delete {
                relation_id: 16384,
                old: OldTuple::Key(Tuple::new([Datum::Binary(&[7])])),
            }),
        ),
        (
            concat(&[b"T\0\0\0\0\x00"]),
            LogicalMessage::Truncate(Truncate {
                cascade: false,
                restart_identity: false,
                relation_ids: vec![],
            }),
        ),
        (
            concat(&[b"T\0\0\0\x01\x02", rel]),
            LogicalMessage::Truncate(Truncate {
                cascade: false,
                restart_identity: true,
                relation_ids: vec![16384],
            }),
        ),
        (
            concat(&[b"M\x00", &5u64.to_be_bytes(), b"\0\0\0\0\0"]),
            LogicalMessage::Message(Message {
                transactional: false,
                lsn: Lsn::new(5),
                prefix: String::new(),
                content: Bytes::new(),
            }),
        ),
    ];
    for (data, expected) in cases {
        assert_eq!(ok(&data), expected, "{data:?}");
        assert_exact_framing(&data);
    }
}

#[test]
fn unchanged_toast_is_filled_from_an_old_row_that_has_the_value() {
    let mut new = Tuple::new([
        text(b"1"),
        Datum::UnchangedToast,
        Datum::UnchangedToast,
        Datum::UnchangedToast,
    ]);
    // A FULL old row has the second value; a key-only one sends the third
    // as NULL; the fourth is unchanged in both (never sent by Postgres, but
    // it must not count as a value).
    let old = Tuple::new([
        text(b"1"),
        text(b"long"),
        Datum::Null,
        Datum::UnchangedToast,
    ]);
    assert_eq!(new.fill_unchanged_from(&old), 1);
    assert_eq!(
        new,
        Tuple::new([
            text(b"1"),
            text(b"long"),
            Datum::UnchangedToast,
            Datum::UnchangedToast,
        ])
    );
    let mut shorter = Tuple::new([Datum::UnchangedToast, Datum::UnchangedToast]);
    assert_eq!(shorter.fill_unchanged_from(&Tuple::new([text(b"x")])), 1);
    assert_eq!(shorter.to_vec()[1], Datum::UnchangedToast);
}

mod properties;
mod rejects;
mod streamed;
