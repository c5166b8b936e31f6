//! The ubus wire format without I/O: the 8-byte message header, blob
//! attributes and blobmsg's named, typed values. Integers are big-endian
//! and every attribute is padded to 4 bytes. Reading takes untrusted bytes:
//! every length is checked and a malformed attribute ends the list.

use crate::limits::UBUS_MAX_MESSAGE;

/// Message types (`ubusmsg.h`).
pub const HELLO: u8 = 0;
pub const STATUS: u8 = 1;
pub const DATA: u8 = 2;
pub const LOOKUP: u8 = 4;
pub const INVOKE: u8 = 5;
pub const ADD_OBJECT: u8 = 6;
pub const REMOVE_OBJECT: u8 = 7;
pub const SUBSCRIBE: u8 = 8;
pub const UNSUBSCRIBE: u8 = 9;

/// Message attributes.
pub const A_STATUS: u8 = 1;
pub const A_OBJPATH: u8 = 2;
pub const A_OBJID: u8 = 3;
pub const A_METHOD: u8 = 4;
pub const A_SIGNATURE: u8 = 6;
pub const A_DATA: u8 = 7;
pub const A_TARGET: u8 = 8;
pub const A_NO_REPLY: u8 = 10;

/// blobmsg value types.
pub const T_UNSPEC: u8 = 0;
pub const T_ARRAY: u8 = 1;
pub const T_TABLE: u8 = 2;
pub const T_STRING: u8 = 3;
pub const T_INT64: u8 = 4;
pub const T_INT32: u8 = 5;
pub const T_INT16: u8 = 6;
pub const T_BOOL: u8 = 7;
pub const T_DOUBLE: u8 = 8;

/// ubus status codes the endpoint names.
pub const S_NOT_FOUND: i32 = 4;
pub const S_PERMISSION_DENIED: i32 = 6;

/// The header before every message.
pub const HEADER: usize = 8;
const EXTENDED: u32 = 1 << 31;
const LEN_MASK: u32 = 0x00ff_ffff;

fn pad(n: usize) -> usize {
    (n + 3) & !3
}

fn be32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

/// A message's header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub kind: u8,
    pub seq: u16,
    pub peer: u32,
}

/// Why bytes from the bus are not a message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Malformed {
    /// Its length is under a blob header or over the message limit.
    Length,
}

/// The length of the first message in `buf` (header and attributes), once
/// its first 12 bytes are there; `Ok(None)` until then.
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, Malformed> {
    let Some(word) = buf.get(HEADER..).and_then(be32) else {
        return Ok(None);
    };
    let raw = (word & LEN_MASK) as usize;
    // ubusd's check: the attributes, padded, after the header.
    if raw < 4 || pad(raw) > UBUS_MAX_MESSAGE {
        return Err(Malformed::Length);
    }
    Ok(Some(HEADER + raw))
}

/// A whole message (`message_len` bytes): its header and its attributes.
pub fn split_message(msg: &[u8]) -> Option<(Header, &[u8])> {
    let h = msg.get(..HEADER)?;
    let raw = (be32(msg.get(HEADER..)?)? & LEN_MASK) as usize;
    let attrs = msg.get(HEADER + 4..HEADER + raw.max(4))?;
    let header = Header {
        kind: h[1],
        seq: u16::from_be_bytes([h[2], h[3]]),
        peer: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
    };
    Some((header, attrs))
}

/// One blob attribute: its id, whether it is a blobmsg one, its payload.
#[derive(Debug, Clone, Copy)]
pub struct Attr<'a> {
    pub id: u8,
    pub extended: bool,
    pub data: &'a [u8],
}

/// The attributes of a list; a malformed one ends it.
#[derive(Clone)]
pub struct Attrs<'a>(&'a [u8]);

pub fn attrs(list: &[u8]) -> Attrs<'_> {
    Attrs(list)
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Attr<'a>;

    fn next(&mut self) -> Option<Attr<'a>> {
        let word = be32(self.0)?;
        let len = (word & LEN_MASK) as usize;
        let (Some(data), true) = (self.0.get(4..len), len >= 4) else {
            self.0 = &[];
            return None;
        };
        self.0 = self.0.get(pad(len)..).unwrap_or_default();
        Some(Attr {
            id: ((word >> 24) & 0x7f) as u8,
            extended: word & EXTENDED != 0,
            data,
        })
    }
}

