//! Feeds arbitrary bytes to the pgoutput decoder: it must never panic, a
//! decoded message must carry the tag it was read from, and every error must
//! render.
//!
//! Run with `cargo +nightly fuzz run pgoutput_decode fuzz/corpus/pgoutput_decode
//! fuzz/seeds/pgoutput_decode`; the seeds are messages captured from
//! PostgreSQL 15.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use pgcdc_wire::lsn::Lsn;
use pgcdc_wire::pgoutput::{decode, decode_streamed, stream_block_entry, BlockEntry};

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    match decode(&data, Lsn::new(0x16B_3748)) {
        Ok(message) => assert_eq!(data.first(), Some(&message.tag())),
        Err(error) => {
            assert!(
                error.offset() <= data.len(),
                "offset past the input: {error}"
            );
            assert!(!error.to_string().is_empty());
        }
    }
    // Inside a stream block: what the entry peek accepts, the decoder reads
    // or rejects without panicking, and a decoded message keeps its tag.
    let entry = stream_block_entry(&data, Lsn::new(0x16B_3748));
    if let Ok(message) = decode_streamed(&data, Lsn::new(0x16B_3748)) {
        assert_eq!(data.first(), Some(&message.tag()));
        assert!(matches!(entry, Ok(BlockEntry::Change { .. })), "{entry:?}");
    }
});
