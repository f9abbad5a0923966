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
    let group = |d: &[u8]| u16::from_be_bytes([d[0], d[1]]);
    if rest.chunks_exact(2).any(|d| group(d) > 9999) {
        return Err(bad);
    }
    // The base-10000 digit of weight `weight - index`, zero outside those sent.
    let digit = |index: i64| {
        usize::try_from(index)
            .ok()
            .and_then(|i| rest.get(i * 2..i * 2 + 2))
            .map_or(0, group)
    };
    let mut out = String::with_capacity(ndigits * DEC_DIGITS + dscale + 3);
    if sign == NUMERIC_NEG {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        for index in 0..=weight {
            // The first group without its leading zeros, as `numeric_out`.
            push_group(&mut out, digit(index), index == 0);
        }
    }
    if dscale > 0 {
        out.push('.');
        let start = out.len();
        let mut index = weight + 1;
        while out.len() - start < dscale {
            push_group(&mut out, digit(index), false);
            index += 1;
        }
        out.truncate(start + dscale);
    }
    Ok(out)
}

/// Appends a base-10000 digit as four decimal digits, or without leading
/// zeros when `trim` (at least one digit). No formatting machinery: this
/// runs once per group of every NUMERIC value.
fn push_group(out: &mut String, group: u16, trim: bool) {
    let digits = [group / 1000, group / 100 % 10, group / 10 % 10, group % 10];
    let skip = if trim {
        digits.iter().take(3).take_while(|d| **d == 0).count()
    } else {
        0
    };
    for d in digits.iter().skip(skip) {
        out.push(char::from(b'0' + *d as u8));
    }
}

/// The count of `10^-scale` a finite NUMERIC's `numeric_send` bytes hold,
/// straight from its base-10000 digits, when that is exact and fits an
/// `i128`: what the text path computes from [`to_text`]'s digits. `None`
/// for everything else (special values, a nonzero digit beyond `scale`,
/// more than 38 digits, malformed bytes), which the text path decides.
pub(super) fn unscaled(bytes: &[u8], scale: u32) -> Option<(bool, i128)> {
    let (header, rest) = bytes.split_first_chunk::<8>()?;
    let [n0, n1, w0, w1, s0, s1, _, _] = *header;
    let ndigits = usize::try_from(i16::from_be_bytes([n0, n1])).ok()?;
    let weight = i64::from(i16::from_be_bytes([w0, w1]));
    let negative = match u16::from_be_bytes([s0, s1]) {
        NUMERIC_POS => false,
        NUMERIC_NEG => true,
        _ => return None,
    };
    if rest.len() != ndigits * 2 {
        return None;
    }
    let mut groups: i128 = 0;
    for d in rest.chunks_exact(2) {
        let group = u16::from_be_bytes([d[0], d[1]]);
        if group > 9999 {
            return None;
        }
        groups = groups.checked_mul(10_000)?.checked_add(i128::from(group))?;
    }
    // The last digit sent has weight `weight - ndigits + 1` (in groups).
    let exponent = 4 * (weight - ndigits as i64 + 1) + i64::from(scale);
    let power = |e: i64| u32::try_from(e).ok().and_then(|e| 10i128.checked_pow(e));
    let value = match exponent {
        _ if groups == 0 => 0,
        e if e >= 0 => groups.checked_mul(power(e)?)?,
        e => {
            let divisor = power(-e)?;
            (groups % divisor == 0).then_some(groups / divisor)?
        }
    };
    Some((negative, value))
}