/// Whether every attribute of `list` is well formed (nothing cut short).
pub fn is_whole(list: &[u8]) -> bool {
    let mut rest = list;
    while !rest.is_empty() {
        let Some(word) = be32(rest) else { return false };
        let len = (word & LEN_MASK) as usize;
        if len < 4 || len > rest.len() {
            return false;
        }
        rest = rest.get(pad(len)..).unwrap_or_default();
    }
    true
}

/// Whether `list` is well formed to the bottom: whole attributes, each a
/// blobmsg field as libubox checks them, nested ones too (to `depth`
/// levels). A reply that is not is refused, never passed on in part.
pub fn is_valid_list(list: &[u8], depth: usize) -> bool {
    is_whole(list)
        && attrs(list).all(|a| match field(a).map(|f| f.value) {
            None => false,
            Some(Value::Array(l) | Value::Table(l)) => depth > 0 && is_valid_list(l, depth - 1),
            Some(_) => true,
        })
}

/// A blobmsg value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Unspec,
    /// The list of its elements (attributes).
    Array(&'a [u8]),
    Table(&'a [u8]),
    /// Up to its first NUL, as libubox reads it.
    Str(&'a [u8]),
    Int64(i64),
    Int32(i32),
    Int16(i16),
    Bool(bool),
    Double(f64),
}

/// A named blobmsg value.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: Value<'a>,
}

/// `attr` as a blobmsg field; `None` when it is not a well-formed one
/// (the checks of libubox's `blobmsg_check_attr`).
pub fn field(attr: Attr<'_>) -> Option<Field<'_>> {
    if !attr.extended {
        return None;
    }
    let d = attr.data;
    let namelen = u16::from_be_bytes([*d.first()?, *d.get(1)?]) as usize;
    let hdr = pad(2 + namelen + 1);
    if d.get(2 + namelen) != Some(&0) || d.len() < hdr {
        return None;
    }
    let name = &d[2..2 + namelen];
    let v = &d[hdr..];
    let value = match attr.id {
        T_UNSPEC => Value::Unspec,
        T_ARRAY => Value::Array(v),
        T_TABLE => Value::Table(v),
        T_STRING => {
            if v.last() != Some(&0) {
                return None;
            }
            let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
            Value::Str(&v[..end])
        }
        T_INT64 => Value::Int64(i64::from_be_bytes(v.try_into().ok()?)),
        T_INT32 => Value::Int32(i32::from_be_bytes(v.try_into().ok()?)),
        T_INT16 => Value::Int16(i16::from_be_bytes(v.try_into().ok()?)),
        T_BOOL => match v {
            [b] => Value::Bool(*b != 0),
            _ => return None,
        },
        T_DOUBLE => Value::Double(f64::from_bits(u64::from_be_bytes(
            v.get(..8)?.try_into().ok()?,
        ))),
        _ => return None,
    };
    Some(Field { name, value })
}

/// The well-formed fields of a blobmsg list.
pub fn fields(list: &[u8]) -> impl Iterator<Item = Field<'_>> {
    attrs(list).filter_map(field)
}

/// The last field named `name` in a table (blobmsg_parse keeps the last).
pub fn get<'a>(table: &'a [u8], name: &str) -> Option<Value<'a>> {
    fields(table)
        .filter(|f| f.name == name.as_bytes())
        .last()
        .map(|f| f.value)
}

/// A message's attributes as the bus client reads them (the last of each
/// kind wins; one of the wrong size is ignored, as ubusd's policy does).
#[derive(Debug, Default, Clone, Copy)]
pub struct Message<'a> {
    pub status: Option<i32>,
    pub objpath: Option<&'a [u8]>,
    pub objid: Option<u32>,
    pub method: Option<&'a [u8]>,
    pub signature: Option<&'a [u8]>,
    pub data: Option<&'a [u8]>,
    pub target: Option<u32>,
    pub no_reply: bool,
}

fn string(d: &[u8]) -> Option<&[u8]> {
    let end = d.iter().position(|&b| b == 0)?;
    Some(&d[..end])
}

