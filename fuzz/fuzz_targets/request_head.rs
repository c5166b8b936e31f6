//! A raw request head through `request::parse`, and a chunked body after it
//! through `chunked::Decoder`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::http::chunked::Decoder;
use marmoset::http::request::{self, BodyKind};

fuzz_target!(|data: &[u8]| {
    let mut headers = request::empty_headers();
    let Ok(Some(req)) = request::parse(data, &mut headers) else {
        return;
    };
    assert!(req.head_len <= data.len(), "head_len past the input");
    assert!(req.target.starts_with(b"/"), "target not in origin form");
    let has = |name: &str| {
        req.headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case(name))
    };
    // One framing only: a length and chunked never both stand.
    match req.body {
        BodyKind::Chunked => assert!(!has("content-length"), "chunked with Content-Length"),
        BodyKind::Length(n) => {
            assert!(n > 0);
            assert!(!has("transfer-encoding"), "length with Transfer-Encoding");
        }
        BodyKind::None => assert!(!has("transfer-encoding"), "no body with Transfer-Encoding"),
    }
    if req.body == BodyKind::Chunked {
        let rest = &data[req.head_len..];
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        if let Ok(used) = decoder.feed(rest, &mut out) {
            assert!(used <= rest.len());
            assert!(out.len() <= used, "more data than input");
            assert!(decoder.is_done() || used == rest.len(), "stopped early");
        }
    }
});
