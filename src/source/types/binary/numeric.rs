//! NUMERIC's binary form (`numeric_send`) back into the text `numeric_out`
//! prints, so that the text side's `decode_numeric` gives the value: the
//! same digits, the same display scale (trailing zeros kept), the same
//! special values.

use super::{Fault, Parsed};

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;
/// Decimal digits per base-10000 digit (`DEC_DIGITS`).
const DEC_DIGITS: usize = 4;

/// The text `numeric_out` prints for these `numeric_send` bytes, as
/// `get_str_from_var` builds it.
pub(super) fn to_text(bytes: &[u8]) -> Parsed<String> {
    let bad = Fault::Malformed("malformed binary numeric");
    let (header, rest) = bytes.split_first_chunk::<8>().ok_or(bad)?;
    let [n0, n1, w0, w1, s0, s1, d0, d1] = *header;
    let ndigits = usize::try_from(i16::from_be_bytes([n0, n1])).map_err(|_| bad)?;
    let weight = i64::from(i16::from_be_bytes([w0, w1]));
    let sign = u16::from_be_bytes([s0, s1]);
    let dscale = usize::from(u16::from_be_bytes([d0, d1]));
    match sign {
        NUMERIC_NAN => return Ok("NaN".to_owned()),
        NUMERIC_PINF => return Ok("Infinity".to_owned()),
        NUMERIC_NINF => return Ok("-Infinity".to_owned()),
        NUMERIC_POS | NUMERIC_NEG => {}
        _ => return Err(bad),
    }
    if rest.len() != ndigits * 2 || dscale > 0x3FFF {
        return Err(bad);
    }
    let digits: Vec<u16> = rest
        .chunks_exact(2)
        .map(|d| u16::from_be_bytes([d[0], d[1]]))
        .collect();
    if digits.iter().any(|d| *d > 9999) {
        return Err(bad);
    }
    // The base-10000 digit of weight `weight - index`, zero outside those sent.
    let digit = |index: i64| {
        usize::try_from(index)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut out = String::with_capacity(ndigits * DEC_DIGITS + dscale + 3);
    if sign == NUMERIC_NEG {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        for index in 0..=weight {
            let d = digit(index);
            if index == 0 {
                out.push_str(&d.to_string());
            } else {
                out.push_str(&format!("{d:04}"));
            }
        }
    }
    if dscale > 0 {
        out.push('.');
        let start = out.len();
        let mut index = weight + 1;
        while out.len() - start < dscale {
            out.push_str(&format!("{:04}", digit(index)));
            index += 1;
        }
        out.truncate(start + dscale);
    }
    Ok(out)
}
