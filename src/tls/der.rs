//! The DER (X.690) a self-signed certificate needs: tag, length, content,
//! and the handful of types X.509 uses. Writing only, for values the
//! server makes itself.

/// Tags of the types used.
pub const SEQUENCE: u8 = 0x30;
pub const SET: u8 = 0x31;
pub const INTEGER: u8 = 0x02;
pub const BIT_STRING: u8 = 0x03;
pub const OCTET_STRING: u8 = 0x04;
pub const UTF8_STRING: u8 = 0x0c;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// `tag`, the length of `content`, `content`.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// A constructed value of `tag` holding `parts` in order.
pub fn nest(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    tlv(tag, &parts.concat())
}

/// `[n] EXPLICIT` around `content`.
pub fn explicit(n: u8, content: &[u8]) -> Vec<u8> {
    tlv(0xa0 | n, content)
}

/// `[n] IMPLICIT` of a primitive type.
pub fn implicit(n: u8, content: &[u8]) -> Vec<u8> {
    tlv(0x80 | n, content)
}

/// An object identifier from its arcs (the first two joined as X.690 says).
pub fn oid(arcs: &[u32]) -> Vec<u8> {
    let mut content = Vec::new();
    let first = arcs.first().copied().unwrap_or(0) * 40 + arcs.get(1).copied().unwrap_or(0);
    for &arc in std::iter::once(&first).chain(arcs.iter().skip(2)) {
        let mut groups = [0u8; 5];
        let mut n = 0;
        let mut v = arc;
        loop {
            groups[n] = (v & 0x7f) as u8;
            n += 1;
            v >>= 7;
            if v == 0 {
                break;
            }
        }
        for i in (0..n).rev() {
            content.push(groups[i] | if i > 0 { 0x80 } else { 0 });
        }
    }
    tlv(0x06, &content)
}

/// A non-negative INTEGER from big-endian bytes.
pub fn unsigned(bytes: &[u8]) -> Vec<u8> {
    let skip = bytes
        .iter()
        .take_while(|&&b| b == 0)
        .count()
        .min(bytes.len().saturating_sub(1));
    let bytes = &bytes[skip..];
    let mut content = Vec::with_capacity(bytes.len() + 1);
    if bytes.first().is_none_or(|&b| b & 0x80 != 0) {
        content.push(0);
    }
    content.extend_from_slice(bytes);
    tlv(INTEGER, &content)
}

/// A BIT STRING of whole bytes.
pub fn bits(bytes: &[u8]) -> Vec<u8> {
    nest(BIT_STRING, &[&[0], bytes])
}

/// X.509 time (RFC 5280 4.1.2.5): UTCTime through 2049, GeneralizedTime after.
pub fn time(unix_secs: u64) -> Vec<u8> {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    let (year, month, day) = crate::http::httpdate::civil_from_days(days);
    let text = format!(
        "{:02}{month:02}{day:02}{:02}{:02}{:02}Z",
        if year < 2050 { year % 100 } else { year },
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    let tag = if year < 2050 {
        UTC_TIME
    } else {
        GENERALIZED_TIME
    };
    tlv(tag, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_oids_integers_and_times_are_encoded_as_x690_says() {
        assert_eq!(tlv(0x04, &[1, 2]), [0x04, 2, 1, 2]);
        let long = tlv(0x04, &[0; 300]);
        assert_eq!(long[..4], [0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(long.len(), 304);
        // ecdsa-with-SHA256, 1.2.840.10045.4.3.2
        assert_eq!(
            oid(&[1, 2, 840, 10045, 4, 3, 2]),
            [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]
        );
        assert_eq!(unsigned(&[0x00, 0x7f]), [0x02, 1, 0x7f]);
        assert_eq!(unsigned(&[0x80]), [0x02, 2, 0x00, 0x80]);
        assert_eq!(unsigned(&[0]), [0x02, 1, 0]);
        assert_eq!(time(0), tlv(0x17, b"700101000000Z"));
        // 2050-01-01T00:00:00Z
        assert_eq!(time(2_524_608_000), tlv(0x18, b"20500101000000Z"));
    }
}