impl<'a> Message<'a> {
    pub fn parse(list: &'a [u8]) -> Message<'a> {
        let mut m = Message::default();
        for a in attrs(list).filter(|a| !a.extended) {
            let int = a.data.try_into().ok().map(u32::from_be_bytes);
            match a.id {
                A_STATUS => m.status = int.map(|v| v as i32).or(m.status),
                A_OBJID => m.objid = int.or(m.objid),
                A_TARGET => m.target = int.or(m.target),
                A_OBJPATH => m.objpath = string(a.data).or(m.objpath),
                A_METHOD => m.method = string(a.data).or(m.method),
                A_SIGNATURE => m.signature = Some(a.data),
                A_DATA => m.data = Some(a.data),
                A_NO_REPLY => m.no_reply = a.data.first().is_some_and(|&b| b != 0),
                _ => {}
            }
        }
        m
    }
}

/// Writes blob attributes and blobmsg fields; nested ones are opened and
/// closed, their length written when they close.
#[derive(Default)]
pub struct Builder {
    pub buf: Vec<u8>,
}

/// An attribute opened with `Builder::open*`, to close.
#[must_use]
pub struct Open(usize);

impl Builder {
    fn start(&mut self, id: u8, extended: bool, name: Option<&[u8]>) -> Open {
        let at = self.buf.len();
        let word = (u32::from(id & 0x7f) << 24) | if extended { EXTENDED } else { 0 };
        self.buf.extend_from_slice(&word.to_be_bytes());
        if let Some(name) = name {
            // Names come from JSON keys and bus replies, far below 64 KiB.
            let n = name.len().min(u16::MAX as usize);
            self.buf.extend_from_slice(&(n as u16).to_be_bytes());
            self.buf.extend_from_slice(&name[..n]);
            self.buf.push(0);
            self.align();
        }
        Open(at)
    }

    fn align(&mut self) {
        self.buf.resize(pad(self.buf.len()), 0);
    }

    /// Ends an attribute: its length (without padding) goes into its header.
    pub fn close(&mut self, open: Open) {
        let len = ((self.buf.len() - open.0) as u32).min(LEN_MASK);
        let at = open.0;
        let word = be32(&self.buf[at..]).unwrap_or(0) & !LEN_MASK;
        self.buf[at..at + 4].copy_from_slice(&(word | len).to_be_bytes());
        self.align();
    }

    /// A plain (not blobmsg) attribute holding other attributes.
    pub fn open(&mut self, id: u8) -> Open {
        self.start(id, false, None)
    }

    pub fn put_u32(&mut self, id: u8, v: u32) {
        let o = self.start(id, false, None);
        self.buf.extend_from_slice(&v.to_be_bytes());
        self.close(o);
    }

    pub fn put_str(&mut self, id: u8, s: &[u8]) {
        let o = self.start(id, false, None);
        self.buf.extend_from_slice(s);
        self.buf.push(0);
        self.close(o);
    }

    /// A blobmsg table or array, named `name` (empty in an array).
    pub fn open_field(&mut self, kind: u8, name: &[u8]) -> Open {
        self.start(kind, true, Some(name))
    }

    /// A blobmsg field with `data` as its value.
    pub fn field(&mut self, kind: u8, name: &[u8], data: &[u8]) {
        let o = self.start(kind, true, Some(name));
        self.buf.extend_from_slice(data);
        self.close(o);
    }

    pub fn string(&mut self, name: &[u8], s: &[u8]) {
        let o = self.start(T_STRING, true, Some(name));
        // A string ends at its first NUL, as blobmsg_add_string's strlen.
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        self.buf.extend_from_slice(&s[..end]);
        self.buf.push(0);
        self.close(o);
    }

    /// An integer as uhttpd adds a JSON one: INT32 when it fits, else INT64.
    pub fn int(&mut self, name: &[u8], v: i64) {
        match i32::try_from(v) {
            Ok(small) => self.field(T_INT32, name, &small.to_be_bytes()),
            Err(_) => self.field(T_INT64, name, &v.to_be_bytes()),
        }
    }

    pub fn copy(&mut self, attr_bytes: &[u8]) {
        self.buf.extend_from_slice(attr_bytes);
        self.align();
    }

