//! `tsvector` from `tsvectorsend` back into the text `tsvectorout` prints,
//! which text mode carries as is.
//!
//! `tsvectorsend`: int32 lexeme count, then per lexeme its text and a zero
//! byte, uint16 position count and that many uint16 positions (weight in
//! the top two bits, 3 = A .. 0 = D, position in the low 14).
//! `tsvectorout`: lexemes joined by a space, each single-quoted with `'`
//! and `\` doubled, then `:` and the positions joined by `,`, each with its
//! weight letter (none for D).

use std::fmt::Write as _;

use super::{Fault, Parsed};

pub(super) fn tsvector_text(bytes: &[u8]) -> Parsed<String> {
    let bad = Fault::Malformed("malformed binary tsvector");
    let (count, mut rest) = bytes.split_first_chunk::<4>().ok_or(bad)?;
    let count = usize::try_from(i32::from_be_bytes(*count)).map_err(|_| bad)?;
    let mut out = String::with_capacity(bytes.len() * 2);
    for i in 0..count {
        let end = rest.iter().position(|b| *b == 0).ok_or(bad)?;
        let (lexeme, tail) = rest.split_at(end);
        let lexeme =
            std::str::from_utf8(lexeme).map_err(|_| Fault::Malformed("text is not valid UTF-8"))?;
        let (positions, tail) = tail
            .get(1..)
            .and_then(|t| t.split_first_chunk::<2>())
            .ok_or(bad)?;
        let positions = usize::from(u16::from_be_bytes(*positions));
        let (positions, tail) = tail.split_at_checked(positions * 2).ok_or(bad)?;
        rest = tail;
        if i > 0 {
            out.push(' ');
        }
        out.push('\'');
        for c in lexeme.chars() {
            if matches!(c, '\'' | '\\') {
                out.push(c);
            }
            out.push(c);
        }
        out.push('\'');
        for (j, position) in positions.chunks_exact(2).enumerate() {
            let position = u16::from_be_bytes([position[0], position[1]]);
            out.push(if j == 0 { ':' } else { ',' });
            let _ = write!(out, "{}", position & 0x3fff);
            match position >> 14 {
                3 => out.push('A'),
                2 => out.push('B'),
                1 => out.push('C'),
                _ => {}
            }
        }
    }
    if !rest.is_empty() {
        return Err(bad);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexemes_quoted_with_positions_and_weights() {
        // 'a''b':1,3A 'c\\':2B 'x'
        let bytes = [
            &[0, 0, 0, 3][..],
            b"a'b\0",
            &[0, 2, 0, 1, 0xC0, 3],
            b"c\\\0",
            &[0, 1, 0x80, 2],
            b"x\0",
            &[0, 0],
        ]
        .concat();
        assert_eq!(
            tsvector_text(&bytes),
            Ok("'a''b':1,3A 'c\\\\':2B 'x'".to_owned())
        );
        assert_eq!(tsvector_text(&[0, 0, 0, 0]), Ok(String::new()));
        assert!(tsvector_text(&[0, 0, 0, 1, b'a']).is_err());
        assert!(tsvector_text(&[0, 0, 0, 1, b'a', 0, 0, 1]).is_err());
    }
}
