//! JSON both ways, as uhttpd converts it: request text straight into
//! blobmsg (no tree in between), and blobmsg back to JSON text the way
//! libubox's `blobmsg_format_json` writes it (no spaces, integers as
//! numbers, INT8 as true/false, doubles with six decimals; but `null`
//! for what has no JSON number, where libubox writes `inf` or `nan`).

use crate::limits::{UBUS_JSON_DEPTH, UBUS_MAX_BODY};
use crate::ubus::blob::{self, Builder, T_ARRAY, T_BOOL, T_DOUBLE, T_TABLE, T_UNSPEC, Value};
use crate::ubus::decimal;

/// Why a text is not the JSON uhttpd's parser takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParseError;

/// Parses one JSON value (surrounded by whitespace only) into `out` as a
/// blobmsg field named `name`: objects become tables, arrays arrays,
/// integers INT32 when they fit and else INT64, booleans INT8, null UNSPEC.
pub fn parse_into(text: &[u8], name: &[u8], out: &mut Builder) -> Result<(), ParseError> {
    if text.len() > UBUS_MAX_BODY {
        return Err(ParseError);
    }
    let mut p = Parser { s: text, at: 0 };
    p.value(name, out, 0)?;
    p.space();
    if p.at != text.len() {
        return Err(ParseError);
    }
    Ok(())
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Result<(), ParseError> {
        self.space();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(ParseError)
        }
    }

    fn word(&mut self, w: &[u8]) -> Result<(), ParseError> {
        if self.s.get(self.at..self.at + w.len()) == Some(w) {
            self.at += w.len();
            Ok(())
        } else {
            Err(ParseError)
        }
    }

    fn value(&mut self, name: &[u8], out: &mut Builder, depth: usize) -> Result<(), ParseError> {
        self.space();
        match self.peek().ok_or(ParseError)? {
            b'{' | b'[' if depth >= UBUS_JSON_DEPTH => Err(ParseError),
            b'{' => {
                self.at += 1;
                let open = out.open_field(T_TABLE, name);
                self.space();
                if self.peek() == Some(b'}') {
                    self.at += 1;
                } else {
                    let mut key = Vec::new();
                    loop {
                        self.eat(b'"')?;
                        key.clear();
                        self.string(&mut key)?;
                        self.eat(b':')?;
                        // A NUL ends a key as it ends any C string.
                        let end = key.iter().position(|&b| b == 0).unwrap_or(key.len());
                        self.value(&key[..end], out, depth + 1)?;
                        self.space();
                        match self.peek() {
                            Some(b',') => self.at += 1,
                            Some(b'}') => {
                                self.at += 1;
                                break;
                            }
                            _ => return Err(ParseError),
                        }
                    }
                }
                out.close(open);
                Ok(())
            }
            b'[' => {
                self.at += 1;
                let open = out.open_field(T_ARRAY, name);
                self.space();
                if self.peek() == Some(b']') {
                    self.at += 1;
                } else {
                    loop {
                        self.value(b"", out, depth + 1)?;
                        self.space();
                        match self.peek() {
                            Some(b',') => self.at += 1,
                            Some(b']') => {
                                self.at += 1;
                                break;
                            }
                            _ => return Err(ParseError),
                        }
                    }
                }
                out.close(open);
                Ok(())
            }
            b'"' => {
                self.at += 1;
                let mut s = Vec::new();
                self.string(&mut s)?;
                out.string(name, &s);
                Ok(())
            }
            b't' => {
                self.word(b"true")?;
                out.field(T_BOOL, name, &[1]);
                Ok(())
            }
            b'f' => {
                self.word(b"false")?;
                out.field(T_BOOL, name, &[0]);
                Ok(())
            }
            b'n' => {
                self.word(b"null")?;
                out.field(T_UNSPEC, name, &[]);
                Ok(())
            }
            _ => self.number(name, out),
        }
    }

    /// The rest of a string after its opening quote, unescaped into `out`.
    fn string(&mut self, out: &mut Vec<u8>) -> Result<(), ParseError> {
        loop {
            let b = self.peek().ok_or(ParseError)?;
            self.at += 1;
            match b {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = self.peek().ok_or(ParseError)?;
                    self.at += 1;
                    let c = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let mut c = self.hex4()?;
                            if (0xd800..0xdc00).contains(&c)
                                && self.s.get(self.at..self.at + 2) == Some(b"\\u")
                            {
                                let save = self.at;
                                self.at += 2;
                                let low = self.hex4()?;
                                if (0xdc00..0xe000).contains(&low) {
                                    c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
                                } else {
                                    self.at = save;
                                }
                            }
                            // A lone surrogate becomes U+FFFD.
                            let ch = char::from_u32(c).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                            continue;
                        }
                        _ => return Err(ParseError),
                    };
                    out.push(c);
                }
                0..=0x1f => return Err(ParseError),
                _ => out.push(b),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let h = self.s.get(self.at..self.at + 4).ok_or(ParseError)?;
        let h = std::str::from_utf8(h).map_err(|_| ParseError)?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseError);
        }
        self.at += 4;
        u32::from_str_radix(h, 16).map_err(|_| ParseError)
    }

    fn number(&mut self, name: &[u8], out: &mut Builder) -> Result<(), ParseError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        self.digits();
        let int_len = self.at - int_start;
        // No leading zeros, at least one digit (RFC 8259).
        if int_len == 0 || (int_len > 1 && self.s[int_start] == b'0') {
            return Err(ParseError);
        }
        let mut fraction = false;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(ParseError);
            }
            fraction = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(ParseError);
            }
            fraction = true;
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).map_err(|_| ParseError)?;
        if fraction {
            let d = decimal::to_f64(text.as_bytes());
            out.field(T_DOUBLE, name, &d.to_bits().to_be_bytes());
        } else {
            // Beyond 64 bits json-c keeps the nearest end of the range.
            let v = text.parse::<i64>().unwrap_or(if text.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            });
            out.int(name, v);
        }
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }
}