    /// A whole message: header, then one attribute holding `attrs`.
    pub fn message(kind: u8, seq: u16, peer: u32, attrs: &[u8]) -> Vec<u8> {
        let mut b = Builder {
            buf: Vec::with_capacity(HEADER + 4 + attrs.len()),
        };
        b.buf.extend_from_slice(&[0, kind]);
        b.buf.extend_from_slice(&seq.to_be_bytes());
        b.buf.extend_from_slice(&peer.to_be_bytes());
        let o = b.open(0);
        b.buf.extend_from_slice(attrs);
        b.close(o);
        b.buf
    }
}

/// The raw bytes of each attribute of `list`, for copying them as they are.
pub fn raw_attrs(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = list;
    std::iter::from_fn(move || {
        let len = (be32(rest)? & LEN_MASK) as usize;
        let (Some(one), true) = (rest.get(..len), len >= 4) else {
            rest = &[];
            return None;
        };
        rest = rest.get(pad(len)..).unwrap_or_default();
        Some(one)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_message_is_laid_out_big_endian_and_padded() {
        let mut b = Builder::default();
        b.put_str(A_OBJPATH, b"session");
        let msg = Builder::message(LOOKUP, 0x0102, 0, &b.buf);
        let want: &[u8] = b"\x00\x04\x01\x02\x00\x00\x00\x00\
            \x00\x00\x00\x10\
            \x02\x00\x00\x0csession\x00";
        assert_eq!(msg, want);
        assert_eq!(message_len(&msg), Ok(Some(msg.len())));
        let (h, list) = split_message(&msg).unwrap();
        assert_eq!(
            h,
            Header {
                kind: LOOKUP,
                seq: 0x0102,
                peer: 0
            }
        );
        assert_eq!(Message::parse(list).objpath, Some(&b"session"[..]));
    }

    #[test]
    fn blobmsg_fields_have_a_name_header_and_padding() {
        let mut b = Builder::default();
        b.string(b"id", b"x");
        b.int(b"n", -2);
        b.int(b"big", 1 << 40);
        b.field(T_BOOL, b"", &[1]);
        let want: &[u8] = b"\x83\x00\x00\x0e\x00\x02id\x00\x00\x00\x00x\x00\x00\x00\
            \x85\x00\x00\x0c\x00\x01n\x00\xff\xff\xff\xfe\
            \x84\x00\x00\x14\x00\x03big\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\
            \x87\x00\x00\x09\x00\x00\x00\x00\x01\x00\x00\x00";
        assert_eq!(b.buf, want);
        let got: Vec<_> = fields(&b.buf).map(|f| (f.name.to_vec(), f.value)).collect();
        assert_eq!(got[0].1, Value::Str(b"x"));
        assert_eq!(got[1].1, Value::Int32(-2));
        assert_eq!(got[2].1, Value::Int64(1 << 40));
        assert_eq!(got[3], (vec![], Value::Bool(true)));
    }

    #[test]
    fn a_nested_table_closes_with_its_length() {
        let mut b = Builder::default();
        let t = b.open_field(T_TABLE, b"t");
        b.int(b"a", 1);
        b.close(t);
        assert_eq!(&b.buf[..4], b"\x82\x00\x00\x14");
        let Some(Value::Table(inner)) = get(&b.buf, "t") else {
            panic!("no table")
        };
        assert_eq!(get(inner, "a"), Some(Value::Int32(1)));
    }

    #[test]
    fn malformed_lengths_end_a_list_without_panicking() {
        assert!(attrs(b"\x00\x00\x00\x02").next().is_none());
        assert!(attrs(b"\x00\x00\x00\x40abcd").next().is_none());
        assert!(!is_whole(b"\x00\x00\x00\x40abcd"));
        assert!(is_whole(b"\x01\x00\x00\x05a\x00\x00\x00"));
        // A table whose member runs past it: the list is not valid.
        let mut b = Builder::default();
        let t = b.open_field(T_TABLE, b"t");
        b.int(b"a", 1);
        b.close(t);
        assert!(is_valid_list(&b.buf, 4));
        b.buf[11] = 0x40;
        assert!(is_whole(&b.buf) && !is_valid_list(&b.buf, 4));
        // A string without its NUL, an int32 of 3 bytes, a name past the end.
        assert!(
            field(
                attrs(b"\x83\x00\x00\x09\x00\x00\x00\x00a\x00\x00\x00")
                    .next()
                    .unwrap()
            )
            .is_none()
        );
        assert!(
            field(
                attrs(b"\x85\x00\x00\x0b\x00\x00\x00\x00abc\x00")
                    .next()
                    .unwrap()
            )
            .is_none()
        );
        assert!(field(attrs(b"\x85\x00\x00\x08\x00\x09\x00\x00").next().unwrap()).is_none());
        assert_eq!(
            message_len(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02"),
            Err(Malformed::Length)
        );
        assert_eq!(
            message_len(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10\x00\x01"),
            Err(Malformed::Length)
        );
        // ubusd's largest: a 1 MiB blob after the header.
        assert_eq!(
            message_len(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00"),
            Ok(Some(HEADER + (1 << 20)))
        );
        assert_eq!(message_len(b"\x00\x01\x00"), Ok(None));
    }
}
