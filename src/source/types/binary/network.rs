//! `inet`, `cidr`, `macaddr` and `macaddr8` from their send forms back into
//! the text their `*_out` functions print, which text mode carries as is.
//!
//! `network_send`: family byte (2 IPv4, 3 IPv6, `PGSQL_AF_INET(6)`), prefix
//! bits, an is-cidr byte, the address length, then the address bytes.
//! `network_out` prints it with `pg_inet_net_ntop` (all four IPv4 octets;
//! IPv6 as 16-bit hex words with the first longest run of at least two zero
//! words as `::`, and an IPv4 tail for `::a.b.c.d` and `::ffff:a.b.c.d`),
//! then `/bits` unless the prefix is the whole address, and for `cidr`
//! always. `macaddr_send` / `macaddr8_send` send the 6 / 8 bytes, printed as
//! lowercase hex pairs joined by `:`.

use std::fmt::Write as _;

use super::{Fault, Parsed};

const PGSQL_AF_INET: u8 = 2;
const PGSQL_AF_INET6: u8 = 3;

/// The text `network_out` prints for these `network_send` bytes; `cidr`
/// says which of the two types the column is (the byte must agree).
pub(super) fn inet_text(bytes: &[u8], cidr: bool) -> Parsed<String> {
    let bad = Fault::Malformed("malformed binary inet/cidr");
    let (&[family, bits, is_cidr, length], address) = bytes.split_first_chunk::<4>().ok_or(bad)?;
    if (is_cidr != 0) != cidr || usize::from(length) != address.len() {
        return Err(bad);
    }
    let (mut out, whole) = match (family, address) {
        (PGSQL_AF_INET, [a, b, c, d]) if bits <= 32 => (format!("{a}.{b}.{c}.{d}"), 32),
        (PGSQL_AF_INET6, address) if bits <= 128 => {
            let address: [u8; 16] = address.try_into().map_err(|_| bad)?;
            (ipv6_text(&address), 128)
        }
        _ => return Err(bad),
    };
    if bits != whole || cidr {
        let _ = write!(out, "/{bits}");
    }
    Ok(out)
}

/// An IPv6 address as `inet_net_ntop_ipv6` prints it.
fn ipv6_text(address: &[u8; 16]) -> String {
    let words: Vec<u16> = address
        .chunks_exact(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    // The first longest run of zero words, if at least two long.
    let (mut best, mut run): ((usize, usize), Option<(usize, usize)>) = ((0, 0), None);
    for (i, word) in words.iter().enumerate() {
        run = match (word, run) {
            (0, None) => Some((i, 1)),
            (0, Some((start, len))) => Some((start, len + 1)),
            (_, _) => None,
        };
        if let Some((start, len)) = run {
            if len > best.1 {
                best = (start, len);
            }
        }
    }
    let (base, len) = if best.1 >= 2 { best } else { (usize::MAX, 0) };
    let mut out = String::with_capacity(41);
    for (i, word) in words.iter().enumerate() {
        if (base..base + len).contains(&i) {
            if i == base {
                out.push(':');
            }
            continue;
        }
        if i != 0 {
            out.push(':');
        }
        let ipv4_tail =
            i == 6 && base == 0 && (len == 6 || (len == 5 && words.get(5) == Some(&0xffff)));
        if ipv4_tail {
            let [.., a, b, c, d] = *address;
            let _ = write!(out, "{a}.{b}.{c}.{d}");
            break;
        }
        let _ = write!(out, "{word:x}");
    }
    if len > 0 && base + len == words.len() {
        out.push(':');
    }
    out
}

/// `macaddr_out` / `macaddr8_out`: lowercase hex pairs joined by `:`.
pub(super) fn mac_text(bytes: &[u8], length: usize) -> Parsed<String> {
    if bytes.len() != length {
        return Err(Fault::Malformed(
            "unexpected length for the type's binary form",
        ));
    }
    let mut out = String::with_capacity(length * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        let _ = write!(out, "{b:02x}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(text: &str) -> [u8; 16] {
        text.parse::<std::net::Ipv6Addr>()
            .expect("a test address")
            .octets()
    }

    #[test]
    fn ipv6_is_printed_as_inet_net_ntop_does() {
        for (address, expected) in [
            ("::", "::"),
            ("::1", "::1"),
            ("::2", "::2"),
            ("1::", "1::"),
            ("2001:db8::ff00:42:8329", "2001:db8::ff00:42:8329"),
            ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"),
            ("::1.2.3.4", "::1.2.3.4"),
            ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
            ("::fffe:102:304", "::fffe:102:304"),
            ("0:0:1::1.2.3.4", "0:0:1::102:304"),
        ] {
            assert_eq!(ipv6_text(&v6(address)), expected, "{address}");
        }
    }

    #[test]
    fn prefixes_follow_network_out() {
        let v4 = |bits, cidr: bool| [vec![2, bits, u8::from(cidr), 4], vec![10, 1, 0, 0]].concat();
        assert_eq!(inet_text(&v4(32, false), false), Ok("10.1.0.0".to_owned()));
        assert_eq!(
            inet_text(&v4(16, false), false),
            Ok("10.1.0.0/16".to_owned())
        );
        assert_eq!(inet_text(&v4(32, true), true), Ok("10.1.0.0/32".to_owned()));
        assert_eq!(inet_text(&v4(16, true), true), Ok("10.1.0.0/16".to_owned()));
        let six = [vec![3, 128, 0, 16], v6("::1").to_vec()].concat();
        assert_eq!(inet_text(&six, false), Ok("::1".to_owned()));
        assert!(inet_text(&v4(33, false), false).is_err());
        assert!(
            inet_text(&v4(16, true), false).is_err(),
            "a cidr is not an inet"
        );
        assert!(inet_text(&[2, 32, 0, 4, 1], false).is_err());
    }

    #[test]
    fn mac_addresses() {
        assert_eq!(
            mac_text(&[8, 0, 0x2b, 1, 2, 3], 6),
            Ok("08:00:2b:01:02:03".to_owned())
        );
        assert!(mac_text(&[8, 0, 0x2b, 1, 2, 3], 8).is_err());
    }
}