/// Writes a double as printf's `%lf`: the exact value rounded to six
/// decimals, ties to even (core's float formatting costs 8 KiB of flash).
/// What has no JSON number, infinities and NaN (printf's `inf` and `nan`),
/// is `null`, as JavaScript's `JSON.stringify` writes it.
fn write_fixed6(out: &mut Vec<u8>, d: f64) {
    if !d.is_finite() {
        return out.extend_from_slice(b"null");
    }
    if d.is_sign_negative() {
        out.push(b'-');
    }
    let bits = d.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (m, e) = match exp {
        0 => (fraction, -1074),
        _ => (fraction | 1 << 52, exp - 1075),
    };
    if e >= 0 {
        // m * 2^e in base 10^9 limbs, least significant first.
        let mut limbs = vec![
            (m % 1_000_000_000) as u32,
            (m / 1_000_000_000 % 1_000_000_000) as u32,
            (m / 1_000_000_000_000_000_000) as u32,
        ];
        for _ in 0..e {
            let mut carry = 0;
            for l in limbs.iter_mut() {
                let v = *l * 2 + carry;
                carry = v / 1_000_000_000;
                *l = v % 1_000_000_000;
            }
            if carry > 0 {
                limbs.push(carry);
            }
        }
        while limbs.len() > 1 && limbs.last() == Some(&0) {
            limbs.pop();
        }
        let mut rest = limbs.iter().rev();
        if let Some(top) = rest.next() {
            out.extend_from_slice(top.to_string().as_bytes());
        }
        for l in rest {
            let s = l.to_string();
            out.resize(out.len() + 9 - s.len(), b'0');
            out.extend_from_slice(s.as_bytes());
        }
        return out.extend_from_slice(b".000000");
    }
    let k = e.unsigned_abs();
    let (mut int, mut frac) = (0u64, 0u64);
    if k < 128 {
        let m = u128::from(m);
        int = (m >> k) as u64;
        let num = (m - (u128::from(int) << k)) * 1_000_000;
        frac = (num >> k) as u64;
        let r = num - (u128::from(frac) << k);
        let half = 1u128 << (k - 1);
        if r > half || (r == half && frac & 1 == 1) {
            frac += 1;
        }
        if frac == 1_000_000 {
            frac = 0;
            int += 1;
        }
    }
    out.extend_from_slice(int.to_string().as_bytes());
    out.push(b'.');
    let s = frac.to_string();
    out.resize(out.len() + 6 - s.len(), b'0');
    out.extend_from_slice(s.as_bytes());
}

