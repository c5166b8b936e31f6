//! `answer::parse` on any backend answer head (the first byte picks HEAD
//! and upgrade): what passes has one framing, and its fields can neither
//! split a header nor carry the hop-by-hop ones on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::proxy::answer::{self, Framing};

const DROPPED: [&[u8]; 4] = [
    b"connection",
    b"content-length",
    b"transfer-encoding",
    b"keep-alive",
];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, head)) = data.split_first() else {
        return;
    };
    let Ok(Some(h)) = answer::parse(head, flags & 1 != 0, flags & 2 != 0) else {
        return;
    };
    assert!(h.head_len <= head.len());
    assert!(!(h.framing == Framing::Chunked && h.length.is_some()));
    assert!(
        !h.status_text
            .bytes()
            .any(|b| b == b'\r' || b == b'\n' || b == 0)
    );
    let mut rest = &h.fields[..];
    while !rest.is_empty() {
        assert!(rest.starts_with(b"\r\n"), "{rest:?}");
        rest = &rest[2..];
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(rest.len());
        let line = &rest[..end];
        assert!(
            !line.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0),
            "{line:?}"
        );
        let colon = line.windows(2).position(|w| w == b": ");
        let name = &line[..colon.expect("a name and a value")];
        assert!(
            !DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)),
            "{line:?}"
        );
        rest = &rest[end..];
    }
});
