//! The framing of `COPY ... TO STDOUT (FORMAT binary)`: a header (the
//! signature, flags and an extension area), then one tuple per row (a field
//! count, then each field's length and bytes, length -1 for NULL), then a
//! trailer (a field count of -1). Each value is in its type's binary send
//! format, the same bytes pgoutput sends with `binary 'true'`, so the
//! stream's binary decoders read them.
//!
//! The snapshot reads page ranges this way when the run reads values in
//! binary ([`crate::source::binary_mode`]): the server's send functions cost
//! it less than its output functions, and the decoders less than parsing
//! text (BENCHMARKS.md, "The snapshot's rows in binary").

use std::ops::Range;

use bytes::Bytes;

use crate::source::pgoutput::{Form, Tuple};

/// What every binary COPY stream starts with.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// The flags word's bit for rows that carry OIDs (never, for a query).
const HAS_OIDS: u32 = 1 << 16;
/// The flags bits a reader must understand (16-31): none but
/// [`HAS_OIDS`] is defined.
const CRITICAL: u32 = 0xffff_0000;

/// One whole piece of a binary COPY stream, by its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Header(usize),
    Row(usize),
    Trailer(usize),
}

impl Unit {
    pub fn size(self) -> usize {
        match self {
            Unit::Header(len) | Unit::Row(len) | Unit::Trailer(len) => len,
        }
    }
}

/// The unit at the start of `bytes` if all of it has arrived, `None` if
/// more is needed; `header_read`: the header came before.
pub fn next_unit(bytes: &[u8], header_read: bool) -> Result<Option<Unit>, &'static str> {
    if !header_read {
        let seen = bytes.len().min(SIGNATURE.len());
        if bytes[..seen] != SIGNATURE[..seen] {
            return Err("the binary COPY output does not start with its signature");
        }
        let (Some(flags), Some(extension)) = (be_u32(bytes, 11), be_u32(bytes, 15)) else {
            return Ok(None);
        };
        if flags & CRITICAL != 0 {
            return Err(if flags & HAS_OIDS != 0 {
                "the binary COPY rows carry OIDs"
            } else {
                "the binary COPY header has flags this reader does not know"
            });
        }
        let len = 19 + extension as usize;
        return Ok((bytes.len() >= len).then_some(Unit::Header(len)));
    }
    let Some(count) = be_i16(bytes, 0) else {
        return Ok(None);
    };
    if count == -1 {
        return Ok(Some(Unit::Trailer(2)));
    }
    if count < 0 {
        return Err("a binary COPY row with a negative field count");
    }
    let mut at = 2;
    for _ in 0..count {
        let Some(len) = be_i32(bytes, at) else {
            return Ok(None);
        };
        at += 4;
        match len {
            -1 => {}
            len if len < 0 => return Err("a binary COPY field with a negative length"),
            len => at += len as usize,
        }
    }
    Ok((bytes.len() >= at).then_some(Unit::Row(at)))
}

/// A row (a [`Unit::Row`] as [`next_unit`] found it) as a tuple of binary
/// values that are slices of it; `width`: how many fields to make room for.
pub fn parse_row(row: Bytes, width: usize) -> Result<Tuple, &'static str> {
    let count = be_i16(&row, 0).unwrap_or(0).max(0);
    let mut at = 2;
    let fields = (0..count).map(|_| {
        // Outside the row (never, for a unit `next_unit` framed): refused
        // by `of_ranges`.
        let len = be_i32(&row, at).unwrap_or(i32::MIN);
        at += 4;
        match len {
            -1 => None,
            len if len < 0 => Some(usize::MAX..usize::MAX),
            len => {
                let field: Range<usize> = at..at + len as usize;
                at = field.end;
                Some(field)
            }
        }
    });
    Tuple::of_ranges(row.clone(), width, Form::Binary, fields).ok_or("a field outside its row")
}

fn be_i16(bytes: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
/// A binary COPY header with `extension`.
pub(crate) fn test_header(extension: &[u8]) -> Vec<u8> {
    let mut out = SIGNATURE.to_vec();
    out.extend(0u32.to_be_bytes());
    out.extend((extension.len() as u32).to_be_bytes());
    out.extend(extension);
    out
}

#[cfg(test)]
/// A binary COPY row of `fields`, `None` for NULL.
pub(crate) fn test_row(fields: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = (fields.len() as i16).to_be_bytes().to_vec();
    for field in fields {
        match field {
            None => out.extend((-1i32).to_be_bytes()),
            Some(bytes) => {
                out.extend((bytes.len() as i32).to_be_bytes());
                out.extend(*bytes);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pgoutput::Datum;

    #[test]
    fn units_are_found_only_once_whole() {
        let head = test_header(b"ext");
        for cut in 0..head.len() {
            assert_eq!(
                next_unit(&head[..cut], false),
                Ok(None),
                "header cut at {cut}"
            );
        }
        assert_eq!(next_unit(&head, false), Ok(Some(Unit::Header(22))));
        let one = test_row(&[Some(&[0, 0, 0, 7]), None, Some(b"")]);
        for cut in 0..one.len() {
            assert_eq!(next_unit(&one[..cut], true), Ok(None), "row cut at {cut}");
        }
        let mut two = one.clone();
        two.extend([0xff, 0xff]);
        assert_eq!(next_unit(&two, true), Ok(Some(Unit::Row(one.len()))));
        assert_eq!(
            next_unit(&two[one.len()..], true),
            Ok(Some(Unit::Trailer(2)))
        );
    }

    #[test]
    fn bad_framing_is_refused() {
        assert!(next_unit(b"PGCOPX", false).is_err(), "signature");
        let mut oids = SIGNATURE.to_vec();
        oids.extend(HAS_OIDS.to_be_bytes());
        oids.extend(0u32.to_be_bytes());
        assert_eq!(
            next_unit(&oids, false),
            Err("the binary COPY rows carry OIDs")
        );
        assert!(
            next_unit(&(-2i16).to_be_bytes(), true).is_err(),
            "field count"
        );
        let mut negative = 1i16.to_be_bytes().to_vec();
        negative.extend((-5i32).to_be_bytes());
        assert!(next_unit(&negative, true).is_err(), "field length");
    }

    #[test]
    fn a_row_is_binary_values_borrowed_from_it() {
        let bytes = Bytes::from(test_row(&[Some(&[0, 0, 0, 7]), None, Some(b"ann")]));
        let tuple = parse_row(bytes.clone(), 3).expect("a framed row");
        assert_eq!(
            tuple.to_vec(),
            vec![
                Datum::Binary(&[0, 0, 0, 7]),
                Datum::Null,
                Datum::Binary(b"ann")
            ]
        );
        let Some(Datum::Binary(ann)) = tuple.get(2) else {
            panic!("a binary value")
        };
        assert!(bytes.as_ptr_range().contains(&ann.as_ptr()), "not copied");
    }
}
