//! Feeds arbitrary bytes, cut into arbitrary reads, to the replication
//! session's framing: whole messages are cut off the buffer, a partial one
//! waits for more, and every parser (CopyData with XLogData and keepalives,
//! authentication requests, error fields, parameter status, data rows) gets
//! every body. Nothing may panic; an XLogData payload then goes to the
//! pgoutput decoder, as the stream loop does with it.
//!
//! Run with `cargo +nightly fuzz run replication_frame`.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pgcdc_wire::pgoutput::decode;
use pgcdc_wire::frame::{
    parse_auth_request, parse_copy_data, parse_data_row, parse_error_fields,
    parse_parameter_status, split_frame, CopyData,
};

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the read size, so message boundaries fall
    // anywhere within reads.
    let Some((&chunk, wire)) = data.split_first() else {
        return;
    };
    let mut buf = BytesMut::new();
    for piece in wire.chunks(usize::from(chunk).max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match split_frame(&mut buf, 1 << 20) {
                Ok(Some(frame)) => {
                    if let Ok(CopyData::XLogData(x)) = parse_copy_data(&frame.body) {
                        let _ = decode(&x.data, x.wal_start);
                    }
                    let _ = parse_auth_request(&frame.body);
                    let _ = parse_error_fields(&frame.body);
                    let _ = parse_parameter_status(&frame.body);
                    let _ = parse_data_row(&frame.body);
                }
                Ok(None) => break,
                Err(error) => {
                    assert!(!error.to_string().is_empty());
                    return;
                }
            }
        }
    }
});