/// Writes `s` as a JSON string the way libubox escapes it: `"`, `\`,
/// `\b \n \t \r`, other control bytes as `\u00XX`; everything else as is.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            8 => out.extend_from_slice(b"\\b"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Writes a blobmsg value as JSON. Nesting deeper than the bound is
/// written as `null` (bus replies are bounded in size, not in depth).
pub fn write_value(out: &mut Vec<u8>, v: Value<'_>, depth: usize) {
    match v {
        Value::Unspec => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::Int16(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Int32(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Int64(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Double(d) => write_fixed6(out, d),
        Value::Str(s) => write_string(out, s),
        Value::Array(_) | Value::Table(_) if depth >= crate::limits::UBUS_REPLY_DEPTH => {
            out.extend_from_slice(b"null")
        }
        Value::Array(list) => write_list(out, list, true, depth + 1),
        Value::Table(list) => write_list(out, list, false, depth + 1),
    }
}

/// Writes a list of fields as a JSON array or object. As libubox does, an
/// object member with an empty name is written without one.
pub fn write_list(out: &mut Vec<u8>, list: &[u8], array: bool, depth: usize) {
    out.push(if array { b'[' } else { b'{' });
    let mut first = true;
    for f in blob::fields(list) {
        if !first {
            out.push(b',');
        }
        first = false;
        // A name ends at its first NUL, as libubox reads it.
        let name = f.name.split(|&b| b == 0).next().unwrap_or_default();
        if !array && !name.is_empty() {
            write_string(out, name);
            out.push(b':');
        }
        write_value(out, f.value, depth);
    }
    out.push(if array { b']' } else { b'}' });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(text: &str) -> Result<String, ParseError> {
        let mut b = Builder::default();
        parse_into(text.as_bytes(), b"", &mut b)?;
        let f = blob::fields(&b.buf).next().expect("one field");
        let mut out = Vec::new();
        write_value(&mut out, f.value, 0);
        Ok(String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn values_come_back_as_libubox_writes_them() {
        assert_eq!(
            round(r#" {"a": [1, -2, true, false, null, "x\"\u00e9\n"], "b": {} } "#).unwrap(),
            "{\"a\":[1,-2,true,false,null,\"x\\\"\u{e9}\\n\"],\"b\":{}}"
        );
        assert_eq!(round("1.5").unwrap(), "1.500000");
        assert_eq!(round("1e2").unwrap(), "100.000000");
        assert_eq!(round("4294967296").unwrap(), "4294967296");
        assert_eq!(round("99999999999999999999").unwrap(), i64::MAX.to_string());
        assert_eq!(round(r#""\u0001\f""#).unwrap(), r#""\u0001\u000c""#);
        assert_eq!(round(r#""\ud83d\ude00""#).unwrap(), "\"\u{1f600}\"");
    }

    #[test]
    fn doubles_are_written_as_printf_does() {
        let max = "179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368.000000";
        let cases: [(f64, &str); 16] = [
            (0.0, "0.000000"),
            (-0.0, "-0.000000"),
            (1.5, "1.500000"),
            (-1234.5678, "-1234.567800"),
            (0.1, "0.100000"),
            (2.5e-7, "0.000000"),
            (7.5e-7, "0.000001"),
            (123_456_789.0 + 1.0 / 3.0, "123456789.333333"),
            (2.0 / 3.0, "0.666667"),
            (1e22, "10000000000000000000000.000000"),
            (2f64.powi(70), "1180591620717411303424.000000"),
            (f64::MAX, max),
            (f64::INFINITY, "null"),
            (5e-324, "0.000000"),
            (f64::NEG_INFINITY, "null"),
            (f64::NAN, "null"),
        ];
        for (d, want) in cases {
            let mut out = Vec::new();
            write_fixed6(&mut out, d);
            assert_eq!(String::from_utf8(out).unwrap(), want, "{d:e}");
        }
    }

    #[test]
    fn integers_are_int32_when_they_fit_else_int64() {
        let mut b = Builder::default();
        parse_into(
            b"[2147483647, 2147483648, -2147483648, -2147483649]",
            b"",
            &mut b,
        )
        .unwrap();
        let Some(Value::Array(list)) = blob::fields(&b.buf).next().map(|f| f.value) else {
            panic!("an array")
        };
        let v: Vec<_> = blob::fields(list).map(|f| f.value).collect();
        assert_eq!(
            v,
            [
                Value::Int32(i32::MAX),
                Value::Int64(1 << 31),
                Value::Int32(i32::MIN),
                Value::Int64(-(1 << 31) - 1)
            ]
        );
    }

    #[test]
    fn bad_json_is_refused() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "01",
            "1.",
            "-",
            "tru",
            "\"a",
            "{} x",
            "\"\u{1}\"",
            "{'a':1}",
            "[1 2]",
            "\"\\x\"",
            "NaN",
        ] {
            assert_eq!(round(bad), Err(ParseError), "{bad:?}");
        }
        let deep = "[".repeat(UBUS_JSON_DEPTH + 1) + &"]".repeat(UBUS_JSON_DEPTH + 1);
        assert_eq!(round(&deep), Err(ParseError));
        let ok = "[".repeat(UBUS_JSON_DEPTH) + &"]".repeat(UBUS_JSON_DEPTH);
        assert!(round(&ok).is_ok());
    }
}
