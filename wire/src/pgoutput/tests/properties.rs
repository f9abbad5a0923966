//! Property tests: any message the encoder can write decodes back to
//! itself, and no input makes the decoder panic.

use super::*;

fn name() -> impl Strategy<Value = String> {
    "[^\\x00]{0,12}"
}

fn namespace_name() -> impl Strategy<Value = String> {
    prop_oneof![Just("pg_catalog".to_owned()), "[a-z_][^\\x00]{0,10}"]
}

fn lsn() -> impl Strategy<Value = Lsn> {
    any::<u64>().prop_map(Lsn::new)
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..24)
}

/// A column as its kind byte (`n`, `u`, `t` or `b`) and value.
fn tuple_strategy() -> impl Strategy<Value = Tuple> {
    let column = prop_oneof![
        Just((b'n', Vec::new())),
        Just((b'u', Vec::new())),
        value().prop_map(|v| (b't', v)),
        value().prop_map(|v| (b'b', v)),
    ];
    proptest::collection::vec(column, 0..8).prop_map(|columns| {
        Tuple::new(columns.iter().map(|(kind, value)| match kind {
            b'n' => Datum::Null,
            b'u' => Datum::UnchangedToast,
            b't' => Datum::Text(value),
            _ => Datum::Binary(value),
        }))
    })
}

fn old_tuple_strategy() -> impl Strategy<Value = OldTuple> {
    prop_oneof![
        tuple_strategy().prop_map(OldTuple::Key),
        tuple_strategy().prop_map(OldTuple::Full),
    ]
}

fn message_strategy() -> impl Strategy<Value = LogicalMessage> {
    let identity = prop_oneof![
        Just(ReplicaIdentity::Default),
        Just(ReplicaIdentity::Nothing),
        Just(ReplicaIdentity::Full),
        Just(ReplicaIdentity::Index),
    ];
    let column = (any::<bool>(), name(), any::<u32>(), any::<i32>()).prop_map(
        |(is_key, name, type_oid, type_modifier)| Column {
            is_key,
            name,
            type_oid,
            type_modifier,
        },
    );
    prop_oneof![
        (lsn(), any::<i64>(), any::<u32>()).prop_map(|(final_lsn, commit_time_micros, xid)| {
            LogicalMessage::Begin(Begin {
                final_lsn,
                commit_time_micros,
                xid,
            })
        }),
        (any::<u8>(), lsn(), lsn(), any::<i64>()).prop_map(
            |(flags, commit_lsn, end_lsn, commit_time_micros)| {
                LogicalMessage::Commit(Commit {
                    flags,
                    commit_lsn,
                    end_lsn,
                    commit_time_micros,
                })
            }
        ),
        (lsn(), name())
            .prop_map(|(commit_lsn, name)| { LogicalMessage::Origin(Origin { commit_lsn, name }) }),
        (
            any::<u32>(),
            namespace_name(),
            name(),
            identity,
            proptest::collection::vec(column, 0..6)
        )
            .prop_map(|(id, namespace, name, replica_identity, columns)| {
                LogicalMessage::Relation(Relation {
                    id,
                    namespace,
                    name,
                    replica_identity,
                    columns,
                })
            }),
        (any::<u32>(), namespace_name(), name()).prop_map(|(oid, namespace, name)| {
            LogicalMessage::Type(TypeInfo {
                oid,
                namespace,
                name,
            })
        }),
        (any::<u32>(), tuple_strategy())
            .prop_map(|(relation_id, new)| { LogicalMessage::Insert(Insert { relation_id, new }) }),
        (
            any::<u32>(),
            proptest::option::of(old_tuple_strategy()),
            tuple_strategy()
        )
            .prop_map(|(relation_id, old, new)| {
                LogicalMessage::Update(Update {
                    relation_id,
                    old,
                    new,
                })
            }),
        (any::<u32>(), old_tuple_strategy())
            .prop_map(|(relation_id, old)| { LogicalMessage::Delete(Delete { relation_id, old }) }),
        (
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(any::<u32>(), 0..6)
        )
            .prop_map(|(cascade, restart_identity, relation_ids)| {
                LogicalMessage::Truncate(Truncate {
                    cascade,
                    restart_identity,
                    relation_ids,
                })
            }),
        (any::<bool>(), lsn(), name(), value()).prop_map(
            |(transactional, lsn, prefix, content)| {
                LogicalMessage::Message(Message {
                    transactional,
                    lsn,
                    prefix,
                    content: content.into(),
                })
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode(&Bytes::from(data), LSN);
    }

    #[test]
    fn arbitrary_bodies_after_a_known_tag_never_panic(
        tag in proptest::sample::select(b"BCORYIUDTM".to_vec()),
        body in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut data = vec![tag];
        data.extend(body);
        let _ = decode(&Bytes::from(data), LSN);
    }

    #[test]
    fn mutated_messages_never_panic(
        message in message_strategy(),
        position in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut data = encode(&message);
        let at = position.index(data.len());
        data[at] = byte;
        let _ = decode(&Bytes::from(data), LSN);
    }
}

proptest! {
    #[test]
    fn round_trips_through_the_encoder(message in message_strategy()) {
        let data = Bytes::from(encode(&message));
        prop_assert_eq!(decode(&data, LSN), Ok(message));
    }

    #[test]
    fn random_messages_are_exactly_framed(message in message_strategy()) {
        assert_exact_framing(&encode(&message));
    }
}
